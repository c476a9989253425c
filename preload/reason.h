/* Why a collective call went to NCCL: the engine's answer, counted per site in the statistics and
 * written in traces. Plain C, apart from the engine so that statistics need no GPU side. */
#ifndef SYMMPIN_PRELOAD_REASON_H
#define SYMMPIN_PRELOAD_REASON_H

/* Why an all-reduce went to NCCL (counted per site in the stats; written in traces as the number,
 * so values never change: 1 was "disabled", which nothing could produce, and stays unused). */
typedef enum symmpin_reason {
  SYMMPIN_REASON_NONE = 0,      /* redirected */
  SYMMPIN_REASON_WARMUP = 2,    /* still warming up / site not yet planned */
  SYMMPIN_REASON_TOO_LARGE = 3, /* above SYMMPIN_MAX_BYTES */
  SYMMPIN_REASON_TYPE_OP = 4,   /* datatype or op not supported */
  SYMMPIN_REASON_COMM = 5,      /* communicator not eligible (hosts, P2P, unknown) */
  SYMMPIN_REASON_DISAGREE = 6,  /* ranks' records or plans differ for this site */
  SYMMPIN_REASON_CAPTURE = 7,   /* captured into a CUDA graph before its site was planned: symmpin
                                   never plans or allocates during capture */
  SYMMPIN_REASON_STREAM = 8,    /* stream off-plan (safety net) */
  SYMMPIN_REASON_ERROR = 9,     /* an internal failure: logged once, NCCL from then on */
  SYMMPIN_REASON_MEASURED = 10, /* this shape ran faster on NCCL, measured on every rank */
  SYMMPIN_REASON_PROBE = 11,    /* a pinned shape's call (or a probe group's) timed on NCCL to
                                   compare (choice.h) */
  SYMMPIN_REASON_GROUP = 12,    /* inside ncclGroupStart/End, above SYMMPIN_GROUP_MAX_BYTES */
  SYMMPIN_REASON_GROUP_MEASURED = 13, /* inside a group, and this shape's groups ran faster on
                                         NCCL, measured on every rank */
  SYMMPIN_REASON_OFF = 14,            /* a collective the user keeps on NCCL (SYMMPIN_ALLGATHER=0,
                                         SYMMPIN_REDUCESCATTER=0) */
  SYMMPIN_REASON_COUNT = 15,
} symmpin_reason;

const char *symmpin_reason_name(symmpin_reason r);

#endif
