#!/usr/bin/env bash
# usage: bench/device-scaling.sh kit [DIR] | run | table CSV | --help
# The stress workloads at 4 and 16 threads (malloc-test at 1..16) on a machine with more cores than
# this one, which may have no compiler, no Debian packages and no network: a self-contained kit.
#   bench/device-scaling.sh kit [DIR]      here: copy the workload programs (from $BUILD/bench, built
#                                          by `make bench`), libsunmao.so and the peers' libraries
#                                          with their C++ runtime into DIR (default build-dev)
#   DIR/device-scaling.sh run              there: every configuration under each allocator,
#                                          interleaved, R rounds (default 3), wall time per run
#                                          into $OUT/scaling.csv (default /tmp/out); stops starting
#                                          runs after DEADLINE seconds (default 300)
#   bench/device-scaling.sh table CSV      here: medians [min-max] in ms and libsunmao's ratio to
#                                          the fastest peer, as a markdown table
# Times include process start-up (tens of ms); a run over 30 s counts as failed (status 124).
set -u
here=$(cd "$(dirname "$0")" && pwd)
mode=${1:-}
case "$mode" in
kit)
    dir=${2:-build-dev}
    b=${BUILD:-build-bench}
    mkdir -p "$dir/bin" "$dir/lib" || exit 1
    for w in micro mtest larson xmalloc cache xchurn shbench alloctest pareto mstress glibc rptest; do
        cp "$b/bench/$w" "$dir/bin/" || { echo "device-scaling: $b/bench/$w missing (run make bench first)" >&2; exit 1; }
    done
    cp "$b/libsunmao.so" "$dir/lib/" || exit 1
    for l in libjemalloc.so.2 libtcmalloc_minimal.so.4 libmimalloc.so.2 libtbbmalloc_proxy.so.2 libtbbmalloc.so.2 \
        libstdc++.so.6 libgcc_s.so.1; do
        cp -L "/lib/x86_64-linux-gnu/$l" "$dir/lib/" || exit 1
    done
    cp "$0" "$dir/device-scaling.sh"
    echo "kit in $dir ($(du -sh "$dir" | cut -f1))" ;;
run)
    D=$here L=$here/lib OUT=${OUT:-/tmp/out} R=${R:-3} DEADLINE=${DEADLINE:-300}
    mkdir -p "$OUT" || exit 1
    start=$(date +%s)
    { nproc; lscpu | grep -E 'Model name|^CPU\(s\)|Thread|NUMA node\(s\)'; ldd --version | head -1; uname -r; } >"$OUT/machine.txt" 2>&1
    declare -A pre=([glibc]="" [jemalloc]=$L/libjemalloc.so.2 [tcmalloc]=$L/libtcmalloc_minimal.so.4
        [mimalloc]=$L/libmimalloc.so.2 [tbbmalloc]=$L/libtbbmalloc_proxy.so.2 [sunmao]=$L/libsunmao.so)
    allocs=(glibc jemalloc tcmalloc mimalloc tbbmalloc sunmao)
    cfgs=()
    for t in 1 2 4 8 16; do cfgs+=("scale-$t|mtest $t 10000000 64 512"); done
    for t in 4 16; do
        cfgs+=("micro-mt-$t|micro $t 6000000 64" "larson-$t|larson $t 10 1000 200000 8 1024"
            "xmalloc-$t|xmalloc $t 15000 64 256" "xchurn-$t|xchurn $t 300000 2000 4096"
            "cache-thrash-$t|cache thrash $t 400 100000 8" "cache-scratch-$t|cache scratch $t 400 100000 8"
            "sh8bench-$t|shbench 8 $t 150 2000 1 1000" "alloc-test-$t|alloctest $t 2500000 4096 65536"
            "pareto-mt-$t|pareto $t 4000000 1048576 65536" "mstress-$t|mstress $t 12 20000 50000"
            "glibc-thread-$t|glibc thread $t 3000000 1000" "rptest-$t|rptest $t 250000 2048")
    done
    echo "round,workload,allocator,ms,status" >"$OUT/scaling.csv"
    for ((r = 0; r < R; r++)); do
        for c in "${cfgs[@]}"; do
            name=${c%%|*} cmd=${c#*|}
            for ((i = 0; i < ${#allocs[@]}; i++)); do
                a=${allocs[$(((i + r) % ${#allocs[@]}))]}
                if (($(date +%s) - start > DEADLINE)); then
                    echo "deadline: stopped at round $r, $name" >>"$OUT/machine.txt"
                    exit 0
                fi
                t0=$(date +%s%N)
                # shellcheck disable=SC2086 # cmd is a program and its arguments
                LD_LIBRARY_PATH=$L LD_PRELOAD=${pre[$a]} timeout -k 5 30 "$D"/bin/$cmd >/dev/null 2>>"$OUT/stderr.txt"
                st=$?
                t1=$(date +%s%N)
                echo "$r,$name,$a,$(((t1 - t0) / 1000000)),$st" >>"$OUT/scaling.csv"
            done
        done
    done ;;
table)
    python3 - "${2:?usage: device-scaling.sh table CSV}" <<'EOF'
import csv, statistics, sys, collections
runs, failed, order = collections.defaultdict(list), set(), []
for r in csv.DictReader(open(sys.argv[1])):
    key = (r["workload"], r["allocator"])
    if r["workload"] not in order:
        order.append(r["workload"])
    if r["status"] == "0":
        runs[key].append(int(r["ms"]))
    else:
        failed.add(key)
allocs = ["glibc", "jemalloc", "tcmalloc", "mimalloc", "tbbmalloc", "sunmao"]
print("| workload | " + " | ".join(allocs) + " | sunmao / fastest peer |")
print("|---|" + "---:|" * (len(allocs) + 1))
for w in order:
    cells, med = [], {}
    for a in allocs:
        v = runs.get((w, a))
        if v:
            med[a] = statistics.median(v)
            cells.append("%d [%d–%d]" % (med[a], min(v), max(v)))
        else:
            cells.append("**FAIL**" if (w, a) in failed else "–")
    peers = [med[a] for a in allocs[:-1] if a in med]
    ratio = "%.2f" % (med["sunmao"] / min(peers)) if "sunmao" in med and peers else "–"
    print("| %s | %s | %s |" % (w, " | ".join(cells), ratio))
EOF
    ;;
-h | --help)
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' ;;
*)
    echo "device-scaling.sh: unknown mode '$mode' (see --help)" >&2
    exit 2 ;;
esac
