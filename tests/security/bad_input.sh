#!/usr/bin/env bash
# Bad input to the malloc API (tests/security/bad_input.c) against every instance in $INSTANCES,
# preloaded: each probe must give its defined answer (NULL and the right errno, 0 from
# malloc_usable_size, live blocks untouched) with exactly the number of reports the table below
# gives, and no crash but the abort of a fatal err policy. The peers (glibc, and jemalloc, tcmalloc,
# mimalloc where installed) run too, as `#` lines for docs/reliability.md's table, unchecked.
# Case names: bad_input/<inst>/<probe>.
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/security/bad_input.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Hands every instance bad input (invalid and double frees, realloc of a freed block,
malloc_usable_size of a bad pointer, absurd sizes, bad alignments; tests/security/bad_input.c)
and checks each answer and the exact number of reports. Prints `ok bad_input: <inst>/<probe>`
or `not ok ...: <why>`; the peers' answers as `#` lines.

Environment: BUILD (default build), INSTANCES (empty: one skip line), SM_ROOT.
USAGE
            exit 0 ;;
        -*) echo "tests/security/bad_input.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
SM_NS=bad_input
. "$(dirname "$0")/../api/driver_lib.bash"
sm_require_instances
P="$SM_BUILD/tests/security/bad_input"
sm_need_bin "$P" || exit 1

pointer_probes="free_stack free_interior free_libc free_mmap double_free_now double_free_later realloc_freed usable_bad"
# Expected "reports crashed" where it is not the rule (1 0 for a bad pointer, 0 0 for absurd sizes
# and bad alignments): a fatal err policy aborts after its one report (signal 6);
# sunmao (and sunmao-hugepage, its slabs on another page heap), hslab and sunmao-percpu report realloc of a freed block twice: the double free when
# realloc frees it after the copy, and the free of the copy, which carries the freed block's cache
# mark (docs/reliability.md).
declare -A expect=()
for p in $pointer_probes; do expect[hslabd:$p]="1 6"; done
for p in free_stack free_interior free_libc free_mmap double_free_now double_free_later; do expect[tlsfccsd:$p]="1 6"; done
expect[sunmao:realloc_freed]="2 0"
expect[hslab:realloc_freed]="2 0"
expect[sunmao-percpu:realloc_freed]="2 0"
expect[sunmao-hugepage:realloc_freed]="2 0"

for inst in $INSTANCES; do
    sm_lib "$inst" || continue
    out="$(timeout -k 5 120 env LD_PRELOAD="$SM_LIB" "$P" 2>&1)"
    for p in $pointer_probes absurd_sizes bad_alignment; do
        line="$(grep "^probe $p: " <<<"$out")"
        name="$inst/$p"
        if [ -z "$line" ]; then
            sm_fail "$name" "no result (the program: $(tail -c 200 <<<"$out" | tr '\n' ' '))"
            continue
        fi
        case " $pointer_probes " in *" $p "*) want="1 0" ;; *) want="0 0" ;; esac
        want="${expect[$inst:$p]:-$want}"
        reports="$(sed -n 's/.* reports=\([0-9]*\) .*/\1/p' <<<"$line")"
        crashed="$(sed -n 's/.* crashed=\(-\{0,1\}[0-9]*\) .*/\1/p' <<<"$line")"
        answer="$(sed -n 's/.* answer=//p' <<<"$line")"
        if [ "$reports $crashed" != "$want" ]; then
            sm_fail "$name" "reports=$reports crashed=$crashed, expected reports=${want% *} crashed=${want#* } ($line)"
        elif [ "$crashed" = 0 ] && [ "$answer" != ok ]; then
            sm_fail "$name" "wrong answer: $answer"
        else
            sm_ok "$name"
        fi
    done
done

# The peers, for the record.
peers=("glibc:")
for peer in jemalloc:libjemalloc.so.2 tcmalloc:libtcmalloc_minimal.so.4 mimalloc:libmimalloc.so.2; do
    lib=$(ldconfig -p 2>/dev/null | awk -v s="${peer#*:}" '$1 == s { print $NF; exit }')
    [ -n "$lib" ] && peers+=("${peer%%:*}:$lib")
done
for peer in "${peers[@]}"; do
    pname="${peer%%:*}" plib="${peer#*:}"
    if [ -n "$plib" ]; then
        timeout -k 5 120 env LD_PRELOAD="$plib" "$P" 2>&1
    else
        timeout -k 5 120 "$P" 2>&1
    fi | sed "s/^/# $pname: /"
done
exit "$SM_FAILED"
