/* The trace: every field round-trips through format/parse and through a file written by the
 * buffered writer (also from several threads); readers skip unknown keys, keep unknown calls,
 * reject malformed lines and count them; path patterns expand. Call-site locations ("#where="
 * lines) round-trip, encoded, and traces without them still read. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "planner/trace.h"

static symmpin_trace_event full_allreduce(void) {
  symmpin_trace_event ev;
  memset(&ev, 0, sizeof(ev));
  ev.t_ns = 123456789;
  ev.tid = 4242;
  ev.call = SYMMPIN_TRACE_ALL_REDUCE;
  ev.rc = 0;
  ev.device = 3;
  ev.stack = 0xdeadbeefcafef00dULL;
  ev.stream = 0x7f0012345678ULL;
  ev.comm = 2;
  ev.rank = 5;
  ev.nranks = 8;
  ev.site = 0xfedcba9876543210ULL;
  ev.count = 1048576;
  ev.dtype = SYMMPIN_BFLOAT16;
  ev.op = SYMMPIN_MAX;
  ev.send_alloc = 17;
  ev.send_off = 4096;
  ev.recv_alloc = 18;
  ev.recv_off = 0;
  ev.send_ptr = 0x7f0000001000ULL;
  ev.recv_ptr = 0x7f0000200000ULL;
  ev.stream_ord = 1;
  ev.capturing = 1;
  ev.path = SYMMPIN_PATH_SYMMPIN;
  ev.reason = 0;
  ev.parent = -1; /* not an all-reduce field: the reader's default */
  return ev;
}

static void assert_events_equal(const symmpin_trace_event *a, const symmpin_trace_event *b) {
  cr_assert_eq(a->seq, b->seq);
  cr_assert_eq(a->t_ns, b->t_ns);
  cr_assert_eq(a->tid, b->tid);
  cr_assert_eq(a->call, b->call);
  cr_assert_eq(a->rc, b->rc);
  cr_assert_eq(a->device, b->device);
  cr_assert_eq(a->ptr, b->ptr);
  cr_assert_eq(a->size, b->size);
  cr_assert_eq(a->alloc, b->alloc);
  cr_assert_eq(a->stack, b->stack);
  cr_assert_eq(a->stream, b->stream);
  cr_assert_eq(a->comm, b->comm);
  cr_assert_eq(a->key_hi, b->key_hi);
  cr_assert_eq(a->key_lo, b->key_lo);
  cr_assert_eq(a->rank, b->rank);
  cr_assert_eq(a->nranks, b->nranks);
  cr_assert_eq(a->color, b->color);
  cr_assert_eq(a->parent, b->parent);
  cr_assert_eq(a->depth, b->depth);
  cr_assert_eq(a->site, b->site);
  cr_assert_eq(a->count, b->count);
  cr_assert_eq(a->dtype, b->dtype);
  cr_assert_eq(a->op, b->op);
  cr_assert_eq(a->send_alloc, b->send_alloc);
  cr_assert_eq(a->send_off, b->send_off);
  cr_assert_eq(a->recv_alloc, b->recv_alloc);
  cr_assert_eq(a->recv_off, b->recv_off);
  cr_assert_eq(a->send_ptr, b->send_ptr);
  cr_assert_eq(a->recv_ptr, b->recv_ptr);
  cr_assert_eq(a->stream_ord, b->stream_ord);
  cr_assert_eq(a->capturing, b->capturing);
  cr_assert_eq(a->path, b->path);
  cr_assert_eq(a->reason, b->reason);
}

static symmpin_trace_event roundtrip(const symmpin_trace_event *ev) {
  char line[SYMMPIN_TRACE_LINE_MAX];
  int n = symmpin_trace_format_event(ev, line, sizeof(line));
  cr_assert_gt(n, 0);
  line[n] = '\0';
  symmpin_trace_event back;
  cr_assert_eq(symmpin_trace_parse_event(line, &back), SYMMPIN_OK, "line: %s", line);
  return back;
}

/* Unset fields as the reader leaves them. */
static void reader_defaults(symmpin_trace_event *ev) {
  ev->comm = -1;
  ev->device = -1;
  ev->rank = -1;
  ev->parent = -1;
  ev->stream_ord = -1;
}

