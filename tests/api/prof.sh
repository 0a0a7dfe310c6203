#!/usr/bin/env bash
# Heap profiles and leak reports (layers/addon/prof.h) of every instance in $INSTANCES whose
# library has profiling (libsunmao; the others: one skip line). tests/api/prof_leak.c, built here
# with -g -O0 -fno-omit-frame-pointer, leaks 20,000 blocks of 4 KiB in leak_here amid freed noise.
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/api/prof.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Runs tests/api/prof_leak.c under LD_PRELOAD=lib<inst>.so with SUNMAO_CONF=prof:true,... and checks:
the leak summary (bytes within 30% of the 80 MB leaked), that jeprof --text and google-pprof --text
both name leak_here first, the legacy header, no leak reported when everything is freed, prof.dump
through sunmao_mallctl, interval dumps (lg_prof_interval), the jemalloc format read by jeprof, and
the malloc API on sampled blocks (every request sampled). Prints `ok prof: <inst>/<case>` lines.

Environment: BUILD (default build), INSTANCES, SM_ROOT, CC.
USAGE
            exit 0 ;;
        -*) echo "tests/api/prof.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
SM_NS=prof
. "$(dirname "$0")/driver_lib.bash"
sm_require_instances

dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
prog="$dir/prof_leak"
if ! ${CC:-cc} -g -O0 -fno-omit-frame-pointer "$SM_ROOT/tests/api/prof_leak.c" -o "$prog" -ldl; then
    sm_fail "all" "cannot build tests/api/prof_leak.c"
    exit 1
fi

# run LIB CONF ARGS...: the program under LIB with SUNMAO_CONF=CONF; stdout+stderr in $dir/out.
run() {
    local lib="$1" conf="$2"
    shift 2
    timeout -k 5 120 env LD_PRELOAD="$lib" SUNMAO_CONF="$conf" "$prog" "$@" >"$dir/out" 2>&1
}

# first_fn TOOL FILE: the function a reader's --text output puts first.
first_fn() {
    "$1" --text "$prog" "$2" 2>/dev/null | awk '$1 ~ /^[0-9.]+$/ && NF >= 6 { print $6; exit }'
}

