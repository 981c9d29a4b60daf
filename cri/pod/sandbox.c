/* The sandbox store: every pod's record in memory, loaded from
 * ROOT/sandboxes/<id>/{config.pb,state.json} at start, and written back
 * atomically on each change.  A READY pod whose pins or pause process are
 * gone (a reboot, a killed pause) is loaded as NOTREADY; one whose record
 * is damaged is loaded NOTREADY from what the disk still says. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cri/pod/sandbox_internal.h"
#include "cri/pod/sandbox_store.h"
#include "cri/spec/proto_copy.h"
#include "husk/cleanup.h"
#include "husk/util.h"

static char **
strv_copy (char *const *v)
{
  char **copy = xcalloc (husk_strv_len (v) + 1, sizeof *copy);

  for (size_t i = 0; v && v[i]; i++)
    copy[i] = xstrdup (v[i]);
  return copy;
}

static char *
dup_or_null (const char *s)
{
  return s ? xstrdup (s) : NULL;
}

Runtime__V1__PodSandboxConfig *
sandbox_config_copy (const Runtime__V1__PodSandboxConfig *config)
{
  return (Runtime__V1__PodSandboxConfig *) cri_message_copy (&config->base);
}

/* A copy of CONFIG's metadata, labels and annotations alone: what the
 * stats RPCs report of a pod (the rest of a config is most of the cost
 * of copying it, for every pod at every call). */
static Runtime__V1__PodSandboxConfig *
sandbox_config_attributes (const Runtime__V1__PodSandboxConfig *config)
{
  Runtime__V1__PodSandboxConfig brief = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;

  brief.metadata = config->metadata;
  brief.n_labels = config->n_labels;
  brief.labels = config->labels;
  brief.n_annotations = config->n_annotations;
  brief.annotations = config->annotations;
  return sandbox_config_copy (&brief);
}

/* What ListPodSandbox and the stats RPCs read of a pod: the scalars, id,
 * name, namespace, uid, runtime_handler, netns_path, cgroup_parent and the
 * config's attributes; the other strings NULL, ips empty. */
static struct sandbox *
copy_sandbox_attributes (const struct sandbox *sb)
{
  struct sandbox *copy = xcalloc (1, sizeof *copy);

  *copy = (struct sandbox){ .attempt = sb->attempt,
                            .state = sb->state,
                            .created_at = sb->created_at,
                            .pause_pid = sb->pause_pid,
                            .network_down = sb->network_down,
                            .creating = sb->creating,
                            .busy = sb->busy,
                            .pause_start_time = sb->pause_start_time,
                            .cgroup_held = sb->cgroup_held };
  copy->id = xstrdup (sb->id);
  copy->name = xstrdup (sb->name);
  copy->namespace_ = xstrdup (sb->namespace_);
  copy->uid = xstrdup (sb->uid);
  copy->runtime_handler = dup_or_null (sb->runtime_handler);
  copy->netns_path = dup_or_null (sb->netns_path);
  copy->cgroup_parent = dup_or_null (sb->cgroup_parent);
  copy->ips = xcalloc (1, sizeof *copy->ips);
  copy->config = sandbox_config_attributes (sb->config);
  return copy;
}

static struct sandbox *
copy_sandbox (const struct sandbox *sb, bool full_config)
{
  struct sandbox *copy;

  if (!full_config)
    return copy_sandbox_attributes (sb);
  copy = xcalloc (1, sizeof *copy);
  *copy = *sb;
  copy->id = xstrdup (sb->id);
  copy->name = xstrdup (sb->name);
  copy->namespace_ = xstrdup (sb->namespace_);
  copy->uid = xstrdup (sb->uid);
  copy->runtime_handler = xstrdup (sb->runtime_handler);
  copy->dir = xstrdup (sb->dir);
  copy->state_dir = xstrdup (sb->state_dir);
  copy->netns_path = dup_or_null (sb->netns_path);
  copy->ipcns_path = dup_or_null (sb->ipcns_path);
  copy->utsns_path = dup_or_null (sb->utsns_path);
  copy->userns_path = dup_or_null (sb->userns_path);
  copy->pidns_path = dup_or_null (sb->pidns_path);
  copy->hostname_path = xstrdup (sb->hostname_path);
  copy->hosts_path = xstrdup (sb->hosts_path);
  copy->resolv_conf_path = xstrdup (sb->resolv_conf_path);
  copy->shm_path = dup_or_null (sb->shm_path);
  copy->cgroup_parent = dup_or_null (sb->cgroup_parent);
  copy->ips = strv_copy (sb->ips);
  copy->config = sandbox_config_copy (sb->config);
  copy->damaged = dup_or_null (sb->damaged);
  return copy;
}

