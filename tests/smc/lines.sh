#!/usr/bin/env bash
# Model lines that use every OS layer, core layer, add-on layer and socket of the catalogue
# (tests/smc/lines.txt) check, build and work: a drop-in library (malloc_socket) runs sh and ls
# preloaded with the same output as without; a prefixed library (custom_socket, custom_param,
# cmalloc_socket) is linked into a program that allocates, fills, verifies, reallocates and frees
# through its API; kernel_socket's library exports its kmalloc API. Also: every layer and socket of
# the catalogue appears in some line here, in tests/smc/paper-lines.txt or tests/smc/instances.txt.
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/smc/lines.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Checks, builds and runs each line of tests/smc/lines.txt (drop-in: preloaded into sh and ls;
prefixed: linked into a program using its API), then checks that the lines of the smc tests
together use every layer and socket the catalogue lists. Prints `ok smc-lines: <name>/<case>` or
`not ok smc-lines: <name>/<case>: <why>`.

Environment: BUILD (default build: $BUILD/smc), SM_ROOT, CC.
USAGE
            exit 0 ;;
        -*) echo "tests/smc/lines.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok smc-lines: setup: cannot cd to the repository root"; exit 1; }
build="${BUILD:-build}"
smc="$build/smc" work="$build/smc-lines"
mkdir -p "$work"
[ -x "$smc" ] || { echo "not ok smc-lines: setup: $smc missing (not built)"; exit 1; }
ok() { echo "ok smc-lines: $1"; }
fail() { echo "not ok smc-lines: $1: $2"; }

cat >"$work/use.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#ifdef PARTITIONED /* cmalloc_socket: the partition (CPU) travels with each call */
void *CAT(P, cmalloc)(size_t, int);
void *CAT(P, crealloc)(void *, size_t, int);
void CAT(P, cfree)(void *);
#define MALLOC(n) CAT(P, cmalloc)(n, (int)(n) % 4)
#define REALLOC(p, n) CAT(P, crealloc)(p, n, (int)(n) % 4)
#define FREE(p) CAT(P, cfree)(p)
#else
void *CAT(P, malloc)(size_t);
void *CAT(P, realloc)(void *, size_t);
void CAT(P, free)(void *);
#define MALLOC(n) CAT(P, malloc)(n)
#define REALLOC(p, n) CAT(P, realloc)(p, n)
#define FREE(p) CAT(P, free)(p)
#endif
int main(void)
{
    enum { N = 4000 };
    static unsigned char *p[N];
    static size_t n[N];
    unsigned long bad = 0;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            n[i] = (size_t)(i * 7919 + round * 104729) % (i % 50 == 0 ? 300000 : 3000) + 1;
            p[i] = MALLOC(n[i]);
            if (!p[i]) return 2;
            memset(p[i], (i + round) & 0xff, n[i]);
        }
        for (int i = 0; i < N; i += 3) {
            size_t m = n[i] * 2 + 5;
            unsigned char *q = REALLOC(p[i], m);
            if (!q) return 3;
            for (size_t k = 0; k < n[i]; k++) bad += q[k] != (unsigned char)((i + round) & 0xff);
            memset(q, (i + round) & 0xff, m);
            p[i] = q, n[i] = m;
        }
        for (int i = 0; i < N; i++) {
            for (size_t k = 0; k < n[i]; k++) bad += p[i][k] != (unsigned char)((i + round) & 0xff);
            FREE(p[i]);
        }
    }
    printf("bad=%lu\n", bad);
    return bad != 0;
}
C
ref=$(sh -c 'ls -la /usr/bin /usr/lib | LC_ALL=C sort | cksum')
while IFS='|' read -r name line; do
    name="${name// /}"
    case "$name" in '' | \#*) continue ;; esac
    line="${line# }"
    if ! out=$("$smc" check -q "$line" 2>&1) || [ -n "$out" ]; then
        fail "$name/check" "$(echo "$out" | head -2 | tr '\n' ' ')"
        continue
    fi
    ok "$name/check"
    case "$line" in
    *::malloc_socket)
        lib="$work/lib$name.so"
        if ! out=$("$smc" build -o "$lib" "$line" 2>&1); then
            fail "$name/build" "$(echo "$out" | grep -m2 -E 'error|smc' | tr '\n' ' ')"
            continue
        fi
        ok "$name/build"
        got=$(LD_PRELOAD="$PWD/$lib" sh -c 'ls -la /usr/bin /usr/lib | LC_ALL=C sort | cksum' 2>"$work/$name.err")
        if [ "$got" = "$ref" ]; then ok "$name/preload_sh_ls"
        else fail "$name/preload_sh_ls" "output differs ($got, want $ref): $(head -2 "$work/$name.err" | tr '\n' ' ')"; fi
        ;;
    *::kernel_socket)
        lib="$work/lib$name.a"
        if out=$("$smc" build --prefix "${name}_" -o "$lib" "$line" 2>&1) && nm "$lib" | grep -q " T ${name}_kmalloc$"; then
            ok "$name/build_kmalloc_api"
        else
            fail "$name/build_kmalloc_api" "$(echo "$out" | grep -m2 -E 'error|smc' | tr '\n' ' ')"
        fi
        ;;
    *)
        lib="$work/lib$name.a"
        if ! out=$("$smc" build --prefix "${name}_" -o "$lib" "$line" 2>&1); then
            fail "$name/build" "$(echo "$out" | grep -m2 -E 'error|smc' | tr '\n' ' ')"
            continue
        fi
        ok "$name/build"
        part=
        case "$line" in *::cmalloc_socket) part=-DPARTITIONED ;; esac
        if ${CC:-cc} -std=c11 -O1 -DP="${name}_" $part "$work/use.c" "$lib" -o "$work/use_$name" -lpthread -ldl >"$work/use_$name.log" 2>&1 &&
            out=$("$work/use_$name" 2>&1) && [ "$(echo "$out" | tail -1)" = bad=0 ]; then
            ok "$name/linked_program"
        else
            fail "$name/linked_program" "$(cat "$work/use_$name.log" | head -2 | tr '\n' ' ')${out:-}"
        fi
        ;;
    esac
done <tests/smc/lines.txt

# Coverage: every layer and socket of the catalogue is used by some tested line.
used=$(cat tests/smc/lines.txt tests/smc/instances.txt tests/smc/paper-lines.txt | grep -v '^#' | sed 's/\\_/_/g' |
    grep -oE '[a-z][a-z0-9_]*' | sort -u)
missing=""
for layer in $("$smc" catalogue | awk '/^[A-Z]/ { section = $0; next } section !~ /Policies/ && /^  [a-z]/ { print $1 }'); do
    [ "$layer" = cond_bypass ] && continue # needs C: smc check refuses it (tests/smc/errors.sh)
    echo "$used" | grep -qx "$layer" || missing="$missing $layer"
done
[ -z "$missing" ] && ok "coverage/every_layer_and_socket" || fail "coverage/every_layer_and_socket" "not in any tested line:$missing"
exit 0
