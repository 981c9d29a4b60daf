/* Image records in ROOT/images.json, and the manifest and config parsers
 * they are built from.  Writers hold ROOT/images.lock and replace the file
 * atomically; readers just read it. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/images.h"
#include "image/reference.h"
#include "image/snapshot.h"

#define INDEX_VERSION 1

/* jansson's own cleanup attribute. */
#define cleanup_json __attribute__ ((cleanup (json_decrefp)))

/* Small JSON and strv helpers. */

static char **
strv_empty (void)
{
  return xcalloc (1, sizeof (char *));
}

static void
strv_push (char ***v, const char *s)
{
  size_t n = husk_strv_len (*v);

  *v = xrealloc (*v, (n + 2) * sizeof **v);
  (*v)[n] = xstrdup (s);
  (*v)[n + 1] = NULL;
}

static void
strv_free (char **v)
{
  husk_strvfreep (&v);
}

static char *
json_string_dup (json_t *obj, const char *key)
{
  const char *s = json_string_value (json_object_get (obj, key));
  return s ? xstrdup (s) : NULL;
}

/* An array of strings, or NULL/absent (*OUT NULL when NULL_OK, else empty). */
static int
strv_from_json (json_t *value, const char *what, bool null_ok, char ***out, struct husk_error **err)
{
  size_t i;
  json_t *item;

  *out = NULL;
  if (value == NULL || json_is_null (value))
    {
      if (!null_ok)
        *out = strv_empty ();
      return 0;
    }
  if (!json_is_array (value))
    return husk_error_make (err, 0, "`%s` is not an array of strings", what);
  *out = strv_empty ();
  json_array_foreach (value, i, item)
  {
    if (!json_is_string (item))
      {
        strv_free (*out);
        *out = NULL;
        return husk_error_make (err, 0, "`%s[%zu]` is not a string", what, i);
      }
    strv_push (out, json_string_value (item));
  }
  return 0;
}

static json_t *
strv_to_json (char *const *v)
{
  json_t *array = json_array ();

  for (size_t i = 0; v && v[i]; i++)
    json_array_append_new (array, json_string (v[i]));
  return array;
}

static int
parse_json (const char *text, size_t len, const char *what, json_t **out, struct husk_error **err)
{
  json_error_t jerr;

  *out = json_loadb (text, len, 0, &jerr);
  if (*out == NULL)
    return husk_error_make (err, 0, "%s: invalid JSON at line %d column %d: %s", what, jerr.line, jerr.column,
                            jerr.text);
  if (!json_is_object (*out))
    {
      json_decref (*out);
      *out = NULL;
      return husk_error_make (err, 0, "%s: not a JSON object", what);
    }
  return 0;
}

/* Manifests. */

static int
descriptor_parse (json_t *json, const char *where, struct image_descriptor *out, struct husk_error **err)
{
  json_t *size = json_object_get (json, "size");

  if (!json_is_object (json))
    return husk_error_make (err, 0, "`%s` is not a descriptor", where);
  if (digest_validate (json_string_value (json_object_get (json, "digest")), where, err) < 0)
    return -1;
  if (!json_is_integer (size) || json_integer_value (size) < 0)
    return husk_error_make (err, 0, "%s: `size` is missing or negative", where);
  out->media_type = json_string_dup (json, "mediaType");
  out->digest = json_string_dup (json, "digest");
  out->size = json_integer_value (size);
  return 0;
}

static bool
media_type_is_index (const char *type)
{
  return strcmp (type, IMAGE_MEDIA_OCI_INDEX) == 0 || strcmp (type, IMAGE_MEDIA_DOCKER_LIST) == 0;
}

static int
manifest_fill (json_t *doc, struct image_manifest *out, struct husk_error **err)
{
  const char *media_type = json_string_value (json_object_get (doc, "mediaType"));
  json_t *layers = json_object_get (doc, "layers");
  size_t i;
  json_t *layer;

  if (media_type && media_type_is_index (media_type))
    return husk_error_make (err, 0, "manifest is an index (%s), not an image manifest", media_type);
  if (media_type && strcmp (media_type, IMAGE_MEDIA_OCI_MANIFEST) != 0
      && strcmp (media_type, IMAGE_MEDIA_DOCKER_MANIFEST) != 0)
    return husk_error_make (err, 0, "manifest media type `%s` is not supported", media_type);
  if (json_object_get (doc, "manifests"))
    return husk_error_make (err, 0, "manifest is an index, not an image manifest");
  out->media_type = xstrdup (media_type ? media_type : IMAGE_MEDIA_OCI_MANIFEST);
  if (descriptor_parse (json_object_get (doc, "config"), "manifest config", &out->config, err) < 0)
    return -1;
  if (!json_is_array (layers))
    return husk_error_make (err, 0, "manifest has no `layers` array");
  out->layers = xcalloc (json_array_size (layers) + 1, sizeof *out->layers);
  json_array_foreach (layers, i, layer)
  {
    cleanup_free char *where = xasprintf ("manifest layers[%zu]", i);
    if (descriptor_parse (layer, where, &out->layers[i], err) < 0)
      return -1;
    out->n_layers++;
  }
  return 0;
}

