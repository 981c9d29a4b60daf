/* Paths inside the container's rootfs: resolved with openat2
 * RESOLVE_IN_ROOT, and created one component at a time when asked, a
 * symlink met on the way followed inside the rootfs.  The floor under the
 * mounts (rootfs.c) and /dev (rootfs_dev.c). */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/rootfs.h"
#include "runtime/rootfs_internal.h"

/* As Linux counts symlinks in one path walk (MAXSYMLINKS). */
#define ROOTFS_MAX_SYMLINKS 40

static int
openat2_in_root (int root_fd, const char *rel_path, int flags)
{
  struct open_how how = {
    .flags = (uint64_t) (flags | O_CLOEXEC),
    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
  };

  if (*rel_path == '\0')
    rel_path = ".";
  for (int attempt = 0; attempt < 32; attempt++)
    {
      long fd = syscall (SYS_openat2, root_fd, rel_path, &how, sizeof how);
      /* EAGAIN: a concurrent rename made ".." resolution unsafe; retry. */
      if (fd >= 0 || (errno != EAGAIN && errno != EINTR))
        return (int) fd;
    }
  return -1;
}

static int
make_entry (int parent_fd, const char *name, enum rootfs_create kind)
{
  int fd;

  if (kind != ROOTFS_CREATE_FILE)
    return mkdirat (parent_fd, name, 0755);
  fd = openat (parent_fd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return -1;
  close (fd);
  return 0;
}

/* The component PATH[START..END) exists in PARENT_FD, yet the walk could
 * not enter it: a dangling symlink.  Returns the path to walk instead, the
 * target spliced in place of the link, or NULL when it is not a symlink. */
static char *
splice_symlink (int parent_fd, const char *name, const char *path, size_t start, size_t end)
{
  char target[PATH_MAX];
  ssize_t len = readlinkat (parent_fd, name, target, sizeof target - 1);

  if (len < 0)
    return NULL;
  target[len] = '\0';
  if (target[0] == '/')
    return xasprintf ("%s%s", target, path + end);
  return xasprintf ("%.*s/%s%s", (int) start, path, target, path + end);
}

/* Creates the missing component PATH[START..END) in PARENT_FD (a directory,
 * or what CREATE asks for when it is the last one) and opens it. */
static int
create_component (int root_fd, int parent_fd, const char *path, size_t start, size_t end,
                  enum rootfs_create create, char **retry_path)
{
  cleanup_free char *name = xasprintf ("%.*s", (int) (end - start), path + start);
  cleanup_free char *prefix = xasprintf ("%.*s", (int) end, path);
  bool last = path[end + strspn (path + end, "/")] == '\0';

  if (make_entry (parent_fd, name, last ? create : ROOTFS_CREATE_DIR) < 0)
    {
      if (errno != EEXIST)
        return -1;
      *retry_path = splice_symlink (parent_fd, name, path, start, end);
      if (*retry_path != NULL)
        return -1;
      /* Not a symlink: someone created it meanwhile; just open it. */
    }
  return openat2_in_root (root_fd, prefix + strspn (prefix, "/"), O_PATH);
}

/* One walk over PATH, component by component from the root, creating what
 * is missing in the fd of its already-resolved parent.  Returns the fd; or
 * -1 with *RETRY_PATH set when a dangling symlink must be followed by hand;
 * or -1 with errno set. */
static int
walk_creating (int root_fd, const char *path, enum rootfs_create create, char **retry_path)
{
  cleanup_close int parent_fd = openat2_in_root (root_fd, ".", O_PATH);
  size_t end = 0;

  while (parent_fd >= 0)
    {
      size_t start = end + strspn (path + end, "/");
      cleanup_free char *prefix = NULL;
      int child_fd;

      if (path[start] == '\0')
        break;
      end = start + strcspn (path + start, "/");
      prefix = xasprintf ("%.*s", (int) end, path);
      child_fd = openat2_in_root (root_fd, prefix + strspn (prefix, "/"), O_PATH);
      if (child_fd < 0 && errno == ENOENT)
        child_fd = create_component (root_fd, parent_fd, path, start, end, create, retry_path);
      husk_closep (&parent_fd);
      parent_fd = child_fd;
    }
  return steal_fd (&parent_fd);
}

int
rootfs_open_in_root (int root_fd, const char *path, enum rootfs_create create, struct husk_error **err)
{
  cleanup_free char *walk_path = xstrdup (path);
  int fd = openat2_in_root (root_fd, path + strspn (path, "/"), O_PATH);

  if (fd >= 0 || errno != ENOENT || create == ROOTFS_CREATE_NONE)
    return fd >= 0 ? fd : husk_error_make (err, errno, "resolve `%s` inside the rootfs", path);
  for (int hops = 0; hops <= ROOTFS_MAX_SYMLINKS; hops++)
    {
      char *retry_path = NULL;

      fd = walk_creating (root_fd, walk_path, create, &retry_path);
      if (fd >= 0)
        return fd;
      if (retry_path == NULL)
        return husk_error_make (err, errno, "create `%s` inside the rootfs", path);
      free (walk_path);
      walk_path = retry_path;
    }
  return husk_error_make (err, ELOOP, "create `%s` inside the rootfs", path);
}
