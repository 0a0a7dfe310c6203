#!/usr/bin/env bash
# The hugepage-aware page heap against the current one: libsunmao-hugepage (hugepage_glk under the
# slabs) and libsunmao (buddy_glk), with libsunmao-hugepage under SUNMAO_CONF=thp:never, tcmalloc,
# jemalloc and glibc beside them. Workloads: hugewalk (a large working set of small objects visited
# at random: TLB-bound; its metrics walk_ns and huge_mib), purge small (1 GiB of small blocks, 90%
# freed: RSS after idle and after malloc_trim), and churn workloads of bench/workloads/. Every run
# goes through smtime (elapsed time, peak RSS); allocators take turns within each of ROUNDS rounds;
# prints medians [min-max] and each one's ratio to libsunmao's median (docs/hugepages.md quotes them).
# The TLB misses themselves are counted where perf's dTLB counters exist (PERF=1).
# usage: bench/hugepage/tlb.sh [-h|--help]
# Environment: BUILD (default build), ROUNDS (default 3), WALK_MIB (default 512),
#              ALLOCS (default "sunmao sunmao-hugepage hugepage-nothp tcmalloc jemalloc glibc"),
#              PERF (1: run hugewalk under perf stat -e dTLB-load-misses too).
for arg in "$@"; do
    case "$arg" in
        -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench/hugepage/tlb.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -eu
cd "$(dirname "$0")/../.."
BUILD="${BUILD:-build}" ROUNDS="${ROUNDS:-3}" WALK_MIB="${WALK_MIB:-512}"
ALLOCS="${ALLOCS:-sunmao sunmao-hugepage hugepage-nothp tcmalloc jemalloc glibc}"
make -s BUILD="$BUILD" "$BUILD/libsunmao.so" "$BUILD/libsunmao-hugepage.so"
mkdir -p "$BUILD/bench"
for src in bench/lib/smtime.c bench/workloads/{hugewalk,purge,glibc,xchurn,alloctest,larson,pareto}.c; do
    exe="$BUILD/bench/$(basename "$src" .c)"   # compiled as bench/run.sh does
    [ "$exe" -nt "$src" ] || gcc -O2 -g -std=gnu11 -Wall -pthread -D_GNU_SOURCE -Iinclude "$src" -o "$exe" -lm
done
. bench/lib/preload.sh
lib_of() { # hugepage-nothp: libsunmao-hugepage, run under thp:never
    if [ "$1" = hugepage-nothp ]; then sm_bench_preload sunmao-hugepage; else sm_bench_preload "$1"; fi
}
tmp="$(mktemp)" st="$(mktemp)" out="$(mktemp)"
trap 'rm -f "$tmp" "$st" "$out"' EXIT
cases=("hugewalk:hugewalk $WALK_MIB 10000000"
       "purge-small:purge small 1024 1250"
       "glibc-thread:glibc thread 2 4000000 1000"
       "alloc-test:alloctest 2 3000000 4096 65536"
       "xchurn:xchurn 2 1000000 2000 4096"
       "larson:larson 2 10 1000 200000 8 1024"
       "pareto-st:pareto 1 6000000 4194304 65536")
for r in $(seq "$ROUNDS"); do
    for c in "${cases[@]}"; do
        name="${c%%:*}" cmd="${c#*:}"
        for a in $ALLOCS; do
            lib="$(lib_of "$a")"
            [ -n "$lib" ] || continue
            [ "$lib" != none ] || lib=""
            conf=""
            [ "$a" != hugepage-nothp ] || conf="thp:never"
            # shellcheck disable=SC2086
            SUNMAO_CONF="$conf" SM_PRELOAD="$lib" "$BUILD/bench/smtime" 300 "$st" "$BUILD/bench/"$cmd >"$out" 2>/dev/null || true
            read -r secs rss status _ <"$st"
            metrics="$(awk '$1 == "metric" && $2 ~ /^(walk_ns|huge_mib|small_idle_mib|small_trim_mib)$/ {printf "%s=%s,", $2, $3}' "$out")"
            echo "$name $a $secs $rss $status ${metrics:-none}" >>"$tmp"
        done
    done
    echo "round $r of $ROUNDS done" >&2
done
if [ "${PERF:-0}" = 1 ] && perf stat -e dTLB-load-misses true 2>&1 | grep -q "dTLB-load-misses" &&
    ! perf stat -e dTLB-load-misses true 2>&1 | grep -q "not supported"; then
    for a in $ALLOCS; do
        lib="$(lib_of "$a")"
        [ "$lib" != none ] || lib=""
        echo "perf $a: $(SUNMAO_CONF="$([ "$a" = hugepage-nothp ] && echo thp:never)" LD_PRELOAD="$lib" perf stat -x, -e dTLB-load-misses "$BUILD/bench/hugewalk" "$WALK_MIB" 10000000 2>&1 >/dev/null | grep dTLB)"
    done
fi
python3 - "$tmp" "$ALLOCS" <<'PY'
import statistics, sys
rows, order = {}, []
for line in open(sys.argv[1]):
    name, alloc, secs, rss, status, metrics = line.split()
    if name not in order:
        order.append(name)
    m = dict(kv.split("=") for kv in metrics.strip(",").split(",") if "=" in kv)
    rows.setdefault((name, alloc), []).append((float(secs), int(rss) / 1024.0, int(status), m))
allocs = [a for a in sys.argv[2].split() if any(k[1] == a for k in rows)]
def table(title, get, names):
    print("\n%s, median [min-max], ratio to sunmao" % title)
    print("%-14s" % "workload" + "".join("%-27s" % a for a in allocs))
    for name in names:
        base = rows.get((name, "sunmao"))
        bvals = [get(x) for x in base] if base else []
        bmed = statistics.median(bvals) if bvals and None not in bvals else None
        cells = []
        for a in allocs:
            v = rows.get((name, a))
            vals = [get(x) for x in v] if v else []
            if not v or any(x[2] for x in v) or None in vals:
                cells.append("%-27s" % "FAIL")
                continue
            m = statistics.median(vals)
            ratio = " x%.2f" % (m / bmed) if bmed else ""
            cells.append("%-27s" % ("%.2f [%.2f-%.2f]%s" % (m, min(vals), max(vals), ratio)))
        print("%-14s" % name + "".join(cells))
table("time (s)", lambda x: x[0], order)
table("peak RSS (MiB)", lambda x: x[1], order)
for key, label, wl in (("walk_ns", "hugewalk: ns per hop", "hugewalk"),
                       ("huge_mib", "hugewalk: MiB backed by huge pages at the end", "hugewalk"),
                       ("small_idle_mib", "purge-small: RSS after the idle wait (MiB)", "purge-small"),
                       ("small_trim_mib", "purge-small: RSS after malloc_trim (MiB)", "purge-small")):
    table(label, lambda x, k=key: float(x[3][k]) if k in x[3] else None, [wl])
PY
