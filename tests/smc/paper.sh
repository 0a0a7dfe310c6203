#!/usr/bin/env bash
# Every model line the Mortise paper prints (tests/smc/paper-lines.txt, copied from the seed with
# its line breaks) is accepted by smc; each complete one builds into a drop-in and a prefixed
# library that then pass the API and stress tests (tests/api/api.sh, tests/stress/stress.sh) as
# instance smc_<name>; the socketless latency library is linked into a program that uses it.
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/smc/paper.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Checks every entry of tests/smc/paper-lines.txt with smc (check --syntax, --fragment or a full
check, as its header says); builds each full line as $BUILD/libsmc_<name>.so and
$BUILD/libsm_smc_<name>.a and runs tests/api/api.sh and tests/stress/stress.sh on it; builds
the socketless wacet_stat line as a static library and links a program against it.
Prints `ok smc-paper: <case>` or `not ok smc-paper: <case>: <why>`; the API and stress cases
keep their own names (api: smc_<name>/..., stress: smc_<name>/...).

Environment: BUILD (default build: $BUILD/smc and the test programs), SM_ROOT, CC,
SMC_PAPER_TESTS=0 to check and build only (no API and stress runs).
USAGE
            exit 0 ;;
        -*) echo "tests/smc/paper.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok smc-paper: setup: cannot cd to the repository root"; exit 1; }
