/* Opening paths inside a directory tree that an image or an archive
 * controls (a container's rootfs, a restored checkpoint) as if that
 * directory were "/": a symlink or `..` in it never leads out. */
#ifndef HUSK_IN_ROOT_H
#define HUSK_IN_ROOT_H

#include <stdbool.h>

#include "husk/error.h"

/* openat(ROOT_FD, PATH, FLAGS) as if ROOT_FD were "/": `..` stops at it and
 * symlinks (absolute ones too) resolve inside it.  openat2 RESOLVE_IN_ROOT,
 * or husk_open_in_root_walk on kernels without it.  O_NOFOLLOW applies
 * to the last component.  Returns an fd, or -1 with errno set. */
int husk_open_in_root (int root_fd, const char *path, int flags);
/* The same walk done component by component in user space (ELOOP after
 * 40 symlinks).  Exposed for the unit tests. */
int husk_open_in_root_walk (int root_fd, const char *path, int flags);

/* Opens the directory that holds PATH's last component inside ROOT_FD,
 * creating missing directories (0755) when CREATE; *NAME gets that last
 * component. */
int husk_open_parent_in_root (int root_fd, const char *path, bool create, char **name,
                              struct husk_error **err);

#endif