int
image_manifest_parse (const char *json, size_t len, struct image_manifest *out, struct husk_error **err)
{
  cleanup_json json_t *doc = NULL;

  memset (out, 0, sizeof *out);
  if (parse_json (json, len, "manifest", &doc, err) < 0)
    return -1;
  if (manifest_fill (doc, out, err) < 0)
    {
      image_manifest_clear (out);
      return -1;
    }
  return 0;
}

static void
descriptor_clear (struct image_descriptor *d)
{
  free (d->media_type);
  free (d->digest);
}

void
image_manifest_clear (struct image_manifest *manifest)
{
  free (manifest->media_type);
  descriptor_clear (&manifest->config);
  for (size_t i = 0; i < manifest->n_layers; i++)
    descriptor_clear (&manifest->layers[i]);
  free (manifest->layers);
  memset (manifest, 0, sizeof *manifest);
}

/* Configs.  A config is first normalised into the JSON kept in the record
 * (only the fields a runtime uses, checked), then read into the struct. */

static int
copy_string_field (json_t *from, const char *key, json_t *to, struct husk_error **err)
{
  json_t *value = json_object_get (from, key);

  if (value == NULL || json_is_null (value))
    return 0;
  if (!json_is_string (value))
    return husk_error_make (err, 0, "image config: `%s` is not a string", key);
  if (json_string_length (value) > 0)
    json_object_set (to, key, value);
  return 0;
}

static int
copy_strv_field (json_t *from, const char *key, bool null_ok, json_t *to, struct husk_error **err)
{
  cleanup_strv char **v = NULL;
  cleanup_free char *what = xasprintf ("image config: %s", key);

  if (strv_from_json (json_object_get (from, key), what, null_ok, &v, err) < 0)
    return -1;
  if (v)
    json_object_set_new (to, key, strv_to_json (v));
  return 0;
}

/* ExposedPorts and Volumes are objects used as sets: keep the keys. */
static int
copy_key_set (json_t *from, const char *key, json_t *to, struct husk_error **err)
{
  json_t *value = json_object_get (from, key);
  json_t *keys = json_array ();
  const char *name;
  json_t *ignored;

  json_object_set_new (to, key, keys);
  if (value == NULL || json_is_null (value))
    return 0;
  if (!json_is_object (value))
    return husk_error_make (err, 0, "image config: `%s` is not an object", key);
  json_object_foreach (value, name, ignored)
  {
    json_array_append_new (keys, json_string (name));
  }
  return 0;
}

static int
copy_labels (json_t *from, json_t *to, struct husk_error **err)
{
  json_t *value = json_object_get (from, "Labels");
  json_t *labels = json_object ();
  const char *key;
  json_t *label;

  json_object_set_new (to, "Labels", labels);
  if (value == NULL || json_is_null (value))
    return 0;
  if (!json_is_object (value))
    return husk_error_make (err, 0, "image config: `Labels` is not an object");
  json_object_foreach (value, key, label)
  {
    if (!json_is_string (label))
      return husk_error_make (err, 0, "image config: label `%s` is not a string", key);
    json_object_set (labels, key, label);
  }
  return 0;
}

static int
copy_runtime_config (json_t *config, json_t *norm, struct husk_error **err)
{
  static const char *const string_fields[] = { "User", "WorkingDir", "StopSignal" };

  if (config != NULL && !json_is_null (config) && !json_is_object (config))
    return husk_error_make (err, 0, "image config: `config` is not an object");
  for (size_t i = 0; i < sizeof string_fields / sizeof string_fields[0]; i++)
    if (copy_string_field (config, string_fields[i], norm, err) < 0)
      return -1;
  if (copy_strv_field (config, "Env", false, norm, err) < 0
      || copy_strv_field (config, "Entrypoint", true, norm, err) < 0
      || copy_strv_field (config, "Cmd", true, norm, err) < 0
      || copy_key_set (config, "ExposedPorts", norm, err) < 0
      || copy_key_set (config, "Volumes", norm, err) < 0 || copy_labels (config, norm, err) < 0)
    return -1;
  return 0;
}

