/* Stack hashes: "where in the program a call comes from", the same on every rank and in every run
 * of the same binary. Each return address becomes (basename of its module, address - module load
 * base), so ASLR changes nothing; the per-address part is cached (a lock-free table), so dladdr
 * runs once per distinct address, not per call.
 *
 * Depth (SYMMPIN_STACK_DEPTH): 1 hashes only the wrapper's caller via __builtin_return_address(0)
 * (a few ns); more frames need backtrace(), which unwinds with libgcc and costs far more (see
 * docs/callsite.md for numbers). Frames inside libsymmpin itself are skipped.
 *
 * The same cache keeps each address's location for people (planner/site.h's symmpin_site_where:
 * module path, offset of the call, symbol), resolved with dladdr when the address is first seen,
 * so reports never call dladdr. Its strings belong to the loader: valid while the module stays
 * loaded (the cache makes the same assumption; docs/callsite.md). */
#ifndef SYMMPIN_INTERPOSE_CALLSITE_H
#define SYMMPIN_INTERPOSE_CALLSITE_H

#include <stdbool.h>
#include <stdint.h>

#include "planner/site.h"   /* symmpin_site_where */
#include "preload/config.h" /* SYMMPIN_STACK_DEPTH_DEFAULT, SYMMPIN_STACK_DEPTH_MAX */

/* Set the depth (clamped to [1, SYMMPIN_STACK_DEPTH_MAX]). Primes backtrace() when depth > 1, so
 * its one-time loading of libgcc_s does not happen inside a wrapped call. */
void symmpin_callsite_set_depth(int depth);
int symmpin_callsite_depth(void);

/* The stack hash of the current call; ret0 = __builtin_return_address(0) taken in the exported
 * wrapper (the program's call instruction). Never 0. */
uint64_t symmpin_callsite_stack(void *ret0);
/* The same hash, and in *where (when not NULL) the location of the frame that identifies the site:
 * the first return address outside libsymmpin (all zero when none or unknown). */
uint64_t symmpin_callsite_stack_where(void *ret0, symmpin_site_where *where);

/* Hash of given return addresses (the frames the functions above collect): exposed for tests. */
uint64_t symmpin_callsite_hash_frames(void *const *frames, int n);
uint64_t symmpin_callsite_hash_frames_where(void *const *frames, int n, symmpin_site_where *where);
/* The cached location of one return address; false (and *where zeroed) when it is inside
 * libsymmpin or in no known module. Exposed for tests. */
bool symmpin_callsite_frame_where(const void *addr, symmpin_site_where *where);
/* The cached per-address part: hash(module basename, address - module base); exposed for tests. */
uint64_t symmpin_callsite_frame_hash(const void *addr);

#endif
