/* The container's root filesystem: propagation, the rootfs self-bind, the
 * config mounts (each target resolved inside the rootfs and mounted through
 * its /proc/self/fd path), then pivot_root, masked and read-only paths.
 * /dev lives in rootfs_dev.c. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/rootfs.h"
#include "runtime/rootfs_internal.h"

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* Same layout as the kernel's struct mount_attr (MOUNT_ATTR_SIZE_VER0);
 * kept local so the build does not depend on the headers having it. */
struct rootfs_mount_attr
{
  uint64_t attr_set;
  uint64_t attr_clr;
  uint64_t propagation;
  uint64_t userns_fd;
};

/* Per-mount flags a bind mount only takes through a second, remounting call. */
#define ROOTFS_REMOUNT_FLAGS                                                                                 \
  (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME | MS_STRICTATIME)

/* ---- propagation and the rootfs bind ---------------------------------- */

/* pivot_root refuses a new root whose parent mount is shared, and a bind
 * under a shared parent would propagate out: make the mount that holds the
 * rootfs (the rootfs itself when it is a mount point) private. */
static int
make_rootfs_parent_private (const char *root_path, struct husk_error **err)
{
  cleanup_free char *dir = realpath (root_path, NULL);
  struct statx stx;

  if (dir == NULL)
    return husk_error_make (err, errno, "resolve rootfs `%s`", root_path);
  for (;;)
    {
      char *slash = strrchr (dir, '/');

      if (statx (AT_FDCWD, dir, 0, 0, &stx) < 0)
        return husk_error_make (err, errno, "stat `%s`", dir);
      if ((stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) || strcmp (dir, "/") == 0)
        break;
      slash[slash == dir ? 1 : 0] = '\0';
    }
  if (mount (NULL, dir, NULL, MS_PRIVATE, NULL) < 0)
    return husk_error_make (err, errno, "make `%s` private", dir);
  return 0;
}

static int
bind_rootfs (const struct spec *spec, struct husk_error **err)
{
  unsigned long propagation = spec->rootfs_propagation ? spec->rootfs_propagation : MS_REC | MS_PRIVATE;

  if (spec->root_path == NULL)
    return husk_error_make (err, EINVAL, "prepare rootfs: root.path is not set");
  if (mount (NULL, "/", NULL, propagation, NULL) < 0)
    return husk_error_make (err, errno, "set the propagation of `/`");
  if (make_rootfs_parent_private (spec->root_path, err) < 0)
    return -1;
  if (mount (spec->root_path, spec->root_path, NULL, MS_BIND | MS_REC, NULL) < 0)
    return husk_error_make (err, errno, "bind rootfs `%s` onto itself", spec->root_path);
  return 0;
}

/* ---- helpers shared by the mount handlers ----------------------------- */

static const char *
mount_type_name (const struct spec_mount *mnt)
{
  if (mnt->type != NULL)
    return mnt->type;
  return mnt->bind ? "bind" : "none";
}

static int
mount_error (struct husk_error **err, int errnum, const struct spec_mount *mnt)
{
  return husk_error_make (err, errnum, "mount `%s` on `%s` (type %s)", mnt->source ? mnt->source : "none",
                          mnt->destination, mount_type_name (mnt));
}

static int
open_target (int root_fd, const struct spec_mount *mnt, enum rootfs_create create, struct husk_error **err)
{
  int fd = rootfs_open_in_root (root_fd, mnt->destination, create, err);

  if (fd < 0)
    husk_error_wrap (err, "mount `%s` on `%s` (type %s)", mnt->source ? mnt->source : "none",
                     mnt->destination, mount_type_name (mnt));
  return fd;
}

/* Hands a locally kept error on to the caller's ERR. */
static int
pass_error (struct husk_error **err, struct husk_error *local)
{
  if (err == NULL)
    husk_error_free (&local);
  else
    {
      husk_error_free (err);
      *err = local;
    }
  return -1;
}

static unsigned long
flags_from_statvfs (unsigned long st_flags)
{
  static const struct
  {
    unsigned long st_flag, ms_flag;
  } map[] = {
    { ST_RDONLY, MS_RDONLY },
    { ST_NOSUID, MS_NOSUID },
    { ST_NODEV, MS_NODEV },
    { ST_NOEXEC, MS_NOEXEC },
  };
  unsigned long ms_flags = 0;

  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (st_flags & map[i].st_flag)
      ms_flags |= map[i].ms_flag;
  return ms_flags;
}

