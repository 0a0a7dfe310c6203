#!/usr/bin/env bash
# First-class heaps: sunmao_heap_reset against freeing the same blocks one by one
# (bench/heaps/reset.c), each way in a process of its own, ROUNDS rounds taken in turns; prints
# the median [min-max] of each way's emptying time and the ratios the docs quote (docs/heaps.md).
# usage: bench/heaps/reset.sh [-h|--help]
# Environment: BUILD (default build: the library and the program), ROUNDS (default 5),
#              BLOCKS (default 1000000), KINDS (default "tlsf region"), CC (default cc).
for arg in "$@"; do
    case "$arg" in
        -h | --help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench/heaps/reset.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -eu
cd "$(dirname "$0")/../.."
BUILD="${BUILD:-build}" ROUNDS="${ROUNDS:-5}" BLOCKS="${BLOCKS:-1000000}" KINDS="${KINDS:-tlsf region}"
make -s BUILD="$BUILD" "$BUILD/libsunmao.so"
mkdir -p "$BUILD/bench"
exe="$BUILD/bench/heap_reset"
"${CC:-cc}" -O2 -I. -Iinclude -Wall -Wextra bench/heaps/reset.c -o "$exe"
lib="$(realpath "$BUILD/libsunmao.so")"
ways="free plainfree reset twice destroy malloc"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
for r in $(seq "$ROUNDS"); do
    for k in $KINDS; do
        for w in $ways; do
            LD_PRELOAD="$lib" "$exe" "$k" "$w" "$BLOCKS" >>"$tmp"
        done
    done
done
python3 - "$tmp" "$BLOCKS" <<'PY'
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
PY
