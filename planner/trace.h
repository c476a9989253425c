/* The trace: one line-oriented text file per rank (per process, when one process drives several
 * ranks), every wrapped call one event. Specified in docs/trace-format.md; this is its C form.
 *
 * Writing is buffered (one write(2) per SYMMPIN_TRACE_BUFFER bytes or at close) and thread-safe:
 * concurrent writers fill one buffer under a short lock. Reading parses a whole file into memory;
 * unknown keys are skipped and unknown calls kept as SYMMPIN_TRACE_UNKNOWN, so newer traces
 * still load in older readers of the same major version. */
#ifndef SYMMPIN_PLANNER_TRACE_H
#define SYMMPIN_PLANNER_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/types.h"
#include "planner/site.h"

/* 2: ncclAllGather and ncclReduceScatter events. A reader of version 2 reads version 1 traces
 * (which have none of them) as they were; SYMMPIN_TRACE_VERSION_MIN is the oldest it takes. */
#define SYMMPIN_TRACE_VERSION 2
#define SYMMPIN_TRACE_VERSION_MIN 1
#define SYMMPIN_TRACE_BUFFER (64u * 1024u) /* the writer's buffer: one write(2) per full buffer */
#define SYMMPIN_TRACE_LINE_MAX 1024u       /* longest event line the writer produces */
#define SYMMPIN_TRACE_WHERE_MAX 2048u      /* longest "#where=" line the writer produces */

/* What a trace may hold. The reader refuses a file past any of these with one WARN naming the
 * line and the value (SYMMPIN_ERR_INVALID): every size the replay allocates by comes from here,
 * and a few forged bytes must never make it allocate gigabytes. Traces the library writes stay
 * far below; a longer one than the reader takes is cut (its head holds the warm-up and the first
 * epochs, which is what the replay needs). */
#define SYMMPIN_TRACE_MAX_FILE_BYTES (2ull << 30) /* the text, read whole */
#define SYMMPIN_TRACE_MAX_EVENTS (1u << 24)       /* event lines (216 bytes each in memory) */
#define SYMMPIN_TRACE_MAX_WHERES (1u << 20)       /* "#where=" lines: one per call stack */
#define SYMMPIN_TRACE_MAX_RANKS (1 << 16)         /* nranks of any event; rank below it */
#define SYMMPIN_TRACE_MAX_STREAM_ORD 32767        /* a stream ordinal (the call record's int16) */
#define SYMMPIN_TRACE_MAX_COUNT (1ull << 48)      /* NCCL's count of one collective */

typedef enum symmpin_trace_call {
  SYMMPIN_TRACE_UNKNOWN = 0,
  SYMMPIN_TRACE_CUDA_MALLOC,
  SYMMPIN_TRACE_CUDA_FREE,
  SYMMPIN_TRACE_CUDA_MALLOC_ASYNC,
  SYMMPIN_TRACE_CUDA_FREE_ASYNC,
  SYMMPIN_TRACE_NCCL_MEM_ALLOC,
  SYMMPIN_TRACE_NCCL_MEM_FREE,
  SYMMPIN_TRACE_COMM_INIT_RANK,
  SYMMPIN_TRACE_COMM_INIT_RANK_CONFIG,
  SYMMPIN_TRACE_COMM_INIT_RANK_SCALABLE,
  SYMMPIN_TRACE_COMM_INIT_ALL,
  SYMMPIN_TRACE_COMM_SPLIT,
  SYMMPIN_TRACE_COMM_DESTROY,
  SYMMPIN_TRACE_COMM_ABORT,
  SYMMPIN_TRACE_COMM_FINALIZE,
  SYMMPIN_TRACE_GROUP_START,
  SYMMPIN_TRACE_GROUP_END,
  SYMMPIN_TRACE_ALL_REDUCE,
  SYMMPIN_TRACE_COMM_SHRINK, /* NCCL 2.27+ */
  SYMMPIN_TRACE_COMM_REVOKE, /* NCCL 2.28.7+ */
  SYMMPIN_TRACE_COMM_GROW,   /* NCCL 2.29+ */
  SYMMPIN_TRACE_COMM_SUSPEND,
  SYMMPIN_TRACE_COMM_RESUME,
  SYMMPIN_TRACE_ALL_GATHER,     /* trace version 2 */
  SYMMPIN_TRACE_REDUCE_SCATTER, /* trace version 2 */
  SYMMPIN_TRACE_CALL_COUNT,
} symmpin_trace_call;

/* The collective of a collective's event (common/types.h's SYMMPIN_COLLS), -1 for other calls. */
int symmpin_trace_call_coll(symmpin_trace_call c);
/* The event of a collective, SYMMPIN_TRACE_UNKNOWN for a value outside the list. */
symmpin_trace_call symmpin_trace_coll_call(int coll);

/* The call's name as written in traces ("cudaMalloc", "ncclAllReduce", ...). */
const char *symmpin_trace_call_name(symmpin_trace_call c);
symmpin_trace_call symmpin_trace_call_from_name(const char *name);

/* Where an all-reduce's path went (see preload's fallback reasons). */
typedef enum symmpin_trace_path {
  SYMMPIN_PATH_NCCL = 0,
  SYMMPIN_PATH_SYMMPIN = 1,
} symmpin_trace_path;

/* One event. Fields not used by a call are not written; a reader leaves them at their defaults:
 * comm, device, rank, parent and stream_ord -1, everything else 0 (docs/trace-format.md). */
