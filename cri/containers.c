/* Containers made from images (see containers.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cri/cdi/cdi.h"
#include "cri/containers.h"
#include "cri/seccomp_default.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/images.h"
#include "image/snapshot.h"
#include "runtime/container.h"
#include "runtime/spec.h"
#include "runtime/state.h"

#define RECORD_FILE "husk-container.json"

char *
containers_bundle_dir (const char *image_root, const char *id)
{
  return xasprintf ("%s/containers/%s/bundle", image_root, id);
}

static char *
bundle_dir (const struct containers_ctx *ctx, const char *id)
{
  return containers_bundle_dir (ctx->image_root, id);
}

char *
containers_log_path (const struct containers_ctx *ctx, const char *id)
{
  return xasprintf ("%s/containers/%s/bundle/container.log", ctx->image_root, id);
}

void
container_record_free (struct container_record *rec)
{
  if (rec == NULL)
    return;
  free (rec->id);
  free (rec->name);
  free (rec->image);
  free (rec->image_id);
  free (rec->created);
  free (rec->command);
  free (rec->stop_signal);
  free (rec);
}

void
container_records_free (struct container_record **recs, size_t n)
{
  for (size_t i = 0; i < n; i++)
    container_record_free (recs[i]);
  free (recs);
}

char *
containers_new_id (void)
{
  unsigned char bytes[32];
  char *hex = xmalloc (65);

  if (getrandom (bytes, sizeof bytes, 0) != sizeof bytes)
    abort ();
  for (size_t i = 0; i < sizeof bytes; i++)
    sprintf (hex + 2 * i, "%02x", bytes[i]);
  return hex;
}

static int
write_record (const struct containers_ctx *ctx, const struct container_record *rec, struct husk_error **err)
{
  cleanup_free char *dir = bundle_dir (ctx, rec->id);
  cleanup_free char *path = xasprintf ("%s/%s", dir, RECORD_FILE);
  cleanup_free char *text = NULL;
  json_t *doc
      = json_pack ("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", rec->id, "name", rec->name, "image", rec->image,
                   "image_id", rec->image_id, "created", rec->created, "command", rec->command);

  if (rec->has_exit_code)
    json_object_set_new (doc, "exit_code", json_integer (rec->exit_code));
  if (rec->stop_signal)
    json_object_set_new (doc, "stop_signal", json_string (rec->stop_signal));
  text = json_dumps (doc, JSON_COMPACT);
  json_decref (doc);
  return husk_write_file_atomic (path, text, strlen (text), 0600, err);
}

static char *
member (json_t *doc, const char *key)
{
  json_t *v = json_object_get (doc, key);
  return json_is_string (v) ? xstrdup (json_string_value (v)) : NULL;
}

static int
read_record (const struct containers_ctx *ctx, const char *id, struct container_record **out,
             struct husk_error **err)
{
  cleanup_free char *dir = bundle_dir (ctx, id);
  cleanup_free char *path = xasprintf ("%s/%s", dir, RECORD_FILE);
  struct container_record *rec;
  json_error_t jerr;
  json_t *doc = json_load_file (path, 0, &jerr);

  if (doc == NULL)
    return husk_error_kind (err, ENOENT, "container `%s`: no record (%s)", id, jerr.text);
  rec = xcalloc (1, sizeof *rec);
  rec->id = member (doc, "id");
  rec->name = member (doc, "name");
  rec->image = member (doc, "image");
  rec->image_id = member (doc, "image_id");
  rec->created = member (doc, "created");
  rec->command = member (doc, "command");
  rec->stop_signal = member (doc, "stop_signal");
  rec->has_exit_code = json_is_integer (json_object_get (doc, "exit_code"));
  rec->exit_code = (int) json_integer_value (json_object_get (doc, "exit_code"));
  json_decref (doc);
  if (rec->id == NULL || rec->name == NULL)
    {
      container_record_free (rec);
      return husk_error_make (err, 0, "%s: incomplete record", path);
    }
  *out = rec;
  return 0;
}

int
containers_list (const struct containers_ctx *ctx, struct container_record ***out, size_t *n,
                 struct husk_error **err)
{
  cleanup_free char *dir_path = xasprintf ("%s/containers", ctx->image_root);
  cleanup_dir DIR *dir = opendir (dir_path);
  struct container_record **recs = NULL;
  struct dirent *de;
  size_t count = 0;

  if (dir == NULL && errno != ENOENT)
    return husk_error_make (err, errno, "list `%s`", dir_path);
  while (dir && (de = readdir (dir)) != NULL)
    {
      struct container_record *rec = NULL;
      struct husk_error *ignored = NULL;

      if (de->d_name[0] == '.' || read_record (ctx, de->d_name, &rec, &ignored) < 0)
        {
          husk_error_free (&ignored);
          continue;
        }
      recs = xrealloc (recs, (count + 1) * sizeof *recs);
      recs[count++] = rec;
    }
  *out = recs;
  *n = count;
  return 0;
}

int
containers_lookup (const struct containers_ctx *ctx, const char *name_or_id, struct container_record **out,
                   struct husk_error **err)
{
  struct container_record **recs = NULL, *found = NULL;
  size_t n = 0, matches = 0;

  if (containers_list (ctx, &recs, &n, err) < 0)
    return -1;
  for (size_t i = 0; i < n; i++)
    if (strcmp (recs[i]->name, name_or_id) == 0 || strcmp (recs[i]->id, name_or_id) == 0)
      {
        found = recs[i];
        matches = 1;
        break;
      }
    else if (husk_str_has_prefix (recs[i]->id, name_or_id))
      {
        found = recs[i];
        matches++;
      }
  if (matches == 1)
    {
      for (size_t i = 0; i < n; i++)
        if (recs[i] == found)
          recs[i] = NULL;
    }
  container_records_free (recs, n);
  if (matches == 0)
    return husk_error_kind (err, ENOENT, "no such container: %s", name_or_id);
  if (matches > 1)
    return husk_error_make (err, 0, "container name or id prefix `%s` is ambiguous", name_or_id);
  *out = found;
  return 0;
}

static char *
join_args (json_t *config)
{
  json_t *args = json_object_get (json_object_get (config, "process"), "args");
  char *out = xstrdup ("");
  size_t i;
  json_t *a;

  json_array_foreach (args, i, a)
  {
    char *next = xasprintf ("%s%s%s", out, i ? " " : "", json_string_value (a));
    free (out);
    out = next;
  }
  return out;
}

int
containers_write_config (const char *bundle, json_t *config, struct husk_error **err)
{
  cleanup_free char *path = xasprintf ("%s/config.json", bundle);
  cleanup_free char *text = json_dumps (config, JSON_INDENT (2));

  if (husk_mkdir_p (bundle, 0700, err) < 0)
    return -1;
  return husk_write_file_atomic (path, text, strlen (text), 0600, err);
}

static int
write_bundle (const struct containers_ctx *ctx, struct container_record *rec, json_t *config,
              struct husk_error **err)
{
  cleanup_free char *dir = bundle_dir (ctx, rec->id);

  if (containers_write_config (dir, config, err) < 0)
    return -1;
  return write_record (ctx, rec, err);
}

static int
check_name_free (const struct containers_ctx *ctx, const char *name, struct husk_error **err)
{
  struct container_record *existing = NULL;
  struct husk_error *ignored = NULL;

  if (containers_lookup (ctx, name, &existing, &ignored) == 0 && strcmp (existing->name, name) == 0)
    {
      container_record_free (existing);
      return husk_error_make (err, 0, "--name %s: a container with that name exists already", name);
    }
  container_record_free (existing);
  husk_error_free (&ignored);
  return 0;
}

int
containers_prepare_rootfs (const char *image_root, const char *id, const struct image *image, bool readonly,
                           char **rootfs, struct husk_error **err)
{
  cleanup_free char **chain_ids = xcalloc (image->n_layers + 1, sizeof (char *));
  struct store *store = NULL;
  int ret;

  for (size_t i = 0; i < image->n_layers; i++)
    chain_ids[i] = image->layers[i].chain_id;
  /* Snapshots may have been collected or never made (an import that failed
   * half way): unpack what is missing. */
  if (store_open (image_root, &store, err) < 0)
    return -1;
  ret = images_prepare_snapshots (store, image, err);
  store_free (store);
  if (ret < 0)
    return -1;
  return snapshot_create_container (image_root, id, chain_ids, image->n_layers, readonly, rootfs, err);
}

