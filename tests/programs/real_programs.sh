#!/usr/bin/env bash
# Real programs under LD_PRELOAD=lib<inst>.so for every instance in $INSTANCES: the output must
# be byte-identical to the run without the preload (glibc's malloc). One case per program and
# instance, <inst>/preload/<program>:
#   python3  a script that allocates a lot (dicts, lists, strings, big ints, json of a
#            deterministic structure, sorted output)
#   sqlite3  generated SQL: a table of 20000 deterministic rows, an index, aggregate queries
#   gcc      compiles a small C file (-O2 -S and -c: the assembly and the object are compared)
#   sort     LC_ALL=C sort of 200k generated lines (also with 2 threads and a small buffer)
#   git      init, add and commit a generated tree of ~300 files in nested directories, modify 50,
#            a branch merged with --no-ff, another rebased, then log --stat, diff, rev-parse, gc,
#            fsck --full, count-objects (fixed names, dates, no global or system config)
#   g++      compiles a template-heavy C++17 file (-O2 -S and -c), links and runs it
#   redis    redis-server (the program under test, on a free port) loaded with 20000 commands
#            through redis-cli --pipe into db 1, then redis-benchmark (db 0, exit status only);
#            compared: db 1's DBSIZE, DEBUG DIGEST, keys and some values
#   pytests  a slice of Python's own test suite (/usr/bin/python3 -m test, Debian's
#            libpython3.X-testsuite): the tests run and the result lines, no timings
# A program that is not installed is a skip. Work happens in a mktemp -d directory, removed at exit.
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/programs/real_programs.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Runs real programs (python3, sqlite3, gcc, sort, git, g++, redis-server with redis-cli and
redis-benchmark, a slice of Python's test suite) under LD_PRELOAD=lib<inst>.so for every
instance; the output must be byte-identical to the run with glibc's malloc. A program that is
not installed is a skip. Prints `ok programs: <inst>/preload/<program>` or `not ok ...: <why>`.

Environment: BUILD (default build), INSTANCES (empty: one skip line), SM_ROOT.
USAGE
            exit 0 ;;
        -*) echo "tests/programs/real_programs.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
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

# C++17 for g++: templates (recursive, variadic, an expression template), containers, variant
cat >"$work/prog.cpp" <<'EOF'
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <variant>
#include <vector>

template <unsigned N> struct Fib { static constexpr unsigned long long value = Fib<N - 1>::value + Fib<N - 2>::value; };
template <> struct Fib<0> { static constexpr unsigned long long value = 0; };
template <> struct Fib<1> { static constexpr unsigned long long value = 1; };

template <unsigned... Ns> constexpr unsigned long long fib_sum() { return (Fib<Ns>::value + ... + 0ULL); }

// a small expression template over fixed-size vectors
template <class E> struct Expr {
    const E &self() const { return static_cast<const E &>(*this); }
    double operator[](std::size_t i) const { return self()[i]; }
};
template <std::size_t N> struct Vec : Expr<Vec<N>> {
    double d[N];
    Vec() : d() {}
    explicit Vec(double seed) { for (std::size_t i = 0; i < N; i++) d[i] = seed * double(i + 1); }
    template <class E> Vec &operator=(const Expr<E> &e) { for (std::size_t i = 0; i < N; i++) d[i] = e.self()[i]; return *this; }
    double operator[](std::size_t i) const { return d[i]; }
};
template <class L, class R, class Op> struct BinOp : Expr<BinOp<L, R, Op>> {
    const L &l; const R &r;
    BinOp(const L &a, const R &b) : l(a), r(b) {}
    double operator[](std::size_t i) const { return Op::apply(l[i], r[i]); }
};
struct AddOp { static double apply(double a, double b) { return a + b; } };
struct MulOp { static double apply(double a, double b) { return a * b; } };
template <class L, class R> BinOp<L, R, AddOp> operator+(const Expr<L> &a, const Expr<R> &b) { return {a.self(), b.self()}; }
template <class L, class R> BinOp<L, R, MulOp> operator*(const Expr<L> &a, const Expr<R> &b) { return {a.self(), b.self()}; }

