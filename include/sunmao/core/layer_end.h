/* Included last by every layer template (no include guard): completes the instance with its
 * capabilities (core/caps_default.h) and its metadata route (core/meta_route.h), then clears the
 * parameters of the instance just defined so the next inclusion cannot inherit them by accident.
 * Framework core. */
#include "caps_default.h"
#include "meta_route.h"
#undef SM_META_ROUTED
#undef SM_META
#undef SM_LAYER
#undef SM_NEXT
#undef SM_SYNC
#undef SM_SIZECLASS
#undef SM_RETAIN
#undef SM_CHKSUM
#undef SM_ERR
#undef SM_RECLAIM
#undef SM_SIZE_MIN
#undef SM_SIZE_MAX
#undef SM_SIZE_USER