/* The RuntimeDefault seccomp profile, as CRI gives it, for the capability
 * set the config ended up with. */
static void
add_default_seccomp (json_t *config)
{
  json_t *bounding
      = json_object_get (json_object_get (json_object_get (config, "process"), "capabilities"), "bounding");
  uint64_t caps = 0;
  size_t i;
  json_t *name;

  json_array_foreach (bounding, i, name)
  {
    int cap = spec_capability_from_name (json_string_value (name) ?: "");
    if (cap >= 0 && cap < 64)
      caps |= UINT64_C (1) << cap;
  }
  json_object_set_new (json_object_get (config, "linux"), "seccomp", seccomp_default_profile (caps));
}

/* The CDI devices REQ names plus those of NVIDIA_VISIBLE_DEVICES (-e, or
 * with image-too the image's), each once, applied to CONFIG. */
static int
apply_cdi (const struct container_create_request *req, const struct image *image, json_t *config,
           struct husk_error **err)
{
  cleanup_strv char **names = xcalloc (1, sizeof (char *));
  const char *nvidia = cdi_nvidia_env_value (
      req->nvidia_env, cdi_env_lookup (req->spec.env, "NVIDIA_VISIBLE_DEVICES"), image->config.env);

  if (req->cdi == NULL)
    return 0;
  for (char **n = req->cdi_names; n && *n; n++)
    cdi_names_add (&names, *n);
  if (cdi_nvidia_visible_devices (req->cdi, nvidia, &names, err) < 0)
    return -1;
  if (names[0] == NULL)
    return 0;
  return cdi_apply (req->cdi, config, (const char *const *) names, err);
}

