/* interpose/ tests: the guard, stack hashes and real-symbol lookup in-process; then libsymmpin.so
 * preloaded under small programs that use the FAKE libcudart.so.13 / libnccl.so.2 of tests/fakes
 * (CPU only): calls reach wrapper and fake, results and error codes pass through, re-entrant
 * calls are not recorded, threads with their own communicators are safe, NCCL loaded RTLD_LOCAL is
 * found, missing NCCL fails cleanly; each checked by exit status, output and the trace written. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <link.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interpose/callsite.h"
#include "interpose/guard.h"
#include "interpose/real.h"
#include "planner/trace.h"
#include "child.h"

/* ---- in-process units ---- */

/* Some code of this executable (the module the interpose core is linked into, i.e. "ours"). */
__attribute__((noinline)) static int local_code(int x) { return x * 3 + 1; }

Test(guard, nests_per_thread) {
  cr_assert(!symmpin_guard_active());
  symmpin_guard_enter();
  symmpin_guard_enter();
  cr_assert(symmpin_guard_active());
  symmpin_guard_leave();
  cr_assert(symmpin_guard_active());
  symmpin_guard_leave();
  cr_assert(!symmpin_guard_active());
}

static void *guard_other_thread(void *arg) {
  (void)arg;
  return (void *)(long)symmpin_guard_active();
}

Test(guard, other_threads_unaffected) {
  symmpin_guard_enter();
  pthread_t t;
  void *r;
  pthread_create(&t, NULL, guard_other_thread, NULL);
  pthread_join(t, &r);
  symmpin_guard_leave();
  cr_assert_eq((long)r, 0);
}

Test(callsite, frame_hash_stable_and_distinct) {
  /* Two addresses in libc (another module than this test) and one in this program. */
  const void *a = (const void *)&strlen, *b = (const void *)&memcpy, *c = (const void *)&local_code;
  uint64_t ha = symmpin_callsite_frame_hash(a);
  cr_assert_eq(ha, symmpin_callsite_frame_hash(a), "cached value differs from first value");
  cr_assert_neq(ha, symmpin_callsite_frame_hash(b));
  cr_assert_neq(ha, symmpin_callsite_frame_hash(c));
  cr_assert_neq(ha, 0);
}

Test(callsite, frames_order_and_count_matter) {
  void *f1[2] = {(void *)&strlen, (void *)&memcpy};
  void *f2[2] = {(void *)&memcpy, (void *)&strlen};
  uint64_t h12 = symmpin_callsite_hash_frames(f1, 2), h21 = symmpin_callsite_hash_frames(f2, 2);
  cr_assert_neq(h12, h21);
  cr_assert_neq(h12, symmpin_callsite_hash_frames(f1, 1));
  cr_assert_eq(h12, symmpin_callsite_hash_frames(f1, 2));
}

Test(callsite, frames_in_our_module_are_skipped) {
  /* Everything in this executable counts as "ours" (the interpose core is linked into it), so a
   * stack of [ours, libc] hashes like [libc]. */
  void *with[2] = {(void *)&local_code, (void *)&strlen};
  void *without[1] = {(void *)&strlen};
  cr_assert_eq(symmpin_callsite_hash_frames(with, 2), symmpin_callsite_hash_frames(without, 1));
}

Test(callsite, depth_clamped) {
  symmpin_callsite_set_depth(0);
  cr_assert_eq(symmpin_callsite_depth(), 1);
  symmpin_callsite_set_depth(1000);
  cr_assert_eq(symmpin_callsite_depth(), SYMMPIN_STACK_DEPTH_MAX);
  symmpin_callsite_set_depth(4);
  cr_assert_eq(symmpin_callsite_depth(), 4);
  /* Deeper stacks see more frames: from here the hashes of depth 1 and 4 differ. */
  uint64_t h4 = symmpin_callsite_stack(__builtin_return_address(0));
  symmpin_callsite_set_depth(1);
  uint64_t h1 = symmpin_callsite_stack(__builtin_return_address(0));
  cr_assert_neq(h4, h1);
}

/* The exported function of the fake 'user' library (another module, with a dynamic symbol), its
 * symbol-table entry and the library's load bias. */
typedef struct user_fn {
  const char *addr;
  const ElfW(Sym) *sym;
  uintptr_t bias;
} user_fn;

static user_fn user_lib_fn(void) {
  void *h = dlopen(spawn_path("SYMMPIN_TEST_USERLIB"), RTLD_NOW | RTLD_LOCAL);
  cr_assert_not_null(h, "%s", dlerror());
  user_fn u = {dlsym(h, "fakeuser_run"), NULL, 0};
  cr_assert_not_null(u.addr);
  struct link_map *lm = NULL;
  cr_assert_eq(dlinfo(h, RTLD_DI_LINKMAP, &lm), 0);
  u.bias = (uintptr_t)lm->l_addr;
  Dl_info info;
  cr_assert(dladdr1(u.addr, &info, (void **)&u.sym, RTLD_DL_SYMENT) && u.sym);
  cr_assert_gt(u.sym->st_size, 16, "fakeuser_run is %zu bytes", (size_t)u.sym->st_size);
  return u; /* left loaded: the cache keeps the loader's strings */
}

Test(callsite, where_names_module_offset_and_symbol) {
  user_fn u = user_lib_fn();
  /* A return address 10 bytes into the function: the call instruction ends at +9. */
  symmpin_site_where w;
  cr_assert(symmpin_callsite_frame_where(u.addr + 10, &w));
  char mod[512];
  snprintf(mod, sizeof mod, "%s", w.module);
  cr_assert_str_eq(basename(mod), "libfakeuser.so");
  cr_assert_str_eq(w.module, spawn_path("SYMMPIN_TEST_USERLIB")); /* the path it was loaded by */
  cr_assert_not_null(w.symbol);
  cr_assert_str_eq(w.symbol, "fakeuser_run");
  /* The module's own address of the call (what addr2line takes): symbol value + 9. */
  cr_assert_eq(w.offset, (uint64_t)u.sym->st_value + 9, "offset 0x%" PRIx64, w.offset);
  cr_assert_eq(w.offset, (uint64_t)((uintptr_t)u.addr + 9 - u.bias));
  /* Cached: the same answer, the same strings. */
  symmpin_site_where again;
  cr_assert(symmpin_callsite_frame_where(u.addr + 10, &again));
  cr_assert_eq(again.module, w.module);
  cr_assert_eq(again.offset, w.offset);
  /* A return address just past the function's first byte still names it (the call is at -1). */
  cr_assert(symmpin_callsite_frame_where(u.addr + 1, &again));
  cr_assert_str_eq(again.symbol, "fakeuser_run");
}

