#!/usr/bin/env bash
# SUNMAO_CONF in a real process (core/conf.h, docs/operations.md), for every instance in $INSTANCES,
# each case tests/api/conf_env.c under LD_PRELOAD=lib<inst>.so with one setting. Case names:
# <inst>/<setting>/<case>. The messages are compared exactly on stderr; abort_conf:true with a bad
# pair must end the program with SIGABRT (status 134) after them. background_thread and
# dirty_decay_ms are each run with a control that must show the opposite. A build of conf_env
# that defines `const char *sunmao_conf` (-rdynamic, so the preloaded library sees it) gets junk.
for arg in "$@"; do
    case "$arg" in
        -h | --help)
            cat <<'USAGE'
usage: tests/api/conf.sh [-h|--help]        (one of the tests that tests/run.sh and make test run)

Checks SUNMAO_CONF under LD_PRELOAD=lib<inst>.so for every instance: the warning and abort
messages, junk, zero, tcache:false, background_thread:false, thp, the sunmao_conf symbol,
(where the instance has a decay_cache) dirty_decay_ms:0 against dirty_decay_ms:-1, and (where
it has a guard layer) guard_sample:1 against guard_sample:0.
Prints `ok conf: <inst>/<setting>/<case>` or `not ok conf: ...: <why>` per case.

Environment: BUILD, INSTANCES (empty: one skip line), SM_ROOT, CC (the sunmao_conf build).
USAGE
            exit 0 ;;
        -*) echo "tests/api/conf.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    esac
done
SM_NS=conf
. "$(dirname "$0")/driver_lib.bash"
sm_require_instances

bin="$SM_BUILD/tests/api/conf_env"
sm_need_bin "$bin" || exit 1
sym="$SM_BUILD/tests/conf/conf_env_symbol"
mkdir -p "$(dirname "$sym")"
sym_ok=1
${CC:-cc} -std=c11 -O2 -Wall -Wextra -I. -D_GNU_SOURCE -rdynamic -DCONF_SYMBOL='"junk:true"' \
    tests/api/conf_env.c -o "$sym" -lpthread || sym_ok=0
err="$(mktemp)"
trap 'rm -f "$err" "${SM_OUT:-}"' EXIT

# conf_case INST SETTING CASE ARGS...: conf_env CASE under SUNMAO_CONF=SETTING.
conf_case() {
    local inst="$1" setting="$2"
    shift 2
    SUNMAO_CONF="$setting" sm_run "$inst/$setting" 60 "$SM_LIB" "$bin" "$@"
}

# stderr_case INST NAME SETTING STATUS LINES: conf_env pattern's status and exact stderr.
stderr_case() {
    local inst="$1" name="$2" setting="$3" want_rc="$4" want="$5"
    # (in a subshell whose own stderr is dropped: bash reports the expected abort there)
    (timeout -k 5 60 env SUNMAO_CONF="$setting" LD_PRELOAD="$SM_LIB" "$bin" pattern >/dev/null 2>"$err") 2>/dev/null
    local rc=$?
    if [ "$rc" -ne "$want_rc" ]; then
        sm_fail "$inst/$setting/$name" "status $rc, expected $want_rc; stderr: $(head -c 300 "$err" | tr '\n' '|')"
    elif [ "$(cat "$err")" != "$want" ]; then
        sm_fail "$inst/$setting/$name" "stderr was '$(tr '\n' '|' <"$err")', expected '$(printf '%s' "$want" | tr '\n' '|')'"
    else
        sm_ok "$inst/$setting/$name"
    fi
}

for inst in $INSTANCES; do
    sm_lib "$inst" || continue
    # The composition's text, with the instance it builds on (wfslabs includes wfslab.c).
    src="$(mktemp)"
    cat "$SM_ROOT/instances/$inst.c" $(sed -n 's#^\#include "\(.*\.c\)"#'"$SM_ROOT"'/instances/\1#p' "$SM_ROOT/instances/$inst.c") >"$src"
    if ! grep -q '^#include <sunmao/sockets/' "$src"; then
        sm_skip "$inst/all" "written without the framework's socket: it reads no SUNMAO_CONF"
        rm -f "$src"
        continue
    fi
    stderr_case "$inst" warning 'nope:1,junk:maybe,narenas:0' 0 \
        "$(printf '%s\n' '<sunmao>: Invalid conf pair: nope:1' '<sunmao>: Invalid conf value: junk:maybe' \
            '<sunmao>: Out-of-range conf value: narenas:0')"
    stderr_case "$inst" abort 'abort_conf:true,nope:1' 134 \
        "$(printf '%s\n' '<sunmao>: Invalid conf pair: nope:1' \
            '<sunmao>: Abort (abort_conf:true) on invalid conf value (see above).')"
    stderr_case "$inst" confirm 'confirm_conf:true,zero:true' 0 \
        "$(printf '%s\n' '<sunmao>: conf #3 (environment variable SUNMAO_CONF): "confirm_conf:true,zero:true"' \
            '<sunmao>: -- Set conf value: confirm_conf:true' '<sunmao>: -- Set conf value: zero:true')"
    conf_case "$inst" junk:true junk_alloc
    conf_case "$inst" junk:alloc junk_alloc
    # A slab keeps only its link (and a mark) in the first 16 bytes of a free object. A freed TLSF
    # block is merged with free neighbours, whose headers and links may then lie anywhere in it.
    if grep -q 'layers/core/slab' "$src"; then
        conf_case "$inst" junk:true junk_free 16 64
        conf_case "$inst" junk:free junk_free 16 64
    else
        sm_skip "$inst/junk:free/junk_free" "no slab layer: a freed block's bytes are not defined (merged)"
    fi
    conf_case "$inst" zero:true zero
    conf_case "$inst" tcache:false pattern
    conf_case "$inst" tcache_max:1024 pattern
    conf_case "$inst" junk:true,zero:true pattern
    if grep -qE 'SM_SOCKET_BACKGROUND +0' "$src"; then
        sm_skip "$inst/background_thread" "the instance runs no release thread (SM_SOCKET_BACKGROUND 0)"
    else
        conf_case "$inst" background_thread:true release_thread 1
        conf_case "$inst" background_thread:false release_thread 0
    fi
    if grep -q 'os/mmap_heap.h' "$src" && [ -d /sys/kernel/mm/transparent_hugepage ]; then
        conf_case "$inst" thp:always thp hg
        conf_case "$inst" thp:never thp nh
    else
        sm_skip "$inst/thp" "no mmap_heap in the instance, or no transparent huge pages in the kernel"
    fi
    if grep -q 'layers/addon/decay_cache.h' "$src"; then
        conf_case "$inst" dirty_decay_ms:0 rss_drop 1000 1
        conf_case "$inst" dirty_decay_ms:-1 rss_drop 1500 0
    else
        sm_skip "$inst/dirty_decay_ms" "no decay_cache: large blocks are unmapped when freed"
    fi
    if grep -q 'layers/addon/guard.h' "$src"; then
        conf_case "$inst" guard_sample:1 guarded 16
        conf_case "$inst" guard_sample:0 guarded 0
    else
        sm_skip "$inst/guard_sample" "no guard layer: guard_sample changes nothing"
    fi
    if [ "$sym_ok" = 1 ]; then
        sm_run "$inst/sunmao_conf_symbol" 60 "$SM_LIB" "$sym" junk_alloc
    else
        sm_fail "$inst/sunmao_conf_symbol" "cannot build conf_env with -DCONF_SYMBOL"
    fi
    rm -f "$src"
done
exit "$SM_FAILED"
