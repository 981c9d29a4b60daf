/* Layer unpack.  One libarchive reader decompresses the blob (raw format,
 * gzip/zstd filters); a second parses the tar out of it through a read
 * callback that also hashes every decompressed byte, so the diffID costs no
 * second pass.  Entries are written with *at() calls relative to fds that
 * were opened inside the target with RESOLVE_IN_ROOT. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/unpack.h"

#define WHITEOUT_PREFIX ".wh."
#define WHITEOUT_META_PREFIX ".wh..wh."
#define WHITEOUT_OPAQUE ".wh..wh..opq"
#define OVERLAY_OPAQUE_XATTR "trusted.overlay.opaque"

struct dir_times
{
  char *path;
  struct timespec times[2];
};

struct unpacker
{
  char *label; /* "layer sha256:…", the start of every message */
  int root_fd;
  struct archive *decompressed; /* blob -> decompressed bytes */
  struct archive *tar;          /* decompressed bytes -> entries */
  struct digest_ctx *diff_hash;
  uint64_t uncompressed;
  uint64_t max_bytes;                 /* 0: no limit */
  atomic_uint_least64_t *total_bytes; /* shared with the image's other layers */
  atomic_uint_least64_t own_bytes;
  uint64_t entries;
  struct dir_times *dirs; /* directory mtimes, applied last */
  size_t n_dirs, cap_dirs;
};

/* One entry on its way to disk: where it goes and what it is. */
struct target
{
  const char *path; /* cleaned, relative to the root ("" is the root) */
  const char *base; /* last component, or "." for the root */
  int parent_fd;
  struct archive_entry *entry;
};

/* The walk below stands in for openat2 where the kernel (before 5.6) or a
 * tool (valgrind) lacks it: the same rules, one component at a time.  It is
 * only as race-free as the tree is quiet, which holds for a layer being
 * unpacked and an image rootfs before its container runs. */
#define MAX_SYMLINK_HOPS 40

struct walk
{
  int *fds; /* fds[0] is the root; fds[depth] the current directory */
  size_t depth, cap;
};

static void
walk_push (struct walk *w, int fd)
{
  if (w->depth + 1 == w->cap)
    {
      w->cap *= 2;
      w->fds = xrealloc (w->fds, w->cap * sizeof *w->fds);
    }
  w->fds[++w->depth] = fd;
}

static void
walk_pop_to (struct walk *w, size_t depth)
{
  while (w->depth > depth)
    close (w->fds[w->depth--]);
}

/* Splices a symlink's target in front of the rest of the path. */
static int
walk_follow (struct walk *w, const char *name, char **rest)
{
  char target[PATH_MAX];
  ssize_t n = readlinkat (w->fds[w->depth], name, target, sizeof target - 1);
  char *joined;

  if (n < 0)
    return -1;
  target[n] = '\0';
  if (target[0] == '/')
    walk_pop_to (w, 0);
  joined = xasprintf ("%s/%s", target, *rest);
  free (*rest);
  *rest = joined;
  return 0;
}