Test(callsite, where_is_the_first_frame_outside_libsymmpin) {
  user_fn u = user_lib_fn();
  symmpin_site_where w;
  /* Our own code (this executable stands for libsymmpin) has no location... */
  cr_assert(!symmpin_callsite_frame_where((const char *)&local_code + 1, &w));
  cr_assert_null(w.module);
  /* ...and is skipped: [ours, user, libc] locates the user frame, with the hash unchanged. */
  void *frames[3] = {(char *)&local_code + 1, (void *)(u.addr + 10), (char *)&strtol + 1};
  uint64_t h = symmpin_callsite_hash_frames_where(frames, 3, &w);
  cr_assert_eq(h, symmpin_callsite_hash_frames(frames, 3));
  cr_assert_str_eq(w.symbol, "fakeuser_run");
  cr_assert_eq(w.offset, (uint64_t)u.sym->st_value + 9);
  /* Only ours: no location. */
  symmpin_callsite_hash_frames_where(frames, 1, &w);
  cr_assert(!symmpin_site_where_known(&w));
  /* Depth 1 from a real return address: this test's caller, in Criterion's library. */
  symmpin_callsite_set_depth(1);
  cr_assert_eq(symmpin_callsite_stack_where(__builtin_return_address(0), &w),
               symmpin_callsite_stack(__builtin_return_address(0)));
  cr_assert(symmpin_site_where_known(&w));
  char mod[512];
  snprintf(mod, sizeof mod, "%s", w.module);
  cr_assert(strstr(basename(mod), "criterion"), "%s", w.module);
}

Test(real, lookup_and_ours) {
  cr_assert(symmpin_real_is_ours((const void *)&local_code));
  cr_assert(!symmpin_real_is_ours((const void *)&strlen));
  /* No NCCL in this process: nothing found, no crash. */
  cr_assert_null(symmpin_real_lookup(SYMMPIN_REAL_NCCL, "ncclAllReduce"));
  /* A function that exists further down the search order is found. */
  cr_assert_eq(symmpin_real_lookup(SYMMPIN_REAL_CUDART, "strlen"), dlsym(RTLD_DEFAULT, "strlen"));
  static symmpin_real_sym s = SYMMPIN_REAL_SYM_INIT(SYMMPIN_REAL_NCCL, ncclGroupStart);
  cr_assert_null(symmpin_real_get(&s));
  cr_assert_null(symmpin_real_get(&s)); /* retried, warned once */
}

/* ---- libsymmpin.so under the fake programs ---- */

typedef struct run_ctx {
  char dir[256];
  char trace_env[512];
  spawn_result r;
} run_ctx;

static spawn_result *app(run_ctx *x, const char *scenario, bool preload, const char *e1,
                         const char *e2) {
  spawn_tmpdir(x->dir, sizeof x->dir);
  cr_assert(x->dir[0]);
  snprintf(x->trace_env, sizeof x->trace_env, "SYMMPIN_TRACE=%s/trace.%%r.%%p", x->dir);
  /* Peers of the fake communicators never show up: keep any agreement wait short. */
  const char *env[] = {x->trace_env, "SYMMPIN_TIMEOUT_MS=200", e1, e2, NULL};
  if (!e1) env[2] = NULL;
  else if (!e2) env[3] = NULL;
  char *argv[] = {(char *)spawn_path("SYMMPIN_TEST_APP"), (char *)scenario, NULL};
  cr_assert(spawn_run(argv, env, preload, &x->r));
  return &x->r;
}

static void read_trace(run_ctx *x, symmpin_trace_file *tf) {
  char path[512];
  cr_assert(spawn_find(x->dir, "trace.", path, sizeof path), "no trace file in %s", x->dir);
  cr_assert_eq(symmpin_trace_read(path, tf), SYMMPIN_OK, "cannot read %s", path);
  cr_assert_eq(tf->skipped, 0);
}

static size_t count_calls(const symmpin_trace_file *tf, symmpin_trace_call call) {
  size_t n = 0;
  for (size_t i = 0; i < tf->nevents; i++) n += tf->events[i].call == call;
  return n;
}

/* The i-th event of a kind (NULL if fewer). */
static const symmpin_trace_event *nth(const symmpin_trace_file *tf, symmpin_trace_call call,
                                      size_t i) {
  for (size_t k = 0; k < tf->nevents; k++)
    if (tf->events[k].call == call && i-- == 0) return &tf->events[k];
  return NULL;
}

Test(preloaded, fakes_alone_work, .timeout = 30) {
  run_ctx x;
  spawn_result *r = app(&x, "basic", false, NULL, NULL);
  cr_assert_eq(r->status, 0, "%s", r->out);
  char p[512];
  cr_assert(!spawn_find(x.dir, "trace.", p, sizeof p), "trace without symmpin");
}

