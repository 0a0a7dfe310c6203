/* smc's catalogue: every layer, socket and policy the model language names, with its keys, slots,
 * capabilities and properties. It is not kept by hand: tools/smc/catalogue.sh reads the `@model:`
 * lines of each header's opening comment (the key names and types, the slots and their defaults,
 * the kind and flags) together with what the header's code and options table already say (each
 * option's default and meaning, SM_LAYER_OFFERS, SM_REQUIRE_CAP) and writes the arrays below.
 *
 * The `@model:` grammar (words separated by blanks; several lines add up), docs/model-language.md:
 *   name=N kind=os|core|addon|socket|policy [family=F] [alias=A ...] [alias-of=N]
 *   slot S            a required policy slot (macro SM_<S upper-cased>, family S)
 *   slot S=P          an optional slot and its default policy
 *   key K T [paper=A,B] [macro=M]   an option of type T (int|size|bool), macro SM_OPT_<K upper>
 *   range             the layer takes size_handle=[lo, hi] (SM_SIZE_MIN, SM_SIZE_MAX)
 *   flag F            secure | cache | mt | c-only | sizeclass-max=N (a policy's largest class)
 *                     | serves-max=K[/K] (the largest request a layer serves, from its keys)
 */
#ifndef SMC_CATALOGUE_H
#define SMC_CATALOGUE_H

#include <stddef.h>

enum smc_kind { SMC_OS, SMC_CORE, SMC_ADDON, SMC_SOCKET, SMC_POLICY };
enum smc_type { SMC_T_INT, SMC_T_SIZE, SMC_T_BOOL, SMC_T_POLICY, SMC_T_RANGE };

/* Layer flags. */
#define SMC_F_SECURE 1u /* checks every request: must sit where it sees them all (above any cache) */
#define SMC_F_CACHE  2u /* serves requests from per-thread or per-CPU state: fewer reach below it */
#define SMC_F_MT     4u /* a socket whose callers may be many threads at once */
#define SMC_F_C_ONLY 8u /* needs C a line cannot give (a predicate, another layer's name) */

/* Capabilities, as in include/sunmao/core/capability.h. */
#define SMC_CAP_HIT     1u
#define SMC_CAP_BATCH   2u
#define SMC_CAP_OWNER   4u
#define SMC_CAP_MAPPING 8u
#define SMC_CAP_STABLE  16u
#define SMC_CAP_MOVE    32u
#define SMC_CAP_ALL     63u

struct smc_key {
    const char *name;    /* the model name: slab_size, sync, size_handle */
    const char *paper;   /* other spellings accepted, comma-separated ("" none) */
    const char *macro;   /* SM_OPT_SLAB_SIZE, SM_SYNC; SM_SIZE_MIN for a range (and SM_SIZE_MAX) */
    enum smc_type type;
    const char *family;  /* a policy slot's family (sync, sizeclass, err, chksum, retain, reclaim) */
    int required;        /* a slot with no default */
    const char *deflt;   /* the default as the header writes it ("" none) */
    const char *meaning; /* the first sentence of its entry in the header's comment ("" none) */
};

struct smc_need {
    unsigned cap;        /* SMC_CAP_* */
    const char *when;    /* "" always, else the option macro that must be non-zero (SM_OPT_GROW) */
    const char *why;
};

struct smc_layer {
    const char *name;       /* the model name */
    const char *aliases;    /* other names accepted, comma-separated ("" none) */
    const char *header;     /* path under include/: sunmao/layers/core/slab_lk.h */
    enum smc_kind kind;
    unsigned flags;         /* SMC_F_* */
    unsigned offers;        /* SMC_CAP_*; see forwards */
    unsigned forwards;      /* of offers, those it offers only where its next layer does (SM_CAP_ALL,
                               or SM_LAYER_CAPS [always |] SM_CAPS(SM_NEXT) [& mask], in the header:
                               a layer above sees (offers & ~forwards) | (next & offers & forwards));
                               0: it offers offers */
    const char *offers_when; /* "" always; else the option macro (SM_OPT_STABLE) that must be
                                non-zero for the layer to offer when_caps (#if around its definition) */
    unsigned when_caps;      /* of offers, those offered only with offers_when on (the rest are
                                defined outside the #if, or in its #else) */
    const char *serves_max;  /* "" none; else the largest request it serves, as a key or key/key of
                                its own (buddy_glk: chunk_size; slab_wf: slab_size/min_objects) */
    const struct smc_key *keys;
    unsigned nkeys;
    const struct smc_need *needs;
    unsigned nneeds;
    const char *summary;    /* the header comment's first sentence */
};

struct smc_policy {
    const char *name;
    const char *aliases;
    const char *family;     /* sync, sizeclass, err, chksum, retain, reclaim */
    const char *header;
    unsigned long long max_size; /* a sizeclass policy's largest class (0: not a sizeclass) */
    const char *summary;
};

extern const struct smc_layer smc_layers[];
extern const unsigned smc_nlayers;
extern const struct smc_policy smc_policies[];
extern const unsigned smc_npolicies;

#endif
