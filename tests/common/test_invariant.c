/* CPU tests of common/invariant.h: with asserts on, a failed check aborts; with asserts off (the
 * build the library ships as), checks cost nothing and a SYMMPIN_BUG only logs. */
#define SYMMPIN_ASSERT_LEVEL 2
#include <criterion/criterion.h>
#include <signal.h>

#include "common/invariant.h"
#include "invariant_off.h"

Test(invariant, a_failed_assert_aborts, .signal = SIGABRT) {
  int two = 2;
  SYMMPIN_ASSERT(two == 2);
  SYMMPIN_ASSERT(two == 3);
}

Test(invariant, a_failed_expensive_assert_aborts_at_level_2, .signal = SIGABRT) {
  SYMMPIN_ASSERT_EXPENSIVE(sizeof(int) == 1);
}

Test(invariant, a_bug_aborts_where_asserts_are_on, .signal = SIGABRT) {
  SYMMPIN_BUG("a state only a bug leads to (%d)", 42);
}

Test(invariant, asserts_off_evaluate_nothing_and_a_bug_returns) {
  cr_assert_eq(invariant_off_run(), 0, "a condition was evaluated with asserts off");
}