Test(preloaded, basic_trace, .timeout = 30) {
  run_ctx x;
  spawn_result *r = app(&x, "basic", true, NULL, NULL);
  cr_assert_eq(r->status, 0, "%s", r->out);
  cr_assert(strstr(r->out, "ok basic"), "%s", r->out);
  symmpin_trace_file tf;
  read_trace(&x, &tf);
  /* Named after the first communicator's rank (1) and the pid. */
  cr_assert(strstr(tf.path, "/trace.1."), "%s", tf.path);
  cr_assert_eq(tf.header.rank, 1);
  cr_assert_eq(count_calls(&tf, SYMMPIN_TRACE_CUDA_MALLOC), 2);
  cr_assert_eq(count_calls(&tf, SYMMPIN_TRACE_CUDA_FREE), 2);
  cr_assert_eq(count_calls(&tf, SYMMPIN_TRACE_CUDA_MALLOC_ASYNC), 1);
  cr_assert_eq(count_calls(&tf, SYMMPIN_TRACE_CUDA_FREE_ASYNC), 1);
  cr_assert_eq(count_calls(&tf, SYMMPIN_TRACE_NCCL_MEM_ALLOC), 1);
  cr_assert_eq(count_calls(&tf, SYMMPIN_TRACE_NCCL_MEM_FREE), 1);
  cr_assert_eq(count_calls(&tf, SYMMPIN_TRACE_ALL_REDUCE), 8);
  cr_assert_eq(count_calls(&tf, SYMMPIN_TRACE_COMM_DESTROY), 2);
  cr_assert_eq(count_calls(&tf, SYMMPIN_TRACE_COMM_FINALIZE), 1);

  const symmpin_trace_event *send_alloc = nth(&tf, SYMMPIN_TRACE_CUDA_MALLOC, 0);
  const symmpin_trace_event *recv_alloc = nth(&tf, SYMMPIN_TRACE_CUDA_MALLOC, 1);
  const symmpin_trace_event *nccl_alloc = nth(&tf, SYMMPIN_TRACE_NCCL_MEM_ALLOC, 0);
  cr_assert_eq(send_alloc->size, 256 * sizeof(float));
  cr_assert_neq(send_alloc->alloc, 0);
  cr_assert_neq(send_alloc->alloc, recv_alloc->alloc);
  cr_assert_neq(send_alloc->stack, recv_alloc->stack); /* two call lines */

  const symmpin_trace_event *init = nth(&tf, SYMMPIN_TRACE_COMM_INIT_RANK, 0);
  cr_assert_eq(init->comm, 0);
  cr_assert_eq(init->rank, 1);
  cr_assert_eq(init->nranks, 2);
  cr_assert_eq(init->rc, 0);

  const symmpin_trace_event *a[8];
  for (int i = 0; i < 8; i++) a[i] = nth(&tf, SYMMPIN_TRACE_ALL_REDUCE, (size_t)i);
  /* Three calls at site_a with one shape: one site, one stack. */
  cr_assert_eq(a[0]->site, a[1]->site);
  cr_assert_eq(a[0]->site, a[2]->site);
  cr_assert_neq(a[0]->site, 0);
  /* site_a with another count: same stack, another site. */
  cr_assert_eq(a[3]->stack, a[0]->stack);
  cr_assert_neq(a[3]->site, a[0]->site);
  /* site_b, same shape as a[0]: another stack, another site. */
  cr_assert_neq(a[4]->stack, a[0]->stack);
  cr_assert_neq(a[4]->site, a[0]->site);
  /* Buffers resolved to allocation + offset. */
  cr_assert_eq(a[0]->send_alloc, send_alloc->alloc);
  cr_assert_eq(a[0]->recv_alloc, recv_alloc->alloc);
  cr_assert_eq(a[0]->send_off, 0);
  cr_assert_eq(a[3]->send_off, 16 * sizeof(float));
  cr_assert_eq(a[3]->recv_off, 32 * sizeof(float));
  cr_assert_eq(a[5]->send_alloc, nccl_alloc->alloc);
  cr_assert_eq(a[5]->recv_alloc, nccl_alloc->alloc);
  /* Streams 0x10 and 0x20: ordinals 0 and 1 in order of first use. */
  cr_assert_eq(a[0]->stream_ord, 0);
  cr_assert_eq(a[3]->stream_ord, 1);
  cr_assert_eq(a[4]->stream_ord, 0);
  cr_assert_eq(a[5]->stream_ord, 1);
  /* Capture flag from cudaStreamGetCaptureInfo. */
  cr_assert_eq(a[4]->capturing, 0);
  cr_assert_eq(a[5]->capturing, 1);
  for (int i = 0; i < 6; i++) {
    cr_assert_eq(a[i]->comm, 0);
    cr_assert_eq(a[i]->count, i == 3 ? 64u : i == 5 ? 8u : 256u);
    cr_assert_eq(a[i]->dtype, 7); /* float32 */
    cr_assert_eq(a[i]->op, 0);    /* sum */
    cr_assert_eq(a[i]->rc, 0);
    cr_assert_eq(a[i]->path, SYMMPIN_PATH_NCCL);
  }
  /* The split: ordinal 1, parent 0, color 3; its all-reduce learned rank/size from NCCL. */
  const symmpin_trace_event *split = nth(&tf, SYMMPIN_TRACE_COMM_SPLIT, 0);
  cr_assert_eq(split->comm, 1);
  cr_assert_eq(split->parent, 0);
  cr_assert_eq(split->color, 3);
  /* a[6]: the call of the simulated group (ncclGroupSimulateEnd), traced like any. */
  cr_assert_eq(a[6]->comm, 0);
  cr_assert_eq(a[6]->count, 8u);
  cr_assert_eq(a[7]->comm, 1);
  cr_assert_eq(a[7]->rank, 1);
  cr_assert_eq(a[7]->nranks, 2);
  /* Group depth after start/end, for the three groups: a plain one, one ended by
   * ncclGroupSimulateEnd, and the one after it. A simulated end that never reached symmpin (its
   * wrapper not exported) left the depth one too high: the last group then read 2 and 1, and
   * symmpin believed every later call of the thread inside a group. */
  cr_assert_eq(count_calls(&tf, SYMMPIN_TRACE_GROUP_START), 3);
  cr_assert_eq(count_calls(&tf, SYMMPIN_TRACE_GROUP_END), 3, "a group end was not seen");
  for (size_t g = 0; g < 3; g++) {
    cr_assert_eq(nth(&tf, SYMMPIN_TRACE_GROUP_START, g)->depth, 1, "group %zu", g);
    cr_assert_eq(nth(&tf, SYMMPIN_TRACE_GROUP_END, g)->depth, 0, "group %zu", g);
  }
  /* The all-reduce after the groups went to NCCL at once and was counted (not held, not lost). */
  cr_assert_eq(a[7]->path, SYMMPIN_PATH_NCCL);
  cr_assert_eq(a[7]->rc, 0);
  /* Frees name the allocation they end. */
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_NCCL_MEM_FREE, 0)->alloc, nccl_alloc->alloc);
  /* Sequence numbers run 1..n. */
  for (size_t i = 0; i < tf.nevents; i++) cr_assert_eq(tf.events[i].seq, i + 1);
  symmpin_trace_file_free(&tf);
}

