#!/usr/bin/env bash
# The Debian packages that `make deb` built into $BUILD/deb (.ci/run makes them before the tests;
# a plain make test skips this, saying so): the three packages are there with the version of
# core/version.h; libsunmao0 holds every instance's versioned library with its soname; -dev the
# headers, the development links, sunmao.pc and the CMake package; -tools sunmao-run and the
# wcet_stat meter. Then the packages are unpacked (dpkg-deb -x, no installation) and a program is
# run under the unpacked libsunmao with sunmao-run, its output compared with the run without.
# Environment: BUILD (default build), SM_ROOT. Output: ok|not ok|skip deb: <case>[: why]
set -u
case "${1:-}" in
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; echo "usage: tests/build/deb.sh (no arguments)"; exit 0 ;;
    "") ;;
    *) echo "tests/build/deb.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok deb: setup: cannot cd to the repository root"; exit 1; }
dir="${BUILD:-build}/deb"
if [ ! -d "$dir" ]; then
    echo "skip deb: packages: none built (make deb builds them; .ci/run does before the tests)"
    exit 0
fi
v() { sed -n "s/^#define SUNMAO_VERSION_$1 *\([0-9][0-9]*\).*/\1/p" include/sunmao/core/version.h; }
ver="$(v MAJOR).$(v MINOR).$(v PATCH)"
arch=$(dpkg --print-architecture 2>/dev/null)
ok=1
for pkg in libsunmao0 libsunmao-dev sunmao-tools; do
    f="$dir/${pkg}_${ver}_${arch}.deb"
    if [ -f "$f" ]; then
        echo "ok deb: $pkg $ver built"
    else
        echo "not ok deb: $pkg: $f missing ($(tail -3 "$dir/build.log" 2>/dev/null | tr '\n' ' '))"
        ok=0
    fi
done
[ $ok = 1 ] || exit 0
contents() { dpkg-deb -c "$dir/${1}_${ver}_${arch}.deb" | awk '{ print $6 }'; }
missing=""
for inst in $(ls instances/*.c | sed 's#instances/##; s#\.c$##'); do
    contents libsunmao0 | grep -q "/lib$inst\.so\.$ver\$" || missing="$missing lib$inst.so.$ver"
done
[ -z "$missing" ] && echo "ok deb: libsunmao0 holds every instance's library" || echo "not ok deb: libsunmao0 lacks:$missing"
missing=""
for want in include/sunmao/core/layer.h include/sunmao/core/version.h /libsunmao.so /libsunmao.a pkgconfig/sunmao.pc \
    cmake/sunmao/sunmaoConfig.cmake man3/sunmao.3 share/sunmao/new_delete.cc; do
    contents libsunmao-dev | grep -q -- "$want" || missing="$missing $want"
done
[ -z "$missing" ] && echo "ok deb: libsunmao-dev holds headers, links, pkg-config, CMake, man page, shim" ||
    echo "not ok deb: libsunmao-dev lacks:$missing"
missing=""
for want in usr/bin/sunmao-run sunmao/libwcetstat.so usr/bin/smc; do
    contents sunmao-tools | grep -q -- "$want" || missing="$missing $want"
done
[ -z "$missing" ] && echo "ok deb: sunmao-tools holds sunmao-run, libwcetstat and smc" || echo "not ok deb: sunmao-tools lacks:$missing"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
for pkg in libsunmao0 sunmao-tools; do dpkg-deb -x "$dir/${pkg}_${ver}_${arch}.deb" "$root"; done
lib=$(ls -d "$root"/usr/lib/*/ 2>/dev/null | head -1)
so=$(readelf -d "$lib/libsunmao.so.$ver" 2>/dev/null | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$so" = "libsunmao.so.${ver%%.*}" ] && echo "ok deb: libsunmao.so.$ver has soname $so" ||
    echo "not ok deb: libsunmao.so.$ver has soname '${so}', expected libsunmao.so.${ver%%.*}"
want=$(python3 -c 'print(sorted({i: str(i) * 3 for i in range(20000)}.items())[-1])' 2>&1)
got=$(SUNMAO_LIBDIR="$lib" "$root/usr/bin/sunmao-run" -i sunmao python3 -c \
    'import os; assert "libsunmao" in open("/proc/self/maps").read(); print(sorted({i: str(i) * 3 for i in range(20000)}.items())[-1])' 2>&1)
[ -n "$want" ] && [ "$got" = "$want" ] && echo "ok deb: sunmao-run -i sunmao python3 (unpacked packages): same output, libsunmao mapped" ||
    echo "not ok deb: sunmao-run from the unpacked packages: got '${got:0:200}', expected '$want'"
exit 0
