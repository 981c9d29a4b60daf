/* User namespaces made from id mappings, and idmapped mounts
 * (mount_setattr MOUNT_ATTR_IDMAP): shared by the OCI runtime (mounts with
 * uidMappings), the image snapshots (idmapped lower layers) and huskd
 * (user-namespaced pods, the features it reports). */
#ifndef HUSK_IDMAP_H
#define HUSK_IDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "husk/error.h"

/* One line of /proc/PID/uid_map: CONTAINER_ID..+SIZE inside is HOST_ID..+SIZE
 * outside. */
struct husk_id_map
{
  uint32_t container_id, host_id, size;
};

/* Writes MAPS to /proc/PID/FILE ("uid_map" or "gid_map"). */
int husk_id_map_write (pid_t pid, const char *file, const struct husk_id_map *maps, size_t n,
                       struct husk_error **err);

/* A new user namespace with these mappings, held by nothing but the
 * returned fd (its short-lived child is gone on return). */
int husk_userns_open (const struct husk_id_map *uids, size_t n_uids, const struct husk_id_map *gids,
                      size_t n_gids, struct husk_error **err);

/* A detached clone of the mount tree at PATH (RECURSIVE: with its
 * submounts), idmapped through USERNS_FD, for move_mount or an overlay
 * lowerdir of /proc/self/fd/N.  A kernel without idmapped mounts, or a
 * filesystem that refuses them, is an error naming PATH and the
 * filesystem; nothing is left behind. */
int husk_idmap_clone (const char *path, bool recursive, int userns_fd, struct husk_error **err);

/* The same without the idmapping: a detached clone of PATH. */
int husk_mount_clone (const char *path, bool recursive, struct husk_error **err);

/* Whether an idmapped mount of PATH's filesystem works on this kernel
 * (tried on a throwaway clone). */
bool husk_idmap_supported (const char *path);

/* The filesystem type of PATH by name ("ext4", "tmpfs"...), for messages. */
const char *husk_fs_type_name (const char *path);

#endif
