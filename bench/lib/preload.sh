# Sourced by the bench scripts that run allocators one by one (bench/percpu/oversub.sh,
# bench/hugepage/tlb.sh): sm_bench_preload NAME prints what LD_PRELOAD takes for NAME.
#   glibc                                   "none" (nothing to preload)
#   tcmalloc jemalloc mimalloc tbbmalloc    the Debian library's path, nothing when not installed
#   anything else                           $BUILD/lib<NAME>.so, made absolute
sm_bench_preload() {
    local soname=""
    case "$1" in
        glibc) echo none; return ;;
        tcmalloc) soname=libtcmalloc_minimal.so.4 ;;
        jemalloc) soname=libjemalloc.so.2 ;;
        mimalloc) soname=libmimalloc.so.2 ;;
        tbbmalloc) soname=libtbbmalloc.so.2 ;;
        *) realpath "${BUILD:-build}/lib$1.so"; return ;;
    esac
    ldconfig -p | awk -v s="$soname" '$1 == s { print $NF; exit }'
}
