/* /dev inside the container: the default device nodes and linux.devices, a
 * private devpts with /dev/ptmx pointing into it, /dev/shm and the links to
 * /proc/self/fd.  Everything is created through fds resolved in the rootfs. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/rootfs.h"
#include "runtime/rootfs_internal.h"

struct default_device
{
  const char *path;
  unsigned major, minor;
};

/* Every container gets these (character devices, mode 0666) unless
 * linux.devices says otherwise for the same path. */
static const struct default_device default_devices[] = {
  { "/dev/null", 1, 3 },   { "/dev/zero", 1, 5 },    { "/dev/full", 1, 7 },
  { "/dev/random", 1, 8 }, { "/dev/urandom", 1, 9 }, { "/dev/tty", 5, 0 },
};

struct dev_link
{
  const char *name; /* in /dev */
  const char *target;
  bool replace;      /* an existing entry is replaced, not kept */
  bool needs_target; /* only when the target exists in the rootfs */
};

static const struct dev_link dev_links[] = {
  { "fd", "/proc/self/fd", false, false },
  { "stdin", "/proc/self/fd/0", false, false },
  { "stdout", "/proc/self/fd/1", false, false },
  { "stderr", "/proc/self/fd/2", false, false },
  { "core", "/proc/kcore", false, true },
  /* The devpts instance below has its own ptmx; a host node would not. */
  { "ptmx", "pts/ptmx", true, false },
};

static const struct spec_mount *
find_mount (const struct spec *spec, const char *destination)
{
  for (size_t i = 0; i < spec->n_mounts; i++)
    if (strcmp (spec->mounts[i].destination, destination) == 0)
      return &spec->mounts[i];
  return NULL;
}

static bool
listed_device (const struct spec *spec, const char *path)
{
  for (size_t i = 0; i < spec->n_devices; i++)
    if (strcmp (spec->devices[i].path, path) == 0)
      return true;
  return false;
}

static mode_t
device_file_type (char type)
{
  switch (type)
    {
    case 'b':
      return S_IFBLK;
    case 'p':
      return S_IFIFO;
    default: /* 'c' and 'u' (unbuffered) */
      return S_IFCHR;
    }
}

/* 1 when NAME already is the wanted node, 0 when it is absent (removed if
 * it was something else), -1 with errno set. */
