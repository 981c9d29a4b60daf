/* CRI container records on disk (see container_store.h), and their index:
 * every record in memory, read from disk once (with the rebuilding of a
 * record that cannot be read) and updated under RECORDS_LOCK right after
 * each write, so that lookups and lists read no record file.  The disk
 * stays the truth: a restarted huskd reads it again.  The exit file of a
 * container that ended meanwhile is still looked for on each read. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cri/container/container_store.h"
#include "cri/proto/api.pb-c.h"
#include "cri/spec/proto_copy.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define RECORD_FILE "cri.json"
#define CONFIG_FILE "config.pb"
#define DAMAGED_SUFFIX ".damaged"
/* What cri_spec.c writes into the bundle's annotations. */
#define ANNOTATION_SANDBOX_ID "io.kubernetes.cri.sandbox-id"
#define ANNOTATION_NAME "io.kubernetes.cri.container-name"
#define ANNOTATION_IMAGE "io.kubernetes.cri.image-name"
#define ANNOTATION_PREFIX "io.kubernetes.cri."
#define ANNOTATION_STOP_SIGNAL "org.opencontainers.image.stopSignal"

static const char *const state_names[] = { "created", "running", "exited" };

void
cri_container_free (struct cri_container *c)
{
  if (c == NULL)
    return;
  free (c->id);
  free (c->sandbox_id);
  free (c->name);
  free (c->image);
  free (c->image_id);
  free (c->image_ref);
  free (c->runtime_handler);
  free (c->log_path);
  free (c->stop_signal);
  free (c->reason);
  free (c->message);
  if (c->config)
    runtime__v1__container_config__free_unpacked (c->config, NULL);
  free (c);
}

void
cri_containers_free (struct cri_container **list, size_t n)
{
  for (size_t i = 0; i < n; i++)
    cri_container_free (list[i]);
  free (list);
}

static char *
dup_or_null (const char *s)
{
  return s ? xstrdup (s) : NULL;
}

static Runtime__V1__ContainerConfig *
config_copy (const Runtime__V1__ContainerConfig *config)
{
  return (Runtime__V1__ContainerConfig *) cri_message_copy (&config->base);
}

/* CONFIG's metadata, labels and annotations alone, copied: what the stats
 * RPCs report of a container. */
static Runtime__V1__ContainerConfig *
config_attributes (const Runtime__V1__ContainerConfig *config)
{
  Runtime__V1__ContainerConfig brief = RUNTIME__V1__CONTAINER_CONFIG__INIT;

  brief.metadata = config->metadata;
  brief.n_labels = config->n_labels;
  brief.labels = config->labels;
  brief.n_annotations = config->n_annotations;
  brief.annotations = config->annotations;
  return config_copy (&brief);
}

static struct cri_container *
copy_container (const struct cri_container *c, bool full_config)
{
  struct cri_container *copy = xmalloc (sizeof *copy);

  *copy = *c;
  copy->id = dup_or_null (c->id);
  copy->sandbox_id = dup_or_null (c->sandbox_id);
  copy->name = dup_or_null (c->name);
  copy->image = dup_or_null (c->image);
  copy->image_id = dup_or_null (c->image_id);
  copy->image_ref = dup_or_null (c->image_ref);
  copy->runtime_handler = dup_or_null (c->runtime_handler);
  copy->log_path = dup_or_null (c->log_path);
  copy->stop_signal = dup_or_null (c->stop_signal);
  copy->reason = dup_or_null (c->reason);
  copy->message = dup_or_null (c->message);
  copy->config = c->config == NULL ? NULL
                 : full_config     ? config_copy (c->config)
                                   : config_attributes (c->config);
  return copy;
}

struct cri_container *
cri_container_copy (const struct cri_container *c)
{
  return copy_container (c, true);
}

int
container_store_open (const char *root, const char *state, struct container_store **out,
                      struct husk_error **err)
{
  struct container_store *store = xcalloc (1, sizeof *store);

  store->containers_dir = xasprintf ("%s/containers", root);
  store->exit_dir = xasprintf ("%s/exits", state);
  pthread_mutex_init (&store->lock, NULL);
  pthread_cond_init (&store->idle, NULL);
  store->claims = xcalloc (1, sizeof *store->claims);
  pthread_mutex_init (&store->records_lock, NULL);
  store->rebuild_warned = xcalloc (1, sizeof *store->rebuild_warned);
  if (husk_mkdir_p (store->containers_dir, 0700, err) < 0 || husk_mkdir_p (store->exit_dir, 0700, err) < 0)
    {
      container_store_free (store);
      return -1;
    }
  *out = store;
  return 0;
}