Test(trace, allreduce_roundtrip_all_fields) {
  symmpin_trace_event ev = full_allreduce();
  ev.seq = 99;
  symmpin_trace_event back = roundtrip(&ev);
  assert_events_equal(&back, &ev);
}

Test(trace, every_call_roundtrips_its_fields) {
  for (int c = 1; c < SYMMPIN_TRACE_CALL_COUNT; c++) {
    symmpin_trace_event ev;
    memset(&ev, 0, sizeof(ev));
    reader_defaults(&ev);
    ev.seq = (uint64_t)c;
    ev.call = (symmpin_trace_call)c;
    ev.rc = c == SYMMPIN_TRACE_CUDA_FREE ? 1 : 0;
    ev.device = c % 4;
    switch (ev.call) {
    case SYMMPIN_TRACE_CUDA_MALLOC:
    case SYMMPIN_TRACE_CUDA_MALLOC_ASYNC:
    case SYMMPIN_TRACE_NCCL_MEM_ALLOC:
      ev.ptr = 0x7f1234560000ULL;
      ev.size = 1u << 30;
      ev.alloc = 77;
      ev.stack = 0x1234;
      if (ev.call == SYMMPIN_TRACE_CUDA_MALLOC_ASYNC) ev.stream = 0xabc;
      break;
    case SYMMPIN_TRACE_CUDA_FREE:
    case SYMMPIN_TRACE_CUDA_FREE_ASYNC:
    case SYMMPIN_TRACE_NCCL_MEM_FREE:
      ev.ptr = 0x7f1234560000ULL;
      ev.alloc = 77;
      if (ev.call == SYMMPIN_TRACE_CUDA_FREE_ASYNC) ev.stream = 0xabc;
      break;
    case SYMMPIN_TRACE_COMM_SPLIT:
      ev.color = 3;
      ev.parent = 0;
      /* fall through */
    case SYMMPIN_TRACE_COMM_INIT_RANK:
    case SYMMPIN_TRACE_COMM_INIT_RANK_CONFIG:
    case SYMMPIN_TRACE_COMM_INIT_RANK_SCALABLE:
    case SYMMPIN_TRACE_COMM_INIT_ALL:
      ev.comm = 1;
      ev.key_hi = 0x0123456789abcdefULL;
      ev.key_lo = 0xfedcba9876543210ULL;
      ev.rank = 2;
      ev.nranks = 4;
      ev.stack = 0x99;
      break;
    case SYMMPIN_TRACE_COMM_DESTROY:
    case SYMMPIN_TRACE_COMM_ABORT:
    case SYMMPIN_TRACE_COMM_FINALIZE: ev.comm = 1; break;
    case SYMMPIN_TRACE_GROUP_START:
    case SYMMPIN_TRACE_GROUP_END: ev.depth = 2; break;
    default: break;
    }
    if (ev.call == SYMMPIN_TRACE_ALL_REDUCE) {
      ev = full_allreduce();
      ev.seq = (uint64_t)c;
    }
    symmpin_trace_event back = roundtrip(&ev);
    assert_events_equal(&back, &ev);
  }
}

Test(trace, numeric_dtype_and_op_roundtrip) {
  /* A PreMulSum op handle and an unknown datatype are written as numbers and read back. */
  symmpin_trace_event ev = full_allreduce();
  ev.op = 17;
  ev.dtype = 42;
  symmpin_trace_event back = roundtrip(&ev);
  cr_assert_eq(back.op, 17);
  cr_assert_eq(back.dtype, 42);
}

