/* Prints the one list of wrapped functions (interpose/wrapped.h), a name a line, for
 * check_exports.py, which holds it against what the built library really exports. */
#include <stdio.h>

#include "interpose/wrapped.h"

#define PRINT_NAME(lib, name) puts(#name);

int main(void) {
  SYMMPIN_WRAPPED(PRINT_NAME)
  return 0;
}
