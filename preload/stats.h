/* Statistics per communicator (ordinal, rank) and per call site: calls, bytes, redirected vs NCCL
 * with counts per reason, the site's slot, and the communicator's pool figures. SYMMPIN_STATS=1
 * prints a table at exit where the log goes (stderr or SYMMPIN_DEBUG_FILE); SYMMPIN_STATS_FILE writes JSON. A communicator's statistics
 * outlive it (they are printed at exit). Thread-safe: one lock per communicator. */
#ifndef SYMMPIN_PRELOAD_STATS_H
#define SYMMPIN_PRELOAD_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/types.h"
#include "planner/site.h"
#include "preload/comm.h"
#include "preload/reason.h"

typedef struct symmpin_stats_comm symmpin_stats_comm;

/* Statistics for a new communicator (kept until symmpin_stats_reset). NULL if out of memory. */
symmpin_stats_comm *symmpin_stats_comm_open(int ordinal, int rank, int nranks, int device);
/* Rank and size learned later (splits, non-blocking inits). */
void symmpin_stats_comm_set_rank(symmpin_stats_comm *sc, int rank, int nranks);

/* symmpin passes the communicator through for good, and why (a static string): printed with it
 * (SYMMPIN_STATS) and written as "nccl_only" (SYMMPIN_STATS_FILE). */
void symmpin_stats_comm_set_nccl_only(symmpin_stats_comm *sc, const char *why);

/* One collective call at `site` (coll: common/types.h): taken by symmpin (reason ==
 * SYMMPIN_REASON_NONE) or by NCCL. */
void symmpin_stats_record(symmpin_stats_comm *sc, uint64_t site, int coll, uint64_t count,
                          int dtype, int op, symmpin_reason reason);
/* The same, with where the site is in the program (NULL or unknown: not known). The first known
 * location of a site is copied and kept (the strings need not outlive the call). */
void symmpin_stats_record_at(symmpin_stats_comm *sc, uint64_t site, const symmpin_site_where *where,
                             int coll, uint64_t count, int dtype, int op, symmpin_reason reason);

/* One timed call at `site` (the engine's sampled CUDA-event timing, SYMMPIN_MEASURE): `us` on
 * symmpin's kernel (redirected) or on NCCL. */
void symmpin_stats_record_time(symmpin_stats_comm *sc, uint64_t site, bool redirected, double us);

/* Whether the engine should time the next call at `site` on this path: each site's first
 * SYMMPIN_STATS_TIMED_FIRST calls on each path, then one in SYMMPIN_STATS_TIMED_EVERY of its
 * calls, so every site busy enough to matter is timed both ways (a rule on the communicator's
 * call count would miss sites whose calls fall between samples). False without statistics. */
#define SYMMPIN_STATS_TIMED_FIRST 8
#define SYMMPIN_STATS_TIMED_EVERY 16
#define SYMMPIN_STATS_TIMED_KEEP 32
bool symmpin_stats_want_timing(symmpin_stats_comm *sc, uint64_t site, bool redirected);

/* For the engine, after a plan: the slot a site is pinned to... */
void symmpin_stats_set_slot(symmpin_comm *c, uint64_t site, uint64_t offset, uint64_t bytes);
/* ...and the pool: sites planned, the bytes a dedicated (one slot per site) plan would need, the
 * lower bound any plan needs (the largest set of sites live at once), and the pool's size. */
void symmpin_stats_set_pool(symmpin_comm *c, uint32_t planned_sites, uint64_t dedicated_bytes,
                            uint64_t lower_bound_bytes, uint64_t pool_bytes);
/* ...and, for the capture arena (inside the pool), its size and the bytes captured calls took. */
void symmpin_stats_set_capture(symmpin_comm *c, uint64_t arena_bytes, uint64_t used_bytes);

/* Per-site numbers, as printed (for tests). false if the site was never seen. */
typedef struct symmpin_stats_site_view {
  uint64_t count;
  int dtype, op;
  int coll;
  uint64_t calls, bytes, redirected, nccl;
  uint64_t reasons[SYMMPIN_REASON_COUNT];
  bool has_slot;
  uint64_t slot_offset, slot_bytes;
  symmpin_site_where where; /* unknown if never given; strings valid until symmpin_stats_reset */
  /* SYMMPIN_MEASURE samples, [0] on NCCL and [1] on symmpin: how many were taken, and the latest
   * SYMMPIN_STATS_TIMED_KEEP of them in microseconds (a ring; sample i is at i % KEEP). */
  uint64_t timed[2];
  float sample_us[2][SYMMPIN_STATS_TIMED_KEEP];
} symmpin_stats_site_view;
bool symmpin_stats_site_get(symmpin_stats_comm *sc, uint64_t site, symmpin_stats_site_view *out);

/* The median and the least of a site's kept samples on one path (0 NCCL, 1 symmpin), or a
 * negative number if none. An event pair around an eager call also spans what is not the call's
 * own cost: waiting for a late peer, NCCL's first call connecting the peers (hundreds of
 * milliseconds). That waiting is one-sided and costs the same on either path, so the least sample
 * is the estimate of what the path itself costs (what `symmpin run` compares); the median is the
 * typical call as the program saw it. */
double symmpin_stats_median_us(const symmpin_stats_site_view *v, int path);
double symmpin_stats_least_us(const symmpin_stats_site_view *v, int path);

/* The readable table (SYMMPIN_STATS) and the JSON document (SYMMPIN_STATS_FILE). */
void symmpin_stats_print(FILE *f);
void symmpin_stats_write_json(FILE *f);

/* Drop every communicator's statistics. Tests only. */
void symmpin_stats_reset(void);

#endif
