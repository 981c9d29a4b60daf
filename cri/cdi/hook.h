/* husk's own CDI injection hooks (`husk cdi-hook update-ldcache |
 * create-symlinks | chmod`): createContainer hooks that fix up a
 * container's rootfs before pivot_root.  Every container path is resolved
 * inside the rootfs, never through a symlink or `..` out of it. */
#ifndef HUSK_CRI_CDI_HOOK_H
#define HUSK_CRI_CDI_HOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "husk/error.h"

/* The rootfs of the container whose OCI state JSON is STATE: root.path of
 * <bundle>/config.json, relative to the bundle unless absolute. */
int cdi_hook_rootfs_from_state (const char *state, size_t len, char **rootfs, struct husk_error **err);

/* Opens ROOTFS (O_PATH, a directory); refuses the host's "/". */
int cdi_hook_open_root (const char *rootfs, struct husk_error **err);

/* A container path given to a hook: absolute, no `..` component, not "/"
 * when IS_ENTRY (it must name something). WHAT names the option. */
int cdi_hook_check_path (const char *what, const char *path, bool is_entry, struct husk_error **err);

/* "TARGET::LINK" -> its two halves (TARGET non-empty, LINK a container path). */
int cdi_hook_parse_link (const char *arg, char **target, char **link, struct husk_error **err);

/* Octal digits, at most 07777. */
int cdi_hook_parse_mode (const char *arg, mode_t *mode, struct husk_error **err);

/* update-ldcache: adds the FOLDERS that exist in the rootfs to
 * <rootfs>/etc/ld.so.conf.d/00-husk-cdi.conf (creating /etc/ld.so.conf with
 * an include of every ld.so.conf.d .conf file when the rootfs has none), then runs
 * LDCONFIG (NULL: the host's /sbin/ldconfig or /usr/sbin/ldconfig) with
 * -r ROOTFS to rebuild its /etc/ld.so.cache. */
int cdi_hook_update_ldcache (const char *rootfs, int root_fd, char *const *folders, size_t n_folders,
                             const char *ldconfig, struct husk_error **err);

/* create-symlinks: LINK (a container path) -> TARGET, parents created; an
 * identical link already there is fine, anything else there is an error. */
int cdi_hook_create_symlink (int root_fd, const char *target, const char *link, struct husk_error **err);

/* chmod: MODE on PATH inside the rootfs; a missing PATH is skipped
 * (returns 0 and sets *SKIPPED), a symlink is refused. */
int cdi_hook_chmod (int root_fd, const char *path, mode_t mode, bool *skipped, struct husk_error **err);

#endif
