/* fake: the Mortise paper's name (§4.1, §4.4 question 1) for the layer that serves nothing and
 * passes every request on; sunmao calls it passthrough (layers/addon/passthrough.h, whose
 * parameters, slots and properties it has). Including either gives the same layer.
 * @model: name=fake alias-of=passthrough
 * @check: SM_LAYER=t
 * @check-next: fake */
#include "passthrough.h"
