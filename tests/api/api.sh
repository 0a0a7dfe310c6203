#!/usr/bin/env bash
# malloc API conformance, C++ operator forms, fork + threads, threads joined after a burst
# (join_burst), early allocation and dlopen,
# RLIMIT_AS near the working set (rlimit_as), for
# every instance in $INSTANCES. Case names: <inst>/preload/<case> (program run with
# LD_PRELOAD=lib<inst>.so), <inst>/linked/<case> (api_conformance built against libsm_<inst>.a,
# prefixed API), <inst>/dlopen/<case> (lib<inst>.so dlopen'ed by a program that is not preloaded).
# glibc/baseline: api_conformance passes with glibc's malloc (validates the test itself) and
# records glibc's implementation-defined answers; <inst>/preload/realloc0_matches_glibc checks the
# instance gives the same answer for realloc(p, 0) (glibc: frees p, returns NULL).
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/api/api.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Checks the malloc API of every instance: api_conformance, the C++ operator forms, fork with
threads and from a signal handler, threads joined after a burst in fresh processes, allocation before main and through dlopen, the address space
running out (RLIMIT_AS), a signal handler that allocates; each program run
with LD_PRELOAD=lib<inst>.so, api_conformance also linked against libsm_<inst>.a (prefixed API).
glibc's malloc runs api_conformance first, to validate the test itself.
Prints `ok api: <inst>/<mode>/<case>` or `not ok api: ...: <why>` per case.

Environment: BUILD (default build: the libraries and $BUILD/tests/api/*), INSTANCES (the
instances to test; empty: one skip line), SM_ROOT (repository root), CC (for the linked builds).
USAGE
            exit 0 ;;
        -*) echo "tests/api/api.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
SM_NS=api
. "$(dirname "$0")/driver_lib.bash"
sm_require_instances

T="$SM_BUILD/tests/api"
for b in api_conformance cxx_forms fork_threads join_burst fork_signal early_dlopen rlimit_as signal_alloc; do
    sm_need_bin "$T/$b" || exit 1
done

# The reference: glibc's malloc, no preload.
glibc_out="$(mktemp)"
timeout -k 5 60 "$T/api_conformance" >"$glibc_out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && ! grep -q '^not ok' "$glibc_out"; then
    sm_ok "glibc/baseline"
else
    sm_fail "glibc/baseline" "api_conformance fails with glibc's malloc (status $rc): $(grep -m1 '^not ok' "$glibc_out")"
fi
glibc_realloc0="$(sed -n 's/^# observed realloc0=//p' "$glibc_out")"
rm -f "$glibc_out"

for inst in $INSTANCES; do
    sm_lib "$inst" || continue
    lib="$SM_LIB"
    export SM_EXPECT_MALLOC_FROM="$lib"

    sm_run "$inst/preload" 60 "$lib" "$T/api_conformance"
    got="$(sed -n 's/^# observed realloc0=//p' "$SM_OUT")"
    if [ -n "$got" ] && [ "$got" = "$glibc_realloc0" ]; then
        sm_ok "$inst/preload/realloc0_matches_glibc"
    else
        sm_fail "$inst/preload/realloc0_matches_glibc" "realloc(p, 0) gives ${got:-?}, glibc gives ${glibc_realloc0:-?}"
    fi
    sm_run "$inst/preload" 60 "$lib" "$T/cxx_forms"
    sm_run "$inst/preload" 90 "$lib" "$T/fork_threads"
    sm_run "$inst/preload" 150 "$lib" "$T/join_burst"
    # fork() from a signal handler that interrupted the allocator (glibc's tst-mallocfork2).
    sm_run "$inst/preload" 150 "$lib" "$T/fork_signal" 200 20
    sm_run "$inst/preload" 30 "$lib" "$T/early_dlopen"
    sm_run "$inst/preload" 60 "$lib" "$T/rlimit_as"
    # A signal handler that allocates inside the allocator (docs/reliability.md).
    sm_run "$inst/preload" 60 "$lib" "$T/signal_alloc"
    unset SM_EXPECT_MALLOC_FROM

    sm_run "$inst/dlopen" 30 "" "$T/early_dlopen" "$lib"

    linked="$T/api_conformance_linked_$inst"
    if sm_build_linked "$inst" tests/api/api_conformance.c "$linked"; then
        sm_run "$inst/linked" 60 "" "$linked"
        got="$(sed -n 's/^# observed realloc0=//p' "$SM_OUT")"
        if [ -n "$got" ] && [ "$got" = "$glibc_realloc0" ]; then
            sm_ok "$inst/linked/realloc0_matches_glibc"
        else
            sm_fail "$inst/linked/realloc0_matches_glibc" "realloc(p, 0) gives ${got:-?}, glibc gives ${glibc_realloc0:-?}"
        fi
    fi
done
exit "$SM_FAILED"
