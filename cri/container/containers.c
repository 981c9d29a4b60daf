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
#include <sys/file.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cri/cdi/cdi.h"
#include "cri/container/containers.h"
#include "cri/config/runtime_exec.h"
#include "cri/spec/seccomp_default.h"
#include "husk/cleanup.h"
#include "husk/plugin.h"
#include "husk/util.h"
#include "image/images.h"
#include "image/snapshot.h"
#include "runtime/container.h"
#include "runtime/spec/spec.h"
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

char *
containers_attach_path (const struct containers_ctx *ctx, const char *id)
{
  return xasprintf ("%s/containers/%s/bundle/attach.sock", ctx->image_root, id);
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
  free (rec->network);
  free (rec->netns);
  free (rec->ip);
  for (size_t i = 0; i < rec->n_ports; i++)
    {
      free ((char *) rec->ports[i].host_ip);
      free ((char *) rec->ports[i].protocol);
    }
  free (rec->ports);
  free (rec->started);
  free (rec->finished);
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

static void
set_optional (json_t *doc, const char *key, const char *value)
{
  if (value)
    json_object_set_new (doc, key, json_string (value));
}

static json_t *
ports_json (const struct container_record *rec)
{
  json_t *ports = json_array ();

  for (size_t i = 0; i < rec->n_ports; i++)
    json_array_append_new (ports, json_pack ("{s:s, s:i, s:i, s:s}", "host_ip", rec->ports[i].host_ip ?: "",
                                             "host_port", rec->ports[i].host_port, "container_port",
                                             rec->ports[i].container_port, "protocol",
                                             rec->ports[i].protocol ?: "tcp"));
  return ports;
}

static void
ports_from_json (struct container_record *rec, json_t *ports)
{
  size_t i;
  json_t *p;

  rec->ports = xcalloc (json_array_size (ports) + 1, sizeof *rec->ports);
  json_array_foreach (ports, i, p)
  {
    rec->ports[i] = (struct cni_port_mapping){
      .host_ip = xstrdup (json_string_value (json_object_get (p, "host_ip")) ?: ""),
      .host_port = (int) json_integer_value (json_object_get (p, "host_port")),
      .container_port = (int) json_integer_value (json_object_get (p, "container_port")),
      .protocol = xstrdup (json_string_value (json_object_get (p, "protocol")) ?: "tcp"),
    };
  }
  rec->n_ports = json_array_size (ports);
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
  set_optional (doc, "network", rec->network);
  set_optional (doc, "netns", rec->netns);
  set_optional (doc, "ip", rec->ip);
  set_optional (doc, "started", rec->started);
  set_optional (doc, "finished", rec->finished);
  json_object_set_new (doc, "detached", json_boolean (rec->detached));
  json_object_set_new (doc, "auto_remove", json_boolean (rec->auto_remove));
  json_object_set_new (doc, "tty", json_boolean (rec->tty));
  json_object_set_new (doc, "ports", ports_json (rec));
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
  rec->network = member (doc, "network");
  rec->netns = member (doc, "netns");
  rec->ip = member (doc, "ip");
  rec->started = member (doc, "started");
  rec->finished = member (doc, "finished");
  rec->detached = json_is_true (json_object_get (doc, "detached"));
  rec->auto_remove = json_is_true (json_object_get (doc, "auto_remove"));
  rec->tty = json_is_true (json_object_get (doc, "tty"));
  ports_from_json (rec, json_object_get (doc, "ports"));
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
                           const struct snapshot_idmap *idmap, char **rootfs, struct husk_error **err)
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
  return snapshot_create_container_idmapped (image_root, id, chain_ids, image->n_layers, readonly, idmap,
                                             rootfs, err);
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
  cleanup_free char *bundle = NULL;
  char hostname[13];
  struct ocispec_request spec = req->spec;
  json_t *config = NULL;
  int ret;

  if (containers_prepare_rootfs (ctx->image_root, rec->id, image, spec.readonly_rootfs, NULL, &rootfs, err)
      < 0)
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
  bundle = bundle_dir (ctx, rec->id);
  if (containers_network_setup (ctx, rec, bundle, req, config, err) < 0)
    {
      json_decref (config);
      return -1;
    }
  ret = write_bundle (ctx, rec, config, err);
  json_decref (config);
  return ret;
}

