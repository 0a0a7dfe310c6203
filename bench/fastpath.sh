#!/usr/bin/env bash
# Fast-path check: ns per malloc+free pair (bench/workloads/micro.c, sizes 64..120) for each
# allocator against a hand-written thread-cache allocator (bench/lib/handtc.c) that does only
# what a cache hit must do. Usage: bench/fastpath.sh [-i NAME]... [rounds=5] [pairs=20000000]
# Prints the median and min-max per allocator and the ratio to the hand-written reference:
# our instances (default sunmao: $BUILD/libsunmao.so), glibc and the Debian peers installed.
set -u
usage() {
    cat <<'USAGE'
usage: bench/fastpath.sh [-i|--instance NAME]... [rounds] [pairs]

Times the malloc+free pair (bench/workloads/micro.c, one thread, sizes 64..120) under each
allocator and prints one row per allocator: median ns per pair over the rounds, min-max, and
the ratio to a hand-written thread cache (bench/lib/handtc.c, the floor a cache hit can reach).
Rows: handwritten, each instance measured, glibc, and jemalloc, tcmalloc, mimalloc when their
Debian packages are installed. Compiles handtc.so and micro into $BUILD/bench/ first.

Arguments:
  -i, --instance NAME  a sunmao instance to measure ($BUILD/lib<NAME>.so, built by make); repeat
                       the option (or give a comma-separated list) for several; default sunmao
  rounds               runs per allocator, interleaved (default 5)
  pairs                malloc+free pairs per run (default 20000000)
  -h, --help           this text

Environment:
  BUILD      build directory (default build)
  INSTANCES  instances to measure when no --instance is given (space or comma separated)
USAGE
}
names=() pos=()
while [ $# -gt 0 ]; do
    case "$1" in
        -h | --help) usage; exit 0 ;;
        -i | --instance)
            [ $# -ge 2 ] || { echo "bench/fastpath.sh: $1 needs an instance name (see --help)" >&2; exit 2; }
            names+=(${2//,/ }); shift ;;
        --instance=*) v="${1#*=}"; names+=(${v//,/ }) ;;
        --) shift; pos+=("$@"); break ;;
        -*) echo "bench/fastpath.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) pos+=("$1") ;;
    esac
    shift
done
[ ${#pos[@]} -le 2 ] || { echo "bench/fastpath.sh: too many arguments: ${pos[*]} (see --help)" >&2; exit 2; }
rounds="${pos[0]:-5}" pairs="${pos[1]:-20000000}"
for v in "rounds:$rounds" "pairs:$pairs"; do
    [[ "${v#*:}" =~ ^[1-9][0-9]*$ ]] || { echo "bench/fastpath.sh: ${v%%:*} must be a positive integer, got '${v#*:}'" >&2; exit 2; }
done
[ ${#names[@]} -gt 0 ] || { v="${INSTANCES:-sunmao}"; names=(${v//,/ }); }
[ ${#names[@]} -gt 0 ] || names=(sunmao)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
out="$BUILD/bench"
declare -A libs=([handwritten]="$out/handtc.so" [glibc]="")
for name in "${names[@]}"; do
    case "$name" in handwritten | glibc | jemalloc | tcmalloc | mimalloc)
        echo "bench/fastpath.sh: '$name' is a row of its own, not an instance" >&2; exit 2 ;;
    esac
    [ -f "$BUILD/lib$name.so" ] || {
        echo "bench/fastpath.sh: $BUILD/lib$name.so not built (run make; instances: $(echo $(ls instances 2>/dev/null | sed -n 's/\.c$//p')))" >&2
        exit 1
    }
    libs[$name]="$BUILD/lib$name.so"
done
mkdir -p "$out"
# -fno-builtin: gcc would otherwise turn handtc's calloc (malloc + memset) into a call to calloc.
gcc -O2 -fno-builtin -shared -fPIC bench/lib/handtc.c -o "$out/handtc.so" || exit 1
gcc -O2 -std=gnu11 -pthread -D_GNU_SOURCE bench/workloads/micro.c -o "$out/micro" || exit 1
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
w=12
for name in "${names[@]}"; do [ ${#name} -le $w ] || w=${#name}; done
printf '%-*s %8s %18s %8s\n' $w allocator "ns/pair" "min-max" "x hand"
for name in handwritten "${names[@]}" glibc jemalloc tcmalloc mimalloc; do
    [ -n "${res[$name]:-}" ] || continue
    echo ${res[$name]} | tr ' ' '\n' | sort -g | awk -v n="$name" -v ref="$ref" -v w=$w '{ v[NR] = $1 }
        END { m = v[int((NR + 1) / 2)]; printf "%-*s %8.2f %8.2f-%-8.2f %8.2f\n", w, n, m, v[1], v[NR], m / ref }'
    res[$name]=""  # an instance named twice: one row
done
