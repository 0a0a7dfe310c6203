// C++ operator new/delete in every standard form, served by the allocator this library composes.
// Part of malloc_socket: linked into each lib<name>.so, never into the prefixed libraries.
// Failure follows the standard: call the new_handler until it gives up, then throw bad_alloc
// (nothrow forms return nullptr instead).
//
// The library does not depend on libstdc++: loading it into every C program preloaded with us
// would cost ~1.4 MiB of RSS per process (measured: /bin/true 1044 KiB -> 2444 KiB). The few
// libstdc++ entry points used on the failure path are weak references, present exactly when a C++
// program has libstdc++ loaded; a C program that dlopens C++ code later finds them through dlsym.
#include <cstddef>
#include <cstdlib>
#include <dlfcn.h>
#include <new>
#include <unistd.h>

extern "C" {
void *sm_cxx_alloc(std::size_t size, std::size_t align);
void sm_cxx_free(void *ptr, std::size_t size);

// libstdc++/libsupc++ symbols, weak so that no C program needs libstdc++ to load us.
__attribute__((weak)) int __gxx_personality_v0(...);
__attribute__((weak)) void *__cxa_begin_catch(void *) noexcept;
__attribute__((weak)) void __cxa_end_catch();
}
namespace std {
__attribute__((weak)) new_handler get_new_handler() noexcept;
__attribute__((weak, noreturn)) void __throw_bad_alloc();
} // namespace std

#define SM_CXX_EXPORT __attribute__((visibility("default")))

namespace {

constexpr std::size_t default_align = __STDCPP_DEFAULT_NEW_ALIGNMENT__;

template <typename Fn> Fn libstdcxx(Fn weak_ref, const char *mangled)
{
    return weak_ref ? weak_ref : reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, mangled));
}

std::new_handler current_new_handler()
{
    auto get = libstdcxx(&std::get_new_handler, "_ZSt15get_new_handlerv");
    return get ? get() : nullptr;
}

[[noreturn]] void throw_bad_alloc()
{
    auto thrower = libstdcxx(&std::__throw_bad_alloc, "_ZSt17__throw_bad_allocv");
    if (thrower)
        thrower();
    static const char msg[] = "sunmao: operator new: out of memory, and no C++ runtime to throw bad_alloc\n";
    (void)!write(2, msg, sizeof msg - 1);
    abort();
}

void *alloc_or_throw(std::size_t size, std::size_t align)
{
    for (;;) {
        if (void *p = sm_cxx_alloc(size, align))
            return p;
        std::new_handler handler = current_new_handler();
        if (!handler)
            throw_bad_alloc();
        handler();
    }
}

void *alloc_nothrow(std::size_t size, std::size_t align) noexcept
{
    try {
        return alloc_or_throw(size, align);
    } catch (...) {
        return nullptr;
    }
}

std::size_t checked_align(std::align_val_t al) { return static_cast<std::size_t>(al); }

} // namespace

SM_CXX_EXPORT void *operator new(std::size_t n) { return alloc_or_throw(n, default_align); }
SM_CXX_EXPORT void *operator new[](std::size_t n) { return alloc_or_throw(n, default_align); }
SM_CXX_EXPORT void *operator new(std::size_t n, const std::nothrow_t &) noexcept { return alloc_nothrow(n, default_align); }
SM_CXX_EXPORT void *operator new[](std::size_t n, const std::nothrow_t &) noexcept { return alloc_nothrow(n, default_align); }
SM_CXX_EXPORT void *operator new(std::size_t n, std::align_val_t al) { return alloc_or_throw(n, checked_align(al)); }
SM_CXX_EXPORT void *operator new[](std::size_t n, std::align_val_t al) { return alloc_or_throw(n, checked_align(al)); }
SM_CXX_EXPORT void *operator new(std::size_t n, std::align_val_t al, const std::nothrow_t &) noexcept
{
    return alloc_nothrow(n, checked_align(al));
}
SM_CXX_EXPORT void *operator new[](std::size_t n, std::align_val_t al, const std::nothrow_t &) noexcept
{
    return alloc_nothrow(n, checked_align(al));
}

SM_CXX_EXPORT void operator delete(void *p) noexcept { sm_cxx_free(p, 0); }
SM_CXX_EXPORT void operator delete[](void *p) noexcept { sm_cxx_free(p, 0); }
SM_CXX_EXPORT void operator delete(void *p, const std::nothrow_t &) noexcept { sm_cxx_free(p, 0); }
SM_CXX_EXPORT void operator delete[](void *p, const std::nothrow_t &) noexcept { sm_cxx_free(p, 0); }
SM_CXX_EXPORT void operator delete(void *p, std::size_t n) noexcept { sm_cxx_free(p, n); }
SM_CXX_EXPORT void operator delete[](void *p, std::size_t n) noexcept { sm_cxx_free(p, n); }
SM_CXX_EXPORT void operator delete(void *p, std::align_val_t) noexcept { sm_cxx_free(p, 0); }
SM_CXX_EXPORT void operator delete[](void *p, std::align_val_t) noexcept { sm_cxx_free(p, 0); }
SM_CXX_EXPORT void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { sm_cxx_free(p, 0); }
SM_CXX_EXPORT void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept { sm_cxx_free(p, 0); }
SM_CXX_EXPORT void operator delete(void *p, std::size_t n, std::align_val_t) noexcept { sm_cxx_free(p, n); }
SM_CXX_EXPORT void operator delete[](void *p, std::size_t n, std::align_val_t) noexcept { sm_cxx_free(p, n); }
