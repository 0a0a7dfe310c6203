/* delayed: the Mortise paper's name (§4.1) for the add-on layer that holds freed blocks in a
 * per-thread quarantine before the next layer may reuse them; sunmao calls it delayed_free
 * (layers/addon/delayed_free.h, whose parameters, slots, options and properties it has). Including
 * either gives the same layer.
 * @model: name=delayed alias-of=delayed_free
 * @check: <sunmao/policies/err/warn.h> SM_LAYER=t SM_ERR=warn
 * @check-next: fake */
#include "delayed_free.h"
