#!/usr/bin/env bash
# catalogue.sh — smc's catalogue (tools/smc/catalogue.h) from the headers: every layer, socket and
# policy the model language names, with its keys, slots, capabilities and properties.
# Usage: tools/smc/catalogue.sh [--root DIR] -o FILE.c   write the C file that defines smc_layers[],
#                                                        smc_nlayers, smc_policies[], smc_npolicies
#        tools/smc/catalogue.sh [--root DIR] --check     run the checks only, write nothing; one line
#            per header: ok smc-catalogue: <header> | not ok smc-catalogue: <header>: <why>
# Exit: 0 done; 1 a header fails a check (-o: one line per problem on stderr, nothing written); 2 usage.
# bash + awk (POSIX, mawk is enough): no python.
#
# Headers: include/sunmao/{layers/core,layers/addon,os}/*.h (each must carry @model lines),
# sockets/*_socket.h (must) and sockets/custom_param.h (any socket header with @model lines), and
# policies/<family>/*.h whose opening comment begins "<family> policy" (must; the others, such as
# sync/owner.h, are helpers). What each entry is made of:
#   @model lines   of the header's opening comment (grammar: tools/smc/catalogue.h), plus
#                  `slot S=` (an optional slot with no default: the header tests #ifdef SM_S) and
#                  `opaque K` (an option only C can set, a function or an expression: checked, not
#                  catalogued); `paper=A,B` may follow a slot as it follows a key;
#   key defaults and meanings   tools/options-table.sh --rows (the first sentence of the meaning);
#   slots          `#error "...: policy slot 'S' is empty"` (required) and `#ifndef SM_S` /
#                  `#define SM_S P` (optional, default P), checked against the @model slots;
#   capabilities   `#define SM_LAYER_OFFERS` (SM_CAP_ALL or a mask; several definitions under #if:
#                  their union) and `#define SM_LAYER_CAPS ... SM_CAPS(SM_NEXT) ...` (forwards: its
#                  capabilities are its next layer's, masked by offers, but those named before
#                  SM_CAPS(SM_NEXT), which it offers whatever is below); SM_REQUIRE_CAP(N, "why")
#                  and SM_REQUIRE_CAP_WHEN(SM_OPT_X, N, "why") are its needs;
#   range          the header includes policies/size_handle.h (and `range` must say so);
#   summary        the first sentence of the opening comment, after "name: ".
# The code read is the header's, its parts (include/sunmao/<dir>/<name>/*.h) and the helpers it
# includes from its own directory that carry no @model (sockets/libc_api.h).
set -u
export LC_ALL=C

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }
root="" out="" mode=""
while [ $# -gt 0 ]; do
    case "$1" in
    -h | --help) usage; exit 0 ;;
    --root) [ $# -ge 2 ] || { echo "tools/smc/catalogue.sh: --root needs a directory" >&2; exit 2; }; root=$2; shift ;;
    --root=*) root=${1#--root=} ;;
    -o) [ $# -ge 2 ] || { echo "tools/smc/catalogue.sh: -o needs a file" >&2; exit 2; }; out=$2; mode=write; shift ;;
    --check) mode=check ;;
    -*) echo "tools/smc/catalogue.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) echo "tools/smc/catalogue.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ -n "$mode" ] || { echo "tools/smc/catalogue.sh: say -o FILE.c or --check (see --help)" >&2; exit 2; }
if [ "$mode" = write ] && [ "$out" = "${out#/}" ]; then out="$PWD/$out"; fi
[ -n "$root" ] || root="$(dirname "$0")/../.."
cd "$root" || { echo "catalogue.sh: cannot cd to $root" >&2; exit 2; }
[ -d include/sunmao ] && [ -x tools/options-table.sh ] ||
    { echo "catalogue.sh: $PWD is not the repository root (no include/sunmao or tools/options-table.sh)" >&2; exit 2; }

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
tools/options-table.sh --rows >"$tmp/rows" || { echo "catalogue.sh: tools/options-table.sh --rows failed" >&2; exit 2; }

