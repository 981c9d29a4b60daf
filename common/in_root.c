/* Resolving paths inside a directory tree an image or archive controls
 * (a container's rootfs), as if that directory were "/": openat2
 * RESOLVE_IN_ROOT, or the same walk in user space on kernels without it.
 * CDI's hooks, checkpoint restore and the log dirs use it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/in_root.h"
#include "husk/util.h"

/* As Linux counts symlinks in one path walk. */
#define IN_ROOT_MAX_SYMLINKS 40

static int
open_in_root_kernel (int root_fd, const char *rel_path, int flags)
{
  struct open_how how = {
    .flags = (uint64_t) (flags | O_CLOEXEC),
    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
  };
  long fd;

  if (*rel_path == '\0')
    rel_path = ".";
  /* EAGAIN: a concurrent rename made `..` unsafe to resolve; retry. */
  for (int attempt = 0; attempt < 32; attempt++)
    {
      fd = syscall (SYS_openat2, root_fd, rel_path, &how, sizeof how);
      if (fd >= 0 || (errno != EAGAIN && errno != EINTR))
        break;
    }
  return (int) fd;
}

int
husk_open_in_root (int root_fd, const char *path, int flags)
{
  int fd = open_in_root_kernel (root_fd, path + strspn (path, "/"), flags);

  if (fd < 0 && (errno == ENOSYS || errno == EPERM))
    /* No openat2 (before 5.6), or a seccomp filter that refuses it. */
    return husk_open_in_root_walk (root_fd, path, flags);
  return fd;
}

/* The walk's state: the directories entered so far (for `..`) and the
 * components still to resolve. */
struct walk
{
  int *dirs; /* dirs[0] is the root */
  size_t depth, cap;
  char *rest; /* owned */
  int links;
};

static int
walk_current (const struct walk *w)
{
  return w->dirs[w->depth];
}

static void
walk_pop_to (struct walk *w, size_t depth)
{
  while (w->depth > depth)
    close (w->dirs[w->depth--]);
}

static void
walk_push (struct walk *w, int fd)
{
  if (w->depth + 1 >= w->cap)
    {
      w->cap = w->cap ? w->cap * 2 : 16;
      w->dirs = xrealloc (w->dirs, w->cap * sizeof *w->dirs);
    }
  w->dirs[++w->depth] = fd;
}

/* NAME in the current directory is the symlink LINK_FD: splice its target
 * in front of what is left of the path. */
static int
walk_follow (struct walk *w, int link_fd, const char *after)
{
  char target[PATH_MAX];
  ssize_t n = readlinkat (link_fd, "", target, sizeof target - 1);
  char *rest;

  if (n < 0)
    return -1;
  if (++w->links > IN_ROOT_MAX_SYMLINKS)
    {
      errno = ELOOP;
      return -1;
    }
  target[n] = '\0';
  if (target[0] == '/')
    walk_pop_to (w, 0);
  rest = xasprintf ("%s%s", target, after);
  free (w->rest);
  w->rest = rest;
  return 0;
}

/* Resolves one component; returns 1 when it was the last one and *OUT is
 * the result, 0 to go on, -1 with errno. */
static int
walk_step (struct walk *w, int flags, int *out)
{
  char *name = w->rest + strspn (w->rest, "/");
  size_t len = strcspn (name, "/");
  const char *after = name + len;
  bool last = after[strspn (after, "/")] == '\0';
  cleanup_free char *component = xasprintf ("%.*s", (int) len, name);
  cleanup_close int fd = -1;
  struct stat st;

  if (len == 0 || strcmp (component, ".") == 0 || strcmp (component, "..") == 0)
    {
      if (strcmp (component, "..") == 0 && w->depth > 0)
        walk_pop_to (w, w->depth - 1);
      if (!last)
        {
          memmove (w->rest, after, strlen (after) + 1);
          return 0;
        }
      *out = openat (walk_current (w), ".", flags | O_CLOEXEC);
      return *out < 0 ? -1 : 1;
    }
  fd = openat (walk_current (w), component, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || fstat (fd, &st) < 0)
    return -1;
  /* A trailing slash asks for a directory: the link is followed. */
  if (S_ISLNK (st.st_mode) && !(last && (flags & O_NOFOLLOW) && *after == '\0'))
    return walk_follow (w, fd, after);
  if (last && *after != '\0' && !S_ISDIR (st.st_mode))
    {
      errno = ENOTDIR;
      return -1;
    }
  if (last)
    {
      *out = (flags & O_PATH) ? steal_fd (&fd)
                              : openat (walk_current (w), component, flags | O_NOFOLLOW | O_CLOEXEC);
      return *out < 0 ? -1 : 1;
    }
  if (!S_ISDIR (st.st_mode))
    {
      errno = ENOTDIR;
      return -1;
    }
  walk_push (w, steal_fd (&fd));
  memmove (w->rest, after, strlen (after) + 1);
  return 0;
}

