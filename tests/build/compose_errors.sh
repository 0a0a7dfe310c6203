#!/usr/bin/env bash
# Compositions are checked at compile time (core/capability.h): each known-bad composition in
# tests/build/compose/ must fail to build with exactly the message that names the layer, its next
# layer and what is missing; each good one must build warning-free. One line per case:
#   ok compose: <compiler>/<case> | not ok compose: <compiler>/<case>: <why>
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/build/compose_errors.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Compiles the compositions in tests/build/compose/ with gcc and clang: each known-bad one must
fail with the message naming the layer and what its next layer lacks, each good one must build.
Prints `ok compose: <cc>/<case>` or `not ok compose: <cc>/<case>: <why>`.

Environment: BUILD (default build; objects in $BUILD/compose), SM_ROOT.
USAGE
            exit 0 ;;
        -*) echo "tests/build/compose_errors.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok compose: setup: cannot cd to the repository root"; exit 1; }
out="${BUILD:-build}/compose"
mkdir -p "$out"

# case | extra flags | the error message expected ('' = must build). -Wno-error: the build's default
# flags (no -Werror), under which a bad composition must still be an error (core/layer.h's pragma).
cases=$(cat <<'LIST'
tc_over_tlsf||cache: its next layer heap lacks capability BATCH (refills and releases move objects of one class in batches)
tc_over_tlsf||cache: its next layer heap lacks capability OWNER (an unsized free finds its list with owner_slot)
tc_sizeclass_mismatch||cache: its sizeclass policy differs from that of its next layer slab (give both the same SM_SIZECLASS)
decay_grow_over_brk||large: its next layer os lacks capability MAPPING (remap, split and join, for SM_OPT_GROW 1)
decay_grow_over_brk|-DGROW=0|
tc_over_passthrough||
policy_not_included|-Wno-error|unknown type name
policy_not_included|-DINCLUDED=1|
tc_over_tlsf_spin|-Wno-error|thread_cache: policy slot 'sizeclass' is empty
tc_over_tlsf_spin|-Wno-error -DWITH_SIZECLASS=1|cache: its next layer heap lacks capability BATCH
unknown_names|-Wno-error|
unknown_names|-Wno-error -DBAD_NEXT=1|implicit declaration of function
unknown_names|-Wno-error -DBAD_POLICY=1|unknown type name
LIST
)

for cc in gcc clang; do
    command -v "$cc" >/dev/null || { echo "skip compose: $cc: not installed"; continue; }
    while IFS='|' read -r name flags want; do
        [ -n "$name" ] || continue
        label="$cc/$name${flags:+ $flags}${want:+: ${want%% (*}}"
        log="$out/$cc-$name${flags//[^A-Za-z0-9]/_}.log"
        # shellcheck disable=SC2086
        if $cc -std=c11 -O1 -Wall -Wextra -Werror -D_GNU_SOURCE -Iinclude $flags -c "tests/build/compose/$name.c" \
            -o "$out/$name.o" >"$log" 2>&1; then
            if [ -z "$want" ]; then echo "ok compose: $label"; else echo "not ok compose: $label: built, expected the error"; fi
        elif [ -z "$want" ]; then
            echo "not ok compose: $label: $(grep -m1 'error' "$log")"
        elif grep -qF -- "$want" "$log"; then
            echo "ok compose: $label"
        else
            echo "not ok compose: $label: expected '$want', got: $(grep -m1 'error' "$log")"
        fi
    done <<<"$cases"
done