/* Remounts the bind mount at PATH with FLAGS.  A mount inherited from a
 * more privileged mount namespace has its flags locked (EPERM when a
 * remount would clear them): retry keeping the flags it already has.
 * Returns -1 with errno set. */
static int
remount_bind (const char *path, unsigned long flags)
{
  struct statvfs sv;
  unsigned long locked;

  if (mount (NULL, path, NULL, MS_BIND | MS_REMOUNT | flags, NULL) == 0)
    return 0;
  if (errno != EPERM || statvfs (path, &sv) < 0)
    return -1;
  locked = flags_from_statvfs (sv.f_flag);
  if ((flags | locked) == flags)
    {
      errno = EPERM;
      return -1;
    }
  return mount (NULL, path, NULL, MS_BIND | MS_REMOUNT | flags | locked, NULL);
}

/* The bind source as a host path; a relative one is relative to the bundle. */
static char *
host_source (const struct spec *spec, const struct spec_mount *mnt)
{
  if (mnt->source == NULL)
    return NULL;
  if (mnt->source[0] == '/' || spec->bundle_dir == NULL)
    return xstrdup (mnt->source);
  return xasprintf ("%s/%s", spec->bundle_dir, mnt->source);
}

/* ---- mount handlers, one per kind ------------------------------------- */

/* What a mount handler may need besides the mount. */
struct mount_ctx
{
  const struct spec *spec;
  const char *cgroup_path; /* the container's cgroup (absolute), or NULL */
};

typedef int (*mount_handler) (const struct mount_ctx *ctx, int root_fd, const struct spec_mount *mnt,
                              struct husk_error **err);

static int
bind_mount (const struct spec *spec, int root_fd, const struct spec_mount *mnt, struct husk_error **err)
{
  cleanup_free char *source = host_source (spec, mnt);
  cleanup_close int target_fd = -1;
  struct stat st;

  /* stat() follows a symlinked source on the host, as mount(2) will; a
   * prepared clone is what its fd holds (the source may be out of reach). */
  if (mnt->prepared ? fstat (mnt->prepared_fd, &st) < 0 : (source == NULL || stat (source, &st) < 0))
    return mount_error (err, source ? errno : EINVAL, mnt);
  target_fd = open_target (root_fd, mnt, S_ISDIR (st.st_mode) ? ROOTFS_CREATE_DIR : ROOTFS_CREATE_FILE, err);
  if (target_fd < 0)
    return -1;
  if (mnt->prepared)
    {
      /* Cloned (and idmapped) by create, in the runtime's namespaces. */
      if (syscall (SYS_move_mount, mnt->prepared_fd, "", target_fd, "",
                   MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)
          < 0)
        return husk_error_make (err, errno, "attach the mount of `%s` on `%s`", source, mnt->destination);
    }
  else if (mount (source, fd_path (target_fd).path, NULL, MS_BIND | (mnt->flags & MS_REC), NULL) < 0)
    return mount_error (err, errno, mnt);
  if ((mnt->flags & ROOTFS_REMOUNT_FLAGS) == 0)
    return 0;
  /* The fd names the covered directory; reopen to reach the new mount. */
  husk_closep (&target_fd);
  target_fd = open_target (root_fd, mnt, ROOTFS_CREATE_NONE, err);
  if (target_fd < 0)
    return -1;
  if (remount_bind (fd_path (target_fd).path, mnt->flags & ROOTFS_REMOUNT_FLAGS) < 0)
    return mount_error (err, errno, mnt);
  return 0;
}

/* Where a filesystem the kernel refuses to mount here is bound from. */
static int
mount_bind_fallback (const struct spec *spec, int root_fd, const struct spec_mount *mnt, const char *source,
                     struct husk_error **err)
{
  struct spec_mount fallback = *mnt;

  husk_debug ("mount %s on %s refused, binding host %s instead", mount_type_name (mnt), mnt->destination,
              source);
  fallback.source = (char *) source;
  fallback.type = "bind";
  fallback.bind = true;
  fallback.flags = mnt->flags | MS_BIND | MS_REC;
  fallback.data = NULL;
  return bind_mount (spec, root_fd, &fallback, err);
}