typedef struct symmpin_trace_event {
  uint64_t seq;   /* per file, from 1 */
  uint64_t t_ns;  /* monotonic ns since the trace started */
  uint64_t tid;   /* kernel thread id */
  symmpin_trace_call call;
  int rc;         /* the call's return code (cudaError_t / ncclResult_t) */
  int device;     /* CUDA device current at the call (-1 unknown) */

  /* allocations */
  uint64_t ptr, size, alloc; /* alloc: allocation id from the allocation map */
  uint64_t stack;            /* stack hash of the call */
  uint64_t stream;           /* raw stream handle (for display only: differs between ranks) */

  /* communicators: comm = the communicator ordinal (docs/design.md), the same on every rank */
  int comm;                  /* -1 = none */
  uint64_t key_hi, key_lo;
  int rank, nranks;          /* comm-init events; all-reduce events too (the caller's rank) */
  int color;                 /* ncclCommSplit only */
  int parent;                /* ncclCommSplit: parent's ordinal */

  /* groups */
  int depth;                 /* group depth of this thread after the call */

  /* collectives (all-reduce, all-gather, reduce-scatter: symmpin_trace_call_coll) */
  uint64_t site;
  uint64_t count;                /* NCCL's count argument (common/types.h) */
  int dtype, op;                 /* op: not written for an all-gather (read as 0) */
  uint64_t send_alloc, send_off; /* allocation id (0 = not in a known allocation) and offset */
  uint64_t recv_alloc, recv_off;
  uint64_t send_ptr, recv_ptr;   /* raw addresses (for display only) */
  int stream_ord;                /* stream ordinal within the communicator */
  int capturing;                 /* the stream was capturing a CUDA graph */
  int path;                      /* symmpin_trace_path */
  int reason;                    /* why NCCL (preload's reason code), 0 when redirected */
} symmpin_trace_event;

/* Facts written once at the top of a file. */
typedef struct symmpin_trace_header {
  int version;
  char host[64];
  int pid;
  int rank;                 /* the rank of the process's first communicator; -1 if none */
  char program[256];        /* argv[0] basename */
  uint64_t start_unix_ns;
} symmpin_trace_header;

/* Where the caller frame of a stack is (docs/trace-format.md, "#where=" lines): written once per
 * stack hash that an all-reduce used, so that sites can be shown as places in the program. */
typedef struct symmpin_trace_where {
  uint64_t stack;            /* the stack hash of the all-reduce events it describes */
  symmpin_site_where where;  /* in a file read back: strings owned by the symmpin_trace_file */
} symmpin_trace_where;

/* --- writing --- */
typedef struct symmpin_trace_writer symmpin_trace_writer;
symmpin_status symmpin_trace_writer_open(const char *path, const symmpin_trace_header *h,
                                         symmpin_trace_writer **out);
/* Assigns ev->seq and writes the event; never allocates on this path. */
symmpin_status symmpin_trace_writer_add(symmpin_trace_writer *w, symmpin_trace_event *ev);
/* Writes a "#where=" line for `stack`; nothing when the location is unknown. Never allocates.
 * Whether a stack was already described is the caller's business (preload/tracefile.c). */
symmpin_status symmpin_trace_writer_add_where(symmpin_trace_writer *w, uint64_t stack,
                                              const symmpin_site_where *where);
symmpin_status symmpin_trace_writer_flush(symmpin_trace_writer *w);
void symmpin_trace_writer_close(symmpin_trace_writer *w);

/* One event as one text line (without newline) into buf; returns the length, or -1 if it does
 * not fit. Exposed for tests and for the writer. */
int symmpin_trace_format_event(const symmpin_trace_event *ev, char *buf, size_t cap);
/* Parse one line (without newline); SYMMPIN_ERR_INVALID on a malformed line. Unknown keys are
 * skipped, an unknown call name gives SYMMPIN_TRACE_UNKNOWN. */
symmpin_status symmpin_trace_parse_event(const char *line, symmpin_trace_event *ev);
/* Whether ev's sizes are within the bounds above (nranks, rank, communicator and parent
 * ordinals, stream ordinal, count); false with what is not in why. */
bool symmpin_trace_event_bounded(const symmpin_trace_event *ev, char *why, size_t cap);
/* The whole "#where=..." line (without newline) into buf: module and symbol percent-encoded, the
 * symbol cut to fit; returns the length, or -1 if unknown or the module alone does not fit. */
int symmpin_trace_format_where(uint64_t stack, const symmpin_site_where *where, char *buf,
                               size_t cap);


/* --- reading --- */
typedef struct symmpin_trace_file {
  symmpin_trace_header header;
  symmpin_trace_event *events;
  size_t nevents;
  size_t skipped;           /* malformed lines dropped (a truncated last line counts here) */
  symmpin_trace_where *wheres; /* from "#where=" lines, sorted by stack, one per stack (the last
                                * line wins); none in traces written before they existed */
  size_t nwheres;
  char path[512];
} symmpin_trace_file;

/* SYMMPIN_ERR_IO: unreadable; SYMMPIN_ERR_INVALID: no "#symmpin-trace" first line, or past a bound
 * above (the WARN says which); SYMMPIN_ERR_UNSUPPORTED: a newer major version. Malformed event
 * lines are skipped and counted. */
symmpin_status symmpin_trace_read(const char *path, symmpin_trace_file *out);
void symmpin_trace_file_free(symmpin_trace_file *f);
/* The location the file gives for a stack hash, or NULL. */
const symmpin_site_where *symmpin_trace_file_where(const symmpin_trace_file *f, uint64_t stack);

#endif
