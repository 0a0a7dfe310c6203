#!/usr/bin/env bash
# Real programs under LD_PRELOAD=lib<inst>.so for every instance in $INSTANCES: the output must
# be byte-identical to the run without the preload (glibc's malloc). One case per program and
# instance, <inst>/preload/<program>:
#   python3  a script that allocates a lot (dicts, lists, strings, big ints, json of a
#            deterministic structure, sorted output)
#   sqlite3  generated SQL: a table of 20000 deterministic rows, an index, aggregate queries
#   gcc      compiles a small C file (-O2 -S and -c: the assembly and the object are compared)
#   sort     LC_ALL=C sort of 200k generated lines (also with 2 threads and a small buffer)
# A program that is not installed is a skip. Work happens in a mktemp -d directory, removed at exit.
SM_NS=programs
. "$(dirname "$0")/../api/driver_lib.bash"
sm_require_instances

work="$(mktemp -d)"
# the real interpreter, not a wrapper script (pyenv shims are bash scripts)
py="$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)"
export work py
trap 'rm -rf "$work"; [ -z "$SM_OUT" ] || rm -f "$SM_OUT"' EXIT

# ---- inputs (made once, without preload) ---------------------------------------------------
cat >"$work/alloc.py" <<'EOF'
import json, random, sys
rng = random.Random(12345)
words = ["".join(chr(97 + rng.randrange(26)) for _ in range(rng.randrange(1, 12))) for _ in range(20000)]
counts = {}
for w in words:
    counts[w] = counts.get(w, 0) + 1
table = {}
for i in range(30000):
    key = "k%06d" % rng.randrange(100000)
    table.setdefault(key, []).append([i, i * i, str(i) * (i % 7), {"x": i % 13, "y": [i] * (i % 5)}])
big = 1
for i in range(1, 600):
    big *= i
chunks = []
for i in range(2000):
    s = "".join(words[(i * 7 + j) % len(words)] for j in range(i % 50))
    chunks.append(s.upper() + s[::-1])
    if i % 3 == 0:
        chunks.pop(0)
doc = {
    "counts": sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:500],
    "table": {k: table[k] for k in sorted(table)[:2000]},
    "big": str(big),
    "chunks": sorted(chunks)[:300],
    "lens": sum(len(c) for c in chunks),
}
out = json.dumps(doc, sort_keys=True, indent=1)
sys.stdout.write(out)
sys.stdout.write("\n%d %d %d\n" % (len(out), len(table), len(counts)))
del table, chunks, doc
print(sorted(set(words))[:50])
EOF

awk 'BEGIN {
    print "PRAGMA journal_mode=MEMORY;";
    print "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, val REAL, blob TEXT);";
    print "BEGIN;";
    x = 12345;
    for (i = 1; i <= 20000; i++) {
        x = (x * 1103515245 + 12345) % 2147483648;
        printf "INSERT INTO t VALUES (%d, \x27name%d\x27, %d, %d.%02d, \x27%s\x27);\n", i, x % 5000, x % 97, x % 100000, i % 100, substr("abcdefghijklmnopqrstuvwxyz0123456789", 1 + x % 20, 1 + i % 16);
    }
    print "COMMIT;";
    print "CREATE INDEX t_grp ON t(grp, name);";
    print "SELECT grp, count(*), sum(val), min(name), max(name) FROM t GROUP BY grp ORDER BY grp;";
    print "SELECT name, count(*) AS c FROM t GROUP BY name HAVING c > 7 ORDER BY c DESC, name LIMIT 50;";
    print "SELECT a.grp, count(*) FROM t a JOIN t b ON a.id = b.id + 1 AND a.grp = b.grp GROUP BY a.grp ORDER BY a.grp;";
    print "SELECT group_concat(blob, \x27,\x27) FROM (SELECT blob FROM t WHERE grp = 5 ORDER BY id);";
    print "SELECT count(*), total(length(blob)) FROM t WHERE name LIKE \x27name1%\x27;";
    print "UPDATE t SET blob = blob || blob || name WHERE id % 3 = 0;";
    print "DELETE FROM t WHERE id % 5 = 0;";
    print "VACUUM;";
    print "SELECT count(*), sum(length(blob)), avg(val) FROM t;";
}' >"$work/gen.sql"