static void
copy_ports (struct container_record *rec, const struct container_create_request *req)
{
  rec->ports = xcalloc (req->n_ports + 1, sizeof *rec->ports);
  for (size_t i = 0; i < req->n_ports; i++)
    {
      rec->ports[i] = req->ports[i];
      rec->ports[i].host_ip = xstrdup (req->ports[i].host_ip ?: "");
      rec->ports[i].protocol = xstrdup (req->ports[i].protocol ?: "tcp");
    }
  rec->n_ports = req->n_ports;
}

/* Frees what REC holds, not REC. */
static void
record_clear (struct container_record *rec)
{
  struct container_record *copy = xmalloc (sizeof *copy);

  *copy = *rec;
  container_record_free (copy);
  memset (rec, 0, sizeof *rec);
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
  rec.network = xstrdup (req->spec.network == OCISPEC_NETWORK_HOST ? "host"
                         : req->bridge                             ? "bridge"
                                                                   : "none");
  rec.detached = req->detached;
  rec.auto_remove = req->auto_remove;
  rec.tty = req->spec.terminal;
  copy_ports (&rec, req);
  ret = build_container (ctx, req, &rec, image, err);
  if (ret < 0)
    {
      cleanup_free char *bundle = bundle_dir (ctx, rec.id);
      containers_network_release (ctx, &rec);
      husk_rm_rf (bundle, &ignored);
      husk_error_free (&ignored);
      snapshot_remove_container (ctx->image_root, rec.id, &ignored);
      husk_error_free (&ignored);
    }
  else
    *id = xstrdup (rec.id);
  image_free (image);
  record_clear (&rec);
  return ret;
}

/* Serialises finish and remove (the waiter and a `rm -f` may race). */
static int
lock_containers (const struct containers_ctx *ctx)
{
  cleanup_free char *path = xasprintf ("%s/containers.lock", ctx->image_root);
  int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

  if (fd >= 0)
    while (flock (fd, LOCK_EX) < 0 && errno == EINTR)
      ;
  return fd;
}

/* The monitor's report line: {"pid", "monitor_pid"} or {"error"}. */
static int
parse_monitor_report (const char *id, const char *line, pid_t *monitor_pid, struct husk_error **err)
{
  json_t *doc = line ? json_loads (line, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
  const char *error = json_string_value (json_object_get (doc, "error"));
  int ret = 0;

  if (doc == NULL)
    ret = husk_error_make (err, 0, "husk-monitor for %.12s: no report", id);
  else if (error)
    ret = husk_error_make (err, 0, "create container %.12s: %s", id, error);
  else
    *monitor_pid = (pid_t) json_integer_value (json_object_get (doc, "monitor_pid"));
  json_decref (doc);
  return ret;
}

/* husk: the one that executed husk-image (HUSK_BINARY).  husk-monitor
 * (and husk without HUSK_BINARY): next to the plugin (the build tree), in
 * PREFIX/bin for the plugin's PREFIX/lib/husk, next to this process, or
 * on PATH.  `husk container` runs from a sealed copy of husk-image (a
 * memfd, or the file at the root of a private overlay), so /proc/self/exe
 * does not say where it is installed; husk passes the plugin's dir in
 * HUSK_PLUGIN_DIR (husk/plugin.h). */
static char *
find_helper (const char *name)
{
  const char *plugin_dir = getenv ("HUSK_PLUGIN_DIR");
  const char *husk = getenv (HUSK_BINARY_ENV);
  char *candidates[4] = { NULL, NULL, NULL, cri_helper_path (name) };
  char *found = NULL;

  if (strcmp (name, "husk") == 0 && husk && husk[0])
    candidates[0] = xstrdup (husk);
  if (plugin_dir && plugin_dir[0])
    {
      candidates[1] = xasprintf ("%s/%s", plugin_dir, name);
      candidates[2] = xasprintf ("%s/../../bin/%s", plugin_dir, name);
    }
  for (size_t i = 0; i < 4 && found == NULL; i++)
    if (candidates[i] && access (candidates[i], X_OK) == 0)
      found = realpath (candidates[i], NULL);
  for (size_t i = 0; i < 4; i++)
    free (candidates[i]);
  return found ? found : xstrdup (name);
}

/* husk-monitor runs `husk create` with the container's stdio. */
static int
start_monitor (const struct containers_ctx *ctx, const struct container_record *rec, pid_t *monitor_pid,
               struct husk_error **err)
{
  cleanup_free char *monitor = find_helper ("husk-monitor");
  cleanup_free char *husk = find_helper ("husk");
  cleanup_free char *bundle = bundle_dir (ctx, rec->id);
  cleanup_free char *log = containers_log_path (ctx, rec->id);
  cleanup_free char *monitor_log = xasprintf ("%s/monitor.log", bundle);
  cleanup_free char *attach = containers_attach_path (ctx, rec->id);
  const char *argv[19]
      = { monitor, "--id",      rec->id, "--bundle",      bundle,      "--log-path",      log,   "--exit-dir",
          bundle,  "--runtime", husk,    "--monitor-log", monitor_log, "--attach-socket", attach };
  size_t n = 15;
  struct cri_child_run run = { .argv = (char *const *) argv, .timeout_ms = 60000, .output_max = 65536 };
  int ret;

  if (ctx->runtime_root)
    {
      argv[n++] = "--runtime-root";
      argv[n++] = ctx->runtime_root;
    }
  if (rec->tty)
    argv[n++] = "--terminal";
  if (cri_child_run (&run, err) < 0)
    return -1;
  ret = run.timed_out ? husk_error_make (err, 0, "husk-monitor for %.12s: no report in time", rec->id)
                      : parse_monitor_report (rec->id, run.out[0].data, monitor_pid, err);
  if (ret < 0 && run.out[1].data && run.out[1].data[0])
    husk_error_wrap (err, "%s", run.out[1].data);
  cri_child_run_clear (&run);
  return ret;
}

/* A process of its own session that waits for the monitor (PIDFD) to
 * exit, then finishes the container: exit code, network, --rm. */
static void
spawn_waiter (const struct containers_ctx *ctx, const char *id, int pidfd)
{
  struct husk_error *err = NULL;
  struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
  int null_fd;
  pid_t pid;

  fflush (NULL);
  pid = fork ();
  if (pid != 0)
    return;
  setsid ();
  null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = 0; fd < 3; fd++)
    dup2 (null_fd, fd);
  close_range (3, (unsigned) pidfd - 1, 0);
  close_range ((unsigned) pidfd + 1, ~0U, 0);
  while (poll (&pfd, 1, -1) < 0 && errno == EINTR)
    ;
  if (containers_finish (ctx, id, &err) < 0)
    husk_error_free (&err);
  _exit (0);
}

