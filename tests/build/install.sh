#!/usr/bin/env bash
# make install into a temporary DESTDIR, its layout, then the three ways docs/install.md gives a
# user, each built only against the installed files: (a) a C program linked through pkg-config,
# shared and static; (b) a CMake project through find_package(sunmao CONFIG), linking
# sunmao::sunmao and sunmao::sunmao-static; (c) a composition of one's own (mmap_heap :: tlsf_glk
# :: malloc_socket) built with the installed headers, no -D_GNU_SOURCE, and the installed C++
# shim, preloaded into a C++ program and into real programs. Then make uninstall must leave nothing.
# The installed headers also build instances/sunmao.c and that composition with gcc and clang,
# with and without a system header included first, warning-free. One line per case:
#   ok install: <case> | not ok install: <case>: <why> | skip install: <case>: <why>
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/build/install.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Runs `make install DESTDIR=<tmp> PREFIX=/usr/local` (over the libraries already built in $BUILD)
and checks the layout: versioned libraries and their sonames and links, the static drop-in,
headers, sunmao.pc, the CMake package, the man page, the C++ shim, one version everywhere.
Then builds against the installed files only: a C program through pkg-config (shared and
static), a CMake project through find_package(sunmao CONFIG) (sunmao::sunmao and
sunmao::sunmao-static), and a composition of its own with the installed C++ shim, preloaded
into a C++ program, ls and python3. The installed headers must build without -D_GNU_SOURCE
under gcc and clang. Last, `make uninstall` must leave the prefix empty.
Prints `ok install: <case>`, `not ok install: <case>: <why>` or `skip install: <case>: <why>`
(a missing tool such as cmake or pkg-config is a skip; tools/ensure-deps.sh installs them).

Environment: BUILD (default build), SM_ROOT (repository root).
USAGE
            exit 0 ;;
        -*) echo "tests/build/install.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok install: setup: cannot cd to the repository root"; exit 1; }
