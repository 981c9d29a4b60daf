/* OCI image layout import and export.  An import first gets every blob it
 * needs into the content store (copied from a directory on demand, or
 * streamed out of a tar in one pass), then registers each image with
 * images_add, which checks manifests and configs against their digests. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/layout.h"
#include "image/reference.h"
#include "image/registry/registry.h"
#include "image/unpack.h"

#define OCI_LAYOUT_FILE "oci-layout"
#define OCI_INDEX_FILE "index.json"
#define OCI_LAYOUT_JSON "{\"imageLayoutVersion\":\"1.0.0\"}"
#define BLOBS_PREFIX "blobs/sha256/"
#define OCI_LAYOUT_MAX 4096

#define cleanup_json __attribute__ ((cleanup (json_decrefp)))

struct layout_source
{
  struct store *store;
  const char *path;
  int dir_fd;       /* a directory layout; -1 for a tar, whose blobs are in the store already */
  char *oci_layout; /* NULL when the layout has none */
  char *index_json;
  size_t index_len;
};

/* A manifest index.json leads to, and what it is called there. */
struct candidate
{
  char manifest_digest[DIGEST_STR_SIZE];
  char *index_digest; /* the nested index it was picked from, or NULL */
  char *full_name;    /* io.containerd.image.name */
  char *ref_name;     /* org.opencontainers.image.ref.name */
};

static void
candidates_free (struct candidate *c, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      free (c[i].index_digest);
      free (c[i].full_name);
      free (c[i].ref_name);
    }
  free (c);
}

/* Reading the source. */

