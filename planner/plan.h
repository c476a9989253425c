/* Plans: which all-reduce sites of a communicator get a slot in the symmetric pool, and where.
 *
 * A plan is a deterministic function of ALL ranks' call records (planner/record.h): the preload
 * exchanges records over the board and every rank calls symmpin_plan_make() on the same inputs,
 * so the plans are identical by construction; the digest is compared afterwards as a check.
 *
 * Agreement rule: a site is pinned only if every rank's record has it with the same shape and the
 * same calls at the same positions (same index in the record, same stream ordinal). Sites on
 * which ranks differ stay on NCCL; the others are still planned.
 *
 * Epochs: the first plan comes from the warm-up records (prev = NULL). Later plans extend the
 * previous one from records of the calls since it (prev != NULL): sites already in prev keep
 * their decision and offset (offsets never move); sites seen for the first time are decided by
 * the same rule and placed without moving anything. See docs/planner.md. */
#ifndef SYMMPIN_PLANNER_PLAN_H
#define SYMMPIN_PLANNER_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "planner/record.h"
#include "common/types.h"

typedef enum symmpin_plan_mode {
  SYMMPIN_PLAN_SHARED = 0,    /* default: sites that are never in flight together share a slot */
  SYMMPIN_PLAN_DEDICATED = 1, /* each site its own slot */
} symmpin_plan_mode;

/* Why a site is not pinned, or (lookup only) why this call may not use its slot. */
typedef enum symmpin_plan_reason {
  SYMMPIN_PLAN_PINNED = 0,    /* redirect */
  SYMMPIN_PLAN_NOT_ALL_RANKS, /* some rank's record lacks the site */
  SYMMPIN_PLAN_DIFFERS,       /* ranks differ: call positions, counts, shapes or streams */
  SYMMPIN_PLAN_TOO_LARGE,     /* message bytes above max_bytes */
  SYMMPIN_PLAN_UNSUPPORTED,   /* datatype, op or shape the kernels do not handle */
  SYMMPIN_PLAN_NO_STREAM,     /* stream ordinal unknown (the comm's stream table was full) */
  SYMMPIN_PLAN_CONFLICT,      /* a later record showed it in flight with a site sharing its bytes */
  SYMMPIN_PLAN_STREAM_OFF_PLAN, /* lookup: this call's stream is not the one planned */
  SYMMPIN_PLAN_UNPLANNED,       /* lookup: site first seen after the plan */
  SYMMPIN_PLAN_NCCL_FASTER,     /* its shape ran faster on NCCL than on symmpin's kernel, as
                                 * measured on every rank (policy.nccl_faster) */
  /* Lookup only, the rules of a call's kind (symmpin_plan_route_kind; NCCL_FASTER for an eager
   * call of a shape in eager_slow): a grouped call above group_max_bytes, or of a shape whose
   * groups ran faster on NCCL, as measured on every rank (policy.group_nccl_faster). */
  SYMMPIN_PLAN_GROUP_TOO_LARGE,
  SYMMPIN_PLAN_GROUP_NCCL_FASTER,
  SYMMPIN_PLAN_REASON_COUNT,
} symmpin_plan_reason;

const char *symmpin_plan_reason_name(symmpin_plan_reason r);
const char *symmpin_plan_mode_name(symmpin_plan_mode m);
/* The mode names indexed by mode, NULL-terminated: what SYMMPIN_PLANNER and --planner accept. */
extern const char *const symmpin_plan_mode_names[];
/* "shared" / "dedicated" -> mode; -1 if neither. */
int symmpin_plan_mode_from_name(const char *name);

/* Slot bytes for a call shape (coll: common/types.h's SYMMPIN_COLLS; count: NCCL's count
 * argument), a multiple of 256; 0 = unsupported shape. In the library this is the kernels'
 * symmpin_kernel_slot_bytes (staged input). */
typedef size_t (*symmpin_slot_bytes_fn)(int coll, size_t count, int dtype, int nranks, void *ctx);
/* Whether the kernels handle (coll, dtype, op). */
typedef bool (*symmpin_supports_fn)(int coll, int dtype, int op, void *ctx);