static int
start_detached (const struct containers_ctx *ctx, struct container_record *rec, struct husk_error **err)
{
  struct runtime_ctx rt = { .root = ctx->runtime_root };
  struct husk_error *ignored = NULL;
  pid_t monitor_pid = 0;
  int pidfd;

  if (start_monitor (ctx, rec, &monitor_pid, err) < 0)
    return -1;
  pidfd = (int) syscall (SYS_pidfd_open, monitor_pid, 0);
  if (pidfd < 0 || container_start (&rt, rec->id, err) < 0)
    {
      if (pidfd < 0)
        husk_error_make (err, errno, "pidfd_open of husk-monitor (pid %d)", (int) monitor_pid);
      container_delete (&rt, rec->id, true, &ignored);
      husk_error_free (&ignored);
      if (pidfd >= 0)
        close (pidfd);
      return -1;
    }
  rec->started = state_now_rfc3339 ();
  if (write_record (ctx, rec, err) < 0)
    {
      close (pidfd);
      return -1;
    }
  spawn_waiter (ctx, rec->id, pidfd);
  close (pidfd);
  return 0;
}

int
containers_start (const struct containers_ctx *ctx, const char *id, int *exit_code, struct husk_error **err)
{
  struct runtime_ctx rt = { .root = ctx->runtime_root };
  cleanup_free char *bundle = bundle_dir (ctx, id);
  struct create_options opts = { .bundle = bundle };
  struct container_record *rec = NULL;
  int ret;

  if (read_record (ctx, id, &rec, err) < 0)
    return -1;
  if (rec->detached)
    {
      ret = start_detached (ctx, rec, err);
      container_record_free (rec);
      return ret;
    }
  rec->started = state_now_rfc3339 ();
  ret = container_run (&rt, id, &opts, false, exit_code, err);
  if (ret == 0)
    {
      rec->has_exit_code = true;
      rec->exit_code = *exit_code;
      rec->finished = state_now_rfc3339 ();
      ret = write_record (ctx, rec, err);
    }
  container_record_free (rec);
  return ret;
}

