#!/usr/bin/env bash
# sunmao benchmark suite entry point (what `make bench` runs). See bench/README.md.
set -u
usage() {
    cat <<'USAGE'
usage: bench/run.sh [options]        (or: make bench [QUICK=1] [BENCH=...] [ALLOCS=...] [BASELINE=...])

Builds the workload programs into $BUILD/bench/, runs every workload under every
allocator (interleaved, round-robin within each round), prints progress and a table,
and writes bench/results/<date>.md with SVG charts and raw CSV/JSON.

Options (each has an environment variable of the same meaning; options win):
  --quick            QUICK=1       one round, small parameters (about 3 min)
  --smoke            SMOKE=1       one tiny workload per allocator, prints ok/not ok lines (tests)
  --bench LIST       BENCH=LIST    workloads or groups to run, comma/space separated; '*' globs
                                   (groups: micro stress scaling memory real latency; e.g. BENCH=larson,redis)
  --allocs LIST      ALLOCS=LIST   allocators to run (glibc jemalloc tcmalloc mimalloc tbbmalloc <instances>);
                                   wcetstat+<alloc>: <alloc> with $BUILD/bench/libwcetstat.so in front,
                                   its in-program malloc/free percentiles in the report
  --baseline NAME    BASELINE=NAME allocator the ratios and geometric means are relative to (default glibc)
  --rounds N         ROUNDS=N      rounds (default 3; 1 with --quick)
  --timeout S        TIMEOUT=S     per-run time limit in seconds (default 90; 30 with --quick)
  --results DIR      RESULTS_DIR=DIR  where the report goes (default bench/results)
  --strict           STRICT=1      exit 1 when any case is FAIL (default: report and exit 0)
  --list                           list workloads and allocators, run nothing
  --from FILE        REPORT_FROM=FILE  write the report of an earlier run again from its results.json
                                   (this version's tables, e.g. after a harness change), run nothing
  -h, --help                       this text
Also read: BUILD (build dir, default build), INSTANCES (sunmao instances; each needs
$BUILD/lib<name>.so; default: every instances/*.c).
USAGE
}
cd "$(dirname "$0")/.." || exit 2
export SM_ROOT="$PWD"
export BUILD="${BUILD:-build}"
LIST=0
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) export QUICK=1 ;;
        --smoke) export SMOKE=1 ;;
        --strict) export STRICT=1 ;;
        --list) LIST=1 ;;
        --bench|--allocs|--baseline|--rounds|--timeout|--results|--from)
            [ $# -ge 2 ] || { echo "bench/run.sh: $1 needs a value (see --help)" >&2; exit 2; }
            case "$1" in
                --bench) export BENCH="$2" ;; --allocs) export ALLOCS="$2" ;;
                --baseline) export BASELINE="$2" ;; --rounds) export ROUNDS="$2" ;;
                --timeout) export TIMEOUT="$2" ;; --results) export RESULTS_DIR="$2" ;;
                --from) export REPORT_FROM="$2" ;;
            esac
            shift ;;
        --bench=*|--allocs=*|--baseline=*|--rounds=*|--timeout=*|--results=*|--from=*)
            v="${1#*=}"
            case "$1" in
                --bench=*) export BENCH="$v" ;; --allocs=*) export ALLOCS="$v" ;;
                --baseline=*) export BASELINE="$v" ;; --rounds=*) export ROUNDS="$v" ;;
                --timeout=*) export TIMEOUT="$v" ;; --results=*) export RESULTS_DIR="$v" ;;
                --from=*) export REPORT_FROM="$v" ;;
            esac ;;
        -h|--help) usage; exit 0 ;;
        *) echo "bench/run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
for v in ROUNDS TIMEOUT; do
    val="${!v:-}"
    [ -z "$val" ] || [[ "$val" =~ ^[1-9][0-9]*$ ]] || { echo "bench/run.sh: $v must be a positive integer, got '$val'" >&2; exit 2; }
done
if [ -n "${REPORT_FROM:-}" ]; then
    [ -r "$REPORT_FROM" ] || { echo "bench/run.sh: --from: cannot read '$REPORT_FROM'" >&2; exit 2; }
    command -v python3 >/dev/null || { echo "bench/run.sh: 'python3' not found (run tools/ensure-deps.sh bench)" >&2; exit 2; }
    exec python3 bench/harness.py
fi
for tool in gcc python3 timeout; do
    command -v "$tool" >/dev/null || { echo "bench/run.sh: '$tool' not found (run tools/ensure-deps.sh bench)" >&2; exit 2; }
done

# Build the workload programs (only the ones out of date), in parallel.
export BENCH_BIN="$BUILD/bench"
mkdir -p "$BENCH_BIN" || { echo "bench/run.sh: cannot create $BENCH_BIN" >&2; exit 2; }
pids=()
for src in bench/workloads/*.c bench/lib/smtime.c; do
    exe="$BENCH_BIN/$(basename "${src%.c}")"
    if [ ! -x "$exe" ] || [ "$src" -nt "$exe" ] || [ bench/workloads/common.h -nt "$exe" ]; then
        gcc -O2 -g -std=gnu11 -Wall -pthread -D_GNU_SOURCE -Iinclude "$src" -o "$exe" -lm 2>"$exe.log" &
        pids+=("$!:$src")
    fi
done
bad=0
for p in "${pids[@]+"${pids[@]}"}"; do
    wait "${p%%:*}" || { echo "bench/run.sh: compiling ${p#*:} failed:" >&2; cat "$BENCH_BIN/$(basename "${p#*:}" .c).log" >&2; bad=1; }
done
[ "$bad" = 0 ] || exit 2
# The wcet_stat meter (bench/lib/wcetstat.c), for wcetstat+<alloc> allocators: built by the Makefile.
case " ${ALLOCS:-} " in
    *wcetstat+*)
        (unset MAKEFLAGS MFLAGS MAKELEVEL; make --no-print-directory -s BUILD="$BUILD" "$BUILD/bench/libwcetstat.so") ||
            { echo "bench/run.sh: building $BUILD/bench/libwcetstat.so failed" >&2; exit 2; } ;;
esac

if [ "$LIST" = 1 ]; then
    exec python3 - <<'PY'
import os, sys
sys.path.insert(0, "bench")
import harness
allocs, problems = harness.discover_allocators()
print("allocators:", " ".join(a["name"] for a in allocs), *("(%s: %s)" % (k, v.split(":", 1)[1]) for k, v in problems.items()))
for w in harness.workloads():
    print("  %-14s %-8s %s" % (w["name"], w["group"], w["desc"]))
PY
fi
exec python3 bench/harness.py