/* SYMMPIN_MAX_BYTES when unset, in MiB: above it the one-shot kernels stopped beating NCCL on
 * 2 x H200 (docs/perf-notes.md). One definition for the library's configuration and the replay. */
#define SYMMPIN_PLAN_MAX_BYTES_DEFAULT_MIB 2
#define SYMMPIN_PLAN_MAX_BYTES_DEFAULT ((uint64_t)SYMMPIN_PLAN_MAX_BYTES_DEFAULT_MIB << 20)
/* SYMMPIN_CAPTURE_BYTES when unset, in MiB: the capture arena of the library's plans (and the
 * replay's). */
#define SYMMPIN_PLAN_CAPTURE_BYTES_DEFAULT_MIB 64
#define SYMMPIN_PLAN_CAPTURE_BYTES_DEFAULT ((uint64_t)SYMMPIN_PLAN_CAPTURE_BYTES_DEFAULT_MIB << 20)
/* SYMMPIN_GROUP_MAX_BYTES when unset, in KiB: the largest all-reduce symmpin takes inside
 * ncclGroupStart/End. On 2 x H200 the one-shot kernels win clearly up to 256 KiB (0.62-0.68 x
 * NCCL) and only tie from 1 MiB (0.86-0.99 x), and a group's large calls run one after another
 * in symmpin's group launch where NCCL spreads them over its channels (docs/perf-notes.md):
 * above this, grouped calls stay on NCCL until a two-GPU run shows otherwise. */
#define SYMMPIN_PLAN_GROUP_MAX_BYTES_DEFAULT_KIB 512
#define SYMMPIN_PLAN_GROUP_MAX_BYTES_DEFAULT                                                       \
  ((uint64_t)SYMMPIN_PLAN_GROUP_MAX_BYTES_DEFAULT_KIB << 10)
/* Slot offsets and sizes in the library's plans (the kernels' slots are multiples of it). */
#define SYMMPIN_PLAN_ALIGNMENT 256

/* What plans need from the kernels, bound by the caller (planner/ cannot include kernels/): the
 * engine and symmpin-replay pass the SAME binding (agree/agree.h's symmpin_agree_kernels), so
 * they size and separate slots alike. */
typedef struct symmpin_plan_kernels {
  symmpin_slot_bytes_fn slot_bytes;
  symmpin_supports_fn supports;
  void *ctx; /* for the two above */
  /* The slot class of a call shape: calls whose classes differ never share slot bytes
   * (planner/record.h folds it with the stream into the planner's sharing class). */
  int (*slot_class)(int coll, size_t count, int dtype, int nranks);
  int nclasses;
  const char *(*class_name)(int klass); /* for reports ("LL", "copy", ...) */
} symmpin_plan_kernels;

/* A call shape: the collective (common/types.h), NCCL's count, datatype and op (all-gathers: 0). */
typedef struct symmpin_plan_shape {
  uint64_t count;
  int dtype, op;
  int coll;
  int pad; /* zero (initializers leave it so): shapes are compared byte for byte (agree/choice.c) */
} symmpin_plan_shape;