static int
mount_bind (const struct mount_ctx *ctx, int root_fd, const struct spec_mount *mnt, struct husk_error **err)
{
  return bind_mount (ctx->spec, root_fd, mnt, err);
}

static int
mount_fs (int root_fd, const struct spec_mount *mnt, const char *fstype, const char *data,
          struct husk_error **err)
{
  cleanup_close int target_fd = open_target (root_fd, mnt, ROOTFS_CREATE_DIR, err);
  const char *source = mnt->source ? mnt->source : fstype;

  if (target_fd < 0)
    return -1;
  if (mount (source, fd_path (target_fd).path, fstype, mnt->flags & ~(MS_BIND | MS_REC | MS_REMOUNT), data)
      < 0)
    return mount_error (err, errno, mnt);
  return 0;
}

static int
mount_generic (const struct mount_ctx *ctx, int root_fd, const struct spec_mount *mnt,
               struct husk_error **err)
{
  if (mnt->type == NULL)
    return mount_error (err, EINVAL, mnt);
  return mount_fs (root_fd, mnt, mnt->type, mnt->data, err);
}

/* sysfs needs a network namespace owned by our user namespace; without
 * one the kernel says EPERM and the host's /sys is the best there is. */
static int
mount_sysfs (const struct mount_ctx *ctx, int root_fd, const struct spec_mount *mnt, struct husk_error **err)
{
  struct husk_error *first = NULL;

  if (mount_fs (root_fd, mnt, "sysfs", mnt->data, &first) == 0)
    return 0;
  if (first->errnum != EPERM)
    return pass_error (err, first);
  husk_error_free (&first);
  return mount_bind_fallback (ctx->spec, root_fd, mnt, "/sys", err);
}

