#!/usr/bin/env bash
# Every public header compiles on its own and opens with a comment saying what it is
# (tools/check-headers.sh: one `ok headers: <path>` / `not ok headers: <path>: <why>` per header).
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok headers: setup: cannot cd to the repository root"; exit 1; }
exec tools/check-headers.sh