static int
read_diff_ids (json_t *doc, char ***out, struct husk_error **err)
{
  json_t *rootfs = json_object_get (doc, "rootfs");
  const char *type = json_string_value (json_object_get (rootfs, "type"));

  if (!json_is_object (rootfs) || type == NULL || strcmp (type, "layers") != 0)
    return husk_error_make (err, 0, "image config: `rootfs` must be {\"type\": \"layers\", ...}");
  if (strv_from_json (json_object_get (rootfs, "diff_ids"), "image config: rootfs.diff_ids", false, out, err)
      < 0)
    return -1;
  for (size_t i = 0; (*out)[i]; i++)
    {
      cleanup_free char *where = xasprintf ("image config: rootfs.diff_ids[%zu]", i);
      if (digest_validate ((*out)[i], where, err) < 0)
        {
          strv_free (*out);
          *out = NULL;
          return -1;
        }
    }
  return 0;
}

static int
config_normalize (const char *json, size_t len, json_t **out, char ***diff_ids, struct husk_error **err)
{
  static const char *const platform_fields[] = { "os", "architecture", "variant", "created" };
  cleanup_json json_t *doc = NULL;
  cleanup_json json_t *norm = json_object ();
  cleanup_strv char **ids = NULL;

  if (parse_json (json, len, "image config", &doc, err) < 0)
    return -1;
  if (copy_runtime_config (json_object_get (doc, "config"), norm, err) < 0)
    return -1;
  for (size_t i = 0; i < sizeof platform_fields / sizeof platform_fields[0]; i++)
    if (copy_string_field (doc, platform_fields[i], norm, err) < 0)
      return -1;
  if (read_diff_ids (doc, &ids, err) < 0)
    return -1;
  if (diff_ids)
    *diff_ids = steal_pointer (&ids);
  *out = steal_pointer (&norm);
  return 0;
}

static void
config_from_record (json_t *norm, struct image_config *out)
{
  json_t *labels = json_object_get (norm, "Labels");
  const char *key;
  json_t *value;

  memset (out, 0, sizeof *out);
  out->user = json_string_dup (norm, "User");
  out->working_dir = json_string_dup (norm, "WorkingDir");
  out->stop_signal = json_string_dup (norm, "StopSignal");
  out->os = json_string_dup (norm, "os");
  out->architecture = json_string_dup (norm, "architecture");
  out->variant = json_string_dup (norm, "variant");
  out->created = json_string_dup (norm, "created");
  /* The record was checked when it was written. */
  strv_from_json (json_object_get (norm, "Env"), "Env", false, &out->env, NULL);
  strv_from_json (json_object_get (norm, "Entrypoint"), "Entrypoint", true, &out->entrypoint, NULL);
  strv_from_json (json_object_get (norm, "Cmd"), "Cmd", true, &out->cmd, NULL);
  strv_from_json (json_object_get (norm, "ExposedPorts"), "ExposedPorts", false, &out->exposed_ports, NULL);
  strv_from_json (json_object_get (norm, "Volumes"), "Volumes", false, &out->volumes, NULL);
  out->labels = xcalloc (json_object_size (labels) + 1, sizeof *out->labels);
  json_object_foreach (labels, key, value)
  {
    out->labels[out->n_labels].key = xstrdup (key);
    out->labels[out->n_labels].value = xstrdup (json_string_value (value) ? json_string_value (value) : "");
    out->n_labels++;
  }
}

int
image_config_parse (const char *json, size_t len, struct image_config *out, char ***diff_ids,
                    struct husk_error **err)
{
  cleanup_json json_t *norm = NULL;

  memset (out, 0, sizeof *out);
  if (config_normalize (json, len, &norm, diff_ids, err) < 0)
    return -1;
  config_from_record (norm, out);
  return 0;
}

void
image_config_clear (struct image_config *config)
{
  free (config->user);
  free (config->working_dir);
  free (config->stop_signal);
  free (config->os);
  free (config->architecture);
  free (config->variant);
  free (config->created);
  strv_free (config->env);
  strv_free (config->entrypoint);
  strv_free (config->cmd);
  strv_free (config->exposed_ports);
  strv_free (config->volumes);
  for (size_t i = 0; i < config->n_labels; i++)
    {
      free (config->labels[i].key);
      free (config->labels[i].value);
    }
  free (config->labels);
  memset (config, 0, sizeof *config);
}

const char *
image_config_label (const struct image_config *config, const char *key)
{
  for (size_t i = 0; i < config->n_labels; i++)
    if (strcmp (config->labels[i].key, key) == 0)
      return config->labels[i].value;
  return NULL;
}

/* Records: JSON objects in the index <-> struct image. */

