#!/usr/bin/env bash
# Every script and tool of the repository answers --help and -h with a usage text on stdout and
# exit status 0, without doing its work, and refuses an unknown option with exit status 2 and a
# line on stderr naming it. The scripts: the executable files with a #! line that git tracks, plus
# the untracked ones under tests/ bench/ tools/ .ci/ (debian/rules is Debian's interface, not ours).
# Also `make help` lists the targets. One line per script:
#   ok help: <script> | not ok help: <script>: <why>
set -u
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/build/help.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Runs every script of the repository (executable files with a #! line: those git tracks and the
untracked ones under tests/ bench/ tools/ .ci/) with --help, with -h and with an unknown option,
each under a 10 s limit: --help and -h must exit 0 and print a usage text on stdout, the unknown
option must exit 2 naming it on stderr. Then `make help` must exit 0 and list test and bench.
Prints `ok help: <script>` or `not ok help: <script>: <why>` per script.

Environment: SM_ROOT (repository root; default: this script's ../..).
USAGE
            exit 0 ;;
        -*) echo "tests/build/help.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok help: setup: cannot cd to the repository root"; exit 1; }
# A make started by `make test` must not inherit the parent's jobserver.
unset MAKEFLAGS MFLAGS MAKELEVEL
tmp=$(mktemp -d /tmp/sm-help.XXXXXX) || { echo "not ok help: setup: mktemp"; exit 1; }
trap 'rm -rf "$tmp"' EXIT

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    list=$({ git ls-files; git ls-files --others --exclude-standard -- tests bench tools .ci; } 2>/dev/null)
else  # an unpacked release: no git
    list=$(find tests bench tools .ci -type f 2>/dev/null)
fi
scripts=()
while IFS= read -r f; do
    case "$f" in debian/* | */.*) continue ;; esac
    [ -f "$f" ] && [ -x "$f" ] && [ "$(head -c 2 "$f")" = "#!" ] && scripts+=("$f")
done < <(printf '%s\n' "$list" | LC_ALL=C sort -u)
[ ${#scripts[@]} -gt 0 ] || { echo "not ok help: setup: no script found"; exit 1; }

bad=0
bogus=--definitely-not-an-option
for s in "${scripts[@]}"; do
    why=()
    for opt in --help -h; do
        timeout -k 2 10 "./$s" "$opt" >"$tmp/out" 2>"$tmp/err" </dev/null
        rc=$?
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            why+=("$opt did not finish in 10 s")
        elif [ "$rc" -ne 0 ]; then
            err=$(head -1 "$tmp/err")
            why+=("$opt exited with status $rc${err:+: $err}")
        elif ! grep -qi usage "$tmp/out"; then
            why+=("$opt printed no usage text on stdout")
        fi
    done
    timeout -k 2 10 "./$s" "$bogus" >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
    if [ "$rc" -ne 2 ]; then
        why+=("$bogus exited with status $rc, not 2")
    elif ! grep -q -- "$bogus" "$tmp/err"; then
        why+=("$bogus: no line on stderr naming it")
    fi
    if [ ${#why[@]} -eq 0 ]; then
        echo "ok help: $s"
    else
        bad=1
        msg=$(printf '%s; ' "${why[@]}")
        echo "not ok help: $s: ${msg%; }"
    fi
done

if make --no-print-directory help >"$tmp/out" 2>"$tmp/err"; then
    missing=""
    for t in test bench; do grep -qw "$t" "$tmp/out" || missing="$missing $t"; done
    if [ -z "$missing" ]; then
        echo "ok help: make help"
    else
        echo "not ok help: make help: does not mention$missing"; bad=1
    fi
else
    echo "not ok help: make help: failed: $(head -1 "$tmp/err")"; bad=1
fi
exit "$bad"