void
container_store_free (struct container_store *store)
{
  if (store == NULL)
    return;
  free (store->containers_dir);
  free (store->exit_dir);
  pthread_mutex_destroy (&store->lock);
  pthread_cond_destroy (&store->idle);
  husk_strvfreep (&store->claims);
  pthread_mutex_destroy (&store->records_lock);
  cri_containers_free (store->records, store->n_records);
  husk_strvfreep (&store->rebuild_warned);
  free (store);
}

static bool
claim_with_prefix (const struct container_store *store, const char *prefix)
{
  size_t len = strlen (prefix);

  for (size_t i = 0; store->claims[i]; i++)
    if (strncmp (store->claims[i], prefix, len) == 0)
      return true;
  return false;
}

void
container_store_wait_idle (struct container_store *store, const char *prefix)
{
  while (claim_with_prefix (store, prefix))
    pthread_cond_wait (&store->idle, &store->lock);
}

bool
container_store_claimed (const struct container_store *store, const char *key)
{
  for (size_t i = 0; store->claims[i]; i++)
    if (strcmp (store->claims[i], key) == 0)
      return true;
  return false;
}

void
container_store_claim (struct container_store *store, const char *key)
{
  store->claims = husk_strv_append (store->claims, key);
}

void
container_store_release (struct container_store *store, const char *key)
{
  size_t n = husk_strv_len (store->claims);

  for (size_t i = 0; i < n; i++)
    if (strcmp (store->claims[i], key) == 0)
      {
        free (store->claims[i]);
        store->claims[i] = store->claims[n - 1];
        store->claims[n - 1] = NULL;
        break;
      }
  pthread_cond_broadcast (&store->idle);
}

char *
container_store_dir (const struct container_store *store, const char *id)
{
  return xasprintf ("%s/%s", store->containers_dir, id);
}

char *
container_store_exit_path (const struct container_store *store, const char *id)
{
  return xasprintf ("%s/%s", store->exit_dir, id);
}

static void
set_string (json_t *doc, const char *key, const char *value)
{
  if (value)
    json_object_set_new (doc, key, json_string (value));
}

static json_t *
record_json (const struct cri_container *c)
{
  json_t *doc = json_pack ("{s:s, s:s, s:s, s:I, s:s, s:I, s:I, s:I, s:i, s:b, s:i, s:i}", "id", c->id,
                           "sandbox_id", c->sandbox_id, "name", c->name, "attempt", (json_int_t) c->attempt,
                           "state", state_names[c->state], "created_at", (json_int_t) c->created_at,
                           "started_at", (json_int_t) c->started_at, "finished_at",
                           (json_int_t) c->finished_at, "exit_code", c->exit_code, "oom_killed",
                           c->oom_killed, "pid", (int) c->pid, "monitor_pid", (int) c->monitor_pid);

  set_string (doc, "image", c->image);
  set_string (doc, "image_id", c->image_id);
  set_string (doc, "image_ref", c->image_ref);
  set_string (doc, "runtime_handler", c->runtime_handler);
  set_string (doc, "log_path", c->log_path);
  set_string (doc, "stop_signal", c->stop_signal);
  set_string (doc, "reason", c->reason);
  set_string (doc, "message", c->message);
  if (c->pid_start)
    json_object_set_new (doc, "pid_start", json_integer ((json_int_t) c->pid_start));
  if (c->monitor_start)
    json_object_set_new (doc, "monitor_start", json_integer ((json_int_t) c->monitor_start));
  return doc;
}

/* ------------------------------------------------------------------ */
/* the index (under RECORDS_LOCK)                                       */