static int
read_layout_file (int dir_fd, const char *name, size_t max, char **out, size_t *len, struct husk_error **err)
{
  cleanup_close int fd = unpack_openat_in_root (dir_fd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  struct stat st;

  if (fd < 0 && errno == ENOENT)
    return 0;
  if (fd < 0 || fstat (fd, &st) < 0)
    return husk_error_make (err, errno, "open %s", name);
  if (!S_ISREG (st.st_mode) || (size_t) st.st_size > max)
    return husk_error_make (err, 0, "%s is not a regular file of at most %zu bytes", name, max);
  return husk_read_fd (fd, out, len, name, err);
}

static int
read_entry_data (struct archive *a, const char *name, size_t max, char **out, size_t *len,
                 struct husk_error **err)
{
  char *buf = xmalloc (max + 1);
  size_t used = 0;
  la_ssize_t n;

  while ((n = archive_read_data (a, buf + used, max + 1 - used)) > 0)
    {
      used += (size_t) n;
      if (used > max)
        {
          free (buf);
          return husk_error_make (err, 0, "%s is larger than %zu bytes", name, max);
        }
    }
  if (n < 0)
    {
      free (buf);
      return husk_error_make (err, 0, "read %s: %s", name, archive_error_string (a));
    }
  buf[used] = '\0';
  free (*out);
  *out = buf;
  if (len)
    *len = used;
  return 0;
}

static int
ingest_tar_blob (struct layout_source *src, struct archive *a, struct archive_entry *entry,
                 const char *digest, struct husk_error **err)
{
  struct store_ingest *ingest = NULL;
  char buf[128 * 1024];
  la_ssize_t n;

  if (store_has_blob (src->store, digest, NULL))
    return 0;
  if (store_ingest_begin (src->store, digest, archive_entry_size (entry), &ingest, err) < 0)
    return -1;
  while ((n = archive_read_data (a, buf, sizeof buf)) > 0)
    if (store_ingest_write (ingest, buf, (size_t) n, err) < 0)
      {
        store_ingest_abort (ingest);
        return -1;
      }
  if (n < 0)
    {
      store_ingest_abort (ingest);
      return husk_error_make (err, 0, "read blob %s: %s", digest, archive_error_string (a));
    }
  return store_ingest_commit (ingest, NULL, err);
}

/* Takes one entry of the tar: the two metadata files into memory, blobs
 * into the store by the digest their name claims (which commit checks);
 * anything else is ignored, so no tar path ever reaches the filesystem. */
static int
take_tar_entry (struct layout_source *src, struct archive *a, struct archive_entry *entry,
                struct husk_error **err)
{
  const char *name = archive_entry_pathname (entry);
  char digest[DIGEST_STR_SIZE];

  if (name == NULL || archive_entry_filetype (entry) != AE_IFREG || archive_entry_hardlink (entry))
    return 0;
  while (husk_str_has_prefix (name, "./"))
    name += 2;
  if (strcmp (name, OCI_LAYOUT_FILE) == 0)
    return read_entry_data (a, name, OCI_LAYOUT_MAX, &src->oci_layout, NULL, err);
  if (strcmp (name, OCI_INDEX_FILE) == 0)
    return read_entry_data (a, name, STORE_SMALL_BLOB_MAX, &src->index_json, &src->index_len, err);
  if (!husk_str_has_prefix (name, BLOBS_PREFIX)
      || strlen (name + strlen (BLOBS_PREFIX)) != DIGEST_SHA256_HEX_LEN)
    return 0;
  snprintf (digest, sizeof digest, "sha256:%s", name + strlen (BLOBS_PREFIX));
  if (!digest_is_valid (digest))
    return 0;
  return ingest_tar_blob (src, a, entry, digest, err);
}

static int
ingest_tar (struct layout_source *src, struct husk_error **err)
{
  struct archive *a = archive_read_new ();
  struct archive_entry *entry;
  int r, ret = 0;

  archive_read_support_filter_gzip (a);
  archive_read_support_filter_zstd (a);
  archive_read_support_format_tar (a);
  if (archive_read_open_filename (a, src->path, 128 * 1024) != ARCHIVE_OK)
    ret = husk_error_make (err, 0, "%s", archive_error_string (a));
  while (ret == 0 && ((r = archive_read_next_header (a, &entry)) == ARCHIVE_OK || r == ARCHIVE_WARN))
    ret = take_tar_entry (src, a, entry, err);
  if (ret == 0 && r != ARCHIVE_EOF)
    ret = husk_error_make (err, 0, "read tar: %s", archive_error_string (a));
  archive_read_free (a);
  return ret;
}

static int
source_open (struct layout_source *src, struct store *store, const char *path, struct husk_error **err)
{
  struct stat st;

  *src = (struct layout_source){ .store = store, .path = path, .dir_fd = -1 };
  if (stat (path, &st) < 0)
    return husk_error_make (err, errno, "stat");
  if (S_ISREG (st.st_mode))
    {
      if (ingest_tar (src, err) < 0)
        return -1;
    }
  else if (!S_ISDIR (st.st_mode))
    return husk_error_make (err, 0, "not a directory or a tar file");
  else if ((src->dir_fd = open (path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
    return husk_error_make (err, errno, "open");
  else if (read_layout_file (src->dir_fd, OCI_LAYOUT_FILE, OCI_LAYOUT_MAX, &src->oci_layout, NULL, err) < 0
           || read_layout_file (src->dir_fd, OCI_INDEX_FILE, STORE_SMALL_BLOB_MAX, &src->index_json,
                                &src->index_len, err)
                  < 0)
    return -1;
  if (src->oci_layout == NULL || src->index_json == NULL)
    return husk_error_make (err, 0, "not an OCI image layout: no %s",
                            src->oci_layout ? OCI_INDEX_FILE : OCI_LAYOUT_FILE);
  return 0;
}

static void
source_close (struct layout_source *src)
{
  if (src->dir_fd >= 0)
    close (src->dir_fd);
  free (src->oci_layout);
  free (src->index_json);
}

static int
source_ensure_blob (struct layout_source *src, const char *digest, int64_t size, struct husk_error **err)
{
  cleanup_free char *name = NULL;
  cleanup_close int fd = -1;

  if (digest_validate (digest, "layout blob", err) < 0)
    return -1;
  if (store_has_blob (src->store, digest, NULL))
    return 0;
  if (src->dir_fd < 0)
    return husk_error_make (err, 0, "blob %s is missing from the layout", digest);
  name = xasprintf (BLOBS_PREFIX "%s", digest_hex (digest));
  fd = unpack_openat_in_root (src->dir_fd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return husk_error_make (err, errno == ENOENT ? 0 : errno, "blob %s is missing from the layout", digest);
  return store_put_file (src->store, digest, size, fd, err);
}

static int
source_read_blob (struct layout_source *src, const char *digest, char **out, size_t *len,
                  struct husk_error **err)
{
  if (source_ensure_blob (src, digest, -1, err) < 0)
    return -1;
  return store_read_blob (src->store, digest, STORE_SMALL_BLOB_MAX, out, len, err);
}

/* index.json -> candidates. */

static bool
is_manifest_type (const char *type)
{
  return type
         && (strcmp (type, IMAGE_MEDIA_OCI_MANIFEST) == 0 || strcmp (type, IMAGE_MEDIA_DOCKER_MANIFEST) == 0);
}

static bool
is_index_type (const char *type)
{
  return type && (strcmp (type, IMAGE_MEDIA_OCI_INDEX) == 0 || strcmp (type, IMAGE_MEDIA_DOCKER_LIST) == 0);
}

static void
candidate_names (struct candidate *c, json_t *entry)
{
  json_t *annotations = json_object_get (entry, "annotations");
  const char *full = json_string_value (json_object_get (annotations, LAYOUT_IMAGE_NAME_ANNOTATION));
  const char *ref = json_string_value (json_object_get (annotations, LAYOUT_REF_NAME_ANNOTATION));

  c->full_name = full ? xstrdup (full) : NULL;
  c->ref_name = ref ? xstrdup (ref) : NULL;
}

/* An index entry: a manifest is a candidate as it is; a nested index gives
 * the manifest it holds for the platform. */
static int
entry_candidate (struct layout_source *src, json_t *entry, const char *platform, struct candidate *c,
                 struct husk_error **err)
{
  const char *type = json_string_value (json_object_get (entry, "mediaType"));
  const char *digest = json_string_value (json_object_get (entry, "digest"));
  cleanup_free char *nested = NULL;

  if (digest_validate (digest, "index.json manifests[].digest", err) < 0)
    return -1;
  if (is_manifest_type (type))
    snprintf (c->manifest_digest, sizeof c->manifest_digest, "%s", digest);
  else if (source_read_blob (src, digest, &nested, NULL, err) < 0
           || registry_select_platform (nested, platform, c->manifest_digest, err) < 0)
    return husk_error_wrap (err, "index %s", digest);
  else
    c->index_digest = xstrdup (digest);
  candidate_names (c, entry);
  return 0;
}

/* When index.json itself lists manifests per platform, only the one for
 * PLATFORM counts (entries without a platform always do). */
static int
platform_choice (struct layout_source *src, json_t *manifests, const char *platform,
                 char out[DIGEST_STR_SIZE], struct husk_error **err)
{
  size_t i;
  json_t *entry;

  out[0] = '\0';
  json_array_foreach (manifests, i, entry)
  {
    const char *type = json_string_value (json_object_get (entry, "mediaType"));
    if (json_is_object (json_object_get (entry, "platform")) && is_manifest_type (type))
      return registry_select_platform (src->index_json, platform, out, err);
  }
  return 0;
}

static int
collect_candidates (struct layout_source *src, const char *platform, struct candidate **out, size_t *n,
                    struct husk_error **err)
{
  cleanup_json json_t *index = json_loadb (src->index_json, src->index_len, 0, NULL);
  json_t *manifests = json_object_get (index, "manifests");
  char chosen[DIGEST_STR_SIZE];
  size_t i;
  json_t *entry;

  if (!json_is_array (manifests))
    return husk_error_make (err, 0, "%s has no `manifests` array", OCI_INDEX_FILE);
  if (platform_choice (src, manifests, platform, chosen, err) < 0)
    return -1;
  *out = xcalloc (json_array_size (manifests) + 1, sizeof **out);
  *n = 0;
  json_array_foreach (manifests, i, entry)
  {
    const char *type = json_string_value (json_object_get (entry, "mediaType"));
    const char *digest = json_string_value (json_object_get (entry, "digest"));
    if (!is_manifest_type (type) && !is_index_type (type))
      continue; /* artifacts, signatures */
    if (chosen[0] && json_object_get (entry, "platform") && is_manifest_type (type) && digest
        && strcmp (digest, chosen) != 0)
      continue;
    if (entry_candidate (src, entry, platform, &(*out)[*n], err) < 0)
      return -1;
    (*n)++;
  }
  if (*n == 0)
    return husk_error_make (err, 0, "%s lists no image", OCI_INDEX_FILE);
  return 0;
}

/* Naming. */

static char *
canonical_name (const char *text)
{
  struct reference *ref = NULL;
  char *name;

  if (text == NULL || reference_parse (text, &ref, NULL) < 0)
    return NULL;
  name = reference_string (ref);
  reference_free (ref);
  return name;
}

/* The full name a candidate carries, if any: a ref.name that is only a tag
 * ("latest") says nothing about the repository. */
static const char *
annotated_name (const struct candidate *c)
{
  if (c->full_name)
    return c->full_name;
  if (c->ref_name && strpbrk (c->ref_name, "/:@"))
    return c->ref_name;
  return NULL;
}

static bool
candidate_is_named (const struct candidate *c, const char *name)
{
  cleanup_free char *want = canonical_name (name);
  cleanup_free char *have = canonical_name (annotated_name (c));
  struct reference *ref = NULL;
  bool tag_match = false;

  if (want && have && strcmp (want, have) == 0)
    return true;
  if (c->ref_name && reference_parse (name, &ref, NULL) == 0)
    {
      tag_match = ref->tag && strcmp (c->ref_name, ref->tag) == 0;
      reference_free (ref);
    }
  return tag_match || (c->ref_name && strcmp (c->ref_name, name) == 0);
}

/* Which candidates to import, under which name (NULL: untagged). */
static int
choose_names (struct candidate *c, size_t n, const char *name, const char **names, bool *selected,
              struct husk_error **err)
{
  size_t count = 0;

  for (size_t i = 0; i < n; i++)
    {
      selected[i] = name == NULL || n == 1 || candidate_is_named (&c[i], name);
      names[i] = name ? name : annotated_name (&c[i]);
      count += selected[i];
      if (name == NULL && names[i] == NULL && c[i].ref_name)
        husk_warn ("image %s: ref.name `%s` has no repository; importing it untagged", c[i].manifest_digest,
                   c[i].ref_name);
    }
  if (count == 0)
    return husk_error_make (err, 0, "the layout has %zu images and none is named `%s`", n, name);
  return 0;
}

/* Importing. */

static int
import_candidate (struct layout_source *src, const struct candidate *c, const char *name, struct image **out,
                  struct husk_error **err)
{
  cleanup_free char *manifest_text = NULL;
  struct image_manifest manifest;
  size_t manifest_len = 0;
  int ret;

  if (source_read_blob (src, c->manifest_digest, &manifest_text, &manifest_len, err) < 0
      || image_manifest_parse (manifest_text, manifest_len, &manifest, err) < 0)
    return husk_error_wrap (err, "manifest %s", c->manifest_digest);
  ret = source_ensure_blob (src, manifest.config.digest, manifest.config.size, err);
  for (size_t i = 0; ret == 0 && i < manifest.n_layers; i++)
    ret = source_ensure_blob (src, manifest.layers[i].digest, manifest.layers[i].size, err);
  image_manifest_clear (&manifest);
  if (ret < 0)
    return husk_error_wrap (err, "manifest %s", c->manifest_digest);
  struct images_add_request req = {
    .name = name,
    .manifest_digest = c->manifest_digest,
    .manifest = manifest_text,
    .manifest_len = manifest_len,
    .index_digest = c->index_digest,
  };
  struct image *img = NULL;
  if (images_add (src->store, &req, &img, err) < 0)
    return -1;
  /* As containerd's import: the image is ready to run afterwards. */
  if (images_prepare_snapshots (src->store, img, err) < 0)
    {
      image_free (img);
      return husk_error_wrap (err, "unpack %s", c->manifest_digest);
    }
  if (out)
    *out = img;
  else
    image_free (img);
  return 0;
}

static int
import_all (struct layout_source *src, const struct layout_import_options *opts, struct image ***images,
            size_t *n_images, struct husk_error **err)
{
  struct candidate *candidates = NULL;
  size_t n = 0, n_done = 0;
  cleanup_free const char **names = NULL;
  cleanup_free bool *selected = NULL;
  struct image **done = NULL;
  int ret;

  if (src->oci_layout && strstr (src->oci_layout, "imageLayoutVersion") == NULL)
    return husk_error_make (err, 0, "%s has no imageLayoutVersion", OCI_LAYOUT_FILE);
  ret = collect_candidates (src, opts ? opts->platform : NULL, &candidates, &n, err);
  if (ret == 0)
    {
      names = xcalloc (n + 1, sizeof *names);
      selected = xcalloc (n + 1, sizeof *selected);
      done = xcalloc (n + 1, sizeof *done);
      ret = choose_names (candidates, n, opts ? opts->name : NULL, names, selected, err);
    }
  for (size_t i = 0; ret == 0 && i < n; i++)
    if (selected[i])
      ret = import_candidate (src, &candidates[i], names[i], &done[n_done++], err);
  candidates_free (candidates, n);
  if (ret < 0 || images == NULL)
    images_free (done, n_done);
  else
    {
      *images = done;
      *n_images = n_done;
    }
  return ret;
}

int
layout_import (struct store *store, const char *path, const struct layout_import_options *opts,
               struct image ***images, size_t *n, struct husk_error **err)
{
  struct layout_source src;
  int lock_fd = store_gc_lock (store_root (store), false, true, err);
  struct husk_error *gc_err = NULL;
  int ret;

  if (lock_fd < 0)
    return -1;
  ret = source_open (&src, store, path, err);
  if (ret == 0)
    ret = import_all (&src, opts, images, n, err);
  close (lock_fd);
  /* A tar may have carried blobs no imported image uses, and a failed
   * import leaves what it copied to none; a GC another import or pull
   * wanted runs now too. */
  if ((src.dir_fd < 0 || ret < 0 ? images_gc_soon (store, NULL, &gc_err)
                                 : images_gc_if_wanted (store, NULL, &gc_err))
      < 0)
    {
      husk_warn ("import `%s`: %s", path, gc_err->msg);
      husk_error_free (&gc_err);
    }
  source_close (&src);
  if (ret < 0)
    return husk_error_wrap (err, "import OCI layout `%s`", path);
  return 0;
}

/* Exporting. */

struct export_blob
{
  const char *digest;
  int64_t size;
};

/* The tag people would use, for ref.name, and the full name beside it. */
static void
export_names (const struct image *image, const char *name_or_id, char **full, char **tag)
{
  cleanup_free char *wanted = canonical_name (name_or_id);

  *full = *tag = NULL;
  for (size_t i = 0; image->repo_tags[i]; i++)
    if (*full == NULL || (wanted && strcmp (image->repo_tags[i], wanted) == 0))
      {
        free (*full);
        *full = xstrdup (image->repo_tags[i]);
      }
  if (*full)
    *tag = xstrdup (strrchr (*full, ':') + 1);
}

static char *
export_index_json (const struct image *image, int64_t manifest_size, const char *name_or_id)
{
  cleanup_free char *full = NULL, *tag = NULL;
  json_t *entry = json_pack ("{s:s, s:s, s:I}", "mediaType", image->media_type, "digest",
                             image->manifest_digest, "size", (json_int_t) manifest_size);
  json_t *index;
  char *text;

  export_names (image, name_or_id, &full, &tag);
  if (full)
    json_object_set_new (
        entry, "annotations",
        json_pack ("{s:s, s:s}", LAYOUT_IMAGE_NAME_ANNOTATION, full, LAYOUT_REF_NAME_ANNOTATION, tag));
  if (image->config.os && image->config.architecture)
    json_object_set_new (
        entry, "platform",
        json_pack ("{s:s, s:s}", "os", image->config.os, "architecture", image->config.architecture));
  index = json_pack ("{s:i, s:s, s:[o]}", "schemaVersion", 2, "mediaType", IMAGE_MEDIA_OCI_INDEX, "manifests",
                     entry);
  text = json_dumps (index, JSON_COMPACT);
  json_decref (index);
  return text;
}

static int
copy_fd (int from, int to, struct husk_error **err)
{
  ssize_t n;

  while ((n = copy_file_range (from, NULL, to, NULL, 1 << 30, 0)) > 0)
    ;
  if (n == 0)
    return 0;
  if (errno != EXDEV && errno != EINVAL && errno != ENOSYS)
    return husk_error_make (err, errno, "copy");
  for (;;)
    {
      char buf[128 * 1024];
      n = read (from, buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return n < 0 ? husk_error_make (err, errno, "read") : 0;
      if (husk_write_all (to, buf, (size_t) n) < 0)
        return husk_error_make (err, errno, "write");
    }
}

static int
export_blob_to_dir (struct store *store, const char *dest, const struct export_blob *blob,
                    struct husk_error **err)
{
  cleanup_free char *src_path = store_blob_path (store, blob->digest);
  cleanup_free char *dst_path = xasprintf ("%s/" BLOBS_PREFIX "%s", dest, digest_hex (blob->digest));
  cleanup_close int from = open (src_path, O_RDONLY | O_CLOEXEC);
  cleanup_close int to = -1;

  if (from < 0)
    return husk_error_make (err, errno, "open blob %s", blob->digest);
  to = open (dst_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (to < 0 && errno == EEXIST)
    return 0; /* the same layer twice in one image */
  if (to < 0)
    return husk_error_make (err, errno, "create `%s`", dst_path);
  if (copy_fd (from, to, err) < 0)
    return husk_error_wrap (err, "blob %s to `%s`", blob->digest, dst_path);
  return 0;
}

static int
check_empty_dir (const char *dest, struct husk_error **err)
{
  cleanup_dir DIR *dir = NULL;
  struct dirent *de;

  if (mkdir (dest, 0755) == 0)
    return 0;
  if (errno != EEXIST)
    return husk_error_make (err, errno, "mkdir `%s`", dest);
  dir = opendir (dest);
  if (dir == NULL)
    return husk_error_make (err, errno, "open `%s`", dest);
  while ((de = readdir (dir)) != NULL)
    if (strcmp (de->d_name, ".") && strcmp (de->d_name, ".."))
      return husk_error_make (err, EEXIST, "`%s` is not empty", dest);
  return 0;
}

static int
export_dir (struct store *store, const char *dest, const char *index_json, const struct export_blob *blobs,
            size_t n, struct husk_error **err)
{
  cleanup_free char *blobs_dir = xasprintf ("%s/" BLOBS_PREFIX, dest);
  cleanup_free char *layout_path = xasprintf ("%s/" OCI_LAYOUT_FILE, dest);
  cleanup_free char *index_path = xasprintf ("%s/" OCI_INDEX_FILE, dest);

  if (check_empty_dir (dest, err) < 0)
    return -1;
  if (husk_mkdir_p (blobs_dir, 0755, err) < 0)
    return -1;
  for (size_t i = 0; i < n; i++)
    if (export_blob_to_dir (store, dest, &blobs[i], err) < 0)
      return -1;
  /* index.json last: a layout with one is complete. */
  if (husk_write_file_atomic (layout_path, OCI_LAYOUT_JSON, strlen (OCI_LAYOUT_JSON), 0644, err) < 0
      || husk_write_file_atomic (index_path, index_json, strlen (index_json), 0644, err) < 0)
    return -1;
  return 0;
}

static int
tar_header (struct archive *a, const char *name, mode_t type, int64_t size, struct husk_error **err)
{
  struct archive_entry *entry = archive_entry_new ();
  int r;

  archive_entry_set_pathname (entry, name);
  archive_entry_set_filetype (entry, type);
  archive_entry_set_perm (entry, type == AE_IFDIR ? 0755 : 0644);
  archive_entry_set_size (entry, type == AE_IFDIR ? 0 : size);
  archive_entry_set_mtime (entry, 0, 0);
  r = archive_write_header (a, entry);
  archive_entry_free (entry);
  if (r != ARCHIVE_OK)
    return husk_error_make (err, 0, "write %s: %s", name, archive_error_string (a));
  return 0;
}

static int
tar_buffer (struct archive *a, const char *name, const char *data, struct husk_error **err)
{
  size_t len = strlen (data);

  if (tar_header (a, name, AE_IFREG, (int64_t) len, err) < 0)
    return -1;
  if (archive_write_data (a, data, len) != (la_ssize_t) len)
    return husk_error_make (err, 0, "write %s: %s", name, archive_error_string (a));
  return 0;
}

static int
tar_blob (struct archive *a, struct store *store, const struct export_blob *blob, struct husk_error **err)
{
  cleanup_free char *path = store_blob_path (store, blob->digest);
  cleanup_free char *name = xasprintf (BLOBS_PREFIX "%s", digest_hex (blob->digest));
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  char buf[128 * 1024];
  ssize_t n;

  if (fd < 0)
    return husk_error_make (err, errno, "open blob %s", blob->digest);
  if (tar_header (a, name, AE_IFREG, blob->size, err) < 0)
    return -1;
  while ((n = read (fd, buf, sizeof buf)) > 0)
    if (archive_write_data (a, buf, (size_t) n) != n)
      return husk_error_make (err, 0, "write %s: %s", name, archive_error_string (a));
  if (n < 0)
    return husk_error_make (err, errno, "read blob %s", blob->digest);
  return 0;
}

static int
write_tar (int fd, struct store *store, const char *index_json, const struct export_blob *blobs, size_t n,
           struct husk_error **err)
{
  struct archive *a = archive_write_new ();
  int ret = 0;

  archive_write_set_format_pax_restricted (a);
  if (archive_write_open_fd (a, fd) != ARCHIVE_OK)
    ret = husk_error_make (err, 0, "%s", archive_error_string (a));
  if (ret == 0)
    ret = tar_buffer (a, OCI_LAYOUT_FILE, OCI_LAYOUT_JSON, err);
  if (ret == 0)
    ret = tar_buffer (a, OCI_INDEX_FILE, index_json, err);
  if (ret == 0)
    ret = tar_header (a, "blobs/", AE_IFDIR, 0, err);
  if (ret == 0)
    ret = tar_header (a, BLOBS_PREFIX, AE_IFDIR, 0, err);
  for (size_t i = 0; ret == 0 && i < n; i++)
    {
      bool seen = false;
      for (size_t j = 0; j < i; j++)
        seen = seen || strcmp (blobs[i].digest, blobs[j].digest) == 0;
      if (!seen)
        ret = tar_blob (a, store, &blobs[i], err);
    }
  if (ret == 0 && archive_write_close (a) != ARCHIVE_OK)
    ret = husk_error_make (err, 0, "%s", archive_error_string (a));
  archive_write_free (a);
  return ret;
}

static int
export_tar (struct store *store, const char *dest, const char *index_json, const struct export_blob *blobs,
            size_t n, struct husk_error **err)
{
  cleanup_free char *tmp = xasprintf ("%s.tmp-XXXXXX", dest);
  cleanup_close int fd = mkostemp (tmp, O_CLOEXEC);

  if (fd < 0)
    return husk_error_make (err, errno, "create `%s`", tmp);
  if (write_tar (fd, store, index_json, blobs, n, err) < 0 || fchmod (fd, 0644) < 0 || fsync (fd) < 0
      || rename (tmp, dest) < 0)
    {
      int saved = errno;
      unlink (tmp);
      if (err && *err == NULL)
        husk_error_make (err, saved, "write `%s`", dest);
      return -1;
    }
  return 0;
}

static int
export_image (struct store *store, const struct image *image, const char *name_or_id, const char *dest,
              bool as_tar, struct husk_error **err)
{
  cleanup_free struct export_blob *blobs = xcalloc (image->n_layers + 2, sizeof *blobs);
  cleanup_free char *index_json = NULL;
  int64_t manifest_size = 0, config_size = 0;

  if (!store_has_blob (store, image->manifest_digest, &manifest_size)
      || !store_has_blob (store, image->id, &config_size))
    return husk_error_make (err, 0, "the manifest or config of %s is not in the content store", image->id);
  blobs[0] = (struct export_blob){ image->manifest_digest, manifest_size };
  blobs[1] = (struct export_blob){ image->id, config_size };
  for (size_t i = 0; i < image->n_layers; i++)
    blobs[i + 2] = (struct export_blob){ image->layers[i].digest, image->layers[i].size };
  index_json = export_index_json (image, manifest_size, name_or_id);
  if (as_tar)
    return export_tar (store, dest, index_json, blobs, image->n_layers + 2, err);
  return export_dir (store, dest, index_json, blobs, image->n_layers + 2, err);
}

int
layout_export (struct store *store, const char *name_or_id, const char *dest, bool as_tar,
               struct husk_error **err)
{
  struct image *image = NULL;
  cleanup_close int lock_fd = -1;
  int ret;

  if (images_lookup (store_root (store), name_or_id, &image, err) < 0)
    return husk_error_wrap (err, "export `%s`", name_or_id);
  lock_fd = store_gc_lock (store_root (store), false, true, err);
  ret = lock_fd < 0 ? -1 : export_image (store, image, name_or_id, dest, as_tar, err);
  image_free (image);
  if (ret < 0)
    return husk_error_wrap (err, "export `%s` to `%s`", name_or_id, dest);
  return 0;
}