// a recursive tuple printer and a type list
static std::string str(const std::string &s) { return s; }
static std::string str(const char *s) { return s; }
template <class T> std::string str(T v) { return std::to_string(v); }
struct Out {
    std::string s;
    template <class T> Out &operator<<(const T &v) { s += str(v); return *this; }
};
template <class Tuple, std::size_t I = 0> void put_tuple(std::string &os, const Tuple &t) {
    if constexpr (I < std::tuple_size_v<Tuple>) {
        os += (I ? "," : "(") + str(std::get<I>(t));
        put_tuple<Tuple, I + 1>(os, t);
    } else {
        os += ")";
    }
}
template <class... Ts> struct TypeList { static constexpr std::size_t size = sizeof...(Ts); };
template <class T, class... Ts> constexpr std::size_t index_of() {
    std::size_t i = 0, r = sizeof...(Ts);
    ((std::is_same_v<T, Ts> ? (r = (r == sizeof...(Ts) ? i : r), ++i) : ++i), ...);
    return r;
}

struct Rec { std::string name; int grp; double score; std::vector<int> tags; };

using Value = std::variant<long, double, std::string, std::vector<long>>;
struct Show {
    std::string operator()(long v) const { return "L" + std::to_string(v); }
    std::string operator()(double v) const { char b[32]; std::snprintf(b, sizeof b, "D%.3f", v); return b; }
    std::string operator()(const std::string &s) const { return "S" + s; }
    std::string operator()(const std::vector<long> &v) const { return "V" + std::to_string(v.size()) + ":" + std::to_string(std::accumulate(v.begin(), v.end(), 0L)); }
};

template <class K, class V> class Cache {
    std::map<K, V> m_;
    std::size_t cap_;
public:
    explicit Cache(std::size_t cap) : cap_(cap) {}
    V &get(const K &k, const std::function<V(const K &)> &make) {
        auto it = m_.find(k);
        if (it != m_.end()) return it->second;
        if (m_.size() >= cap_) m_.erase(m_.begin());
        return m_.emplace(k, make(k)).first->second;
    }
    std::size_t size() const { return m_.size(); }
};

static unsigned long long rng_state = 88172645463325252ULL;
static unsigned rnd() { rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17; return unsigned(rng_state >> 11); }

