/* What every exported wrapper shares: visibility, the bypass test, and its prologue: the real
 * function, the error when it cannot be found, and the pass-through when symmpin stays out. */
#ifndef SYMMPIN_INTERPOSE_WRAP_H
#define SYMMPIN_INTERPOSE_WRAP_H

#include <stdbool.h>

#include "interpose/guard.h"
#include "interpose/real.h"
#include "preload/events.h"

/* The project compiles with -fvisibility=hidden; wrappers are the library's only exports, and the
 * export map (generated from interpose/wrapped.h) pins that list. */
#define SYMMPIN_EXPORT __attribute__((visibility("default")))

/* Call the real function and nothing else: symmpin's own calls (guard set) and SYMMPIN_DISABLE. */
static inline bool symmpin_wrap_bypass(void) {
  return symmpin_guard_active() || !symmpin_events_enabled();
}

/* `real`: the real function behind wrapper `name`, typed like the wrapper itself (both are
 * declared by the library's own header); the wrapper returns `missing` when it cannot be found
 * (the lookup warns once, real.h). */
#define SYMMPIN_WRAP_REAL(name, missing)                                                   \
  __typeof__(&name) real = (__typeof__(&name))symmpin_real_get(&symmpin_real_##name); \
  if (!real) return (missing)

/* The prologue of a wrapper that observes a call around the real one (every wrapper but the
 * async-error query): resolve, pass straight through when bypassed, else set the guard (the
 * wrapper clears it before it returns). `args` is the call's parenthesized argument list. */
#define SYMMPIN_WRAP_ENTER(name, missing, args) \
  SYMMPIN_WRAP_REAL(name, missing);             \
  if (symmpin_wrap_bypass()) return real args;  \
  symmpin_guard_enter()

#endif
