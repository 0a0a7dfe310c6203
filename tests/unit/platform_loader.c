/* Unit test of sm_plat_in_loader (platform/linux.h): the socket's free path uses it to keep the
 * release thread from starting inside a free of the dynamic loader's (tests/api/join_burst.c is
 * the whole story). The loader is found here independently, through dl_iterate_phdr: every byte of
 * its executable segment is the loader's, and no address of the program, of libc or of the stack is. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sunmao/platform/platform.h>
#include "tests/support/check.h"

static uintptr_t code_lo, code_hi; /* the loader's executable segment, as dl_iterate_phdr sees it */
static int loaders_seen;

static int find_loader(struct dl_phdr_info *info, size_t size, void *unused)
{
    (void)size, (void)unused;
    if (info->dlpi_addr == 0 || info->dlpi_addr != (ElfW(Addr))getauxval(AT_BASE))
        return 0;
    loaders_seen++;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD && (info->dlpi_phdr[i].p_flags & PF_X)) {
            code_lo = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            code_hi = code_lo + info->dlpi_phdr[i].p_memsz;
        }
    return 0;
}

static void loader_code_is_the_loaders(void)
{
    dl_iterate_phdr(find_loader, NULL);
    CHECKF(loaders_seen == 1, "the loader found %d times by dl_iterate_phdr", loaders_seen);
    CHECK(code_hi > code_lo);
    if (code_hi <= code_lo)
        return;
    CHECK(sm_plat_in_loader((const void *)code_lo));
    CHECK(sm_plat_in_loader((const void *)(code_lo + (code_hi - code_lo) / 2)));
    CHECK(sm_plat_in_loader((const void *)(code_hi - 1)));
}

static void other_code_is_not(void)
{
    int on_stack = 0;
    CHECK(!sm_plat_in_loader(NULL));
    CHECK(!sm_plat_in_loader((const void *)(uintptr_t)&other_code_is_not)); /* the program */
    CHECK(!sm_plat_in_loader((const void *)(uintptr_t)&memcpy));            /* libc */
    CHECK(!sm_plat_in_loader((const void *)(uintptr_t)&abort));
    CHECK(!sm_plat_in_loader(&on_stack));
    CHECK(!sm_plat_in_loader((const void *)UINTPTR_MAX));
}

int main(void)
{
    check_begin("platform_loader");
    RUN_CASE(loader_code_is_the_loaders);
    RUN_CASE(other_code_is_not);
    return check_end();
}
