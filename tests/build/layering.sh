#!/usr/bin/env bash
# The include graph is one-way: core <- platform <- policies <- os/layers/sockets <- instances, and
# only the platform layer includes system headers beyond the freestanding ones
# (tools/check-layering.sh: one `ok layering: <path>` / `not ok layering: <path>: <why>` per file).
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok layering: setup: cannot cd to the repository root"; exit 1; }
exec tools/check-layering.sh
