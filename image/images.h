/* Image records: which images are on this node, by ID (config digest),
 * repo tags and repo digests, with their layers and the parts of the config
 * a runtime needs.  Kept in ROOT/images.json, rewritten atomically under an
 * flock on ROOT/images.lock.  Also parses manifests and configs. */
#ifndef HUSK_IMAGE_IMAGES_H
#define HUSK_IMAGE_IMAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "husk/error.h"
#include "image/digest.h"
#include "image/store.h"

#define IMAGE_MEDIA_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define IMAGE_MEDIA_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define IMAGE_MEDIA_OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define IMAGE_MEDIA_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define IMAGE_MEDIA_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define IMAGE_MEDIA_DOCKER_CONFIG "application/vnd.docker.container.image.v1+json"

struct image_descriptor
{
  char *media_type;
  char *digest;
  int64_t size;
};

/* An image manifest (OCI or Docker schema 2). */
struct image_manifest
{
  char *media_type; /* the manifest's own; IMAGE_MEDIA_OCI_MANIFEST when absent */
  struct image_descriptor config;
  struct image_descriptor *layers;
  size_t n_layers;
};

int image_manifest_parse (const char *json, size_t len, struct image_manifest *out, struct husk_error **err);
void image_manifest_clear (struct image_manifest *manifest);

struct image_kv
{
  char *key;
  char *value;
};

/* The runtime part of an image config ("config" in the image-spec). */
struct image_config
{
  char *user;           /* NULL: unset */
  char **env;           /* "KEY=value"; never NULL */
  char **entrypoint;    /* NULL: unset */
  char **cmd;           /* NULL: unset */
  char *working_dir;    /* NULL: unset */
  char **exposed_ports; /* "80/tcp"; never NULL */
  char **volumes;       /* never NULL */
  struct image_kv *labels;
  size_t n_labels;
  char *stop_signal; /* NULL: unset */
  char *os, *architecture, *variant, *created;
};

/* Parses an image config blob.  *DIFF_IDS (may be NULL) gets
 * rootfs.diff_ids, NULL-terminated. */
int image_config_parse (const char *json, size_t len, struct image_config *out, char ***diff_ids,
                        struct husk_error **err);
void image_config_clear (struct image_config *config);
/* Value of label KEY, or NULL. */
const char *image_config_label (const struct image_config *config, const char *key);

struct image_layer
{
  char *digest;
  char *media_type;
  int64_t size;
  char *diff_id;
  char *chain_id;
};

struct image
{
  char *id;            /* config digest */
  char **repo_tags;    /* "docker.io/library/busybox:latest"; never NULL */
  char **repo_digests; /* "docker.io/library/busybox@sha256:…"; never NULL */
  char *manifest_digest;
  char *media_type;           /* of the manifest */
  char *index_digest;         /* the index it was picked from, or NULL */
  int64_t size;               /* config + compressed layers */
  int64_t added;              /* unix time */
  struct image_layer *layers; /* bottom first */
  size_t n_layers;
  struct image_config config;
};

void image_free (struct image *image);
void images_free (struct image **images, size_t n);

struct images_add_request
{
  const char *name;            /* a reference ("busybox", "x/y:1", "x@sha256:…"); NULL: untagged */
  const char *manifest_digest; /* required */
  const char *manifest;        /* the exact bytes; required */
  size_t manifest_len;
  const char *config; /* the exact bytes; NULL: read from the store */
  size_t config_len;
  const char *index_digest; /* the index the manifest was picked from, or NULL */
};

/* Records an image: checks the manifest and config against their digests
 * and each other, stores them if the store lacks them, requires every layer
 * blob to be in the store, and tags it with REQ->name (moving the tag from
 * whichever image had it).  Adding an image that is there already just adds
 * the name.  *OUT (may be NULL) gets the record. */
int images_add (struct store *store, const struct images_add_request *req, struct image **out,
                struct husk_error **err);

/* Finds an image by repo tag or digest (as given, or normalised:
 * "busybox" means "docker.io/library/busybox:latest"), by ID with or
 * without "sha256:", or by a unique ID prefix.  Not found: errnum ENOENT. */
int images_lookup (const char *root, const char *name_or_id, struct image **out, struct husk_error **err);

/* Every image, oldest first. */
int images_list (const char *root, struct image ***out, size_t *n, struct husk_error **err);

enum images_remove_flags
{
  /* Remove the whole image even when named by one of several tags (CRI's
   * RemoveImage).  Without it, docker's rule: a tag that is not the image's
   * last only untags. */
  IMAGES_REMOVE_ALL_TAGS = 1 << 0,
};

/* Removes a name or an image, then collects the blobs and snapshots nothing
 * references any more.  *DELETED_ID (may be NULL) gets the ID of the removed
 * image, or NULL when only a tag went.  Not found: errnum ENOENT. */
int images_remove (struct store *store, const char *name_or_id, unsigned flags, char **deleted_id,
                   struct husk_error **err);

struct images_gc_stats
{
  unsigned blobs_removed;
  unsigned snapshots_removed;
  bool deferred; /* a pull or unpack held the GC lock: try later */
};

/* Unpacks the layer snapshots of IMG that are missing (all present: a
 * no-op).  Pull does it before recording an image; import, and anything
 * about to mount an image's layers, call this. */
int images_prepare_snapshots (struct store *store, const struct image *img, struct husk_error **err);

/* Removes every blob and snapshot no image record (or container rootfs)
 * references.  Does not wait for running pulls: it defers instead.  A GC
 * that runs removes ROOT/gc.wanted (see images_gc_soon). */
int images_gc (struct store *store, struct images_gc_stats *stats, struct husk_error **err);

/* images_gc for what a failed pull or import, or a removal, left to no
 * image.  First it creates ROOT/gc.wanted: when the GC has to defer (a
 * pull, import or container mount holds the GC lock), the next
 * images_gc_if_wanted - the pull or import that held the lock, when it
 * ends - runs it. */
int images_gc_soon (struct store *store, struct images_gc_stats *stats, struct husk_error **err);

/* images_gc when ROOT/gc.wanted says one was deferred; one stat
 * otherwise.  Pulls and imports call it after releasing the GC lock. */
int images_gc_if_wanted (struct store *store, struct images_gc_stats *stats, struct husk_error **err);

#endif
