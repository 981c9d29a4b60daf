/* Layer snapshots and container root filesystems.  Each layer is unpacked
 * once, under ROOT/snapshots/<chain-id hex>/fs; a container's rootfs is an
 * overlayfs of those directories plus its own upper and work dirs under
 * ROOT/containers/<id>/. */
#ifndef HUSK_IMAGE_SNAPSHOT_H
#define HUSK_IMAGE_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "husk/error.h"
#include "image/digest.h"
#include "image/store.h"

/* One layer of an image, bottom first: the manifest's descriptor and the
 * config's rootfs.diff_ids entry at the same index. */
struct snapshot_layer
{
  const char *digest;     /* compressed blob in the store */
  const char *media_type; /* NULL: not checked */
  const char *diff_id;
};

/* chainID(L0) = diffID(L0); chainID(L0..n) = sha256(chainID(L0..n-1) + " " +
 * diffID(Ln)), per image-spec.  PARENT_CHAIN_ID is NULL for the bottom layer. */
void snapshot_chain_id (const char *parent_chain_id, const char *diff_id, char out[DIGEST_STR_SIZE]);
/* The chain IDs of N diffIDs, bottom first, into OUT[N]. */
void snapshot_chain_ids (char *const *diff_ids, size_t n, char (*out)[DIGEST_STR_SIZE]);

/* True when media type TYPE is a layer husk can unpack. */
bool snapshot_layer_media_type_supported (const char *type);

/* ROOT/snapshots/<hex>/fs (malloc'd). */
char *snapshot_fs_path (const char *root, const char *chain_id);
bool snapshot_exists (const char *root, const char *chain_id);

/* Makes sure a snapshot exists for each of the N layers (bottom first),
 * unpacking the missing ones from the store in parallel (a worker per
 * online CPU) and checking each diffID.  Every missing layer is checked
 * (digest, media type, blob present) before any unpack starts; on failure
 * the error of the lowest failed layer is returned and nothing is
 * published.  A layer is unpacked into ROOT/snapshots/tmp-<random> and
 * renamed into place; when a concurrent unpack of the same chain wins, this
 * copy is dropped.  Holds the store's GC lock shared while it works.
 * *UNPACKED (may be NULL) counts the layers it unpacked. */
int snapshot_prepare_layers (struct store *store, const struct snapshot_layer *layers, size_t n,
                             unsigned *unpacked, struct husk_error **err);
/* The same, refusing (and removing) layers once all of them together
 * decompress to more than MAX_BYTES (0: SNAPSHOT_DEFAULT_MAX_BYTES). */
#define SNAPSHOT_DEFAULT_MAX_BYTES (UINT64_C (32) << 30)
int snapshot_prepare_layers_max (struct store *store, const struct snapshot_layer *layers, size_t n,
                                 uint64_t max_bytes, unsigned *unpacked, struct husk_error **err);

/* Mounts CONTAINER_ID's rootfs at ROOT/containers/<id>/merged: an overlay
 * with the N snapshots CHAIN_IDS (bottom first) as lower dirs and upper/ and
 * work/ beside it; READONLY: no upper dir (an overlay of the lowers, or a
 * read-only bind mount when there is one layer).  Idempotent: when the
 * rootfs is mounted already it just returns its path; when the container
 * dir survives (a reboot) its upper dir is mounted again.  *ROOTFS_PATH
 * (malloc'd) gets the merged dir. */
int snapshot_create_container (const char *root, const char *container_id, char *const *chain_ids, size_t n,
                               bool readonly, char **rootfs_path, struct husk_error **err);

/* For a container in a user namespace: the lower layers go into the
 * overlay as idmapped clones (through USERNS_FD), so the image's files
 * appear owned by its root while the snapshots, shared with every other
 * container, stay as they are; the upper dir is made ROOT_UID:ROOT_GID's
 * (the namespace's root on the host), its writes land with host ids.
 * Containers in the same user namespace as others share nothing else. */
struct snapshot_idmap
{
  int userns_fd;
  uid_t root_uid;
  gid_t root_gid;
};

/* snapshot_create_container, idmapped when IDMAP is not NULL (not with
 * READONLY).  The container's directory is then searchable by all (0711):
 * the runtime's init, root only in the namespace, must reach the rootfs. */
int snapshot_create_container_idmapped (const char *root, const char *container_id, char *const *chain_ids,
                                        size_t n, bool readonly, const struct snapshot_idmap *idmap,
                                        char **rootfs_path, struct husk_error **err);

/* Unmounts (MNT_DETACH) and removes what snapshot_create_container made;
 * removes ROOT/containers/<id> when nothing else is left in it.  A
 * container that does not exist is not an error. */
int snapshot_remove_container (const char *root, const char *container_id, struct husk_error **err);

/* Removes every snapshot (and leftover tmp-* unpack dir) whose chain ID is
 * neither in KEEP (NULL-terminated) nor used by a container's rootfs.  The
 * caller holds the store's GC lock exclusive.  *REMOVED may be NULL. */
int snapshot_gc (const char *root, char *const *keep, unsigned *removed, struct husk_error **err);

#endif
