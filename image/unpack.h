/* Layer unpacking: extracts one OCI layer tarball (plain, gzip or zstd) into
 * a directory without ever writing outside it, turns OCI whiteouts into
 * overlayfs whiteouts, and computes the layer's diffID on the way. */
#ifndef HUSK_IMAGE_UNPACK_H
#define HUSK_IMAGE_UNPACK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "husk/error.h"
#include "image/digest.h"

struct unpack_options
{
  const char *layer_digest;     /* names the layer in messages; NULL: the blob path */
  const char *expected_diff_id; /* rootfs.diff_ids[i]; NULL: not checked */
  /* A bound on decompressed bytes (0: none), counted in *TOTAL_BYTES when
   * set, so that the layers of one image unpacked in parallel share it. */
  uint64_t max_bytes;
  atomic_uint_least64_t *total_bytes;
};

struct unpack_stats
{
  uint64_t entries;
  uint64_t compressed_bytes;   /* size of the blob */
  uint64_t uncompressed_bytes; /* size of the tar stream */
  char diff_id[DIGEST_STR_SIZE];
};

/* Extracts LAYER_BLOB_PATH into TARGET_DIR (an existing directory, normally
 * empty).  Entries with `..` or absolute paths, hardlinks to anything not in
 * the layer, and entries under a symlinked parent that does not resolve to a
 * directory inside TARGET_DIR are rejected; parents that are symlinks are
 * resolved inside TARGET_DIR (as if it were "/").  Ownership, modes
 * (setuid included), mtimes and user.*, trusted.* and security.capability
 * xattrs are applied; `.wh.NAME` becomes a 0:0 character device NAME and
 * `.wh..wh..opq` sets trusted.overlay.opaque=y on its directory.  On
 * failure TARGET_DIR holds a partial tree: the caller removes it.
 * STATS may be NULL. */
int unpack_layer (const char *layer_blob_path, const char *target_dir, const struct unpack_options *opts,
                  struct unpack_stats *stats, struct husk_error **err);

/* openat2(ROOT_FD, PATH, FLAGS, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS):
 * opens PATH as if ROOT_FD were "/", so neither `..` nor a symlink can
 * leave it.  Returns an fd, or -1 with errno set. */
int unpack_openat_in_root (int root_fd, const char *path, int flags);

#endif
