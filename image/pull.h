/* Pulling an image: resolve the reference at its registry, fetch the
 * config and the missing layers (in parallel) into the content store,
 * unpack each layer once into its snapshot, and record the image. */
#ifndef HUSK_IMAGE_PULL_H
#define HUSK_IMAGE_PULL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "husk/error.h"
#include "image/images.h"
#include "image/registry/registry.h"
#include "image/store.h"

enum pull_phase
{
  PULL_RESOLVED,     /* manifest known: n_layers, layer sizes */
  PULL_DOWNLOADING,  /* layer INDEX has DONE of TOTAL bytes */
  PULL_LAYER_DONE,   /* layer INDEX is in the store (downloaded or already there) */
  PULL_UNPACKING,    /* all blobs present; unpacking */
  PULL_LAYER_QUEUED, /* layer INDEX (TOTAL bytes) is missing and will be fetched */
};

struct pull_progress
{
  enum pull_phase phase;
  size_t index, n_layers;
  uint64_t done, total;
  const char *digest;
  bool existed; /* PULL_LAYER_DONE: the store had it; nothing was fetched */
};

typedef void (*pull_progress_cb) (const struct pull_progress *progress, void *user);

struct pull_options
{
  const char *platform; /* "os/arch[/variant]"; NULL: the host's */
  pull_progress_cb progress;
  void *progress_user;
  /* Decompressed bytes of all layers together; a manifest that declares
   * more (compressed) is refused before any download.  0: the default,
   * SNAPSHOT_DEFAULT_MAX_BYTES. */
  uint64_t max_image_bytes;
};

/* Pulls REF_TEXT with CLIENT into STORE; *OUT (may be NULL) gets the
 * image record.  Errors start with "pull REF: ". */
int image_pull (struct store *store, struct registry_client *client, const char *ref_text,
                const struct pull_options *opts, struct image **out, struct husk_error **err);

#endif
