# Sourced by the scripts that disassemble one function of an object (tests/build/fastpath_golden.sh,
# zero_cost.sh). objdump labels an address with one of the names at it, and malloc_socket gives
# malloc, free, calloc, realloc ... glibc's names as aliases (__libc_malloc, cfree ...), so
#   sm_objdump_label <object> <function>
# prints the name objdump uses for <function>'s address (the function's own when it has no alias).
sm_objdump_label() {
    local addr s
    addr=$(nm "$1" 2>/dev/null | awk -v f="$2" '$3 == f { print $1; exit }')
    if [ -n "$addr" ]; then
        for s in $(nm "$1" | awk -v a="$addr" '$1 == a && $2 ~ /^[tT]$/ { print $3 }'); do
            if objdump -d --disassemble="$s" "$1" 2>/dev/null | grep -q "^[0-9a-f]* <$s>:"; then
                echo "$s"
                return
            fi
        done
    fi
    echo "$2"
}
