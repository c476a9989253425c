/* Checks compiled with asserts off (level 0), for test_invariant.c. */
#define SYMMPIN_ASSERT_LEVEL 0
#include "common/invariant.h"

#include "invariant_off.h"

static int evaluations;

static int counted(int v) {
  evaluations++;
  return v;
}

int invariant_off_run(void) {
  evaluations = 0;
  SYMMPIN_ASSERT(counted(0));
  SYMMPIN_ASSERT_EXPENSIVE(counted(0));
  SYMMPIN_BUG("a state only a bug leads to, with asserts off: logged, survived");
  return evaluations;
}
