/* An LD_PRELOAD library that injects the filesystem faults of real clusters
 * into an unchanged dlscale binary, for the reliability tests:
 *
 *   DLSCALE_FAULT_RANK=R          only in the process whose OMPI_COMM_WORLD_RANK
 *                                 (or SLURM_PROCID) is R; unset: every process
 *   DLSCALE_FAULT_OPEN_EIO=TEXT   open() of a path containing TEXT fails with EIO
 *                                 (a stale NFS handle, a dead storage target)
 *   DLSCALE_FAULT_CLOSE_EIO=TEXT  close() of such a file closes it but returns
 *                                 EIO (NFS reports deferred write errors there)
 *   DLSCALE_FAULT_ENOSPC=TEXT:N   writes to such files fail with ENOSPC once N
 *                                 bytes in all were written to them (disk full)
 *
 * The path of an fd comes from /proc/self/fd, so nothing needs to track opens. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static int applies(void) {
  const char* want = getenv("DLSCALE_FAULT_RANK");
  if (!want) return 1;
  const char* rank = getenv("OMPI_COMM_WORLD_RANK");
  if (!rank) rank = getenv("SLURM_PROCID");
  return rank && strcmp(rank, want) == 0;
}

static int path_matches(const char* path, const char* variable) {
  const char* text = getenv(variable);
  return text && *text && path && strstr(path, text) && applies();
}

static int fd_matches(int fd, const char* text) {
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  return strstr(path, text) != NULL;
}

/* DLSCALE_FAULT_ENOSPC: TEXT before the last ':', N after it. */
static int out_of_space(int fd, size_t count) {
  static long long written = 0;
  const char* spec = getenv("DLSCALE_FAULT_ENOSPC");
  if (!spec || !applies()) return 0;
  const char* colon = strrchr(spec, ':');
  if (!colon) return 0;
  char text[1024];
  size_t len = (size_t)(colon - spec) < sizeof text - 1 ? (size_t)(colon - spec) : sizeof text - 1;
  memcpy(text, spec, len);
  text[len] = '\0';
  if (!fd_matches(fd, text)) return 0;
  if (written + (long long)count > atoll(colon + 1)) return 1;
  written += (long long)count;
  return 0;
}

#define REAL(name)                               \
  static __typeof__(&name) real_##name = NULL; \
  if (!real_##name) real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

static mode_t mode_of(int flags, va_list args) { return (flags & (O_CREAT | O_TMPFILE)) ? va_arg(args, mode_t) : 0; }

int open(const char* path, int flags, ...) {
  REAL(open);
  va_list args;
  va_start(args, flags);
  mode_t mode = mode_of(flags, args);
  va_end(args);
  if (path_matches(path, "DLSCALE_FAULT_OPEN_EIO")) return errno = EIO, -1;
  return real_open(path, flags, mode);
}

int open64(const char* path, int flags, ...) {
  REAL(open64);
  va_list args;
  va_start(args, flags);
  mode_t mode = mode_of(flags, args);
  va_end(args);
  if (path_matches(path, "DLSCALE_FAULT_OPEN_EIO")) return errno = EIO, -1;
  return real_open64(path, flags, mode);
}

int openat(int dirfd, const char* path, int flags, ...) {
  REAL(openat);
  va_list args;
  va_start(args, flags);
  mode_t mode = mode_of(flags, args);
  va_end(args);
  if (path_matches(path, "DLSCALE_FAULT_OPEN_EIO")) return errno = EIO, -1;
  return real_openat(dirfd, path, flags, mode);
}

int close(int fd) {
  REAL(close);
  const char* text = getenv("DLSCALE_FAULT_CLOSE_EIO");
  int fail = text && *text && applies() && fd_matches(fd, text);
  int rc = real_close(fd);
  if (fail && rc == 0) return errno = EIO, -1;
  return rc;
}

ssize_t write(int fd, const void* buf, size_t count) {
  REAL(write);
  if (out_of_space(fd, count)) return errno = ENOSPC, -1;
  return real_write(fd, buf, count);
}

ssize_t pwrite(int fd, const void* buf, size_t count, off_t offset) {
  REAL(pwrite);
  if (out_of_space(fd, count)) return errno = ENOSPC, -1;
  return real_pwrite(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void* buf, size_t count, off_t offset) {
  REAL(pwrite64);
  if (out_of_space(fd, count)) return errno = ENOSPC, -1;
  return real_pwrite64(fd, buf, count, offset);
}
