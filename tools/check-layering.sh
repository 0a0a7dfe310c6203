#!/usr/bin/env bash
# check-layering.sh — the include graph of sunmao is one-way. Each file may include only:
#   include/sunmao/core/**            core/
#   include/sunmao/platform/**        core/, platform/ (and any system header: the only such place)
#   include/sunmao/policies/**        core/, policies/, platform/platform.h
#   include/sunmao/os/*.h             core/, policies/, platform/platform.h (an OS layer never
#                                     includes another), and its own parts: os/<layer>/
#   include/sunmao/os/<layer>/**      (an OS layer's parts) core/, policies/, platform/platform.h and
#                                     their layer's header, as for a layer's parts below; no other
#                                     file includes an OS layer's part
#   include/sunmao/layers/core/*.h    core/, policies/, platform/platform.h (a layer reaches other
#   include/sunmao/layers/addon/*.h     layers only via SM_NEXT: never another layer, an OS layer or
#                                       a socket), and its own parts: layers/<kind>/<layer>/
#   include/sunmao/layers/*/<layer>/**  (a layer's parts) core/, policies/, platform/platform.h and
#                                       their layer's header (which a part instantiates when it is
#                                       included alone, as tools/check-headers.sh does); no other
#                                       file includes a layer's part, instances neither
#   include/sunmao/sockets/**         core/, policies/, platform/platform.h, sockets/ (shared socket
#                                     code such as libc_api.h and the first-class heaps, sockets/heap/;
#                                     never a layer, never an OS layer), and the program's
#                                     declarations the socket implements (introspect.h, heap.h)
#   instances/*.c                     anything (the composition), as long as it resolves
# System headers (<...> not under sunmao/): outside platform/, only those a freestanding C
# implementation has (stddef.h stdint.h stdbool.h stdarg.h stdalign.h stdnoreturn.h limits.h
# float.h iso646.h) and string.h (memcpy, memset, memmove and memcmp, which compilers need even
# freestanding), plus two named exceptions: core/errnum.h's <errno.h> (hosted builds only) and
# os/malloc_heap.h's <malloc.h> (the OS layer over the C library's malloc is hosted by definition).
# So every OS call goes through the platform layer (platform/platform.h).
# Both forms are resolved: "x.h" relative to the including file (then include/, as -Iinclude does)
# and <sunmao/...> under include/. A file in a directory with no rule, an include that does not
# resolve, or a computed #include (a macro) in a header fails, so new directories and files cannot
# slip past the check.
# Usage: tools/check-layering.sh [file ...]   (default: every include/**/*.h and instances/*.c)
# Prints one line per file: ok layering: <path> | not ok layering: <path>: <why>; exits 1 on failure.
set -u -f
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        -h | --help)
            cat <<'USAGE'
usage: tools/check-layering.sh [-h|--help] [--] [file ...]     (or: make check-layering)