Test(preloaded, ids_identical_across_runs, .timeout = 60) {
  /* ASLR moves every module between runs; stack hashes and site ids must not move. */
  run_ctx x1, x2;
  cr_assert_eq(app(&x1, "basic", true, NULL, NULL)->status, 0);
  cr_assert_eq(app(&x2, "basic", true, NULL, NULL)->status, 0);
  symmpin_trace_file t1, t2;
  read_trace(&x1, &t1);
  read_trace(&x2, &t2);
  cr_assert_eq(t1.nevents, t2.nevents);
  size_t compared = 0;
  for (size_t i = 0; i < t1.nevents; i++) {
    cr_assert_eq(t1.events[i].call, t2.events[i].call);
    cr_assert_eq(t1.events[i].stack, t2.events[i].stack, "event %zu", i);
    cr_assert_eq(t1.events[i].site, t2.events[i].site, "event %zu", i);
    compared += t1.events[i].site != 0;
  }
  cr_assert_eq(compared, 8);
  symmpin_trace_file_free(&t1);
  symmpin_trace_file_free(&t2);
}

Test(preloaded, disabled_is_pure_passthrough, .timeout = 30) {
  run_ctx x;
  spawn_result *r = app(&x, "basic", true, "SYMMPIN_DISABLE=yes", "SYMMPIN_STATS=1");
  cr_assert_eq(r->status, 0, "%s", r->out);
  char p[512];
  cr_assert(!spawn_find(x.dir, "trace.", p, sizeof p), "SYMMPIN_DISABLE still traced");
  cr_assert_null(strstr(r->out, "symmpin stats"), "%s", r->out);
}

Test(preloaded, errors_pass_through, .timeout = 30) {
  run_ctx x;
  spawn_result *r = app(&x, "errors", true, NULL, NULL);
  cr_assert_eq(r->status, 0, "%s", r->out);
  symmpin_trace_file tf;
  read_trace(&x, &tf);
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_CUDA_MALLOC, 0)->rc, 2); /* cudaErrorMemoryAllocation */
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_CUDA_MALLOC, 0)->alloc, 0);
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_COMM_INIT_RANK, 0)->rc, 2); /* ncclSystemError */
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_COMM_INIT_RANK, 0)->comm, -1);
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_COMM_INIT_RANK, 1)->comm, 0);
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_ALL_REDUCE, 0)->rc, 5); /* ncclInvalidUsage */
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_ALL_REDUCE, 1)->rc, 4); /* ncclInvalidArgument */
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_GROUP_END, 0)->rc, 3);
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_COMM_DESTROY, 0)->rc, 3);
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_COMM_DESTROY, 1)->rc, 0);
  symmpin_trace_file_free(&tf);
}

Test(preloaded, reentrant_calls_not_recorded, .timeout = 30) {
  run_ctx x;
  spawn_result *r = app(&x, "reentrant", true, NULL, NULL);
  cr_assert_eq(r->status, 0, "%s", r->out); /* the fake ran 6 mallocs and 6 frees */
  symmpin_trace_file tf;
  read_trace(&x, &tf);
  cr_assert_eq(count_calls(&tf, SYMMPIN_TRACE_CUDA_MALLOC), 3);
  cr_assert_eq(count_calls(&tf, SYMMPIN_TRACE_CUDA_FREE), 3);
  /* Each recorded free matches a recorded malloc (the inner ones never entered the map). */
  for (int i = 0; i < 3; i++)
    cr_assert_eq(nth(&tf, SYMMPIN_TRACE_CUDA_FREE, (size_t)i)->alloc,
                 nth(&tf, SYMMPIN_TRACE_CUDA_MALLOC, (size_t)i)->alloc);
  symmpin_trace_file_free(&tf);
}

Test(preloaded, threads_with_own_comms, .timeout = 120) {
  run_ctx x;
  spawn_result *r = app(&x, "threads", true, NULL, NULL);
  cr_assert_eq(r->status, 0, "%s", r->out);
  symmpin_trace_file tf;
  read_trace(&x, &tf);
  cr_assert_eq(count_calls(&tf, SYMMPIN_TRACE_ALL_REDUCE), 8 * 2000);
  /* Per thread: one communicator ordinal, one stream ordinal; ordinals differ between threads. */
  uint64_t tids[8] = {0};
  int comm_of[8];
  int nt = 0;
  for (size_t i = 0; i < tf.nevents; i++) {
    const symmpin_trace_event *e = &tf.events[i];
    if (e->call != SYMMPIN_TRACE_ALL_REDUCE) continue;
    int k = 0;
    while (k < nt && tids[k] != e->tid) k++;
    if (k == nt) {
      cr_assert_lt(nt, 8);
      tids[nt] = e->tid;
      comm_of[nt++] = e->comm;
    }
    cr_assert_eq(e->comm, comm_of[k]);
    cr_assert_eq(e->stream_ord, 0);
    cr_assert_eq(e->rc, 0);
    cr_assert_neq(e->send_alloc, 0);
  }
  cr_assert_eq(nt, 8);
  for (int i = 0; i < 8; i++)
    for (int j = i + 1; j < 8; j++) cr_assert_neq(comm_of[i], comm_of[j]);
  symmpin_trace_file_free(&tf);
}

Test(preloaded, nonblocking_rank_learned_lazily, .timeout = 30) {
  run_ctx x;
  spawn_result *r = app(&x, "nonblocking", true, NULL, NULL);
  cr_assert_eq(r->status, 0, "%s", r->out);
  symmpin_trace_file tf;
  read_trace(&x, &tf);
  const symmpin_trace_event *init = nth(&tf, SYMMPIN_TRACE_COMM_INIT_RANK_CONFIG, 0);
  cr_assert_eq(init->rc, 7); /* ncclInProgress */
  cr_assert_eq(init->comm, 0);
  cr_assert_eq(init->rank, 3);
  /* The fake answers ncclInProgress twice: rank unknown for two calls, then 3 of 4. */
  int expect_rank[4] = {-1, -1, 3, 3};
  for (int i = 0; i < 4; i++) {
    const symmpin_trace_event *e = nth(&tf, SYMMPIN_TRACE_ALL_REDUCE, (size_t)i);
    cr_assert_eq(e->comm, 1);
    cr_assert_eq(e->rank, expect_rank[i], "call %d", i);
    cr_assert_eq(e->op, 2); /* max */
  }
  const symmpin_trace_event *nocolor = nth(&tf, SYMMPIN_TRACE_COMM_SPLIT, 1);
  cr_assert_eq(nocolor->comm, -1);
  cr_assert_eq(nocolor->color, -1);
  cr_assert_eq(nocolor->parent, 0);
  symmpin_trace_file_free(&tf);
}

