/* Per-shape choice between symmpin's kernel and NCCL, by measurement (SYMMPIN_CHOOSE=measure).
 *
 * Once a shape is pinned, its first 2 x SYMMPIN_CHOICE_SAMPLES eager calls alternate between
 * symmpin's kernel and NCCL (probes: the odd ones go to NCCL; symmpin_choice_probe). The calls of
 * a shape come in the same order on every rank, so every rank probes the same calls and the
 * routes stay alike. The engine times them with CUDA events and keeps the samples here. At every
 * plan agreement each rank posts its medians with its record; every rank then applies the same rule
 * to the same posts (symmpin_choice_verdict): a shape whose symmpin time is above its NCCL time,
 * both taken from the slowest rank (the one every rank waits for), goes back to NCCL in the next
 * plan, for good (planner/plan.h SYMMPIN_PLAN_NCCL_FASTER). So every rank makes the same choice for
 * the same call, and symmpin keeps only what it wins.
 *
 * Groups: NCCL runs a group's calls together at ncclGroupEnd (and symmpin launches its part of
 * them together there too), so NCCL's time for one call of a group cannot be told from the
 * others'. The unit is a whole group (the all-reduces of the communicator between one thread's
 * outermost ncclGroupStart and ncclGroupEnd), timed from its first call to after its end and
 * probed whole: in a probe group every call symmpin would take goes to NCCL. Which groups are
 * probes is decided at a group's first call (symmpin_choice_group_probe), by a count per first
 * shape; what a group is (symmpin_choice_unit: its calls' shapes in call order) is known at its
 * end, and its samples are kept per unit. Both are the same on every rank where every rank groups
 * its calls alike, which the plan knows (planner/plan.h groups_alike; elsewhere grouped calls
 * count as eager ones). Verdict (symmpin_choice_group_verdict): a unit that every rank timed
 * enough both ways, whose slowest symmpin median is above its slowest NCCL median, gives its
 * shapes' grouped calls back to NCCL (their eager calls keep their own verdict).
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
/* Groups: first shapes counted for probes, units tracked (the first ones that end; later ones
 * stay on the static choice), calls of a unit (a longer group is not timed). */
#define SYMMPIN_CHOICE_HEADS 16
#define SYMMPIN_CHOICE_GROUPS 8
#define SYMMPIN_CHOICE_GROUP_CALLS 64

/* What a rank posts per shape (fixed layout: it travels through the board). */
typedef struct symmpin_choice_entry {
  uint64_t count;
  int32_t dtype, op;
  uint32_t nccl_ns, symmpin_ns; /* medians */
  uint32_t nccl_n, symmpin_n;   /* samples behind them */
  int32_t coll, pad;            /* common/types.h's SYMMPIN_COLLS; pad zero */
} symmpin_choice_entry;

/* A group as a unit: its calls' shapes in call order. Fixed layout (it travels in
 * symmpin_choice_group_entry). */
typedef struct symmpin_choice_unit {
  uint64_t sig;    /* hash of ncalls and the shapes, in order */
  uint32_t ncalls; /* above SYMMPIN_CHOICE_GROUP_CALLS: too long to be tracked */
  uint32_t pad;
  symmpin_plan_shape calls[SYMMPIN_CHOICE_GROUP_CALLS];
} symmpin_choice_unit;

/* What a rank posts per unit (fixed layout). */
typedef struct symmpin_choice_group_entry {
  symmpin_choice_unit unit;
  uint32_t nccl_ns, symmpin_ns; /* medians */
  uint32_t nccl_n, symmpin_n;   /* samples behind them */
} symmpin_choice_group_entry;

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

/* ---- groups ---- */

/* A new (empty) unit, and one more call of it. */
void symmpin_choice_unit_init(symmpin_choice_unit *u);
void symmpin_choice_unit_add(symmpin_choice_unit *u, const symmpin_plan_shape *shape);

/* The first call of a group (its shape `first`), once a plan is in force: whether the group is
 * a probe (the 2nd, 4th, ... of the first 2 x SYMMPIN_CHOICE_SAMPLES groups beginning with this
 * shape; none once SYMMPIN_CHOICE_HEADS first shapes are counted). Counts the group. *timed: the
 * group is one of those first 2 x SYMMPIN_CHOICE_SAMPLES (its time is wanted). The same answer
 * on every rank for the same group where the ranks group alike. */
bool symmpin_choice_group_probe(symmpin_choice *ch, const symmpin_plan_shape *first, bool *timed);
/* A group ended: whether its time on this path is wanted (its unit still lacks samples). Tracks
 * the unit, if there is room. */
bool symmpin_choice_group_want(symmpin_choice *ch, const symmpin_choice_unit *u, bool redirected);
/* One timed group of the unit whose signature is `sig`, in microseconds. */
void symmpin_choice_group_add(symmpin_choice *ch, uint64_t sig, bool redirected, double us);
/* This rank's medians per unit with at least one sample; returns how many (at most cap). */
size_t symmpin_choice_group_export(const symmpin_choice *ch, symmpin_choice_group_entry *out,
                                   size_t cap);
/* The shapes whose grouped calls go back to NCCL, from every rank's unit entries: the distinct
 * shapes of every unit that every rank (with the same calls) measured on both paths at least
 * SYMMPIN_CHOICE_MIN times, whose slowest symmpin median is above its slowest NCCL median; in
 * rank 0's order, at most cap. An entry claiming more than SYMMPIN_CHOICE_GROUP_CALLS calls is
 * ignored (a board is another process's word). A pure function of its inputs. */
size_t symmpin_choice_group_verdict(const symmpin_choice_group_entry *const *entries,
                                    const size_t *n, int nranks, symmpin_plan_shape *out,
                                    size_t cap);

#endif