static struct image *
image_from_record (json_t *rec)
{
  struct image *image = xcalloc (1, sizeof *image);
  json_t *layers = json_object_get (rec, "layers");
  size_t i;
  json_t *layer;

  image->id = json_string_dup (rec, "id");
  image->manifest_digest = json_string_dup (rec, "manifest_digest");
  image->media_type = json_string_dup (rec, "media_type");
  image->index_digest = json_string_dup (rec, "index_digest");
  image->size = json_integer_value (json_object_get (rec, "size"));
  image->added = json_integer_value (json_object_get (rec, "added"));
  strv_from_json (json_object_get (rec, "repo_tags"), "repo_tags", false, &image->repo_tags, NULL);
  strv_from_json (json_object_get (rec, "repo_digests"), "repo_digests", false, &image->repo_digests, NULL);
  image->layers = xcalloc (json_array_size (layers) + 1, sizeof *image->layers);
  json_array_foreach (layers, i, layer)
  {
    struct image_layer *l = &image->layers[image->n_layers++];
    l->digest = json_string_dup (layer, "digest");
    l->media_type = json_string_dup (layer, "media_type");
    l->size = json_integer_value (json_object_get (layer, "size"));
    l->diff_id = json_string_dup (layer, "diff_id");
    l->chain_id = json_string_dup (layer, "chain_id");
  }
  config_from_record (json_object_get (rec, "config"), &image->config);
  return image;
}

void
image_free (struct image *image)
{
  if (image == NULL)
    return;
  free (image->id);
  free (image->manifest_digest);
  free (image->media_type);
  free (image->index_digest);
  strv_free (image->repo_tags);
  strv_free (image->repo_digests);
  for (size_t i = 0; i < image->n_layers; i++)
    {
      free (image->layers[i].digest);
      free (image->layers[i].media_type);
      free (image->layers[i].diff_id);
      free (image->layers[i].chain_id);
    }
  free (image->layers);
  image_config_clear (&image->config);
  free (image);
}

void
images_free (struct image **images, size_t n)
{
  for (size_t i = 0; images && i < n; i++)
    image_free (images[i]);
  free (images);
}

static json_t *
layers_record (const struct image_manifest *manifest, char *const *diff_ids, int64_t *total_size)
{
  json_t *layers = json_array ();
  char chain_id[DIGEST_STR_SIZE];

  for (size_t i = 0; i < manifest->n_layers; i++)
    {
      const struct image_descriptor *d = &manifest->layers[i];
      snapshot_chain_id (i ? chain_id : NULL, diff_ids[i], chain_id);
      json_array_append_new (layers, json_pack ("{s:s, s:s?, s:I, s:s, s:s}", "digest", d->digest,
                                                "media_type", d->media_type, "size", (json_int_t) d->size,
                                                "diff_id", diff_ids[i], "chain_id", chain_id));
      *total_size += d->size;
    }
  return layers;
}

static json_t *
image_record (const struct images_add_request *req, const struct image_manifest *manifest, json_t *config,
              char *const *diff_ids)
{
  int64_t size = manifest->config.size;
  json_t *layers = layers_record (manifest, diff_ids, &size);

  return json_pack ("{s:s, s:[], s:[], s:s, s:s, s:s?, s:I, s:I, s:o, s:o}", "id", manifest->config.digest,
                    "repo_tags", "repo_digests", "manifest_digest", req->manifest_digest, "media_type",
                    manifest->media_type, "index_digest", req->index_digest, "size", (json_int_t) size,
                    "added", (json_int_t) time (NULL), "layers", layers, "config", config);
}

/* The index file. */

static char *
index_path (const char *root)
{
  return xasprintf ("%s/images.json", root);
}

static int
load_index (const char *root, json_t **out, struct husk_error **err)
{
  cleanup_free char *path = index_path (root);
  cleanup_free char *text = NULL;
  size_t len = 0;
  json_t *doc = NULL;

  if (husk_read_file (path, &text, &len, NULL) < 0)
    {
      if (errno != ENOENT)
        return husk_error_make (err, errno, "read `%s`", path);
      *out = json_pack ("{s:i, s:[]}", "version", INDEX_VERSION, "images");
      return 0;
    }
  if (parse_json (text, len, path, &doc, err) < 0)
    return -1;
  if (!json_is_array (json_object_get (doc, "images")))
    {
      json_decref (doc);
      return husk_error_make (err, 0, "%s: no `images` array", path);
    }
  *out = doc;
  return 0;
}

static int
save_index (const char *root, json_t *doc, struct husk_error **err)
{
  cleanup_free char *path = index_path (root);
  cleanup_free char *text = json_dumps (doc, JSON_INDENT (1));

  if (text == NULL)
    abort ();
  return husk_write_file_atomic (path, text, strlen (text), 0600, err);
}

