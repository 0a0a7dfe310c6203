// Every C++ operator new/delete form: plain, array, nothrow, sized delete, aligned (64..4096) with
// aligned and sized+aligned delete, nothrow aligned; failure: bad_alloc, nullptr, new_handler.
// Blocks are checked for alignment and filled with address-keyed patterns while many are live,
// so overlapping blocks are caught. malloc_usable_size() must work on every block operator new
// returns: it does when operator new is served by the process' malloc (glibc, or the instance
// under LD_PRELOAD). With SM_EXPECT_MALLOC_FROM=<lib path> the case cxx_preload_active also
// checks that the operators themselves resolve to that library.
#include <dlfcn.h>
#include <malloc.h>
#include <stdint.h>

#include <cstddef>
#include <cstring>
#include <new>

#include "tests/support/check.h"

#ifndef __cpp_sized_deallocation
// clang enables sized deallocation only with -fsized-deallocation, and <new> then does not declare
// the sized forms; they still exist (libstdc++, and every lib<inst>.so), so declare them here.
void operator delete(void *, std::size_t) noexcept;
void operator delete[](void *, std::size_t) noexcept;
void operator delete(void *, std::size_t, std::align_val_t) noexcept;
void operator delete[](void *, std::size_t, std::align_val_t) noexcept;
#endif

