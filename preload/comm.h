/* The communicator registry: what symmpin knows about each NCCL communicator of this process.
 * Keyed by the ncclComm_t handle. Entries are created by the comm-init events, looked up on every
 * all-reduce (read-mostly: lock-free lookups of a fixed-capacity open-addressed table), and
 * released by the comm-end events and at exit. */
#ifndef SYMMPIN_PRELOAD_COMM_H
#define SYMMPIN_PRELOAD_COMM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "symmem/board.h"

#define SYMMPIN_MAX_STREAMS_PER_COMM 64

struct symmpin_engine_comm; /* the engine's per-communicator state (preload/engine.c) */

typedef struct symmpin_comm {
  void *handle;            /* ncclComm_t */
  symmpin_board_key key;   /* identity shared by every rank of the communicator */
  int ordinal;             /* index of key among keys seen by this process (docs/design.md) */
  int rank, nranks;        /* -1 until known (splits and non-blocking inits learn them lazily) */
  int device;              /* CUDA device of this rank */
  bool blocking;           /* false for non-blocking communicators (config.blocking = 0) */
  uint32_t splits;         /* ncclCommSplit calls on this communicator so far (child keys) */
  uint64_t allreduces;     /* all-reduce calls seen on this communicator (call index) */
  pthread_mutex_t lock;    /* guards the fields below and the engine state */
  void *streams[SYMMPIN_MAX_STREAMS_PER_COMM]; /* stream ordinal -> handle, in order of first use */
  int nstreams;
  struct symmpin_engine_comm *engine; /* NULL until the engine attaches state */
} symmpin_comm;

/* Stream ordinal of `stream` on comm c (assigning the next one on first use); -1 when the table
 * is full. Caller holds c->lock. */
int symmpin_comm_stream_ordinal(symmpin_comm *c, void *stream);

/* Lookup by handle; NULL if unknown. Lock-free. */
symmpin_comm *symmpin_comm_find(void *handle);

#endif
