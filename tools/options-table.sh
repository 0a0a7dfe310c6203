#!/usr/bin/env bash
# options-table.sh — every option of every layer, OS layer and socket in one table: docs/options.md.
# Usage: tools/options-table.sh           write docs/options.md
#        tools/options-table.sh --check   exit 1 (printing the lines that differ) if it is stale
#        tools/options-table.sh --rows    the table's data as tab-separated lines (for tests):
#            opt <header> <option> <default> <allowed> <meaning> <set by instances>
#            unread <instance> <option> <header included after it>   (no header reads that option)
# bash + awk (POSIX, mawk is enough) + sed + diff: no python.
#
# What it reads, for each template header under include/sunmao/{layers/core,layers/addon,os,sockets}
# and each instances/*.c:
#   options      every SM_OPT_* the header documents, defaults or uses, and every SM_SOCKET_* knob it
#                documents or defaults (#ifndef SM_SOCKET_X);
#   meaning      the option's entry in the header's opening comment: a line (or the text after
#                "Options:" or after a sentence) that starts with the name followed by two spaces or
#                " (", plus the lines after it indented deeper than the first entry's line; several
#                names separated by ", " share one entry. The table shows the first sentence;
#   default      the #define of the option inside its `#ifndef SM_OPT_X` block (an `#if
#                !defined(SM_OPT_X) && COND` block before it gives the default under COND);
#   allowed      the messages of the _Static_asserts and `#if ... #error`s whose message starts with
#                the option's name (or, naming no option, whose condition uses it), and
#                SM_REQUIRE_CAP_WHEN conditions on it;
#   instances    each `#define SM_OPT_X value` in instances/*.c, attributed to the next layer, OS
#                layer or socket header the instance includes.
set -u
cd "$(dirname "$0")/.." || { echo "options-table: cannot cd to the repository root" >&2; exit 2; }
export LC_ALL=C

mode=write
case "${1:-}" in
"") ;;
--check) mode=check ;;
--rows) mode=rows ;;
-h | --help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
-*) echo "tools/options-table.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
*) echo "tools/options-table.sh: unknown argument '$1' (--check, --rows; see --help)" >&2; exit 2 ;;
esac
out=docs/options.md