Test(preloaded, init_all_one_ordinal, .timeout = 30) {
  run_ctx x;
  spawn_result *r = app(&x, "initall", true, NULL, NULL);
  cr_assert_eq(r->status, 0, "%s", r->out);
  symmpin_trace_file tf;
  read_trace(&x, &tf);
  int devs[3] = {2, 0, 1};
  for (int i = 0; i < 3; i++) {
    const symmpin_trace_event *e = nth(&tf, SYMMPIN_TRACE_COMM_INIT_ALL, (size_t)i);
    cr_assert_eq(e->comm, 0);
    cr_assert_eq(e->rank, i);
    cr_assert_eq(e->nranks, 3);
    cr_assert_eq(e->device, devs[i]);
    const symmpin_trace_event *a = nth(&tf, SYMMPIN_TRACE_ALL_REDUCE, (size_t)i);
    cr_assert_eq(a->comm, 0);
    cr_assert_eq(a->rank, i);
    cr_assert_eq(a->device, devs[i]);
  }
  cr_assert_eq(nth(&tf, SYMMPIN_TRACE_COMM_INIT_ALL, 0)->key_hi,
               nth(&tf, SYMMPIN_TRACE_COMM_INIT_ALL, 2)->key_hi);
  symmpin_trace_file_free(&tf);
}

Test(preloaded, stats_table_and_json, .timeout = 30) {
  run_ctx x;
  char stats_env[512];
  spawn_tmpdir(x.dir, sizeof x.dir);
  snprintf(stats_env, sizeof stats_env, "SYMMPIN_STATS_FILE=%s/stats.%%r.json", x.dir);
  const char *env[] = {"SYMMPIN_STATS=on", stats_env, NULL};
  char *argv[] = {(char *)spawn_path("SYMMPIN_TEST_APP"), "basic", NULL};
  cr_assert(spawn_run(argv, env, true, &x.r));
  cr_assert_eq(x.r.status, 0, "%s", x.r.out);
  cr_assert(strstr(x.r.out, "symmpin stats: 2 communicator(s)"), "%s", x.r.out);
  char path[512];
  cr_assert(spawn_find(x.dir, "stats.1.json", path, sizeof path));
  FILE *f = fopen(path, "r");
  static char json[65536];
  size_t n = fread(json, 1, sizeof json - 1, f);
  json[n] = '\0';
  fclose(f);
  /* site_a's three calls of 256 floats: 3 calls, 3 KiB, all to NCCL (warm-up, or the stand-in
   * engine), and the reason counted 3 times. */
  cr_assert(strstr(json, "\"count\": 256, \"dtype\": \"f32\", \"op\": \"sum\", \"calls\": 3, "
                         "\"bytes\": 3072, \"redirected\": 0, \"nccl\": 3, \"reasons\": {\""),
            "%s", json);
  cr_assert(strstr(json, "\": 3}"), "%s", json);
  cr_assert(strstr(json, "\"ordinal\": 1, \"rank\": 1, \"nranks\": 2"), "%s", json);
}

Test(preloaded, bad_config_warns_and_runs, .timeout = 30) {
  run_ctx x;
  spawn_result *r = app(&x, "basic", true, "SYMMPIN_WARMUP=lots", "SYMMPIN_DEBUG=INFO");
  cr_assert_eq(r->status, 0, "%s", r->out);
  cr_assert(strstr(r->out, "symmpin WARN"), "%s", r->out);
  cr_assert(strstr(r->out, "SYMMPIN_WARMUP=\"lots\" is not a valid"), "%s", r->out);
  cr_assert(strstr(r->out, "SYMMPIN_DEBUG=INFO"), "%s", r->out);
}

Test(preloaded, nccl_loaded_rtld_local, .timeout = 30) {
  spawn_result r;
  char *argv[] = {(char *)spawn_path("SYMMPIN_TEST_LOADER"), "local",
                  (char *)spawn_path("SYMMPIN_TEST_USERLIB"), NULL};
  const char *env[] = {"SYMMPIN_DEBUG=TRACE", NULL};
  cr_assert(spawn_run(argv, env, true, &r));
  cr_assert_eq(r.status, 0, "%s", r.out);
  cr_assert(strstr(r.out, "rc=0 value=3"), "%s", r.out); /* 1.5 summed over the fake's 2 ranks */
  cr_assert(strstr(r.out, "real ncclAllReduce at"), "%s", r.out);
  cr_assert(strstr(r.out, "via libnccl.so.2 (RTLD_NOLOAD)"), "%s", r.out);
  cr_assert_null(strstr(r.out, "ncclAllReduce at 0x0"), "%s", r.out);
}

/* ---- quiet where there is nothing to do (docs/config.md) ---- */

/* fake_app `scenario` (on the FAKE runtime and NCCL) with every setting that logs, writes a file
 * or starts a thread: the log at INFO, to stderr or (debug_file) to a file, the trace, and the
 * statistics as a table and as JSON, all into x->dir. */
static spawn_result *app_loud(run_ctx *x, const char *scenario, bool preload, bool debug_file) {
  spawn_tmpdir(x->dir, sizeof x->dir);
  cr_assert(x->dir[0]);
  static char trace[512], stats[512], log[512];
  snprintf(trace, sizeof trace, "SYMMPIN_TRACE=%s/trace.%%r.%%p", x->dir);
  snprintf(stats, sizeof stats, "SYMMPIN_STATS_FILE=%s/stats.%%r.%%p.json", x->dir);
  snprintf(log, sizeof log, "SYMMPIN_DEBUG_FILE=%s/log.%%p", x->dir);
  const char *env[] = {"SYMMPIN_DEBUG=INFO",
                       "SYMMPIN_STATS=1",
                       "SYMMPIN_TIMEOUT_MS=200",
                       trace,
                       stats,
                       debug_file ? log : NULL,
                       NULL};
  char *argv[] = {(char *)spawn_path("SYMMPIN_TEST_APP"), (char *)scenario, NULL};
  cr_assert(spawn_run(argv, env, preload, &x->r));
  cr_assert_eq(x->r.status, 0, "%s", x->r.out);
  return &x->r;
}

