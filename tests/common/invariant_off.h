/* invariant_off.c: failing checks with asserts off; returns how often their conditions ran. */
#ifndef SYMMPIN_TESTS_COMMON_INVARIANT_OFF_H
#define SYMMPIN_TESTS_COMMON_INVARIANT_OFF_H
int invariant_off_run(void);
#endif
