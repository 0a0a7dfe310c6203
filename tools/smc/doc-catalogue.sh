#!/usr/bin/env bash
# doc-catalogue.sh — the reference section of docs/model-language.md is `smc catalogue --markdown`:
# the lines between the two markers below are that command's output, and nothing else.
# Usage: tools/smc/doc-catalogue.sh           rewrite the block from $BUILD/smc catalogue --markdown
#        tools/smc/doc-catalogue.sh --check   exit 1, printing the head of a diff, when it is stale
# Exit: 0 written (or current); 1 stale (--check); 2 usage, smc not built, markers missing or doubled.
# Environment: BUILD (default build: $BUILD/smc; `make $BUILD/smc` builds it), SM_ROOT.
set -u
export LC_ALL=C
begin='<!-- BEGIN smc catalogue --markdown -->'
end='<!-- END smc catalogue --markdown -->'

usage() {
    cat <<'USAGE'
usage: tools/smc/doc-catalogue.sh [--check] [-h|--help]

Replaces the lines between `<!-- BEGIN smc catalogue --markdown -->` and
`<!-- END smc catalogue --markdown -->` in docs/model-language.md with the output of
`$BUILD/smc catalogue --markdown` (the catalogue smc was built with, generated from the headers'
@model lines). The markers stay; the rest of the file is not touched.

  --check     write nothing; exit 1 and print the head of a diff when the block is stale
  -h, --help  this text
Exit status: 0 written or current, 1 stale (--check), 2 bad usage, smc not built, or the markers
missing, doubled or out of order.
Environment: BUILD (default build; build smc first: make BUILD=... $BUILD/smc), SM_ROOT.
USAGE
}

mode=write
for arg in "$@"; do
    case "$arg" in
        -h | --help) usage; exit 0 ;;
        --check) mode=check ;;
        -*) echo "tools/smc/doc-catalogue.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
        *) echo "tools/smc/doc-catalogue.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "doc-catalogue: cannot cd to the repository root" >&2; exit 2; }
doc=docs/model-language.md
smc="${BUILD:-build}/smc"
[ -f "$doc" ] || { echo "doc-catalogue: $doc not found" >&2; exit 2; }
[ -x "$smc" ] || { echo "doc-catalogue: $smc not built (make BUILD=${BUILD:-build} $smc)" >&2; exit 2; }

nb=$(grep -cxF -- "$begin" "$doc")
ne=$(grep -cxF -- "$end" "$doc")
if [ "$nb" != 1 ] || [ "$ne" != 1 ]; then
    echo "doc-catalogue: $doc must hold each marker once, alone on its line: '$begin' ($nb), '$end' ($ne)" >&2
    exit 2
fi
lb=$(grep -nxF -- "$begin" "$doc" | cut -d: -f1)
le=$(grep -nxF -- "$end" "$doc" | cut -d: -f1)
[ "$lb" -lt "$le" ] || { echo "doc-catalogue: $doc: the END marker (line $le) comes before the BEGIN marker (line $lb)" >&2; exit 2; }

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
"$smc" catalogue --markdown >"$tmp/cat.md" || { echo "doc-catalogue: $smc catalogue --markdown failed" >&2; exit 2; }
[ -s "$tmp/cat.md" ] || { echo "doc-catalogue: $smc catalogue --markdown printed nothing" >&2; exit 2; }

# The block: the marker, a blank line, the catalogue (its trailing blank lines dropped), a blank
# line, the marker.
{
    head -n "$lb" "$doc"
    echo
    awk '{ line[NR] = $0 } END { n = NR; while (n > 0 && line[n] == "") n--; for (i = 1; i <= n; i++) print line[i] }' "$tmp/cat.md"
    echo
    tail -n "+$le" "$doc"
} >"$tmp/new.md"

if cmp -s "$doc" "$tmp/new.md"; then
    [ "$mode" = check ] && echo "doc-catalogue: $doc is current"
    exit 0
fi
if [ "$mode" = check ]; then
    echo "doc-catalogue: $doc's catalogue block is stale; run tools/smc/doc-catalogue.sh (BUILD=${BUILD:-build})"
    diff -u --label "$doc" --label "$doc from $smc catalogue --markdown" "$doc" "$tmp/new.md" | head -40
    exit 1
fi
cat "$tmp/new.md" >"$doc" || { echo "doc-catalogue: cannot write $doc" >&2; exit 2; }
echo "doc-catalogue: $doc: the catalogue block rewritten from $smc"
exit 0