int main() {
    Out os;
    os << "fib " << Fib<40>::value << " " << Fib<90>::value << " " << fib_sum<1, 2, 3, 10, 20, 30>() << "\n";
    os << "types " << TypeList<int, long, char>::size << " " << index_of<long, int, char, long, double>() << "\n";

    Vec<64> a(1.5), b(0.25), c(2.0), r;
    r = a + b * c + a * a;
    double s = 0; for (std::size_t i = 0; i < 64; i++) s += r[i];
    char buf[64]; std::snprintf(buf, sizeof buf, "%.4f", s); os << "expr " << buf << "\n";

    std::vector<Rec> recs;
    for (int i = 0; i < 20000; i++) {
        Rec x{"r" + std::to_string(rnd() % 5000), int(rnd() % 37), double(rnd() % 100000) / 7.0, {}};
        for (unsigned k = 0; k < rnd() % 6; k++) x.tags.push_back(int(rnd() % 100));
        recs.push_back(std::move(x));
    }
    std::sort(recs.begin(), recs.end(), [](const Rec &p, const Rec &q) {
        return std::tie(p.grp, p.name, p.score) < std::tie(q.grp, q.name, q.score);
    });
    std::map<int, std::tuple<std::size_t, double, std::string>> per_grp;
    std::unordered_map<std::string, std::vector<std::size_t>> by_name;
    for (std::size_t i = 0; i < recs.size(); i++) {
        auto &t = per_grp[recs[i].grp];
        std::get<0>(t)++; std::get<1>(t) += recs[i].score;
        if (std::get<2>(t).empty() || recs[i].name > std::get<2>(t)) std::get<2>(t) = recs[i].name;
        by_name[recs[i].name].push_back(i);
    }
    for (auto &[g, t] : per_grp) {
        std::string ts; put_tuple(ts, std::make_tuple(g, std::get<0>(t), long(std::get<1>(t)), std::get<2>(t)));
        os << ts << "\n";
    }
    std::map<std::size_t, std::string> top;   // the most frequent names (the least of equals)
    for (auto &kv : by_name) {
        auto &best = top[kv.second.size()];
        if (best.empty() || kv.first < best) best = kv.first;
    }
    for (auto it = top.rbegin(); it != top.rend(); ++it) os << it->second << "=" << it->first << " ";
    os << "\nnames " << by_name.size() << "\n";

    std::vector<Value> vals;
    for (int i = 0; i < 5000; i++) {
        switch (rnd() % 4) {
        case 0: vals.emplace_back(long(rnd())); break;
        case 1: vals.emplace_back(double(rnd() % 1000) / 3.0); break;
        case 2: vals.emplace_back(std::string(rnd() % 40, char('a' + rnd() % 26))); break;
        default: vals.emplace_back(std::vector<long>(rnd() % 50, long(i))); break;
        }
    }
    std::map<std::size_t, std::size_t> kinds;
    std::string joined;
    for (auto &v : vals) {
        kinds[v.index()]++;
        std::string t = std::visit(Show{}, v);
        if (joined.size() < 4000) joined += t + ";";
    }
    for (auto &[k, n] : kinds) os << "kind" << k << "=" << n << " ";
    os << "\njoined " << joined.size() << " " << std::hash<std::string>{}(joined) % 1000003 << "\n";

    std::string text;
    for (int i = 0; i < 3000; i++) text += "word" + std::to_string(i % 97) + (i % 11 ? " " : "\n");
    std::string up = text; std::transform(up.begin(), up.end(), up.begin(), [](unsigned char ch) { return char(ch >= 'a' && ch <= 'z' ? ch - 32 : ch); });
    std::size_t pos = 0, count = 0;
    while ((pos = up.find("WORD4", pos)) != std::string::npos) { up.replace(pos, 5, "W4"); count++; pos += 2; }
    std::string rev(text.rbegin(), text.rend());
    os << "text " << text.size() << " " << up.size() << " " << count << " " << rev.substr(0, 20) << "|" << up.substr(up.size() - 30) << "\n";

    Cache<int, std::string> cache(64);
    std::function<std::string(const int &)> make = [](const int &k) { return std::string(std::size_t(k % 200), char('A' + k % 26)); };
    std::size_t total = 0;
    for (int i = 0; i < 20000; i++) total += cache.get(int(rnd() % 300), make).size();
    os << "cache " << cache.size() << " " << total << "\n";

    std::fputs(os.s.c_str(), stdout);
    return 0;
}
EOF

# git: the trees of the commits (v1: ~300 files; overlays v2, feat, main3, topic)
mkdir -p "$work/git"
awk -v root="$work/git" '
function path(i,   top, p) {
    split("src lib docs tests tools", tops, " ")
    p = tops[1 + i % 5] "/m" (i * 7) % 6
    if (i % 3) p = p "/p" (i * 11) % 4
    if (i % 7 == 0) p = p "/deep/er"
    return p
}
function ext(i) { return i % 4 == 0 ? ".c" : i % 4 == 1 ? ".md" : ".txt" }
# file i of version v (0: the original) into dir; lines of words from an LCG seeded by i
function gen(dir, i, v,   f, n, l, x, k, w, line) {
    f = dir "/" path(i) "/f" i ext(i)
    dirs[dir "/" path(i)] = 1
    n = 3 + (i * i * 37 + 11) % 220
    if (i % 50 == 0) n = 1500
    x = i * 7919 + 17
    out[f] = ""
    for (l = 1; l <= n; l++) {
        line = sprintf("%04d", l)
        for (k = 0; k < 1 + (l + i) % 12; k++) {
            x = (x * 1103515245 + 12345) % 2147483648
            line = line " " substr("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu", 1 + x % 60, 2 + x % 9)
        }
        if (v && (l * 7 + v * 3) % 9 == 0) line = "v" v ": " toupper(line)
        out[f] = out[f] line "\n"
    }
    for (l = 0; l < (v ? 2 + v : 0); l++) out[f] = out[f] "added in version " v " line " l " of file " i "\n"
}
BEGIN {
    for (i = 0; i < 300; i++) gen(root "/v1", i, 0)
    for (i = 1; i < 300; i += 6) gen(root "/v2", i, 1)          # 50 modified files
    for (i = 300; i < 308; i++) gen(root "/v2", i, 0)           # 8 new files
    for (i = 3; i < 300; i += 50) print path(i) "/f" i ext(i) >(root "/v2.del")   # 6 deleted
    for (i = 2; i < 300; i += 15) gen(root "/feat", i, 2)       # branch feature: 20 files
    for (i = 310; i < 315; i++) gen(root "/feat", i, 2)
    for (i = 5; i < 300; i += 30) gen(root "/main3", i, 3)      # main again: 10 files
    for (i = 9; i < 300; i += 30) gen(root "/topic", i, 4)      # branch topic (rebased): 10 files
    for (d in dirs) print d >(root "/dirs")
    close(root "/dirs")
    system("xargs mkdir -p <\"" root "/dirs\"")
    for (f in out) { printf "%s", out[f] >f; close(f) }
    print path(4) "/f4" ext(4) >(root "/feat.mv")
}'

