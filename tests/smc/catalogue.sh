#!/usr/bin/env bash
# smc's catalogue (tools/smc/catalogue.h), made by tools/smc/catalogue.sh from the headers' @model
# lines, their code and the options table:
#   check/<header>  catalogue.sh --check: the header's @model lines agree with its code (every option
#                   a key, every required slot a slot, ...; tools/smc/catalogue.sh says what it checks)
#   generates       catalogue.sh -o $BUILD/smc/catalogue.c
#   compiles        cc -std=c11 -Wall -Wextra -Werror -c -I tools/smc on it: no warning
#   driver_builds   tests/smc/catalogue_facts.c linked with it
#   <layer>/<fact>  the driver's cases: facts the headers state (slab_lk's slots and keys, mmap_heap's
#                   paper spellings, thread_cache's needs, ...)
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/smc/catalogue.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Runs tools/smc/catalogue.sh --check, generates smc's catalogue from the headers, compiles it
warning-free and runs a driver that checks facts about it (tests/smc/catalogue_facts.c).
Prints `ok smc_catalogue: <case>` or `not ok smc_catalogue: <case>: <why>`.

Environment: BUILD (default build; files in $BUILD/smc-catalogue), SM_ROOT, CC (default cc).
USAGE
            exit 0 ;;
        -*) echo "tests/smc/catalogue.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok smc_catalogue: setup: cannot cd to the repository root"; exit 1; }
out="${BUILD:-build}/smc-catalogue"
mkdir -p "$out" || { echo "not ok smc_catalogue: setup: cannot make $out"; exit 1; }
cc="${CC:-cc}"
rc=0

tools/smc/catalogue.sh --check >"$out/catalogue-check.log" 2>&1
check_rc=$?
sed -n -e 's#^ok smc-catalogue: \(.*\)$#ok smc_catalogue: check/\1#p' \
    -e 's#^not ok smc-catalogue: \([^:]*\): \(.*\)$#not ok smc_catalogue: check/\1: \2#p' "$out/catalogue-check.log"
if [ $check_rc -ne 0 ]; then
    rc=1
    grep -q '^not ok smc-catalogue: ' "$out/catalogue-check.log" ||
        echo "not ok smc_catalogue: check: tools/smc/catalogue.sh --check exited $check_rc: $(head -n 1 "$out/catalogue-check.log")"
fi

if ! tools/smc/catalogue.sh -o "$out/catalogue.c" 2>"$out/catalogue.log"; then
    echo "not ok smc_catalogue: generates: $(head -n 1 "$out/catalogue.log")"
    exit 1
fi
echo "ok smc_catalogue: generates"
if ! $cc -std=c11 -Wall -Wextra -Werror -c -I tools/smc "$out/catalogue.c" -o "$out/catalogue.o" 2>"$out/compile.log"; then
    echo "not ok smc_catalogue: compiles: $(grep -m1 -E 'error|warning' "$out/compile.log")"
    exit 1
fi
echo "ok smc_catalogue: compiles"
if ! $cc -std=c11 -Wall -Wextra -Werror -I tools/smc tests/smc/catalogue_facts.c "$out/catalogue.o" \
    -o "$out/smc_catalogue" 2>"$out/driver.log"; then
    echo "not ok smc_catalogue: driver_builds: $(grep -m1 -E 'error|warning' "$out/driver.log")"
    exit 1
fi
echo "ok smc_catalogue: driver_builds"
"$out/smc_catalogue" || rc=1
exit $rc