/* The network of REC again, as it was created, into the bundle's config. */
static int
network_again (const struct containers_ctx *ctx, struct container_record *rec, struct husk_error **err)
{
  cleanup_free char *bundle = bundle_dir (ctx, rec->id);
  cleanup_free char *path = xasprintf ("%s/config.json", bundle);
  struct container_create_request req = {
    .bridge = rec->network && strcmp (rec->network, "bridge") == 0,
    .network_config = containers_network_config (),
    .ports = rec->ports,
    .n_ports = rec->n_ports,
  };
  json_error_t jerr;
  json_t *config = json_load_file (path, 0, &jerr);
  int ret;

  if (config == NULL)
    return husk_error_make (err, 0, "%s: %s", path, jerr.text);
  req.spec.network
      = rec->network && strcmp (rec->network, "host") == 0 ? OCISPEC_NETWORK_HOST : OCISPEC_NETWORK_NONE;
  ret = containers_network_setup (ctx, rec, bundle, &req, config, err);
  if (ret == 0 && (ret = containers_write_config (bundle, config, err)) < 0)
    containers_network_release (ctx, rec);
  json_decref (config);
  return ret;
}

static void wait_monitor_gone (const struct containers_ctx *ctx, const char *id);

/* What the last run of REC left: its runtime state, its monitor's exit
 * file and its network (a crash may have kept it). */
static int
clear_last_run (const struct containers_ctx *ctx, struct container_record *rec, struct husk_error **err)
{
  struct runtime_ctx rt = { .root = ctx->runtime_root };
  cleanup_free char *bundle = bundle_dir (ctx, rec->id);
  cleanup_free char *exit_path = xasprintf ("%s/%s", bundle, rec->id);
  cleanup_free char *runtime_dir = state_dir_path (ctx->runtime_root, rec->id);

  if (access (runtime_dir, F_OK) == 0 && container_delete (&rt, rec->id, true, err) < 0)
    return -1;
  if (rec->detached)
    wait_monitor_gone (ctx, rec->id);
  if (unlink (exit_path) < 0 && errno != ENOENT)
    return husk_error_make (err, errno, "remove `%s`", exit_path);
  containers_network_release (ctx, rec);
  return 0;
}

int
containers_start_again (const struct containers_ctx *ctx, const char *id, struct husk_error **err)
{
  cleanup_close int lock_fd = lock_containers (ctx);
  struct container_record *rec = NULL;
  struct husk_error *ignored = NULL;
  int ret;

  if (read_record (ctx, id, &rec, err) < 0)
    return -1;
  if (containers_running (ctx, id))
    ret = husk_error_kind (err, EEXIST, "container %s is running already", rec->name);
  else
    ret = clear_last_run (ctx, rec, err);
  if (ret == 0 && (ret = network_again (ctx, rec, err)) == 0)
    {
      /* It runs under a monitor from now on: its log, exit file, attach. */
      rec->detached = true;
      rec->has_exit_code = false;
      free (rec->finished);
      rec->finished = NULL;
      ret = write_record (ctx, rec, err);
      if (ret == 0)
        ret = start_detached (ctx, rec, err);
      if (ret < 0)
        {
          containers_network_release (ctx, rec);
          write_record (ctx, rec, &ignored);
          husk_error_free (&ignored);
        }
    }
  container_record_free (rec);
  return ret;
}

/* The monitor's exit file: BUNDLE/<id>. */
static bool
read_exit_file (const struct containers_ctx *ctx, const char *id, int *code, char **finished_at)
{
  cleanup_free char *bundle = bundle_dir (ctx, id);
  cleanup_free char *path = xasprintf ("%s/%s", bundle, id);
  json_t *doc = json_load_file (path, 0, NULL);
  bool found = json_is_integer (json_object_get (doc, "exit_code"));

  if (found)
    {
      *code = (int) json_integer_value (json_object_get (doc, "exit_code"));
      if (finished_at)
        *finished_at = member (doc, "finished_at");
    }
  json_decref (doc);
  return found;
}

bool
containers_exit_code (const struct containers_ctx *ctx, const struct container_record *rec, int *code,
                      char **finished_at)
{
  if (rec->has_exit_code)
    {
      *code = rec->exit_code;
      if (finished_at)
        *finished_at = rec->finished ? xstrdup (rec->finished) : NULL;
      return true;
    }
  return rec->detached && read_exit_file (ctx, rec->id, code, finished_at);
}

char *
containers_status (const struct containers_ctx *ctx, const struct container_record *rec)
{
  struct container_state *state = NULL;
  struct husk_error *ignored = NULL;
  enum container_status status = STATUS_STOPPED;
  int code;

  if (state_load (ctx->runtime_root, rec->id, &state, &ignored) == 0)
    status = state_status (state);
  else if (!rec->has_exit_code && !rec->detached)
    status = STATUS_CREATED;
  husk_error_free (&ignored);
  state_free (state);
  if (status != STATUS_STOPPED)
    return xstrdup (container_status_name (status));
  if (containers_exit_code (ctx, rec, &code, NULL))
    return xasprintf ("exited (%d)", code);
  return xstrdup ("stopped");
}

