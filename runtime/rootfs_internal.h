/* Shared by rootfs.c and rootfs_dev.c.  Private to runtime/. */
#ifndef HUSK_RUNTIME_ROOTFS_INTERNAL_H
#define HUSK_RUNTIME_ROOTFS_INTERNAL_H

#include <stdio.h>

#include "husk/error.h"
#include "runtime/spec/spec.h"

/* Creates /dev inside ROOT_FD once the config mounts are done (rootfs_dev.c). */
int rootfs_dev_setup (const struct spec *spec, int root_fd, struct husk_error **err);

struct fd_path
{
  char path[32];
};

/* The magic link that names an fd's exact inode: mounting on it pins the
 * mount to what openat2 resolved, whatever the image's symlinks say. */
static inline struct fd_path
fd_path (int fd)
{
  struct fd_path p;
  snprintf (p.path, sizeof p.path, "/proc/self/fd/%d", fd);
  return p;
}

#endif