struct sandbox *
sandbox_copy (const struct sandbox *sb)
{
  return copy_sandbox (sb, true);
}

void
sandbox_free (struct sandbox *sb)
{
  if (sb == NULL)
    return;
  free (sb->id);
  free (sb->name);
  free (sb->namespace_);
  free (sb->uid);
  free (sb->runtime_handler);
  free (sb->dir);
  free (sb->state_dir);
  free (sb->netns_path);
  free (sb->ipcns_path);
  free (sb->utsns_path);
  free (sb->userns_path);
  free (sb->pidns_path);
  free (sb->hostname_path);
  free (sb->hosts_path);
  free (sb->resolv_conf_path);
  free (sb->shm_path);
  free (sb->cgroup_parent);
  husk_strvfreep (&sb->ips);
  if (sb->config)
    protobuf_c_message_free_unpacked (&sb->config->base, NULL);
  free (sb->damaged);
  free (sb);
}

int
sandbox_userns (const Runtime__V1__PodSandboxConfig *config, struct cri_userns *out, struct husk_error **err)
{
  const Runtime__V1__LinuxSandboxSecurityContext *sc
      = config && config->linux ? config->linux->security_context : NULL;
  const Runtime__V1__UserNamespace *options
      = sc && sc->namespace_options ? sc->namespace_options->userns_options : NULL;

  return cri_userns_parse (options, "config.linux.security_context.namespace_options.userns_options", out,
                           err);
}

void
sandboxes_free (struct sandbox **list, size_t n)
{
  for (size_t i = 0; i < n; i++)
    sandbox_free (list[i]);
  free (list);
}

/* Paths derived from the id, so the record need not hold them. */
void
sandbox_set_paths (struct sandbox_store *store, struct sandbox *sb)
{
  sb->dir = xasprintf ("%s/%s", store->sandboxes_dir, sb->id);
  sb->state_dir = xasprintf ("%s/%s", store->pins_dir, sb->id);
  sb->hostname_path = xasprintf ("%s/hostname", sb->dir);
  sb->hosts_path = xasprintf ("%s/hosts", sb->dir);
  sb->resolv_conf_path = xasprintf ("%s/resolv.conf", sb->dir);
}

void
sandbox_set_shm_path (struct sandbox *sb)
{
  free (sb->shm_path);
  sb->shm_path = sb->ipcns_path ? xasprintf ("%s/shm", sb->state_dir) : xstrdup ("/dev/shm");
}

/* ---------------------------------------------------------------- record */

int
sandbox_save (const struct sandbox *sb, bool with_config, struct husk_error **err)
{
  cleanup_free char *state_path = xasprintf ("%s/state.json", sb->dir);
  cleanup_free char *text = NULL;
  json_t *ips = json_array ();
  json_t *doc;

  if (with_config)
    {
      cleanup_free char *config_path = xasprintf ("%s/config.pb", sb->dir);
      size_t size = protobuf_c_message_get_packed_size (&sb->config->base);
      cleanup_free uint8_t *buf = xmalloc (size ? size : 1);

      protobuf_c_message_pack (&sb->config->base, buf);
      if (husk_write_file_atomic (config_path, buf, size, 0600, err) < 0)
        return -1;
    }
  for (size_t i = 0; sb->ips[i]; i++)
    json_array_append_new (ips, json_string (sb->ips[i]));
  /* The metadata again: what a damaged config.pb leaves to list it by. */
  doc = json_pack (
      "{s:s, s:s, s:s, s:s, s:i, s:s, s:I, s:s, s:s?, s:s?, s:s?, s:s?, s:s?, s:i, s:I, s:b, s:b, s:o}", "id",
      sb->id, "name", sb->name, "namespace", sb->namespace_, "uid", sb->uid, "attempt", (int) sb->attempt,
      "state", sb->state == SANDBOX_READY ? "ready" : "notready", "created_at", (json_int_t) sb->created_at,
      "runtime_handler", sb->runtime_handler, "netns", sb->netns_path, "ipcns", sb->ipcns_path, "utsns",
      sb->utsns_path, "userns", sb->userns_path, "pidns", sb->pidns_path, "pause_pid", (int) sb->pause_pid,
      "pause_start_time", (json_int_t) sb->pause_start_time, "network_down", sb->network_down, "creating",
      sb->creating, "ips", ips);
  text = json_dumps (doc, JSON_COMPACT);
  json_decref (doc);
  return husk_write_file_atomic (state_path, text, strlen (text), 0600, err);
}