bool
containers_running (const struct containers_ctx *ctx, const char *id)
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

/* Waits (up to 10 s) for the monitor of a detached container to exit, so
 * that it writes nothing into a bundle being removed. */
static void
wait_monitor_gone (const struct containers_ctx *ctx, const char *id)
{
  cleanup_free char *bundle = bundle_dir (ctx, id);
  cleanup_free char *pid_path = xasprintf ("%s/%s.reopen", bundle, id);
  cleanup_free char *exit_path = xasprintf ("%s/%s", bundle, id);

  /* The monitor writes the exit file, then removes its reopen answer and
   * exits; both are the signs it is done. */
  for (int i = 0; i < 100 && (access (exit_path, F_OK) < 0 || access (pid_path, F_OK) == 0); i++)
    poll (NULL, 0, 100);
}

static int
remove_locked (const struct containers_ctx *ctx, const char *id, bool force, struct husk_error **err)
{
  struct runtime_ctx rt = { .root = ctx->runtime_root };
  cleanup_free char *bundle = bundle_dir (ctx, id);
  cleanup_free char *runtime_dir = state_dir_path (ctx->runtime_root, id);
  struct container_record *rec = NULL;
  struct husk_error *ignored = NULL;

  if (containers_running (ctx, id) && !force)
    return husk_error_make (err, 0, "container `%s` is running: stop it first or use --force", id);
  if (access (runtime_dir, F_OK) == 0 && container_delete (&rt, id, true, err) < 0)
    return -1;
  if (read_record (ctx, id, &rec, &ignored) == 0)
    {
      if (rec->detached)
        wait_monitor_gone (ctx, id);
      containers_network_release (ctx, rec);
      container_record_free (rec);
    }
  husk_error_free (&ignored);
  if (husk_rm_rf (bundle, err) < 0)
    return -1;
  return snapshot_remove_container (ctx->image_root, id, err);
}

int
containers_finish (const struct containers_ctx *ctx, const char *id, struct husk_error **err)
{
  cleanup_close int lock_fd = lock_containers (ctx);
  struct container_record *rec = NULL;
  struct husk_error *ignored = NULL;
  int code, ret = 0;

  if (read_record (ctx, id, &rec, &ignored) < 0 || containers_running (ctx, id))
    {
      husk_error_free (&ignored);
      container_record_free (rec);
      return 0;
    }
  if (!rec->has_exit_code && read_exit_file (ctx, id, &code, &rec->finished))
    {
      rec->has_exit_code = true;
      rec->exit_code = code;
    }
  containers_network_release (ctx, rec);
  if (rec->auto_remove)
    ret = remove_locked (ctx, id, true, err);
  else
    ret = write_record (ctx, rec, err);
  container_record_free (rec);
  return ret;
}

int
containers_stop (const struct containers_ctx *ctx, const char *id, int timeout, bool *killed,
                 struct husk_error **err)
{
  struct runtime_ctx rt = { .root = ctx->runtime_root };
  struct container_record *rec = NULL;
  int sig = SIGTERM;

  if (read_record (ctx, id, &rec, err) < 0)
    return -1;
  if (rec->stop_signal && container_parse_signal (rec->stop_signal, &sig, err) < 0)
    sig = SIGTERM;
  husk_error_free (err);
  if (containers_running (ctx, id))
    {
      if (container_kill (&rt, id, sig, false, err) < 0)
        return container_record_free (rec), -1;
      for (int waited = 0; waited < timeout * 10 && containers_running (ctx, id); waited++)
        poll (NULL, 0, 100);
      if (containers_running (ctx, id))
        {
          if (killed)
            *killed = true;
          if (container_kill (&rt, id, SIGKILL, true, err) < 0)
            return container_record_free (rec), -1;
        }
    }
  /* As podman's stop: the exit code kept and the network gone on return. */
  if (rec->detached)
    wait_monitor_gone (ctx, id);
  container_record_free (rec);
  return containers_finish (ctx, id, err);
}

int
containers_remove (const struct containers_ctx *ctx, const char *id, bool force, struct husk_error **err)
{
  cleanup_close int lock_fd = lock_containers (ctx);

  return remove_locked (ctx, id, force, err);
}
