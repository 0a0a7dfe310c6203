#!/bin/sh
# sunmao-run: run a program with a sunmao allocator preloaded (installed as sunmao-run by
# `make install`, which writes the library directory below; from a checkout it uses build/).
set -u
libdir="${SUNMAO_LIBDIR:-@LIBDIR@}"
case "$libdir" in @*) libdir="$(cd "$(dirname "$0")/.." && pwd)/${BUILD:-build}" ;; esac

usage() {
    cat <<USAGE
usage: sunmao-run [-i NAME] [--] COMMAND [ARG...]
       sunmao-run --list
Runs COMMAND with the sunmao allocator NAME (default: sunmao) as its malloc, free, ... and
C++ operator new/delete, by adding lib<NAME>.so to LD_PRELOAD (after what is already there).
  -i, --instance NAME  the allocator: sunmao, sunmao-secure, tlsf, hslab, wfslab, ... (--list)
  -l, --list           list the allocators installed in the library directory, then exit
  -h, --help           this text
Environment: SUNMAO_LIBDIR, the directory holding lib<NAME>.so (now: $libdir).
The exit status is COMMAND's; 2 for a usage error, 127 if NAME is not installed.
USAGE
}

instance=sunmao
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        -l|--list)
            for f in "$libdir"/lib*.so "$libdir"/lib*.so.[0-9]*; do
                [ -e "$f" ] || continue
                n=$(basename "$f"); n=${n#lib}; n=${n%%.so*}
                case "$n" in sm_*|wcetstat) continue ;; esac
                # only sunmao's allocators, in a library directory they may share with others
                grep -aq 'sunmao: ' "$f" 2>/dev/null || continue
                echo "$n"
            done | sort -u
            exit 0 ;;
        -i|--instance)
            [ $# -ge 2 ] || { echo "sunmao-run: $1 needs an allocator name (see --help)" >&2; exit 2; }
            instance="$2"; shift 2 ;;
        --instance=*) instance="${1#--instance=}"; shift ;;
        --) shift; break ;;
        -*) echo "sunmao-run: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) break ;;
    esac
done
[ $# -gt 0 ] || { echo "sunmao-run: no command to run (see --help)" >&2; exit 2; }

lib=
for f in "$libdir/lib$instance.so" "$libdir/lib$instance.so.0"; do
    [ -e "$f" ] && { lib="$f"; break; }
done
[ -n "$lib" ] || { echo "sunmao-run: no allocator '$instance' in $libdir (sunmao-run --list)" >&2; exit 127; }
LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$lib" exec "$@"