static int
lock_index (const char *root, struct husk_error **err)
{
  cleanup_free char *path = xasprintf ("%s/images.lock", root);
  cleanup_close int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

  if (fd < 0)
    return husk_error_make (err, errno, "open `%s`", path);
  while (flock (fd, LOCK_EX) < 0)
    if (errno != EINTR)
      return husk_error_make (err, errno, "lock `%s`", path);
  return steal_fd (&fd);
}

/* Names. */

static bool
json_strings_contain (json_t *array, const char *s)
{
  size_t i;
  json_t *item;

  json_array_foreach (array, i, item)
  {
    if (strcmp (json_string_value (item), s) == 0)
      return true;
  }
  return false;
}

static bool
json_strings_remove (json_t *array, const char *s)
{
  for (size_t i = 0; i < json_array_size (array); i++)
    if (strcmp (json_string_value (json_array_get (array, i)), s) == 0)
      {
        json_array_remove (array, i);
        return true;
      }
  return false;
}

static void
json_strings_add (json_t *array, const char *s)
{
  if (!json_strings_contain (array, s))
    json_array_append_new (array, json_string (s));
}

/* The repo tag and repo digest NAME gives this image.  A name with a digest
 * must name this manifest (or the index it came from) and gets no tag. */
static int
names_for (const struct images_add_request *req, char **tag, char **repo_digest, struct husk_error **err)
{
  struct reference *ref = NULL;
  cleanup_free char *repo = NULL;
  const char *digest = req->index_digest ? req->index_digest : req->manifest_digest;

  *tag = *repo_digest = NULL;
  if (req->name == NULL)
    return 0;
  if (reference_parse (req->name, &ref, err) < 0)
    return -1;
  repo = reference_repository (ref);
  if (ref->digest && strcmp (ref->digest, req->manifest_digest) != 0
      && (req->index_digest == NULL || strcmp (ref->digest, req->index_digest) != 0))
    {
      husk_error_make (err, 0, "name `%s` is digest %s, but the manifest is %s", req->name, ref->digest,
                       req->manifest_digest);
      reference_free (ref);
      return -1;
    }
  if (ref->digest)
    digest = ref->digest;
  else if (ref->tag)
    *tag = xasprintf ("%s:%s", repo, ref->tag);
  *repo_digest = xasprintf ("%s@%s", repo, digest);
  reference_free (ref);
  return 0;
}

static json_t *
find_by_id (json_t *images, const char *id, size_t *index)
{
  size_t i;
  json_t *rec;

  json_array_foreach (images, i, rec)
  {
    const char *rec_id = json_string_value (json_object_get (rec, "id"));
    if (rec_id && strcmp (rec_id, id) == 0)
      {
        if (index)
          *index = i;
        return rec;
      }
  }
  return NULL;
}

static void
apply_names (json_t *images, json_t *rec, const char *tag, const char *repo_digest)
{
  size_t i;
  json_t *other;

  if (tag)
    {
      /* A tag names one image: it moves. */
      json_array_foreach (images, i, other)
      {
        if (other != rec)
          json_strings_remove (json_object_get (other, "repo_tags"), tag);
      }
      json_strings_add (json_object_get (rec, "repo_tags"), tag);
    }
  if (repo_digest)
    json_strings_add (json_object_get (rec, "repo_digests"), repo_digest);
}

/* Adding. */

static int
load_config (struct store *store, const struct images_add_request *req, const struct image_descriptor *config,
             char **out, size_t *len, struct husk_error **err)
{
  char actual[DIGEST_STR_SIZE];

  if (req->config == NULL)
    return store_read_blob (store, config->digest, STORE_SMALL_BLOB_MAX, out, len, err);
  digest_of_buffer (req->config, req->config_len, actual);
  if (strcmp (actual, config->digest) != 0)
    return husk_error_make (err, 0, "image config has digest %s, but the manifest says %s", actual,
                            config->digest);
  if ((int64_t) req->config_len != config->size)
    return husk_error_make (err, 0, "image config is %zu bytes, but the manifest says %lld", req->config_len,
                            (long long) config->size);
  *out = xmalloc (req->config_len + 1);
  memcpy (*out, req->config, req->config_len);
  (*out)[req->config_len] = '\0';
  *len = req->config_len;
  return 0;
}

static int
check_layer_blobs (struct store *store, const struct image_manifest *manifest, struct husk_error **err)
{
  for (size_t i = 0; i < manifest->n_layers; i++)
    {
      const struct image_descriptor *layer = &manifest->layers[i];
      int64_t size = 0;
      if (!store_has_blob (store, layer->digest, &size))
        return husk_error_make (err, 0, "layer %s is not in the content store", layer->digest);
      if (size != layer->size)
        return husk_error_make (err, 0, "layer %s is %lld bytes in the store, but the manifest says %lld",
                                layer->digest, (long long) size, (long long) layer->size);
    }
  return 0;
}