# redis: 20000 commands in RESP for redis-cli --pipe, into db 1 (redis-benchmark uses db 0)
LC_ALL=C awk 'function cmd(s,   n, a, i, r) {
        n = split(s, a, " ")
        r = "*" n "\r\n"
        for (i = 1; i <= n; i++) r = r "$" length(a[i]) "\r\n" a[i] "\r\n"
        printf "%s", r
    }
    BEGIN {
        cmd("SELECT 1")
        x = 4242
        for (i = 0; i < 20000; i++) {
            x = (x * 1103515245 + 12345) % 2147483648
            r = int(x / 65536)
            v = substr("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ", 1 + r % 40, 1 + i % 23)
            big = ""
            if (i % 97 == 0) for (k = 0; k < 1 + r % 300; k++) big = big v
            op = r % 10
            if (op == 0)      cmd("SET str:" r % 3000 " " v (i % 97 ? "" : big))
            else if (op == 1) cmd("HSET hash:" i % 211 " f" r % 500 " " v)
            else if (op == 2) cmd("LPUSH list:" i % 101 " " v i)
            else if (op == 3) cmd("SADD set:" i % 151 " m" r % 2000)
            else if (op == 4) cmd("ZADD zset:" i % 53 " " r % 10007 " z" r % 3000)
            else if (op == 5) cmd("INCRBY cnt:" i % 307 " " r % 1000)
            else if (op == 6) cmd("APPEND app:" i % 89 " " v (i % 97 ? "" : big))
            else if (op == 7) cmd("RPUSH list:" i % 101 " r" v)
            else if (op == 8) cmd("HSET hash:" i % 211 " g" i " " v v)
            else if (i % 5 == 0) cmd("DEL str:" r % 3000 " set:" i % 151)
            else if (i % 5 == 1) cmd("LPOP list:" i % 101)
            else if (i % 5 == 2) cmd("SREM set:" i % 151 " m" r % 2000)
            else if (i % 5 == 3) cmd("HDEL hash:" i % 211 " f" r % 500)
            else cmd("ZREM zset:" i % 53 " z" r % 3000)
        }
    }' >"$work/redis.resp"

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
# as run_gcc, for C++
run_gxx() {
    (cd "$1" && cp "$work/prog.cpp" prog.cpp && g++ -std=c++17 -O2 -S -o prog.s prog.cpp &&
        g++ -std=c++17 -O2 -c -o prog.o prog.cpp && g++ -o prog prog.o && ./prog >out && rm -f prog prog.cpp)
}
# the repository and $HOME are outside $1: only the outputs are compared
run_git() {
    local repo="$1.repo" c=0 gdir="$work/git"
    rm -rf "$repo" "$1.home" && mkdir -p "$repo" "$1.home" || return 1
    export HOME="$1.home" XDG_CONFIG_HOME="$1.home/.config" GIT_CONFIG_NOSYSTEM=1 TZ=UTC LC_ALL=C \
        GIT_EDITOR=true GIT_MERGE_AUTOEDIT=no GIT_AUTHOR_NAME='A U Thor' GIT_AUTHOR_EMAIL=author@example.com \
        GIT_COMMITTER_NAME='C O Mitter' GIT_COMMITTER_EMAIL=committer@example.com
    unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
    g() {
        git -c user.name='C O Mitter' -c user.email=committer@example.com -c init.defaultBranch=main \
            -c core.autocrlf=false -c gc.auto=0 -c gc.autoDetach=false -c maintenance.auto=false "$@"
    }
    # every commit (and the rebase) one day later than the one before
    tick() { c=$((c + 1)); export GIT_AUTHOR_DATE="2021-03-0${c}T12:00:00+0000" GIT_COMMITTER_DATE="2021-03-0${c}T12:00:00+0000"; }
    (
        set -e
        cd "$repo"
        g init -q .
        cp -R "$gdir/v1/." .
        g add -A && tick && g commit -q -m "initial: 300 files"
        cp -R "$gdir/v2/." . && xargs rm -f <"$gdir/v2.del"
        g add -A && tick && g commit -q -m "modify 50 files, add 8, delete 6"
        g checkout -q -b feature
        cp -R "$gdir/feat/." . && g mv "$(cat "$gdir/feat.mv")" renamed-f4.c
        g add -A && tick && g commit -q -m "feature: 20 files, 5 new, a rename"
        g checkout -q main
        cp -R "$gdir/main3/." .
        g add -A && tick && g commit -q -m "main: 10 files"
        g checkout -q -b topic
        cp -R "$gdir/topic/." .
        g add -A && tick && g commit -q -m "topic: 10 files"
        g checkout -q main
        tick && g merge -q --no-ff -m "merge feature" feature
        g checkout -q topic
        tick && g rebase -q main
        g checkout -q main && g merge -q --ff-only topic
        g log --stat --format=fuller >"$1/out"
        g log --graph --all --format='%H %P %s' >"$1/graph"
        g diff HEAD~1 --stat >"$1/diffstat1"
        g diff HEAD~1 >"$1/diff1"
        g diff -M --stat "$(g rev-list --max-parents=0 HEAD)" HEAD >"$1/diffstat-all"
        g diff -M "$(g rev-list --max-parents=0 HEAD)" HEAD >"$1/diff-all"
        { g rev-parse HEAD HEAD^{tree} && g for-each-ref && g ls-tree -r HEAD; } >"$1/refs"
        g gc -q
        g fsck --full --no-progress >"$1/fsck" 2>&1
        g count-objects -v | grep -vE '^(size|size-pack|size-garbage):' >"$1/count"
        g status --porcelain >"$1/status"
    ) || return 1
    rm -rf "$repo" "$1.home"
}
run_redis() {
    local port try cli out="$1/out" dbg="" ok=0
    redis_pid=""   # not local: the EXIT trap of this shell kills the server on any failure
    # Redis 7 refuses DEBUG unless enabled (DEBUG DIGEST: a digest of the whole data set)
    [ "$(redis-server --version | sed -n 's/.* v=\([0-9]*\).*/\1/p')" -ge 7 ] 2>/dev/null && dbg="--enable-debug-command local"
    trap '[ -z "$redis_pid" ] || { kill -9 "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; }' EXIT
    for try in 1 2 3 4 5; do
        port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        ss -ltnH "sport = :$port" 2>/dev/null | grep -q . && continue
        rm -rf "$1.rdir" && mkdir -p "$1.rdir" || return 1
        # the server is the program under test (preloaded when the caller preloads this shell)
        redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
            --dir "$1.rdir" --logfile "$1.rdir/log" $dbg &
        redis_pid=$!
        for _ in $(seq 100); do   # 10 s at most
            [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && { ok=1; break; }
            kill -0 "$redis_pid" 2>/dev/null || break
            sleep 0.1
        done
        [ "$ok" = 1 ] && break
        kill -9 "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; redis_pid=""
    done
    if [ "$ok" != 1 ]; then
        echo "redis-server did not answer PING (5 ports tried): $(tail -c 300 "$1.rdir/log" 2>/dev/null)" >&2
        return 1
    fi
    cli="redis-cli -h 127.0.0.1 -p $port"
    $cli --pipe <"$work/redis.resp" >"$1.pipe" 2>&1 && grep -q '^errors: 0, replies: 20001$' "$1.pipe" ||
        { echo "redis-cli --pipe: $(tail -c 300 "$1.pipe")" >&2; return 1; }
    if command -v redis-benchmark >/dev/null 2>&1; then
        # random keys in db 0 (the benchmark's default): the data set in db 1 stays deterministic
        redis-benchmark -h 127.0.0.1 -p "$port" -n 20000 -q -t set,get,lpush,lpop,sadd,hset -P 16 -r 1000 -d 100 \
            >"$1.bench" 2>&1 || { echo "redis-benchmark failed: $(tail -c 300 "$1.bench")" >&2; return 1; }
    fi
    {
        $cli -n 1 DBSIZE
        $cli -n 1 INFO keyspace | tr -d '\r' | grep '^db1:'
        $cli -n 0 FLUSHDB          # only db 1 is left: the digest covers the deterministic data
        [ -z "$dbg" ] || $cli DEBUG DIGEST
        $cli -n 1 KEYS '*' | sort
        for k in 0 1 2 50; do
            $cli -n 1 HGETALL hash:$k | paste - - | sort
            $cli -n 1 LRANGE list:$k 0 -1
            $cli -n 1 SMEMBERS set:$k | sort
            $cli -n 1 ZRANGE zset:$k 0 -1 WITHSCORES
            $cli -n 1 GET cnt:$k
            $cli -n 1 STRLEN app:$k
        done
        $cli -n 1 MGET $($cli -n 1 --scan --pattern 'str:*' | sort | head -100)
    } >"$out" 2>&1
    $cli SHUTDOWN NOSAVE >/dev/null 2>&1
    wait "$redis_pid"; local rc=$?
    redis_pid=""
    [ "$rc" -eq 0 ] || { echo "redis-server exited with status $rc: $(tail -c 300 "$1.rdir/log")" >&2; return 1; }
    rm -rf "$1.rdir" "$1.pipe" "$1.bench"
}
# Debian's interpreter and test suite (not a pyenv one); timings are left out of $1/out
run_pytests() {
    (cd "$work" && /usr/bin/python3 -m test test_list test_dict test_re test_bisect test_heapq test_collections \
        test_string test_tuple test_sort test_ordered_dict test_userdict test_defaultdict test_unicode) >"$1.raw" 2>&1
    local rc=$?
    sed -nE -e 's/^.*\[ *[0-9]+\/[0-9]+(\/[0-9]+)?\] ([^ ]+).*$/\2/p' -e '/^(== Tests result: |All [0-9]+ tests OK)/p' \
        "$1.raw" >"$1/out"
    [ "$rc" -eq 0 ] || { echo "python3 -m test exited with status $rc: $(tail -c 400 "$1.raw")" >&2; return 1; }
}

# needs: the case name, and the command that must be installed (see also have below)
declare -A needs=([python]=python3 [sqlite]=sqlite3 [gcc]=gcc [sort]=sort [git]=git [gxx]=g++
    [redis]=redis-server [pytests]=python3-testsuite)
declare -A limit=([python]=60 [sqlite]=60 [gcc]=60 [sort]=60 [git]=60 [gxx]=90 [redis]=60 [pytests]=120)
progs="python sqlite gcc sort git gxx redis pytests"

# have P: P can run here; otherwise sets why
have() {
    case "$1" in
        redis) command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 ||
            { why="redis-server or redis-cli not installed"; return 1; } ;;
        pytests) /usr/bin/python3 -c 'import test.libregrtest, test.test_list' >/dev/null 2>&1 ||
            { why="Python's test suite not installed (libpython3.X-testsuite for /usr/bin/python3)"; return 1; } ;;
        *) command -v "${needs[$1]}" >/dev/null 2>&1 || { why="${needs[$1]} not installed"; return 1; } ;;
    esac
}

# reference outputs (no preload)
declare -A ref_ok
for p in $progs; do
    have "$p" || continue
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
        if ! have "$p"; then
            sm_skip "$name" "$why"
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
        elif ! diff -r "$work/ref-$p" "$dir" >"$dir.diff" 2>&1; then
            # the first lines that differ, not only which files: a rare difference must say what it was
            sm_fail "$name" "output differs from the run without preload: $(head -c 600 "$dir.diff" | tr '\n' ' ')"
        else
            sm_ok "$name"
        fi
    done
done
exit "$SM_FAILED"