# The manifest: `main <header> <required>`, `part <owner> <file>`, `helper <owner> <file>`.
inc=include/sunmao
families=""
for d in "$inc"/policies/*/; do d=${d%/}; families="$families ${d##*/}"; done
{
    main() { # header required
        printf 'main\t%s\t%s\n' "$1" "$2"
        grep -q '@model:.*alias-of=' "$1" && return
        local dir=${1%/*} base=${1##*/} f inc_name
        base=${base%.h}
        if [ -d "$dir/$base" ]; then
            for f in "$dir/$base"/*.h; do [ -f "$f" ] && printf 'part\t%s\t%s\n' "$1" "$f"; done
        fi
        for inc_name in $(sed -n 's/^[ \t]*#[ \t]*include[ \t]*"\([A-Za-z0-9_]*\.h\)".*/\1/p' "$1"); do
            f="$dir/$inc_name"
            [ -f "$f" ] && ! grep -q '@model:' "$f" && printf 'helper\t%s\t%s\n' "$1" "$f"
        done
    }
    for d in layers/core layers/addon os; do
        for h in "$inc/$d"/*.h; do [ -f "$h" ] && main "$h" 1; done
    done
    for h in "$inc"/sockets/*.h; do
        [ -f "$h" ] || continue
        case "$h" in *_socket.h) main "$h" 1 ;; *) grep -q '@model:' "$h" && main "$h" 0 ;; esac
    done
    for fam in $families; do
        for h in "$inc/policies/$fam"/*.h; do
            [ -f "$h" ] || continue
            if head -n 1 "$h" | grep -q "^/\* $fam policy"; then main "$h" 1
            elif grep -q '@model:' "$h"; then main "$h" 0
            fi
        done
    done
} >"$tmp/manifest"

read -r -d '' CATALOGUE_AWK <<'AWK'
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
function squeeze(s) { gsub(/[ \t]+/, " ", s); return trim(s) }
function problem(h, msg) { np[h]++; prob[h, np[h]] = msg; nprob++ }
function rel(h) { sub(/^include\//, "", h); return h }          # sunmao/layers/core/slab_lk.h
function opth(h) { sub(/^include\/sunmao\//, "", h); return h } # layers/core/slab_lk.h (the rows')
function base(h) { sub(/^.*\//, "", h); sub(/\.h$/, "", h); return h }
# A C string literal of s: backslashes, quotes and trigraphs escaped, tabs made blanks.
function cstr(s,   r, i, c, n) {
    r = ""; n = length(s)
    for (i = 1; i <= n; i++) {
        c = substr(s, i, 1)
        if (c == "\\" || c == "\"") r = r "\\" c
        else if (c == "\t") r = r " "
        else if (c == "?" && substr(s, i + 1, 1) == "?") r = r "?\\"
        else r = r c
    }
    return "\"" r "\""
}
# The first sentence of s: up to the first full stop followed by a blank (or the end) outside
# parentheses and brackets, not one of an abbreviation.
function first_sentence(s,   i, c, d, n, w) {
    s = squeeze(s); d = 0; n = length(s)
    for (i = 1; i <= n; i++) {
        c = substr(s, i, 1)
        if (c == "(" || c == "[") d++
        else if ((c == ")" || c == "]") && d > 0) d--
        else if (c == "." && d == 0 && (i == n || substr(s, i + 1, 1) == " ")) {
            w = substr(s, 1, i); sub(/^.*[ (]/, "", w)
            if (w ~ /^(e\.g|i\.e|al|cf|vs|etc|approx)\.$/ || substr(s, i - 1, 1) == ".") continue
            return substr(s, 1, i)
        }
    }
    return s
}
# s without its leading "name: " (the first ": " outside parentheses, when what is before it names
# the header).
function strip_name(s, name,   i, c, d, n) {
    d = 0; n = length(s)
    for (i = 1; i < n; i++) {
        c = substr(s, i, 1)
        if (c == "(") d++
        else if (c == ")" && d > 0) d--
        else if (c == ":" && d == 0 && substr(s, i + 1, 1) == " ")
            return index(substr(s, 1, i - 1), name) ? substr(s, i + 2) : s
    }
    return s
}
function capbit(name) {
    if (name == "HIT") return 1; if (name == "BATCH") return 2; if (name == "OWNER") return 4
    if (name == "MAPPING") return 8; if (name == "STABLE") return 16; if (name == "MOVE") return 32
    if (name == "ALL") return 63
    return -1
}
function capnames(m,   r) {
    if (m == 63) return "SMC_CAP_ALL"
    r = ""
    if (m % 2 >= 1) r = r " | SMC_CAP_HIT"
    if (m % 4 >= 2) r = r " | SMC_CAP_BATCH"
    if (m % 8 >= 4) r = r " | SMC_CAP_OWNER"
    if (m % 16 >= 8) r = r " | SMC_CAP_MAPPING"
    if (m % 32 >= 16) r = r " | SMC_CAP_STABLE"
    if (m % 64 >= 32) r = r " | SMC_CAP_MOVE"
    return r == "" ? "0" : substr(r, 4)
}
function andnot(a, b,   r, bit) {
    r = 0
    for (bit = 1; bit <= 32; bit *= 2) if (a % (2 * bit) >= bit && b % (2 * bit) < bit) r += bit
    return r
}
function orbits(a, b,   r, bit) {
    r = 0
    for (bit = 1; bit <= 32; bit *= 2) if (a % (2 * bit) >= bit || b % (2 * bit) >= bit) r += bit
    return r
}
# A size written N, N << M or (N << M), with an optional u/U/(size_t) cast: its value, or "".
function evalsize(e,   a, b) {
    e = squeeze(e); gsub(/\(size_t\)/, "", e); gsub(/[()]/, "", e); gsub(/[uU]/, "", e); e = squeeze(e)
    if (e ~ /^[0-9]+$/) return e + 0
    if (e ~ /^[0-9]+ *<< *[0-9]+$/) { a = e; sub(/ *<<.*/, "", a); b = e; sub(/^.*<< */, "", b); return (a + 0) * (2 ^ (b + 0)) }
    return ""
}
# One statement SM_REQUIRE_CAP(N, "why") or SM_REQUIRE_CAP_WHEN(COND, N, "why") of header h.
function need(h, s,   args, cond, cap, why, m) {
    s = squeeze(s)
    why = ""; m = s
    while (match(m, /"([^"\\]|\\.)*"/)) { why = why substr(m, RSTART + 1, RLENGTH - 2); m = substr(m, RSTART + RLENGTH) }
    args = s; sub(/^SM_REQUIRE_CAP(_WHEN)?\( */, "", args); sub(/ *,? *".*$/, "", args)
    if (s ~ /^SM_REQUIRE_CAP_WHEN/) { cond = args; sub(/ *,.*$/, "", cond); cap = args; sub(/^[^,]*, */, "", cap) }
    else { cond = "1"; cap = args }
    cap = trim(cap); sub(/ *,$/, "", cap)
    if (capbit(cap) < 0 || cap == "ALL") { problem(h, "SM_REQUIRE_CAP names no capability: " s); return }
    nn[h]++; needcap[h, nn[h]] = cap; needwhen[h, nn[h]] = (cond == "1") ? "" : trim(cond); needwhy[h, nn[h]] = why
}
# A line of code (outside the opening comment) of header h's own file, a part or a helper.
function code(h, line,   m, v, fam, msg) {
    if (stmt != "") { stmt = stmt " " line; if (line ~ /;/) { need(h, stmt); stmt = "" }; return }
    if (line ~ /^[ \t]*SM_REQUIRE_CAP(_WHEN)?\(/) { stmt = line; if (line ~ /;/) { need(h, stmt); stmt = "" }; return }
    if (pend_ifdef != "") {   # the line after #ifdef SM_<FAMILY>
        fam = tolower(pend_ifdef)
        if (line ~ /^[ \t]*#[ \t]*error/) forbidden[h, fam] = 1; else tested[h, fam] = 1
        pend_ifdef = ""
    }
    if (line ~ /^[ \t]*#[ \t]*error/ && match(line, /policy slot '[a-z_]+' is empty/)) {
        msg = substr(line, RSTART + 13, RLENGTH - 13); sub(/'.*/, "", msg)
        if (!((h, msg) in reqslot)) { reqslot[h, msg] = 1; nrs[h]++; rsorder[h, nrs[h]] = msg }
        return
    }
    if (line ~ /^[ \t]*#[ \t]*ifndef[ \t]+SM_[A-Z_]+[ \t]*$/) { m = line; sub(/^[ \t]*#[ \t]*ifndef[ \t]+/, "", m); ifndef_mac = trim(m); return }
    if (line ~ /^[ \t]*#[ \t]*ifdef[ \t]+SM_[A-Z]+[ \t]*$/) {
        m = line; sub(/^[ \t]*#[ \t]*ifdef[ \t]+SM_/, "", m); m = trim(m)
        if (tolower(m) in isfam) pend_ifdef = m
        return
    }
    if (line ~ /^[ \t]*#[ \t]*(el)?if[ \t].*defined[ \t]*\(?[ \t]*SM_[A-Z]+/) {
        m = line
        while (match(m, /defined[ \t]*\(?[ \t]*SM_[A-Z]+/)) {
            v = substr(m, RSTART, RLENGTH); sub(/^.*SM_/, "", v); m = substr(m, RSTART + RLENGTH)
            if (tolower(v) in isfam) tested[h, tolower(v)] = 1
        }
        return
    }
    if (line ~ /^[ \t]*#[ \t]*if[ \t]+\(?SM_OPT_[A-Z0-9_]+\)?[ \t]*$/) {
        ifopt = line; sub(/^[ \t]*#[ \t]*if[ \t]+\(?/, "", ifopt); sub(/\)?[ \t]*$/, "", ifopt)
        return
    }
    if (line ~ /^[ \t]*#[ \t]*endif/) { ifndef_mac = ""; ifopt = ""; return }
    if (line ~ /^[ \t]*#[ \t]*else/ && ifopt != "") { ifopt = ""; return }
    if (line ~ /^[ \t]*#[ \t]*include[ \t]*".*policies\/size_handle\.h"/) { rangecode[h] = 1; return }
    if (line ~ /^[ \t]*#[ \t]*define[ \t]+SM_[A-Z_]+[ \t]/) {
        m = line; sub(/^[ \t]*#[ \t]*define[ \t]+/, "", m); v = m
        sub(/[ \t].*$/, "", m); sub(/^[A-Z_]+[ \t]+/, "", v); sub(/\/\*.*$/, "", v); sub(/\/\/.*$/, "", v); v = trim(v)
        if (m == ifndef_mac) {
            fam = m; sub(/^SM_/, "", fam); fam = tolower(fam)
            if (fam in isfam) optslot[h, fam] = v
            else if (m == "SM_SIZE_MIN" || m == "SM_SIZE_MAX") szdef[h, m] = v
        }
        if (m == "SM_LAYER_OFFERS") {
            noff[h]++; offdefs[h] = offdefs[h] (noff[h] > 1 ? "; " : "") v
            if (ifopt != "") offwhen[h] = ifopt
            while (match(v, /SM_CAP_[A-Z]+/)) {
                fam = substr(v, RSTART + 7, RLENGTH - 7); v = substr(v, RSTART + RLENGTH)
                if (capbit(fam) < 0) problem(h, "SM_LAYER_OFFERS names no capability SM_CAP_" fam)
                else {
                    offers[h] = orbits(offers[h] + 0, capbit(fam)); if (fam == "ALL") fwd[h] = 1
                    if (ifopt == "") offplain[h] = orbits(offplain[h] + 0, capbit(fam))
                }
            }
        }
        if (m == "SM_LAYER_CAPS" && v ~ /SM_CAPS\(SM_NEXT\)/) {
            fwd[h] = 1 # the capabilities named before SM_CAPS(SM_NEXT) it offers whatever is below
            v = substr(v, 1, index(v, "SM_CAPS(SM_NEXT)") - 1)
            while (match(v, /SM_CAP_[A-Z]+/)) {
                fam = substr(v, RSTART + 7, RLENGTH - 7); v = substr(v, RSTART + RLENGTH)
                if (capbit(fam) >= 0) always[h] = orbits(always[h] + 0, capbit(fam))
            }
        }
        return
    }
    if (match(line, /sm_sizeclass_[a-z0-9_]+_max_size *= *[^,}]+/)) {
        v = substr(line, RSTART, RLENGTH); m = v
        sub(/ *=.*/, "", m); sub(/^sm_sizeclass_/, "", m); sub(/_max_size$/, "", m)
        sub(/^[^=]*= */, "", v); codemax[h, m] = evalsize(v)
    }
}
function read_code(h, f,   line) {
    stmt = ""; pend_ifdef = ""; ifndef_mac = ""; ifopt = ""
    while ((getline line < f) > 0) code(h, line)
    close(f)
}
# Header h's own file: the opening comment (summary, @model words), then its code.
function read_main(h,   line, n, t, end, incomment, opening, para, i, w, nw) {
    n = 0; opening = 1; incomment = 0; para = ""; inpara = 1; words[h] = ""
    stmt = ""; pend_ifdef = ""; ifndef_mac = ""; ifopt = ""
    while ((getline line < h) > 0) {
        n++
        if (opening) {
            if (!incomment && n == 1 && line ~ /^\/\*/) incomment = 1
            if (incomment) {
                t = line; end = (t ~ /\*\//); sub(/\*\/.*$/, "", t); sub(/^[ \t]*(\/\*|\*)/, "", t)
                if (index(t, "@model:")) {
                    w = t; sub(/^.*@model:/, "", w); words[h] = words[h] " " w; inpara = 0
                } else if (t ~ /@check/ || t !~ /[^ \t]/) inpara = 0
                else if (inpara) para = para " " t
                if (end) opening = 0
                continue
            }
            opening = 0
        }
        if (index(line, "@model:")) problem(h, "@model outside the opening comment (line " n ")")
        code(h, line)
    }
    close(h)
    summary[h] = first_sentence(strip_name(squeeze(para), base(h)))
}
function addlist(list, item) { return list == "" ? item : list "," item }
function isnum(s) { return s ~ /^[0-9]+$/ }
# The @model words of h: name, kind, family, aliases, alias-of, flags and the items (slots, keys,
# range, opaque options) in their order.
function parse_model(h,   w, nw, i, t, v, k, typ) {
    nw = split(words[h], w, /[ \t]+/)
    ni[h] = 0
    for (i = 1; i <= nw; i++) {
        t = w[i]
        if (t == "") continue
        if (t ~ /^name=[A-Za-z0-9_]+$/) { mname[h] = substr(t, 6); continue }
        if (t ~ /^kind=/) {
            v = substr(t, 6)
            if (v !~ /^(os|core|addon|socket|policy)$/) problem(h, "unknown kind '" v "' in @model (os|core|addon|socket|policy)")
            mkind[h] = v; continue
        }
        if (t ~ /^family=[a-z_]+$/) { mfamily[h] = substr(t, 8); continue }
        if (t ~ /^alias=[A-Za-z0-9_,]+$/) { maliases[h] = addlist(maliases[h], substr(t, 7)); continue }
        if (t ~ /^alias-of=[A-Za-z0-9_]+$/) { aliasof[h] = substr(t, 10); continue }
        if (t == "range") { ni[h]++; item[h, ni[h]] = "range"; continue }
        if (t == "flag") {
            v = w[++i]
            if (v == "secure" || v == "cache" || v == "mt" || v == "c-only") mflags[h] = mflags[h] " " v
            else if (v ~ /^sizeclass-max=[0-9]+$/) sizemax[h] = substr(v, 15)
            else if (v ~ /^serves-max=[a-z_]+(\/[a-z_]+)?$/) servesmax[h] = substr(v, 12)
            else problem(h, "unknown flag '" v "' in @model (secure|cache|mt|c-only|sizeclass-max=N|serves-max=KEY[/KEY])")
            continue
        }
        if (t == "slot") {
            v = w[++i]
            if (v !~ /^[a-z_]+(=[A-Za-z0-9_]*)?$/) { problem(h, "bad slot '" v "' in @model (slot S, slot S=P, slot S=)"); continue }
            ni[h]++; item[h, ni[h]] = "slot"; iname[h, ni[h]] = v; ipaper[h, ni[h]] = ""
            if (index(v, "=")) { iname[h, ni[h]] = substr(v, 1, index(v, "=") - 1); idef[h, ni[h]] = substr(v, index(v, "=") + 1); ireq[h, ni[h]] = 0 }
            else { idef[h, ni[h]] = ""; ireq[h, ni[h]] = 1 }
            while (w[i + 1] ~ /^paper=[A-Za-z0-9_,]+$/) ipaper[h, ni[h]] = addlist(ipaper[h, ni[h]], substr(w[++i], 7))
            continue
        }
        if (t == "key") {
            k = w[++i]; typ = w[++i]
            if (k !~ /^[a-z][a-z0-9_]*$/) { problem(h, "bad key name '" k "' in @model"); continue }
            if (typ !~ /^(int|size|bool)$/) problem(h, "key " k ": unknown type '" typ "' in @model (int|size|bool)")
            ni[h]++; item[h, ni[h]] = "key"; iname[h, ni[h]] = k; itype[h, ni[h]] = typ; ipaper[h, ni[h]] = ""
            imacro[h, ni[h]] = "SM_OPT_" toupper(k)
            while (w[i + 1] ~ /^(paper=[A-Za-z0-9_,]+|macro=SM_[A-Z0-9_]+)$/) {
                v = w[++i]
                if (v ~ /^paper=/) ipaper[h, ni[h]] = addlist(ipaper[h, ni[h]], substr(v, 7)); else imacro[h, ni[h]] = substr(v, 7)
            }
            continue
        }
        if (t == "opaque") {
            k = w[++i]
            if (k !~ /^[a-z][a-z0-9_]*$/) { problem(h, "bad opaque option name '" k "' in @model"); continue }
            ni[h]++; item[h, ni[h]] = "opaque"; iname[h, ni[h]] = k; imacro[h, ni[h]] = "SM_OPT_" toupper(k)
            if (w[i + 1] ~ /^macro=SM_[A-Z0-9_]+$/) imacro[h, ni[h]] = substr(w[++i], 7)
            continue
        }
        problem(h, "unknown word '" t "' in @model")
    }
}
function dirkind(h) {
    if (h ~ /\/layers\/core\//) return "core"
    if (h ~ /\/layers\/addon\//) return "addon"
    if (h ~ /\/os\//) return "os"
    if (h ~ /\/sockets\//) return "socket"
    return "policy"
}
function dirfamily(h,   f) { f = h; sub(/\/[^\/]*$/, "", f); sub(/^.*\//, "", f); return f }
function check(h,   i, k, s, seen, d, dd, rowkey, kd) {
    if (words[h] ~ /^[ \t]*$/) { problem(h, "no @model line in its opening comment"); return }
    if (!(h in mname)) { problem(h, "@model has no name=N"); return }
    if (mname[h] != base(h)) problem(h, "name=" mname[h] " is not the header's name (" base(h) ")")
    if (h in aliasof) {
        if (mkind[h] != "" || ni[h] > 0 || mflags[h] != "" || (h in sizemax) || maliases[h] != "")
            problem(h, "an alias header takes only name= and alias-of=")
        return
    }
    if (mkind[h] == "") { problem(h, "@model has no kind="); return }
    if (mkind[h] != dirkind(h)) problem(h, "kind=" mkind[h] " but the header is a" (dirkind(h) ~ /^[ao]/ ? "n " : " ") dirkind(h) " header")
    if (mkind[h] == "policy") {
        if (mfamily[h] != dirfamily(h)) problem(h, "family=" mfamily[h] " but the header is under policies/" dirfamily(h) "/")
        if (ni[h] > 0) problem(h, "a policy takes no slot, key or range")
        if (mflags[h] != "") problem(h, "flag" mflags[h] ": a layer's or socket's flag on a policy")
        if ((h in sizemax) && mfamily[h] != "sizeclass") problem(h, "flag sizeclass-max on a " mfamily[h] " policy")
        if (mfamily[h] == "sizeclass") {
            kd = ((h, mname[h]) in codemax) ? codemax[h, mname[h]] : ""
            if ((h in sizemax) && kd != "" && sizemax[h] + 0 != kd + 0) problem(h, "flag sizeclass-max=" sizemax[h] " but its max_size is " kd)
            if (!(h in sizemax) && kd != "") problem(h, "no flag sizeclass-max=" kd " (its max_size)")
        }
        return
    }
    if (mfamily[h] != "") problem(h, "family= on a " mkind[h])
    if (h in sizemax) problem(h, "flag sizeclass-max on a " mkind[h])
    if (mkind[h] == "socket" && mflags[h] ~ /secure|cache/) problem(h, "flag secure or cache on a socket")
    if (mkind[h] != "socket" && mflags[h] ~ /mt/) problem(h, "flag mt on a " mkind[h] " layer (sockets only)")
    split("", seen)
    for (i = 1; i <= ni[h]; i++) {
        k = item[h, i]
        if (k == "range") {
            if ("size_handle" in seen) problem(h, "range twice in @model")
            seen["size_handle"] = 1
            if (!(h in rangecode)) problem(h, "range, but the header does not include policies/size_handle.h")
            continue
        }
        s = iname[h, i]
        if (s in seen) problem(h, k " " s " twice in @model")
        seen[s] = 1
        if (k == "slot") {
            if (!(s in isfam)) { problem(h, "slot " s ": no policy family policies/" s "/"); continue }
            if (ireq[h, i]) { if (!((h, s) in reqslot)) problem(h, "slot " s " is required in @model but the header has no #error \"policy slot '" s "' is empty\"") }
            else if (idef[h, i] != "") {
                if ((h, s) in reqslot) problem(h, "slot " s "=" idef[h, i] ": the header requires it (#error), say slot " s)
                else if (!((h, s) in optslot)) problem(h, "slot " s "=" idef[h, i] ": the header has no #ifndef SM_" toupper(s) " / #define SM_" toupper(s) " default")
                else if (optslot[h, s] != idef[h, i]) problem(h, "slot " s "=" idef[h, i] ": the header's default is " optslot[h, s])
                if (!((s, idef[h, i]) in policy)) problem(h, "slot " s "=" idef[h, i] ": no " s " policy " idef[h, i])
            } else {
                if ((h, s) in reqslot) problem(h, "slot " s "=: the header requires it (#error), say slot " s)
                else if ((h, s) in optslot) problem(h, "slot " s "=: the header's default is " optslot[h, s] ", say slot " s "=" optslot[h, s])
                else if (!((h, s) in tested)) problem(h, "slot " s "=: the header never tests #ifdef SM_" toupper(s))
            }
            if ((h, s) in forbidden) problem(h, "slot " s ": the header refuses SM_" toupper(s) " (#ifdef ... #error)")
            continue
        }
        # key or opaque: an option of the header's table
        rowkey = opth(h) SUBSEP imacro[h, i]
        if (!(rowkey in rowdef)) { problem(h, k " " s ": the header reads no " imacro[h, i]); continue }
        covered[rowkey] = 1
        if (k == "key" && itype[h, i] == "bool") {
            d = rowdef[rowkey]; gsub(/`/, "", d)
            if (d !~ /^[01]$/) problem(h, "key " s " bool, but its default is " d)
        }
    }
    for (i = 1; i <= nrs[h]; i++) {
        s = rsorder[h, i]
        if (!(s in seen)) problem(h, "required slot " s " (#error \"policy slot '" s "' is empty\") is not in @model (slot " s ")")
    }
    for (k in optslot) {
        split(k, dd, SUBSEP)
        if (dd[1] == h && !(dd[2] in seen)) problem(h, "optional slot " dd[2] " (default " optslot[k] ") is not in @model (slot " dd[2] "=" optslot[k] ")")
    }
    if ((h in rangecode) && !("size_handle" in seen)) problem(h, "includes policies/size_handle.h but @model has no range")
    for (i = 1; i <= nrow[opth(h)]; i++) {
        rowkey = opth(h) SUBSEP rowopt[opth(h), i]
        if (!(rowkey in covered)) problem(h, "option " rowopt[opth(h), i] " has no key in @model (key " tolower(substr(rowopt[opth(h), i], 8)) " int|size|bool, or opaque)")
    }
}
function emit_layer_arrays(h,   i, k, s, rowkey, d, mean, fam, lo, hi) {
    nk[h] = 0
    for (i = 1; i <= ni[h]; i++) if (item[h, i] != "opaque") nk[h]++
    if (nk[h] > 0) {
        printf "static const struct smc_key keys_%s[] = {\n", mname[h] > OUT
        for (i = 1; i <= ni[h]; i++) {
            k = item[h, i]
            if (k == "opaque") continue
            if (k == "range") {
                lo = ((h, "SM_SIZE_MIN") in szdef) ? szdef[h, "SM_SIZE_MIN"] : "0"
                hi = ((h, "SM_SIZE_MAX") in szdef) ? szdef[h, "SM_SIZE_MAX"] : "SIZE_MAX"
                printf "    {\"size_handle\", \"\", \"SM_SIZE_MIN\", SMC_T_RANGE, \"\", 0, %s, %s},\n", cstr("[" lo ", " hi "]"), cstr("the sizes the layer serves; others go to the next layer") > OUT
                continue
            }
            s = iname[h, i]
            if (k == "slot") {
                printf "    {%s, %s, %s, SMC_T_POLICY, %s, %d, %s, \"\"},\n", cstr(s), cstr(ipaper[h, i]), cstr("SM_" toupper(s)), cstr(s), ireq[h, i], cstr(idef[h, i]) > OUT
                continue
            }
            rowkey = opth(h) SUBSEP imacro[h, i]
            d = rowdef[rowkey]; gsub(/`/, "", d)
            mean = first_sentence(rowmean[rowkey])
            printf "    {%s, %s, %s, SMC_T_%s, \"\", 0, %s, %s},\n", cstr(s), cstr(ipaper[h, i]), cstr(imacro[h, i]), toupper(itype[h, i]), cstr(d), cstr(mean) > OUT
        }
        printf "};\n" > OUT
    }
    if (nn[h] > 0) {
        printf "static const struct smc_need needs_%s[] = {\n", mname[h] > OUT
        for (i = 1; i <= nn[h]; i++)
            printf "    {SMC_CAP_%s, %s, %s},\n", needcap[h, i], cstr(needwhen[h, i]), cstr(needwhy[h, i]) > OUT
        printf "};\n" > OUT
    }
}
function layer_flags(h,   r) {
    r = ""
    if (mflags[h] ~ /secure/) r = r " | SMC_F_SECURE"
    if (mflags[h] ~ /cache/) r = r " | SMC_F_CACHE"
    if (mflags[h] ~ /mt/) r = r " | SMC_F_MT"
    if (mflags[h] ~ /c-only/) r = r " | SMC_F_C_ONLY"
    return r == "" ? "0" : substr(r, 4)
}
BEGIN {
    FS = "\t"
    nfam = split(FAMILIES, fl, " ")
    for (i = 1; i <= nfam; i++) if (fl[i] != "") isfam[fl[i]] = 1
    while ((getline line < ROWS) > 0) {
        split(line, f, "\t")
        if (f[1] != "opt" || f[3] !~ /^SM_OPT_/) continue
        rowdef[f[2], f[3]] = f[4]; rowmean[f[2], f[3]] = f[6]
        nrow[f[2]]++; rowopt[f[2], nrow[f[2]]] = f[3]
    }
    close(ROWS)
    nh = 0
    while ((getline line < MANIFEST) > 0) {
        split(line, f, "\t")
        if (f[1] == "main") { hdr[++nh] = f[2]; required[f[2]] = f[3]; read_main(f[2]); parse_model(f[2]) }
        else read_code(f[2], f[3])
    }
    close(MANIFEST)
    # names: layers and sockets share one space, policies one per family
    for (j = 1; j <= nh; j++) {
        h = hdr[j]
        if (!(h in mname)) continue
        if (mkind[h] == "policy") { nm = mfamily[h] SUBSEP mname[h]; if (nm in policy) problem(h, "a second " mfamily[h] " policy " mname[h]); policy[nm] = h }
        else if (!(h in aliasof)) { if (mname[h] in layer) problem(h, "a second layer " mname[h] " (" layer[mname[h]] ")"); layer[mname[h]] = h }
    }
    for (j = 1; j <= nh; j++) {
        h = hdr[j]
        if (!(h in mname)) continue
        n = split(maliases[h], al, ",")
        for (i = 1; i <= n; i++) {
            if (mkind[h] == "policy") { nm = mfamily[h] SUBSEP al[i]; if (nm in policy) problem(h, "alias " al[i] " is already a " mfamily[h] " policy"); policy[nm] = h }
            else { if (al[i] in layer) problem(h, "alias " al[i] " is already a layer's name"); layer[al[i]] = h }
        }
    }
    for (j = 1; j <= nh; j++) {
        h = hdr[j]
        if (!(h in aliasof)) continue
        t = aliasof[h]
        if (!(t in layer) || (layer[t] in aliasof)) { problem(h, "alias-of=" t " names no layer"); continue }
        if (mname[h] in layer) problem(h, "alias " mname[h] " is already a layer's name")
        layer[mname[h]] = layer[t]
        maliases[layer[t]] = addlist(maliases[layer[t]], mname[h])
        inc_ok = 0
        while ((getline line < h) > 0) if (line ~ ("^[ \t]*#[ \t]*include[ \t]*\"" t "\\.h\"")) inc_ok = 1
        close(h)
        if (!inc_ok) problem(h, "alias-of=" t ", but the header does not #include \"" t ".h\"")
    }
    for (j = 1; j <= nh; j++) check(hdr[j])

    if (MODE == "check") {
        for (j = 1; j <= nh; j++) {
            h = hdr[j]
            if (!np[h]) { print "ok smc-catalogue: " h; continue }
            why = prob[h, 1]
            for (i = 2; i <= np[h]; i++) why = why "; " prob[h, i]
            print "not ok smc-catalogue: " h ": " why
        }
        exit nprob ? 1 : 0
    }
    if (nprob) {
        for (j = 1; j <= nh; j++) for (i = 1; i <= np[hdr[j]]; i++) print "catalogue.sh: " hdr[j] ": " prob[hdr[j], i] > "/dev/stderr"
        exit 1
    }

    print "/* smc's catalogue (tools/smc/catalogue.h), generated by tools/smc/catalogue.sh from the @model" > OUT
    print " * lines of the headers under include/sunmao, their code and tools/options-table.sh --rows;" > OUT
    print " * do not edit. forwards: a layer's capabilities are its next layer's, masked by offers. */" > OUT
    print "#include \"catalogue.h\"" > OUT
    nl = 0; npol = 0
    for (j = 1; j <= nh; j++) {
        h = hdr[j]
        if (h in aliasof) continue
        if (mkind[h] == "policy") { pol[++npol] = h; continue }
        lay[++nl] = h
        print "" > OUT
        print "/* " rel(h) " */" > OUT
        emit_layer_arrays(h)
    }
    print "" > OUT
    print "const struct smc_layer smc_layers[] = {" > OUT
    for (j = 1; j <= nl; j++) {
        h = lay[j]
        if (noff[h] > 1) print "    /* " mname[h] ": " noff[h] " definitions of SM_LAYER_OFFERS under #if (" offdefs[h] "): their union */" > OUT
        printf "    {%s, %s, %s, SMC_%s, %s, %s, %s, %s, %s, %s,\n", cstr(mname[h]), cstr(maliases[h]), cstr(rel(h)), toupper(mkind[h]), layer_flags(h), capnames(offers[h] + 0), capnames(fwd[h] ? andnot(offers[h] + 0, always[h] + 0) : 0), cstr(offwhen[h]), capnames(offwhen[h] == "" ? 0 : andnot(offers[h] + 0, offplain[h] + 0)), cstr(servesmax[h]) > OUT
        printf "     %s, %d, %s, %d,\n", nk[h] ? "keys_" mname[h] : "NULL", nk[h], nn[h] ? "needs_" mname[h] : "NULL", nn[h] + 0 > OUT
        printf "     %s},\n", cstr(summary[h]) > OUT
    }
    print "};" > OUT
    print "const unsigned smc_nlayers = " nl ";" > OUT
    print "" > OUT
    print "const struct smc_policy smc_policies[] = {" > OUT
    for (j = 1; j <= npol; j++) {
        h = pol[j]
        printf "    {%s, %s, %s, %s, %sull,\n     %s},\n", cstr(mname[h]), cstr(maliases[h]), cstr(mfamily[h]), cstr(rel(h)), (h in sizemax) ? sizemax[h] : "0", cstr(summary[h]) > OUT
    }
    print "};" > OUT
    print "const unsigned smc_npolicies = " npol ";" > OUT
    close(OUT)
    exit 0
}
AWK

if [ "$mode" = check ]; then
    awk -v MODE=check -v ROWS="$tmp/rows" -v MANIFEST="$tmp/manifest" -v FAMILIES="$families" -v OUT=/dev/null "$CATALOGUE_AWK"
    exit $?
fi
awk -v MODE=write -v ROWS="$tmp/rows" -v MANIFEST="$tmp/manifest" -v FAMILIES="$families" -v OUT="$tmp/out.c" "$CATALOGUE_AWK" || exit 1
mkdir -p "$(dirname "$out")" && cp "$tmp/out.c" "$out" || { echo "catalogue.sh: cannot write $out" >&2; exit 2; }
