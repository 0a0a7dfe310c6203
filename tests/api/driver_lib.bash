# Shared by the driver scripts tests/api/api.sh, tests/stress/stress.sh, tests/programs/*.sh
# (sourced, not run: no .sh suffix, so tests/run.sh does not pick it up).
#
# Environment (from tests/run.sh): BUILD, INSTANCES, SM_ROOT. Output: one line per case,
#   ok <ns>: <inst>/<mode>/<case> | not ok <ns>: ...: <why> | skip <ns>: ...: <why>
# Any other output of a test program is passed on prefixed with "# ".

SM_ROOT="${SM_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
BUILD="${BUILD:-build}"
case "$BUILD" in
/*) SM_BUILD="$BUILD" ;;
*) SM_BUILD="$SM_ROOT/$BUILD" ;;
esac
INSTANCES="${INSTANCES:-}"
SM_FAILED=0
SM_OUT=""
trap '[ -z "$SM_OUT" ] || rm -f "$SM_OUT"' EXIT
cd "$SM_ROOT" || exit 1

sm_ok() { echo "ok $SM_NS: $1"; }
sm_fail() { echo "not ok $SM_NS: $1: $2"; SM_FAILED=1; }
sm_skip() { echo "skip $SM_NS: $1: $2"; }

# Prints one skip line and exits when there is nothing to test.
sm_require_instances() {
    if [ -z "${INSTANCES// /}" ]; then
        sm_skip "all" "no instances built (INSTANCES is empty)"
        exit 0
    fi
}

# sm_run PREFIX TIMEOUT PRELOAD CMD...: runs CMD (PRELOAD = library for LD_PRELOAD, or "" for
# none) under `timeout`, renames its case lines `<verdict> <prog>: <case>` to
# `<verdict> $SM_NS: PREFIX/<case>`, and adds a failed case PREFIX/<prog> when the program
# timed out, died of a signal, exited non-zero without a failed case, or reported no case.
# The raw output stays in $SM_OUT for callers that look for `# observed` lines.
sm_run() {
    local prefix="$1" limit="$2" preload="$3"
    shift 3
    local prog
    prog="$(basename "$1")"
    [ -z "${SM_OUT:-}" ] || rm -f "$SM_OUT"
    SM_OUT="$(mktemp)"
    if [ -n "$preload" ]; then
        timeout -k 5 "$limit" env LD_PRELOAD="$preload" "$@" >"$SM_OUT" 2>&1
    else
        timeout -k 5 "$limit" "$@" >"$SM_OUT" 2>&1
    fi
    local rc=$?
    local cases notok
    cases=$(grep -cE '^(ok|not ok|skip) [^:]+: ' "$SM_OUT")
    notok=$(grep -cE '^not ok [^:]+: ' "$SM_OUT")
    sed -E -e "s#^(ok|not ok|skip) [^:]+: #\\1 $SM_NS: $prefix/#" -e t -e '/^#/b' -e 's/^/# /' "$SM_OUT"
    [ "$notok" -eq 0 ] || SM_FAILED=1
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        sm_fail "$prefix/$prog" "timed out after ${limit}s (hang?)"
    elif [ "$rc" -gt 128 ]; then
        sm_fail "$prefix/$prog" "killed by signal $((rc - 128))$(grep -vE '^(ok|not ok|skip) ' "$SM_OUT" | tail -c 300 | tr '\n' ' ' | sed 's/^/: /')"
    elif [ "$rc" -ne 0 ] && [ "$notok" -eq 0 ]; then
        sm_fail "$prefix/$prog" "exited with status $rc without a failed case"
    elif [ "$cases" -eq 0 ]; then
        sm_fail "$prefix/$prog" "reported no case"
    fi
    return 0
}

# sm_lib INST: sets SM_LIB to the drop-in library of INST, or reports a failed case (status 1)
# when it is missing.
sm_lib() {
    SM_LIB="$SM_BUILD/lib$1.so"
    if [ ! -f "$SM_LIB" ]; then
        sm_fail "$1/preload" "$SM_LIB missing (not built)"
        return 1
    fi
}

# sm_build_linked INST SRC OUT: compiles SRC against libsm_INST.a with -DSM_TEST_PREFIX=sm_INST_.
sm_build_linked() {
    local inst="$1" src="$2" out="$3" lib="$SM_BUILD/libsm_$1.a"
    if [ ! -f "$lib" ]; then
        sm_fail "$inst/linked" "$lib missing (not built)"
        return 1
    fi
    mkdir -p "$(dirname "$out")"
    local log
    log="$(mktemp)"
    if ! ${CC:-cc} -std=c11 -O2 -g -Wall -Wextra -Iinclude -I. -D_GNU_SOURCE -DSM_TEST_PREFIX="sm_${inst//-/_}_" \
        "$src" "$lib" -o "$out" -lpthread -ldl >"$log" 2>&1; then
        sm_fail "$inst/linked/build_$(basename "$src" .c)" "cannot build against $lib: $(grep -m1 -i error "$log")"
        sed 's/^/# /' "$log"
        rm -f "$log"
        return 1
    fi
    rm -f "$log"
}

# sm_run_each_way INST TAG BIN SRC LIMIT ARGS...: BIN under LD_PRELOAD=lib<INST>.so, cases named
# <INST>/preload<TAG>/<case>, then SRC built against libsm_<INST>.a, cases <INST>/linked<TAG>/<case>.
sm_run_each_way() {
    local inst="$1" tag="$2" bin="$3" src="$4" limit="$5"
    shift 5
    if sm_lib "$inst"; then
        sm_run "$inst/preload$tag" "$limit" "$SM_LIB" "$bin" "$@"
    fi
    local linked
    linked="$SM_BUILD/tests/linked/$(basename "$src" .c)_$inst"
    if sm_build_linked "$inst" "$src" "$linked"; then
        sm_run "$inst/linked$tag" "$limit" "" "$linked" "$@"
    fi
}

sm_need_bin() { # PATH: a failed case when a test binary was not built
    if [ ! -x "$1" ]; then
        sm_fail "build/$(basename "$1")" "$1 missing (run make tests)"
        return 1
    fi
}
