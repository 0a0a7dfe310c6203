#!/usr/bin/env bash
# Per-CPU caches against per-thread caches with more threads than cores: libsunmao-percpu
# (carrcache_rseq) and libsunmao (thread_cache), with tcmalloc and jemalloc where installed, on
# workloads of bench/workloads/ run with THREADS threads each (default "8 32": 4x and 16x this
# machine's 2 cores) and manythreads (64 threads alive at once). Every run goes through smtime
# (elapsed time, peak RSS); allocators take turns within each of ROUNDS rounds; prints medians
# [min-max] and each one's ratio to libsunmao's median (docs/percpu.md quotes them).
# usage: bench/percpu/oversub.sh [-h|--help]
# Environment: BUILD (default build), ROUNDS (default 5), THREADS (default "8 32"),
#              ALLOCS (default "sunmao sunmao-percpu tcmalloc jemalloc"), MODE (default: glibc's
#              rseq; "own" runs with GLIBC_TUNABLES=glibc.pthread.rseq=0).
for arg in "$@"; do
    case "$arg" in
        -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench/percpu/oversub.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -eu
cd "$(dirname "$0")/../.."
BUILD="${BUILD:-build}" ROUNDS="${ROUNDS:-5}" THREADS="${THREADS:-8 32}"
ALLOCS="${ALLOCS:-sunmao sunmao-percpu tcmalloc jemalloc}"
make -s BUILD="$BUILD" "$BUILD/libsunmao.so" "$BUILD/libsunmao-percpu.so"
mkdir -p "$BUILD/bench"
for src in bench/lib/smtime.c bench/workloads/{larson,glibc,shbench,xchurn,manythreads,micro}.c; do
    exe="$BUILD/bench/$(basename "$src" .c)"   # compiled as bench/run.sh does
    [ "$exe" -nt "$src" ] || gcc -O2 -g -std=gnu11 -Wall -pthread -D_GNU_SOURCE -Iinclude "$src" -o "$exe" -lm
done
. bench/lib/preload.sh
env_mode=()
[ "${MODE:-}" = own ] && env_mode=(GLIBC_TUNABLES=glibc.pthread.rseq=0)
tmp="$(mktemp)" st="$(mktemp)"
trap 'rm -f "$tmp" "$st"' EXIT
cases=()
for t in $THREADS; do
    cases+=("larson-$t:larson $t 10 1000 100000 8 1024"
            "glibc-thread-$t:glibc thread $t 2000000 1000"
            "sh8bench-$t:shbench 8 $t 100 2000 1 1000"
            "xchurn-$t:xchurn $t 200000 2000 4096"
            "micro-$t:micro $t 3000000 64")
done
cases+=("manythreads-64:manythreads 64 3 4194304")
for r in $(seq "$ROUNDS"); do
    for c in "${cases[@]}"; do
        name="${c%%:*}" cmd="${c#*:}"
        for a in $ALLOCS; do
            lib="$(sm_bench_preload "$a")"
            [ -n "$lib" ] || continue
            [ "$lib" != none ] || lib=""
            # shellcheck disable=SC2086
            env "${env_mode[@]}" SM_PRELOAD="$lib" "$BUILD/bench/smtime" 120 "$st" "$BUILD/bench/"$cmd >/dev/null 2>&1 || true
            read -r secs rss status _ <"$st"
            echo "$name $a $secs $rss $status" >>"$tmp"
        done
    done
    echo "round $r of $ROUNDS done" >&2
done
python3 - "$tmp" "$ALLOCS" <<'PY'
import statistics, sys
rows, order = {}, []
for line in open(sys.argv[1]):
    name, alloc, secs, rss, status = line.split()
    if name not in order:
        order.append(name)
    rows.setdefault((name, alloc), []).append((float(secs), int(rss), int(status)))
allocs = [a for a in sys.argv[2].split() if any(k[1] == a for k in rows)]
def med(v):
    return statistics.median(v), min(v), max(v)
for what, idx, unit in (("time", 0, "s"), ("peak RSS", 1, "MiB")):
    print("\n%s (%s), median [min-max], ratio to sunmao" % (what, unit))
    print("%-16s" % "workload" + "".join("%-30s" % a for a in allocs))
    for name in order:
        base = rows.get((name, "sunmao"))
        bmed = med([x[idx] for x in base])[0] if base else None
        cells = []
        for a in allocs:
            v = rows.get((name, a))
            if not v or any(x[2] for x in v):
                cells.append("%-30s" % "FAIL")
                continue
            vals = [x[idx] / (1024.0 if idx else 1.0) for x in v]
            m, lo, hi = med(vals)
            ratio = (m / (bmed / (1024.0 if idx else 1.0))) if bmed else 0
            cells.append("%-30s" % ("%.2f [%.2f-%.2f] x%.2f" % (m, lo, hi, ratio)))
        print("%-16s" % name + "".join(cells))
PY
