#!/usr/bin/env bash
# libwcetstat.so (bench/lib/wcetstat.c: malloc_heap(next malloc)::wcet_stat::malloc_socket) on real
# programs: `sort` on a generated file (with a 64 KiB buffer, so it merges runs and frees) and a python3 script (PYTHONMALLOC=malloc, two threads),
# each run under
#   LD_PRELOAD=libwcetstat.so                      (next = the C library's malloc)
#   LD_PRELOAD=libwcetstat.so:$BUILD/lib<i>.so      for every instance i in $INSTANCES that is built
#   LD_PRELOAD=libwcetstat.so:wcetstat_next.so     (a counting next allocator, tests/bench/wcetstat_next.c)
# Checks: the program's output equals the run without LD_PRELOAD and it exits 0 with no allocator
# error on stderr; the report (SUNMAO_WCET_OUT) has malloc and free samples, p90 <= p99 <= ... <=
# p99.9999 <= max, a plausible p90, and says the next allocator was found with dlsym; under the
# counting allocator, the calls reaching it are at least the samples taken. Also: the report goes to
# stderr when SUNMAO_WCET_OUT is unset, and "%p" in it becomes the process id.
# Prints `ok bench: wcetstat/<case>` or `not ok bench: wcetstat/<case>: <why>`. Env: BUILD, INSTANCES.
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/bench/wcetstat.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Checks libwcetstat.so (the wcet_stat meter, bench/lib/wcetstat.c) on `sort` and a python3
script, over the C library's malloc, each built instance and a counting allocator: the program's
output is unchanged and the report's percentiles are sane. Builds the library with make.
Prints `ok bench: wcetstat/<case>` or `not ok bench: wcetstat/<case>: <why>`.

Environment: BUILD (default build), INSTANCES (default sunmao), SM_ROOT, CC (default cc).
USAGE
            exit 0 ;;
        -*) echo "tests/bench/wcetstat.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok bench: wcetstat/setup: cannot cd to SM_ROOT"; exit 1; }
