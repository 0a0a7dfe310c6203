#!/usr/bin/env bash
# Fuzzes smc's parser and checker (tests/smc/fuzz_smc.c says what is asserted): with clang's
# libFuzzer and ASan/UBSan over tests/smc/corpus (seeded from the paper's lines) for SMC_FUZZ_SECONDS
# (default 5; `make fuzz` runs 300 and merges new coverage into the corpus); without libFuzzer, the
# standalone driver (gcc + ASan/UBSan): the corpus, then random mutations of it.
case "${1:-}" in
    -h | --help)
        sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
        echo "usage: tests/smc/fuzz.sh (no arguments; environment BUILD, SM_ROOT, SMC_FUZZ_SECONDS, FUZZ_MERGE=1)"
        exit 0 ;;
    "") ;;
    *) echo "tests/smc/fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok smc-fuzz: setup: cannot cd to the repository root"; exit 1; }
root="$PWD"
case "${BUILD:-build}" in /*) build="$BUILD" ;; *) build="$root/${BUILD:-build}" ;; esac
out="$build/smc-fuzz" corpus="$root/tests/smc/corpus" secs="${SMC_FUZZ_SECONDS:-5}"
mkdir -p "$out"
catalogue="$build/smc-gen/catalogue.c"
[ -f "$catalogue" ] || { echo "not ok smc-fuzz: setup: $catalogue missing (build smc first)"; exit 1; }
srcs=(tools/smc/parse.c tools/smc/check.c tools/smc/emit.c tools/smc/explain.c "$catalogue" tests/smc/fuzz_smc.c)
unset LD_PRELOAD
export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

probe="$out/probe.c"
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe"
if command -v clang >/dev/null && clang -fsanitize=fuzzer,address "$probe" -o "$out/probe" >/dev/null 2>&1; then
    if ! clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -Itools/smc "${srcs[@]}" -o "$out/fuzz_smc" >"$out/build.log" 2>&1; then
        echo "not ok smc-fuzz: build: $(head -3 "$out/build.log" | tr '\n' ' ')"; exit 1
    fi
    echo "ok smc-fuzz: build (libFuzzer)"
    mkdir -p "$out/new"
    if "$out/fuzz_smc" -max_total_time="$secs" -max_len=1024 -timeout=10 -artifact_prefix="$out/" \
        "$out/new" "$corpus" >"$out/run.log" 2>&1; then
        echo "ok smc-fuzz: run (${secs}s, $(grep -o 'cov: [0-9]*' "$out/run.log" | tail -1))"
    else
        echo "not ok smc-fuzz: run: $(grep -m2 -E 'ERROR|fuzz_smc:|SUMMARY' "$out/run.log" | tr '\n' ' ') (input kept in $out/)"
        exit 1
    fi
    if [ "${FUZZ_MERGE:-0}" = 1 ]; then
        "$out/fuzz_smc" -merge=1 "$corpus" "$out/new" >"$out/merge.log" 2>&1 && echo "ok smc-fuzz: merge"
    fi
else
    if ! ${CC:-gcc} -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined \
        -DSMC_FUZZ_STANDALONE -Itools/smc "${srcs[@]}" -o "$out/fuzz_smc" >"$out/build.log" 2>&1; then
        echo "not ok smc-fuzz: build: $(head -3 "$out/build.log" | tr '\n' ' ')"; exit 1
    fi
    echo "ok smc-fuzz: build (standalone driver: clang's libFuzzer is missing)"
    if SMC_FUZZ_ROUNDS=$((secs * 4000)) "$out/fuzz_smc" "$corpus"/* >"$out/run.log" 2>&1; then
        echo "ok smc-fuzz: run ($(tail -1 "$out/run.log"))"
    else
        echo "not ok smc-fuzz: run: $(grep -m2 -E 'ERROR|fuzz_smc:|SUMMARY' "$out/run.log" | tr '\n' ' ')"
        exit 1
    fi
fi
