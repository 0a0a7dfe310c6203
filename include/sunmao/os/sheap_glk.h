/* sheap_glk: the Mortise paper's name (Table 2: a configurable static heap under a global lock) for
 * the OS layer sunmao calls sheap (os/sheap.h, whose parameters, slots, options and properties it
 * has). Including either gives the same layer; docs/layers.md lists the paper's names.
 * @model: name=sheap_glk alias-of=sheap
 * @check: SM_LAYER=t <sunmao/policies/sync/none.h> SM_SYNC=none <sunmao/policies/err/warn.h> SM_ERR=warn */
#include "sheap.h"
