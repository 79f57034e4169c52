/* Minimal logging for libvgpu: formats into a stack buffer and writes one line with write(2).
 * LIBCUDA_LOG_LEVEL (upstream's contract): 0 silent, 1 errors, 2 warnings (default), 3 info, 4
 * debug. */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "vgpu/vgpu_core.h"

int vgpu_log_level = VGPU_LOG_WARN;

void vgpu_log(int level, const char* fmt, ...) {
  static const char* const kNames[] = {"", "ERROR", "WARN", "INFO", "DEBUG"};
  char buf[512];
  int n = snprintf(buf, sizeof(buf), "[libvgpu %d] %s ", (int)getpid(),
                   kNames[level >= 1 && level <= 4 ? level : 0]);
  if (n < 0) return;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof(buf) - 2) len = sizeof(buf) - 2;
  buf[len++] = '\n';
  ssize_t w = write(2, buf, len);
  (void)w;
}
