/* Opening paths inside a directory tree that an image or an archive
 * controls (a container's rootfs, a restored checkpoint) as if that
 * directory were "/": a symlink or `..` in it never leads out. */
#ifndef HUSK_IN_ROOT_H
#define HUSK_IN_ROOT_H

#include <stdbool.h>
#include <sys/types.h>

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

/* openat(DIR_FD, REL, FLAGS, MODE) with no component of REL a symlink
 * (the last one included) and none leaving DIR_FD (`..`, an absolute
 * path): openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or the same walk
 * in user space.  Returns an fd, or -1 with errno (ELOOP for a symlink,
 * EXDEV for a way out). */
int husk_open_beneath (int dir_fd, const char *rel, int flags, mode_t mode);
/* The same, component by component with O_NOFOLLOW (kernels without
 * openat2).  Exposed for the unit tests. */
int husk_open_beneath_walk (int dir_fd, const char *rel, int flags, mode_t mode);
/* mkdir -p REL (MODE) inside DIR_FD, one component at a time, refusing
 * (ELOOP) one that is a symlink and any `..`. */
int husk_mkdir_beneath (int dir_fd, const char *rel, mode_t mode, struct husk_error **err);

#endif