static int
build_container (const struct containers_ctx *ctx, const struct container_create_request *req,
                 struct container_record *rec, const struct image *image, struct husk_error **err)
{
  cleanup_free char *rootfs = NULL;
  char hostname[13];
  struct ocispec_request spec = req->spec;
  json_t *config = NULL;
  int ret;

  if (containers_prepare_rootfs (ctx->image_root, rec->id, image, spec.readonly_rootfs, &rootfs, err) < 0)
    return -1;
  snprintf (hostname, sizeof hostname, "%.12s", rec->id);
  if (spec.hostname == NULL)
    spec.hostname = hostname;
  if (ocispec_build (&image->config, &spec, rootfs, &config, err) < 0)
    return -1;
  if (apply_cdi (req, image, config, err) < 0)
    {
      json_decref (config);
      return -1;
    }
  if (!req->seccomp_unconfined)
    add_default_seccomp (config);
  rec->command = join_args (config);
  ret = write_bundle (ctx, rec, config, err);
  json_decref (config);
  return ret;
}

int
containers_create (const struct containers_ctx *ctx, const struct container_create_request *req, char **id,
                   struct husk_error **err)
{
  struct container_record rec = { 0 };
  struct image *image = NULL;
  struct husk_error *ignored = NULL;
  int ret = -1;

  if (req->name && check_name_free (ctx, req->name, err) < 0)
    return -1;
  if (images_lookup (ctx->image_root, req->image, &image, err) < 0)
    return -1;
  rec.id = containers_new_id ();
  rec.name = req->name ? xstrdup (req->name) : xasprintf ("husk-%.12s", rec.id);
  rec.image = xstrdup (req->image);
  rec.image_id = xstrdup (image->id);
  rec.created = state_now_rfc3339 ();
  rec.stop_signal = xstrdup (image->config.stop_signal);
  ret = build_container (ctx, req, &rec, image, err);
  if (ret < 0)
    {
      cleanup_free char *bundle = bundle_dir (ctx, rec.id);
      husk_rm_rf (bundle, &ignored);
      husk_error_free (&ignored);
      snapshot_remove_container (ctx->image_root, rec.id, &ignored);
      husk_error_free (&ignored);
    }
  else
    *id = xstrdup (rec.id);
  image_free (image);
  free (rec.id);
  free (rec.name);
  free (rec.image);
  free (rec.image_id);
  free (rec.created);
  free (rec.command);
  free (rec.stop_signal);
  return ret;
}

/* With DETACH the container's stdio goes to its log file: there is no
 * monitor yet to hold it (that comes with huskd). */