static int files_in(const char *dir) {
  int n = 0;
  char path[512];
  const char *prefixes[] = {"trace.", "stats.", "log.", NULL};
  for (int i = 0; prefixes[i]; i++) n += spawn_find(dir, prefixes[i], path, sizeof path);
  return n;
}

/* Threads "threads A B" as the program printed them. */
static void threads_of(const spawn_result *r, int *before, int *after) {
  const char *t = strstr(r->out, "threads ");
  cr_assert(t, "%s", r->out);
  cr_assert_eq(sscanf(t, "threads %d %d", before, after), 2, "%s", r->out);
}

Test(preloaded, quiet_without_a_communicator, .timeout = 30) {
  /* The program alone: its own output and threads. */
  run_ctx plain;
  spawn_result *p = app_loud(&plain, "quiet", false, false);
  int b0, a0;
  threads_of(p, &b0, &a0);
  /* Preloaded, with every loud setting: the same output to the byte (no log line), the same
   * threads at the start and at the end (none of symmpin's), and no file. */
  run_ctx x;
  spawn_result *r = app_loud(&x, "quiet", true, false);
  cr_assert_str_eq(r->out, p->out);
  int b, a;
  threads_of(r, &b, &a);
  cr_assert_eq(b, b0);
  cr_assert_eq(a, a0);
  cr_assert_eq(files_in(x.dir), 0, "a file in %s", x.dir);
  /* The log to a file: no file either. */
  run_ctx y;
  r = app_loud(&y, "quiet", true, true);
  cr_assert_str_eq(r->out, p->out);
  cr_assert_eq(files_in(y.dir), 0, "a file in %s", y.dir);
}

Test(preloaded, loud_from_the_first_communicator, .timeout = 30) {
  /* The same program making one communicator: the configuration's lines, the trace, both forms
   * of the statistics and symmpin's watch thread appear (so the quiet test above can fail). */
  run_ctx x;
  spawn_result *r = app_loud(&x, "quiet_comm", true, false);
  cr_assert(strstr(r->out, "symmpin INFO SYMMPIN_DEBUG=INFO"), "%s", r->out);
  cr_assert(strstr(r->out, "symmpin INFO SYMMPIN_STATS=1"), "%s", r->out);
  cr_assert(strstr(r->out, "symmpin stats: 1 communicator(s)"), "%s", r->out);
  /* The configuration comes first, at the communicator (before the banner). */
  cr_assert_lt(strstr(r->out, "SYMMPIN_DEBUG=INFO"), strstr(r->out, ") active; kernels carry"));
  char path[512];
  cr_assert(spawn_find(x.dir, "trace.0.", path, sizeof path), "no trace in %s", x.dir);
  cr_assert(spawn_find(x.dir, "stats.0.", path, sizeof path), "no statistics in %s", x.dir);
  int b, a;
  threads_of(r, &b, &a);
  cr_assert_eq(a, b + 1, "the watch thread: %d then %d threads", b, a);
  /* The log to a file: the file appears, with the lines. */
  run_ctx y;
  r = app_loud(&y, "quiet_comm", true, true);
  cr_assert_null(strstr(r->out, "symmpin INFO"), "%s", r->out);
  cr_assert(spawn_find(y.dir, "log.", path, sizeof path), "no log file in %s", y.dir);
  static char log[65536];
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f);
  size_t n = fread(log, 1, sizeof log - 1, f);
  log[n] = '\0';
  fclose(f);
  cr_assert(strstr(log, "symmpin INFO SYMMPIN_DEBUG=INFO"), "%s", log);
}

Test(preloaded, invalid_value_warned_at_the_first_communicator, .timeout = 30) {
  /* Warned about too, but only once the process has a communicator (docs/config.md). */
  run_ctx x;
  spawn_result *r = app(&x, "quiet", true, "SYMMPIN_WARMUP=lots", NULL);
  cr_assert_null(strstr(r->out, "symmpin"), "%s", r->out);
  r = app(&x, "quiet_comm", true, "SYMMPIN_WARMUP=lots", NULL);
  cr_assert_eq(r->status, 0, "%s", r->out);
  cr_assert(strstr(r->out, "symmpin WARN config.c:"), "%s", r->out);
  cr_assert(strstr(r->out, "SYMMPIN_WARMUP=\"lots\" is not a valid"), "%s", r->out);
}

/* No FAKE runtime here: fake_loader and the fake user library load no libcudart at all, so the
 * test seam is off and symmpin asks its own (static) CUDA runtime, for real. Where no CUDA driver
 * can be loaded (CI's machine), symmpin stays out of the process with one INFO line, and the
 * all-reduce goes to the (FAKE) NCCL with its right result. Skipped where a driver exists. */
Test(preloaded, no_driver_stays_out_with_one_line, .timeout = 30) {
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver) {
    dlclose(driver);
    cr_skip_test("this machine has a CUDA driver (libcuda.so.1)");
  }
  spawn_result r;
  char *argv[] = {(char *)spawn_path("SYMMPIN_TEST_LOADER"), "local",
                  (char *)spawn_path("SYMMPIN_TEST_USERLIB"), NULL};
  const char *env[] = {"SYMMPIN_DEBUG=INFO", NULL};
  cr_assert(spawn_run(argv, env, true, &r));
  cr_assert_eq(r.status, 0, "%s", r.out);
  cr_assert(strstr(r.out, "rc=0 value=3"), "%s", r.out);
  const char *line = "symmpin INFO no CUDA driver in this process (libcuda.so.1 not found); "
                     "symmpin stays out of this process: every call goes to NCCL";
  const char *first = strstr(r.out, line);
  cr_assert(first, "%s", r.out);
  cr_assert_null(strstr(first + strlen(line), "no CUDA driver in this process"), "once: %s", r.out);
  cr_assert(strstr(r.out, "the program's: none loaded; no CUDA driver"), "%s", r.out);
  cr_assert_null(strstr(r.out, "stays out of this communicator"), "%s", r.out);
  cr_assert_null(strstr(r.out, "symmpin WARN"), "%s", r.out);
}

