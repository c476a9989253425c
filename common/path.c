/* Path patterns and the short host name (path.h). */
#include "common/path.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

void symmpin_host_short_name(char *out, size_t cap) {
  if (cap == 0) return;
  if (gethostname(out, cap) != 0) snprintf(out, cap, "unknown");
  out[cap - 1] = '\0';
  char *dot = strchr(out, '.');
  if (dot) *dot = '\0';
}

symmpin_status symmpin_path_expand(const char *pattern, int rank, int pid, const char *host,
                                   char *out, size_t cap, char *why, size_t why_cap) {
  size_t o = 0;
  for (const char *p = pattern; *p; p++) {
    char num[24];
    const char *piece = num;
    if (*p != '%') {
      num[0] = *p;
      num[1] = '\0';
    } else {
      switch (*++p) {
      case 'r':
        if (rank < 0)
          piece = "u";
        else
          snprintf(num, sizeof num, "%d", rank);
        break;
      case 'p': snprintf(num, sizeof num, "%d", pid); break;
      case 'h': piece = host ? host : "unknown"; break;
      case '%': piece = "%"; break;
      default:
        if (why && why_cap)
          snprintf(why, why_cap, "'%s': unknown escape '%%%c' (use %%r %%p %%h %%%%)", pattern,
                   *p ? *p : ' ');
        return SYMMPIN_ERR_INVALID;
      }
    }
    size_t len = strlen(piece);
    if (o + len >= cap) {
      if (why && why_cap) snprintf(why, why_cap, "'%s' expands past %zu bytes", pattern, cap);
      return SYMMPIN_ERR_INVALID;
    }
    memcpy(out + o, piece, len);
    o += len;
  }
  if (cap == 0) return SYMMPIN_ERR_INVALID;
  out[o] = '\0';
  return SYMMPIN_OK;
}
