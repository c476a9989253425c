/* Passing file descriptors between the processes of one job, for the pool's memory handles
 * (symmem/pool.c exports each chunk as a POSIX file descriptor: cuMemExportToShareableHandle).
 *
 * A process offers an fd under a random 64-bit token; a peer process that read the token (and
 * the offering process's token, which names its socket) from the communicator's board fetches a
 * duplicate of the fd. Each offering process serves fetches from one thread, started at its first
 * offer, on a Unix socket in the abstract namespace named after its process token and euid. The
 * thread answers at any time, whatever the process's other threads are doing, so a fetch never
 * waits for the peer to reach some step (a thread driving several ranks never waits on itself).
 *
 * Trust: the socket name is visible to every process of the network namespace; the server answers
 * only clients of its own euid (SO_PEERCRED), the client accepts an fd only from a server of its
 * own euid, and a fetch needs the token, which only the 0600 board holds. A client gets at most a
 * duplicate of an fd that was offered; nothing else in the process can be reached.
 *
 * Fork: the child gets a new process token and no server (threads do not survive fork); the
 * parent's offers stay the parent's. Thread-safe. */
#ifndef SYMMPIN_SYMMEM_FDPASS_H
#define SYMMPIN_SYMMEM_FDPASS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/types.h"

/* Random per process (never 0), new in a forked child: with the pid, "same process" even across
 * pid namespaces, and the name of the process's socket. */
uint64_t symmpin_fdpass_process_token(void);

/* Offer a duplicate of fd (the caller keeps its own) and `handle` (an opaque value for fetches
 * from this process: symmpin_fdpass_with_local), under a new token written to *token. Starts
 * the server at the first offer. SYMMPIN_ERR_IO if the socket or thread cannot be made. */
symmpin_status symmpin_fdpass_offer(int fd, uint64_t handle, uint64_t *token);
/* End an offer: fetches of the token fail from now on; its duplicate fd is closed. No-op for an
 * unknown token. */
void symmpin_fdpass_withdraw(uint64_t token);

/* A duplicate of the fd that process `proc_token` offered under `token`, in *fd (the caller closes
 * it). Waits at most timeout_ms for the server. SYMMPIN_ERR_DISAGREE: no such offer (withdrawn,
 * or a token that was never offered: the record that named it is not the peer's current one); SYMMPIN_ERR_INVALID: the server is not of this euid;
 * SYMMPIN_ERR_IO: no server answers under that name (the process ended, or is in another network
 * namespace) or the exchange failed. Logs nothing: the caller says what it was for. */
symmpin_status symmpin_fdpass_fetch(uint64_t proc_token, uint64_t token, unsigned timeout_ms,
                                    int *fd);

/* For an offer of this process: runs fn(handle, arg) while the offer cannot be withdrawn (a
 * withdraw waits until fn returns), and returns fn's status; SYMMPIN_ERR_DISAGREE without
 * calling fn when there is no such offer. fn must not call into this module. */
symmpin_status symmpin_fdpass_with_local(uint64_t token,
                                         symmpin_status (*fn)(uint64_t handle, void *arg),
                                         void *arg);

/* Offers held now (tests: every offer is withdrawn when its chunk is released). */
int symmpin_fdpass_offers(void);

#endif
