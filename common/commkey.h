/* Communicator keys: the 128-bit identity that every rank of one NCCL communicator derives alike,
 * from what all of them share (the ncclUniqueId(s) of the init, or a split's parent key, split
 * counter and color). It names the communicator's board in /dev/shm (symmem/board.h), so two
 * communicators must never get the same key. docs/design.md "Identities" says where each input
 * comes from. Plain C, pure functions: the same bytes give the same key in every process. */
#ifndef SYMMPIN_COMMON_COMMKEY_H
#define SYMMPIN_COMMON_COMMKEY_H

#include <stddef.h>
#include <stdint.h>

typedef struct symmpin_comm_key {
  uint64_t hi, lo;
} symmpin_comm_key;

/* The key of some bytes (the unique ids of an init): two differently seeded 64-bit hashes with a
 * full avalanche per word, so ids that differ anywhere give unrelated keys. */
symmpin_comm_key symmpin_comm_key_of_bytes(const void *p, size_t n);

/* The key of a communicator split from `parent`: its split counter (how many ncclCommSplit calls
 * the parent saw before this one, the same on every rank) and the color. Differs from the parent,
 * and from every other (counter, color). */
symmpin_comm_key symmpin_comm_key_split(symmpin_comm_key parent, uint64_t counter, int64_t color);

#endif
