/* Stack hashes: "where in the program a call comes from", the same on every rank and in every run
 * of the same binary. Each return address becomes (basename of its module, address - module load
 * base), so ASLR changes nothing; the per-address part is cached (a lock-free table), so dladdr
 * runs once per distinct address, not per call.
 *
 * Depth (SYMMPIN_STACK_DEPTH): 1 hashes only the wrapper's caller via __builtin_return_address(0)
 * (a few ns); more frames need backtrace(), which unwinds with libgcc and costs far more (see
 * docs/callsite.md for numbers). Frames inside libsymmpin itself are skipped. */
#ifndef SYMMPIN_INTERPOSE_CALLSITE_H
#define SYMMPIN_INTERPOSE_CALLSITE_H

#include <stdint.h>

#include "preload/config.h" /* SYMMPIN_STACK_DEPTH_DEFAULT, SYMMPIN_STACK_DEPTH_MAX */

/* Set the depth (clamped to [1, SYMMPIN_STACK_DEPTH_MAX]). Primes backtrace() when depth > 1, so
 * its one-time loading of libgcc_s does not happen inside a wrapped call. */
void symmpin_callsite_set_depth(int depth);
int symmpin_callsite_depth(void);

/* The stack hash of the current call; ret0 = __builtin_return_address(0) taken in the exported
 * wrapper (the program's call instruction). Never 0. */
uint64_t symmpin_callsite_stack(void *ret0);

/* Hash of given return addresses (the frames the functions above collect): exposed for tests. */
uint64_t symmpin_callsite_hash_frames(void *const *frames, int n);
/* The cached per-address part: hash(module basename, address - module base); exposed for tests. */
uint64_t symmpin_callsite_frame_hash(const void *addr);

#endif
