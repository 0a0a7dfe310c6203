#!/usr/bin/env bash
# Differential fuzzing of every instance in $INSTANCES (tests/fuzz/fuzz_alloc.c says what is
# checked): each prefixed allocator built with ASan and libFuzzer (clang), run over the corpus in
# tests/fuzz/corpus and then for FUZZ_SECONDS (default 3) of new inputs. Where clang's libFuzzer is
# missing, the same checks run with the standalone driver (gcc + ASan): the corpus, then random
# programs. A failure prints the allocator's one-line complaint and keeps the input that caused it
# under $BUILD/fuzz/<inst>/ (rerun: $BUILD/fuzz/fuzz_<inst> <that file>).
# Environment: BUILD, INSTANCES, SM_ROOT, FUZZ_SECONDS (per instance), FUZZ_MERGE=1 (add the
# inputs that found new coverage to tests/fuzz/corpus: `make fuzz` does).
# Output: ok|not ok fuzz/<inst>: <case>[: <why>]
set -u
case "${1:-}" in
    -h|--help)
        sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
        echo "usage: tests/fuzz/fuzz.sh (no arguments; make fuzz runs it longer: FUZZ_SECONDS=600 FUZZ_MERGE=1)"
        exit 0 ;;
    "") ;;
    *) echo "tests/fuzz/fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok fuzz: setup: cannot cd to the repository root"; exit 1; }
root="$PWD" out="$root/${BUILD:-build}/fuzz" corpus="$root/tests/fuzz/corpus"
secs="${FUZZ_SECONDS:-3}"
mkdir -p "$out" || { echo "not ok fuzz: setup: cannot create $out"; exit 1; }
[ -n "${INSTANCES:-}" ] || { echo "skip fuzz: none: INSTANCES is empty"; exit 0; }
unset LD_PRELOAD

# libFuzzer where clang has it, else the standalone driver.
probe="$out/probe.c"
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe"
if command -v clang >/dev/null && clang -fsanitize=fuzzer,address "$probe" -o "$out/probe" >/dev/null 2>&1; then
    mode=libfuzzer CC=clang OBJ_SAN="-fsanitize=address,fuzzer-no-link" BIN_SAN="-fsanitize=address,fuzzer" EXTRA=
else
    mode=standalone CC=gcc OBJ_SAN="-fsanitize=address" BIN_SAN="-fsanitize=address" EXTRA=-DFUZZ_STANDALONE
    echo "# clang's libFuzzer is not installed: the standalone driver runs the same checks"
fi

for inst in $INSTANCES; do
    p="sm_${inst//-/_}_" dir="$out/$inst" bin="$out/fuzz_$inst"
    mkdir -p "$dir/new"
    if ! $CC -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -fvisibility=hidden $OBJ_SAN -DSM_PREFIX="$p" \
        -c "instances/$inst.c" -o "$dir/$inst.o" >"$dir/build.log" 2>&1 ||
        ! $CC -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -I. -Wall -Wextra $BIN_SAN $EXTRA -DSM_TEST_PREFIX="$p" \
            tests/fuzz/fuzz_alloc.c "$dir/$inst.o" -lpthread -o "$bin" >>"$dir/build.log" 2>&1; then
        echo "not ok fuzz/$inst: build: $(grep -m1 -E 'error|undefined' "$dir/build.log")"
        continue
    fi
    export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1"
    if [ $mode = libfuzzer ]; then
        (cd "$dir" && timeout $((secs + 120)) "$bin" -max_total_time="$secs" -max_len=4096 -rss_limit_mb=6144 \
            -timeout=30 -artifact_prefix="$dir/" -print_final_stats=1 new "$corpus") >"$dir/run.log" 2>&1
    else
        (cd "$dir" && FUZZ_SECONDS="$secs" timeout $((secs + 120)) "$bin" "$corpus"/*) >"$dir/run.log" 2>&1
    fi
    rc=$?
    if [ $rc -eq 0 ]; then
        runs=$(grep -m1 -oE 'stat::number_of_executed_units: *[0-9]+|[0-9]+ random programs' "$dir/run.log" | grep -oE '[0-9]+' | tail -1)
        echo "ok fuzz/$inst: $mode, ${runs:-?} programs in ${secs}s beside the corpus"
        if [ "${FUZZ_MERGE:-0}" = 1 ] && [ $mode = libfuzzer ]; then
            (cd "$dir" && "$bin" -merge=1 -max_len=4096 "$corpus" new) >>"$dir/merge.log" 2>&1
        fi
    else
        why=$(grep -m1 -E '^fuzz_alloc: |ERROR: AddressSanitizer|runtime error|deadly signal|timeout' "$dir/run.log")
        input=$(ls -t "$dir"/crash-* "$dir"/timeout-* "$dir"/oom-* 2>/dev/null | head -1)
        echo "not ok fuzz/$inst: ${why:-exited with status $rc} (input: ${input:-none kept}; log: $dir/run.log)"
    fi
done
exit 0
