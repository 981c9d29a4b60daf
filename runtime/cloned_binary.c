/* CVE-2019-5736: a container process that execs /proc/self/exe while husk's
 * code still runs inside it would reach the host's husk binary and could
 * overwrite it.  So create, run and exec first re-execute husk from a file
 * that cannot be written:
 *
 * - The binary opened through a private overlayfs mount of its directory
 *   that is read-only and attached nowhere (as runc 1.2 does): the write
 *   would have to reopen /proc/PID/exe, and that reopen goes through the
 *   read-only mount (EROFS); no mount namespace holds the mount, so nothing
 *   can remount it, and the file shares the binary's page cache: no copy
 *   (45 us where the memfd copy of the 1.3 MB static husk took 260 us).
 *   It takes CAP_SYS_ADMIN and fsopen (Linux 5.2).
 * - Else a sealed memfd copy: /proc/self/exe then points at an immutable,
 *   anonymous file.
 *
 * A binary that was executed through a read-only mount needs neither, for
 * the same reason as the overlay.  A node that bind-mounts husk read-only
 * over itself (`mount --bind /usr/bin/husk /usr/bin/husk; mount -o
 * remount,bind,ro /usr/bin/husk`), or ships it on a read-only /usr, saves
 * the second exec (~1.5 ms of a 15 ms `run` here).  husk-monitor execs the
 * husk beside it through container_exec_sealed for the same saving. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
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
bool
container_running_from_sealed_exe (void)
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
copy_to_memfd (int src, const char *path, struct husk_error **err)
{
  cleanup_close int memfd = memfd_create ("husk", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  struct stat st;
  off_t offset = 0;

  if (memfd < 0)
    return husk_error_make (err, errno, "memfd_create for a sealed copy of `%s`", path);
  if (fstat (src, &st) < 0)
    return husk_error_make (err, errno, "stat `%s`", path);
  while (offset < st.st_size)
    {
      ssize_t n = sendfile (memfd, src, &offset, (size_t) (st.st_size - offset));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return husk_error_make (err, n < 0 ? errno : EIO, "copy `%s` to a memfd", path);
    }
  if (fcntl (memfd, F_ADD_SEALS, REQUIRED_SEALS) < 0)
    return husk_error_make (err, errno, "seal the memfd copy of `%s`", path);
  return steal_fd (&memfd);
}

/* Whether FD is the file PATH names: for /proc/self/exe, the running
 * binary.  overlayfs gives a lower file's inode number through. */
static bool
same_file (int fd, const char *path)
{
  struct stat opened, named;

  return fstat (fd, &opened) == 0 && stat (path, &named) == 0 && opened.st_ino == named.st_ino
         && opened.st_size == named.st_size && opened.st_mtim.tv_sec == named.st_mtim.tv_sec
         && opened.st_mtim.tv_nsec == named.st_mtim.tv_nsec;
}

/* The binary at PATH through a new overlayfs of its directory, mounted
 * read-only nowhere; -1 (errno) where this kernel or this process cannot
 * make one.  Without an upper layer overlayfs wants two lower ones: the
 * binary's directory on top, then /dev (any directory that cannot overlap
 * it would do; the name is looked up in the top layer first). */
static int
open_through_private_overlay (const char *path)
{
  char exe[PATH_MAX];
  cleanup_close int ctx = -1;
  cleanup_close int mnt = -1;
  cleanup_free char *lower = NULL;
  char *slash;
  int fd;

  /* The kernel's own name of our binary is already absolute and free of
   * symlinks: one readlink where realpath would read every component. */
  if (strcmp (path, "/proc/self/exe") == 0)
    {
      ssize_t n = readlink (path, exe, sizeof exe - 1);

      if (n <= 0)
        return -1;
      if ((size_t) n == sizeof exe - 1)
        {
          errno = ENAMETOOLONG; /* maybe cut short */
          return -1;
        }
      exe[n] = '\0';
      /* Replaced or removed since we started: the copy is of the file
       * that runs. */
      if (husk_str_has_suffix (exe, " (deleted)"))
        {
          errno = ENOENT;
          return -1;
        }
    }
  else if (realpath (path, exe) == NULL)
    return -1;
  slash = strrchr (exe, '/');
  /* lowerdir's separators; a binary in / cannot have a directory of its
   * own. */
  if (slash == NULL || slash == exe || strpbrk (exe, ":,\\") != NULL)
    {
      errno = EINVAL;
      return -1;
    }
  *slash = '\0';
  lower = xasprintf ("%s:/dev", exe);
  ctx = fsopen ("overlay", FSOPEN_CLOEXEC);
  if (ctx < 0 || fsconfig (ctx, FSCONFIG_SET_STRING, "lowerdir", lower, 0) < 0)
    return -1;
  /* Off where the layers' filesystems differ, so that it logs nothing. */
  (void) fsconfig (ctx, FSCONFIG_SET_STRING, "xino", "off", 0);
  if (fsconfig (ctx, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
    return -1;
  mnt = fsmount (ctx, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID);
  if (mnt < 0)
    return -1;
  fd = openat (mnt, slash + 1, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  /* Renamed over, or something mounted over it, since PATH was read: the
   * memfd copy is made from PATH itself (the running file, for
   * /proc/self/exe). */
  if (fd >= 0 && !same_file (fd, path))
    {
      close (fd);
      errno = ESTALE;
      return -1;
    }
  return fd;
}

int
container_exec_sealed (const char *path, char **argv, struct husk_error **err)
{
  cleanup_close int exe = -1;
  cleanup_close int memfd = -1;
  cleanup_close int sealed = open_through_private_overlay (path);

  if (sealed >= 0)
    {
      fexecve (sealed, argv, environ);
      /* Exec refused on it (noexec somewhere?): the copy still works. */
    }
  exe = open (path, O_RDONLY | O_CLOEXEC);
  if (exe < 0)
    return husk_error_make (err, errno, "open `%s`", path);
  memfd = copy_to_memfd (exe, path, err);
  if (memfd < 0)
    return -1;
  fexecve (memfd, argv, environ);
  return husk_error_make (err, errno, "execute `%s` from its sealed copy", path);
}

int
container_ensure_cloned_binary (char **argv, struct husk_error **err)
{
  if (container_running_from_sealed_exe ())
    {
      husk_debug ("running from a sealed or read-only binary: no re-exec");
      return 0;
    }
  husk_debug ("re-executing from a sealed copy of the binary");
  return container_exec_sealed ("/proc/self/exe", argv, err);
}