Test(preloaded, nccl_not_loaded_fails_cleanly, .timeout = 30) {
  spawn_result r;
  char *argv[] = {(char *)spawn_path("SYMMPIN_TEST_LOADER"), "nonccl", NULL};
  cr_assert(spawn_run(argv, NULL, true, &r));
  cr_assert_eq(r.status, 0, "%s", r.out);
  cr_assert(strstr(r.out, "rc=2 value=1"), "%s", r.out); /* ncclSystemError, buffer untouched */
  cr_assert(strstr(r.out, "cannot find the real ncclAllReduce"), "%s", r.out);
}

/* ---- where call sites are: traces and statistics ---- */

/* addr2line's function name for module+offset ("" if it cannot tell). */
static void addr2line_fn(const char *module, uint64_t offset, char *out, size_t cap) {
  char cmd[1024];
  out[0] = '\0';
  snprintf(cmd, sizeof cmd, "addr2line -f -e '%s' 0x%" PRIx64 " 2>/dev/null", module, offset);
  FILE *p = popen(cmd, "r");
  if (!p) return;
  if (fgets(out, (int)cap, p)) out[strcspn(out, "\n")] = '\0';
  pclose(p);
}

Test(preloaded, trace_locates_sites_in_the_program, .timeout = 30) {
  run_ctx x;
  spawn_result *r = app(&x, "basic", true, NULL, NULL);
  cr_assert_eq(r->status, 0, "%s", r->out);
  symmpin_trace_file tf;
  read_trace(&x, &tf);
  cr_assert_gt(tf.nwheres, 0, "no #where lines");
  const symmpin_trace_event *a0 = nth(&tf, SYMMPIN_TRACE_ALL_REDUCE, 0);
  const symmpin_trace_event *b0 = nth(&tf, SYMMPIN_TRACE_ALL_REDUCE, 4); /* site_b */
  const symmpin_site_where *wa = symmpin_trace_file_where(&tf, a0->stack);
  const symmpin_site_where *wb = symmpin_trace_file_where(&tf, b0->stack);
  cr_assert_not_null(wa);
  cr_assert_not_null(wb);
  /* The main program, by its absolute path (not argv[0]); static functions export no symbol. */
  char mod[512];
  snprintf(mod, sizeof mod, "%s", wa->module);
  cr_assert_eq(wa->module[0], '/', "%s", wa->module);
  cr_assert_str_eq(basename(mod), "fake_app");
  cr_assert_str_eq(wa->module, wb->module);
  cr_assert_neq(wa->offset, wb->offset);
  /* Every all-reduce's stack is located. */
  for (size_t i = 0; i < tf.nevents; i++)
    if (tf.events[i].call == SYMMPIN_TRACE_ALL_REDUCE)
      cr_assert_not_null(symmpin_trace_file_where(&tf, tf.events[i].stack), "event %zu", i);
  /* addr2line takes module and offset as they are. */
  char fn[256];
  addr2line_fn(wa->module, wa->offset, fn, sizeof fn);
  cr_assert_str_eq(fn, "site_a");
  addr2line_fn(wb->module, wb->offset, fn, sizeof fn);
  cr_assert_str_eq(fn, "site_b");
  symmpin_trace_file_free(&tf);
}

static void read_small_file(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "%s", path);
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = '\0';
  fclose(f);
}

Test(preloaded, stats_and_trace_name_a_library_caller, .timeout = 30) {
  /* The fake user library's fakeuser_run calls ncclAllReduce: a real caller in another module,
   * with an exported symbol. */
  user_fn u = user_lib_fn();
  char dir[256], trace_env[512], stats_env[512];
  spawn_tmpdir(dir, sizeof dir);
  snprintf(trace_env, sizeof trace_env, "SYMMPIN_TRACE=%s/trace.%%r.%%p", dir);
  snprintf(stats_env, sizeof stats_env, "SYMMPIN_STATS_FILE=%s/stats.%%r.json", dir);
  const char *env[] = {trace_env, stats_env, "SYMMPIN_STATS=1", "SYMMPIN_TIMEOUT_MS=200", NULL};
  char *argv[] = {(char *)spawn_path("SYMMPIN_TEST_LOADER"), "local",
                  (char *)spawn_path("SYMMPIN_TEST_USERLIB"), NULL};
  spawn_result r;
  cr_assert(spawn_run(argv, env, true, &r));
  cr_assert_eq(r.status, 0, "%s", r.out);
  cr_assert(strstr(r.out, "rc=0 value=3"), "%s", r.out);

  /* The trace: the all-reduce's stack located in fakeuser_run, inside its symbol's bytes. */
  char path[512];
  cr_assert(spawn_find(dir, "trace.", path, sizeof path));
  symmpin_trace_file tf;
  cr_assert_eq(symmpin_trace_read(path, &tf), SYMMPIN_OK);
  const symmpin_trace_event *ar = nth(&tf, SYMMPIN_TRACE_ALL_REDUCE, 0);
  cr_assert_not_null(ar);
  const symmpin_site_where *w = symmpin_trace_file_where(&tf, ar->stack);
  cr_assert_not_null(w, "no location for the all-reduce's stack");
  cr_assert_str_eq(w->module, spawn_path("SYMMPIN_TEST_USERLIB"));
  cr_assert_not_null(w->symbol);
  cr_assert_str_eq(w->symbol, "fakeuser_run");
  cr_assert(w->offset > u.sym->st_value && w->offset < u.sym->st_value + u.sym->st_size,
            "offset 0x%" PRIx64 " outside fakeuser_run", w->offset);
  char fn[256];
  addr2line_fn(w->module, w->offset, fn, sizeof fn);
  cr_assert_str_eq(fn, "fakeuser_run");

  /* The table (where the log goes): the site's row ends with its location. */
  char want[256];
  snprintf(want, sizeof want, "  at libfakeuser.so+0x%" PRIx64 " (fakeuser_run)\n", w->offset);
  cr_assert(strstr(r.out, want), "no '%s' in:\n%s", want, r.out);

  /* The JSON: a "where" object on the site, the rest unchanged. */
  cr_assert(spawn_find(dir, "stats.0.json", path, sizeof path), "no stats file in %s", dir);
  static char json[65536];
  read_small_file(path, json, sizeof json);
  snprintf(want, sizeof want,
           "\"where\": {\"module\": \"%s\", \"offset\": \"0x%" PRIx64
           "\", \"symbol\": \"fakeuser_run\"}}",
           spawn_path("SYMMPIN_TEST_USERLIB"), w->offset);
  cr_assert(strstr(json, want), "no '%s' in:\n%s", want, json);
  cr_assert(strstr(json, "\"count\": 16, \"dtype\": \"f32\", \"op\": \"sum\", \"calls\": 1"),
            "%s", json);
  symmpin_trace_file_free(&tf);
}

