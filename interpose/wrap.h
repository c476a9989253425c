/* What every exported wrapper shares: visibility, the bypass test, and the error a wrapper returns
 * when the real function cannot be found. */
#ifndef SYMMPIN_INTERPOSE_WRAP_H
#define SYMMPIN_INTERPOSE_WRAP_H

#include <stdbool.h>

#include "interpose/guard.h"
#include "preload/events.h"

/* The project compiles with -fvisibility=hidden; wrappers are the library's only exports (and
 * interpose/symmpin.map pins that list). */
#define SYMMPIN_EXPORT __attribute__((visibility("default")))

/* Call the real function and nothing else: symmpin's own calls (guard set) and SYMMPIN_DISABLE. */
static inline bool symmpin_wrap_bypass(void) {
  return symmpin_guard_active() || !symmpin_events_enabled();
}

#endif
