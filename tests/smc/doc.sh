#!/usr/bin/env bash
# docs/model-language.md, the manual of the model language, says what smc does: its catalogue
# block is `smc catalogue --markdown` now (tools/smc/doc-catalogue.sh --check), every example line
# in it is accepted, and every row of its table of errors is the diagnostic smc prints.
#   ok smc-doc: catalogue_current | not ok smc-doc: catalogue_current: <why>
#   ok smc-doc: example/line<N>   (the fence opening on line N of the manual)
#   ok smc-doc: error/<class>     (a row of the "Errors" table)
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/smc/doc.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Checks docs/model-language.md against smc:
  - the block between `<!-- BEGIN smc catalogue --markdown -->` and `<!-- END ... -->` is what
    `$BUILD/smc catalogue --markdown` prints now (tools/smc/doc-catalogue.sh --check);
  - every fenced block whose info string is `model` passes `smc check`, `model-fragment` passes
    `smc check --fragment`, `model-syntax` passes `smc check --syntax` (a block is one line,
    which may be wrapped over several);
  - every row of the errors table (a line in backticks, then the first diagnostic in backticks)
    fails `smc check` with exactly that diagnostic.
Prints `ok smc-doc: <case>` or `not ok smc-doc: <case>: <why>`.

Environment: BUILD (default build: $BUILD/smc), SM_ROOT.
USAGE
            exit 0 ;;
        -*) echo "tests/smc/doc.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok smc-doc: setup: cannot cd to the repository root"; exit 1; }
export LC_ALL=C
doc=docs/model-language.md
smc="${BUILD:-build}/smc"
[ -f "$doc" ] || { echo "not ok smc-doc: setup: $doc missing"; exit 1; }
[ -x "$smc" ] || { echo "not ok smc-doc: setup: $smc missing (not built)"; exit 1; }
tmp=$(mktemp -d /tmp/smc-doc.XXXXXX) || { echo "not ok smc-doc: setup: mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT

# The catalogue block.
if out=$(BUILD="${BUILD:-build}" tools/smc/doc-catalogue.sh --check 2>&1); then
    echo "ok smc-doc: catalogue_current"
else
    echo "not ok smc-doc: catalogue_current: $(printf '%s\n' "$out" | head -1)"
    printf '%s\n' "$out" | sed -n '2,12p' | sed 's/^/    /'
fi

# The example lines: each ```model, ```model-fragment or ```model-syntax fence, into a file of its
# own named by the line of the manual its fence opens on.
awk -v dir="$tmp" '
/^```/ {
    if (!in_fence) {
        info = substr($0, 4); sub(/[ \t]+$/, "", info)
        in_fence = 1
        if (info == "model" || info == "model-fragment" || info == "model-syntax") {
            f = dir "/" NR "." info; printf "" >f
        } else f = ""
        next
    }
    if ($0 ~ /^```[ \t]*$/) { in_fence = 0; if (f != "") close(f); f = ""; next }
}
in_fence && f != "" { print >f }' "$doc"
n=0
for f in $(ls "$tmp" | sort -n); do
    n=$((n + 1))
    line=${f%%.*}
    case "$f" in
        *.model-fragment) flags=(--fragment) ;;
        *.model-syntax) flags=(--syntax) ;;
        *) flags=() ;;
    esac
    if [ ! -s "$tmp/$f" ]; then
        echo "not ok smc-doc: example/line$line: the fence is empty"
    elif out=$("$smc" check -q "${flags[@]}" "$tmp/$f" 2>&1); then
        echo "ok smc-doc: example/line$line"
    else
        echo "not ok smc-doc: example/line$line: smc check${flags[*]:+ ${flags[*]}} fails: $(printf '%s\n' "$out" | head -1)"
    fi
done
[ "$n" -ge 10 ] && echo "ok smc-doc: examples/count" ||
    echo "not ok smc-doc: examples/count: $n model fences in $doc (want at least 10: is the info string \`model\`?)"

# The errors table: rows `| class | `line` | flags | `LINE:COL: kind: message` |` (fields
# separated by \037 below: a tab is a blank to read, and an empty flags field would vanish).
rows=$(awk '
/^## Errors/ { in_sec = 1; next }
/^## / { in_sec = 0 }
in_sec && /^\| / {
    s = $0; sub(/^\| /, "", s); sub(/ \|[ \t]*$/, "", s)
    n = split(s, c, / \| /)
    if (n != 4 || c[2] !~ /^`.*`$/ || c[4] !~ /^`[0-9]+:[0-9]+: (error|warning): .*`$/) next
    line = substr(c[2], 2, length(c[2]) - 2); msg = substr(c[4], 2, length(c[4]) - 2)
    flags = c[3]; if (flags == "—" || flags == "-") flags = ""; gsub(/`/, "", flags)
    printf "%s\037%s\037%s\037%s\n", c[1], line, flags, msg
}' "$doc")
m=0
while IFS=$'\037' read -r class line flags want; do
    [ -n "$class" ] || continue
    m=$((m + 1))
    name=$(printf '%s' "$class" | tr -c 'A-Za-z0-9_\n-' '_')
    out=$("$smc" check $flags "$line" 2>&1 >/dev/null)
    rc=$?
    first=$(printf '%s\n' "$out" | head -1)
    case "$want" in *": warning: "*) want_rc=0 ;; *) want_rc=1 ;; esac
    if [ "$rc" != "$want_rc" ]; then
        echo "not ok smc-doc: error/$name: status $rc, want $want_rc ($first)"
    elif [ "$first" != "line:$want" ]; then
        echo "not ok smc-doc: error/$name: smc prints '$first', the manual says 'line:$want'"
    else
        echo "ok smc-doc: error/$name"
    fi
done <<<"$rows"
[ "$m" -ge 20 ] && echo "ok smc-doc: errors/count" ||
    echo "not ok smc-doc: errors/count: $m rows read from the Errors table of $doc (want at least 20)"
exit 0
