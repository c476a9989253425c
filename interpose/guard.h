/* The per-thread re-entrancy guard. While it is set, every wrapper calls the real function and
 * records nothing: symmpin's own CUDA/NCCL calls (engine, pools) and calls that a real function
 * makes into another wrapped function are not the program's. Nesting counts. */
#ifndef SYMMPIN_INTERPOSE_GUARD_H
#define SYMMPIN_INTERPOSE_GUARD_H

#include <stdbool.h>

void symmpin_guard_enter(void);
void symmpin_guard_leave(void);
bool symmpin_guard_active(void);

#endif
