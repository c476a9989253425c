/* File descriptors to peer processes (fdpass.h): one server thread per process on a SEQPACKET
 * Unix socket in the abstract namespace, answering "the fd offered under token T" with the fd
 * itself (SCM_RIGHTS), or a refusal. One request per connection; the server never blocks for
 * long on one client (send and receive time out), so one slow or hostile client cannot stop it. */
#include "symmem/fdpass.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define FDPASS_MAGIC 0x53464431u /* "SFD1" */
#define SERVE_IO_MS 200          /* the server's send/receive limit per client */

typedef struct fd_request {
  uint32_t magic, pad;
  uint64_t token;
} fd_request;

typedef struct fd_reply {
  uint32_t magic;
  int32_t status; /* symmpin_status; the fd comes with SYMMPIN_OK only */
} fd_reply;

typedef struct offer {
  uint64_t token, handle;
  int fd; /* this module's duplicate */
} offer;

/* Under lock: the offers, and the server's state. The server thread holds the lock while it
 * sends an fd, so withdraw() never closes an fd that is being sent. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static offer *offers;
static int noffers, cap_offers;
static int listen_fd = -1;
static _Atomic uint64_t proc_token;

static uint64_t random64(void) {
  uint64_t r = 0;
  if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
        ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&r;
    r ^= r >> 29;
    r *= 0xbf58476d1ce4e5b9ull;
  }
  return r ? r : 1;
}

/* ---- fork ---- */

static void fork_prepare(void) { pthread_mutex_lock(&lock); }
static void fork_parent(void) { pthread_mutex_unlock(&lock); }
/* The child: no server thread, a token of its own, none of the parent's offers (its copies of
 * the parent's duplicates are closed; the parent's own stay open). */
static void fork_child(void) {
  for (int i = 0; i < noffers; i++) close(offers[i].fd);
  noffers = 0;
  if (listen_fd >= 0) close(listen_fd);
  listen_fd = -1;
  atomic_store(&proc_token, 0);
  pthread_mutex_unlock(&lock);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void atfork_install(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

uint64_t symmpin_fdpass_process_token(void) {
  pthread_once(&atfork_once, atfork_install);
  uint64_t t = atomic_load(&proc_token);
  if (t) return t;
  uint64_t r = random64(), expected = 0;
  if (!atomic_compare_exchange_strong(&proc_token, &expected, r)) r = expected;
  return r;
}

/* ---- addresses ---- */

static socklen_t address_of(uint64_t token, struct sockaddr_un *a) {
  memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  /* Abstract namespace (leading NUL): nothing on disk to clean up when the process dies. */
  int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "symmpin-fd-%u-%016llx",
                   (unsigned)geteuid(), (unsigned long long)token);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static void set_io_timeout(int s, unsigned ms) {
  struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
  (void)setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  (void)setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static bool same_user(int s) {
  struct ucred cr;
  socklen_t len = sizeof(cr);
  return getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.uid == geteuid();
}

/* ---- the server ---- */

static int offer_find(uint64_t token) {
  for (int i = 0; i < noffers; i++)
    if (offers[i].token == token) return i;
  return -1;
}

static void serve_one(int c) {
  set_io_timeout(c, SERVE_IO_MS);
  fd_request rq;
  if (!same_user(c) || recv(c, &rq, sizeof(rq), 0) != (ssize_t)sizeof(rq) ||
      rq.magic != FDPASS_MAGIC)
    return;
  fd_reply rp = {.magic = FDPASS_MAGIC, .status = SYMMPIN_ERR_DISAGREE};
  struct iovec iov = {.iov_base = &rp, .iov_len = sizeof(rp)};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctl;
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  pthread_mutex_lock(&lock);
  int i = offer_find(rq.token);
  if (i >= 0) {
    rp.status = SYMMPIN_OK;
    memset(&ctl, 0, sizeof(ctl));
    m.msg_control = ctl.buf;
    m.msg_controllen = sizeof(ctl.buf);
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &offers[i].fd, sizeof(int));
  }
  (void)sendmsg(c, &m, MSG_NOSIGNAL);
  pthread_mutex_unlock(&lock);
}

static void *serve(void *arg) {
  int s = (int)(intptr_t)arg;
  for (;;) {
    int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EBADF || errno == EINVAL || errno == ENOTSOCK) return NULL;
      if (errno != EINTR && errno != ECONNABORTED) {
        struct timespec ts = {0, 10 * 1000 * 1000}; /* EMFILE and the like: let them pass */
        nanosleep(&ts, NULL);
      }
      continue;
    }
    serve_one(c);
    close(c);
  }
}

/* Under lock. */
static symmpin_status server_start(void) {
  if (listen_fd >= 0) return SYMMPIN_OK;
  int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) {
    SYMMPIN_WARN("fdpass: socket(AF_UNIX) failed: %s", strerror(errno));
    return SYMMPIN_ERR_IO;
  }
  struct sockaddr_un a;
  socklen_t alen = address_of(symmpin_fdpass_process_token(), &a);
  if (bind(s, (struct sockaddr *)&a, alen) != 0 || listen(s, 64) != 0) {
    SYMMPIN_WARN("fdpass: cannot listen on @%s: %s", a.sun_path + 1, strerror(errno));
    close(s);
    return SYMMPIN_ERR_IO;
  }
  /* The thread takes no signal meant for the program's own threads. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  int rc = pthread_create(&t, &attr, serve, (void *)(intptr_t)s);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    SYMMPIN_WARN("fdpass: cannot start the server thread: %s", strerror(rc));
    close(s);
    return SYMMPIN_ERR_IO;
  }
  listen_fd = s;
  return SYMMPIN_OK;
}

/* ---- offers ---- */