static int
walk_step (struct walk *w, const char *name, bool last, int flags, char **rest, int *hops)
{
  struct stat st;
  int fd;

  if (strcmp (name, "..") == 0)
    {
      walk_pop_to (w, w->depth ? w->depth - 1 : 0);
      return 0;
    }
  if (fstatat (w->fds[w->depth], name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return -1;
  if (S_ISLNK (st.st_mode) && (!last || !(flags & O_NOFOLLOW)))
    {
      if (++*hops > MAX_SYMLINK_HOPS)
        return errno = ELOOP, -1;
      return walk_follow (w, name, rest);
    }
  fd = openat (w->fds[w->depth], name, last ? flags : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -1;
  walk_push (w, fd);
  return 1; /* opened */
}

static int
open_in_root_walk (int root_fd, const char *path, int flags)
{
  struct walk w = { .fds = xmalloc (8 * sizeof (int)), .cap = 8 };
  char *rest = xstrdup (path);
  bool opened_last = false;
  int hops = 0, ret = 0, fd = -1;

  w.fds[0] = root_fd;
  while (ret >= 0 && *rest)
    {
      size_t len = strcspn (rest, "/");
      char *name = xasprintf ("%.*s", (int) len, rest);
      char *tail = xstrdup (rest + len + strspn (rest + len, "/"));
      bool last = *tail == '\0';

      free (rest);
      rest = tail;
      ret = *name && strcmp (name, ".") != 0 ? walk_step (&w, name, last, flags, &rest, &hops) : 0;
      opened_last = ret == 1 && last && *rest == '\0';
      free (name);
    }
  if (ret >= 0 && opened_last)
    fd = w.fds[w.depth--];
  else if (ret >= 0)
    fd = openat (w.fds[w.depth], ".", flags);
  free (rest);
  walk_pop_to (&w, 0);
  free (w.fds);
  return fd;
}

int
unpack_openat_in_root (int root_fd, const char *path, int flags)
{
  struct open_how how = {
    .flags = (uint64_t) (flags | O_CLOEXEC),
    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
  };
  long fd;

  if (*path == '\0')
    path = ".";
  do
    fd = syscall (SYS_openat2, root_fd, path, &how, sizeof how);
  while (fd < 0 && (errno == EINTR || errno == EAGAIN));
  if (fd < 0 && errno == ENOSYS)
    return open_in_root_walk (root_fd, path, flags | O_CLOEXEC);
  return (int) fd;
}

static int
entry_error (struct unpacker *u, int errnum, const char *path, const char *fmt, const char *arg,
             struct husk_error **err)
{
  cleanup_free char *what = xasprintf (fmt, arg);
  return husk_error_make (err, errnum, "%s: entry \"%s\": %s", u->label, path, what);
}

/* Drops "." and empty components; refuses "..", absolute paths and
 * unnamed entries.  The result is relative to the layer root. */
static int
clean_path (struct unpacker *u, const char *raw, char **out, struct husk_error **err)
{
  cleanup_free char *copy = NULL;
  char *clean, *save = NULL;
  size_t used = 0;

  if (raw == NULL)
    return husk_error_make (err, 0, "%s: entry %llu has no usable name", u->label,
                            (unsigned long long) u->entries);
  if (raw[0] == '/')
    return entry_error (u, 0, raw, "%s", "path escapes the layer", err);
  copy = xstrdup (raw);
  clean = xmalloc (strlen (raw) + 1);
  clean[0] = '\0';
  for (char *comp = strtok_r (copy, "/", &save); comp; comp = strtok_r (NULL, "/", &save))
    {
      if (strcmp (comp, ".") == 0)
        continue;
      if (strcmp (comp, "..") == 0)
        {
          free (clean);
          return entry_error (u, 0, raw, "%s", "path escapes the layer", err);
        }
      used += (size_t) sprintf (clean + used, "%s%s", used ? "/" : "", comp);
    }
  *out = clean;
  return 0;
}

/* Creates the missing directories of PARENT one component at a time; a
 * component that exists but cannot be opened as a directory inside the root
 * is a symlink pointing nowhere useful, and is refused. */
static int
create_parents (struct unpacker *u, const char *entry_path, const char *parent, struct husk_error **err)
{
  cleanup_free char *prefix = xstrdup (parent);
  cleanup_close int cur_fd = dup (u->root_fd);
  char *slash = prefix;

  for (;;)
    {
      char *end = strchr (slash, '/');
      const char *name;
      int next_fd;

      if (end)
        *end = '\0';
      name = strrchr (prefix, '/') ? strrchr (prefix, '/') + 1 : prefix;
      next_fd = unpack_openat_in_root (u->root_fd, prefix, O_PATH | O_DIRECTORY);
      if (next_fd < 0 && errno == ENOENT)
        {
          struct stat st;
          if (fstatat (cur_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            return entry_error (u, 0, entry_path,
                                "parent \"%s\" is a symlink that does not resolve to a directory inside the "
                                "layer",
                                prefix, err);
          if (mkdirat (cur_fd, name, 0755) < 0 && errno != EEXIST)
            return entry_error (u, errno, entry_path, "create parent \"%s\"", prefix, err);
          next_fd = openat (cur_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
      if (next_fd < 0)
        return entry_error (u, errno, entry_path, "open parent \"%s\"", prefix, err);
      close (cur_fd);
      cur_fd = next_fd;
      if (end == NULL)
        return steal_fd (&cur_fd);
      *end = '/';
      slash = end + 1;
    }
}

static int
open_parent (struct unpacker *u, const char *entry_path, const char *parent, bool create,
             struct husk_error **err)
{
  int fd = unpack_openat_in_root (u->root_fd, parent, O_PATH | O_DIRECTORY);

  if (fd >= 0)
    return fd;
  if (errno == ENOTDIR)
    return entry_error (u, 0, entry_path, "parent \"%s\" is not a directory inside the layer", parent, err);
  if (errno != ENOENT || !create)
    return entry_error (u, errno, entry_path, "open parent \"%s\"", parent, err);
  return create_parents (u, entry_path, parent, err);
}

static char *
proc_path (int dir_fd, const char *name)
{
  return xasprintf ("/proc/self/fd/%d/%s", dir_fd, name);
}

/* Makes room for a new entry at BASE.  Returns 1 when an existing directory
 * should be kept (a directory entry over a directory merges), else 0. */
static int
replace_existing (struct unpacker *u, const struct target *t, bool new_is_dir, struct husk_error **err)
{
  struct stat st;

  if (fstatat (t->parent_fd, t->base, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : entry_error (u, errno, t->path, "%s", "stat existing entry", err);
  if (S_ISDIR (st.st_mode))
    {
      cleanup_free char *path = NULL;
      if (new_is_dir)
        return 1;
      path = proc_path (t->parent_fd, t->base);
      if (husk_rm_rf (path, err) < 0)
        return husk_error_wrap (err, "%s: entry \"%s\": replace directory", u->label, t->path);
      return 0;
    }
  if (unlinkat (t->parent_fd, t->base, 0) < 0)
    return entry_error (u, errno, t->path, "%s", "remove existing entry", err);
  return 0;
}

static bool
xattr_allowed (const char *name)
{
  /* trusted.overlay.* would let a layer forge overlayfs metadata
   * (redirects, metacopy); whiteouts and opaque dirs come from .wh. names. */
  if (husk_str_has_prefix (name, "trusted.overlay."))
    return false;
  return husk_str_has_prefix (name, "user.") || husk_str_has_prefix (name, "trusted.")
         || strcmp (name, "security.capability") == 0;
}

static int
apply_xattrs (struct unpacker *u, const struct target *t, mode_t type, struct husk_error **err)
{
  cleanup_free char *path = NULL;
  const char *name;
  const void *value;
  size_t size;

  if (archive_entry_xattr_reset (t->entry) == 0)
    return 0;
  path = proc_path (t->parent_fd, t->base);
  while (archive_entry_xattr_next (t->entry, &name, &value, &size) == ARCHIVE_OK)
    {
      /* The kernel keeps user.* to regular files and directories. */
      bool user_ok = type == AE_IFREG || type == AE_IFDIR;
      if (!xattr_allowed (name) || (husk_str_has_prefix (name, "user.") && !user_ok))
        {
          husk_debug ("%s: entry \"%s\": skipping xattr %s", u->label, t->path, name);
          continue;
        }
      if (lsetxattr (path, name, value, size, 0) < 0)
        return entry_error (u, errno, t->path, "set xattr %s", name, err);
    }
  return 0;
}

static void
entry_times (struct archive_entry *entry, struct timespec times[2])
{
  times[1].tv_sec = archive_entry_mtime (entry);
  times[1].tv_nsec = archive_entry_mtime_nsec (entry);
  times[0] = times[1];
  if (archive_entry_atime_is_set (entry))
    {
      times[0].tv_sec = archive_entry_atime (entry);
      times[0].tv_nsec = archive_entry_atime_nsec (entry);
    }
}

static void
defer_dir_times (struct unpacker *u, const struct target *t)
{
  if (u->n_dirs == u->cap_dirs)
    {
      u->cap_dirs = u->cap_dirs ? 2 * u->cap_dirs : 64;
      u->dirs = xrealloc (u->dirs, u->cap_dirs * sizeof *u->dirs);
    }
  u->dirs[u->n_dirs].path = xstrdup (t->path);
  entry_times (t->entry, u->dirs[u->n_dirs].times);
  u->n_dirs++;
}

/* chown first: it clears setuid bits and security.capability, which the
 * chmod and the xattrs then put back. */
static int
apply_metadata (struct unpacker *u, const struct target *t, mode_t type, struct husk_error **err)
{
  uid_t uid = (uid_t) archive_entry_uid (t->entry);
  gid_t gid = (gid_t) archive_entry_gid (t->entry);
  struct timespec times[2];

  if (fchownat (t->parent_fd, t->base, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
    return entry_error (u, errno, t->path, "%s", "chown", err);
  if (type != AE_IFLNK && fchmodat (t->parent_fd, t->base, archive_entry_perm (t->entry) & 07777, 0) < 0)
    return entry_error (u, errno, t->path, "%s", "chmod", err);
  if (apply_xattrs (u, t, type, err) < 0)
    return -1;
  if (type == AE_IFDIR)
    {
      defer_dir_times (u, t);
      return 0;
    }
  entry_times (t->entry, times);
  if (utimensat (t->parent_fd, t->base, times, AT_SYMLINK_NOFOLLOW) < 0)
    return entry_error (u, errno, t->path, "%s", "set times", err);
  return 0;
}

static int
write_data (struct unpacker *u, const struct target *t, int fd, struct husk_error **err)
{
  const void *buf;
  size_t size;
  la_int64_t offset;
  int r;

  while ((r = archive_read_data_block (u->tar, &buf, &size, &offset)) == ARCHIVE_OK)
    {
      const char *p = buf;
      while (size > 0)
        {
          ssize_t n = pwrite (fd, p, size, offset);
          if (n < 0 && errno == EINTR)
            continue;
          if (n < 0)
            return entry_error (u, errno, t->path, "%s", "write", err);
          p += n;
          size -= (size_t) n;
          offset += n;
        }
    }
  if (r != ARCHIVE_EOF)
    return entry_error (u, archive_errno (u->tar) > 0 ? archive_errno (u->tar) : 0, t->path, "read data: %s",
                        archive_error_string (u->tar), err);
  /* A sparse file may end in a hole. */
  if (ftruncate (fd, archive_entry_size (t->entry)) < 0)
    return entry_error (u, errno, t->path, "%s", "truncate", err);
  return 0;
}

static int
create_regular (struct unpacker *u, const struct target *t, struct husk_error **err)
{
  cleanup_close int fd = -1;

  if (replace_existing (u, t, false, err) < 0)
    return -1;
  fd = openat (t->parent_fd, t->base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return entry_error (u, errno, t->path, "%s", "create file", err);
  return write_data (u, t, fd, err);
}

static int
create_directory (struct unpacker *u, const struct target *t, struct husk_error **err)
{
  int kept;

  if (strcmp (t->base, ".") == 0)
    return 0; /* the layer root: only its metadata */
  kept = replace_existing (u, t, true, err);
  if (kept < 0)
    return -1;
  if (!kept && mkdirat (t->parent_fd, t->base, 0700) < 0)
    return entry_error (u, errno, t->path, "%s", "create directory", err);
  return 0;
}

static int
create_symlink (struct unpacker *u, const struct target *t, struct husk_error **err)
{
  const char *link_target = archive_entry_symlink (t->entry);

  if (link_target == NULL)
    return entry_error (u, 0, t->path, "%s", "symlink without a target", err);
  if (replace_existing (u, t, false, err) < 0)
    return -1;
  if (symlinkat (link_target, t->parent_fd, t->base) < 0)
    return entry_error (u, errno, t->path, "%s", "create symlink", err);
  return 0;
}

static int
create_node (struct unpacker *u, const struct target *t, struct husk_error **err)
{
  mode_t type = archive_entry_filetype (t->entry);

  if (replace_existing (u, t, false, err) < 0)
    return -1;
  if (mknodat (t->parent_fd, t->base, type | 0600, archive_entry_rdev (t->entry)) < 0)
    return entry_error (u, errno, t->path, "%s", "create device node", err);
  return 0;
}

static const struct
{
  mode_t type;
  int (*create) (struct unpacker *u, const struct target *t, struct husk_error **err);
} creators[] = {
  { AE_IFREG, create_regular }, { AE_IFDIR, create_directory }, { AE_IFLNK, create_symlink },
  { AE_IFCHR, create_node },    { AE_IFBLK, create_node },      { AE_IFIFO, create_node },
};

static int
extract_hardlink (struct unpacker *u, const struct target *t, const char *raw_link, struct husk_error **err)
{
  cleanup_free char *link_path = NULL;
  cleanup_close int link_parent_fd = -1;
  const char *link_base;

  if (clean_path (u, raw_link, &link_path, err) < 0)
    return husk_error_wrap (err, "%s: hardlink \"%s\"", u->label, t->path);
  if (strcmp (link_path, t->path) == 0)
    return 0;
  link_base = strrchr (link_path, '/') ? strrchr (link_path, '/') + 1 : link_path;
  if (link_base != link_path)
    link_path[link_base - link_path - 1] = '\0';
  link_parent_fd = open_parent (u, t->path, link_base == link_path ? "" : link_path, false, NULL);
  if (link_parent_fd < 0 || *link_base == '\0')
    return entry_error (u, 0, t->path, "hardlink to \"%s\", which is not in the layer", raw_link, err);
  if (replace_existing (u, t, false, err) < 0)
    return -1;
  if (linkat (link_parent_fd, link_base, t->parent_fd, t->base, 0) < 0)
    {
      if (errno == ENOENT)
        return entry_error (u, 0, t->path, "hardlink to \"%s\", which is not in the layer", raw_link, err);
      return entry_error (u, errno, t->path, "hardlink to \"%s\"", raw_link, err);
    }
  return 0;
}

static int
extract_whiteout (struct unpacker *u, const struct target *t, struct husk_error **err)
{
  const char *hidden = t->base + strlen (WHITEOUT_PREFIX);
  struct target hidden_target = *t;

  if (strcmp (t->base, WHITEOUT_OPAQUE) == 0)
    {
      cleanup_free char *dir_path = proc_path (t->parent_fd, ".");
      if (lsetxattr (dir_path, OVERLAY_OPAQUE_XATTR, "y", 1, 0) < 0)
        return entry_error (u, errno, t->path, "%s", "mark directory opaque", err);
      return 0;
    }
  if (husk_str_has_prefix (t->base, WHITEOUT_META_PREFIX))
    return 0; /* aufs bookkeeping (.wh..wh.plnk and friends) */
  if (*hidden == '\0' || strcmp (hidden, ".") == 0 || strcmp (hidden, "..") == 0)
    return entry_error (u, 0, t->path, "%s", "whiteout without a name", err);
  hidden_target.base = hidden;
  if (replace_existing (u, &hidden_target, false, err) < 0)
    return -1;
  if (mknodat (t->parent_fd, hidden, S_IFCHR | 0, makedev (0, 0)) < 0)
    return entry_error (u, errno, t->path, "%s", "create whiteout", err);
  return 0;
}

static int
extract_typed (struct unpacker *u, const struct target *t, struct husk_error **err)
{
  mode_t type = archive_entry_filetype (t->entry);

  for (size_t i = 0; i < sizeof creators / sizeof creators[0]; i++)
    if (creators[i].type == type)
      {
        if (creators[i].create (u, t, err) < 0)
          return -1;
        return apply_metadata (u, t, type, err);
      }
  husk_debug ("%s: entry \"%s\": skipping file type 0%o", u->label, t->path, (unsigned) type);
  return 0;
}

static int
extract_entry (struct unpacker *u, struct archive_entry *entry, struct husk_error **err)
{
  cleanup_free char *path = NULL;
  cleanup_free char *parent = NULL;
  cleanup_close int parent_fd = -1;
  const char *hardlink = archive_entry_hardlink (entry);
  const char *slash;
  struct target t = { .entry = entry };

  if (clean_path (u, archive_entry_pathname (entry), &path, err) < 0)
    return -1;
  slash = strrchr (path, '/');
  parent = xasprintf ("%.*s", slash ? (int) (slash - path) : 0, path);
  t.path = path;
  t.base = slash ? slash + 1 : (*path ? path : ".");
  if (*path == '\0' && (hardlink || archive_entry_filetype (entry) != AE_IFDIR))
    return entry_error (u, 0, archive_entry_pathname (entry), "%s", "the layer root is not a directory", err);
  parent_fd = open_parent (u, path, parent, true, err);
  if (parent_fd < 0)
    return -1;
  t.parent_fd = parent_fd;
  if (husk_str_has_prefix (t.base, WHITEOUT_PREFIX))
    return extract_whiteout (u, &t, err);
  if (hardlink)
    return extract_hardlink (u, &t, hardlink, err);
  return extract_typed (u, &t, err);
}

static int
apply_dir_times (struct unpacker *u, struct husk_error **err)
{
  for (size_t i = 0; i < u->n_dirs; i++)
    {
      cleanup_close int fd
          = unpack_openat_in_root (u->root_fd, u->dirs[i].path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
      if (fd < 0)
        continue; /* replaced by a later entry */
      if (futimens (fd, u->dirs[i].times) < 0)
        return entry_error (u, errno, u->dirs[i].path, "%s", "set times", err);
    }
  return 0;
}

/* Feeds the tar reader from the decompressor, hashing on the way. */
static la_ssize_t
read_decompressed (struct archive *tar, void *data, const void **buf)
{
  struct unpacker *u = data;
  size_t size = 0;
  la_int64_t offset;
  int r = archive_read_data_block (u->decompressed, buf, &size, &offset);

  if (r == ARCHIVE_EOF)
    return 0;
  if (r < ARCHIVE_WARN)
    {
      int errnum = archive_errno (u->decompressed);
      archive_set_error (tar, errnum > 0 ? errnum : EIO, "decompress: %s",
                         archive_error_string (u->decompressed));
      return -1;
    }
  if (u->max_bytes && atomic_fetch_add (u->total_bytes, size) + size > u->max_bytes)
    {
      char why[96]; /* libarchive's formatter knows no %llu */
      snprintf (why, sizeof why, "decompressed content passes the limit of %llu bytes per image",
                (unsigned long long) u->max_bytes);
      archive_set_error (tar, EFBIG, "%s", why);
      return -1;
    }
  digest_ctx_update (u->diff_hash, *buf, size);
  u->uncompressed += size;
  return (la_ssize_t) size;
}

/* The tar reader stops at the end-of-archive blocks; the diffID covers
 * every byte of the stream, padding included. */
static int
hash_rest (struct unpacker *u, struct husk_error **err)
{
  const void *buf;
  la_ssize_t n;

  while ((n = read_decompressed (u->tar, u, &buf)) > 0)
    ;
  if (n < 0)
    return husk_error_make (err, 0, "%s: %s", u->label, archive_error_string (u->tar));
  return 0;
}

static int
open_readers (struct unpacker *u, int blob_fd, struct husk_error **err)
{
  struct archive_entry *raw_entry;

  u->decompressed = archive_read_new ();
  u->tar = archive_read_new ();
  if (u->decompressed == NULL || u->tar == NULL)
    abort ();
  archive_read_support_filter_gzip (u->decompressed);
  archive_read_support_filter_zstd (u->decompressed);
  archive_read_support_format_raw (u->decompressed);
  if (archive_read_open_fd (u->decompressed, blob_fd, 256 * 1024) != ARCHIVE_OK
      || archive_read_next_header (u->decompressed, &raw_entry) != ARCHIVE_OK)
    return husk_error_make (err, 0, "%s: open: %s", u->label, archive_error_string (u->decompressed));
  archive_read_support_format_tar (u->tar);
  archive_read_support_format_empty (u->tar);
  if (archive_read_open (u->tar, u, NULL, read_decompressed, NULL) != ARCHIVE_OK)
    return husk_error_make (err, 0, "%s: read tar: %s", u->label, archive_error_string (u->tar));
  return 0;
}

static int
extract_all (struct unpacker *u, struct husk_error **err)
{
  struct archive_entry *entry;
  int r;

  while ((r = archive_read_next_header (u->tar, &entry)) == ARCHIVE_OK || r == ARCHIVE_WARN)
    {
      u->entries++;
      if (extract_entry (u, entry, err) < 0)
        return -1;
    }
  if (r != ARCHIVE_EOF)
    return husk_error_make (err, 0, "%s: read tar: %s", u->label, archive_error_string (u->tar));
  if (hash_rest (u, err) < 0 || apply_dir_times (u, err) < 0)
    return -1;
  return 0;
}

static void
unpacker_release (struct unpacker *u)
{
  if (u->tar)
    archive_read_free (u->tar);
  if (u->decompressed)
    archive_read_free (u->decompressed);
  digest_ctx_free (u->diff_hash);
  for (size_t i = 0; i < u->n_dirs; i++)
    free (u->dirs[i].path);
  free (u->dirs);
  free (u->label);
  if (u->root_fd >= 0)
    close (u->root_fd);
}

static int
check_diff_id (struct unpacker *u, const struct unpack_options *opts, struct unpack_stats *stats,
               struct husk_error **err)
{
  digest_ctx_finish (u->diff_hash, stats->diff_id);
  u->diff_hash = NULL;
  stats->entries = u->entries;
  stats->uncompressed_bytes = u->uncompressed;
  if (opts && opts->expected_diff_id && strcmp (opts->expected_diff_id, stats->diff_id) != 0)
    return husk_error_make (err, 0, "%s: uncompressed content is %s, but the image config says diff_id %s",
                            u->label, stats->diff_id, opts->expected_diff_id);
  return 0;
}

int
unpack_layer (const char *layer_blob_path, const char *target_dir, const struct unpack_options *opts,
              struct unpack_stats *stats, struct husk_error **err)
{
  struct unpacker u = { .root_fd = -1 };
  struct unpack_stats local_stats;
  cleanup_close int blob_fd = open (layer_blob_path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  int ret;

  if (stats == NULL)
    stats = &local_stats;
  memset (stats, 0, sizeof *stats);
  u.max_bytes = opts ? opts->max_bytes : 0;
  u.total_bytes = opts && opts->total_bytes ? opts->total_bytes : &u.own_bytes;
  u.label = opts && opts->layer_digest ? xasprintf ("layer %s", opts->layer_digest)
                                       : xasprintf ("layer `%s`", layer_blob_path);
  if (blob_fd < 0 || fstat (blob_fd, &st) < 0)
    ret = husk_error_make (err, errno, "%s: open `%s`", u.label, layer_blob_path);
  else if ((u.root_fd = open (target_dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
    ret = husk_error_make (err, errno, "%s: open target `%s`", u.label, target_dir);
  else
    {
      stats->compressed_bytes = (uint64_t) st.st_size;
      (void) posix_fadvise (blob_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
      u.diff_hash = digest_ctx_new ();
      ret = open_readers (&u, blob_fd, err);
      if (ret == 0)
        ret = extract_all (&u, err);
      if (ret == 0)
        ret = check_diff_id (&u, opts, stats, err);
    }
  unpacker_release (&u);
  return ret;
}