/* Checks the manifest and config and builds the record to add. */
static int
prepare_record (struct store *store, const struct images_add_request *req, json_t **out,
                struct husk_error **err)
{
  struct image_manifest manifest;
  cleanup_free char *config = NULL;
  cleanup_strv char **diff_ids = NULL;
  json_t *norm = NULL;
  size_t config_len = 0;
  char actual[DIGEST_STR_SIZE];
  int ret = -1;

  if (digest_validate (req->manifest_digest, "manifest digest", err) < 0)
    return -1;
  digest_of_buffer (req->manifest, req->manifest_len, actual);
  if (strcmp (actual, req->manifest_digest) != 0)
    return husk_error_make (err, 0, "manifest has digest %s, not %s", actual, req->manifest_digest);
  if (image_manifest_parse (req->manifest, req->manifest_len, &manifest, err) < 0)
    return -1;
  if (load_config (store, req, &manifest.config, &config, &config_len, err) == 0
      && config_normalize (config, config_len, &norm, &diff_ids, err) == 0)
    {
      if (husk_strv_len (diff_ids) != manifest.n_layers)
        husk_error_make (err, 0, "image config lists %zu diff_ids for the manifest's %zu layers",
                         husk_strv_len (diff_ids), manifest.n_layers);
      else if (check_layer_blobs (store, &manifest, err) == 0
               && store_put_blob (store, req->manifest_digest, req->manifest, req->manifest_len, err) == 0
               && store_put_blob (store, manifest.config.digest, config, config_len, err) == 0)
        {
          *out = image_record (req, &manifest, steal_pointer (&norm), diff_ids);
          ret = 0;
        }
    }
  json_decref (norm);
  image_manifest_clear (&manifest);
  return ret;
}

static int
add_record (const char *root, json_t *new_rec, const char *tag, const char *repo_digest, struct image **out,
            struct husk_error **err)
{
  cleanup_close int lock_fd = lock_index (root, err);
  cleanup_json json_t *doc = NULL;
  json_t *images, *rec;

  if (lock_fd < 0 || load_index (root, &doc, err) < 0)
    return -1;
  images = json_object_get (doc, "images");
  rec = find_by_id (images, json_string_value (json_object_get (new_rec, "id")), NULL);
  if (rec == NULL)
    {
      json_array_append (images, new_rec);
      rec = new_rec;
    }
  apply_names (images, rec, tag, repo_digest);
  if (save_index (root, doc, err) < 0)
    return -1;
  if (out)
    *out = image_from_record (rec);
  return 0;
}

int
images_add (struct store *store, const struct images_add_request *req, struct image **out,
            struct husk_error **err)
{
  const char *root = store_root (store);
  cleanup_free char *tag = NULL, *repo_digest = NULL;
  cleanup_json json_t *rec = NULL;
  cleanup_close int gc_fd = -1;

  if (names_for (req, &tag, &repo_digest, err) < 0)
    return husk_error_wrap (err, "add image");
  /* Blobs checked here must still be there when the record lands. */
  gc_fd = store_gc_lock (root, false, true, err);
  if (gc_fd < 0)
    return -1;
  if (prepare_record (store, req, &rec, err) < 0)
    return husk_error_wrap (err, "add image %s", req->name ? req->name : req->manifest_digest);
  return add_record (root, rec, tag, repo_digest, out, err);
}

/* Finding. */

enum match_kind
{
  MATCH_ID,
  MATCH_TAG,
  MATCH_DIGEST,
};

struct match
{
  size_t index;
  enum match_kind kind;
  char *name; /* the tag or digest that matched */
};

static bool
find_by_name (json_t *images, const char *name, struct match *m)
{
  size_t i;
  json_t *rec;

  json_array_foreach (images, i, rec)
  {
    if (json_strings_contain (json_object_get (rec, "repo_tags"), name))
      *m = (struct match){ i, MATCH_TAG, xstrdup (name) };
    else if (json_strings_contain (json_object_get (rec, "repo_digests"), name))
      *m = (struct match){ i, MATCH_DIGEST, xstrdup (name) };
    else
      continue;
    return true;
  }
  return false;
}

static bool
find_by_reference (json_t *images, const char *text, struct match *m)
{
  struct reference *ref = NULL;
  cleanup_free char *name = NULL;
  cleanup_free char *repo = NULL;

  if (reference_parse (text, &ref, NULL) < 0)
    return false;
  repo = reference_repository (ref);
  name = ref->digest ? xasprintf ("%s@%s", repo, ref->digest) : xasprintf ("%s:%s", repo, ref->tag);
  reference_free (ref);
  return find_by_name (images, name, m);
}