for inst in $INSTANCES; do
    lib="$SM_BUILD/lib$inst.so"
    if [ ! -f "$lib" ]; then sm_fail "$inst" "$lib missing"; continue; fi
    # A composition without a profiling layer answers prof.dump with ENOENT (core/prof_hooks.h).
    run "$lib" "prof:true,prof_prefix:" ctl "$dir/probe.heap"
    if ! grep -qx '# mallctl rc=0' "$dir/out"; then
        sm_skip "$inst" "no profiling layer in this composition ($(grep -m1 '^# mallctl' "$dir/out"))"
        continue
    fi
    rm -f "$dir"/p.*
    run "$lib" "prof:true,prof_final:true,prof_leak:true,prof_prefix:$dir/p" leak
    bytes="$(sed -n 's/^<sunmao>: Leak approximation summary: ~\([0-9]*\) bytes, ~[0-9]* objects, >= [0-9]* contexts\{0,1\}$/\1/p' "$dir/out")"
    if [ -n "$bytes" ] && [ "$bytes" -gt 57344000 ] && [ "$bytes" -lt 106496000 ]; then
        sm_ok "$inst/leak_summary"
    else
        sm_fail "$inst/leak_summary" "want ~81920000 bytes (+-30%), got: $(head -c 300 "$dir/out" | tr '\n' ' ')"
    fi
    final="$(ls "$dir"/p.*.f.heap 2>/dev/null | head -1)"
    if [ -n "$final" ] && grep -qx "<sunmao>: Run jeprof or google-pprof on $final for leak detail" "$dir/out"; then
        sm_ok "$inst/leak_file"
    else
        sm_fail "$inst/leak_file" "no .f.heap file named by the report: $(ls "$dir") / $(tail -1 "$dir/out")"
    fi
    if [ -n "$final" ] && head -1 "$final" | grep -qE '^heap profile: [0-9]+: [0-9]+ \[[0-9]+: [0-9]+\] @ heap_v2/524288$' &&
        grep -qx 'MAPPED_LIBRARIES:' "$final" && grep -q "r-xp.* $prog\$" "$final"; then
        sm_ok "$inst/legacy_format"
    else
        sm_fail "$inst/legacy_format" "header: $(head -1 "$final" 2>/dev/null)"
    fi
    for tool in jeprof google-pprof; do
        command -v "$tool" >/dev/null 2>&1 || "$SM_ROOT/tools/ensure-deps.sh" build >/dev/null 2>&1
        if ! command -v "$tool" >/dev/null 2>&1; then
            sm_skip "$inst/$tool" "$tool not installed (tools/ensure-deps.sh build could not install it)"
            continue
        fi
        got="$(first_fn "$tool" "$final")"
        if [ "$got" = leak_here ]; then sm_ok "$inst/$tool"; else sm_fail "$inst/$tool" "first function: '$got', want leak_here"; fi
    done

    rm -f "$dir"/p.*
    run "$lib" "prof:true,prof_final:true,prof_leak:true,prof_prefix:$dir/p" clean
    final="$(ls "$dir"/p.*.f.heap 2>/dev/null | head -1)"
    live="$(head -1 "$final" 2>/dev/null | sed -n 's/^heap profile: [0-9]*: \([0-9]*\) .*/\1/p')"
    # Sampled live bytes left: only what libc keeps (stdio's buffer); far below one 4 KiB block x 20,000.
    if [ -n "$live" ] && [ "$live" -lt 200000 ] && ! grep -q 'Leak approximation' "$dir/out"; then
        sm_ok "$inst/no_false_leak"
    else
        sm_fail "$inst/no_false_leak" "live bytes '$live'; $(head -c 200 "$dir/out")"
    fi

    rm -f "$dir"/p.* "$dir/m.heap"
    run "$lib" "prof:true,prof_prefix:$dir/p" ctl "$dir/m.heap"
    if grep -qx '# mallctl rc=0' "$dir/out" && [ "$(first_fn jeprof "$dir/m.heap")" = leak_here ]; then
        sm_ok "$inst/mallctl_dump"
    else
        sm_fail "$inst/mallctl_dump" "$(cat "$dir/out") / $(head -1 "$dir/m.heap" 2>/dev/null)"
    fi

    rm -f "$dir"/p.*
    run "$lib" "prof:true,lg_prof_interval:24,prof_prefix:$dir/p" leak
    n="$(ls "$dir"/p.*.i*.heap 2>/dev/null | wc -l)"
    # About 350 MB allocated: ~20 dumps of 16 MiB each (counted at samples).
    if [ "$n" -ge 8 ] && [ "$n" -le 60 ] && ls "$dir" | grep -qE "^p\.[0-9]+\.0\.i0\.heap$"; then
        sm_ok "$inst/interval_dumps"
    else
        sm_fail "$inst/interval_dumps" "$n files: $(ls "$dir" | head -3 | tr '\n' ' ')"
    fi

    rm -f "$dir"/p.*
    run "$lib" "prof:true,prof_final:true,prof_format:jemalloc,prof_prefix:$dir/p" leak
    final="$(ls "$dir"/p.*.f.heap 2>/dev/null | head -1)"
    if [ -n "$final" ] && [ "$(head -1 "$final")" = heap_v2/524288 ] && grep -qE '^  t\*: [0-9]+: [0-9]+ \[[0-9]+: [0-9]+\]$' "$final" &&
        [ "$(first_fn jeprof "$final")" = leak_here ]; then
        sm_ok "$inst/jemalloc_format"
    else
        sm_fail "$inst/jemalloc_format" "$(head -2 "$final" 2>/dev/null | tr '\n' ' ')"
    fi

    run "$lib" "prof:true,lg_prof_sample:0,prof_prefix:" api
    rc=$?
    if [ "$rc" -eq 0 ] && ! grep -q '^not ok' "$dir/out" && [ "$(grep -c '^ok' "$dir/out")" -eq 4 ]; then
        sm_ok "$inst/api_sampled"
    else
        sm_fail "$inst/api_sampled" "status $rc: $(grep -v '^ok' "$dir/out" | head -3 | tr '\n' ' ')"
    fi

    # Statistics with every request sampled: sampled blocks count in stats.allocated (exactly) and
    # in thread.allocated / thread.deallocated, like any other (tests/api/introspect.c's cases).
    SUNMAO_CONF="prof:true,lg_prof_sample:0,prof_prefix:" LD_PRELOAD="$lib" timeout -k 5 60 \
        "$SM_BUILD/tests/api/introspect" >"$dir/out" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] && ! grep -q '^not ok' "$dir/out" && grep -q '^ok introspect: allocated_tracks_pattern' "$dir/out"; then
        sm_ok "$inst/stats_sampled"
    else
        sm_fail "$inst/stats_sampled" "status $rc: $(grep -v '^ok' "$dir/out" | head -3 | tr '\n' ' ')"
    fi

    # prof off (the default): no file, nothing on stderr.
    rm -f "$dir"/p.*
    run "$lib" "prof_final:true,prof_leak:true,prof_prefix:$dir/p" leak
    if [ -z "$(ls "$dir"/p.* 2>/dev/null)" ] && [ ! -s "$dir/out" ]; then
        sm_ok "$inst/off_by_default"
    else
        sm_fail "$inst/off_by_default" "$(ls "$dir") $(head -c 200 "$dir/out")"
    fi
done
exit "${SM_FAILED:-0}"