symmpin_status symmpin_fdpass_offer(int fd, uint64_t handle, uint64_t *token) {
  if (fd < 0 || !token) {
    SYMMPIN_WARN("fdpass_offer: %s", fd < 0 ? "bad fd" : "NULL token");
    return SYMMPIN_ERR_INVALID;
  }
  (void)symmpin_fdpass_process_token();
  int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) {
    SYMMPIN_WARN("fdpass_offer: cannot duplicate fd %d: %s", fd, strerror(errno));
    return SYMMPIN_ERR_IO;
  }
  symmpin_status st = SYMMPIN_OK;
  pthread_mutex_lock(&lock);
  st = server_start();
  if (st == SYMMPIN_OK && noffers == cap_offers) {
    int cap = cap_offers ? 2 * cap_offers : 16;
    offer *o = realloc(offers, (size_t)cap * sizeof(*o));
    if (o) {
      offers = o;
      cap_offers = cap;
    } else {
      SYMMPIN_WARN("fdpass_offer: out of memory for %d offers", cap);
      st = SYMMPIN_ERR_NOMEM;
    }
  }
  if (st == SYMMPIN_OK) {
    uint64_t t;
    do t = random64();
    while (offer_find(t) >= 0);
    offers[noffers++] = (offer){.token = t, .handle = handle, .fd = dup_fd};
    *token = t;
  }
  pthread_mutex_unlock(&lock);
  if (st != SYMMPIN_OK) close(dup_fd);
  return st;
}

void symmpin_fdpass_withdraw(uint64_t token) {
  pthread_mutex_lock(&lock);
  int i = offer_find(token);
  if (i >= 0) {
    close(offers[i].fd);
    offers[i] = offers[--noffers];
  }
  pthread_mutex_unlock(&lock);
}

int symmpin_fdpass_offers(void) {
  pthread_mutex_lock(&lock);
  int n = noffers;
  pthread_mutex_unlock(&lock);
  return n;
}

symmpin_status symmpin_fdpass_with_local(uint64_t token,
                                         symmpin_status (*fn)(uint64_t handle, void *arg),
                                         void *arg) {
  pthread_mutex_lock(&lock);
  int i = offer_find(token);
  symmpin_status st = i >= 0 ? fn(offers[i].handle, arg) : SYMMPIN_ERR_DISAGREE;
  pthread_mutex_unlock(&lock);
  return st;
}

/* ---- fetch ---- */

/* One try: SYMMPIN_ERR_INTERNAL when a signal interrupted it (the caller tries again). */
static symmpin_status fetch_once(uint64_t peer_token, uint64_t token, unsigned timeout_ms, int *fd) {
  int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) return SYMMPIN_ERR_IO;
  set_io_timeout(s, timeout_ms ? timeout_ms : 1);
  symmpin_status st = SYMMPIN_ERR_IO;
  struct sockaddr_un a;
  socklen_t alen = address_of(peer_token, &a);
  if (connect(s, (struct sockaddr *)&a, alen) != 0) goto out;
  if (!same_user(s)) {
    st = SYMMPIN_ERR_INVALID;
    goto out;
  }
  fd_request rq = {.magic = FDPASS_MAGIC, .token = token};
  if (send(s, &rq, sizeof(rq), MSG_NOSIGNAL) != (ssize_t)sizeof(rq)) goto out;
  fd_reply rp;
  struct iovec iov = {.iov_base = &rp, .iov_len = sizeof(rp)};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctl;
  memset(&ctl, 0, sizeof(ctl));
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                     .msg_controllen = sizeof(ctl.buf)};
  ssize_t n = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
  int got = -1;
  for (struct cmsghdr *h = n > 0 ? CMSG_FIRSTHDR(&m) : NULL; h; h = CMSG_NXTHDR(&m, h))
    if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
        h->cmsg_len == CMSG_LEN(sizeof(int)))
      memcpy(&got, CMSG_DATA(h), sizeof(int));
  if (n != (ssize_t)sizeof(rp) || rp.magic != FDPASS_MAGIC || (m.msg_flags & MSG_CTRUNC)) {
    st = SYMMPIN_ERR_IO;
  } else if (rp.status != SYMMPIN_OK) {
    st = rp.status == SYMMPIN_ERR_DISAGREE ? SYMMPIN_ERR_DISAGREE : SYMMPIN_ERR_IO;
  } else if (got >= 0) {
    *fd = got;
    got = -1;
    st = SYMMPIN_OK;
  }
  if (got >= 0) close(got);
out:
  /* Socket calls with a time limit are not restarted after a signal handler, even with
   * SA_RESTART (and connect never is): a program's SIGCHLD must not fail the fetch. */
  if (st == SYMMPIN_ERR_IO && errno == EINTR) st = SYMMPIN_ERR_INTERNAL;
  close(s);
  return st;
}

symmpin_status symmpin_fdpass_fetch(uint64_t peer_token, uint64_t token, unsigned timeout_ms,
                                    int *fd) {
  if (!fd) return SYMMPIN_ERR_INVALID;
  symmpin_status st = SYMMPIN_ERR_IO;
  for (int attempt = 0; attempt < 8; attempt++) {
    errno = 0;
    st = fetch_once(peer_token, token, timeout_ms, fd);
    if (st != SYMMPIN_ERR_INTERNAL) return st;
  }
  return SYMMPIN_ERR_IO;
}
