/* CPU tests of common/: the datatype and op lists, communicator keys, path patterns, the logger's
 * line format. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/commkey.h"
#include "common/log.h"
#include "common/path.h"
#include "common/types.h"

/* ---- datatypes and ops ---- */

Test(types, every_listed_dtype_has_a_size_and_a_name_that_round_trips) {
  int listed = 0;
#define X(name, value, str, bytes)                                                                 \
  listed++;                                                                                        \
  cr_assert_eq(symmpin_dtype_size(SYMMPIN_##name), (size_t)(bytes), #name);                        \
  cr_assert_str_eq(symmpin_dtype_name(value), str);                                                \
  cr_assert_eq(symmpin_dtype_from_name(str), value);
  SYMMPIN_DTYPES(X)
#undef X
  cr_assert_eq(listed, SYMMPIN_DTYPE_COUNT);
  cr_assert_eq(symmpin_dtype_size(SYMMPIN_DTYPE_COUNT), 0u);
  cr_assert_eq(symmpin_dtype_size(-1), 0u);
  cr_assert_str_eq(symmpin_dtype_name(99), "?");
  cr_assert_eq(symmpin_dtype_from_name("f128"), -1);
  /* NCCL's numbering (checked against nccl.h in interpose/nccl_wrap.c). */
  cr_assert_eq(SYMMPIN_BFLOAT16, 9);
  cr_assert_eq(SYMMPIN_FP8E5M2, 11);
}

Test(types, ops_round_trip) {
  for (int op = 0; op < SYMMPIN_OP_COUNT; op++)
    cr_assert_eq(symmpin_op_from_name(symmpin_op_name(op)), op);
  cr_assert_str_eq(symmpin_op_name(SYMMPIN_AVG), "avg");
  cr_assert_str_eq(symmpin_op_name(SYMMPIN_OP_COUNT), "?");
  cr_assert_str_eq(symmpin_status_name(SYMMPIN_ERR_TIMEOUT), "timeout");
}

/* ---- communicator keys ------------------------------------------------------------------------------- */

Test(comm_key, from_bytes_is_deterministic_and_distinguishes) {
  unsigned char a[64], c[64];
  for (int i = 0; i < 64; i++) a[i] = (unsigned char)(i * 7 + 1);
  memcpy(c, a, sizeof(a));
  symmpin_comm_key ka = symmpin_comm_key_of_bytes(a, sizeof(a));
  symmpin_comm_key kc = symmpin_comm_key_of_bytes(c, sizeof(c));
  cr_assert(ka.hi == kc.hi && ka.lo == kc.lo, "same bytes, same key");
  cr_assert_neq(ka.hi, ka.lo, "the two halves are different hashes");
  /* Every single-bit flip changes both halves. */
  for (int bit = 0; bit < 64 * 8; bit++) {
    c[bit / 8] ^= (unsigned char)(1u << (bit % 8));
    symmpin_comm_key k = symmpin_comm_key_of_bytes(c, sizeof(c));
    cr_assert(k.hi != ka.hi && k.lo != ka.lo, "bit %d", bit);
    c[bit / 8] ^= (unsigned char)(1u << (bit % 8));
  }
  /* Trailing zero bytes and shorter lengths are different inputs. */
  unsigned char z[9] = {0};
  symmpin_comm_key k8 = symmpin_comm_key_of_bytes(z, 8);
  symmpin_comm_key k9 = symmpin_comm_key_of_bytes(z, 9);
  symmpin_comm_key k0 = symmpin_comm_key_of_bytes(z, 0);
  cr_assert(k8.hi != k9.hi || k8.lo != k9.lo);
  cr_assert(k8.hi != k0.hi || k8.lo != k0.lo);
}

Test(comm_key, from_bytes_no_collisions_on_counters) {
  enum { N = 20000 };
  uint64_t *his = malloc(N * sizeof(*his));
  for (uint64_t i = 0; i < N; i++) his[i] = symmpin_comm_key_of_bytes(&i, sizeof(i)).hi;
  for (int i = 0; i < N; i++)
    for (int j = i + 1; j < N; j++) cr_assert_neq(his[i], his[j], "keys %d and %d collide", i, j);
  free(his);
}

Test(comm_key, split_differs_per_color_and_counter) {
  symmpin_comm_key parent = symmpin_comm_key_of_bytes("unique-id", 9);
  enum { COLORS = 64, SPLITS = 8 };
  symmpin_comm_key keys[COLORS * SPLITS];
  for (int s = 0; s < SPLITS; s++)
    for (int c = 0; c < COLORS; c++) {
      symmpin_comm_key k = symmpin_comm_key_split(parent, (uint64_t)s, (uint64_t)c);
      cr_assert(k.hi != parent.hi || k.lo != parent.lo);
      symmpin_comm_key again = symmpin_comm_key_split(parent, (uint64_t)s, (uint64_t)c);
      cr_assert(k.hi == again.hi && k.lo == again.lo, "split is deterministic");
      keys[s * COLORS + c] = k;
    }
  for (int i = 0; i < COLORS * SPLITS; i++)
    for (int j = i + 1; j < COLORS * SPLITS; j++)
      cr_assert(keys[i].hi != keys[j].hi || keys[i].lo != keys[j].lo, "%d vs %d", i, j);
  /* Swapping counter and color is a different split. */
  symmpin_comm_key a = symmpin_comm_key_split(parent, 1, 2), b = symmpin_comm_key_split(parent, 2, 1);
  cr_assert(a.hi != b.hi || a.lo != b.lo);
}

/* ---- path patterns ---- */

Test(path, expand) {
  char out[128];
  cr_assert_eq(symmpin_path_expand("/t/%h-%p-r%r.trace", 3, 1234, "gpu1", out, sizeof(out), NULL, 0),
               SYMMPIN_OK);
  cr_assert_str_eq(out, "/t/gpu1-1234-r3.trace");
  cr_assert_eq(symmpin_path_expand("r%r_100%%", -1, 1, "h", out, sizeof(out), NULL, 0), SYMMPIN_OK);
  cr_assert_str_eq(out, "ru_100%");
  cr_assert_eq(symmpin_path_expand("bad%q", 0, 1, "h", out, sizeof(out), NULL, 0), SYMMPIN_ERR_INVALID);
  cr_assert_eq(symmpin_path_expand("trailing%", 0, 1, "h", out, sizeof(out), NULL, 0),
               SYMMPIN_ERR_INVALID);
  char small[8];
  cr_assert_eq(symmpin_path_expand("%h", 0, 1, "a-very-long-host", small, sizeof(small), NULL, 0),
               SYMMPIN_ERR_INVALID);
  cr_assert_eq(symmpin_path_expand("1234567", 0, 1, "h", small, sizeof(small), NULL, 0), SYMMPIN_OK);
  cr_assert_str_eq(small, "1234567");
}

Test(path, short_host_name_has_no_dot) {
  char h[64];
  symmpin_host_short_name(h, sizeof h);
  cr_assert_gt(strlen(h), 0u);
  cr_assert_null(strchr(h, '.'));
  char tiny[3];
  symmpin_host_short_name(tiny, sizeof tiny);
  cr_assert_leq(strlen(tiny), 2u);
}

/* ---- the logger ---- */

static char *log_to_file(void (*emit)(void)) {
  char path[] = "/tmp/symmpin-log-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  symmpin_log_configure(SYMMPIN_LOG_INFO, fd);
  emit();
  symmpin_log_configure(SYMMPIN_LOG_WARN, 2);
  static char buf[4096];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  cr_assert_gt(n, 0);
  buf[n] = '\0';
  close(fd);
  unlink(path);
  return buf;
}

static void emit_lines(void) {
  symmpin_log_set_device(3);
  SYMMPIN_INFO("hello %d", 42);
  SYMMPIN_TRACE("not shown at INFO");
  SYMMPIN_WARN("careful");
  symmpin_log_set_device(-1);
}

Test(log, lines_have_the_prefix_and_respect_the_level) {
  char *out = log_to_file(emit_lines);
  char pid[32];
  snprintf(pid, sizeof pid, ":%d:", (int)getpid());
  cr_assert_not_null(strstr(out, pid), "%s", out);
  cr_assert_not_null(strstr(out, "[3] symmpin INFO hello 42\n"), "%s", out);
  cr_assert_null(strstr(out, "not shown"), "%s", out);
  cr_assert_not_null(strstr(out, "symmpin WARN test_common.c:"), "WARN names its origin: %s", out);
}

static void emit_tool(void) {
  symmpin_log_set_tool("symmpin-replay");
  SYMMPIN_WARN("bad trace");
  SYMMPIN_INFO("note");
  symmpin_log_set_tool(NULL);
}

Test(log, tool_mode_reads_like_a_command_line_tool) {
  char *out = log_to_file(emit_tool);
  cr_assert_str_eq(out, "symmpin-replay: warning: bad trace\nsymmpin-replay: note\n");
}
