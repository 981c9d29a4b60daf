/* OCI image layouts (oci-layout + index.json + blobs/), as a directory or a
 * tar of one: importing them into the content store and image records, and
 * exporting an image as one. */
#ifndef HUSK_IMAGE_LAYOUT_H
#define HUSK_IMAGE_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "husk/error.h"
#include "image/images.h"
#include "image/store.h"

#define LAYOUT_REF_NAME_ANNOTATION "org.opencontainers.image.ref.name"
/* The full name containerd and docker write next to the short ref.name. */
#define LAYOUT_IMAGE_NAME_ANNOTATION "io.containerd.image.name"

struct layout_import_options
{
  /* The name to register.  With several images in the layout, the one whose
   * annotation matches it (full name, or its tag as ref.name). */
  const char *name;
  const char *platform; /* "os/arch[/variant]" for indexes; NULL: the host's */
};

/* Imports the layout at PATH (a directory, or a tar file that holds one)
 * into STORE: every image index.json lists (an index picked for the
 * platform), each blob verified against its digest.  Images are named from
 * OPTS->name or their annotations (a bare ref.name tag with no repository
 * and no OPTS->name leaves the image untagged).  A tar is read in one pass
 * and never extracted: only its blobs/sha256/<hex> files and the two
 * metadata files are used.  *IMAGES (N; may be NULL) gets the records. */
int layout_import (struct store *store, const char *path, const struct layout_import_options *opts,
                   struct image ***images, size_t *n, struct husk_error **err);

/* Writes image NAME_OR_ID as an OCI layout at DEST: a new (or empty)
 * directory, or, with AS_TAR, a tar file (written to a temp file and
 * renamed).  index.json names it with its tag (ref.name) and full name. */
int layout_export (struct store *store, const char *name_or_id, const char *dest, bool as_tar,
                   struct husk_error **err);

#endif
