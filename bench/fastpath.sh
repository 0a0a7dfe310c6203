#!/usr/bin/env bash
# Fast-path check: ns per malloc+free pair (bench/workloads/micro.c, sizes 64..120) for each
# allocator against a hand-written thread-cache allocator (bench/lib/handtc.c) that does only
# what a cache hit must do. Usage: bench/fastpath.sh [rounds=5] [pairs=20000000]
# Prints the median and min-max per allocator and the ratio to the hand-written reference.
set -u
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
rounds="${1:-5}" pairs="${2:-20000000}"
out="$BUILD/bench"
mkdir -p "$out"
# -fno-builtin: gcc would otherwise turn handtc's calloc (malloc + memset) into a call to calloc.
gcc -O2 -fno-builtin -shared -fPIC bench/lib/handtc.c -o "$out/handtc.so" || exit 1
gcc -O2 -std=gnu11 -pthread -D_GNU_SOURCE bench/workloads/micro.c -o "$out/micro" || exit 1
[ -f "$BUILD/libsunmao.so" ] || { echo "fastpath.sh: $BUILD/libsunmao.so not built (run make)" >&2; exit 1; }
declare -A libs=([handwritten]="$out/handtc.so" [sunmao]="$BUILD/libsunmao.so" [glibc]="")
for peer in jemalloc:libjemalloc.so.2 tcmalloc:libtcmalloc_minimal.so.4 mimalloc:libmimalloc.so.2; do
    p=$(ldconfig -p | awk -v s="${peer#*:}" '$1 == s { print $NF; exit }')
    [ -n "$p" ] && libs[${peer%%:*}]="$p"
done
declare -A res
for ((r = 0; r < rounds; r++)); do
    for name in "${!libs[@]}"; do
        ns=$(LD_PRELOAD="${libs[$name]}" "$out/micro" 1 "$pairs" 64 | awk '/ns_per_pair/ { print $3 }')
        res[$name]="${res[$name]:-} ${ns:-FAIL}"
    done
done
ref=$(echo ${res[handwritten]} | tr ' ' '\n' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
printf '%-12s %8s %18s %8s\n' allocator "ns/pair" "min-max" "x hand"
for name in handwritten sunmao glibc jemalloc tcmalloc mimalloc; do
    [ -n "${res[$name]:-}" ] || continue
    echo ${res[$name]} | tr ' ' '\n' | sort -g | awk -v n="$name" -v ref="$ref" '{ v[NR] = $1 }
        END { m = v[int((NR + 1) / 2)]; printf "%-12s %8.2f %8.2f-%-8.2f %8.2f\n", n, m, v[1], v[NR], m / ref }'
done
