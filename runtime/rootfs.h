/* The container's root filesystem, built inside its new mount namespace:
 * propagation, the rootfs bind, config mounts, /dev, then pivot_root and the
 * masked and read-only paths.  Every destination is resolved inside the
 * rootfs (openat2 RESOLVE_IN_ROOT), so a symlink in the image can never send
 * a mount to the host. */
#ifndef HUSK_RUNTIME_ROOTFS_H
#define HUSK_RUNTIME_ROOTFS_H

#include <stdbool.h>

#include "husk/error.h"
#include "runtime/spec/spec.h"

/* Step 1, in the child after it entered its mount namespace: makes / private
 * (or linux.rootfsPropagation), bind-mounts root.path onto itself, performs
 * spec->mounts in order, creates /dev (default devices, linux.devices,
 * /dev/pts + ptmx, /dev/shm, /dev/fd and std links).  Does not pivot.
 * CGROUP_PATH (the container's cgroup, or NULL) is what a "cgroup" mount
 * shows on a host whose controllers are on v1. */
int rootfs_prepare (const struct spec *spec, const char *cgroup_path, struct husk_error **err);

/* Step 2, after createContainer hooks: pivot_root (or chroot with
 * NO_PIVOT), then makes the root read-only if root.readonly, applies
 * maskedPaths and readonlyPaths and sets rootfsPropagation.  Leaves the cwd
 * at the new "/". */
int rootfs_finalize (const struct spec *spec, bool no_pivot, struct husk_error **err);

/* Opens PATH (absolute, as seen in the container) inside the directory
 * ROOT_FD without ever leaving it.  With ROOTFS_CREATE_DIR / _FILE it
 * creates the missing parents (mode 0755) and the last component; with
 * ROOTFS_CREATE_NONE it only looks up.  Returns an
 * O_PATH fd.  Exposed for unit tests and for the mount code. */
enum rootfs_create
{
  ROOTFS_CREATE_NONE,
  ROOTFS_CREATE_DIR,
  ROOTFS_CREATE_FILE,
};
int rootfs_open_in_root (int root_fd, const char *path, enum rootfs_create create, struct husk_error **err);

#endif
