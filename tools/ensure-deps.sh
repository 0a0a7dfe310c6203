#!/usr/bin/env bash
# Installs the Debian packages a target needs, only those missing. Usage: ensure-deps.sh build|bench
# Set AUTO_DEPS=0 to only report what is missing (no apt-get).
set -u
case "${1:-}" in
    -h | --help)
        cat <<'USAGE'
usage: tools/ensure-deps.sh [-h|--help] [build|bench|deb]     (or: make deps; make bench and make deb run theirs)

Installs with apt-get (through sudo when not root) the Debian packages that a target needs and
that are not installed yet; does nothing when all are there.
  build   compilers and tools for make, make test (default)
  bench   the peer allocators (jemalloc, tcmalloc, mimalloc), redis, sqlite3, gnuplot, ...
  deb     dpkg-buildpackage and debhelper, for make deb

Environment: AUTO_DEPS=0 only reports what is missing and installs nothing (default 1).
USAGE
        exit 0 ;;
    -*) echo "tools/ensure-deps.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
esac
case "${1:-build}" in
    # libclang-rt-dev and libfuzzer-N-dev (N: clang's major version, resolved below): the fuzzer
    # (tests/fuzz/fuzz.sh) builds with clang's ASan and libFuzzer; git, redis and Python's test suite:
    # real programs under each allocator (tests/programs/real_programs.sh).
    # cmake and pkg-config: tests/build/install.sh builds programs against `make install`'s files.
    build) pkgs="gcc g++ make clang python3 sqlite3 binutils cmake pkg-config git redis-server redis-tools libpython$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3.11)-testsuite libclang-rt-dev libfuzzer-CLANG-dev libjemalloc-dev google-perftools" ;;
    deb) pkgs="dpkg-dev debhelper fakeroot" ;;
    bench) pkgs="libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 libtbbmalloc2 redis-server redis-tools sqlite3 python3 gnuplot-nox time lua5.4 z3 ghostscript rocksdb-tools memcached" ;;
    *) echo "ensure-deps.sh: unknown target '$1' (expected build, bench or deb)" >&2; exit 2 ;;
esac
clang_major=$(clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9][0-9]*\).*/\1/p' | head -1)
pkgs="${pkgs//libfuzzer-CLANG-dev/libfuzzer-${clang_major:-14}-dev}"
missing=()
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "${AUTO_DEPS:-1}" = 0 ]; then
    echo "ensure-deps: missing packages (AUTO_DEPS=0, not installing): ${missing[*]}" >&2
    exit 0
fi
echo "ensure-deps: installing ${missing[*]}" >&2
SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || { echo "ensure-deps: apt-get install failed for: ${missing[*]}" >&2; exit 1; }