cat >"$work/prog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct node { struct node *next; int key; char name[24]; };
static int cmp(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }
static unsigned long hash(const char *s) { unsigned long h = 5381; while (*s) h = h * 33 + (unsigned char)*s++; return h; }
int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000, *v = malloc(sizeof *v * (size_t)n);
    struct node *head = NULL;
    for (int i = 0; i < n; i++) {
        v[i] = (i * 7919) % 1009;
        struct node *nd = malloc(sizeof *nd);
        nd->key = v[i];
        snprintf(nd->name, sizeof nd->name, "node%d", i);
        nd->next = head, head = nd;
    }
    qsort(v, (size_t)n, sizeof *v, cmp);
    unsigned long h = 0;
    for (struct node *p = head; p; p = p->next) h ^= hash(p->name) + (unsigned long)p->key;
    printf("%d %d %lu\n", v[0], v[n - 1], h);
    return 0;
}
EOF

awk 'BEGIN { x = 7; for (i = 0; i < 200000; i++) { x = (x * 1103515245 + 12345) % 2147483648;
    printf "%08x %s %d\n", x, substr("the quick brown fox jumps over the lazy dog", 1 + x % 30, 1 + i % 13), i } }' \
    >"$work/lines.txt"

# ---- the programs: each writes everything that must be identical under $2 (an empty dir) ----
run_python() { "$py" "$work/alloc.py" >"$1/out"; }
run_sqlite() { sqlite3 "$1/db.sqlite" <"$work/gen.sql" >"$1/out" && sqlite3 "$1/db.sqlite" 'PRAGMA integrity_check; SELECT count(*) FROM t;' >>"$1/out"; }
run_gcc() {
    (cd "$1" && cp "$work/prog.c" prog.c && gcc -O2 -S -o prog.s prog.c && gcc -O2 -c -o prog.o prog.c &&
        gcc -o prog prog.o && ./prog 5000 >out && rm -f prog prog.c)
}
run_sort() {
    LC_ALL=C sort "$work/lines.txt" >"$1/out" &&
        LC_ALL=C sort -k2,2 -k1,1r --parallel=2 -S 1M "$work/lines.txt" >"$1/out2" &&
        LC_ALL=C sort -u -t' ' -k2,2 "$work/lines.txt" >"$1/out3"
}

declare -A needs=([python]=python3 [sqlite]=sqlite3 [gcc]=gcc [sort]=sort)
declare -A limit=([python]=60 [sqlite]=60 [gcc]=60 [sort]=60)
progs="python sqlite gcc sort"

# reference outputs (no preload)
declare -A ref_ok
for p in $progs; do
    command -v "${needs[$p]}" >/dev/null 2>&1 || continue
    mkdir -p "$work/ref-$p"
    if timeout -k 5 "${limit[$p]}" bash -c "$(declare -f run_$p); run_$p '$work/ref-$p'" >"$work/ref-$p.log" 2>&1 &&
        [ -s "$work/ref-$p/out" ]; then
        ref_ok[$p]=1
    else
        ref_ok[$p]=0
    fi
done

for inst in $INSTANCES; do
    sm_lib "$inst" || continue
    lib="$SM_LIB"
    for p in $progs; do
        name="$inst/preload/${needs[$p]}"
        if ! command -v "${needs[$p]}" >/dev/null 2>&1; then
            sm_skip "$name" "${needs[$p]} not installed"
            continue
        fi
        if [ "${ref_ok[$p]}" != 1 ]; then
            sm_fail "$name" "the reference run without preload failed: $(tail -c 200 "$work/ref-$p.log" | tr '\n' ' ')"
            continue
        fi
        dir="$work/$inst-$p"
        rm -rf "$dir" && mkdir -p "$dir"
        # the whole program (and its children: cc1, as, ld, sort's threads) runs preloaded
        timeout -k 5 "${limit[$p]}" env LD_PRELOAD="$lib" \
            bash -c "$(declare -f run_$p); run_$p '$dir'" >"$dir.log" 2>&1
        rc=$?
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            sm_fail "$name" "timed out after ${limit[$p]}s"
        elif [ "$rc" -ne 0 ]; then
            sm_fail "$name" "exited with status $rc: $(tail -c 300 "$dir.log" | tr '\n' ' ')"
        elif [ -s "$dir.log" ]; then
            sm_fail "$name" "wrote to stderr: $(head -c 300 "$dir.log" | tr '\n' ' ')"
        elif ! diff -r -q "$work/ref-$p" "$dir" >"$dir.diff" 2>&1; then
            sm_fail "$name" "output differs from the run without preload: $(head -c 300 "$dir.diff" | tr '\n' ' ')"
        else
            sm_ok "$name"
        fi
    done
done
exit "$SM_FAILED"