BUILD="${BUILD:-build}"
# A make started by `make test` must not inherit the parent's jobserver (it would warn and run -j1).
unset MAKEFLAGS MFLAGS MAKELEVEL
tmp=$(mktemp -d /tmp/sm-install.XXXXXX) || { echo "not ok install: setup: mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT

fails=0
ok() { echo "ok install: $1"; }
notok() { echo "not ok install: $1: $2"; fails=$((fails + 1)); }
skip() { echo "skip install: $1: $2"; }
have() { command -v "$1" >/dev/null 2>&1; }
# the first error line of a log, or its last line
first_error() { local e; e=$(grep -m1 -E 'error|warning|undefined|No such|not found|Error' "$1"); echo "${e:-$(tail -1 "$1")}" | cut -c1-300; }

prefix=/usr/local
dest="$tmp/dest"
root="$dest$prefix"
lib="$root/lib" inc="$root/include" share="$root/share/sunmao"
mkdir -p "$dest"
ver_of() { sed -n "s/^#define SUNMAO_VERSION_$1  *\([0-9][0-9]*\).*/\1/p" include/sunmao/core/version.h; }
major=$(ver_of MAJOR) minor=$(ver_of MINOR) patch=$(ver_of PATCH)
version="$major.$minor.$patch"
instances=$(for f in instances/*.c; do basename "$f" .c; done)

# ---- make install ----
if ! make -s BUILD="$BUILD" DESTDIR="$dest" PREFIX="$prefix" install >"$tmp/install.log" 2>&1; then
    notok "make install" "$(first_error "$tmp/install.log") (log: $(tail -3 "$tmp/install.log" | tr '\n' ' ' | cut -c1-300))"
    exit 1
fi
ok "make install DESTDIR=... PREFIX=$prefix"

# ---- layout ----
why=()
for n in $instances; do
    real="$lib/lib$n.so.$version"
    if [ ! -f "$real" ] || [ -L "$real" ]; then why+=("lib$n.so.$version missing"); continue; fi
    soname=$(readelf -d "$real" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
    [ "$soname" = "lib$n.so.$major" ] || why+=("lib$n.so.$version: soname '$soname', not lib$n.so.$major")
    for link in "lib$n.so.$major" "lib$n.so"; do
        [ -L "$lib/$link" ] && [ "$(readlink -f "$lib/$link")" = "$(readlink -f "$real")" ] ||
            why+=("$link is not a link to lib$n.so.$version")
        case "$(readlink "$lib/$link")" in /*) why+=("$link: absolute link") ;; esac
    done
    [ -f "$lib/libsm_$n.a" ] || why+=("libsm_$n.a missing")
done
if [ ${#why[@]} -eq 0 ]; then ok "layout: libraries (lib<name>.so.$version, soname lib<name>.so.$major, links; libsm_<name>.a)"
else notok "layout: libraries" "$(printf '%s; ' "${why[@]}" | cut -c1-400)"; fi

members=$(ar t "$lib/libsunmao.a" 2>/dev/null | LC_ALL=C sort | tr '\n' ' ')
if [ "$members" = "new_delete.o sunmao.o " ]; then ok "layout: static drop-in libsunmao.a (sunmao.o, new_delete.o)"
else notok "layout: static drop-in" "libsunmao.a members: '$members', want sunmao.o and new_delete.o"; fi

why=()
nh=0
while IFS= read -r h; do
    nh=$((nh + 1))
    cmp -s "$h" "$inc/${h#include/}" || why+=("${h#include/}")
done < <(find include -name '*.h')
extra=""
for f in $(cd "$inc" && find sunmao -type f); do [ -f "include/$f" ] || extra="$extra $f"; done
if [ ${#why[@]} -eq 0 ] && [ -z "$extra" ]; then ok "layout: headers ($nh under include/sunmao)"
else notok "layout: headers" "missing or different: ${why[*]:0:5}; not in the tree: $extra"; fi

if cmp -s src/cxx/new_delete.cc "$share/new_delete.cc" && [ -f "$share/instances/sunmao.c" ]; then
    ok "layout: C++ shim share/sunmao/new_delete.cc, examples share/sunmao/instances/"
else notok "layout: C++ shim" "share/sunmao/new_delete.cc or share/sunmao/instances/sunmao.c missing or different"; fi

why=()
for f in "$lib/pkgconfig/sunmao.pc" "$lib/pkgconfig/sunmao-static.pc" "$lib/cmake/sunmao/sunmaoConfig.cmake" \
    "$lib/cmake/sunmao/sunmaoConfigVersion.cmake"; do
    [ -f "$f" ] || why+=("${f#"$root"/} missing")
    grep -q '@[A-Z_]*@' "$f" 2>/dev/null && why+=("${f#"$root"/}: unsubstituted $(grep -o '@[A-Z_]*@' "$f" | head -1)")
    grep -qF "$dest" "$f" 2>/dev/null && why+=("${f#"$root"/} names the DESTDIR")
done
if [ ${#why[@]} -eq 0 ]; then ok "layout: pkg-config and CMake files"
else notok "layout: pkg-config and CMake files" "${why[*]}"; fi

man="$root/share/man/man3/sunmao.3"
if [ ! -f "$man" ]; then
    notok "man page" "share/man/man3/sunmao.3 missing"
elif have man; then
    # man's own check (groff warnings on stderr) and the sections a manual page has
    if LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$man" >"$tmp/man.txt" 2>"$tmp/man.err" && [ ! -s "$tmp/man.err" ]; then
        missing=""
        for s in NAME SYNOPSIS DESCRIPTION ENVIRONMENT FILES EXAMPLES "SEE ALSO"; do
            grep -q "^$s" "$tmp/man.txt" || missing="$missing $s"
        done
        if [ -z "$missing" ]; then ok "man page sunmao(3) renders with man -l, no warnings"
        else notok "man page" "sections missing:$missing"; fi
    else
        notok "man page" "man -l: $(head -c 300 "$tmp/man.err")"
    fi
elif have groff; then
    if groff -man -ww -z "$man" 2>"$tmp/man.err" && [ ! -s "$tmp/man.err" ]; then ok "man page sunmao(3) renders with groff -man, no warnings"
    else notok "man page" "groff: $(head -c 300 "$tmp/man.err")"; fi
else
    skip "man page renders" "neither man nor groff installed"
fi

# ---- one version everywhere ----
why=()
cat >"$tmp/ver.c" <<'EOF'
#include <stdio.h>
#include <sunmao/core/version.h>
int main(void)
{
    printf("%d.%d.%d %s %d\n", SUNMAO_VERSION_MAJOR, SUNMAO_VERSION_MINOR, SUNMAO_VERSION_PATCH, SUNMAO_VERSION_STRING,
           SUNMAO_VERSION);
    return 0;
}
EOF
if cc -I"$inc" "$tmp/ver.c" -o "$tmp/ver" 2>"$tmp/ver.log"; then
    want="$version $version $((major * 10000 + minor * 100 + patch))"
    got=$("$tmp/ver")
    [ "$got" = "$want" ] || why+=("<sunmao/core/version.h> says '$got', want '$want'")
else
    why+=("version.h: $(first_error "$tmp/ver.log")")
fi
pcver=$(sed -n 's/^Version: *//p' "$lib/pkgconfig/sunmao.pc")
[ "$pcver" = "$version" ] || why+=("sunmao.pc Version '$pcver'")
cmver=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")/\1/p' "$lib/cmake/sunmao/sunmaoConfigVersion.cmake")
[ "$cmver" = "$version" ] || why+=("sunmaoConfigVersion.cmake '$cmver'")
manver=$(sed -n 's/^\.TH .*"sunmao \([0-9.]*\)".*/\1/p' docs/sunmao.3)
[ "$manver" = "$version" ] || why+=("docs/sunmao.3 .TH says '$manver'")
if [ -f debian/changelog ]; then
    debver=$(sed -n '1s/^[^(]*(\([^)-]*\).*/\1/p' debian/changelog)
    debver=${debver#*:}
    [ "$debver" = "$version" ] || why+=("debian/changelog '$debver'")
fi
if [ ${#why[@]} -eq 0 ]; then ok "version $version: version.h, library names, sunmao.pc, CMake package, man page agree"
else notok "version" "$(printf '%s; ' "${why[@]}")"; fi

# ---- the installed headers without _GNU_SOURCE ----
# the out-of-tree composition of (c): mmap_heap :: tlsf_glk(sync=mutex) :: malloc_socket
cat >"$tmp/mine.c" <<'EOF'
/* mine: mmap_heap :: tlsf_glk(sync=mutex) :: malloc_socket, built out of the sunmao tree. */
#include <sunmao/policies/err/warn.h>
#include <sunmao/policies/sync/mutex.h>

#define SM_LAYER mine_os
#define SM_ERR   warn
#include <sunmao/os/mmap_heap.h>

#define SM_LAYER mine_heap
#define SM_NEXT  mine_os
#define SM_SYNC  mutex
#define SM_ERR   warn
#include <sunmao/layers/core/tlsf_glk.h>

#define SM_NEXT mine_heap
#define SM_ERR  warn
#include <sunmao/sockets/malloc_socket.h>
EOF
for cc in gcc clang; do
    if ! have "$cc"; then
        skip "headers without _GNU_SOURCE: $cc" "$cc not installed"
        continue
    fi
    for src in "$share/instances/sunmao.c" "$tmp/mine.c"; do
        for first in "" "#include <stdio.h>"; do
            name="headers without _GNU_SOURCE: $cc -O2 -shared -fPIC -Wall -Wextra $(basename "$src")${first:+ after <stdio.h>}"
            t="$tmp/h-$cc-$(basename "$src" .c)${first:+-stdio}"
            { [ -z "$first" ] || echo "$first"; cat "$src"; } >"$t.c"
            if $cc -O2 -shared -fPIC -Wall -Wextra -I"$inc" "$t.c" -o "$t.so" >"$t.log" 2>&1 && [ ! -s "$t.log" ]; then
                ok "$name"
            else
                notok "$name" "$(first_error "$t.log")"
            fi
        done
    done
done

# ---- (a) a C program through pkg-config ----
# It fills a block with a pattern and checks it, has the C library allocate (strdup), and says
# which object holds the malloc the process uses (dladdr: libsunmao's, or the program's own).
cat >"$tmp/app.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void)
{
    size_t n = 1u << 20;
    unsigned char *p = malloc(n);
    if (!p)
        return 2;
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7 + 3);
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 7 + 3))
            return 3;
    char *s = strdup("sunmao");
    p = realloc(p, 3 * n);
    if (!s || !p || p[n - 1] != (unsigned char)((n - 1) * 7 + 3))
        return 4;
    free(s);
    free(p);
    Dl_info where, self;
    void *m = dlsym(RTLD_DEFAULT, "malloc");
    if (!m || !dladdr(m, &where) || !dladdr((void *)&main, &self))
        return 5;
    printf("pattern ok\nmalloc in %s\n", where.dli_fbase == self.dli_fbase ? "the program" : where.dli_fname);
    return 0;
}
EOF
if ! have pkg-config; then
    skip "pkg-config: C program, shared" "pkg-config not installed"
    skip "pkg-config: C program, static" "pkg-config not installed"
else
    export PKG_CONFIG_PATH="$lib/pkgconfig"
    # the prefix lies inside DESTDIR: the sysroot variable puts it in front of -I and -L
    flags=$(PKG_CONFIG_SYSROOT_DIR="$dest" pkg-config --cflags --libs sunmao 2>"$tmp/pc.err")
    flags2=$(pkg-config --define-prefix --cflags --libs sunmao 2>>"$tmp/pc.err")
    sflags=$(PKG_CONFIG_SYSROOT_DIR="$dest" pkg-config --cflags --libs sunmao-static 2>>"$tmp/pc.err")
    modver=$(pkg-config --modversion sunmao 2>>"$tmp/pc.err")
    if [ -s "$tmp/pc.err" ] || [ "$modver" != "$version" ]; then
        notok "pkg-config: sunmao.pc" "$(head -c 300 "$tmp/pc.err") (modversion '$modver')"
    elif [ "$flags" != "$flags2" ]; then
        notok "pkg-config: sunmao.pc" "--define-prefix gives '$flags2', the sysroot '$flags'"
    else
        ok "pkg-config: sunmao.pc $modver: $flags"
    fi
    # shared
    if ! cc -O2 "$tmp/app.c" -o "$tmp/app" $flags -ldl >"$tmp/app.log" 2>&1; then
        notok "pkg-config: C program, shared" "cc: $(first_error "$tmp/app.log")"
    else
        needed=$(readelf -d "$tmp/app" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
        out=$(LD_LIBRARY_PATH="$lib" "$tmp/app" 2>&1)
        want=$(printf 'pattern ok\nmalloc in %s' "$lib/libsunmao.so.$major")
        if [ "$out" = "$want" ] && [[ " $needed" == *" libsunmao.so.$major "* ]]; then
            ok "pkg-config: C program, shared: needs libsunmao.so.$major, which serves malloc"
        else
            notok "pkg-config: C program, shared" "needs: $needed; printed: $(echo "$out" | tr '\n' '|')"
        fi
    fi
    # static
    if ! cc -O2 "$tmp/app.c" -o "$tmp/app-static" $sflags -ldl >"$tmp/app-static.log" 2>&1; then
        notok "pkg-config: C program, static" "cc $sflags: $(first_error "$tmp/app-static.log")"
    else
        needed=$(readelf -d "$tmp/app-static" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
        out=$("$tmp/app-static" 2>&1)
        if [ "$out" = "$(printf 'pattern ok\nmalloc in the program')" ] && [[ "$needed" != *libsunmao* ]]; then
            ok "pkg-config: C program, static (sunmao-static.pc): the program's own malloc, no libsunmao.so"
        else
            notok "pkg-config: C program, static" "needs: $needed; printed: $(echo "$out" | tr '\n' '|')"
        fi
    fi
fi

# ---- a C++ program, for (b) and (c) ----
# new/delete of every kind, containers, a bad_alloc; with an argument, which objects hold malloc
# and operator new (on stderr, so the output can be compared with and without a preload).
cat >"$tmp/appxx.cc" <<'EOF'
#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>
struct alignas(64) Wide { double d[8]; };
static const char *holder(const char *sym)
{
    Dl_info where, self;
    void *p = dlsym(RTLD_DEFAULT, sym);
    if (!p || !dladdr(p, &where) || !dladdr((void *)&holder, &self))
        return "?";
    return where.dli_fbase == self.dli_fbase ? "the program" : where.dli_fname;
}
int main(int argc, char **argv)
{
    std::map<std::string, std::vector<int>> m;
    for (int i = 0; i < 20000; i++)
        m["key" + std::to_string(i % 997)].push_back(i);
    unsigned long sum = 0;
    for (auto &kv : m)
        for (int v : kv.second)
            sum += (unsigned long)v * kv.first.size();
    auto w = std::make_unique<Wide[]>(100);
    bool aligned = ((unsigned long)w.get() % 64) == 0;
    int *a = new int[1000]();
    delete[] a;
    size_t big = argc > 100 ? 1 : (size_t)1 << 62; /* not a constant: no compile-time warning */
    bool threw = false;
    try {
        std::vector<char> huge(big);
        std::printf("%zu\n", huge.size());
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    int *nothrow = new (std::nothrow) int[big / 16]; /* 2^60 bytes: no allocator has them */
    std::printf("map %zu sum %lu aligned %d bad_alloc %d nothrow-null %d\n", m.size(), sum, aligned, threw,
                nothrow == nullptr);
    if (argc > 1)
        std::fprintf(stderr, "malloc in %s\noperator new in %s\n", holder("malloc"), holder(argv[1]));
    return 0;
}
EOF

# ---- (b) a CMake project through find_package(sunmao CONFIG) ----
if ! have cmake; then
    skip "cmake: find_package(sunmao CONFIG), sunmao::sunmao and sunmao::sunmao-static" "cmake not installed"
elif ! have g++; then
    skip "cmake: find_package(sunmao CONFIG), sunmao::sunmao and sunmao::sunmao-static" "g++ not installed"
else
    mkdir -p "$tmp/cm"
    cp "$tmp/app.c" "$tmp/appxx.cc" "$tmp/mine.c" "$tmp/cm/"
    cat >"$tmp/cm/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.13)
project(sunmao_consumer C CXX)
# a version this installation does not answer for is refused
find_package(sunmao 99 CONFIG QUIET)
if(sunmao_FOUND)
  message(FATAL_ERROR "find_package(sunmao 99) accepted version ${sunmao_VERSION}")
endif()
find_package(sunmao 0.1 CONFIG REQUIRED)
message(STATUS "sunmao ${sunmao_VERSION} shim ${SUNMAO_CXX_SHIM}")
foreach(t sunmao::sunmao sunmao::sunmao-static sunmao::headers)
  if(NOT TARGET ${t})
    message(FATAL_ERROR "no target ${t}")
  endif()
endforeach()
if(NOT EXISTS "${SUNMAO_CXX_SHIM}")
  message(FATAL_ERROR "SUNMAO_CXX_SHIM: ${SUNMAO_CXX_SHIM} does not exist")
endif()
add_executable(app_shared app.c)
target_link_libraries(app_shared PRIVATE sunmao::sunmao ${CMAKE_DL_LIBS})
add_executable(app_static app.c)
target_link_libraries(app_static PRIVATE sunmao::sunmao-static ${CMAKE_DL_LIBS})
add_executable(appxx_shared appxx.cc)
target_link_libraries(appxx_shared PRIVATE sunmao::sunmao ${CMAKE_DL_LIBS})
add_executable(appxx_static appxx.cc)
target_link_libraries(appxx_static PRIVATE sunmao::sunmao-static ${CMAKE_DL_LIBS})
add_executable(appxx_plain appxx.cc)
target_link_libraries(appxx_plain PRIVATE ${CMAKE_DL_LIBS})
# a composition of one's own with the installed C++ shim, as docs/install.md builds it
add_custom_command(OUTPUT new_delete.o
  COMMAND ${CMAKE_CXX_COMPILER} -std=c++17 -O2 -fPIC -fvisibility=hidden -c ${SUNMAO_CXX_SHIM} -o new_delete.o
  COMMAND ${CMAKE_OBJCOPY} --weaken-symbol=__gxx_personality_v0 --weaken-symbol=__cxa_begin_catch
          --weaken-symbol=__cxa_end_catch --weaken-symbol=_ZSt9terminatev new_delete.o
  DEPENDS ${SUNMAO_CXX_SHIM} VERBATIM)
add_library(mine SHARED mine.c ${CMAKE_CURRENT_BINARY_DIR}/new_delete.o)
set_target_properties(mine PROPERTIES C_VISIBILITY_PRESET hidden LINKER_LANGUAGE C)
target_link_libraries(mine PRIVATE sunmao::headers pthread dl -static-libgcc)
EOF
    name="cmake: find_package(sunmao 0.1 CONFIG REQUIRED)"
    if ! cmake -S "$tmp/cm" -B "$tmp/cm/b" -DCMAKE_PREFIX_PATH="$root" -DCMAKE_BUILD_TYPE=Release >"$tmp/cm.log" 2>&1; then
        notok "$name" "configure: $(grep -m1 -A2 -E 'Error|error' "$tmp/cm.log" | tr '\n' ' ' | cut -c1-300)"
    elif ! cmake --build "$tmp/cm/b" -j "$(nproc 2>/dev/null || echo 2)" >>"$tmp/cm.log" 2>&1; then
        notok "$name" "build: $(first_error "$tmp/cm.log")"
    else
        ok "$name: $(sed -n 's/^-- sunmao \([^ ]*\) .*/\1/p' "$tmp/cm.log"), targets sunmao::sunmao, sunmao::sunmao-static, sunmao::headers"
        sharedlib="$lib/libsunmao.so.$major"
        for t in shared static; do
            where=$([ "$t" = shared ] && echo "$sharedlib" || echo "the program")
            out=$("$tmp/cm/b/app_$t" 2>&1)
            if [ "$out" = "$(printf 'pattern ok\nmalloc in %s' "$where")" ]; then
                ok "cmake: sunmao::sunmao$([ "$t" = static ] && echo -static), C program: malloc in $where"
            else
                notok "cmake: sunmao::sunmao$([ "$t" = static ] && echo -static), C program" "printed: $(echo "$out" | tr '\n' '|')"
            fi
            out=$("$tmp/cm/b/appxx_$t" _Znwm 2>"$tmp/appxx.err"; cat "$tmp/appxx.err")
            case "$out" in
                *"bad_alloc 1 nothrow-null 1"*"malloc in $where"*"operator new in $where")
                    ok "cmake: sunmao::sunmao$([ "$t" = static ] && echo -static), C++ program: malloc and operator new in $where" ;;
                *) notok "cmake: sunmao::sunmao$([ "$t" = static ] && echo -static), C++ program" "printed: $(echo "$out" | tr '\n' '|')" ;;
            esac
        done
        lm="$tmp/cm/b/libmine.so"
        needed=$(readelf -d "$lm" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
        bind=$(LD_BIND_NOW=1 LD_PRELOAD="$lm" /bin/true 2>&1)
        where=$(LD_PRELOAD="$lm" "$tmp/cm/b/appxx_plain" _Znwm 2>&1 >/dev/null)
        if [[ "$needed" != *libstdc++* ]] && [ -z "$bind" ] && [ "$where" = "$(printf 'malloc in %s\noperator new in %s' "$lm" "$lm")" ]; then
            ok "cmake: own composition over sunmao::headers + SUNMAO_CXX_SHIM: preloaded, serves malloc and operator new"
        else
            notok "cmake: own composition" "needs: $needed; /bin/true: $bind; $(echo "$where" | tr '\n' ' ')"
        fi
    fi
fi

# ---- (c) a composition of one's own, with the installed C++ shim ----
name="own composition: mmap_heap :: tlsf_glk :: malloc_socket + share/sunmao/new_delete.cc"
if ! have g++ || ! have objcopy; then
    skip "$name" "g++ or objcopy not installed"
else
    # the commands of docs/install.md
    (
        cd "$tmp" &&
            gcc -O2 -fPIC -fvisibility=hidden -Wall -Wextra -I"$inc" -c mine.c -o mine.o &&
            g++ -std=c++17 -O2 -fPIC -fvisibility=hidden -c "$share/new_delete.cc" -o new_delete.o &&
            objcopy --weaken-symbol=__gxx_personality_v0 --weaken-symbol=__cxa_begin_catch \
                --weaken-symbol=__cxa_end_catch --weaken-symbol=_ZSt9terminatev new_delete.o &&
            gcc -shared -static-libgcc -o libmine.so mine.o new_delete.o -lpthread -ldl &&
            g++ -std=c++17 -O2 appxx.cc -o appxx -ldl
    ) >"$tmp/mine.log" 2>&1
    if [ $? -ne 0 ] || [ -s "$tmp/mine.log" ]; then
        notok "$name" "build: $(first_error "$tmp/mine.log")"
    else
        needed=$(readelf -d "$tmp/libmine.so" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
        case "$needed" in
            *libstdc++* | *libgcc_s*) notok "$name" "libmine.so needs $needed" ;;
            *) ok "$name: built, needs only $needed" ;;
        esac
        # loads into a C program with every symbol bound at load time (the shim's C++ runtime
        # references are weak)
        if out=$(LD_BIND_NOW=1 LD_PRELOAD="$tmp/libmine.so" /bin/true 2>&1) && [ -z "$out" ]; then
            ok "own composition: LD_PRELOAD into a C program (LD_BIND_NOW=1 /bin/true)"
        else
            notok "own composition: LD_PRELOAD into a C program" "/bin/true: $out"
        fi
        ref=$("$tmp/appxx" 2>&1)
        out=$(LD_PRELOAD="$tmp/libmine.so" "$tmp/appxx" 2>&1)
        where=$(LD_PRELOAD="$tmp/libmine.so" "$tmp/appxx" _Znwm 2>&1 >/dev/null)
        if [ "$out" = "$ref" ] && [ "$where" = "$(printf 'malloc in %s\noperator new in %s' "$tmp/libmine.so" "$tmp/libmine.so")" ]; then
            ok "own composition: LD_PRELOAD into a C++ program: same output, malloc and operator new from libmine.so"
        else
            notok "own composition: LD_PRELOAD into a C++ program" "output '$out' (without: '$ref'); $(echo "$where" | tr '\n' ' ')"
        fi
        ref=$(LC_ALL=C ls -la /usr/bin /usr/lib 2>&1)
        out=$(LC_ALL=C LD_PRELOAD="$tmp/libmine.so" ls -la /usr/bin /usr/lib 2>&1)
        if [ "$out" = "$ref" ]; then ok "own composition: LD_PRELOAD ls -la /usr/bin /usr/lib: same output"
        else notok "own composition: LD_PRELOAD ls" "output differs: $(diff <(echo "$ref") <(echo "$out") | head -3 | tr '\n' ' ')"; fi
        if have python3; then
            py='import json, collections
d = collections.Counter()
for i in range(200000): d[str(i % 1013) * (i % 7 + 1)] += i
s = json.dumps(sorted(d.items())[:500])
print(len(d), sum(d.values()), len(s), s[:80])'
            ref=$(python3 -c "$py" 2>&1)
            out=$(LD_PRELOAD="$tmp/libmine.so" python3 -c "$py" 2>&1)
            if [ "$out" = "$ref" ] && [ -n "$ref" ]; then ok "own composition: LD_PRELOAD python3: same output"
            else notok "own composition: LD_PRELOAD python3" "'$out' (without: '$ref')"; fi
        else
            skip "own composition: LD_PRELOAD python3" "python3 not installed"
        fi
    fi
fi

# ---- smc, installed: a model line built against the installed headers and C++ shim ----
smc="$root/bin/smc"
if [ ! -x "$smc" ]; then
    notok "smc: installed" "$smc missing"
else
    line='mmap_heap::slab_lk(sync=spinlock, sizeclass=tc)::thread_cache(sizeclass=tc)::malloc_socket'
    if out=$(env -u SUNMAO_INCLUDE "$smc" build -o "$tmp/libline.so" "$line" 2>&1) && [ -f "$tmp/libline.so" ] && [ -z "$out" ]; then
        ok "smc (installed): builds a line with the installed headers, nothing printed"
        where=$(LD_PRELOAD="$tmp/libline.so" "$tmp/appxx" _Znwm 2>&1 >/dev/null)
        if [ "$where" = "$(printf 'malloc in %s\noperator new in %s' "$tmp/libline.so" "$tmp/libline.so")" ]; then
            ok "smc (installed): its library serves malloc and operator new in a C++ program"
        else
            notok "smc (installed): its library serves malloc and operator new" "$(echo "$where" | tr '\n' ' ')"
        fi
    else
        notok "smc (installed): builds a line" "$(echo "$out" | head -3 | tr '\n' ' ')"
    fi
    if "$smc" build --prefix mine_ -o "$tmp/libline.a" "$line" >/dev/null 2>&1 && nm "$tmp/libline.a" | grep -q ' T mine_malloc$'; then
        ok "smc (installed): --prefix builds a prefixed static library"
    else
        notok "smc (installed): --prefix" "no mine_malloc in $tmp/libline.a"
    fi
fi

# ---- make uninstall ----
if ! make -s BUILD="$BUILD" DESTDIR="$dest" PREFIX="$prefix" uninstall >"$tmp/uninstall.log" 2>&1; then
    notok "make uninstall" "$(first_error "$tmp/uninstall.log")"
elif [ ! -d "$root" ]; then
    notok "make uninstall" "removed the prefix $prefix itself"
elif left=$(cd "$root" && find . -mindepth 1 | sort | head -10 | tr '\n' ' ') && [ -n "$left" ]; then
    notok "make uninstall" "left under the prefix: $left"
else
    ok "make uninstall: nothing left under the prefix (no file, no empty directory), the prefix kept"
fi
[ "$fails" -eq 0 ]