static char *
json_dup (json_t *doc, const char *key)
{
  const char *value = json_string_value (json_object_get (doc, key));
  return value ? xstrdup (value) : NULL;
}

static int
load_config (struct sandbox *sb, struct husk_error **err)
{
  cleanup_free char *path = xasprintf ("%s/config.pb", sb->dir);
  cleanup_free char *buf = NULL;
  size_t len = 0;

  if (husk_read_file (path, &buf, &len, err) < 0)
    return -1;
  sb->config = runtime__v1__pod_sandbox_config__unpack (NULL, len, (const uint8_t *) buf);
  if (sb->config == NULL || sb->config->metadata == NULL)
    return husk_error_kind (err, EINVAL, "`%s`: not a PodSandboxConfig", path);
  sb->name = xstrdup (sb->config->metadata->name);
  sb->namespace_ = xstrdup (sb->config->metadata->namespace_);
  sb->uid = xstrdup (sb->config->metadata->uid);
  sb->attempt = sb->config->metadata->attempt;
  if (sb->config->linux && sb->config->linux->cgroup_parent && *sb->config->linux->cgroup_parent)
    sb->cgroup_parent = xstrdup (sb->config->linux->cgroup_parent);
  return 0;
}

static int
load_state (struct sandbox *sb, struct husk_error **err)
{
  cleanup_free char *path = xasprintf ("%s/state.json", sb->dir);
  json_error_t jerr;
  json_t *doc = json_load_file (path, 0, &jerr), *ip;
  size_t i;

  if (doc == NULL)
    return husk_error_make (err, 0, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
  sb->state = strcmp (json_string_value (json_object_get (doc, "state")) ?: "", "ready") == 0
                  ? SANDBOX_READY
                  : SANDBOX_NOTREADY;
  sb->created_at = json_integer_value (json_object_get (doc, "created_at"));
  sb->runtime_handler = json_dup (doc, "runtime_handler");
  if (sb->runtime_handler == NULL)
    sb->runtime_handler = xstrdup ("");
  sb->netns_path = json_dup (doc, "netns");
  sb->ipcns_path = json_dup (doc, "ipcns");
  sb->utsns_path = json_dup (doc, "utsns");
  sb->userns_path = json_dup (doc, "userns");
  sandbox_set_shm_path (sb);
  sb->pidns_path = json_dup (doc, "pidns");
  sb->pause_pid = (pid_t) json_integer_value (json_object_get (doc, "pause_pid"));
  sb->pause_start_time = (unsigned long long) json_integer_value (json_object_get (doc, "pause_start_time"));
  sb->network_down = json_is_true (json_object_get (doc, "network_down"));
  sb->creating = json_is_true (json_object_get (doc, "creating"));
  if (sb->name == NULL)
    {
      sb->name = json_dup (doc, "name");
      sb->namespace_ = json_dup (doc, "namespace");
      sb->uid = json_dup (doc, "uid");
      sb->attempt = (uint32_t) json_integer_value (json_object_get (doc, "attempt"));
    }
  sb->ips = xcalloc (json_array_size (json_object_get (doc, "ips")) + 1, sizeof *sb->ips);
  json_array_foreach (json_object_get (doc, "ips"), i, ip) sb->ips[i]
      = xstrdup (json_string_value (ip) ?: "");
  json_decref (doc);
  return 0;
}

/* What a reboot or a killed pause leaves: the record says READY, the
 * namespaces are gone. */
static bool
still_alive (const struct sandbox *sb)
{
  const char *pins[] = { sb->netns_path, sb->ipcns_path, sb->utsns_path, sb->userns_path };

  for (size_t i = 0; i < 4; i++)
    if (pins[i] && !sandbox_ns_pinned (pins[i]))
      return false;
  return sb->pause_pid <= 0 || sandbox_proc_start_time (sb->pause_pid) == sb->pause_start_time;
}

/* A config standing in for a damaged config.pb: the metadata state.json
 * repeats, or none. */
static Runtime__V1__PodSandboxConfig *
placeholder_config (const struct sandbox *sb)
{
  Runtime__V1__PodSandboxMetadata metadata = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
  Runtime__V1__PodSandboxConfig config = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;

  metadata.name = sb->name;
  metadata.namespace_ = sb->namespace_;
  metadata.uid = sb->uid;
  metadata.attempt = sb->attempt;
  config.metadata = &metadata;
  return sandbox_config_copy (&config);
}

static void
pin_if_present (const struct sandbox *sb, const char *name, char **field)
{
  cleanup_free char *pin = xasprintf ("%s/%s", sb->state_dir, name);

  if (*field == NULL && access (pin, F_OK) == 0)
    *field = steal_pointer (&pin);
}

/* What a damaged state.json no longer says, from the disk: the pins there
 * are, the pause process by its command line, the time of the record. */
static void
state_from_disk (struct sandbox *sb)
{
  struct stat st;

  free (sb->runtime_handler);
  sb->runtime_handler = xstrdup ("");
  if (stat (sb->dir, &st) == 0)
    sb->created_at = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  pin_if_present (sb, "net", &sb->netns_path);
  pin_if_present (sb, "ipc", &sb->ipcns_path);
  pin_if_present (sb, "uts", &sb->utsns_path);
  pin_if_present (sb, "user", &sb->userns_path);
  sandbox_set_shm_path (sb);
  sb->pause_pid = sandbox_pause_find (sb->id, &sb->pause_start_time);
  if (sb->pause_pid > 0)
    sb->pidns_path = xasprintf ("/proc/%d/ns/pid", sb->pause_pid);
  husk_strvfreep (&sb->ips);
  sb->ips = xcalloc (1, sizeof *sb->ips);
}

static void
fill_damaged (struct sandbox *sb, bool have_config, bool have_state)
{
  char **fields[] = { &sb->name, &sb->namespace_, &sb->uid };

  if (!have_state)
    state_from_disk (sb);
  if (!have_config)
    {
      for (size_t i = 0; i < 3; i++)
        if (*fields[i] == NULL)
          *fields[i] = xstrdup ("");
      if (sb->config)
        protobuf_c_message_free_unpacked (&sb->config->base, NULL);
      sb->config = placeholder_config (sb);
    }
  sb->state = SANDBOX_NOTREADY;
}

/* Something of the pod still runs or is pinned. */
static bool
anything_alive (const struct sandbox *sb)
{
  const char *pins[] = { sb->netns_path, sb->ipcns_path, sb->utsns_path, sb->userns_path };

  for (size_t i = 0; i < 4; i++)
    if (sandbox_ns_pinned (pins[i]))
      return true;
  return sb->pause_pid > 0 && sandbox_proc_start_time (sb->pause_pid) == sb->pause_start_time;
}

static void
add_unfinished (struct sandbox_store *store, struct sandbox *sb)
{
  sandbox_cgroup_adopt (store, sb);
  store->unfinished = xrealloc (store->unfinished, (store->n_unfinished + 1) * sizeof *store->unfinished);
  store->unfinished[store->n_unfinished++] = sb;
}

static void
add_item (struct sandbox_store *store, struct sandbox *sb)
{
  sandbox_cgroup_adopt (store, sb);
  store->items = xrealloc (store->items, (store->n + 1) * sizeof *store->items);
  store->items[store->n++] = sb;
}

/* A record of which config.pb or state.json cannot be read: rolled back
 * at recovery when nothing of the pod runs (or its run never finished);
 * listed NOTREADY otherwise, with one warning here, not one per List. */
static void
load_damaged (struct sandbox_store *store, struct sandbox *sb, struct husk_error *config_err,
              struct husk_error *state_err)
{
  bool have_config = config_err == NULL, have_state = state_err == NULL;

  if (config_err && state_err)
    sb->damaged = xasprintf ("%s; %s", config_err->msg, state_err->msg);
  else
    sb->damaged = xstrdup ((config_err ? config_err : state_err)->msg);
  fill_damaged (sb, have_config, have_state);
  if ((have_state && sb->creating) || !anything_alive (sb))
    {
      add_unfinished (store, sb);
      return;
    }
  husk_warn ("pod sandbox %s: its record is damaged (%s): listed NOTREADY from what is on disk; "
             "StopPodSandbox and RemovePodSandbox clean it up",
             sb->id, sb->damaged);
  add_item (store, sb);
}

static void
load_one (struct sandbox_store *store, const char *id)
{
  struct husk_error *err = NULL, *config_err = NULL, *state_err = NULL;
  struct sandbox *sb = xcalloc (1, sizeof *sb);

  sb->id = xstrdup (id);
  sandbox_set_paths (store, sb);
  load_config (sb, &config_err);
  load_state (sb, &state_err);
  if (config_err || state_err)
    {
      load_damaged (store, sb, config_err, state_err);
      husk_error_free (&config_err);
      husk_error_free (&state_err);
      return;
    }
  if (sb->creating)
    {
      add_unfinished (store, sb);
      return;
    }
  if (sb->state == SANDBOX_READY && !still_alive (sb))
    {
      sb->state = SANDBOX_NOTREADY;
      if (sandbox_save (sb, false, &err) < 0)
        {
          husk_warn ("sandbox %s: %s", id, err->msg);
          husk_error_free (&err);
        }
    }
  add_item (store, sb);
}

static bool
is_sandbox_id (const char *name)
{
  return strlen (name) == 64 && strspn (name, "0123456789abcdef") == 64;
}

/* STATE/sandboxes/<id> whose ROOT record is gone altogether: a remove
 * that stopped between the two directories. */
static int
find_lost_pins (struct sandbox_store *store, struct husk_error **err)
{
  cleanup_dir DIR *dir = opendir (store->pins_dir);
  struct dirent *de;

  if (dir == NULL)
    return husk_error_make (err, errno, "open `%s`", store->pins_dir);
  while ((de = readdir (dir)) != NULL)
    {
      cleanup_free char *record_dir = xasprintf ("%s/%s", store->sandboxes_dir, de->d_name);
      if (is_sandbox_id (de->d_name) && access (record_dir, F_OK) < 0)
        store->unreadable = husk_strv_append (store->unreadable, de->d_name);
    }
  return 0;
}

static int
load_all (struct sandbox_store *store, struct husk_error **err)
{
  cleanup_dir DIR *dir = opendir (store->sandboxes_dir);
  struct dirent *de;

  if (dir == NULL)
    return husk_error_make (err, errno, "open `%s`", store->sandboxes_dir);
  while ((de = readdir (dir)) != NULL)
    if (is_sandbox_id (de->d_name))
      load_one (store, de->d_name);
  return find_lost_pins (store, err);
}

/* ---------------------------------------------------------------- store */

int
sandbox_store_open (const char *root, const char *state, struct sandbox_store **out, struct husk_error **err)
{
  struct sandbox_store *store = xcalloc (1, sizeof *store);

  store->sandboxes_dir = xasprintf ("%s/sandboxes", root);
  store->pins_dir = xasprintf ("%s/sandboxes", state);
  store->cni_cache_dir = xasprintf ("%s/cni-cache", root);
  store->cgroups_record = xasprintf ("%s/cgroups-created.json", state);
  store->cgroup_users = xcalloc (1, sizeof *store->cgroup_users);
  pthread_mutex_init (&store->cgroup_lock, NULL);
  pthread_mutex_init (&store->lock, NULL);
  pthread_cond_init (&store->idle, NULL);
  store->reserved = xcalloc (1, sizeof *store->reserved);
  store->unreadable = xcalloc (1, sizeof *store->unreadable);
  if (husk_mkdir_p (store->sandboxes_dir, 0700, err) < 0 || husk_mkdir_p (store->pins_dir, 0700, err) < 0
      || load_all (store, err) < 0)
    {
      sandbox_store_free (store);
      return husk_error_wrap (err, "sandbox store");
    }
  *out = store;
  return 0;
}

void
sandbox_store_free (struct sandbox_store *store)
{
  if (store == NULL)
    return;
  for (size_t i = 0; i < store->n; i++)
    sandbox_free (store->items[i]);
  free (store->items);
  free (store->sandboxes_dir);
  free (store->pins_dir);
  free (store->cni_cache_dir);
  free (store->cgroups_record);
  husk_strvfreep (&store->cgroup_users);
  pthread_mutex_destroy (&store->cgroup_lock);
  free (store->cni_conf_dir);
  free (store->cni_bin_dirs);
  pthread_mutex_destroy (&store->lock);
  pthread_cond_destroy (&store->idle);
  husk_strvfreep (&store->reserved);
  husk_strvfreep (&store->unreadable);
  for (size_t i = 0; i < store->n_unfinished; i++)
    sandbox_free (store->unfinished[i]);
  free (store->unfinished);
  free (store);
}

void
sandbox_store_set_network (struct sandbox_store *store, const char *conf_dir, const char *bin_dirs)
{
  free (store->cni_conf_dir);
  free (store->cni_bin_dirs);
  store->cni_conf_dir = dup_or_null (conf_dir);
  store->cni_bin_dirs = dup_or_null (bin_dirs);
}

/* Index of ID or a unique prefix of it; -1 with *ERR otherwise.  Called
 * with store->lock held. */
ssize_t
sandbox_store_find (struct sandbox_store *store, const char *id, struct husk_error **err)
{
  size_t len = id ? strlen (id) : 0;
  ssize_t found = -1;

  if (len == 0)
    {
      return husk_error_kind (err, EINVAL, "pod_sandbox_id is required");
    }
  for (size_t i = 0; i < store->n; i++)
    if (strncmp (store->items[i]->id, id, len) == 0)
      {
        if (found >= 0)
          {
            return husk_error_kind (err, EINVAL, "pod sandbox id prefix `%s` is ambiguous", id);
          }
        found = (ssize_t) i;
        if (len == 64)
          break;
      }
  if (found < 0)
    {
      husk_error_kind (err, ENOENT, "pod sandbox `%s` not found", id);
    }
  return found;
}

int
sandbox_lookup (struct sandbox_store *store, const char *id, struct sandbox **out, struct husk_error **err)
{
  ssize_t i;

  pthread_mutex_lock (&store->lock);
  i = sandbox_store_find (store, id, err);
  if (i >= 0)
    *out = sandbox_copy (store->items[i]);
  pthread_mutex_unlock (&store->lock);
  return i >= 0 ? 0 : -1;
}

static void
list_sandboxes (struct sandbox_store *store, bool full_config, struct sandbox ***out, size_t *n)
{
  struct sandbox **list;

  pthread_mutex_lock (&store->lock);
  list = xcalloc (store->n + 1, sizeof *list);
  for (size_t i = 0; i < store->n; i++)
    list[i] = copy_sandbox (store->items[i], full_config);
  *n = store->n;
  pthread_mutex_unlock (&store->lock);
  *out = list;
}

int
sandbox_list (struct sandbox_store *store, struct sandbox ***out, size_t *n, struct husk_error **err)
{
  (void) err;
  list_sandboxes (store, true, out, n);
  return 0;
}

int
sandbox_list_attributes (struct sandbox_store *store, struct sandbox ***out, size_t *n,
                         struct husk_error **err)
{
  (void) err;
  list_sandboxes (store, false, out, n);
  return 0;
}
