#!/usr/bin/env bash
# check-headers.sh — every public header (include/**/*.h) compiles on its own and says what it is.
# Usage: tools/check-headers.sh [header ...]   (default: every header under include/)
# Env: CC (default cc), HEADER_CFLAGS (extra flags). Prints one line per header:
#   ok headers: <path>   |   not ok headers: <path>: <why>
# and exits 1 if any header failed.
#
# Every header must open with a comment (/* or //) saying what it is (its first non-blank line).
#
# Guarded headers (an include guard `#ifndef SUNMAO_..._H`) are compiled alone:
#   printf '#include <sunmao/...>\n' | $CC -fsyntax-only -std=c11 -D_GNU_SOURCE -Iinclude \
#       -Wall -Wextra -Werror -x c -
#
# Template headers (no guard: layers, size_handle, ...) need a minimal instantiation, given by a
# line in the header (anywhere, usually in the top comment):
#   @check: TOKEN TOKEN ...
# Tokens are separated by blanks and processed in order:
#   NAME=VALUE   ->  #define NAME VALUE        (VALUE has no blanks; write (1<<20), not (1 << 20))
#   NAME         ->  #define NAME
#   F(a)=BODY    ->  #define F(a) BODY      (function-like, e.g. SM_API(n)=t_##n)
#   <path>       ->  #include <path>           (e.g. <sunmao/policies/sync/mutex.h>)
# The defines and includes come first, then `#include <the header>`. `@check:` with no tokens
# means "compiles as is". A fake next layer is requested with a separate line (or a trailing
# token on the @check line):
#   @check-next: fake
# which first does `#define SM_LAYER fake_next` + `#include "tests/support/fake_next.h"`, then
# defines SM_NEXT=fake_next unless the @check line sets SM_NEXT itself. `@check-next: stable` puts
# segfit_lf (log2b classes) over the fake as `stable_next`, for a layer that needs type-stable
# memory (capability STABLE) below it. Example:
#   /* ...  @check: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex
#    *      @check-next: fake */
# Only the first @check line of a header is used.
# A template header without a @check line fails, unless the table at the end of this script
# (FALLBACK, same syntax, `path: tokens`) has an entry for it; the in-header line wins.
set -u -f
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        -h | --help)
            cat <<'USAGE'
usage: tools/check-headers.sh [-h|--help] [--] [header ...]     (or: make check-headers)

Checks that each public header compiles on its own (-Wall -Wextra -Werror; a template header
with the instantiation its `@check:` line gives) and opens with a comment saying what it is.
Prints `ok headers: <path>` or `not ok headers: <path>: <why>` per header; exits 1 if any failed.
Headers are paths from the repository root (default: every include/**/*.h); the comment at the
top of this script describes the @check syntax.

Environment: CC (default cc), HEADER_CFLAGS (extra compiler flags).
USAGE
            exit 0 ;;
        --) shift; args+=("$@"); break ;;
        -*) echo "tools/check-headers.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) args+=("$1") ;;
    esac
    shift
done
set -- "${args[@]+"${args[@]}"}"
cd "$(dirname "$0")/.." || { echo "check-headers: cannot cd to the repository root" >&2; exit 2; }
CC="${CC:-cc}"
command -v "$CC" >/dev/null 2>&1 || { echo "check-headers: compiler '$CC' not found" >&2; exit 2; }
FLAGS=(-fsyntax-only -std=c11 -D_GNU_SOURCE -Iinclude -I. -Wall -Wextra -Werror ${HEADER_CFLAGS:-})

# Fallback @check lines for template headers that do not carry one yet (path relative to the root).
FALLBACK=$(cat <<'EOF'
include/sunmao/core/layer_end.h: <sunmao/core/layer.h> SM_LAYER=t SM_LAYER_OFFERS=SM_CAP_ALL @check-next: fake
include/sunmao/policies/size_handle.h: <sunmao/core/layer.h> SM_LAYER=t
include/sunmao/policies/sizeclass/interval.h: SM_SIZECLASS_NAME=t SM_SIZECLASS_INTERVALS=(128,16),(1024,64),(8192,512)
include/sunmao/os/brk_heap.h: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex <sunmao/policies/err/warn.h> SM_ERR=warn
include/sunmao/os/malloc_heap.h: SM_LAYER=t <sunmao/policies/err/warn.h> SM_ERR=warn
include/sunmao/os/mmap_heap.h: SM_LAYER=t <sunmao/policies/err/warn.h> SM_ERR=warn
include/sunmao/os/sheap.h: SM_LAYER=t <sunmao/policies/sync/none.h> SM_SYNC=none <sunmao/policies/err/warn.h> SM_ERR=warn
include/sunmao/layers/addon/passthrough.h: SM_LAYER=t @check-next: fake
include/sunmao/layers/core/buddy_glk.h: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex <sunmao/policies/err/warn.h> SM_ERR=warn @check-next: fake
include/sunmao/layers/core/slab_lk.h: SM_LAYER=t <sunmao/policies/sync/spinlock.h> SM_SYNC=spinlock <sunmao/policies/sizeclass/tc.h> SM_SIZECLASS=tc <sunmao/policies/err/warn.h> SM_ERR=warn @check-next: fake
include/sunmao/layers/core/tlsf_glk.h: SM_LAYER=t <sunmao/policies/sync/mutex.h> SM_SYNC=mutex <sunmao/policies/err/warn.h> SM_ERR=warn @check-next: fake
include/sunmao/sockets/custom_socket.h: <sunmao/policies/err/warn.h> SM_ERR=warn SM_PREFIX=t_ @check-next: fake
include/sunmao/sockets/libc_api.h: <sunmao/policies/err/warn.h> SM_ERR=warn SM_API(n)=t_##n @check-next: fake
include/sunmao/sockets/malloc_socket.h: <sunmao/policies/err/warn.h> SM_ERR=warn @check-next: fake
include/sunmao/sockets/select.h: <sunmao/policies/err/warn.h> SM_ERR=warn SM_PREFIX=t_ @check-next: fake
EOF
)