namespace {

constexpr std::size_t default_align = __STDCPP_DEFAULT_NEW_ALIGNMENT__;
constexpr std::size_t KiB = 1024, MiB = KiB * KiB;

// Keep the compiler from eliding new/delete pairs (allowed for new-expressions).
inline void escape(void *p) { asm volatile("" : : "g"(p) : "memory"); }
bool is_aligned(const void *p, std::size_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

volatile std::size_t huge_v = SIZE_MAX / 2; // volatile: not a constant the compiler can reason about
volatile std::size_t huger_v = SIZE_MAX - 1;
std::size_t huge() { return huge_v; }

const std::size_t sizes[] = { 0, 1, 8, 15, 16, 17, 100, 256, 1000, 4096, 5000, 65536, 100000, 1 * MiB + 7 };

void cxx_preload_active()
{
    const char *want = getenv("SM_EXPECT_MALLOC_FROM");
    const char *base = strrchr(want, '/') ? strrchr(want, '/') + 1 : want;
    static const char *const names[] = {
        "_Znwm", "_Znam", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZnwmRKSt9nothrow_t", "_ZnwmSt11align_val_t",
        "_ZdlPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t",
    };
    for (const char *name : names) {
        void *sym = dlsym(RTLD_DEFAULT, name);
        Dl_info info;
        if (!sym || !dladdr(sym, &info) || !info.dli_fname) {
            CHECKF(false, "%s: cannot locate the symbol", name);
            continue;
        }
        CHECKF(strstr(info.dli_fname, base) != nullptr, "%s resolves to %s, not %s", name, info.dli_fname, want);
    }
}

void new_plain()
{
    for (std::size_t n : sizes) {
        void *p = ::operator new(n);
        escape(p);
        CHECKF(p != nullptr && is_aligned(p, default_align), "operator new(%zu) = %p", n, p);
        CHECKF(malloc_usable_size(p) >= n, "malloc_usable_size(operator new(%zu)) = %zu: not served by malloc?", n,
               malloc_usable_size(p));
        check_fill(p, n, 1);
        CHECK(check_verify(p, n, 1));
        ::operator delete(p);
    }
    // new-expressions of scalars and objects
    for (int i = 0; i < 100; i++) {
        long *l = new long(i);
        escape(l);
        CHECK(*l == i && is_aligned(l, alignof(long)));
        delete l;
    }
}

int live_objects;
struct Tracked {
    unsigned char bytes[40];
    Tracked() { live_objects++; check_fill(bytes, sizeof bytes, 5); }
    ~Tracked()
    {
        CHECKF(check_verify(bytes, sizeof bytes, 5), "object at %p overwritten before delete[]", (void *)this);
        live_objects--;
    }
};

void new_array()
{
    for (std::size_t n : sizes) {
        char *p = new char[n + 1];
        escape(p);
        CHECKF(is_aligned(p, default_align), "new char[%zu] = %p", n + 1, (void *)p);
        CHECKF(malloc_usable_size(p) >= n + 1, "malloc_usable_size(new char[%zu]) = %zu", n + 1, malloc_usable_size(p));
        check_fill(p, n + 1, 2);
        CHECK(check_verify(p, n + 1, 2));
        delete[] p;
        void *q = ::operator new[](n);
        escape(q);
        CHECKF(q && is_aligned(q, default_align), "operator new[](%zu) = %p", n, q);
        check_fill(q, n, 3);
        CHECK(check_verify(q, n, 3));
        ::operator delete[](q);
    }
    // array of non-trivially-destructible objects (cookie in front; delete[] must get it back)
    for (int k = 1; k < 2000; k += 97) {
        Tracked *t = new Tracked[k];
        escape(t);
        CHECK(live_objects == k);
        delete[] t;
        CHECK(live_objects == 0);
    }
}

void new_nothrow()
{
    for (std::size_t n : sizes) {
        void *p = ::operator new(n, std::nothrow);
        escape(p);
        CHECKF(p != nullptr && is_aligned(p, default_align), "operator new(%zu, nothrow) = %p", n, p);
        check_fill(p, n, 4);
        CHECK(check_verify(p, n, 4));
        ::operator delete(p, std::nothrow);
        char *a = new (std::nothrow) char[n + 3];
        escape(a);
        CHECKF(a != nullptr && is_aligned(a, default_align), "new (nothrow) char[%zu] = %p", n + 3, (void *)a);
        if (a) {
            check_fill(a, n + 3, 5);
            CHECK(check_verify(a, n + 3, 5));
        }
        delete[] a;
        void *b = ::operator new[](n, std::nothrow);
        escape(b);
        CHECK(b != nullptr);
        ::operator delete[](b, std::nothrow);
    }
}

void sized_delete()
{
    // many live blocks, freed with the sized forms
    enum { N = 500 };
    void *p[N];
    std::size_t n[N];
    for (int i = 0; i < N; i++) {
        n[i] = (std::size_t)i * 131 % 9000 + 1;
        p[i] = (i & 1) ? ::operator new[](n[i]) : ::operator new(n[i]);
        escape(p[i]);
        CHECK(is_aligned(p[i], default_align));
        check_fill(p[i], n[i], 6);
    }
    for (int i = 0; i < N; i++) {
        CHECKF(check_verify(p[i], n[i], 6), "block %p (%zu bytes) overwritten (overlap?)", p[i], n[i]);
        if (i & 1)
            ::operator delete[](p[i], n[i]);
        else
            ::operator delete(p[i], n[i]);
    }
    // the memory is reusable afterwards
    void *q = ::operator new(100);
    check_fill(q, 100, 7);
    CHECK(check_verify(q, 100, 7));
    ::operator delete(q, 100);
}

template <std::size_t A> struct alignas(A) Over {
    unsigned char b[A + 8];
};

template <std::size_t A> bool over_aligned_expr()
{
    Over<A> *o = new Over<A>;
    escape(o);
    bool ok = is_aligned(o, A);
    check_fill(o->b, sizeof o->b, 8);
    ok = ok && check_verify(o->b, sizeof o->b, 8);
    delete o; // sized + aligned delete
    Over<A> *arr = new Over<A>[3];
    escape(arr);
    ok = ok && is_aligned(arr, A);
    check_fill(arr, sizeof(Over<A>) * 3, 9);
    ok = ok && check_verify(arr, sizeof(Over<A>) * 3, 9);
    delete[] arr;
    Over<A> *nt = new (std::nothrow) Over<A>;
    escape(nt);
    ok = ok && nt && is_aligned(nt, A);
    delete nt;
    return ok;
}

void new_aligned()
{
    enum { N = 64 };
    for (std::size_t a = 64; a <= 4096; a <<= 1) {
        void *p[N];
        std::size_t n[N];
        for (int i = 0; i < N; i++) {
            n[i] = (std::size_t)i * a / 3 + (std::size_t)i % 7;
            std::align_val_t al{ a };
            p[i] = (i % 3 == 0) ? ::operator new[](n[i], al) : ::operator new(n[i], al);
            escape(p[i]);
            CHECKF(p[i] && is_aligned(p[i], a), "operator new(%zu, align %zu) = %p", n[i], a, p[i]);
            CHECKF(malloc_usable_size(p[i]) >= n[i], "malloc_usable_size(aligned new %zu) = %zu", n[i],
                   malloc_usable_size(p[i]));
            check_fill(p[i], n[i], 10);
        }
        for (int i = 0; i < N; i++) {
            CHECKF(check_verify(p[i], n[i], 10), "aligned block %p overwritten", p[i]);
            std::align_val_t al{ a };
            switch (i % 3) {
            case 0: // array: aligned and sized+aligned array delete
                if (i & 1)
                    ::operator delete[](p[i], al);
                else
                    ::operator delete[](p[i], n[i], al);
                break;
            case 1:
                ::operator delete(p[i], al);
                break;
            default:
                ::operator delete(p[i], n[i], al);
                break;
            }
        }
    }
    CHECK(over_aligned_expr<64>());
    CHECK(over_aligned_expr<128>());
    CHECK(over_aligned_expr<256>());
    CHECK(over_aligned_expr<1024>());
    CHECK(over_aligned_expr<4096>());
}

void new_aligned_nothrow()
{
    for (std::size_t a = 64; a <= 4096; a <<= 1)
        for (std::size_t n : sizes) {
            std::align_val_t al{ a };
            void *p = ::operator new(n, al, std::nothrow);
            escape(p);
            CHECKF(p && is_aligned(p, a), "operator new(%zu, align %zu, nothrow) = %p", n, a, p);
            check_fill(p, n, 11);
            CHECK(check_verify(p, n, 11));
            ::operator delete(p, al, std::nothrow);
            void *q = ::operator new[](n, al, std::nothrow);
            escape(q);
            CHECKF(q && is_aligned(q, a), "operator new[](%zu, align %zu, nothrow) = %p", n, a, q);
            ::operator delete[](q, al, std::nothrow);
        }
}

template <typename F> bool throws_bad_alloc(F f)
{
    try {
        void *p = f();
        escape(p);
        return false; // got memory for an impossible size
    } catch (const std::bad_alloc &) {
        return true;
    } catch (...) {
        return false;
    }
}

void huge_throws()
{
    CHECK(throws_bad_alloc([] { return ::operator new(huge()); }));
    CHECK(throws_bad_alloc([] { return ::operator new(huger_v); }));
    CHECK(throws_bad_alloc([] { return ::operator new[](huge()); }));
    CHECK(throws_bad_alloc([] { return ::operator new(huge(), std::align_val_t{ 64 }); }));
    CHECK(throws_bad_alloc([] { return ::operator new[](huge(), std::align_val_t{ 4096 }); }));
    CHECK(throws_bad_alloc([] { return static_cast<void *>(new char[huge()]); }));
    CHECK(throws_bad_alloc([] { return static_cast<void *>(new Over<256>[huge() / 512]); }));
}

void huge_nothrow_null()
{
    void *p = ::operator new(huge(), std::nothrow);
    CHECKF(p == nullptr, "operator new(huge, nothrow) = %p", p);
    p = ::operator new[](huge(), std::nothrow);
    CHECKF(p == nullptr, "operator new[](huge, nothrow) = %p", p);
    p = ::operator new(huge(), std::align_val_t{ 128 }, std::nothrow);
    CHECKF(p == nullptr, "operator new(huge, align 128, nothrow) = %p", p);
    p = ::operator new[](huge(), std::align_val_t{ 128 }, std::nothrow);
    CHECKF(p == nullptr, "operator new[](huge, align 128, nothrow) = %p", p);
    char *c = new (std::nothrow) char[huge()];
    CHECKF(c == nullptr, "new (nothrow) char[huge] = %p", (void *)c);
}

int handler_calls;
void give_up_after_three()
{
    if (++handler_calls == 3)
        std::set_new_handler(nullptr);
}
void *reserve;
void release_reserve() // a handler that makes progress: frees memory, then the retry succeeds
{
    handler_calls++;
    ::operator delete(reserve);
    reserve = nullptr;
    std::set_new_handler(nullptr);
}

void new_handler_called()
{
    handler_calls = 0;
    std::set_new_handler(give_up_after_three);
    CHECK(throws_bad_alloc([] { return ::operator new(huge()); }));
    CHECKF(handler_calls == 3, "new_handler called %d times, expected 3 (until it removed itself)", handler_calls);

    handler_calls = 0;
    std::set_new_handler(give_up_after_three);
    CHECK(throws_bad_alloc([] { return ::operator new(huge(), std::align_val_t{ 256 }); }));
    CHECKF(handler_calls == 3, "aligned: new_handler called %d times, expected 3", handler_calls);

    handler_calls = 0;
    std::set_new_handler(give_up_after_three);
    void *p = ::operator new(huge(), std::nothrow);
    CHECK(p == nullptr);
    CHECKF(handler_calls == 3, "nothrow: new_handler called %d times, expected 3", handler_calls);

    handler_calls = 0;
    std::set_new_handler(give_up_after_three);
    p = ::operator new[](huge(), std::align_val_t{ 64 }, std::nothrow);
    CHECK(p == nullptr);
    CHECKF(handler_calls == 3, "nothrow aligned: new_handler called %d times, expected 3", handler_calls);

    // a handler that throws its own exception: it must propagate out of operator new
    std::set_new_handler([] { throw std::bad_array_new_length(); });
    bool got = false;
    try {
        escape(::operator new(huge()));
    } catch (const std::bad_array_new_length &) {
        got = true;
    } catch (...) {
    }
    CHECK(got);
    std::set_new_handler(nullptr);

    // handler called only on failure: a normal allocation does not call it
    handler_calls = 0;
    std::set_new_handler(give_up_after_three);
    p = ::operator new(100);
    escape(p);
    ::operator delete(p);
    CHECK(handler_calls == 0);
    std::set_new_handler(nullptr);

    reserve = ::operator new(1000);
    escape(reserve);
    handler_calls = 0;
    std::set_new_handler(release_reserve);
    CHECK(throws_bad_alloc([] { return ::operator new(huge()); }));
    CHECK(handler_calls == 1 && reserve == nullptr);
    std::set_new_handler(nullptr);
}

// Mixed forms, all live at once: any two blocks sharing memory are detected.
void mixed_live()
{
    enum { N = 3000 };
    struct Rec {
        void *p;
        std::size_t n, a;
        int form;
    };
    Rec *r = static_cast<Rec *>(malloc(sizeof(Rec) * N));
    CHECK(r != nullptr);
    if (!r)
        return;
    for (int i = 0; i < N; i++) {
        std::size_t n = (std::size_t)(i * 7919) % 3000 + (std::size_t)(i % 5 == 0 ? 70000 : 0);
        int form = i % 4;
        std::size_t a = form >= 2 ? (std::size_t)64 << (i % 7) : default_align;
        void *p = form == 0 ? ::operator new(n)
                  : form == 1 ? ::operator new[](n, std::nothrow)
                  : form == 2 ? ::operator new(n, std::align_val_t{ a })
                              : ::operator new[](n, std::align_val_t{ a }, std::nothrow);
        escape(p);
        CHECKF(p && is_aligned(p, a), "form %d (%zu, align %zu) = %p", form, n, a, p);
        check_fill(p, n, (unsigned)i);
        r[i] = Rec{ p, n, a, form };
    }
    for (int i = 0; i < N; i++) {
        CHECKF(check_verify(r[i].p, r[i].n, (unsigned)i), "block %p (%zu bytes, form %d) overwritten", r[i].p, r[i].n,
               r[i].form);
        switch (r[i].form) {
        case 0: ::operator delete(r[i].p, r[i].n); break;
        case 1: ::operator delete[](r[i].p); break;
        case 2: ::operator delete(r[i].p, r[i].n, std::align_val_t{ r[i].a }); break;
        default: ::operator delete[](r[i].p, std::align_val_t{ r[i].a }); break;
        }
    }
    free(r);
}

} // namespace

int main()
{
    check_begin("cxx_forms");
    if (getenv("SM_EXPECT_MALLOC_FROM"))
        RUN_CASE(cxx_preload_active);
    RUN_CASE(new_plain);
    RUN_CASE(new_array);
    RUN_CASE(new_nothrow);
    RUN_CASE(sized_delete);
    RUN_CASE(new_aligned);
    RUN_CASE(new_aligned_nothrow);
    RUN_CASE(huge_throws);
    RUN_CASE(huge_nothrow_null);
    RUN_CASE(new_handler_called);
    RUN_CASE(mixed_live);
    return check_end();
}