static int
redirect_stdio (const struct containers_ctx *ctx, const char *id, int saved[3], struct husk_error **err)
{
  cleanup_free char *log = containers_log_path (ctx, id);
  cleanup_close int log_fd = open (log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  cleanup_close int null_fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);

  if (log_fd < 0 || null_fd < 0)
    return husk_error_make (err, errno, "open `%s`", log);
  fflush (NULL);
  for (int fd = 0; fd < 3; fd++)
    saved[fd] = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  dup2 (null_fd, 0);
  dup2 (log_fd, 1);
  dup2 (log_fd, 2);
  return 0;
}

static void
restore_stdio (int saved[3])
{
  for (int fd = 0; fd < 3; fd++)
    if (saved[fd] >= 0)
      {
        dup2 (saved[fd], fd);
        close (saved[fd]);
      }
}

int
containers_start (const struct containers_ctx *ctx, const char *id, bool detach, int *exit_code,
                  struct husk_error **err)
{
  struct runtime_ctx rt = { .root = ctx->runtime_root };
  cleanup_free char *bundle = bundle_dir (ctx, id);
  struct create_options opts = { .bundle = bundle };
  struct container_record *rec = NULL;
  int saved[3] = { -1, -1, -1 };
  int ret;

  if (read_record (ctx, id, &rec, err) < 0)
    return -1;
  if (detach && redirect_stdio (ctx, id, saved, err) < 0)
    {
      container_record_free (rec);
      return -1;
    }
  ret = container_run (&rt, id, &opts, detach, exit_code, err);
  if (detach)
    restore_stdio (saved);
  if (ret == 0 && !detach)
    {
      rec->has_exit_code = true;
      rec->exit_code = *exit_code;
      ret = write_record (ctx, rec, err);
    }
  container_record_free (rec);
  return ret;
}

char *
containers_status (const struct containers_ctx *ctx, const struct container_record *rec)
{
  struct container_state *state = NULL;
  struct husk_error *ignored = NULL;
  char *status;

  if (state_load (ctx->runtime_root, rec->id, &state, &ignored) < 0)
    {
      husk_error_free (&ignored);
      if (rec->has_exit_code)
        return xasprintf ("exited (%d)", rec->exit_code);
      return xstrdup ("created");
    }
  status = xstrdup (container_status_name (state_status (state)));
  state_free (state);
  return status;
}

static bool
runtime_running (const struct containers_ctx *ctx, const char *id)
{
  struct container_state *state = NULL;
  struct husk_error *ignored = NULL;
  bool running = false;

  if (state_load (ctx->runtime_root, id, &state, &ignored) == 0)
    {
      enum container_status status = state_status (state);
      running = status == STATUS_RUNNING || status == STATUS_PAUSED || status == STATUS_CREATED;
    }
  husk_error_free (&ignored);
  state_free (state);
  return running;
}

int
containers_stop (const struct containers_ctx *ctx, const char *id, int timeout, struct husk_error **err)
{
  struct runtime_ctx rt = { .root = ctx->runtime_root };
  struct container_record *rec = NULL;
  int sig = SIGTERM;

  if (read_record (ctx, id, &rec, err) < 0)
    return -1;
  if (rec->stop_signal && container_parse_signal (rec->stop_signal, &sig, err) < 0)
    sig = SIGTERM;
  husk_error_free (err);
  container_record_free (rec);
  if (!runtime_running (ctx, id))
    return 0;
  if (container_kill (&rt, id, sig, false, err) < 0)
    return -1;
  for (int waited = 0; waited < timeout * 10 && runtime_running (ctx, id); waited++)
    poll (NULL, 0, 100);
  if (runtime_running (ctx, id))
    return container_kill (&rt, id, SIGKILL, true, err);
  return 0;
}

int
containers_remove (const struct containers_ctx *ctx, const char *id, bool force, struct husk_error **err)
{
  struct runtime_ctx rt = { .root = ctx->runtime_root };
  cleanup_free char *bundle = bundle_dir (ctx, id);
  cleanup_free char *runtime_dir = state_dir_path (ctx->runtime_root, id);

  if (runtime_running (ctx, id) && !force)
    return husk_error_make (err, 0, "container `%s` is running: stop it first or use --force", id);
  if (access (runtime_dir, F_OK) == 0 && container_delete (&rt, id, true, err) < 0)
    return -1;
  if (husk_rm_rf (bundle, err) < 0)
    return -1;
  return snapshot_remove_container (ctx->image_root, id, err);
}
