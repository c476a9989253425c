/* The real-symbol table: one lazily resolved pointer per wrapped function, generated from the one
 * list (wrapped.h), so a wrapper and its real function cannot be out of step. */
#include "interpose/real.h"

#define SYMMPIN_REAL_DEFINE(lib, name) \
  symmpin_real_sym symmpin_real_##name = SYMMPIN_REAL_SYM_INIT(SYMMPIN_REAL_##lib, name);
SYMMPIN_WRAPPED(SYMMPIN_REAL_DEFINE)