root="$PWD"
case "${BUILD:-build}" in /*) build="$BUILD" ;; *) build="$root/${BUILD:-build}" ;; esac
smc="$build/smc"
work="$build/smc-paper"
mkdir -p "$work"
ok() { echo "ok smc-paper: $1"; }
fail() { echo "not ok smc-paper: $1: $2"; }
[ -x "$smc" ] || { fail setup "$smc missing (not built)"; exit 1; }
data=tests/smc/paper-lines.txt

# The entries: a header `#: N WHERE | MODE | NAME`, then the line up to a blank line.
n=0
built=()
while IFS= read -r header; do
    n=$((n + 1))
    rest="${header#\#: }"
    num="${rest%% *}"
    mode="$(echo "$rest" | awk -F' [|] ' '{print $2}')"
    name="$(echo "$rest" | awk -F' [|] ' '{print $3}')"
    entry="$work/line$num.model"
    awk -v h="$header" 'found && /^$/ { exit } found { print } $0 == h { found = 1 }' "$data" >"$entry"
    [ -s "$entry" ] || { fail "line$num/read" "no line under its header"; continue; }
    case "$mode" in
        syntax) flags=(--syntax) ;;
        fragment) flags=(--fragment) ;;
        full) flags=() ;;
        *) fail "line$num/read" "unknown mode '$mode'"; continue ;;
    esac
    if out=$("$smc" check "${flags[@]}" "$entry" 2>&1); then
        ok "line$num/check${flags[*]:+ ${flags[*]}}"
    else
        fail "line$num/check" "$(echo "$out" | head -3 | tr '\n' ' ')"
        continue
    fi
    # The paper's escaped underscores and wrapped lines must mean what the plain line means.
    plain="$(tr '\n' ' ' <"$entry" | sed 's/\\_/_/g')"
    if [ "$mode" != syntax ]; then
        a=$("$smc" emit "${flags[@]}" --name x "$entry" 2>&1 | grep -v '^ \*') b=$("$smc" emit "${flags[@]}" --name x "$plain" 2>&1 | grep -v '^ \*')
        [ "$a" = "$b" ] && ok "line$num/same_as_plain_text" || fail "line$num/same_as_plain_text" "emits differently from the line on one line without escapes"
    fi
    [ "$name" = - ] && continue
    if [ "$mode" = full ]; then
        inst="smc_$name"
        if out=$("$smc" build -o "$build/lib$inst.so" "$entry" 2>&1) && [ -f "$build/lib$inst.so" ]; then
            ok "line$num/build_so"
        else
            fail "line$num/build_so" "$(echo "$out" | grep -m3 -E 'error|smc' | tr '\n' ' ')"
            continue
        fi
        if out=$("$smc" build --prefix "sm_${inst}_" -o "$build/libsm_$inst.a" "$entry" 2>&1) &&
            nm "$build/libsm_$inst.a" 2>/dev/null | grep -q " T sm_${inst}_malloc$"; then
            ok "line$num/build_prefixed"
        else
            fail "line$num/build_prefixed" "$(echo "$out" | grep -m3 -E 'error|smc' | tr '\n' ' ')"
            continue
        fi
        # A drop-in: the library's malloc is the process's.
        if nm -D --defined-only "$build/lib$inst.so" | grep -q ' T malloc$' &&
            [ "$(LD_PRELOAD="$build/lib$inst.so" sh -c 'echo hello')" = hello ]; then
            ok "line$num/preload_runs_sh"
        else
            fail "line$num/preload_runs_sh" "lib$inst.so exports no malloc, or sh fails under it"
        fi
        built+=("$inst")
    else
        # A socketless fragment: a static library with the prefixed API, linked into a program.
        lib="$work/lib$name.a"
        if out=$("$smc" build --fragment -o "$lib" "$entry" 2>&1) && nm "$lib" | grep -q " T ${name}_malloc$"; then
            ok "line$num/build_static"
        else
            fail "line$num/build_static" "$(echo "$out" | grep -m3 -E 'error|smc' | tr '\n' ' ')"
            continue
        fi
        cat >"$work/use_$name.c" <<C
#include <stdio.h>
#include <string.h>
#include <stddef.h>
void *${name}_malloc(size_t);
void ${name}_free(void *);
int main(void)
{
    unsigned bad = 0;
    for (int i = 0; i < 20000; i++) {
        unsigned char *p = ${name}_malloc((size_t)(i % 500) + 1);
        if (!p) return 2;
        memset(p, i & 0xff, (size_t)(i % 500) + 1);
        for (int k = 0; k <= i % 500; k++) bad += p[k] != (unsigned char)(i & 0xff);
        ${name}_free(p);
    }
    printf("bad=%u\n", bad);
    return bad != 0;
}
C
        if ${CC:-cc} -o "$work/use_$name" "$work/use_$name.c" "$lib" -lpthread -ldl >"$work/use_$name.log" 2>&1 &&
            out=$("$work/use_$name" 2>&1) && echo "$out" | grep -q '^bad=0$'; then
            ok "line$num/linked_program"
        else
            fail "line$num/linked_program" "$(tail -3 "$work/use_$name.log" 2>/dev/null | tr '\n' ' ')$(echo "${out:-}" | head -3 | tr '\n' ' ')"
        fi
        # wcet_stat reports the latency percentiles it measured when the program exits.
        if echo "$out" | grep -qiE 'p99'; then
            ok "line$num/latency_report"
        else
            fail "line$num/latency_report" "no percentile report at exit: $(echo "$out" | head -2 | tr '\n' ' ')"
        fi
    fi
done < <(grep '^#: ' "$data")
[ "$n" -ge 8 ] && ok "entries/count" || fail "entries/count" "$n entries in $data, the paper prints 8"

# Character for character: where the seed is at hand (the developers' checkout), every entry
# appears in it verbatim, line breaks included.
seed=$(ls "$root"/../shared/seeds/002_*.txt 2>/dev/null | head -1)
if [ -n "$seed" ] && command -v python3 >/dev/null; then
    missing=0
    for f in "$work"/line*.model; do
        python3 - "$seed" "$f" <<'PY' || missing=$((missing + 1))
import sys
seed = open(sys.argv[1], encoding="utf-8").read()
line = open(sys.argv[2], encoding="utf-8").read().rstrip("\n")
sys.exit(0 if line in seed else 1)
PY
    done
    [ "$missing" -eq 0 ] && ok "entries/verbatim_in_seed" || fail "entries/verbatim_in_seed" "$missing entries not found verbatim in the seed"
else
    echo "skip smc-paper: entries/verbatim_in_seed: the paper's seed (or python3) is not on this machine"
fi

if [ "${SMC_PAPER_TESTS:-1}" != 0 ] && [ "${#built[@]}" -gt 0 ]; then
    INSTANCES="${built[*]}" BUILD="$build" tests/api/api.sh
    INSTANCES="${built[*]}" BUILD="$build" tests/stress/stress.sh
fi
exit 0
