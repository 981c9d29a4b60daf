/* User namespaces from id mappings and idmapped mounts; see husk/idmap.h.
 * The helper child runs async-signal-safe calls only: huskd, which uses
 * this, is multi-threaded. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/idmap.h"
#include "husk/util.h"

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif

/* The kernel's struct mount_attr (MOUNT_ATTR_SIZE_VER0). */
struct idmap_mount_attr
{
  uint64_t attr_set, attr_clr, propagation, userns_fd;
};

int
husk_id_map_write (pid_t pid, const char *file, const struct husk_id_map *maps, size_t n,
                   struct husk_error **err)
{
  cleanup_free char *path = xasprintf ("/proc/%d/%s", (int) pid, file);
  char text[4096];
  size_t len = 0;

  for (size_t i = 0; i < n; i++)
    {
      int w = snprintf (text + len, sizeof text - len, "%u %u %u\n", maps[i].container_id, maps[i].host_id,
                        maps[i].size);
      if (w < 0 || (size_t) w >= sizeof text - len)
        return husk_error_make (err, E2BIG, "write `%s`: %zu mappings", path, n);
      len += (size_t) w;
    }
  return husk_write_file (path, text, len, err);
}

/* The child: a user namespace of its own, then it waits for EOF on
 * HOLD_FD (the parent has written the maps and opened the namespace). */
static void __attribute__ ((noreturn)) userns_child (int ready_fd, int hold_fd)
{
  char byte = unshare (CLONE_NEWUSER) == 0 ? 0 : 1;

  (void) !write (ready_fd, &byte, 1);
  (void) !read (hold_fd, &byte, 1);
  _exit (0);
}

static int
userns_of_child (pid_t pid, int ready_fd, const struct husk_id_map *uids, size_t n_uids,
                 const struct husk_id_map *gids, size_t n_gids, struct husk_error **err)
{
  cleanup_free char *ns_path = xasprintf ("/proc/%d/ns/user", (int) pid);
  char byte = 1;
  int fd;

  if (read (ready_fd, &byte, 1) != 1 || byte != 0)
    return husk_error_make (err, 0, "create a user namespace for the id mappings: unshare failed");
  if (husk_id_map_write (pid, "uid_map", uids, n_uids, err) < 0
      || husk_id_map_write (pid, "gid_map", gids, n_gids, err) < 0)
    return -1;
  fd = open (ns_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return husk_error_make (err, errno, "open `%s`", ns_path);
  return fd;
}

int
husk_userns_open (const struct husk_id_map *uids, size_t n_uids, const struct husk_id_map *gids,
                  size_t n_gids, struct husk_error **err)
{
  int ready[2], hold[2], fd;
  pid_t pid;

  if (pipe2 (ready, O_CLOEXEC) < 0)
    return husk_error_make (err, errno, "pipe");
  if (pipe2 (hold, O_CLOEXEC) < 0)
    {
      close (ready[0]);
      close (ready[1]);
      return husk_error_make (err, errno, "pipe");
    }
  pid = fork ();
  if (pid == 0)
    {
      close (hold[1]);
      userns_child (ready[1], hold[0]);
    }
  close (ready[1]);
  close (hold[0]);
  fd = pid < 0 ? husk_error_make (err, errno, "fork")
               : userns_of_child (pid, ready[0], uids, n_uids, gids, n_gids, err);
  close (ready[0]);
  close (hold[1]);
  while (pid > 0 && waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
  return fd;
}

const char *
husk_fs_type_name (const char *path)
{
  static const struct
  {
    unsigned long magic;
    const char *name;
  } names[] = {
    { 0xEF53, "ext4" },      { 0x01021994, "tmpfs" },    { 0x794c7630, "overlay" }, { 0x58465342, "xfs" },
    { 0x9123683E, "btrfs" }, { 0x6969, "nfs" },          { 0x65735546, "fuse" },    { 0x62656572, "sysfs" },
    { 0x9fa0, "proc" },      { 0x2fc12fc1, "zfs" },      { 0xF2F52010, "f2fs" },    { 0x858458f6, "ramfs" },
    { 0x01021997, "9p" },    { 0x73717368, "squashfs" },
  };
  struct statfs sfs;

  if (statfs (path, &sfs) < 0)
    return "unknown";
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if ((unsigned long) sfs.f_type == names[i].magic)
      return names[i].name;
  return "unknown";
}

int
husk_mount_clone (const char *path, bool recursive, struct husk_error **err)
{
  unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0);
  int fd = (int) syscall (SYS_open_tree, AT_FDCWD, path, flags);

  if (fd < 0)
    return husk_error_make (err, errno, "bind `%s`: clone the mount", path);
  return fd;
}

int
husk_idmap_clone (const char *path, bool recursive, int userns_fd, struct husk_error **err)
{
  struct idmap_mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t) userns_fd };
  cleanup_close int fd = -1;
  unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0);

  fd = (int) syscall (SYS_open_tree, AT_FDCWD, path, flags);
  if (fd < 0)
    return husk_error_make (err, errno, "idmapped mount of `%s`: clone the mount", path);
  if (syscall (SYS_mount_setattr, fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr, sizeof attr)
      < 0)
    {
      int saved = errno;
      if (saved == EINVAL || saved == ENOSYS || saved == EOPNOTSUPP)
        return husk_error_make (err, saved,
                                "idmapped mount of `%s`: the kernel does not support idmapped mounts on "
                                "this %s filesystem",
                                path, husk_fs_type_name (path));
      return husk_error_make (err, saved, "idmapped mount of `%s` (%s)", path, husk_fs_type_name (path));
    }
  return steal_fd (&fd);
}

bool
husk_idmap_supported (const char *path)
{
  static const struct husk_id_map probe = { 0, 65536, 65536 };
  struct husk_error *err = NULL;
  int userns_fd = husk_userns_open (&probe, 1, &probe, 1, &err);
  int fd = userns_fd < 0 ? -1 : husk_idmap_clone (path, false, userns_fd, &err);

  husk_error_free (&err);
  if (fd >= 0)
    close (fd);
  if (userns_fd >= 0)
    close (userns_fd);
  return fd >= 0;
}