/* Where the first id not below KEY is (or would go). */
static size_t
index_lower_bound (const struct container_store *store, const char *key)
{
  size_t lo = 0, hi = store->n_records;

  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (strcmp (store->records[mid]->id, key) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

static struct cri_container *
index_get (const struct container_store *store, const char *id)
{
  size_t i = index_lower_bound (store, id);

  return i < store->n_records && strcmp (store->records[i]->id, id) == 0 ? store->records[i] : NULL;
}

/* C in place of the record of its id, or added; the index owns C. */
static void
index_put (struct container_store *store, struct cri_container *c)
{
  size_t i = index_lower_bound (store, c->id);

  if (i < store->n_records && strcmp (store->records[i]->id, c->id) == 0)
    {
      if (store->records[i] != c)
        cri_container_free (store->records[i]);
      store->records[i] = c;
      return;
    }
  store->records = xrealloc (store->records, (store->n_records + 1) * sizeof *store->records);
  memmove (&store->records[i + 1], &store->records[i], (store->n_records - i) * sizeof *store->records);
  store->records[i] = c;
  store->n_records++;
}

static void
index_drop (struct container_store *store, const char *id)
{
  size_t i = index_lower_bound (store, id);

  if (i >= store->n_records || strcmp (store->records[i]->id, id) != 0)
    return;
  cri_container_free (store->records[i]);
  memmove (&store->records[i], &store->records[i + 1], (store->n_records - i - 1) * sizeof *store->records);
  store->n_records--;
}

/* The files of C's record, written; the index is not touched. */
static int
write_record (struct container_store *store, const struct cri_container *c, bool with_config,
              struct husk_error **err)
{
  cleanup_free char *dir = container_store_dir (store, c->id);
  cleanup_free char *path = xasprintf ("%s/" RECORD_FILE, dir);
  json_t *doc = record_json (c);
  cleanup_free char *text = json_dumps (doc, JSON_COMPACT);

  json_decref (doc);
  /* Only a save with the config (the create's) makes the directory: an
   * update racing RemoveContainer (an exit file read, a lost monitor's
   * stand-in) must not bring a removed container's directory back. */
  if (with_config ? husk_mkdir_p (dir, 0700, err) < 0 : !store->loaded && access (dir, F_OK) < 0)
    return with_config ? -1 : husk_error_kind (err, ENOENT, "container %s: removed", c->id);
  if (with_config)
    {
      size_t size = protobuf_c_message_get_packed_size (&c->config->base);
      cleanup_free uint8_t *buf = xmalloc (size ? size : 1);
      cleanup_free char *config_path = xasprintf ("%s/" CONFIG_FILE, dir);

      protobuf_c_message_pack (&c->config->base, buf);
      if (husk_write_file_atomic (config_path, buf, size, 0600, err) < 0)
        return -1;
    }
  return husk_write_file_atomic (path, text, strlen (text), 0600, err);
}

/* Under RECORDS_LOCK.  The index follows the disk: a write that failed
 * leaves the index as it was, and so as the disk still says. */
static int
save_locked (struct container_store *store, const struct cri_container *c, bool with_config,
             struct husk_error **err)
{
  struct cri_container *held = store->loaded ? index_get (store, c->id) : NULL;
  struct cri_container *copy;

  if (store->loaded && !with_config && held == NULL)
    return husk_error_kind (err, ENOENT, "container %s: removed", c->id);
  if (write_record (store, c, with_config, err) < 0)
    return -1;
  if (!store->loaded || held == c)
    return 0;
  copy = cri_container_copy (c);
  if (copy->config == NULL && held && held->config)
    copy->config = config_copy (held->config);
  index_put (store, copy);
  return 0;
}

/* A new container's files (CreateContainer's save), written and fsynced
 * but not yet in place: the two fsyncs need no lock. */
struct new_record
{
  char *config_tmp, *record_tmp;
};

static int
prepare_new (struct container_store *store, const struct cri_container *c, struct new_record *rec,
             struct husk_error **err)
{
  cleanup_free char *dir = container_store_dir (store, c->id);
  cleanup_free char *path = xasprintf ("%s/" RECORD_FILE, dir);
  cleanup_free char *config_path = xasprintf ("%s/" CONFIG_FILE, dir);
  size_t size = protobuf_c_message_get_packed_size (&c->config->base);
  cleanup_free uint8_t *buf = xmalloc (size ? size : 1);
  json_t *doc = record_json (c);
  cleanup_free char *text = json_dumps (doc, JSON_COMPACT);

  json_decref (doc);
  protobuf_c_message_pack (&c->config->base, buf);
  if (husk_mkdir_p (dir, 0700, err) < 0
      || husk_write_file_prepare (config_path, buf, size, 0600, &rec->config_tmp, err) < 0
      || husk_write_file_prepare (path, text, strlen (text), 0600, &rec->record_tmp, err) < 0)
    return -1;
  return 0;
}

/* Under RECORDS_LOCK: the files in place, then the index, in the order
 * save_locked keeps (the index follows the disk). */
static int
commit_new_locked (struct container_store *store, const struct cri_container *c, struct new_record *rec,
                   struct husk_error **err)
{
  cleanup_free char *dir = container_store_dir (store, c->id);
  cleanup_free char *path = xasprintf ("%s/" RECORD_FILE, dir);
  cleanup_free char *config_path = xasprintf ("%s/" CONFIG_FILE, dir);

  if (husk_write_file_commit (&rec->config_tmp, config_path, err) < 0
      || husk_write_file_commit (&rec->record_tmp, path, err) < 0)
    return -1;
  /* Reloaded meanwhile: the next load reads it from the disk. */
  if (store->loaded)
    index_put (store, cri_container_copy (c));
  return 0;
}

/* True when C is one the index does not know yet: only its creator can
 * save it, so no other save or a remove can come between the write and
 * the rename. */
static bool
is_new_locked (struct container_store *store, const struct cri_container *c, bool with_config)
{
  return with_config && store->loaded && c->config && index_get (store, c->id) == NULL;
}

int
container_save (struct container_store *store, const struct cri_container *c, bool with_config,
                struct husk_error **err)
{
  struct new_record rec = { NULL, NULL };
  int ret;

  pthread_mutex_lock (&store->records_lock);
  if (!is_new_locked (store, c, with_config))
    {
      ret = save_locked (store, c, with_config, err);
      pthread_mutex_unlock (&store->records_lock);
      return ret;
    }
  pthread_mutex_unlock (&store->records_lock);
  ret = prepare_new (store, c, &rec, err);
  if (ret == 0)
    {
      pthread_mutex_lock (&store->records_lock);
      ret = commit_new_locked (store, c, &rec, err);
      pthread_mutex_unlock (&store->records_lock);
    }
  husk_write_file_discard (&rec.config_tmp);
  husk_write_file_discard (&rec.record_tmp);
  return ret;
}

static char *
member (json_t *doc, const char *key)
{
  json_t *v = json_object_get (doc, key);
  return json_is_string (v) ? xstrdup (json_string_value (v)) : NULL;
}

static int64_t
int_member (json_t *doc, const char *key)
{
  return json_integer_value (json_object_get (doc, key));
}

static enum cri_container_state
state_of (const char *name)
{
  for (size_t i = 0; i < sizeof state_names / sizeof state_names[0]; i++)
    if (name && strcmp (name, state_names[i]) == 0)
      return (enum cri_container_state) i;
  return CRI_CONTAINER_EXITED;
}

static int
load_config (const char *dir, struct cri_container *c, struct husk_error **err)
{
  cleanup_free char *path = xasprintf ("%s/" CONFIG_FILE, dir);
  cleanup_free char *bytes = NULL;
  size_t len = 0;

  if (husk_read_file (path, &bytes, &len, err) < 0)
    return -1;
  c->config = runtime__v1__container_config__unpack (NULL, len, (const uint8_t *) bytes);
  /* Every config CreateContainer saved has its metadata; bytes that
   * happen to unpack without it are not one. */
  if (c->config && (c->config->metadata == NULL || !c->config->metadata->name))
    {
      runtime__v1__container_config__free_unpacked (c->config, NULL);
      c->config = NULL;
    }
  if (c->config == NULL)
    return husk_error_make (err, 0, "%s: not a packed ContainerConfig", path);
  return 0;
}

/* cri.json of ID alone (no config); DIR is its directory. */
static int
read_record_json (const char *dir, const char *id, struct cri_container **out, struct husk_error **err)
{
  cleanup_free char *path = xasprintf ("%s/" RECORD_FILE, dir);
  struct cri_container *c;
  json_error_t jerr;
  json_t *doc = json_load_file (path, 0, &jerr);
  cleanup_free char *state = NULL;

  if (doc == NULL)
    return husk_error_kind (err, ENOENT, "%s: %s", path, jerr.text);
  c = xcalloc (1, sizeof *c);
  c->id = member (doc, "id");
  c->sandbox_id = member (doc, "sandbox_id");
  c->name = member (doc, "name");
  c->attempt = (uint32_t) int_member (doc, "attempt");
  c->image = member (doc, "image");
  c->image_id = member (doc, "image_id");
  c->image_ref = member (doc, "image_ref");
  c->runtime_handler = member (doc, "runtime_handler");
  c->log_path = member (doc, "log_path");
  c->stop_signal = member (doc, "stop_signal");
  c->reason = member (doc, "reason");
  c->message = member (doc, "message");
  state = member (doc, "state");
  c->state = state_of (state);
  c->created_at = int_member (doc, "created_at");
  c->started_at = int_member (doc, "started_at");
  c->finished_at = int_member (doc, "finished_at");
  c->exit_code = (int) int_member (doc, "exit_code");
  c->oom_killed = json_is_true (json_object_get (doc, "oom_killed"));
  c->pid = (pid_t) int_member (doc, "pid");
  c->monitor_pid = (pid_t) int_member (doc, "monitor_pid");
  c->pid_start = (unsigned long long) int_member (doc, "pid_start");
  c->monitor_start = (unsigned long long) int_member (doc, "monitor_start");
  json_decref (doc);
  if (c->id == NULL || c->sandbox_id == NULL || c->name == NULL || strcmp (c->id, id) != 0)
    {
      cri_container_free (c);
      return husk_error_make (err, 0, "%s: not a record of container %s", path, id);
    }
  *out = c;
  return 0;
}

static int
read_record (struct container_store *store, const char *id, struct cri_container **out,
             struct husk_error **err)
{
  cleanup_free char *dir = container_store_dir (store, id);
  struct cri_container *c = NULL;

  if (read_record_json (dir, id, &c, err) < 0)
    return -1;
  if (load_config (dir, c, err) < 0)
    {
      cri_container_free (c);
      return -1;
    }
  *out = c;
  return 0;
}

/* ------------------------------------------------------------------ */
/* rebuilding a record that cannot be read                              */

/* The annotations of the container's bundle, where cri_spec.c wrote its
 * pod, name and image; *MTIME_NS gets when the bundle was written.  A new
 * reference, or NULL. */
static json_t *
bundle_annotations (const char *dir, int64_t *mtime_ns)
{
  cleanup_free char *path = xasprintf ("%s/bundle/config.json", dir);
  json_t *config = json_load_file (path, 0, NULL);
  json_t *annotations = json_incref (json_object_get (config, "annotations"));
  struct stat st;

  json_decref (config);
  if (stat (path, &st) == 0 || stat (dir, &st) == 0)
    *mtime_ns = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  return json_is_object (annotations) ? annotations : (json_decref (annotations), NULL);
}

static char *
annotation (json_t *annotations, const char *key)
{
  return member (annotations, key);
}

/* A ContainerConfig standing in for an unreadable config.pb: C's name and
 * image, and the bundle's annotations but for huskd's own.  Copied, so
 * that it is owned like one read from disk. */
static void
stand_in_config (struct cri_container *c, json_t *annotations)
{
  Runtime__V1__ContainerConfig config = RUNTIME__V1__CONTAINER_CONFIG__INIT;
  Runtime__V1__ContainerMetadata meta = RUNTIME__V1__CONTAINER_METADATA__INIT;
  Runtime__V1__ImageSpec image = RUNTIME__V1__IMAGE_SPEC__INIT;
  size_t n = json_object_size (annotations), i = 0;
  cleanup_free Runtime__V1__ContainerConfig__AnnotationsEntry *entries = xcalloc (n + 1, sizeof *entries);
  cleanup_free Runtime__V1__ContainerConfig__AnnotationsEntry **ptrs = xcalloc (n + 1, sizeof *ptrs);
  const char *key;
  json_t *value;

  meta.name = c->name;
  meta.attempt = c->attempt;
  image.image = c->image;
  config.metadata = &meta;
  config.image = &image;
  json_object_foreach (annotations, key, value)
  {
    if (husk_str_has_prefix (key, ANNOTATION_PREFIX) || !json_is_string (value))
      continue;
    runtime__v1__container_config__annotations_entry__init (&entries[i]);
    entries[i].key = (char *) key;
    entries[i].value = (char *) json_string_value (value);
    ptrs[i] = &entries[i];
    i++;
  }
  config.n_annotations = i;
  config.annotations = ptrs;
  c->config = config_copy (&config);
}

/* What the disk says of container ID besides cri.json: config.pb, the
 * bundle's annotations; state CREATED until the hook says more. */
static struct cri_container *
record_from_disk (const char *dir, const char *id, bool *stand_in)
{
  struct cri_container *c = xcalloc (1, sizeof *c);
  struct husk_error *ignored = NULL;
  json_t *annotations;

  c->id = xstrdup (id);
  annotations = bundle_annotations (dir, &c->created_at);
  *stand_in = load_config (dir, c, &ignored) < 0;
  husk_error_free (&ignored);
  c->sandbox_id = annotation (annotations, ANNOTATION_SANDBOX_ID) ?: xstrdup ("");
  if (!*stand_in && c->config->metadata && c->config->metadata->name && c->config->metadata->name[0])
    {
      c->name = xstrdup (c->config->metadata->name);
      c->attempt = c->config->metadata->attempt;
    }
  else
    c->name = annotation (annotations, ANNOTATION_NAME) ?: xasprintf ("unknown-%.12s", id);
  if (!*stand_in && c->config->image && c->config->image->image && c->config->image->image[0])
    c->image = xstrdup (c->config->image->image);
  else
    c->image = annotation (annotations, ANNOTATION_IMAGE) ?: xstrdup ("");
  c->stop_signal = annotation (annotations, ANNOTATION_STOP_SIGNAL);
  c->image_id = xstrdup ("");
  c->image_ref = xstrdup ("");
  c->runtime_handler = xstrdup ("");
  c->log_path = xstrdup ("");
  c->state = CRI_CONTAINER_CREATED;
  if (*stand_in)
    stand_in_config (c, annotations);
  json_decref (annotations);
  return c;
}

/* The damaged cri.json, kept next to the rebuilt one for whoever looks
 * into what happened. */
static void
keep_damaged (const char *path)
{
  cleanup_free char *bytes = NULL, *kept = xasprintf ("%s" DAMAGED_SUFFIX, path);
  struct husk_error *ignored = NULL;
  size_t len = 0;

  if (husk_read_file (path, &bytes, &len, &ignored) < 0
      || husk_write_file_replace (kept, bytes, len, 0600, &ignored) < 0)
    husk_error_free (&ignored);
}

/* Under RECORDS_LOCK: whether a rebuild of ID that could not be saved
 * (and is done again on each read) is to be warned about: the first time. */
static bool
first_unsaved (struct container_store *store, const char *id)
{
  for (size_t i = 0; store->rebuild_warned[i]; i++)
    if (strcmp (store->rebuild_warned[i], id) == 0)
      return false;
  store->rebuild_warned = husk_strv_append (store->rebuild_warned, id);
  return true;
}

/* Under RECORDS_LOCK, while loading: cri.json of ID could not be read (WHY).  The record
 * comes from cri.json itself when only config.pb was bad, else from the
 * disk and the hook; it is saved in place of the damaged one, so that
 * each damage is warned about once. */
static struct cri_container *
rebuild_locked (struct container_store *store, const char *id, const char *why)
{
  cleanup_free char *dir = container_store_dir (store, id);
  cleanup_free char *path = xasprintf ("%s/" RECORD_FILE, dir);
  cleanup_free char *what = NULL;
  struct husk_error *ignored = NULL;
  struct cri_container *c = NULL;
  bool stand_in = true, from_disk = read_record_json (dir, id, &c, &ignored) < 0;

  husk_error_free (&ignored);
  if (from_disk)
    {
      c = record_from_disk (dir, id, &stand_in);
      c->message = xasprintf (
          "record cri.json could not be read (%s): rebuilt from the bundle and the runtime", why);
      if (store->rebuild)
        store->rebuild (store, c, store->rebuild_user);
      keep_damaged (path);
    }
  else
    {
      int64_t unused = 0;
      json_t *annotations = bundle_annotations (dir, &unused);

      stand_in_config (c, annotations);
      json_decref (annotations);
    }
  what = xasprintf (
      "container %s: %s: rebuilt from %s%s", id, why,
      from_disk
          ? "its bundle and the runtime's state (the damaged file is kept as " RECORD_FILE DAMAGED_SUFFIX ")"
          : "the bundle's annotations",
      stand_in ? ", with a stand-in ContainerConfig" : "");
  if (save_locked (store, c, stand_in, &ignored) == 0)
    husk_warn ("%s", what);
  else if (first_unsaved (store, id))
    husk_warn ("%s, but not saved: %s", what, ignored->msg);
  husk_error_free (&ignored);
  return c;
}

void
container_store_set_rebuild (struct container_store *store, container_rebuild_fn fn, void *user)
{
  store->rebuild = fn;
  store->rebuild_user = user;
}

/* Under RECORDS_LOCK, while loading: the record of ID, rebuilt when it
 * cannot be read. */
static struct cri_container *
read_or_rebuild (struct container_store *store, const char *id)
{
  struct cri_container *c = NULL;
  struct husk_error *why = NULL;

  if (read_record (store, id, &c, &why) < 0)
    c = rebuild_locked (store, id, why->msg);
  husk_error_free (&why);
  return c;
}

/* The monitor's "2016-10-06T00:17:09.669794202Z" (always 9 digits) in unix
 * nanoseconds; 0 when it is not that. */
static int64_t
parse_finished_at (const char *text)
{
  struct tm tm = { 0 };
  const char *rest = text ? strptime (text, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
  long nanos = 0;

  if (rest == NULL || rest[0] != '.' || strspn (rest + 1, "0123456789") != 9 || strcmp (rest + 10, "Z") != 0)
    return 0;
  nanos = strtol (rest + 1, NULL, 10);
  return (int64_t) timegm (&tm) * 1000000000 + nanos;
}

/* Under RECORDS_LOCK, C held by the index: the monitor wrote how the
 * container ended: record it.  Its own clock reading, not the file's
 * mtime: file times are coarse and may come before the started_at huskd
 * read just before `start`. */
static void
fold_exit_file (struct container_store *store, struct cri_container *c)
{
  cleanup_free char *path = container_store_exit_path (store, c->id);
  struct husk_error *ignored = NULL;
  json_t *doc;
  struct stat st;

  if (c->state == CRI_CONTAINER_EXITED || stat (path, &st) < 0
      || (doc = json_load_file (path, 0, NULL)) == NULL)
    return;
  c->state = CRI_CONTAINER_EXITED;
  c->exit_code = (int) int_member (doc, "exit_code");
  c->oom_killed = json_is_true (json_object_get (doc, "oom_killed"));
  c->finished_at = parse_finished_at (json_string_value (json_object_get (doc, "finished_at")));
  if (c->finished_at == 0)
    c->finished_at = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  free (c->reason);
  /* huskd's own exit file for a container whose monitor was lost says why. */
  c->reason = member (doc, "reason");
  if (c->reason == NULL)
    c->reason = xstrdup (c->oom_killed ? "OOMKilled" : c->exit_code == 0 ? "Completed" : "Error");
  if (json_is_string (json_object_get (doc, "message")))
    {
      free (c->message);
      c->message = member (doc, "message");
    }
  json_decref (doc);
  if (save_locked (store, c, false, &ignored) < 0 && ignored->errnum != ENOENT)
    husk_warn ("container %s: %s", c->id, ignored->msg);
  husk_error_free (&ignored);
}

static bool
is_id_like (const char *name)
{
  return name[0] != '.' && strspn (name, "0123456789abcdef") == strlen (name);
}

static int
compare_records (const void *a, const void *b)
{
  return strcmp ((*(struct cri_container *const *) a)->id, (*(struct cri_container *const *) b)->id);
}

/* Under RECORDS_LOCK: every record read into the index, once. */
static int
load_locked (struct container_store *store, struct husk_error **err)
{
  cleanup_dir DIR *dir = NULL;
  struct dirent *de;

  if (store->loaded)
    return 0;
  if ((dir = opendir (store->containers_dir)) == NULL)
    return husk_error_make (err, errno, "list `%s`", store->containers_dir);
  while ((de = readdir (dir)) != NULL)
    {
      cleanup_free char *record = xasprintf ("%s/%s/" RECORD_FILE, store->containers_dir, de->d_name);
      struct cri_container *c;

      /* The debug CLI's containers live here too, without cri.json. */
      if (!is_id_like (de->d_name) || access (record, F_OK) < 0)
        continue;
      if ((c = read_or_rebuild (store, de->d_name)) == NULL)
        continue;
      store->records = xrealloc (store->records, (store->n_records + 1) * sizeof *store->records);
      store->records[store->n_records++] = c;
    }
  if (store->n_records)
    qsort (store->records, store->n_records, sizeof *store->records, compare_records);
  store->loaded = true;
  return 0;
}

/* Under RECORDS_LOCK: the exit files that appeared for containers the
 * index does not know to have exited, folded in; one read of the
 * directory, not one look per container. */
static void
fold_exit_files (struct container_store *store)
{
  cleanup_dir DIR *dir = opendir (store->exit_dir);
  struct dirent *de;

  while (dir && (de = readdir (dir)) != NULL)
    {
      struct cri_container *c = is_id_like (de->d_name) ? index_get (store, de->d_name) : NULL;
      if (c && c->state != CRI_CONTAINER_EXITED)
        fold_exit_file (store, c);
    }
}

static int
list_containers (struct container_store *store, bool full_config, struct cri_container ***out, size_t *n,
                 struct husk_error **err)
{
  struct cri_container **list;
  size_t count;

  pthread_mutex_lock (&store->records_lock);
  if (load_locked (store, err) < 0)
    {
      pthread_mutex_unlock (&store->records_lock);
      return -1;
    }
  fold_exit_files (store);
  count = store->n_records;
  list = xcalloc (count + 1, sizeof *list);
  for (size_t i = 0; i < count; i++)
    list[i] = copy_container (store->records[i], full_config);
  pthread_mutex_unlock (&store->records_lock);
  *out = list;
  *n = count;
  return 0;
}

int
container_list (struct container_store *store, struct cri_container ***out, size_t *n,
                struct husk_error **err)
{
  return list_containers (store, true, out, n, err);
}

int
container_list_attributes (struct container_store *store, struct cri_container ***out, size_t *n,
                           struct husk_error **err)
{
  return list_containers (store, false, out, n, err);
}

int
container_store_read (struct container_store *store, container_read_fn fn, void *arg, struct husk_error **err)
{
  pthread_mutex_lock (&store->records_lock);
  if (load_locked (store, err) < 0)
    {
      pthread_mutex_unlock (&store->records_lock);
      return -1;
    }
  fold_exit_files (store);
  fn ((const struct cri_container *const *) store->records, store->n_records, arg);
  pthread_mutex_unlock (&store->records_lock);
  return 0;
}

/* Under RECORDS_LOCK, loaded: the record ID names (the id or a unique
 * prefix of it). */
static int
find_locked (struct container_store *store, const char *id, struct cri_container **found,
             struct husk_error **err)
{
  size_t i = index_lower_bound (store, id);
  struct cri_container *first = i < store->n_records ? store->records[i] : NULL;

  /* Sorted: an exact match is the first with the prefix, and a second
   * with it comes right after. */
  if (first == NULL || !husk_str_has_prefix (first->id, id))
    return husk_error_kind (err, ENOENT, "container `%s` not found", id);
  if (strcmp (first->id, id) != 0 && i + 1 < store->n_records
      && husk_str_has_prefix (store->records[i + 1]->id, id))
    return husk_error_kind (err, EINVAL, "container id prefix `%s` is ambiguous", id);
  *found = first;
  return 0;
}

int
container_lookup (struct container_store *store, const char *id, struct cri_container **out,
                  struct husk_error **err)
{
  struct cri_container *found = NULL;
  int ret;

  if (id == NULL || id[0] == '\0')
    return husk_error_kind (err, EINVAL, "container_id: required");
  pthread_mutex_lock (&store->records_lock);
  ret = load_locked (store, err);
  if (ret == 0)
    ret = find_locked (store, id, &found, err);
  if (ret == 0)
    {
      fold_exit_file (store, found);
      *out = cri_container_copy (found);
    }
  pthread_mutex_unlock (&store->records_lock);
  return ret;
}

char *
container_store_find_name (struct container_store *store, const char *sandbox_id, const char *name,
                           uint32_t attempt)
{
  struct husk_error *ignored = NULL;
  char *id = NULL;

  pthread_mutex_lock (&store->records_lock);
  if (load_locked (store, &ignored) < 0)
    husk_error_free (&ignored);
  for (size_t i = 0; i < store->n_records && id == NULL; i++)
    {
      const struct cri_container *c = store->records[i];
      if (c->attempt == attempt && strcmp (c->name, name) == 0 && strcmp (c->sandbox_id, sandbox_id) == 0)
        id = xstrdup (c->id);
    }
  pthread_mutex_unlock (&store->records_lock);
  return id;
}

void
container_store_reload (struct container_store *store)
{
  pthread_mutex_lock (&store->records_lock);
  cri_containers_free (store->records, store->n_records);
  store->records = NULL;
  store->n_records = 0;
  store->loaded = false;
  pthread_mutex_unlock (&store->records_lock);
}

static int forget_locked (struct container_store *store, const char *id, struct husk_error **err);

int
container_forget (struct container_store *store, const char *id, struct husk_error **err)
{
  int ret;

  pthread_mutex_lock (&store->records_lock);
  ret = forget_locked (store, id, err);
  pthread_mutex_unlock (&store->records_lock);
  return ret;
}

/* Under RECORDS_LOCK: the index drops the record as soon as cri.json is
 * gone, as a lookup on disk would stop finding it then. */
static int
forget_locked (struct container_store *store, const char *id, struct husk_error **err)
{
  cleanup_free char *dir = container_store_dir (store, id);
  const char *files[] = { RECORD_FILE, CONFIG_FILE };
  cleanup_free char *exit_path = container_store_exit_path (store, id);
  cleanup_free char *reopen_path = xasprintf ("%s.reopen", exit_path);
  cleanup_free char *attach_path = xasprintf ("%s.attach", exit_path);

  /* The exit file first: while the record is there a retry finds the
   * container.  Then cri.json before config.pb: a lookup meanwhile must
   * not find a record without its config and take it for a damaged one.
   * The monitor's ReopenContainerLog answer and attach socket go too: a
   * killed monitor leaves them. */
  if (unlink (exit_path) < 0 && errno != ENOENT)
    return husk_error_make (err, errno, "remove `%s`", exit_path);
  if (unlink (reopen_path) < 0 && errno != ENOENT)
    return husk_error_make (err, errno, "remove `%s`", reopen_path);
  if (unlink (attach_path) < 0 && errno != ENOENT)
    return husk_error_make (err, errno, "remove `%s`", attach_path);
  for (size_t i = 0; i < 2; i++)
    {
      cleanup_free char *path = xasprintf ("%s/%s", dir, files[i]);
      if (unlink (path) < 0 && errno != ENOENT)
        return husk_error_make (err, errno, "remove `%s`", path);
      if (i == 0)
        index_drop (store, id);
    }
  if (rmdir (dir) < 0 && errno != ENOENT && errno != ENOTEMPTY)
    return husk_error_make (err, errno, "remove `%s`", dir);
  return 0;
}