if [ $# -gt 0 ]; then headers=("$@"); else mapfile -t headers < <(find include -name '*.h' | LC_ALL=C sort); fi
[ ${#headers[@]} -gt 0 ] || { echo "check-headers: no headers found under include/" >&2; exit 2; }

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() { echo "not ok headers: $1: $2"; fails=$((fails + 1)); }

# First compiler diagnostic that is an error (else the first line), without the <stdin> noise.
first_error() {
    local l
    l=$(grep -m1 -E 'error|Error' "$1")
    [ -n "$l" ] || l=$(grep -m1 . "$1")
    printf '%s' "${l:-compiler failed without a message}"
}

for h in "${headers[@]}"; do
    h="${h#./}"
    [ -f "$h" ] || { fail "$h" "no such file"; continue; }
    # 1. A leading comment that says something (at least three words).
    first=$(grep -m1 -v '^[[:space:]]*$' "$h")
    case "$first" in
        /\**|//*) words=$(printf '%s' "$first" | sed 's#^[/*[:space:]]*##' | wc -w)
            if [ "$words" -lt 3 ]; then
                first=$(grep -m2 -v '^[[:space:]]*$' "$h" | tail -1)
                words=$(printf '%s' "$first" | sed 's#^[/*[:space:]]*##' | wc -w)
            fi
            [ "$words" -ge 3 ] || { fail "$h" "the top comment does not say what the header is"; continue; } ;;
        *) fail "$h" "no comment at the top saying what the header is"; continue ;;
    esac
    inc="${h#include/}"
    src="$tmp/t.c"
    if grep -qE '^[[:space:]]*#[[:space:]]*ifndef[[:space:]]+SUNMAO_[A-Za-z0-9_]*_H\b' "$h"; then
        printf '#include <%s>\n' "$inc" >"$src"
    else
        # 2. Template: find the instantiation.
        spec=$(grep -m1 -oE '@check:.*' "$h" | sed -e 's/^@check://' -e 's#\*/.*$##')
        has_spec=$(grep -c '@check:' "$h")
        if [ "$has_spec" -eq 0 ]; then
            line=$(printf '%s\n' "$FALLBACK" | grep -m1 -F "$h:")
            if [ -z "$line" ]; then
                fail "$h" "template header (no SUNMAO_*_H guard) without a '@check: <defines>' line"
                continue
            fi
            spec="${line#"$h:"}"
        fi
        next=""
        grep -qE '@check-next:[[:space:]]*fake\b' "$h" && next=fake
        grep -qE '@check-next:[[:space:]]*stable\b' "$h" && next=stable
        if [[ "$spec" =~ @check-next:[[:space:]]*([A-Za-z_]+) ]]; then
            next="${BASH_REMATCH[1]}"; spec="${spec%%@check-next:*}"
        fi
        : >"$src"
        if [ -n "$next" ]; then
            case "$next" in fake|stable) ;; *) fail "$h" "unknown @check-next '$next' (fake or stable)"; continue ;; esac
            printf '#define SM_LAYER fake_next\n#include "tests/support/fake_next.h"\n' >>"$src"
            [ "$next" = stable ] && printf '%s\n' '#include <sunmao/policies/sizeclass/log2b.h>' \
                '#include <sunmao/policies/err/warn.h>' '#define SM_LAYER stable_next' '#define SM_NEXT fake_next' \
                '#define SM_SIZECLASS log2b' '#define SM_ERR warn' '#include <sunmao/layers/core/segfit_lf.h>' >>"$src"
        fi
        set_next=0 bad=""
        for tok in $spec; do
            case "$tok" in
                \<*\>) printf '#include %s\n' "$tok" >>"$src" ;;
                [A-Za-z_]*=*) printf '#define %s %s\n' "${tok%%=*}" "${tok#*=}" >>"$src"
                    [ "${tok%%=*}" = SM_NEXT ] && set_next=1 ;;
                [A-Za-z_]*) [[ "$tok" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || { bad="$tok"; break; }
                    printf '#define %s\n' "$tok" >>"$src" ;;
                *) bad="$tok"; break ;;
            esac
        done
        [ -z "$bad" ] || { fail "$h" "bad token '$bad' in its @check line"; continue; }
        [ -n "$next" ] && [ "$set_next" -eq 0 ] && printf '#define SM_NEXT %s_next\n' "$next" >>"$src"
        printf '#include <%s>\n' "$inc" >>"$src"
    fi
    if "$CC" "${FLAGS[@]}" -x c "$src" >"$tmp/out" 2>&1; then
        echo "ok headers: $h"
    else
        fail "$h" "$(first_error "$tmp/out" | sed "s#$tmp/t.c#<check>#g")"
    fi
done
[ "$fails" -eq 0 ]
