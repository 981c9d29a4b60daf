/* CVE-2019-5736: a container process that execs /proc/self/exe while husk's
 * code still runs inside it would reach the host's husk binary and could
 * overwrite it.  So create, run and exec first re-execute husk from a
 * sealed memfd copy: /proc/self/exe then points at an immutable,
 * anonymous file.
 *
 * A binary that was executed through a read-only mount needs no copy: the
 * write would have to reopen /proc/PID/exe, and that reopen goes through
 * the same read-only mount (EROFS), as with runc 1.2's private read-only
 * overlay of its binary.  A node that bind-mounts husk read-only over
 * itself (`mount --bind /usr/bin/husk /usr/bin/husk; mount -o
 * remount,bind,ro /usr/bin/husk`), or ships it on a read-only /usr, saves
 * the second exec (~2.5 ms of a 18.5 ms `run` here). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/container.h"

#define REQUIRED_SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

extern char **environ;

/* A sealed memfd (our own copy, or one bind-mounted over the binary), or
 * a file on a read-only mount. */
static bool
running_from_protected_exe (void)
{
  cleanup_close int fd = open ("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  struct statvfs fs;
  int seals;

  if (fd < 0)
    return false;
  seals = fcntl (fd, F_GET_SEALS);
  if (seals >= 0 && (seals & REQUIRED_SEALS) == REQUIRED_SEALS)
    return true;
  return fstatvfs (fd, &fs) == 0 && (fs.f_flag & ST_RDONLY);
}

static int
copy_to_memfd (int src, struct husk_error **err)
{
  cleanup_close int memfd = memfd_create ("husk", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  struct stat st;
  off_t offset = 0;

  if (memfd < 0)
    return husk_error_make (err, errno, "memfd_create for the husk binary");
  if (fstat (src, &st) < 0)
    return husk_error_make (err, errno, "stat /proc/self/exe");
  while (offset < st.st_size)
    {
      ssize_t n = sendfile (memfd, src, &offset, (size_t) (st.st_size - offset));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return husk_error_make (err, n < 0 ? errno : EIO, "copy the husk binary to a memfd");
    }
  if (fcntl (memfd, F_ADD_SEALS, REQUIRED_SEALS) < 0)
    return husk_error_make (err, errno, "seal the husk binary memfd");
  return steal_fd (&memfd);
}

int
container_ensure_cloned_binary (char **argv, struct husk_error **err)
{
  cleanup_close int exe = -1;
  cleanup_close int memfd = -1;

  if (running_from_protected_exe ())
    return 0;
  exe = open ("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (exe < 0)
    return husk_error_make (err, errno, "open /proc/self/exe");
  memfd = copy_to_memfd (exe, err);
  if (memfd < 0)
    return -1;
  fexecve (memfd, argv, environ);
  return husk_error_make (err, errno, "re-exec husk from its sealed copy");
}