typedef struct symmpin_plan_policy {
  symmpin_plan_mode mode;
  uint64_t max_bytes;             /* SYMMPIN_MAX_BYTES: larger messages stay on NCCL; 0 = no limit */
  uint64_t alignment;             /* slot offsets and sizes; a power of two; 0 = 256 */
  symmpin_slot_bytes_fn slot_bytes;
  symmpin_supports_fn supports;   /* may be NULL: every datatype and op of common/types.h */
  void *ctx;                      /* passed to both callbacks */
  int nranks;                     /* records[] has this many entries, records[r] is rank r's */
  /* Bytes of the capture arena (docs/design.md "Capture"): slots for all-reduces captured into
   * CUDA graphs, handed out at capture time without any agreement. Placed once, by the first
   * plan made with a nonzero value, after that plan's slots; kept by every later plan. 0 = none. */
  uint64_t capture_bytes;
  /* Shapes measured faster on NCCL than on symmpin's kernel (by the slowest rank's numbers,
   * agree/agree.c): their pinned sites are demoted (their bytes stay reserved: calls issued
   * before may still run) and no site of theirs is pinned again, in this plan and every later
   * one (a demotion is final). May be NULL; the same on every rank. */
  const symmpin_plan_shape *nccl_faster;
  size_t n_nccl_faster;
  /* Groups (docs/design.md "Groups"), where every rank groups its calls alike (groups_alike):
   * calls made inside ncclGroupStart/End above group_max_bytes (0 = no such limit) go to NCCL;
   * shapes whose groups were measured faster on NCCL send their grouped calls to NCCL, in this
   * plan and every later one, and keep their eager calls where they were. A shape measured
   * faster on NCCL in eager calls (nccl_faster) that the records show in groups keeps its sites
   * for its grouped calls; only where both uses lost, or the ranks group differently, are its
   * sites demoted. Both lists may be NULL; all of it the same on every rank. */
  uint64_t group_max_bytes;
  const symmpin_plan_shape *group_nccl_faster;
  size_t n_group_nccl_faster;
} symmpin_plan_policy;

typedef struct symmpin_plan_site {
  uint64_t site;
  uint64_t count;
  int dtype, op;
  int coll; /* the collective (common/types.h) */
  bool pinned;
  bool grouped;                /* a call of it was made inside a group (some rank's record, some
                                * epoch so far) */
  symmpin_plan_reason reason;  /* SYMMPIN_PLAN_PINNED when pinned */
  uint64_t offset;             /* the slot [offset, offset + slot_bytes) in every rank's pool;
                                * sites sharing bytes share this offset (a slot of their max size) */
  uint64_t slot_bytes;         /* what the kernels asked for, rounded up to the alignment; 0 if
                                * never placed */
  int stream_ord;              /* the stream ordinal it was planned on (its first call's) */
  uint32_t epoch;              /* the plan epoch that decided it (0 = warm-up plan) */
  uint64_t calls;              /* calls in rank 0's record of that epoch */
} symmpin_plan_site;

typedef struct symmpin_plan_index symmpin_plan_index; /* opaque: the O(1) lookup table */

typedef struct symmpin_plan {
  int comm, nranks;
  uint32_t epoch;               /* 0 for the first plan, +1 per extension */
  symmpin_plan_mode mode;
  uint64_t alignment;
  uint64_t pool_bytes;          /* the pool this plan needs, arena included (never shrinks) */
  uint64_t dedicated_bytes;     /* sum of pinned sites' slot bytes */
  uint64_t lower_bound_bytes;   /* most slot bytes that can be in flight at once (docs/planner.md) */
  uint64_t capture_offset;      /* the capture arena [capture_offset, + capture_bytes) of every */
  uint64_t capture_bytes;       /* rank's pool (inside pool_bytes); 0 bytes = no arena */
  uint64_t digest;              /* of every site's decision, offset, size and stream, the arena,
                                 * the pool and the group rules */
  bool same_sequence;           /* this epoch's records were identical on every rank */
  /* Every rank grouped its calls alike in every epoch's records so far (the same calls inside
   * ncclGroupStart/End, in the same groups): only then does a call's being in a group, a
   * rank-local fact, change its route (symmpin_plan_route_kind). */
  bool groups_alike;
  uint64_t group_max_bytes; /* policy.group_max_bytes (0 = none) */
  /* Shapes whose calls of one kind go to NCCL while their sites stay pinned for the other kind
   * (measured, final): eager calls (eager_slow), calls in groups (group_slow). */
  symmpin_plan_shape *eager_slow, *group_slow;
  size_t n_eager_slow, n_group_slow;
  size_t nsites, npinned;
  size_t nnew;                  /* sites first decided by this epoch (the last nnew of sites[]) */
  symmpin_plan_site *sites;     /* earlier epochs' sites first, then new ones in order of first
                                 * appearance (rank 0's record first, then rank 1's, ...) */
  symmpin_plan_index *index;
} symmpin_plan;