static int
remove_unless_device (int parent_fd, const char *name, mode_t type, dev_t rdev)
{
  struct stat st;

  if (fstatat (parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : -1;
  if ((st.st_mode & S_IFMT) == type && (type == S_IFIFO || st.st_rdev == rdev))
    return 1;
  return unlinkat (parent_fd, name, 0) < 0 ? -1 : 0;
}

/* In a user namespace mknod is EPERM: bind the host's node instead.  Its
 * mode and owner are the host's; changing them would change the host. */
static int
bind_host_device (int root_fd, const struct spec_device *dev, struct husk_error **err)
{
  cleanup_close int target_fd = rootfs_open_in_root (root_fd, dev->path, ROOTFS_CREATE_FILE, err);

  if (target_fd < 0)
    return husk_error_wrap (err, "create device `%s`", dev->path);
  if (mount (dev->path, fd_path (target_fd).path, NULL, MS_BIND, NULL) < 0)
    return husk_error_make (err, errno, "create device `%s`: bind the host's node (mknod not permitted)",
                            dev->path);
  return 0;
}

static int
set_device_mode (int parent_fd, const char *name, const struct spec_device *dev, mode_t mode)
{
  /* mknod's mode went through the umask. */
  if (fchmodat (parent_fd, name, mode, 0) < 0)
    return -1;
  if (!dev->has_uid && !dev->has_gid)
    return 0;
  return fchownat (parent_fd, name, dev->has_uid ? dev->uid : (uid_t) -1,
                   dev->has_gid ? dev->gid : (gid_t) -1, AT_SYMLINK_NOFOLLOW);
}

static int
create_device (int root_fd, const struct spec_device *dev, struct husk_error **err)
{
  const char *slash = strrchr (dev->path, '/');
  cleanup_free char *dir = slash ? xasprintf ("%.*s", (int) (slash - dev->path), dev->path) : NULL;
  cleanup_close int parent_fd = -1;
  mode_t type = device_file_type (dev->type), mode = dev->has_mode ? dev->file_mode & 07777 : 0666;
  dev_t rdev = type == S_IFIFO ? 0 : makedev (dev->major, dev->minor);
  const char *name = slash ? slash + 1 : dev->path;
  int present;

  if (*name == '\0')
    return husk_error_make (err, EINVAL, "create device `%s`", dev->path);
  parent_fd = rootfs_open_in_root (root_fd, dir && *dir ? dir : "/", ROOTFS_CREATE_DIR, err);
  if (parent_fd < 0)
    return husk_error_wrap (err, "create device `%s`", dev->path);
  present = remove_unless_device (parent_fd, name, type, rdev);
  if (present != 0)
    return present < 0 ? husk_error_make (err, errno, "create device `%s`", dev->path) : 0;
  if (mknodat (parent_fd, name, type | mode, rdev) < 0)
    {
      if (errno == EPERM)
        return bind_host_device (root_fd, dev, err);
      return husk_error_make (err, errno, "create device `%s`", dev->path);
    }
  if (set_device_mode (parent_fd, name, dev, mode) < 0)
    return husk_error_make (err, errno, "set mode and owner of device `%s`", dev->path);
  return 0;
}

static int
create_devices (const struct spec *spec, int root_fd, struct husk_error **err)
{
  for (size_t i = 0; i < sizeof default_devices / sizeof default_devices[0]; i++)
    {
      const struct default_device *def = &default_devices[i];
      struct spec_device dev = {
        .path = (char *) def->path,
        .type = 'c',
        .major = def->major,
        .minor = def->minor,
        .has_mode = true,
        .file_mode = 0666,
      };

      if (!listed_device (spec, def->path) && create_device (root_fd, &dev, err) < 0)
        return -1;
    }
  for (size_t i = 0; i < spec->n_devices; i++)
    if (create_device (root_fd, &spec->devices[i], err) < 0)
      return -1;
  return 0;
}

/* A private devpts instance, unless the config mounts one.  gid=5 (tty)
 * can be unmapped in a user namespace (EINVAL): then go without it. */
static int
mount_devpts (const struct spec *spec, int dev_fd, struct husk_error **err)
{
  static const char *const option_sets[] = {
    "newinstance,ptmxmode=0666,mode=0620,gid=5",
    "newinstance,ptmxmode=0666,mode=0620",
  };
  cleanup_close int pts_fd = -1;

  if (find_mount (spec, "/dev/pts") != NULL)
    return 0;
  if (mkdirat (dev_fd, "pts", 0755) < 0 && errno != EEXIST)
    return husk_error_make (err, errno, "create `/dev/pts`");
  pts_fd = openat (dev_fd, "pts", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (pts_fd < 0)
    return husk_error_make (err, errno, "open `/dev/pts`");
  for (size_t i = 0; i < sizeof option_sets / sizeof option_sets[0]; i++)
    {
      if (mount ("devpts", fd_path (pts_fd).path, "devpts", MS_NOSUID | MS_NOEXEC, option_sets[i]) == 0)
        return 0;
      if (errno != EINVAL)
        break;
    }
  return husk_error_make (err, errno, "mount `devpts` on `/dev/pts` (type devpts)");
}

static int
create_shm_dir (int dev_fd, struct husk_error **err)
{
  if (mkdirat (dev_fd, "shm", 01777) < 0)
    return errno == EEXIST ? 0 : husk_error_make (err, errno, "create `/dev/shm`");
  if (fchmodat (dev_fd, "shm", 01777, 0) < 0)
    return husk_error_make (err, errno, "chmod `/dev/shm`");
  return 0;
}

/* Whether PATH exists in the rootfs (as the config mounted it: /proc/kcore
 * needs /proc and a kernel with CONFIG_PROC_KCORE). */
static bool
exists_in_root (int root_fd, const char *path)
{
  int fd = rootfs_open_in_root (root_fd, path, ROOTFS_CREATE_NONE, NULL);

  if (fd < 0)
    return false;
  close (fd);
  return true;
}

static int
create_dev_links (int root_fd, int dev_fd, struct husk_error **err)
{
  for (size_t i = 0; i < sizeof dev_links / sizeof dev_links[0]; i++)
    {
      const struct dev_link *link = &dev_links[i];

      if (link->needs_target && !exists_in_root (root_fd, link->target))
        continue;
      if (link->replace && unlinkat (dev_fd, link->name, 0) < 0 && errno != ENOENT)
        return husk_error_make (err, errno, "replace `/dev/%s`", link->name);
      if (symlinkat (link->target, dev_fd, link->name) < 0 && errno != EEXIST)
        return husk_error_make (err, errno, "symlink `/dev/%s` to `%s`", link->name, link->target);
    }
  return 0;
}

int
rootfs_dev_setup (const struct spec *spec, int root_fd, struct husk_error **err)
{
  const struct spec_mount *dev_mount = find_mount (spec, "/dev");
  cleanup_close int dev_fd = -1;

  /* A bind of a whole /dev (privileged containers) brings its own nodes. */
  if (dev_mount != NULL && (dev_mount->bind || (dev_mount->flags & MS_BIND)))
    return 0;
  if (create_devices (spec, root_fd, err) < 0)
    return -1;
  dev_fd = rootfs_open_in_root (root_fd, "/dev", ROOTFS_CREATE_DIR, err);
  if (dev_fd < 0)
    return -1;
  if (mount_devpts (spec, dev_fd, err) < 0 || create_shm_dir (dev_fd, err) < 0
      || create_dev_links (root_fd, dev_fd, err) < 0)
    return -1;
  return 0;
}