int
husk_open_in_root_walk (int root_fd, const char *path, int flags)
{
  struct walk w = { .rest = xstrdup (path) };
  int root_copy = openat (root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  int result = -1, step = 0, saved_errno;

  if (root_copy < 0)
    {
      free (w.rest);
      return -1;
    }
  w.cap = 16;
  w.dirs = xmalloc (w.cap * sizeof *w.dirs);
  w.dirs[0] = root_copy;
  while (step == 0)
    step = walk_step (&w, flags, &result);
  saved_errno = errno;
  walk_pop_to (&w, 0);
  close (w.dirs[0]);
  free (w.dirs);
  free (w.rest);
  errno = saved_errno;
  return step == 1 ? result : -1;
}

/* The parent directory of PATH, PATH[0..END) inside the root. */
static int
open_prefix (int root_fd, const char *path, size_t end)
{
  cleanup_free char *prefix = xasprintf ("%.*s", (int) end, path);
  return husk_open_in_root (root_fd, prefix, O_PATH | O_DIRECTORY);
}

/* PATH[START..STOP) exists in PARENT_FD yet does not resolve: a dangling
 * symlink.  Returns PATH[0..END) with that component replaced by the
 * link's target, to be created instead (inside the root all the same). */
static char *
splice_dangling (int parent_fd, const char *path, size_t start, size_t stop, size_t end)
{
  cleanup_free char *name = xasprintf ("%.*s", (int) (stop - start), path + start);
  char target[PATH_MAX];
  ssize_t n = readlinkat (parent_fd, name, target, sizeof target - 1);

  if (n <= 0)
    return NULL;
  target[n] = '\0';
  if (target[0] == '/')
    return xasprintf ("%s%.*s", target, (int) (end - stop), path + stop);
  return xasprintf ("%.*s%s%.*s", (int) start, path, target, (int) (end - stop), path + stop);
}

/* Creates the directories of PATH[0..END) that are missing, one component
 * at a time, each in its already-resolved parent; a dangling symlink on
 * the way is followed (inside the root), as mkdir -p in the container
 * would.  HOPS counts the symlinks followed so. */
static int
mkdir_in_root (int root_fd, const char *path, size_t end, int hops, struct husk_error **err)
{
  size_t pos = 0;

  while (pos < end)
    {
      size_t start = pos + strspn (path + pos, "/");
      size_t stop = start + strcspn (path + start, "/");
      cleanup_close int fd = -1;

      if (stop > end)
        stop = end;
      if (start >= stop)
        break;
      fd = open_prefix (root_fd, path, stop);
      if (fd < 0 && errno == ENOENT)
        {
          cleanup_close int parent_fd = open_prefix (root_fd, path, start);
          cleanup_free char *name = xasprintf ("%.*s", (int) (stop - start), path + start);
          cleanup_free char *spliced = NULL;

          if (parent_fd < 0)
            return husk_error_make (err, errno, "`%.*s`", (int) start, path);
          if (mkdirat (parent_fd, name, 0755) < 0 && errno != EEXIST)
            return husk_error_make (err, errno, "create directory `%.*s`", (int) stop, path);
          fd = open_prefix (root_fd, path, stop);
          if (fd < 0 && errno == ENOENT
              && (spliced = splice_dangling (parent_fd, path, start, stop, end)) != NULL)
            {
              if (hops >= IN_ROOT_MAX_SYMLINKS)
                return husk_error_make (err, ELOOP, "create directory `%.*s`", (int) end, path);
              if (mkdir_in_root (root_fd, spliced, strlen (spliced), hops + 1, err) < 0)
                return -1;
              fd = open_prefix (root_fd, path, stop);
            }
        }
      if (fd < 0)
        return husk_error_make (err, errno, "`%.*s`", (int) stop, path);
      pos = stop;
    }
  return 0;
}

int
husk_open_parent_in_root (int root_fd, const char *path, bool create, char **name, struct husk_error **err)
{
  size_t len = strlen (path);
  size_t name_start;
  int fd;

  while (len > 1 && path[len - 1] == '/')
    len--;
  name_start = len;
  while (name_start > 0 && path[name_start - 1] != '/')
    name_start--;
  if (name_start == len)
    return husk_error_kind (err, EINVAL, "`%s`: names no entry", path);
  if (create && mkdir_in_root (root_fd, path, name_start, 0, err) < 0)
    return -1;
  fd = open_prefix (root_fd, path, name_start);
  if (fd < 0)
    return husk_error_make (err, errno, "parent of `%s`", path);
  *name = xasprintf ("%.*s", (int) (len - name_start), path + name_start);
  return fd;
}

/* ---- beneath a directory, no symlinks ------------------------------------ */

int
husk_open_beneath_walk (int dir_fd, const char *rel, int flags, mode_t mode)
{
  cleanup_close int cur = openat (dir_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  const char *p = rel;

  while (cur >= 0)
    {
      size_t n;
      p += strspn (p, "/");
      n = strcspn (p, "/");
      cleanup_free char *name = xasprintf ("%.*s", (int) n, p);
      bool last = p[n + strspn (p + n, "/")] == '\0';
      int next;

      if (strcmp (name, "..") == 0)
        {
          errno = EXDEV;
          return -1;
        }
      if (last)
        return openat (cur, n ? name : ".", flags | O_NOFOLLOW | O_CLOEXEC, mode);
      next = openat (cur, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (next < 0)
        return -1;
      close (cur);
      cur = next;
      p += n;
    }
  return -1;
}

int
husk_open_beneath (int dir_fd, const char *rel, int flags, mode_t mode)
{
  struct open_how how = {
    .flags = (uint64_t) (flags | O_CLOEXEC),
    .mode = (flags & O_CREAT) ? mode : 0,
    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
  };
  long fd;

  for (int attempt = 0; attempt < 32; attempt++)
    {
      fd = syscall (SYS_openat2, dir_fd, *rel ? rel : ".", &how, sizeof how);
      if (fd >= 0 || (errno != EAGAIN && errno != EINTR))
        break;
    }
  if (fd < 0 && (errno == ENOSYS || errno == EPERM))
    return husk_open_beneath_walk (dir_fd, rel, flags, mode);
  return (int) fd;
}

int
husk_mkdir_beneath (int dir_fd, const char *rel, mode_t mode, struct husk_error **err)
{
  cleanup_close int cur = openat (dir_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  const char *p = rel;

  if (cur < 0)
    return husk_error_make (err, errno, "open the directory of `%s`", rel);
  while (*(p += strspn (p, "/")) != '\0')
    {
      size_t n = strcspn (p, "/");
      cleanup_free char *name = xasprintf ("%.*s", (int) n, p);
      int shown = (int) (p + n - rel), next;

      if (strcmp (name, "..") == 0)
        return husk_error_kind (err, EINVAL, "`%s`: `..` would leave its directory", rel);
      if (mkdirat (cur, name, mode) < 0 && errno != EEXIST)
        return husk_error_make (err, errno, "create directory `%.*s`", shown, rel);
      next = openat (cur, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (next < 0 && (errno == ENOTDIR || errno == ELOOP))
        return husk_error_kind (err, ELOOP, "`%.*s`: a symlink or not a directory: refused", shown, rel);
      if (next < 0)
        return husk_error_make (err, errno, "open directory `%.*s`", shown, rel);
      close (cur);
      cur = next;
      p += n;
    }
  return 0;
}