/* Make the first plan (prev == NULL) or extend prev with the calls since it. records[r] is rank
 * r's record; every rank must pass the same records in the same order. The result is a new plan
 * (prev is left untouched, so readers of prev may keep using it until they switch). */
symmpin_status symmpin_plan_make(const symmpin_record *const *records,
                                 const symmpin_plan_policy *policy, const symmpin_plan *prev,
                                 symmpin_plan **out);
void symmpin_plan_free(symmpin_plan *p);

/* O(1): the site's entry, or NULL if the plan has not seen it. */
const symmpin_plan_site *symmpin_plan_find(const symmpin_plan *p, uint64_t site);

/* Routing is by shape, not by site: a call goes to the slot of one pinned site of its exact
 * shape (collective, count, datatype, op), whichever site it came from: the one pinned by the
 * earliest epoch, then the smallest id (so a later epoch never moves a shape to another slot); NULL
 * if no pinned site has that shape. The plan is the same on every rank and so is a call's shape
 * (NCCL requires it), so every rank routes a call alike even when the ranks reach it from different
 * sites, or from a site that is new on one rank (data-dependent control flow): which site a call
 * comes from is a rank-local fact (docs/design.md "Routing"). O(1). */
const symmpin_plan_site *symmpin_plan_for_shape(const symmpin_plan *p, int coll, uint64_t count,
                                                int dtype, int op);

/* Whether this shape was measured faster on NCCL (a site of it has SYMMPIN_PLAN_NCCL_FASTER). O(1). */
bool symmpin_plan_shape_nccl_faster(const symmpin_plan *p, int coll, uint64_t count, int dtype,
                                    int op);
/* Whether the calls of this shape of one kind (grouped: made inside ncclGroupStart/End) go to
 * NCCL for a measurement: its sites demoted, or the kind's list (eager_slow, group_slow). O(1). */
bool symmpin_plan_kind_nccl_faster(const symmpin_plan *p, int coll, uint64_t count, int dtype,
                                   int op, bool grouped);

/* Whether a call of this shape could be pinned (a datatype and op the kernels take, at most
 * max_bytes, a nonzero slot size, not measured faster on NCCL) but no pinned site of p has it: a
 * shape the plan has not caught up with. A pure function of the plan, the policy and the shape, so the same on every rank (the
 * schedule closes a record early for such calls). false when p is NULL. */
bool symmpin_plan_shape_missing(const symmpin_plan *p, const symmpin_plan_policy *pol, int coll,
                                uint64_t count, int dtype, int op);

/* The per-call decision: SYMMPIN_PLAN_PINNED (redirect into *entry's slot, *entry from
 * symmpin_plan_for_shape) or why not. A call on a stream ordinal other than the entry's planned
 * one gives SYMMPIN_PLAN_STREAM_OFF_PLAN: the slot used from two unordered streams would corrupt
 * data (the caller orders it, or sends it to NCCL). With no pinned site of its shape the reason is
 * the one the plan gave `site` (for reports), or SYMMPIN_PLAN_UNPLANNED; *entry (may be NULL) is
 * then NULL. */
symmpin_plan_reason symmpin_plan_route(const symmpin_plan *p, uint64_t site, int coll,
                                       uint64_t count, int dtype, int op, int stream_ord,
                                       const symmpin_plan_site **entry);

/* The rules of a call's kind, for a call whose shape is pinned: SYMMPIN_PLAN_PINNED (it may take
 * its shape's slot) or why not. An eager call: SYMMPIN_PLAN_NCCL_FASTER where its shape's eager
 * calls were measured faster on NCCL (eager_slow). A call made inside ncclGroupStart/End
 * (grouped), where the ranks group alike: SYMMPIN_PLAN_GROUP_TOO_LARGE above group_max_bytes,
 * SYMMPIN_PLAN_GROUP_NCCL_FASTER where its shape's groups were measured faster on NCCL
 * (group_slow); where they do not, a grouped call is an eager one (its being in a group is the
 * rank's own fact). O(1). */
symmpin_plan_reason symmpin_plan_route_kind(const symmpin_plan *p, int coll, uint64_t count,
                                            int dtype, int op, bool grouped);

#endif