Checks that the include graph is one-way (core <- platform <- policies <- os/layers/sockets <-
instances) and that only the platform layer includes system headers beyond the freestanding
ones; the rules are in the comment at the top of this script.
Prints `ok layering: <path>` or `not ok layering: <path>: <why>` per file; exits 1 on a failure.
Files are paths from the repository root (default: every include/**/*.h and instances/*.c).

Environment: none.
USAGE
            exit 0 ;;
        --) shift; args+=("$@"); break ;;
        -*) echo "tools/check-layering.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) args+=("$1") ;;
    esac
    shift
done
set -- "${args[@]+"${args[@]}"}"
cd "$(dirname "$0")/.." || { echo "check-layering: cannot cd to the repository root" >&2; exit 2; }
root="$PWD"

if [ $# -gt 0 ]; then files=("$@"); else
    mapfile -t files < <({ find include -name '*.h'; find instances -maxdepth 1 -name '*.c' 2>/dev/null; } | LC_ALL=C sort)
fi
[ ${#files[@]} -gt 0 ] || { echo "check-layering: no files found" >&2; exit 2; }

# allowed <file-relative-to-include/sunmao-or-instances> -> space-separated allowed prefixes
# (a prefix ending in / is a directory, otherwise an exact file), "ANY" or "" (no rule).
rule_for() {
    case "$1" in
        instances/*.c) echo ANY ;;
        include/sunmao/core/*) echo "core/" ;;
        include/sunmao/platform/*) echo "core/ platform/" ;;
        include/sunmao/policies/*) echo "core/ policies/ platform/platform.h" ;;
        include/sunmao/os/sheap_glk.h) echo "os/sheap.h" ;;   # the paper's name for it
        include/sunmao/os/*/*)   # a part of an OS layer
            local own="${1#include/sunmao/}"
            echo "core/ policies/ platform/platform.h ${own%/*}.h" ;;
        include/sunmao/os/*)
            local parts="${1#include/sunmao/}"
            echo "core/ policies/ platform/platform.h ${parts%.h}/" ;;
        include/sunmao/layers/addon/fake.h) echo "layers/addon/passthrough.h" ;;   # the paper's name for it
        include/sunmao/layers/addon/delayed.h) echo "layers/addon/delayed_free.h" ;;   # the paper's name for it
        include/sunmao/layers/core/*/* | include/sunmao/layers/addon/*/*)   # a part of a layer
            local own="${1#include/sunmao/}"
            echo "core/ policies/ platform/platform.h ${own%/*}.h" ;;
        include/sunmao/layers/core/* | include/sunmao/layers/addon/*)
            local parts="${1#include/sunmao/}"
            echo "core/ policies/ platform/platform.h ${parts%.h}/" ;;
        include/sunmao/sockets/*) echo "core/ policies/ platform/platform.h sockets/ introspect.h heap.h" ;;
        include/sunmao/introspect.h | include/sunmao/heap.h) echo "core/" ;;   # a program's declarations: system headers only
        *) echo "" ;;
    esac
}

# May file include the system header <h>? (See the head comment.)
system_ok() {
    case "$1" in
        instances/*.c | include/sunmao/platform/*) return 0 ;;
    esac
    case "$2" in
        stddef.h | stdint.h | stdbool.h | stdarg.h | stdalign.h | stdnoreturn.h | limits.h | float.h | iso646.h | string.h) return 0 ;;
    esac
    case "$1:$2" in
        include/sunmao/core/errnum.h:errno.h | include/sunmao/os/malloc_heap.h:malloc.h) return 0 ;;
    esac
    return 1
}

fails=0
for f in "${files[@]}"; do
    f="${f#./}"
    [ -f "$f" ] || { echo "not ok layering: $f: no such file"; fails=$((fails + 1)); continue; }
    rule=$(rule_for "$f")
    if [ -z "$rule" ]; then
        echo "not ok layering: $f: no layering rule for its directory (add one to tools/check-layering.sh)"
        fails=$((fails + 1)); continue
    fi
    dir=$(dirname "$f")
    why=()
    while IFS= read -r line; do
        if [[ "$line" =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]]; then
            target="${BASH_REMATCH[1]}"
            if [ -f "$dir/$target" ]; then res=$(realpath -m --relative-to="$root" "$dir/$target")
            elif [ -f "include/$target" ]; then res=$(realpath -m --relative-to="$root" "include/$target")
            elif [ "$rule" = ANY ] && [ -f "$target" ]; then res="$target"   # -I. (instances, tests)
            else why+=("\"$target\" does not resolve"); continue; fi
        elif [[ "$line" =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\<([^\>]+)\> ]]; then
            target="${BASH_REMATCH[1]}"
            case "$target" in
                sunmao/*) res=$(realpath -m --relative-to="$root" "include/$target")
                    [ -f "$res" ] || { why+=("<$target> does not resolve"); continue; } ;;
                *) system_ok "$f" "$target" || why+=("includes the system header <$target> (OS services go through platform/platform.h)")
                   continue ;;
            esac
        elif [[ "$line" =~ ^[[:space:]]*#[[:space:]]*include ]]; then
            [ "$rule" = ANY ] || why+=("computed or malformed #include: ${line#"${line%%[![:space:]]*}"}")
            continue
        else
            continue
        fi
        # A layer's part (include/sunmao/layers/<kind>/<layer>/*, include/sunmao/os/<layer>/*) is
        # included by that layer (and the layer's other parts) only, whatever the includer's rule:
        # instances compose layers, not parts.
        if [[ "$res" =~ ^include/sunmao/(layers/[^/]+/[^/]+|os/[^/]+)/[^/]+$ ]]; then
            owner="include/sunmao/${BASH_REMATCH[1]}"
            if [ "$f" != "$owner.h" ] && [[ "$f" != "$owner/"* ]]; then
                why+=("includes ${res#include/sunmao/}, a part of ${owner#include/sunmao/}.h (only that layer includes it)")
                continue
            fi
        fi
        [ "$rule" = ANY ] && continue
        case "$res" in
            include/sunmao/*) rel="${res#include/sunmao/}" ;;
            *) why+=("includes $res, outside include/sunmao"); continue ;;
        esac
        okay=0
        for a in $rule; do
            case "$a" in
                */) [[ "$rel" == "$a"* ]] && okay=1 ;;
                *) [ "$rel" = "$a" ] && okay=1 ;;
            esac
        done
        [ "$okay" -eq 1 ] || why+=("includes $rel (allowed: $rule)")
    done < <(grep -E '^[[:space:]]*#[[:space:]]*include' "$f")
    if [ ${#why[@]} -eq 0 ]; then
        echo "ok layering: $f"
    else
        msg="${why[0]}"; for w in "${why[@]:1}"; do msg="$msg; $w"; done
        echo "not ok layering: $f: $msg"
        fails=$((fails + 1))
    fi
done
[ "$fails" -eq 0 ]
