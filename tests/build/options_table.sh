#!/usr/bin/env bash
# docs/options.md is the table tools/options-table.sh makes from the headers and instances/*.c, and
# every option in it is documented: a meaning in its header's opening comment and a default.
#   ok options: table_current | not ok options: table_current: docs/options.md is stale; run tools/options-table.sh
#   ok options: documented/<header>/<option> | not ok ...: no meaning in the header's comment / no default
#   not ok options: read/<instance>/<option>: set before <header>, which does not read it
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/build/options_table.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Checks that docs/options.md is what tools/options-table.sh makes now and that every option has a
meaning in its header's comment and a default.
Prints `ok options: <case>` or `not ok options: <case>: <why>`.

Environment: BUILD (default build; log in $BUILD/options_table.log), SM_ROOT.
USAGE
            exit 0 ;;
        -*) echo "tests/build/options_table.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok options: setup: cannot cd to the repository root"; exit 1; }

log="${BUILD:-build}/options_table.log"
mkdir -p "$(dirname "$log")"
if tools/options-table.sh --check >"$log" 2>&1; then
    echo "ok options: table_current"
else
    echo "not ok options: table_current: docs/options.md is stale; run tools/options-table.sh"
    grep '^[-+][^-+]' "$log" | head -10 | sed 's/^/    /'
fi

rows=$(tools/options-table.sh --rows) || { echo "not ok options: rows: tools/options-table.sh --rows failed"; exit 1; }
[ -n "$rows" ] || { echo "not ok options: rows: no option found"; exit 1; }
printf '%s\n' "$rows" | awk -F'\t' '
$1 == "opt" {
    h = $2; sub(/\.h$/, "", h)
    why = ""
    if ($6 == "") why = "no meaning in the opening comment of include/sunmao/" $2 " (an entry \"" $3 "  text\")"
    if ($4 == "") why = (why == "" ? "" : why "; ") "no default (#ifndef " $3 " / #define " $3 " value)"
    if (why == "") print "ok options: documented/" h "/" $3
    else print "not ok options: documented/" h "/" $3 ": " why
}
$1 == "unread" { print "not ok options: read/" $2 "/" $3 ": set before " $4 ", which does not read it" }'