Test(trace, unknown_keys_and_calls) {
  symmpin_trace_event ev;
  cr_assert_eq(symmpin_trace_parse_event("5 100 7 ncclAllReduce rc=0 future_key=abc comm=3 "
                                         "site=0x10 dtype=f32 op=sum count=4 another=1",
                                         &ev),
               SYMMPIN_OK);
  cr_assert_eq(ev.call, SYMMPIN_TRACE_ALL_REDUCE);
  cr_assert_eq(ev.comm, 3);
  cr_assert_eq(ev.site, 0x10);
  cr_assert_eq(ev.count, 4);
  cr_assert_eq(ev.dtype, SYMMPIN_FLOAT32);
  cr_assert_eq(ev.stream_ord, -1); /* absent -> default */
  cr_assert_eq(symmpin_trace_parse_event("6 101 7 ncclBroadcast rc=0 comm=1", &ev), SYMMPIN_OK);
  cr_assert_eq(ev.call, SYMMPIN_TRACE_UNKNOWN);
  cr_assert_eq(ev.comm, 1);
  cr_assert_eq(ev.seq, 6);
}

Test(trace, malformed_lines) {
  symmpin_trace_event ev;
  const char *bad[] = {
      "",                                  /* empty */
      "1 2 3",                             /* prefix cut short */
      "x 2 3 ncclAllReduce",               /* seq not a number */
      "1 2 3 ncclAllReduce comm",          /* token without '=' */
      "1 2 3 ncclAllReduce =5",            /* empty key */
      "1 2 3 ncclAllReduce comm=zz",       /* bad value for a known key */
      "1 2 3 ncclAllReduce count=-4",      /* negative unsigned */
      "1 2 3 ncclAllReduce comm=99999999999", /* int overflow */
      "1 2 3 ncclAllReduce site=0x",       /* hex without digits */
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    cr_assert_eq(symmpin_trace_parse_event(bad[i], &ev), SYMMPIN_ERR_INVALID, "accepted: '%s'",
                 bad[i]);
}

static char *tmp_path(const char *name) {
  static char buf[4][256];
  static int k;
  char *p = buf[k++ % 4];
  snprintf(p, 256, "/tmp/symmpin-test-%d-%s", (int)getpid(), name);
  return p;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert_not_null(f);
  fputs(text, f);
  fclose(f);
}

Test(trace, file_roundtrip_and_header) {
  const char *path = tmp_path("rt.trace");
  symmpin_trace_header h = {.version = 1, .pid = 321, .rank = 4, .start_unix_ns = 1700000000123ULL};
  snprintf(h.host, sizeof(h.host), "node-7");
  snprintf(h.program, sizeof(h.program), "python3 train.py");
  symmpin_trace_writer *w;
  cr_assert_eq(symmpin_trace_writer_open(path, &h, &w), SYMMPIN_OK);
  /* More than a buffer's worth, so the writer flushes mid-way. */
  enum { N = 3000 };
  for (int i = 0; i < N; i++) {
    symmpin_trace_event ev = full_allreduce();
    ev.count = (uint64_t)i;
    ev.t_ns = (uint64_t)i * 10;
    cr_assert_eq(symmpin_trace_writer_add(w, &ev), SYMMPIN_OK);
    cr_assert_eq(ev.seq, (uint64_t)i + 1);
  }
  symmpin_trace_writer_close(w);
  symmpin_trace_file f;
  cr_assert_eq(symmpin_trace_read(path, &f), SYMMPIN_OK);
  cr_assert_eq(f.header.version, SYMMPIN_TRACE_VERSION);
  cr_assert_eq(SYMMPIN_TRACE_VERSION, 2);
  cr_assert_str_eq(f.header.host, "node-7");
  cr_assert_str_eq(f.header.program, "python3 train.py");
  cr_assert_eq(f.header.pid, 321);
  cr_assert_eq(f.header.rank, 4);
  cr_assert_eq(f.header.start_unix_ns, 1700000000123ULL);
  cr_assert_eq(f.nevents, N);
  cr_assert_eq(f.skipped, 0);
  for (int i = 0; i < N; i++) {
    symmpin_trace_event want = full_allreduce();
    want.count = (uint64_t)i;
    want.t_ns = (uint64_t)i * 10;
    want.seq = (uint64_t)i + 1;
    assert_events_equal(&f.events[i], &want);
  }
  symmpin_trace_file_free(&f);
  unlink(path);
}

typedef struct {
  symmpin_trace_writer *w;
  int t;
} writer_arg;

static void *writer_thread(void *p) {
  writer_arg *a = p;
  for (int i = 0; i < 5000; i++) {
    symmpin_trace_event ev = full_allreduce();
    ev.tid = (uint64_t)a->t;
    ev.count = (uint64_t)i;
    symmpin_trace_writer_add(a->w, &ev);
  }
  return NULL;
}

Test(trace, concurrent_writers, .timeout = 60) {
  const char *path = tmp_path("mt.trace");
  symmpin_trace_header h = {.version = 1, .rank = 0};
  symmpin_trace_writer *w;
  cr_assert_eq(symmpin_trace_writer_open(path, &h, &w), SYMMPIN_OK);
  pthread_t th[4];
  writer_arg args[4];
  for (int t = 0; t < 4; t++) {
    args[t] = (writer_arg){w, t};
    pthread_create(&th[t], NULL, writer_thread, &args[t]);
  }
  for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
  symmpin_trace_writer_close(w);
  symmpin_trace_file f;
  cr_assert_eq(symmpin_trace_read(path, &f), SYMMPIN_OK);
  cr_assert_eq(f.nevents, 20000);
  cr_assert_eq(f.skipped, 0);
  /* seq is 1..N in file order; each thread's own events keep their order. */
  uint64_t next[4] = {0};
  for (size_t i = 0; i < f.nevents; i++) {
    cr_assert_eq(f.events[i].seq, i + 1);
    int t = (int)f.events[i].tid;
    cr_assert(t >= 0 && t < 4);
    cr_assert_eq(f.events[i].count, next[t]++);
  }
  symmpin_trace_file_free(&f);
  unlink(path);
}

Test(trace, reader_tolerates_and_rejects) {
  const char *path = tmp_path("tol.trace");
  write_text(path,
             "#symmpin-trace 1\r\n"
             "#host=h1\n"
             "#some_future_header=whatever\n"
             "# a comment\n"
             "\n"
             "1 10 5 ncclGroupStart rc=0 dev=0 depth=1\n"
             "2 11 5 ncclAllReduce comm=0 site=0xab count=8 dtype=bf16 op=sum newkey=1\r\n"
             "garbage line here\n"
             "3 12 5 ncclBroadcast rc=0\n"
             "4 13 5 ncclAllReduce comm=0 site=0xab count=8 dtype=bf16 op=su"); /* cut by a crash */
  symmpin_trace_file f;
  cr_assert_eq(symmpin_trace_read(path, &f), SYMMPIN_OK);
  cr_assert_str_eq(f.header.host, "h1");
  cr_assert_eq(f.nevents, 3);
  cr_assert_eq(f.skipped, 2);
  cr_assert_eq(f.events[0].call, SYMMPIN_TRACE_GROUP_START);
  cr_assert_eq(f.events[0].depth, 1);
  cr_assert_eq(f.events[1].dtype, SYMMPIN_BFLOAT16);
  cr_assert_eq(f.events[2].call, SYMMPIN_TRACE_UNKNOWN);
  symmpin_trace_file_free(&f);

  write_text(path, "#symmpin-trace 3\n1 1 1 ncclAllReduce\n");
  cr_assert_eq(symmpin_trace_read(path, &f), SYMMPIN_ERR_UNSUPPORTED);
  write_text(path, "#symmpin-trace 0\n1 1 1 ncclAllReduce\n");
  cr_assert_eq(symmpin_trace_read(path, &f), SYMMPIN_ERR_UNSUPPORTED);
  write_text(path, "1 1 1 ncclAllReduce\n");
  cr_assert_eq(symmpin_trace_read(path, &f), SYMMPIN_ERR_INVALID);
  write_text(path, "");
  cr_assert_eq(symmpin_trace_read(path, &f), SYMMPIN_ERR_INVALID);
  unlink(path);
  cr_assert_eq(symmpin_trace_read(path, &f), SYMMPIN_ERR_IO);
}

Test(trace, call_names) {
  for (int c = 0; c < SYMMPIN_TRACE_CALL_COUNT; c++) {
    const char *n = symmpin_trace_call_name((symmpin_trace_call)c);
    cr_assert_not_null(n);
    if (c) cr_assert_eq(symmpin_trace_call_from_name(n), c);
  }
  cr_assert_eq(symmpin_trace_call_from_name("ncclSomethingNew"), SYMMPIN_TRACE_UNKNOWN);
}

/* ---- call-site locations ("#where=" lines) ---- */

Test(trace_where, file_roundtrip_encoded) {
  const char *path = tmp_path("where.trace");
  symmpin_trace_header h = {.version = 1, .rank = 0};
  symmpin_trace_writer *w;
  cr_assert_eq(symmpin_trace_writer_open(path, &h, &w), SYMMPIN_OK);
  /* A path with a space and a '%', a symbol; a module without symbol; an unknown location. */
  symmpin_site_where a = {"/opt/my app/100%/libtrain.so", "_ZN5train4stepEv", 0x1a2b3b};
  symmpin_site_where b = {"/usr/bin/prog", NULL, 0x401136};
  symmpin_site_where none = {NULL, "ignored", 5};
  cr_assert_eq(symmpin_trace_writer_add_where(w, 0x5747c, &a), SYMMPIN_OK);
  symmpin_trace_event ev = full_allreduce();
  ev.stack = 0x5747c;
  cr_assert_eq(symmpin_trace_writer_add(w, &ev), SYMMPIN_OK);
  cr_assert_eq(symmpin_trace_writer_add_where(w, 0xb0b, &b), SYMMPIN_OK);
  cr_assert_eq(symmpin_trace_writer_add_where(w, 0xdead, &none), SYMMPIN_OK); /* writes nothing */
  symmpin_trace_writer_close(w);

  /* The line as documented: stack, encoded module + offset, symbol. */
  FILE *fp = fopen(path, "r");
  char text[4096];
  size_t n = fread(text, 1, sizeof(text) - 1, fp);
  fclose(fp);
  text[n] = '\0';
  cr_assert(strstr(text, "\n#where=0x5747c /opt/my%20app/100%25/libtrain.so+0x1a2b3b "
                         "_ZN5train4stepEv\n"), "%s", text);
  cr_assert(strstr(text, "\n#where=0xb0b /usr/bin/prog+0x401136\n"), "%s", text);
  cr_assert_null(strstr(text, "0xdead"), "%s", text);

  symmpin_trace_file f;
  cr_assert_eq(symmpin_trace_read(path, &f), SYMMPIN_OK);
  cr_assert_eq(f.skipped, 0);
  cr_assert_eq(f.nevents, 1); /* locations are not events: seq and counts unchanged */
  cr_assert_eq(f.events[0].seq, 1);
  cr_assert_eq(f.nwheres, 2);
  const symmpin_site_where *ra = symmpin_trace_file_where(&f, 0x5747c);
  cr_assert_not_null(ra);
  cr_assert_str_eq(ra->module, a.module);
  cr_assert_str_eq(ra->symbol, a.symbol);
  cr_assert_eq(ra->offset, a.offset);
  const symmpin_site_where *rb = symmpin_trace_file_where(&f, 0xb0b);
  cr_assert_not_null(rb);
  cr_assert_str_eq(rb->module, "/usr/bin/prog");
  cr_assert_null(rb->symbol);
  cr_assert_eq(rb->offset, 0x401136);
  cr_assert_null(symmpin_trace_file_where(&f, 0xdead));
  cr_assert_null(symmpin_trace_file_where(&f, 0x1));
  symmpin_trace_file_free(&f);
  cr_assert_eq(f.nwheres, 0);
  unlink(path);
}

Test(trace_where, old_trace_without_locations_reads) {
  /* A version-1 trace from before "#where=" lines: same events, no locations, nothing skipped. */
  const char *path = tmp_path("old.trace");
  write_text(path,
             "#symmpin-trace 1\n#host=h\n#pid=1\n#rank=0\n#program=p\n#start_unix_ns=1\n"
             "#fields=seq t_ns tid call key=value...\n"
             "1 10 5 ncclCommInitRank rc=0 dev=0 stack=0x1417 comm=0 key_hi=0x1 key_lo=0x2 rank=0 "
             "nranks=2\n"
             "2 11 5 ncclAllReduce rc=0 dev=0 stack=0x5747c comm=0 rank=0 nranks=2 site=0xab "
             "count=8 dtype=f32 op=sum\n");
  symmpin_trace_file f;
  cr_assert_eq(symmpin_trace_read(path, &f), SYMMPIN_OK);
  cr_assert_eq(f.nevents, 2);
  cr_assert_eq(f.skipped, 0);
  cr_assert_eq(f.nwheres, 0);
  cr_assert_null(f.wheres);
  cr_assert_null(symmpin_trace_file_where(&f, 0x5747c));
  symmpin_trace_file_free(&f);
  unlink(path);
}

Test(trace_where, reader_last_wins_sorted_and_malformed_counted) {
  const char *path = tmp_path("wm.trace");
  write_text(path,
             "#symmpin-trace 1\n"
             "#where=0x30 /lib/c.so+0x3 c future=1\n" /* extra tokens ignored */
             "#where=0x10 /lib/a.so+0x1\n"
             "#where=0x20 /lib/b.so+0x2 b\n"
             "#where=0x10 /lib/a2.so+0x11 a2\n"       /* the same stack again: the last wins */
             "#where=0x40 /lib/d.so\n"                /* no offset */
             "#where=0x50 +0x5 e\n"                   /* no module */
             "#where=zz /lib/f.so+0x6\n"              /* bad stack */
             "#where=0x70 /lib/g%2.so+0x7\n"          /* bad escape */
             "#where=0x80 /lib/h.so+0x8 h%0\n"        /* bad escape in the symbol */
             "#where=0x90\n"                          /* nothing */
             "1 1 1 ncclGroupStart rc=0 depth=1\n"
             "#where=0xa0 /lib/i.so+0xa"); /* cut by a crash */
  symmpin_trace_file f;
  cr_assert_eq(symmpin_trace_read(path, &f), SYMMPIN_OK);
  cr_assert_eq(f.nevents, 1);
  cr_assert_eq(f.skipped, 7);
  cr_assert_eq(f.nwheres, 3);
  for (size_t i = 1; i < f.nwheres; i++) cr_assert_lt(f.wheres[i - 1].stack, f.wheres[i].stack);
  const symmpin_site_where *a = symmpin_trace_file_where(&f, 0x10);
  cr_assert_str_eq(a->module, "/lib/a2.so");
  cr_assert_str_eq(a->symbol, "a2");
  cr_assert_eq(a->offset, 0x11);
  cr_assert_str_eq(symmpin_trace_file_where(&f, 0x30)->symbol, "c");
  cr_assert_null(symmpin_trace_file_where(&f, 0xa0));
  symmpin_trace_file_free(&f);
  unlink(path);
}

Test(trace_where, format_cuts_long_symbols_only) {
  char sym[3000];
  memset(sym, 'x', sizeof(sym) - 1);
  sym[sizeof(sym) - 1] = '\0';
  symmpin_site_where w = {"/lib/libz.so", sym, 0x10};
  char buf[SYMMPIN_TRACE_WHERE_MAX];
  int n = symmpin_trace_format_where(0x1, &w, buf, sizeof(buf));
  cr_assert_gt(n, 0);
  cr_assert_leq((size_t)n, sizeof(buf));
  cr_assert_eq(strncmp(buf, "#where=0x1 /lib/libz.so+0x10 xxx", 32), 0);
  /* A module path that cannot fit gives no line at all (never a wrong one). */
  char mod[3000];
  memset(mod, 'm', sizeof(mod) - 1);
  mod[0] = '/';
  mod[sizeof(mod) - 1] = '\0';
  symmpin_site_where big = {mod, "f", 0x10};
  cr_assert_eq(symmpin_trace_format_where(0x1, &big, buf, sizeof(buf)), -1);
  symmpin_site_where unknown = {"", "f", 0x10};
  cr_assert_eq(symmpin_trace_format_where(0x1, &unknown, buf, sizeof(buf)), -1);
}

/* Version 2: the all-gather and reduce-scatter events, with the all-reduce's fields (the
 * all-gather without op); a version 1 trace (all-reduces only) still reads as it did. */
Test(trace, collectives_of_version_2) {
  symmpin_trace_event ev;
  cr_assert_eq(symmpin_trace_parse_event("7 100 9 ncclAllGather rc=0 comm=2 site=0x11 count=64 "
                                         "dtype=bf16 stream_ord=1 path=1 reason=0",
                                         &ev),
               SYMMPIN_OK);
  cr_assert_eq(ev.call, SYMMPIN_TRACE_ALL_GATHER);
  cr_assert_eq(symmpin_trace_call_coll(ev.call), SYMMPIN_COLL_ALLGATHER);
  cr_assert_eq(ev.count, 64);
  cr_assert_eq(ev.dtype, SYMMPIN_BFLOAT16);
  cr_assert_eq(ev.op, 0);
  cr_assert_eq(symmpin_trace_parse_event("8 101 9 ncclReduceScatter rc=0 comm=2 site=0x12 "
                                         "count=32 dtype=f32 op=max",
                                         &ev),
               SYMMPIN_OK);
  cr_assert_eq(ev.call, SYMMPIN_TRACE_REDUCE_SCATTER);
  cr_assert_eq(symmpin_trace_call_coll(ev.call), SYMMPIN_COLL_REDUCESCATTER);
  cr_assert_eq(ev.op, SYMMPIN_MAX);
  cr_assert_eq(symmpin_trace_call_coll(SYMMPIN_TRACE_ALL_REDUCE), SYMMPIN_COLL_ALLREDUCE);
  cr_assert_eq(symmpin_trace_call_coll(SYMMPIN_TRACE_CUDA_MALLOC), -1);
  for (int c = 0; c < SYMMPIN_COLL_COUNT; c++)
    cr_assert_eq(symmpin_trace_call_coll(symmpin_trace_coll_call(c)), c);
  cr_assert_eq(symmpin_trace_coll_call(SYMMPIN_COLL_COUNT), SYMMPIN_TRACE_UNKNOWN);

  /* Written and read back: the all-gather's line has no op. */
  const char *path = tmp_path("colls.trace");
  symmpin_trace_header h = {.version = SYMMPIN_TRACE_VERSION, .rank = 0};
  snprintf(h.host, sizeof h.host, "n");
  symmpin_trace_writer *w;
  cr_assert_eq(symmpin_trace_writer_open(path, &h, &w), SYMMPIN_OK);
  ev = full_allreduce();
  ev.call = SYMMPIN_TRACE_ALL_GATHER;
  ev.site = 0x21, ev.count = 5, ev.dtype = SYMMPIN_FLOAT32, ev.op = 3;
  cr_assert_eq(symmpin_trace_writer_add(w, &ev), SYMMPIN_OK);
  ev = full_allreduce();
  ev.call = SYMMPIN_TRACE_REDUCE_SCATTER;
  ev.site = 0x22, ev.count = 6, ev.dtype = SYMMPIN_FLOAT32, ev.op = SYMMPIN_AVG;
  cr_assert_eq(symmpin_trace_writer_add(w, &ev), SYMMPIN_OK);
  symmpin_trace_writer_close(w);
  symmpin_trace_file f;
  cr_assert_eq(symmpin_trace_read(path, &f), SYMMPIN_OK);
  cr_assert_eq(f.nevents, 2);
  cr_assert_eq(f.events[0].call, SYMMPIN_TRACE_ALL_GATHER);
  cr_assert_eq(f.events[0].op, 0, "an all-gather line carries no op");
  cr_assert_eq(f.events[1].call, SYMMPIN_TRACE_REDUCE_SCATTER);
  cr_assert_eq(f.events[1].op, SYMMPIN_AVG);
  symmpin_trace_file_free(&f);

  write_text(path,
             "#symmpin-trace 1\n1 1 1 ncclAllReduce comm=0 site=0x1 count=8 dtype=f32 op=sum\n");
  cr_assert_eq(symmpin_trace_read(path, &f), SYMMPIN_OK, "version 1 still reads");
  cr_assert_eq(f.header.version, 1);
  cr_assert_eq(f.nevents, 1);
  cr_assert_eq(f.events[0].call, SYMMPIN_TRACE_ALL_REDUCE);
  symmpin_trace_file_free(&f);
  unlink(path);
}
