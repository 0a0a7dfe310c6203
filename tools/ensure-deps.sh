#!/usr/bin/env bash
# Installs the Debian packages a target needs, only those missing. Usage: ensure-deps.sh build|bench
# Set AUTO_DEPS=0 to only report what is missing (no apt-get).
set -u
case "${1:-build}" in
    build) pkgs="gcc g++ make clang python3 sqlite3 binutils" ;;
    bench) pkgs="libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 redis-server redis-tools sqlite3 python3 gnuplot-nox time" ;;
    *) echo "ensure-deps.sh: unknown target '$1' (expected build or bench)" >&2; exit 2 ;;
esac
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
