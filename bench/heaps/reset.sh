#!/usr/bin/env bash
# First-class heaps: sunmao_heap_reset against freeing the same blocks one by one
# (bench/heaps/reset.c), each way in a process of its own, ROUNDS rounds taken in turns; then the
# cost of a malloc+free pair through a heap against malloc's (bench/heaps/pair.c, 1 and 2 threads);
# prints medians [min-max] and the ratios the docs quote (docs/heaps.md).
# usage: bench/heaps/reset.sh [-h|--help]
# Environment: BUILD (default build: the library and the program), ROUNDS (default 5),
#              BLOCKS (default 1000000), KINDS (default "tlsf region"), CC (default cc).
for arg in "$@"; do
    case "$arg" in
        -h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench/heaps/reset.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -eu
cd "$(dirname "$0")/../.."
BUILD="${BUILD:-build}" ROUNDS="${ROUNDS:-5}" BLOCKS="${BLOCKS:-1000000}" KINDS="${KINDS:-tlsf region}"
make -s BUILD="$BUILD" "$BUILD/libsunmao.so"
mkdir -p "$BUILD/bench"
exe="$BUILD/bench/heap_reset" pair="$BUILD/bench/heap_pair"
"${CC:-cc}" -O2 -I. -Iinclude -Wall -Wextra bench/heaps/reset.c -o "$exe"
"${CC:-cc}" -O2 -I. -Iinclude -Wall -Wextra bench/heaps/pair.c -o "$pair" -lpthread
lib="$(realpath "$BUILD/libsunmao.so")"
ways="free plainfree reset twice destroy malloc"
tmp="$(mktemp)" ptmp="$(mktemp)"
trap 'rm -f "$tmp" "$ptmp"' EXIT
for r in $(seq "$ROUNDS"); do
    for k in $KINDS; do
        for w in $ways; do
            LD_PRELOAD="$lib" "$exe" "$k" "$w" "$BLOCKS" >>"$tmp"
        done
    done
    for w in "malloc 1" "tlsf 1" "region 1" "malloc 2" "tlsf 2"; do
        LD_PRELOAD="$lib" "$pair" $w 3000000 >>"$ptmp"
    done
done
python3 - "$tmp" "$BLOCKS" "$ptmp" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    kind, way, n, alloc, empty = line.split()
    rows.setdefault((kind, way), []).append(float(empty.split("=")[1]))
print(f"emptying a heap of {sys.argv[2]} blocks of 16..256 B (ms, median [min-max] of {len(next(iter(rows.values())))} runs)")
med = {k: statistics.median(v) for k, v in rows.items()}
for (kind, way), v in sorted(rows.items()):
    print(f"  {kind:7} {way:10} {med[(kind, way)]:9.3f} [{min(v):.3f}-{max(v):.3f}]")
for kind in sorted({k for k, _ in rows}):
    f1, pf, rs, tw = (med.get((kind, w)) for w in ("free", "plainfree", "reset", "twice"))
    if rs and f1 and pf and tw:
        print(f"  {kind}: one by one / reset = {f1 / rs:.0f}x (sunmao_heap_free), {pf / rs:.0f}x (free); "
              f"one by one / two resets (memory given back) = {f1 / tw:.1f}x, {pf / tw:.1f}x")
pairs = {}
for line in open(sys.argv[3]):
    way, threads, ns = line.split()
    pairs.setdefault((way, int(threads)), []).append(float(ns.split("=")[1]))
print("a 64-byte malloc + free (ns, median [min-max]; region: a malloc, its share of a reset per 4096)")
for (way, threads), v in sorted(pairs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    print(f"  {way:7} {threads} thread(s) {statistics.median(v):7.1f} [{min(v):.1f}-{max(v):.1f}]")
PY