static const char *
host_unified_cgroup (void)
{
  struct statfs sfs;

  if (statfs ("/sys/fs/cgroup", &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC)
    return "/sys/fs/cgroup";
  return "/sys/fs/cgroup/unified";
}

/* One v1 hierarchy (or the hybrid host's unified one) inside the tmpfs at
 * TMPFS_FD: DIR_NAME, a bind of the container's own cgroup directory in it,
 * remounted with the mount's flags.  Without a cgroup path: the hierarchy's
 * root, as the host shows it. */
static int
bind_hierarchy (int tmpfs_fd, const char *dir_name, const char *source, const struct spec_mount *mnt,
                struct husk_error **err)
{
  cleanup_close int dir_fd = -1;

  if (mkdirat (tmpfs_fd, dir_name, 0755) < 0 && errno != EEXIST)
    return husk_error_make (err, errno, "mount cgroup on `%s`: mkdir `%s`", mnt->destination, dir_name);
  dir_fd = openat (tmpfs_fd, dir_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0 || mount (source, fd_path (dir_fd).path, NULL, MS_BIND, NULL) < 0)
    return husk_error_make (err, errno, "mount cgroup on `%s`: bind `%s`", mnt->destination, source);
  husk_closep (&dir_fd);
  dir_fd = openat (tmpfs_fd, dir_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0
      || remount_bind (fd_path (dir_fd).path, MS_NOSUID | MS_NODEV | MS_NOEXEC | (mnt->flags & MS_RDONLY))
             < 0)
    return husk_error_make (err, errno, "mount cgroup on `%s`: remount `%s`", mnt->destination, dir_name);
  return 0;
}

/* Where SOURCE_MOUNT's hierarchy keeps the container's cgroup. */
static char *
container_dir_in (const char *hierarchy, char *const *dirs)
{
  size_t len = strlen (hierarchy);

  for (size_t i = 0; dirs && dirs[i]; i++)
    if (strncmp (dirs[i], hierarchy, len) == 0 && (dirs[i][len] == '/' || dirs[i][len] == '\0'))
      return xstrdup (dirs[i]);
  return xstrdup (hierarchy);
}

/* "cgroup" on a host whose controllers are on v1 (this is how runc lays
 * it out): a tmpfs, then per v1 hierarchy a directory named as on the
 * host (memory, cpu,cpuacct, systemd, ...) bound from the container's own
 * cgroup in it, the links of co-mounted controllers (cpu -> cpu,cpuacct),
 * and the hybrid host's unified one.  JVMs and Go read their limits there
 * (memory/memory.limit_in_bytes); a cgroup2 mount would show none. */
static int
mount_cgroup_v1 (const struct mount_ctx *ctx, int root_fd, const struct spec_mount *mnt,
                 char *const *hierarchies, struct husk_error **err)
{
  cleanup_strv char **dirs = ctx->cgroup_path ? cgroup_dirs (ctx->cgroup_path) : NULL;
  const char *unified = cgroup_unified_mount ();
  unsigned long flags = (mnt->flags & (MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RELATIME)) | MS_NOSUID;
  cleanup_close int target_fd = open_target (root_fd, mnt, ROOTFS_CREATE_DIR, err);
  cleanup_close int tmpfs_fd = -1;

  if (target_fd < 0)
    return -1;
  if (mount ("tmpfs", fd_path (target_fd).path, "tmpfs", flags, "mode=755") < 0)
    return mount_error (err, errno, mnt);
  tmpfs_fd = open_target (root_fd, mnt, ROOTFS_CREATE_NONE, err);
  if (tmpfs_fd < 0)
    return -1;
  for (size_t i = 0; hierarchies[i]; i++)
    {
      cleanup_free char *source = container_dir_in (hierarchies[i], dirs);
      const char *name = strrchr (hierarchies[i], '/') + 1;

      if (bind_hierarchy (tmpfs_fd, name, source, mnt, err) < 0)
        return -1;
      if (strchr (name, ',') != NULL)
        {
          cleanup_free char *parts = xstrdup (name);
          char *save = NULL;
          for (char *part = strtok_r (parts, ",", &save); part; part = strtok_r (NULL, ",", &save))
            if (symlinkat (name, tmpfs_fd, part) < 0 && errno != EEXIST)
              return husk_error_make (err, errno, "mount cgroup on `%s`: link `%s`", mnt->destination, part);
        }
    }
  if (unified && strcmp (unified, "/sys/fs/cgroup") != 0)
    {
      cleanup_free char *source = container_dir_in (unified, dirs);
      if (bind_hierarchy (tmpfs_fd, "unified", source, mnt, err) < 0)
        return -1;
    }
  if ((mnt->flags & MS_RDONLY)
      && mount (NULL, fd_path (tmpfs_fd).path, NULL, MS_REMOUNT | MS_RDONLY | flags, "mode=755") < 0)
    return mount_error (err, errno, mnt);
  return 0;
}

/* "cgroup2", or "cgroup" where the controllers are on v2: the unified
 * hierarchy.  Without a cgroup namespace of our own the kernel may refuse;
 * bind the host's. */
static int
mount_cgroup (const struct mount_ctx *ctx, int root_fd, const struct spec_mount *mnt, struct husk_error **err)
{
  struct husk_error *first = NULL;
  bool is_v2 = strcmp (mnt->type, "cgroup2") == 0;
  char *const *hierarchies = cgroup_v1_hierarchies ();

  if (!is_v2 && hierarchies && hierarchies[0])
    return mount_cgroup_v1 (ctx, root_fd, mnt, hierarchies, err);
  if (mount_fs (root_fd, mnt, "cgroup2", is_v2 ? mnt->data : NULL, &first) == 0)
    return 0;
  if (first->errnum != EPERM && first->errnum != EBUSY)
    return pass_error (err, first);
  husk_error_free (&first);
  return mount_bind_fallback (ctx->spec, root_fd, mnt, host_unified_cgroup (), err);
}

static const struct
{
  const char *type;
  mount_handler handler;
} mount_handlers[] = {
  { "bind", mount_bind },     { "rbind", mount_bind },     { "sysfs", mount_sysfs },
  { "cgroup", mount_cgroup }, { "cgroup2", mount_cgroup },
};

static mount_handler
find_mount_handler (const struct spec_mount *mnt)
{
  if (mnt->bind || (mnt->flags & MS_BIND))
    return mount_bind;
  for (size_t i = 0; mnt->type && i < sizeof mount_handlers / sizeof mount_handlers[0]; i++)
    if (strcmp (mount_handlers[i].type, mnt->type) == 0)
      return mount_handlers[i].handler;
  return mount_generic;
}

/* The recursive options ("rro", "rnoexec", ...) and the propagation option
 * apply to the new mount, and every mount below it, once it exists. */
static int
apply_mount_attributes (int root_fd, const struct spec_mount *mnt, struct husk_error **err)
{
  struct rootfs_mount_attr attr = { .attr_set = mnt->rec_attr_set, .attr_clr = mnt->rec_attr_clr };
  bool recursive = mnt->rec_attr_set || mnt->rec_attr_clr;
  cleanup_close int target_fd = -1;

  if (!recursive && mnt->propagation == 0)
    return 0;
  target_fd = open_target (root_fd, mnt, ROOTFS_CREATE_NONE, err);
  if (target_fd < 0)
    return -1;
  if (recursive
      && syscall (SYS_mount_setattr, target_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) < 0)
    {
      if (errno == ENOSYS)
        return husk_error_make (err, errno,
                                "mount `%s` on `%s`: recursive mount options need mount_setattr (Linux 5.12)",
                                mnt->source ? mnt->source : "none", mnt->destination);
      return mount_error (err, errno, mnt);
    }
  if (mnt->propagation && mount (NULL, fd_path (target_fd).path, NULL, mnt->propagation, NULL) < 0)
    return mount_error (err, errno, mnt);
  return 0;
}

/* A missing process.cwd is created, as runc does: here, inside the rootfs
 * and before root.readonly could forbid it. */
static int
create_cwd (const struct spec *spec, int root_fd, struct husk_error **err)
{
  int cwd_fd;

  if (!spec->has_process || spec->process.cwd == NULL)
    return 0;
  cwd_fd = rootfs_open_in_root (root_fd, spec->process.cwd, ROOTFS_CREATE_DIR, err);
  if (cwd_fd < 0)
    return husk_error_wrap (err, "process.cwd");
  close (cwd_fd);
  return 0;
}

int
rootfs_prepare (const struct spec *spec, const char *cgroup_path, struct husk_error **err)
{
  const struct mount_ctx ctx = { .spec = spec, .cgroup_path = cgroup_path };
  cleanup_close int root_fd = -1;

  /* In the runtime's own mount namespace nothing of the host's is
   * re-propagated or rebound: the mounts go under the root as they are. */
  if (spec->namespaces[SPEC_NS_MOUNT].present && bind_rootfs (spec, err) < 0)
    return -1;
  root_fd = open (spec->root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0)
    return husk_error_make (err, errno, "open rootfs `%s`", spec->root_path);
  for (size_t i = 0; i < spec->n_mounts; i++)
    {
      const struct spec_mount *mnt = &spec->mounts[i];

      if (find_mount_handler (mnt) (&ctx, root_fd, mnt, err) < 0
          || apply_mount_attributes (root_fd, mnt, err) < 0)
        return -1;
    }
  if (rootfs_dev_setup (spec, root_fd, err) < 0)
    return -1;
  return create_cwd (spec, root_fd, err);
}

/* ---- finalize: switch root, masks, read-only paths -------------------- */

/* The old root is stacked over the new one after pivot_root(".", "."); it
 * is made rslave first so detaching it cannot unmount anything on the host. */
static int
pivot_into (int new_root_fd, struct husk_error **err)
{
  cleanup_close int old_root_fd = open ("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

  if (old_root_fd < 0)
    return husk_error_make (err, errno, "open `/`");
  if (fchdir (new_root_fd) < 0)
    return husk_error_make (err, errno, "enter the rootfs");
  if (syscall (SYS_pivot_root, ".", ".") < 0)
    return husk_error_make (err, errno, "pivot_root into the rootfs");
  if (fchdir (old_root_fd) < 0 || mount (NULL, ".", NULL, MS_SLAVE | MS_REC, NULL) < 0)
    return husk_error_make (err, errno, "make the old root rslave");
  if (umount2 (".", MNT_DETACH) < 0)
    return husk_error_make (err, errno, "detach the old root");
  return 0;
}

/* --no-pivot, for a root on ramfs where pivot_root cannot work: the host
 * mounts stay in the namespace, out of reach behind the chroot. */
static int
move_into (int new_root_fd, const char *root_path, struct husk_error **err)
{
  if (fchdir (new_root_fd) < 0)
    return husk_error_make (err, errno, "enter the rootfs");
  if (mount (root_path, "/", NULL, MS_MOVE, NULL) < 0)
    return husk_error_make (err, errno, "move rootfs `%s` to `/`", root_path);
  if (chroot (".") < 0)
    return husk_error_make (err, errno, "chroot into the rootfs");
  return 0;
}

static int
enter_rootfs (const struct spec *spec, bool no_pivot, struct husk_error **err)
{
  cleanup_close int new_root_fd = open (spec->root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);

  if (new_root_fd < 0)
    return husk_error_make (err, errno, "open rootfs `%s`", spec->root_path);
  /* A shared "/" (rootfsPropagation rshared) makes pivot_root and MS_MOVE
   * fail with EINVAL; only this one mount changes, and it is left behind. */
  if (mount (NULL, "/", NULL, MS_PRIVATE, NULL) < 0)
    return husk_error_make (err, errno, "make `/` private");
  if ((no_pivot ? move_into (new_root_fd, spec->root_path, err) : pivot_into (new_root_fd, err)) < 0)
    return -1;
  if (chdir ("/") < 0)
    return husk_error_make (err, errno, "chdir to the new `/`");
  return 0;
}

/* A directory gets an empty read-only tmpfs, anything else /dev/null. */
static int
mask_path (const char *path, struct husk_error **err)
{
  struct stat st;
  int rc;

  if (stat (path, &st) < 0)
    return errno == ENOENT ? 0 : husk_error_make (err, errno, "mask `%s`", path);
  if (S_ISDIR (st.st_mode))
    rc = mount ("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  else
    rc = mount ("/dev/null", path, NULL, MS_BIND, NULL);
  return rc < 0 ? husk_error_make (err, errno, "mask `%s`", path) : 0;
}

static int
make_path_readonly (const char *path, struct husk_error **err)
{
  struct stat st;

  if (stat (path, &st) < 0)
    return errno == ENOENT ? 0 : husk_error_make (err, errno, "make `%s` read-only", path);
  if (mount (path, path, NULL, MS_BIND | MS_REC, NULL) < 0
      || remount_bind (path, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC) < 0)
    return husk_error_make (err, errno, "make `%s` read-only", path);
  return 0;
}

static int
for_each_path (char *const *paths, int (*apply) (const char *path, struct husk_error **err),
               struct husk_error **err)
{
  for (size_t i = 0; paths && paths[i]; i++)
    if (apply (paths[i], err) < 0)
      return -1;
  return 0;
}

/* No mount namespace of its own (create refused masks and a read-only
 * root for it): pivot_root would move the host's root, so chroot, as runc
 * does. */
static int
chroot_into (const struct spec *spec, struct husk_error **err)
{
  if (chdir (spec->root_path) < 0)
    return husk_error_make (err, errno, "enter the rootfs `%s`", spec->root_path);
  if (chroot (".") < 0)
    return husk_error_make (err, errno, "chroot into the rootfs");
  if (chdir ("/") < 0)
    return husk_error_make (err, errno, "chdir to the new `/`");
  return 0;
}

int
rootfs_finalize (const struct spec *spec, bool no_pivot, struct husk_error **err)
{
  if (!spec->namespaces[SPEC_NS_MOUNT].present)
    return chroot_into (spec, err);
  if (enter_rootfs (spec, no_pivot, err) < 0)
    return -1;
  if (for_each_path (spec->masked_paths, mask_path, err) < 0
      || for_each_path (spec->readonly_paths, make_path_readonly, err) < 0)
    return -1;
  /* Only the root's own bind is remounted (no MS_REC): /proc, /dev and the
   * config mounts keep the flags they were given. */
  if (spec->root_readonly && remount_bind ("/", MS_RDONLY) < 0)
    return husk_error_make (err, errno, "make the root read-only");
  /* The root mount only: MS_REC here would override the propagation the
   * config gave each mount below (an rslave "/" turns an rshared volume
   * with no peers outside into a private one). */
  if (spec->rootfs_propagation && mount (NULL, "/", NULL, spec->rootfs_propagation & ~MS_REC, NULL) < 0)
    return husk_error_make (err, errno, "set the propagation of `/`");
  return 0;
}
