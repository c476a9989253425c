/* Per-shape choice between symmpin's kernel and NCCL, by measurement (SYMMPIN_CHOOSE=measure).
 *
 * Once a shape is pinned, its first 2 x SYMMPIN_CHOICE_SAMPLES eager calls alternate between
 * symmpin's kernel and NCCL (probes: the odd ones go to NCCL; symmpin_choice_probe). The calls of
 * a shape come in the same order on every rank, so every rank probes the same calls and the
 * routes stay alike. The engine times them with CUDA events and keeps the samples here. At every plan agreement each rank posts its medians with its record; every rank then
 * applies the same rule to the same posts (symmpin_choice_verdict): a shape whose symmpin time is
 * above its NCCL time, both taken from the slowest rank (the one every rank waits for), goes back
 * to NCCL in the next plan, for good (planner/plan.h SYMMPIN_PLAN_NCCL_FASTER). So every rank
 * makes the same choice for the same call, and symmpin keeps only what it wins.
 *
 * Plain C, no CUDA: the engine feeds samples in microseconds; the CPU tests drive it directly. */
#ifndef SYMMPIN_PRELOAD_CHOICE_H
#define SYMMPIN_PRELOAD_CHOICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/plan.h"

/* SYMMPIN_CHOOSE's values, NULL-terminated; the index is the mode. */
typedef enum symmpin_choice_mode { SYMMPIN_CHOOSE_MEASURE = 0, SYMMPIN_CHOOSE_STATIC = 1 } symmpin_choice_mode;
extern const char *const symmpin_choice_mode_names[];

/* Samples kept per shape and path; a verdict needs SYMMPIN_CHOICE_MIN of each on every rank. */
#define SYMMPIN_CHOICE_SAMPLES 16
#define SYMMPIN_CHOICE_MIN 8
/* Shapes a rank tracks (the first ones it sees; later shapes stay on the static choice). */
#define SYMMPIN_CHOICE_SHAPES 64

/* What a rank posts per shape (fixed layout: it travels through the board). */
typedef struct symmpin_choice_entry {
  uint64_t count;
  int32_t dtype, op;
  uint32_t nccl_ns, symmpin_ns; /* medians */
  uint32_t nccl_n, symmpin_n;   /* samples behind them */
} symmpin_choice_entry;

typedef struct symmpin_choice symmpin_choice;

symmpin_choice *symmpin_choice_new(void); /* NULL without memory */
void symmpin_choice_free(symmpin_choice *ch);

/* A pinned eager call of this shape: whether it goes to NCCL as a probe (the 2nd, 4th, ... of the
 * shape's first 2 x SYMMPIN_CHOICE_SAMPLES; none once SYMMPIN_CHOICE_SHAPES shapes are tracked).
 * Counts the call. The same answer on every rank for the same call. */
bool symmpin_choice_probe(symmpin_choice *ch, const symmpin_plan_shape *shape);
/* Whether a call of this shape on this path should be timed (its shape still lacks samples). */
bool symmpin_choice_want(symmpin_choice *ch, const symmpin_plan_shape *shape, bool redirected);
/* One timed call, in microseconds. */
void symmpin_choice_add(symmpin_choice *ch, const symmpin_plan_shape *shape, bool redirected,
                        double us);
/* This rank's medians, shapes with at least one sample on either path; returns how many were
 * written (at most cap). */
size_t symmpin_choice_export(const symmpin_choice *ch, symmpin_choice_entry *out, size_t cap);

/* The shapes to send back to NCCL, from every rank's entries (entries[r], n[r]): a shape that
 * every rank measured on both paths at least SYMMPIN_CHOICE_MIN times, whose slowest symmpin
 * median is above its slowest NCCL median. Written to out (at most cap), in rank 0's order;
 * returns how many. A pure function of its inputs: every rank that reads the same posts gets the
 * same answer. */
size_t symmpin_choice_verdict(const symmpin_choice_entry *const *entries, const size_t *n,
                              int nranks, symmpin_plan_shape *out, size_t cap);

#endif