/* ---- the calls of NCCL 2.27-2.29 that change a communicator's life ---- */

/* Revoke, Suspend/Resume, Shrink (also with NCCL_SHRINK_ABORT) and Grow reach symmpin, which leaves
 * each affected communicator to NCCL for good and says why (the statistics' "nccl_only"); the
 * children of Shrink and Grow, and a split of such a child, pass through from the start (no
 * ordinal); NCCL's own answers reach the program unchanged (a revoked or suspended communicator
 * refuses all-reduces: checked by fake_app). Without the wrappers, symmpin never hears of these
 * calls: no trace events, and the statistics know nothing of the children. */
Test(preloaded, life_calls_leave_communicators_to_nccl, .timeout = 30) {
  run_ctx x;
  char stats_env[512];
  spawn_tmpdir(x.dir, sizeof x.dir);
  snprintf(stats_env, sizeof stats_env, "SYMMPIN_STATS_FILE=%s/stats.json", x.dir);
  snprintf(x.trace_env, sizeof x.trace_env, "SYMMPIN_TRACE=%s/trace.%%r.%%p", x.dir);
  const char *env[] = {stats_env, x.trace_env, NULL};
  char *argv[] = {(char *)spawn_path("SYMMPIN_TEST_APP"), "life", NULL};
  cr_assert(spawn_run(argv, env, true, &x.r));
  cr_assert_eq(x.r.status, 0, "%s", x.r.out);
  char path[512];
  cr_assert(spawn_find(x.dir, "stats.json", path, sizeof path), "%s", x.r.out);
  FILE *f = fopen(path, "r");
  static char json[65536];
  size_t n = fread(json, 1, sizeof json - 1, f);
  json[n] = '\0';
  fclose(f);
  cr_expect(strstr(json, "\"ordinal\": 0, \"rank\": 1, \"nranks\": 2, \"device\": 0, "
                         "\"nccl_only\": \"revoked (ncclCommRevoke)\""),
            "%s", json);
  cr_expect(strstr(json, "\"ordinal\": 1, \"rank\": 1, \"nranks\": 2, \"device\": 0, "
                         "\"nccl_only\": \"suspended (ncclCommSuspend)"),
            "%s", json);
  cr_expect(strstr(json, "\"ordinal\": 2, \"rank\": 2, \"nranks\": 4, \"device\": 0, "
                         "\"nccl_only\": \"its operations aborted by ncclCommShrink"),
            "%s", json);
  cr_expect(strstr(json, "\"ordinal\": -1, \"rank\": 1, \"nranks\": 3, \"device\": 0, "
                         "\"nccl_only\": \"made by ncclCommShrink"),
            "%s", json);
  cr_expect(strstr(json, "\"nccl_only\": \"a split of a communicator symmpin passes through\""),
            "%s", json);
  cr_expect(strstr(json, "\"ordinal\": -1, \"rank\": 1, \"nranks\": 5, \"device\": 0, "
                         "\"nccl_only\": \"made by ncclCommGrow"),
            "%s", json);

  symmpin_trace_file tf;
  read_trace(&x, &tf);
  cr_assert_eq(count_calls(&tf, SYMMPIN_TRACE_COMM_REVOKE), 2, "the refused revoke is traced too");
  cr_expect_eq(nth(&tf, SYMMPIN_TRACE_COMM_REVOKE, 0)->rc, 4 /* ncclInvalidArgument */);
  cr_expect_eq(nth(&tf, SYMMPIN_TRACE_COMM_REVOKE, 1)->rc, 0);
  cr_expect_eq(nth(&tf, SYMMPIN_TRACE_COMM_REVOKE, 1)->comm, 0);
  cr_expect_eq(count_calls(&tf, SYMMPIN_TRACE_COMM_SUSPEND), 1);
  cr_expect_eq(count_calls(&tf, SYMMPIN_TRACE_COMM_RESUME), 1);
  cr_assert_eq(count_calls(&tf, SYMMPIN_TRACE_COMM_SHRINK), 2);
  cr_expect_eq(nth(&tf, SYMMPIN_TRACE_COMM_SHRINK, 0)->parent, 2);
  cr_expect_eq(nth(&tf, SYMMPIN_TRACE_COMM_SHRINK, 0)->comm, -1);
  cr_expect_eq(count_calls(&tf, SYMMPIN_TRACE_COMM_GROW), 1);
  /* What the program got is what NCCL said: the all-reduce after the revoke, refused. */
  size_t refused = 0;
  for (size_t i = 0; i < tf.nevents; i++)
    refused += tf.events[i].call == SYMMPIN_TRACE_ALL_REDUCE && tf.events[i].rc == 5;
  cr_expect_eq(refused, 2, "ncclInvalidUsage after the revoke and while suspended");
  symmpin_trace_file_free(&tf);
}

/* A call of these the loaded NCCL lacks (here: no NCCL at all, found through RTLD_DEFAULT as a
 * program built against a newer NCCL would) fails with ncclSystemError and one WARN naming it. */
Test(preloaded, life_calls_the_nccl_lacks_fail_cleanly, .timeout = 30) {
  spawn_result r;
  char *argv[] = {(char *)spawn_path("SYMMPIN_TEST_LOADER"), "lifecalls", NULL};
  cr_assert(spawn_run(argv, NULL, true, &r));
  cr_assert_eq(r.status, 0, "%s", r.out);
  const char *names[] = {"ncclCommShrink", "ncclCommRevoke", "ncclCommGrow", "ncclCommSuspend",
                         "ncclCommResume"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char want[96];
    snprintf(want, sizeof want, "%s rc=2", names[i]);
    cr_expect(strstr(r.out, want), "%s: %s", names[i], r.out);
    snprintf(want, sizeof want, "cannot find the real %s", names[i]);
    cr_expect(strstr(r.out, want), "%s: %s", names[i], r.out);
  }
}
