#!/usr/bin/env bash
# One case per class of error smc reports (docs/model-language.md, "Errors"): each line below must
# fail `smc check` with exactly the message given, at the position given, with the source line
# quoted under it and a caret at that column; warnings leave the status 0. Also the command-line
# errors (unknown command, option, missing line).
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/smc/errors.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Runs `smc check` on one bad model line per error class and compares its first diagnostic with
the exact expected message, position and caret. Prints `ok smc-errors: <case>` or
`not ok smc-errors: <case>: <why>`.

Environment: BUILD (default build: $BUILD/smc), SM_ROOT.
USAGE
            exit 0 ;;
        -*) echo "tests/smc/errors.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
set -u
cd "${SM_ROOT:-$(dirname "$0")/../..}" || { echo "not ok smc-errors: setup: cannot cd to the repository root"; exit 1; }
smc="${BUILD:-build}/smc"
[ -x "$smc" ] || { echo "not ok smc-errors: setup: $smc missing (not built)"; exit 1; }

# case | flags | line | status | the first diagnostic, exactly (LINE:COL: kind: text)
cases=$(cat <<'LIST'
unknown_layer||mmap_heap::slab_lkk(sync=spinlock)::malloc_socket|1|1:12: error: unknown layer 'slab_lkk' (did you mean 'slab_lk'?)
unknown_policy||mmap_heap::slab_lk(sync=spinlok, sizeclass=tc)::malloc_socket|1|1:25: error: unknown sync policy 'spinlok' (did you mean 'spinlock'?)
unknown_key||mmap_heap::slab_lk(sync=spinlock, sizeclass=tc, slab_sise=64KB)::malloc_socket|1|1:49: error: unknown key 'slab_sise' for slab_lk (did you mean 'slab_size'?)
policy_as_layer||mmap_heap::spinlock::malloc_socket|1|1:12: error: 'spinlock' is a sync policy, not a layer: give it as a layer's sync=spinlock
wrong_type||mmap_heap::slab_lk(sync=spinlock, sizeclass=tc, slab_size=big)::malloc_socket|1|1:59: error: slab_lk's key 'slab_size' takes a size, not a name 'big'
policy_given_number||mmap_heap::slab_lk(sync=2, sizeclass=tc)::malloc_socket|1|1:25: error: slab_lk's key 'sync' takes a sync policy (ccsynch, flatcombine, mcslock, mutex, none, posix_spin, rcl, spinlock, ticket), not a number
wrong_unit||mmap_heap::buddy_glk(sync=spinlock, stable=1)::slab_wf(sizeclass=prime, tllabs=40KB)::malloc_socket|1|1:80: error: slab_wf's key 'tllabs' is a count, not a size: write it without a unit
unknown_unit||mmap_heap(threadlocal_heap_size=2XB)::malloc_socket|1|1:34: error: unknown unit 'XB' (units: B, KB, MB, GB, TB, binary: 64KB = 65536)
unit_case||mmap_heap(threadlocal_heap_size=2mb)::malloc_socket|1|1:34: error: unknown unit 'mb' (did you mean 'MB'? units: B, KB, MB, GB, TB, binary)
bool_range||mmap_heap(huge_page=2)::malloc_socket|1|1:21: error: mmap_heap's key 'huge_page' is 1 or 0, not 2
number_too_large||mmap_heap(threadlocal_heap_size=99999999999GB)::malloc_socket|1|1:33: error: size too large (at most SIZE_MAX bytes)
empty_range||mmap_heap::tlsf_glk(sync=mutex, size_handle=[64KB, 0])::malloc_socket|1|1:45: error: empty range [65536, 0]: its low bound is above its high bound
no_os_first||slab_lk(sync=spinlock, sizeclass=tc)::malloc_socket|1|1:1: error: no OS layer first: the line starts with the core layer slab_lk; start it with an OS layer (brk_heap, mmap_heap, sheap, malloc_heap)
no_socket_last||mmap_heap::slab_lk(sync=spinlock, sizeclass=tc)|1|1:12: error: no socket last: the line ends with the core layer slab_lk; end it with a socket (malloc_socket, custom_socket, cmalloc_socket, ...), or check it with --fragment
socket_not_last||mmap_heap::malloc_socket::tlsf_glk(sync=mutex)|1|1:12: error: the socket malloc_socket must come last: the layers are written from the OS layer up to the socket
two_os_layers||mmap_heap::brk_heap::malloc_socket|1|1:12: error: two OS layers: mmap_heap and brk_heap (column 1); only the first layer of a composition is an OS layer
os_not_first_fragment|--fragment|tail_chksum::mmap_heap|1|1:14: error: the OS layer mmap_heap must come first: the layers are written from the OS layer up to the socket
unsafe_without_sync||mmap_heap::slab_lk(sizeclass=tc)::malloc_socket|1|1:12: error: slab_lk is not thread-safe without a sync policy, and malloc_socket is called by many threads at once: give it sync=<ccsynch, flatcombine, mcslock, mutex, none, posix_spin, rcl, spinlock, ticket>
sync_none_mt||mmap_heap::slab_lk(sync=none, sizeclass=tc)::malloc_socket|1|1:25: error: sync=none leaves slab_lk thread-unsafe, and malloc_socket is called by many threads at once
no_sizeclass||mmap_heap::slab_lk(sync=spinlock)::malloc_socket|1|1:12: error: slab_lk's size classes have no default: give it sizeclass=<interval, log2b, prime, tc, tc5, tc8>
missing_capability||mmap_heap::tlsf_glk(sync=mutex)::thread_cache(sizeclass=tc)::malloc_socket|1|1:34: error: thread_cache needs capability BATCH of the layer below it, and tlsf_glk lacks it (refills and releases move objects of one class in batches)
capability_through_passthrough||mmap_heap::tlsf_glk(sync=mutex)::fake::thread_cache(sizeclass=tc)::malloc_socket|1|1:40: error: thread_cache needs capability BATCH of the layer below it, and passthrough lacks it (refills and releases move objects of one class in batches)
capability_needed_by_option||brk_heap::decay_cache(sync=mutex, grow=1)::tlsf_glk(sync=mutex)::malloc_socket|1|1:11: error: decay_cache needs capability MAPPING of the layer below it, and brk_heap lacks it (remap, split and join, for SM_OPT_GROW 1)
stable_turned_off||mmap_heap::buddy_glk(sync=spinlock, stable=0)::slab_wf(sizeclass=prime)::malloc_socket|1|1:48: error: slab_wf needs capability STABLE of the layer below it, and buddy_glk lacks it (a pop reads the link of a slab another thread may have taken)
secure_below_cache||mmap_heap::slab_lk(sync=spinlock, sizeclass=tc)::tail_chksum::thread_cache(sizeclass=tc)::malloc_socket|1|1:50: error: tail_chksum is below the cache thread_cache (column 63), which serves requests it would never see: put tail_chksum above every cache, directly under the socket
cache_sizeclass_mismatch||mmap_heap::slab_lk(sync=spinlock, sizeclass=tc)::thread_cache(sizeclass=log2b)::malloc_socket|1|1:73: error: thread_cache's sizeclass log2b differs from that of the layer below it, slab_lk (tc): a cache keeps the classes of the layer it caches
duplicate_key||mmap_heap::tlsf_glk(sync=mutex, sync=spinlock)::malloc_socket|1|1:33: error: tlsf_glk's key 'sync' is given twice (first at column 21)
range_above_classes||mmap_heap::slab_lk(sync=spinlock, sizeclass=tc, size_handle=[0, 1MB])::malloc_socket|1|1:61: error: slab_lk's size_handle reaches 1048576, above the largest class of its sizeclass tc (262144)
needs_c_code||mmap_heap::tlsf_glk(sync=mutex)::cond_bypass::malloc_socket|1|1:34: error: cond_bypass needs C code a line cannot give (see <sunmao/layers/addon/cond_bypass.h>): write it into the C file that smc emit makes of the rest
no_range_here||mmap_heap(size_handle=[0, 64KB])::malloc_socket|1|1:11: error: mmap_heap takes no size_handle: it serves every size it is asked for
unterminated_range||mmap_heap::tlsf_glk(sync=mutex, size_handle=[0, 64KB)::malloc_socket|1|1:45: error: unterminated range: '[' has no ']'
unterminated_args||mmap_heap::tlsf_glk(sync=mutex, size_handle=[0, 64KB]::malloc_socket|1|1:20: error: unterminated argument list: '(' has no ')'
unterminated_args_eof||mmap_heap::tlsf_glk(sync=mutex|1|1:20: error: unterminated argument list: '(' has no ')'
empty_argument||mmap_heap::tlsf_glk(sync=mutex,)::malloc_socket|1|1:32: error: expected a key (such as sync or size_handle) or ')', found ')'
four_colons||mmap_heap::::malloc_socket|1|1:13: error: expected a layer name (joins are '::', ':::' or ':'), found ':'
trailing_join||mmap_heap::|1|1:12: error: expected a layer name after '::', found the end of the line
garbage_after||mmap_heap::malloc_socket. x|1|1:27: error: expected '::' between layers, or the end of the line, found 'x'
empty_line||   |1|1:4: error: empty model line: expected a layer name
elided_arguments||mmap_heap::tlsf_glk(…)::malloc_socket|1|1:21: error: '…' stands for arguments left out (the paper's Figure 1); write them, or check the line with --syntax
unreachable_range||mmap_heap::segfit_lk(sync=mutex, sizeclass=log2b, size_handle=[0, 64KB])::tlsf_glk(sync=mutex, size_handle=[0, 1MB])::malloc_socket|0|1:63: warning: segfit_lk can never be reached in [0, 65536]: tlsf_glk above it serves all of [0, 1048576]
LIST
)
while IFS='|' read -r name flags line want_rc want; do
    [ -n "$name" ] || continue
    out=$("$smc" check $flags "$line" 2>&1 >/dev/null)
    rc=$?
    first=$(printf '%s\n' "$out" | head -1)
    src=$(printf '%s\n' "$out" | sed -n 2p)
    caret=$(printf '%s\n' "$out" | sed -n 3p)
    col=$(echo "$want" | cut -d: -f2)
    if [ "$rc" != "$want_rc" ]; then
        echo "not ok smc-errors: $name: status $rc, want $want_rc ($first)"
    elif [ "$first" != "line:$want" ]; then
        echo "not ok smc-errors: $name: got '$first', want 'line:$want'"
    elif [ "$src" != "  $line" ] && [ -n "${line// /}" ]; then
        echo "not ok smc-errors: $name: the source line is not quoted under the message: '$src'"
    elif [ "${#caret}" != "$((col + 2))" ] || [ "${caret: -1}" != "^" ]; then
        echo "not ok smc-errors: $name: the caret is not under column $col: '$caret'"
    else
        echo "ok smc-errors: $name"
    fi
done <<<"$cases"

# A line on several lines: the position names the line and the caret its column.
out=$("$smc" check "$(printf 'mmap_heap::tlsf_glk(sync=mutex,\n  size_handle=[0, 1MB], regoin_size=4MB)::malloc_socket')" 2>&1)
if [ "$(echo "$out" | head -1)" = "line:2:25: error: unknown key 'regoin_size' for tlsf_glk (did you mean 'region_size'?)" ] &&
    [ "$(echo "$out" | sed -n 2p)" = "    size_handle=[0, 1MB], regoin_size=4MB)::malloc_socket" ]; then
    echo "ok smc-errors: second_line_position"
else
    echo "not ok smc-errors: second_line_position: $(echo "$out" | head -2 | tr '\n' '|')"
fi
# Every problem of a line is reported, not only the first.
n=$("$smc" check 'mmap_heap::slab_lk(sync=spinlok, sizeclass=tc, slab_sise=1)::thread_cache(sizeclass=log2b)::malloc_socket' 2>&1 | grep -c ': error: ')
[ "$n" = 3 ] && echo "ok smc-errors: all_problems_reported" || echo "not ok smc-errors: all_problems_reported: $n errors, want 3"

# The command line.
cli() { # name, want status, want text (grep -F), command...
    local name="$1" want_rc="$2" want="$3"
    shift 3
    local out rc
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" = "$want_rc" ] && printf '%s\n' "$out" | grep -qF -- "$want"; then
        echo "ok smc-errors: cli/$name"
    else
        echo "not ok smc-errors: cli/$name: status $rc, output '$(printf '%s' "$out" | head -2 | tr '\n' ' ')'"
    fi
}
cli unknown_command 2 "smc: unknown command 'chek'" "$smc" chek x
cli unknown_option 2 "smc check: unknown option '--frag' (see smc check --help)" "$smc" check --frag x
cli no_line 2 "smc emit: no model line given (see smc emit --help)" "$smc" emit
cli two_lines 2 "one line or file only" "$smc" check a b
cli build_no_output 2 "smc build: give the output with -o libX.so or -o libX.a" "$smc" build 'brk_heap::tlsf_glk(sync=mutex)::malloc_socket'
cli build_bad_output 2 "the output must end in .so (shared) or .a (static)" "$smc" build -o x.dylib 'brk_heap::tlsf_glk(sync=mutex)::malloc_socket'
cli bad_sizes 2 "smc: --sizes: '12QB' is not a size" "$smc" explain --sizes 12QB 'brk_heap::tlsf_glk(sync=mutex)::malloc_socket'
cli unknown_layer_explain 1 "smc: unknown layer 'slab_lkk' (did you mean 'slab_lk'?)" "$smc" explain --layer slab_lkk
cli bad_name 2 "--name '9x' is not a C identifier" "$smc" emit --name 9x 'brk_heap::tlsf_glk(sync=mutex)::malloc_socket'
cli missing_file_is_a_line 1 "unknown layer 'no_such_file'" "$smc" check no_such_file
exit 0