BUILD="${BUILD:-build}"
INSTANCES="${INSTANCES:-}"
[ -n "$INSTANCES" ] || INSTANCES="sunmao"
case "$BUILD" in /*) ABS_BUILD="$BUILD" ;; *) ABS_BUILD="$PWD/$BUILD" ;; esac
LIB="$ABS_BUILD/bench/libwcetstat.so"
NEXT="$ABS_BUILD/tests/bench/wcetstat_next.so"
tmp=$(mktemp -d /tmp/sm-wcetstat.XXXXXX) || { echo "not ok bench: wcetstat/setup: mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT
nbad=0
ok() { echo "ok bench: wcetstat/$1"; }
bad() { echo "not ok bench: wcetstat/$1: $2"; nbad=$((nbad + 1)); }

# ---- build (the library through the Makefile, as `make` does; the counting allocator here)
unset MAKEFLAGS MFLAGS MAKELEVEL
if make --no-print-directory -s BUILD="$BUILD" "$BUILD/bench/libwcetstat.so" >"$tmp/build.log" 2>&1 && [ -f "$LIB" ]; then
    ok "build"
else
    bad "build" "make $BUILD/bench/libwcetstat.so failed: $(grep -m1 -i error "$tmp/build.log")"
    exit 1
fi
mkdir -p "$(dirname "$NEXT")"
if ! ${CC:-cc} -O2 -shared -fPIC -Wall -Wextra tests/bench/wcetstat_next.c -o "$NEXT" 2>"$tmp/next.log"; then
    bad "build-next" "tests/bench/wcetstat_next.c: $(head -1 "$tmp/next.log")"
    NEXT=""
fi

# ---- the programs and their reference outputs (no LD_PRELOAD)
awk 'BEGIN { for (i = 1; i <= 150000; i++) printf "%d-%s\n", (i * 7919) % 100003, substr("abcdefghijklmnopqrstuvwxyz", 1 + i % 26, 1 + i % 9) }' >"$tmp/input.txt"
cat >"$tmp/prog.py" <<'PY'
import threading
def work(k, out):
    d, keep = {}, []
    for i in range(60000):
        d[str(i * k)] = [i, str(i) * (1 + i % 5)]
        if i % 3 == 0:
            d.pop(str((i // 2) * k), None)
        if i % 97 == 0:
            keep.append(bytearray(i % 3000))
    out[k] = (len(d), sum(len(b) for b in keep))
out = {}
ts = [threading.Thread(target=work, args=(k, out)) for k in (1, 2)]
for t in ts: t.start()
for t in ts: t.join()
s = "".join(sorted(str(v) for v in range(20000)))
print(sorted(out.items()), len(s), hash(s) & 0xffff)
PY
PY3=$(command -v python3 || true)
run_prog() { # name -> runs it with the current environment; stdout to $tmp/out, stderr to $tmp/err
    case "$1" in
        sort) LC_ALL=C sort -S 64K -T "$tmp" "$tmp/input.txt" ;; # a small buffer: runs merged, blocks freed
        python) PYTHONMALLOC=malloc PYTHONHASHSEED=0 "$PY3" -S "$tmp/prog.py" ;;
    esac >"$tmp/out" 2>"$tmp/err"
}
progs="sort"
[ -n "$PY3" ] && progs="$progs python"
for p in $progs; do
    (unset LD_PRELOAD; run_prog "$p") || { bad "reference-$p" "fails without LD_PRELOAD"; continue; }
    cp "$tmp/out" "$tmp/ref-$p"
done

# check_report file [next_counts] -> "" or why
check_report() {
    awk -v next_file="${2:-}" '
        $1 == "metric" { m[$2] = $3; seen[$2] = 1 }
        function num(k) { return (m[k] == "inf") ? 1e300 : m[k] + 0 }
        END {
            split("p90 p99 p99.9 p99.99 p99.999 p99.9999 max", P, " ")
            for (o = 1; o <= 2; o++) {
                op = (o == 1) ? "malloc" : "free"
                if (!seen[op "_samples"]) { print op "_samples missing"; exit }
                if (m[op "_samples"] + 0 <= 0) { print op "_samples is " m[op "_samples"]; exit }
                for (i = 1; i <= 7; i++) {
                    k = op "_" P[i]
                    if (!seen[k]) { print k " missing"; exit }
                    if (m[k] != "inf" && m[k] !~ /^[0-9]+(\.[0-9]+)?$/) { print k " is not a number: " m[k]; exit }
                    if (num(k) <= 0) { print k " is " m[k]; exit }
                    if (i > 1 && num(k) < num(op "_" P[i - 1])) { print k " (" m[k] ") < " op "_" P[i - 1] " (" m[op "_" P[i - 1]] ")"; exit }
                }
                if (num(op "_p90") > 100000) { print op "_p90 is " m[op "_p90"] " ns (over 100 us)"; exit }
            }
            if (m["next_dlsym"] != "1") { print "next allocator not found with dlsym (next_dlsym=" m["next_dlsym"] ")"; exit }
            if (m["header_bytes"] != "16") { print "header_bytes=" m["header_bytes"]; exit }
            if (next_file != "") {
                while ((getline line < next_file) > 0) { split(line, f, " "); c[f[1]] = f[2] + 0 }
                if (c["next_mallocs"] < m["malloc_samples"] + 0 || c["next_frees"] < m["free_samples"] + 0) {
                    print "the next allocator saw " c["next_mallocs"] " mallocs, " c["next_frees"] " frees, fewer than the " m["malloc_samples"] " / " m["free_samples"] " samples"; exit
                }
            }
        }' "$1"
}

configs="glibc"
for i in $INSTANCES; do
    if [ -f "$BUILD/lib$i.so" ]; then configs="$configs $i"; else echo "skip bench: wcetstat/$i: $BUILD/lib$i.so not built"; fi
done
[ -n "$NEXT" ] && configs="$configs counting-next"
for c in $configs; do
    case "$c" in
        glibc) pre="$LIB" ;;
        counting-next) pre="$LIB:$NEXT" ;;
        *) pre="$LIB:$ABS_BUILD/lib$c.so" ;;
    esac
    for p in $progs; do
        [ -f "$tmp/ref-$p" ] || continue
        name="$p/$c"
        rep="$tmp/report-$p-$c.txt" cnt="$tmp/next-$p-$c.txt"
        rm -f "$rep" "$cnt"
        SUNMAO_WCET_OUT="$rep" WCETSTAT_NEXT_OUT="$cnt" LD_PRELOAD="$pre" run_prog "$p"
        rc=$?
        if [ "$rc" -ne 0 ]; then bad "$name" "exit status $rc: $(tail -1 "$tmp/err")"; continue; fi
        if ! cmp -s "$tmp/out" "$tmp/ref-$p"; then bad "$name" "output differs from the run without LD_PRELOAD"; continue; fi
        if grep -q '^sunmao: ' "$tmp/err"; then bad "$name" "allocator error: $(grep -m1 '^sunmao: ' "$tmp/err")"; continue; fi
        if [ ! -s "$rep" ]; then bad "$name" "no report in SUNMAO_WCET_OUT"; continue; fi
        why=$(check_report "$rep" "$([ "$c" = counting-next ] && echo "$cnt")")
        if [ "$c" = counting-next ] && [ ! -s "$cnt" ]; then why="the counting next allocator wrote no counts (not loaded?)"; fi
        if [ -n "$why" ]; then bad "$name" "$why"; else ok "$name ($(awk '$2 == "malloc_samples" || $2 == "free_samples" { printf "%s%s", s, $3; s = "/" }' "$rep") samples)"; fi
    done
done

# ---- where the report goes: stderr by default, %p replaced by the process id
LD_PRELOAD="$LIB" sh -c 'exec cat /dev/null' 2>"$tmp/stderr-report" </dev/null
if grep -q '^metric malloc_samples ' "$tmp/stderr-report"; then ok "report-to-stderr"; else bad "report-to-stderr" "no report on stderr without SUNMAO_WCET_OUT"; fi
SUNMAO_WCET_OUT="$tmp/pid-%p.txt" LD_PRELOAD="$LIB" sh -c 'echo $$ >"$1"; exec true' sh "$tmp/pid" 2>/dev/null
pid=$(cat "$tmp/pid" 2>/dev/null)
if [ -n "$pid" ] && [ -s "$tmp/pid-$pid.txt" ] && grep -q "^metric pid $pid\$" "$tmp/pid-$pid.txt"; then
    ok "report-path-pid"
else
    bad "report-path-pid" "no report in $tmp/pid-<pid>.txt for pid ${pid:-?}"
fi
exit $((nbad > 0))
