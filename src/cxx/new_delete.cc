// C++ operator new/delete in every standard form, served by the allocator this library composes.
// Part of malloc_socket: linked into each lib<name>.so, never into the prefixed libraries.
// Failure follows the standard: call the new_handler until it gives up, then throw bad_alloc
// (nothrow forms return nullptr instead).
#include <cstddef>
#include <new>

extern "C" {
void *sm_cxx_alloc(std::size_t size, std::size_t align);
void sm_cxx_free(void *ptr, std::size_t size);
}

#define SM_CXX_EXPORT __attribute__((visibility("default")))

namespace {

constexpr std::size_t default_align = __STDCPP_DEFAULT_NEW_ALIGNMENT__;

void *alloc_or_throw(std::size_t size, std::size_t align)
{
    for (;;) {
        if (void *p = sm_cxx_alloc(size, align))
            return p;
        std::new_handler handler = std::get_new_handler();
        if (!handler)
            throw std::bad_alloc();
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