static bool
is_hex (const char *s)
{
  return *s && strspn (s, "0123456789abcdef") == strlen (s);
}

static int
find_by_prefix (json_t *images, const char *text, struct match *m, struct husk_error **err)
{
  const char *prefix = husk_str_has_prefix (text, "sha256:") ? text + 7 : text;
  size_t found = 0, i;
  json_t *rec;

  if (!is_hex (prefix))
    return 0;
  json_array_foreach (images, i, rec)
  {
    const char *id = json_string_value (json_object_get (rec, "id"));
    if (id && husk_str_has_prefix (id + 7, prefix) && found++ == 0)
      *m = (struct match){ i, MATCH_ID, NULL };
  }
  if (found > 1)
    return husk_error_make (err, 0, "image ID prefix `%s` matches %zu images", text, found);
  return found == 1;
}

/* 1: found, 0: not found (an ENOENT error is set), -1: error. */
static int
find_image (json_t *images, const char *text, struct match *m, struct husk_error **err)
{
  cleanup_free char *full_id = NULL;
  int found;

  full_id = strlen (text) == 64 && is_hex (text) ? xasprintf ("sha256:%s", text) : xstrdup (text);
  if (digest_is_valid (full_id) && find_by_id (images, full_id, &m->index))
    {
      m->kind = MATCH_ID;
      m->name = NULL;
      return 1;
    }
  if (find_by_name (images, text, m) || find_by_reference (images, text, m))
    return 1;
  found = find_by_prefix (images, text, m, err);
  if (found == 0)
    husk_error_make (err, ENOENT, "image `%s` not found", text);
  return found;
}

int
images_lookup (const char *root, const char *name_or_id, struct image **out, struct husk_error **err)
{
  cleanup_json json_t *doc = NULL;
  struct match m = { 0 };

  if (load_index (root, &doc, err) < 0)
    return -1;
  if (find_image (json_object_get (doc, "images"), name_or_id, &m, err) <= 0)
    return -1;
  free (m.name);
  *out = image_from_record (json_array_get (json_object_get (doc, "images"), m.index));
  return 0;
}

int
images_list (const char *root, struct image ***out, size_t *n, struct husk_error **err)
{
  cleanup_json json_t *doc = NULL;
  json_t *images, *rec;
  size_t i;

  if (load_index (root, &doc, err) < 0)
    return -1;
  images = json_object_get (doc, "images");
  *out = xcalloc (json_array_size (images) + 1, sizeof **out);
  json_array_foreach (images, i, rec)
  {
    (*out)[i] = image_from_record (rec);
  }
  *n = json_array_size (images);
  return 0;
}

/* Removing. */

/* Drops the matched name; true when the image itself goes too. */
static bool
remove_name (json_t *rec, const struct match *m, unsigned flags)
{
  json_t *tags = json_object_get (rec, "repo_tags");
  json_t *digests = json_object_get (rec, "repo_digests");

  if (m->kind == MATCH_ID || (flags & IMAGES_REMOVE_ALL_TAGS))
    return true;
  if (m->kind == MATCH_TAG)
    {
      json_strings_remove (tags, m->name);
      return json_array_size (tags) == 0;
    }
  json_strings_remove (digests, m->name);
  return json_array_size (tags) == 0 && json_array_size (digests) == 0;
}

static int
remove_record (const char *root, const char *name_or_id, unsigned flags, char **deleted_id,
               struct husk_error **err)
{
  cleanup_close int lock_fd = lock_index (root, err);
  cleanup_json json_t *doc = NULL;
  struct match m = { 0 };
  json_t *images, *rec;

  if (lock_fd < 0 || load_index (root, &doc, err) < 0)
    return -1;
  images = json_object_get (doc, "images");
  if (find_image (images, name_or_id, &m, err) <= 0)
    return -1;
  rec = json_array_get (images, m.index);
  if (remove_name (rec, &m, flags))
    {
      *deleted_id = json_string_dup (rec, "id");
      json_array_remove (images, m.index);
    }
  free (m.name);
  return save_index (root, doc, err);
}

int
images_remove (struct store *store, const char *name_or_id, unsigned flags, char **deleted_id,
               struct husk_error **err)
{
  struct husk_error *gc_err = NULL;
  char *removed_id = NULL;

  if (remove_record (store_root (store), name_or_id, flags, &removed_id, err) < 0)
    {
      free (removed_id);
      return husk_error_wrap (err, "remove image");
    }
  /* The record is gone either way; a GC failure leaves garbage for the
   * next one. */
  if (removed_id && images_gc_soon (store, NULL, &gc_err) < 0)
    {
      husk_warn ("collect garbage after removing %s: %s", removed_id, gc_err->msg);
      husk_error_free (&gc_err);
    }
  if (deleted_id)
    *deleted_id = removed_id;
  else
    free (removed_id);
  return 0;
}

