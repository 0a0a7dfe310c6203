/* The driver of tests/smc/catalogue.sh: links the catalogue that tools/smc/catalogue.sh made
 * from the headers (tools/smc/catalogue.h) and checks facts about it that the headers state, one
 * `ok smc_catalogue: <case>` or `not ok smc_catalogue: <case>: <why>` line each. Exits 1 if any failed. */
#include <stdio.h>
#include <string.h>

#include "catalogue.h"

static int failed;

static void report(const char *name, int ok, const char *why)
{
    if (ok)
        printf("ok smc_catalogue: %s\n", name);
    else {
        printf("not ok smc_catalogue: %s: %s\n", name, why);
        failed = 1;
    }
}

static const struct smc_layer *layer(const char *name)
{
    for (unsigned i = 0; i < smc_nlayers; i++)
        if (strcmp(smc_layers[i].name, name) == 0) return &smc_layers[i];
    return NULL;
}

static const struct smc_policy *policy(const char *family, const char *name)
{
    for (unsigned i = 0; i < smc_npolicies; i++)
        if (strcmp(smc_policies[i].family, family) == 0 && strcmp(smc_policies[i].name, name) == 0)
            return &smc_policies[i];
    return NULL;
}

static const struct smc_key *key(const struct smc_layer *l, const char *name)
{
    for (unsigned i = 0; l && i < l->nkeys; i++)
        if (strcmp(l->keys[i].name, name) == 0) return &l->keys[i];
    return NULL;
}

/* word is one of the comma-separated words of list */
static int listed(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, word, n) == 0) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static int needs(const struct smc_layer *l, unsigned cap)
{
    for (unsigned i = 0; l && i < l->nneeds; i++)
        if (l->needs[i].cap == cap && l->needs[i].when[0] == '\0') return 1;
    return 0;
}

static void required_slot(const struct smc_layer *l, const char *lname, const char *slot)
{
    char name[64], why[128];
    const struct smc_key *k = key(l, slot);
    snprintf(name, sizeof name, "%s/slot_%s", lname, slot);
    snprintf(why, sizeof why, "%s", !k ? "no such key" : k->type != SMC_T_POLICY ? "not a policy slot"
                                     : !k->required ? "not required" : "its family is not its name");
    report(name, k && k->type == SMC_T_POLICY && k->required && strcmp(k->family, slot) == 0, why);
}

int main(void)
{
    const struct smc_layer *slab_lk = layer("slab_lk"), *mmap_heap = layer("mmap_heap");
    const struct smc_layer *thread_cache = layer("thread_cache"), *slab_wf = layer("slab_wf");
    const struct smc_layer *passthrough = layer("passthrough");
    const struct smc_policy *tc = policy("sizeclass", "tc"), *warn = policy("err", "warn");
    const struct smc_key *k;

    report("layers", smc_nlayers > 0 && slab_lk && mmap_heap && thread_cache && slab_wf && passthrough,
           "a layer is missing: slab_lk, mmap_heap, thread_cache, slab_wf or passthrough");
    report("policies", smc_npolicies > 0 && tc && warn, "policy sizeclass/tc or err/warn is missing");

    required_slot(slab_lk, "slab_lk", "sync");
    required_slot(slab_lk, "slab_lk", "sizeclass");
    required_slot(slab_lk, "slab_lk", "err");
    k = key(slab_lk, "slab_size");
    report("slab_lk/key_slab_size", k && k->type == SMC_T_SIZE && strcmp(k->deflt, "65536") == 0 &&
           strcmp(k->macro, "SM_OPT_SLAB_SIZE") == 0 && k->meaning[0] != '\0',
           "no key slab_size of type size, macro SM_OPT_SLAB_SIZE, default 65536 and a meaning");
    k = key(slab_lk, "size_handle");
    report("slab_lk/range", k && k->type == SMC_T_RANGE, "no size_handle range");

    report("mmap_heap/kind_os", mmap_heap && mmap_heap->kind == SMC_OS, "not kind os");
    k = key(mmap_heap, "thread_heap_size");
    report("mmap_heap/paper_threadlocal_heap_size", k && k->type == SMC_T_SIZE && listed(k->paper, "threadlocal_heap_size"),
           "no size key thread_heap_size with the paper spelling threadlocal_heap_size");

    report("thread_cache/needs_batch", needs(thread_cache, SMC_CAP_BATCH), "does not need BATCH");
    report("thread_cache/needs_owner", needs(thread_cache, SMC_CAP_OWNER), "does not need OWNER");
    report("thread_cache/flag_cache", thread_cache && (thread_cache->flags & SMC_F_CACHE), "no flag cache");
    report("slab_wf/needs_stable", needs(slab_wf, SMC_CAP_STABLE), "does not need STABLE");
    report("passthrough/forwards", passthrough && passthrough->forwards, "does not forward its next layer's capabilities");
    report("passthrough/alias_fake", passthrough && listed(passthrough->aliases, "fake"), "fake is not an alias");

    report("tc/sizeclass_max", tc && strcmp(tc->family, "sizeclass") == 0 && tc->max_size != 0,
           "not a sizeclass policy with a largest class");
    report("warn/alias_default", warn && listed(warn->aliases, "default"), "default is not an alias of warn");
    return failed;
}
