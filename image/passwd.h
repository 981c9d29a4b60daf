/* Resolving an image's User ("name", "uid", "name:group", "uid:gid", ...)
 * against the /etc/passwd and /etc/group inside its rootfs, which are
 * parsed here and opened without leaving the rootfs: getpwnam() would read
 * the host's files. */
#ifndef HUSK_IMAGE_PASSWD_H
#define HUSK_IMAGE_PASSWD_H

#include <stddef.h>
#include <sys/types.h>

#include "husk/error.h"

/* Files bigger than this are not an /etc/passwd. */
#define PASSWD_FILE_MAX (16 * 1024 * 1024)

struct passwd_user
{
  uid_t uid;
  gid_t gid;
  char *name;             /* NULL when the uid is not in /etc/passwd */
  char *home;             /* "/" when unknown */
  gid_t *additional_gids; /* groups listing the user as a member, without gid */
  size_t n_additional_gids;
};

/* Resolves USER_SPEC (NULL or "" means root) in the rootfs at ROOTFS_DIR.
 * A name that is not in the files is an error; a number need not be there
 * (its gid is then 0, as in docker). */
int passwd_resolve (const char *rootfs_dir, const char *user_spec, struct passwd_user *out,
                    struct husk_error **err);
/* The same with an open directory fd for the rootfs. */
int passwd_resolve_at (int rootfs_fd, const char *user_spec, struct passwd_user *out,
                       struct husk_error **err);
void passwd_user_clear (struct passwd_user *user);

#endif