/* GC. */

static void
collect_references (json_t *images, char ***blobs, char ***chains)
{
  static const char *const blob_fields[] = { "id", "manifest_digest", "index_digest" };
  size_t i, j;
  json_t *rec, *layer;

  *blobs = strv_empty ();
  *chains = strv_empty ();
  json_array_foreach (images, i, rec)
  {
    for (size_t k = 0; k < sizeof blob_fields / sizeof blob_fields[0]; k++)
      if (json_string_value (json_object_get (rec, blob_fields[k])))
        strv_push (blobs, json_string_value (json_object_get (rec, blob_fields[k])));
    json_array_foreach (json_object_get (rec, "layers"), j, layer)
    {
      strv_push (blobs, json_string_value (json_object_get (layer, "digest")));
      strv_push (chains, json_string_value (json_object_get (layer, "chain_id")));
    }
  }
}

static char *
gc_wanted_path (const struct store *store)
{
  return xasprintf ("%s/gc.wanted", store_root (store));
}

int
images_gc (struct store *store, struct images_gc_stats *stats, struct husk_error **err)
{
  const char *root = store_root (store);
  struct images_gc_stats local = { 0 };
  cleanup_close int lock_fd = -1;
  cleanup_json json_t *doc = NULL;
  cleanup_strv char **blobs = NULL;
  cleanup_strv char **chains = NULL;
  cleanup_free char *wanted = gc_wanted_path (store);
  struct husk_error *lock_err = NULL;

  if (stats == NULL)
    stats = &local;
  memset (stats, 0, sizeof *stats);
  lock_fd = store_gc_lock (root, true, false, &lock_err);
  if (lock_fd < 0)
    {
      if (lock_err->errnum != EWOULDBLOCK)
        {
          husk_error_make (err, lock_err->errnum, "image GC: %s", lock_err->msg);
          husk_error_free (&lock_err);
          return -1;
        }
      husk_error_free (&lock_err);
      husk_debug ("image GC deferred: a pull or a container mount is in progress");
      stats->deferred = true;
      return 0;
    }
  /* Whoever wanted a GC gets this one: it sees everything they left. */
  if (unlink (wanted) < 0 && errno != ENOENT)
    husk_warn ("image GC: remove `%s`: %s", wanted, strerror (errno));
  /* Ingest files are only ever open under the shared lock, so holding it
   * exclusive means any left are from a killed pull. */
  if (store_cleanup_ingest (store, 0, NULL, err) < 0)
    return husk_error_wrap (err, "image GC");
  if (load_index (root, &doc, err) < 0)
    return -1;
  collect_references (json_object_get (doc, "images"), &blobs, &chains);
  if (store_gc (store, blobs, &stats->blobs_removed, err) < 0
      || snapshot_gc (root, chains, &stats->snapshots_removed, err) < 0)
    return husk_error_wrap (err, "image GC");
  return 0;
}

int
images_gc_soon (struct store *store, struct images_gc_stats *stats, struct husk_error **err)
{
  cleanup_free char *wanted = gc_wanted_path (store);
  struct images_gc_stats local;
  /* Before trying: a lock holder that ends after our try sees it. */
  cleanup_close int fd = open (wanted, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  int open_errno = errno;

  if (stats == NULL)
    stats = &local;
  /* No room even for an empty file: the GC that frees some still runs. */
  if (images_gc (store, stats, err) < 0)
    return -1;
  if (fd < 0 && stats->deferred)
    return husk_error_make (err, open_errno, "image GC deferred, and could not create `%s`", wanted);
  return 0;
}

int
images_gc_if_wanted (struct store *store, struct images_gc_stats *stats, struct husk_error **err)
{
  cleanup_free char *wanted = gc_wanted_path (store);

  if (access (wanted, F_OK) < 0)
    {
      if (stats)
        memset (stats, 0, sizeof *stats);
      return 0;
    }
  return images_gc (store, stats, err);
}

int
images_prepare_snapshots (struct store *store, const struct image *img, struct husk_error **err)
{
  cleanup_free struct snapshot_layer *layers = xcalloc (img->n_layers + 1, sizeof *layers);

  for (size_t i = 0; i < img->n_layers; i++)
    layers[i] = (struct snapshot_layer){ .digest = img->layers[i].digest,
                                         .media_type = img->layers[i].media_type,
                                         .diff_id = img->layers[i].diff_id };
  return snapshot_prepare_layers (store, layers, img->n_layers, NULL, err);
}