headers=()
for d in layers/core layers/addon os sockets; do
    for h in include/sunmao/$d/*.h; do [ -f "$h" ] && headers+=("$h"); done
done
instances=()
for f in instances/*.c; do [ -f "$f" ] && instances+=("$f"); done
[ ${#headers[@]} -gt 0 ] || { echo "options-table: no headers under include/sunmao" >&2; exit 2; }

# ---- headers -> "opt" rows: header, option, default, allowed, meaning (full entry) ----
read -r -d '' HEADER_AWK <<'AWK'
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
function squeeze(s) { gsub(/[ \t]+/, " ", s); return trim(s) }
function addopt(o) { if (!((H, o) in known)) { known[H, o] = 1; order[H, ++nopt[H]] = o } }
function is_opt(o) { return o ~ /^SM_OPT_/ }
# s without one pair of parentheses around all of it.
function unparen(s,   i, d, c) {
    if (s !~ /^\(.*\)$/) return s
    d = 0
    for (i = 1; i < length(s); i++) {
        c = substr(s, i, 1)
        if (c == "(") d++
        else if (c == ")" && --d == 0) return s
    }
    return substr(s, 2, length(s) - 2)
}
function close_entry(   n, i, names) {
    if (cur == "") return
    n = split(cur, names, " ")
    for (i = 1; i <= n; i++)
        if (!((H, names[i]) in meaning)) { meaning[H, names[i]] = squeeze(curtext); addopt(names[i]) }
    cur = ""; curtext = ""
}
# One line of the opening comment (marker and "*/" removed): entries of the options list.
function comment_line(t,    ind, from, off, rest, p, name, pre, after, names, ok) {
    if (t !~ /[^ \t]/) { close_entry(); section = 0; return }
    match(t, /[^ ]/); ind = RSTART - 1
    from = 1; off = 0; rest = t; ok = 0
    while (match(rest, /SM_(OPT|SOCKET)_[A-Z0-9_]+/)) {
        p = off + RSTART; name = substr(rest, RSTART, RLENGTH)
        pre = substr(t, 1, p - 1); after = substr(t, p + RLENGTH)
        names = name
        while (match(after, /^, SM_(OPT|SOCKET)_[A-Z0-9_]+/)) {
            names = names " " substr(after, 3, RLENGTH - 2); after = substr(after, RLENGTH + 1)
        }
        if ((pre ~ /^ *$/ || pre ~ /Options: *$/ || pre ~ /\. +$/) && after ~ /^(  | \()/) {
            if (!section) { section = 1; base = ind } else if (ind < base) base = ind
            if (cur != "") curtext = curtext " " substr(t, from, p - from)
            close_entry()
            cur = names; from = length(t) - length(after) + 1; ok = 1
        }
        off = length(t) - length(after); rest = after
    }
    if (ok) { curtext = curtext " " substr(t, from); return }
    if (section && ind > base) { if (cur != "") curtext = curtext " " t; return }
    close_entry(); section = 0
}
function add_range(o, text,   k) {
    k = H SUBSEP o
    if (!(k in allowed)) allowed[k] = text
    else if (index("; " allowed[k] "; ", "; " text "; ") == 0) allowed[k] = allowed[k] "; " text
    addopt(o)
}
# A check: its condition and its message. Attributed to the option(s) its message starts with, or
# else to the options its condition uses.
function check(cond, msg,   m, subj, n, i, rest, names) {
    sub(/^[a-z_]+: /, "", msg)
    if (match(msg, /^SM_OPT_[A-Z0-9_]+/)) {
        subj = substr(msg, 1, RLENGTH); rest = substr(msg, RLENGTH + 1)
        if (rest ~ /^ / && rest !~ /^ and /) { add_range(subj, trim(rest)); return }
        m = msg; n = 0
        while (match(m, /^(, | and )?SM_OPT_[A-Z0-9_]+/)) {
            names[++n] = substr(m, 1, RLENGTH); sub(/^(, | and )/, "", names[n]); m = substr(m, RLENGTH + 1)
        }
        for (i = 1; i <= n; i++) add_range(names[i], msg)
        return
    }
    m = cond
    while (match(m, /SM_OPT_[A-Z0-9_]+/)) { add_range(substr(m, RSTART, RLENGTH), msg); m = substr(m, RSTART + RLENGTH) }
}
function last_string(s,   r) {
    r = ""
    while (match(s, /"[^"]*"/)) { r = substr(s, RSTART + 1, RLENGTH - 2); s = substr(s, RSTART + RLENGTH) }
    return r
}
function statement(s,   cond, cap, rest) {
    s = squeeze(s)
    if (s ~ /^SM_REQUIRE_CAP_WHEN\(/) {
        rest = s; sub(/^SM_REQUIRE_CAP_WHEN\( */, "", rest)
        cond = rest; sub(/,.*/, "", cond)
        cap = rest; sub(/^[^,]*, */, "", cap); sub(/[ ,].*/, "", cap)
        if (cond ~ /SM_OPT_/) {
            if (cond ~ /^SM_OPT_[A-Z0-9_]+$/) add_range(cond, "non-zero needs capability " cap " of the next layer")
            else check(cond, "if " cond ": needs capability " cap " of the next layer")
        }
        return
    }
    if (s !~ /SM_OPT_/) return
    cond = s; sub(/^_Static_assert\( */, "", cond); sub(/, *"[^"]*" *\) *;.*$/, "", cond)
    check(cond, last_string(s))
}
FNR == 1 {
    H = FILENAME; sub(/^.*include\/sunmao\//, "", H); files[++nfiles] = H
    opening = 1; incomment = 0; section = 0; cur = ""; curtext = ""; depth = 0; stmt = ""; pif = ""
}
opening {
    if (!incomment && $0 ~ /^[ \t]*\/\*/) incomment = 1
    if (incomment) {
        t = $0; end = (t ~ /\*\//); sub(/\*\/.*$/, "", t); sub(/^[ \t]*(\/\*|\*)/, "", t)
        comment_line(t)
        if (end) { close_entry(); section = 0; opening = 0 }
        next
    }
    if ($0 ~ /[^ \t]/) opening = 0
}
stmt != "" { stmt = stmt " " $0; if ($0 ~ /;/) { statement(stmt); stmt = "" }; next }
/^[ \t]*(_Static_assert|SM_REQUIRE_CAP_WHEN)\(/ { stmt = $0; if ($0 ~ /;/) { statement(stmt); stmt = "" }; next }
/^[ \t]*#[ \t]*error/ { if (pif != "") check(pif, last_string($0)); pif = ""; next }
/^[ \t]*#[ \t]*(if|ifdef|ifndef)[ \t]/ {
    kind[++depth] = "other"
    if ($0 ~ /^[ \t]*#[ \t]*ifndef[ \t]+SM_(OPT|SOCKET)_/) { kind[depth] = "def" }
    else if ($0 ~ /^[ \t]*#[ \t]*if[ \t]+!defined\(SM_OPT_[A-Z0-9_]+\) *&&/) {
        kind[depth] = "alt"; altc = $0; sub(/^[ \t]*#[ \t]*if[ \t]+!defined\(SM_OPT_[A-Z0-9_]+\) *&& */, "", altc)
        altcond[depth] = unparen(trim(altc))
    }
    pif = ($0 ~ /SM_OPT_/) ? $0 : ""; sub(/^[ \t]*#[ \t]*(if|ifdef|ifndef)[ \t]+/, "", pif)
    next
}
/^[ \t]*#[ \t]*elif[ \t]/ { pif = ($0 ~ /SM_OPT_/) ? $0 : ""; sub(/^[ \t]*#[ \t]*elif[ \t]+/, "", pif); next }
/^[ \t]*#[ \t]*else/ { if (depth > 0) kind[depth] = "other"; pif = ""; next }
/^[ \t]*#[ \t]*endif/ { if (depth > 0) depth--; pif = ""; next }
/^[ \t]*#[ \t]*define[ \t]+SM_(OPT|SOCKET)_[A-Z0-9_]+[ \t(]/ {
    pif = ""
    name = $0; sub(/^[ \t]*#[ \t]*define[ \t]+/, "", name); val = name
    sub(/[ \t(].*$/, "", name); sub(/^[A-Z0-9_]+[ \t]*/, "", val)
    sub(/\/\*.*$/, "", val); sub(/\/\/.*$/, "", val); val = trim(val)
    if (depth > 0 && kind[depth] == "def" && !((H, name) in dflt)) { dflt[H, name] = val; addopt(name) }
    else if (depth > 0 && kind[depth] == "alt" && !((H, name) in alt)) { alt[H, name] = val; altif[H, name] = altcond[depth]; addopt(name) }
    next
}
{
    pif = ""
    if ($0 ~ /^[ \t]*#[ \t]*undef/) next
    line = $0; sub(/\/\/.*$/, "", line)
    while (match(line, /SM_OPT_[A-Z0-9_]+/)) { addopt(substr(line, RSTART, RLENGTH)); line = substr(line, RSTART + RLENGTH) }
}
END {
    for (f = 1; f <= nfiles; f++) {
        H = files[f]
        for (i = 1; i <= nopt[H]; i++) {
            o = order[H, i]
            if (!is_opt(o) && !((H, o) in dflt)) continue  # an SM_SOCKET_ constant, not a knob
            d = ((H, o) in dflt) ? "`" dflt[H, o] "`" : ""
            if (d != "" && (H, o) in alt) d = d " (`" alt[H, o] "` if `" altif[H, o] "`)"
            printf "opt\t%s\t%s\t%s\t%s\t%s\n", H, o, d, ((H, o) in allowed) ? allowed[H, o] : "", ((H, o) in meaning) ? meaning[H, o] : ""
        }
    }
}
AWK

# ---- instances -> "set" rows: instance, layer instance name, header included next, option, value ----
read -r -d '' INSTANCE_AWK <<'AWK'
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
FNR == 1 { inst = FILENAME; sub(/^.*\//, "", inst); sub(/\.c$/, "", inst); np = 0; layer = "" }
/^[ \t]*#[ \t]*define[ \t]+SM_LAYER[ \t]/ { layer = $3 }
/^[ \t]*#[ \t]*define[ \t]+SM_(OPT|SOCKET)_[A-Z0-9_]+[ \t]/ {
    name = $0; sub(/^[ \t]*#[ \t]*define[ \t]+/, "", name); val = name
    sub(/[ \t].*$/, "", name); sub(/^[A-Z0-9_]+[ \t]*/, "", val)
    sub(/\/\*.*$/, "", val); sub(/\/\/.*$/, "", val)
    pn[++np] = name; pv[np] = trim(val)
}
/^[ \t]*#[ \t]*undef[ \t]+SM_(OPT|SOCKET)_/ { for (i = 1; i <= np; i++) if (pn[i] == $2) pn[i] = "" }
/^[ \t]*#[ \t]*include[ \t]*[<"]sunmao\/(layers|os|sockets)\// {
    path = $0; sub(/^[^<"]*[<"]sunmao\//, "", path); sub(/[>"].*$/, "", path)
    for (i = 1; i <= np; i++) if (pn[i] != "") printf "set\t%s\t%s\t%s\t%s\t%s\n", inst, layer, path, pn[i], pv[i]
    np = 0; layer = ""
}
AWK

# ---- both -> rows with the instances' settings, and settings no header reads ----
read -r -d '' JOIN_AWK <<'AWK'
function add(k, s,   t) { t = (k in sets) ? sets[k] "; " s : s; sets[k] = t }
$1 == "opt" { rows[++n] = $0; known[$2, $3] = 1; t = ($3 in hdr) ? hdr[$3] " " $2 : $2; hdr[$3] = t; next }
$1 == "set" {
    inst = $2; layer = $3; path = $4; o = $5; v = $6
    s = "`" inst "`" (layer != "" ? " (`" layer "`)" : "") ": `" v "`"
    if ((path, o) in known) { add(path SUBSEP o, s); next }
    if (path ~ /^sockets\// && (o in hdr)) {          # the sockets share libc_api.h's knobs
        m = split(hdr[o], hs, " ")
        for (i = 1; i <= m; i++) if (hs[i] ~ /^sockets\//) { add(hs[i] SUBSEP o, s); next }
    }
    printf "unread\tinstances/%s.c\t%s\t%s\n", inst, o, path
}
END {
    for (i = 1; i <= n; i++) {
        split(rows[i], f, "\t")
        printf "%s\t%s\n", rows[i], ((f[2], f[3]) in sets) ? sets[f[2], f[3]] : ""
    }
}
AWK

# ---- rows -> docs/options.md ----
read -r -d '' RENDER_AWK <<'AWK'
function cell(s) { gsub(/\|/, "\\|", s); return s == "" ? "—" : s }
function names(s) { gsub(/SM_(OPT|SOCKET)_[A-Z0-9_]+/, "`&`", s); return s }
function first_sentence(s) { if (match(s, /\. [A-Z]/)) s = substr(s, 1, RSTART); return s }
BEGIN {
    FS = "\t"
    print "# Options"
    print ""
    print "<!-- Generated by tools/options-table.sh from the headers and instances/*.c; do not edit."
    print "     tests/build/options_table.sh fails when this file is stale. -->"
    print ""
    print "Every option a layer, OS layer or socket reads, one row per header that reads it. An option is"
    print "set by `#define`-ing it before including the header (see docs/architecture.md, \"How composition"
    print "works\"); a header gives every option a default and `#undef`s its options at its end, so each"
    print "inclusion, and each instance, has its own. *Allowed* quotes the `_Static_assert`s and `#error`s"
    print "that check the value (\"—\": not checked); *Meaning* is the first sentence of the option's entry"
    print "in the header's opening comment, which says more. `tests/build/options_matrix.sh` builds every"
    print "layer option at a non-default value and checks a round trip through it."
    print ""
    print "| Option | Header | Default | Allowed | Meaning | Set by instances |"
    print "|---|---|---|---|---|---|"
}
$1 == "opt" {
    printf "| `%s` | `%s` | %s | %s | %s | %s |\n", $3, $2, cell($4), cell(names($5)), cell(names(first_sentence($6))), cell($7)
}
$1 == "unread" { unread[++nu] = "- `" $2 "` sets `" $3 "` before including `" $4 "`, which does not read it." }
END {
    if (nu) {
        print ""
        print "Settings no header reads:"
        print ""
        for (i = 1; i <= nu; i++) print unread[i]
    }
}
AWK

rows() {
    { awk "$HEADER_AWK" "${headers[@]}"; [ ${#instances[@]} -eq 0 ] || awk "$INSTANCE_AWK" "${instances[@]}"; } |
        awk -F'\t' "$JOIN_AWK"
}

case "$mode" in
rows) rows ;;
write)
    tmp=$(mktemp) || exit 2
    rows | awk "$RENDER_AWK" >"$tmp" && mv "$tmp" "$out" || { rm -f "$tmp"; exit 2; }
    chmod 644 "$out"
    echo "options-table: wrote $out ($(grep -c '^| `SM_' "$out") options)"
    ;;
check)
    tmp=$(mktemp) || exit 2
    trap 'rm -f "$tmp"' EXIT
    rows | awk "$RENDER_AWK" >"$tmp" || exit 2
    if [ ! -f "$out" ]; then
        echo "options-table: $out is missing; run tools/options-table.sh"
        exit 1
    fi
    if ! diff -u --label "$out (committed)" --label "$out (generated)" "$out" "$tmp"; then
        echo "options-table: $out is stale; run tools/options-table.sh"
        exit 1
    fi
    ;;
esac
