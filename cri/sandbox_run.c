/* A pod sandbox's lifecycle: RunPodSandbox's steps (each with its undo),
 * StopPodSandbox and RemovePodSandbox.  The record is written NOTREADY
 * before the first namespace exists, so a crash mid-way leaves a record
 * that Stop and Remove clean up, never an unlisted leak; and it goes only
 * once CNI DEL worked, so the network is never left without a record
 * that leads back to it. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cri/cni/cni.h"
#include "cri/runtime_exec.h"
#include "cri/sandbox_internal.h"
#include "cri/sandbox_store.h"
#include "husk/cleanup.h"
#include "husk/util.h"

static bool
empty (const char *s)
{
  return s == NULL || *s == '\0';
}

static int
validate (const Runtime__V1__PodSandboxConfig *config, struct husk_error **err)
{
  const Runtime__V1__PodSandboxMetadata *md = config ? config->metadata : NULL;

  if (config == NULL)
    return husk_error_kind (err, EINVAL, "config is required");
  if (md == NULL)
    return husk_error_kind (err, EINVAL, "config.metadata is required");
  if (empty (md->name))
    return husk_error_kind (err, EINVAL, "config.metadata.name is required");
  if (empty (md->namespace_))
    return husk_error_kind (err, EINVAL, "config.metadata.namespace is required");
  if (empty (md->uid))
    return husk_error_kind (err, EINVAL, "config.metadata.uid is required");
  if (!empty (config->log_directory) && config->log_directory[0] != '/')
    return husk_error_kind (err, EINVAL, "config.log_directory must be an absolute path");
  if (config->hostname && strlen (config->hostname) > 64)
    return husk_error_kind (err, EINVAL, "config.hostname is longer than 64 characters");
  return 0;
}

static const Runtime__V1__NamespaceOption *
namespace_options (const Runtime__V1__PodSandboxConfig *config)
{
  static const Runtime__V1__NamespaceOption defaults = RUNTIME__V1__NAMESPACE_OPTION__INIT;

  if (config->linux && config->linux->security_context && config->linux->security_context->namespace_options)
    return config->linux->security_context->namespace_options;
  return &defaults;
}

/* kubelet never sends a pod of its own user namespace that shares a
 * namespace of the node (hostNetwork, hostIPC, hostPID need hostUsers):
 * the node's namespaces belong to the node's user namespace. */
static int
check_userns_modes (const Runtime__V1__PodSandboxConfig *config, const struct cri_userns *userns,
                    struct husk_error **err)
{
  const Runtime__V1__NamespaceOption *ns = namespace_options (config);
  static const char *const names[] = { "network", "pid", "ipc" };
  const Runtime__V1__NamespaceMode modes[] = { ns->network, ns->pid, ns->ipc };

  if (!userns->pod)
    return 0;
  for (size_t i = 0; i < 3; i++)
    if (modes[i] == RUNTIME__V1__NAMESPACE_MODE__NODE)
      return husk_error_kind (
          err, EINVAL,
          "config.linux.security_context.namespace_options.%s: NODE cannot go with "
          "userns_options mode POD (the node's namespace is not the pod's user namespace's)",
          names[i]);
  return 0;
}

static char *
random_id (void)
{
  unsigned char bytes[32];
  char *id = xmalloc (65);

  if (getrandom (bytes, sizeof bytes, 0) != (ssize_t) sizeof bytes)
    for (size_t i = 0; i < sizeof bytes; i++)
      bytes[i] = (unsigned char) random ();
  for (size_t i = 0; i < sizeof bytes; i++)
    snprintf (id + 2 * i, 3, "%02x", bytes[i]);
  return id;
}

/* ---------------------------------------------------------------- CNI */

static struct cni_ctx
cni_ctx_of (const struct sandbox_store *store)
{
  return (struct cni_ctx){ .bin_dirs = store->cni_bin_dirs, .cache_dir = store->cni_cache_dir };
}

static const char *
protocol_name (Runtime__V1__Protocol protocol)
{
  return protocol == RUNTIME__V1__PROTOCOL__UDP    ? "udp"
         : protocol == RUNTIME__V1__PROTOCOL__SCTP ? "sctp"
                                                   : "tcp";
}

/* A protobuf-c repeated string as the NULL-terminated list cni.h takes
 * (the strings are borrowed). */
static char **
terminated (char **strings, size_t n)
{
  char **list = xcalloc (n + 1, sizeof *list);

  memcpy (list, strings, n * sizeof *list);
  return list;
}

/* The config files of DIR other than USED (its basename), one string. */
static char *
other_configs (const char *dir, const char *used)
{
  cleanup_dir DIR *d = opendir (dir);
  char *list = xstrdup ("");
  struct dirent *de;

  while (d && (de = readdir (d)) != NULL)
    {
      const char *dot = strrchr (de->d_name, '.');
      char *longer;

      if (de->d_name[0] == '.' || dot == NULL || strcmp (de->d_name, used) == 0
          || (strcmp (dot, ".conf") != 0 && strcmp (dot, ".conflist") != 0 && strcmp (dot, ".json") != 0))
        continue;
      longer = xasprintf ("%s%s%s", list, *list ? ", " : "", de->d_name);
      free (list);
      list = longer;
    }
  return list;
}

void
sandbox_store_log_network (struct sandbox_store *store)
{
  const char *conf_dir = store->cni_conf_dir ? store->cni_conf_dir : CNI_DEFAULT_CONF_DIR;
  struct cni_network *net = NULL;
  struct husk_error *err = NULL;
  cleanup_free char *others = NULL;
  cleanup_free char *plugins = xstrdup ("");

  if (cni_config_load_dir (conf_dir, &net, &err) < 0)
    {
      husk_warn ("%s: pods with a network of their own fail until there is one (`make run` writes a default "
                 "bridge; see README)",
                 err->msg);
      husk_error_free (&err);
      return;
    }
  for (size_t i = 0; i < net->n_plugins; i++)
    {
      char *longer = xasprintf ("%s%s%s", plugins, i ? "," : "", net->plugins[i].type);
      free (plugins);
      plugins = longer;
    }
  {
    const char *slash = net->path ? strrchr (net->path, '/') : NULL;
    others = other_configs (conf_dir, slash ? slash + 1 : "");
  }
  husk_log (HUSK_LOG_INFO, "CNI network `%s` from %s (plugins %s)%s%s", net->name,
            net->path ? net->path : conf_dir, plugins,
            *others ? "; not used (the first file by name wins): " : "", others);
  cni_network_free (net);
}

static int
network_add (struct sandbox_store *store, struct sandbox *sb, struct husk_error **err)
{
  const Runtime__V1__PodSandboxConfig *config = sb->config;
  cleanup_free struct cni_port_mapping *ports = xcalloc (config->n_port_mappings + 1, sizeof *ports);
  struct cni_ctx ctx = cni_ctx_of (store);
  struct cni_network *net = NULL;
  struct cni_result *result = NULL;
  const char *conf_dir = store->cni_conf_dir ? store->cni_conf_dir : CNI_DEFAULT_CONF_DIR;
  int ret;

  if (cni_config_load_dir (conf_dir, &net, err) < 0)
    {
      /* The error names the dir already ("no CNI network config in DIR"). */
      husk_error_wrap (err, "pod network");
      (*err)->errnum = ENONET;
      return -1;
    }
  for (size_t i = 0; i < config->n_port_mappings; i++)
    ports[i] = (struct cni_port_mapping){ .host_port = config->port_mappings[i]->host_port,
                                          .container_port = config->port_mappings[i]->container_port,
                                          .protocol = protocol_name (config->port_mappings[i]->protocol),
                                          .host_ip = config->port_mappings[i]->host_ip };
  {
    const Runtime__V1__DNSConfig *dns = config->dns_config;
    cleanup_free char **servers = dns ? terminated (dns->servers, dns->n_servers) : NULL;
    cleanup_free char **searches = dns ? terminated (dns->searches, dns->n_searches) : NULL;
    cleanup_free char **options = dns ? terminated (dns->options, dns->n_options) : NULL;
    struct cni_bandwidth bandwidth;
    bool limited = false;
    struct cni_pod pod = { .container_id = sb->id,
                           .netns = sb->netns_path,
                           .pod_namespace = sb->namespace_,
                           .pod_name = sb->name,
                           .pod_uid = sb->uid,
                           .port_mappings = ports,
                           .n_port_mappings = config->n_port_mappings,
                           .dns_servers = servers,
                           .dns_searches = searches,
                           .dns_options = options };

    /* Checked by sandbox_run before anything was made. */
    ret = sandbox_bandwidth (config, &bandwidth, &limited, err);
    pod.bandwidth = limited ? &bandwidth : NULL;
    if (ret == 0)
      ret = cni_add (&ctx, net, &pod, &result, err);
  }
  if (ret == 0)
    {
      husk_strvfreep (&sb->ips);
      sb->ips = cni_result_pod_ips (result, NULL);
      if (sb->ips == NULL)
        sb->ips = xcalloc (1, sizeof *sb->ips);
    }
  cni_result_free (result);
  cni_network_free (net);
  return ret;
}

static int
network_del (struct sandbox_store *store, const struct sandbox *sb, struct husk_error **err)
{
  struct cni_ctx ctx = cni_ctx_of (store);
  struct cni_network *net = NULL;
  struct husk_error *ignored = NULL;
  struct cni_pod pod = { .container_id = sb->id,
                         .netns = sb->netns_path,
                         .pod_namespace = sb->namespace_,
                         .pod_name = sb->name,
                         .pod_uid = sb->uid };
  int ret;

  /* Without a config the cached ADD result is enough. */
  if (cni_config_load_dir (store->cni_conf_dir, &net, &ignored) < 0)
    husk_error_free (&ignored);
  ret = cni_del (&ctx, net, &pod, err);
  cni_network_free (net);
  return ret < 0 ? husk_error_wrap (err, "CNI DEL of pod sandbox %s", sb->id) : 0;
}

/* ---------------------------------------------------------------- run */

/* Undoes whatever of RUN exists; each step is safe on what was never done.
 * A failed CNI DEL stops it before anything goes: the record, the pins
 * (the netns a retried DEL needs) and the CNI cache entry stay. */
static int
teardown (struct sandbox_store *store, struct sandbox *sb, bool network_added, struct husk_error **err)
{
  struct husk_error *rm_err = NULL;
  const char *pins[] = { sb->netns_path, sb->ipcns_path, sb->utsns_path, sb->userns_path };
  cleanup_free char *shm = NULL;

  if (network_added && network_del (store, sb, err) < 0)
    return -1;
  sandbox_pause_kill (sb->pause_pid, sb->pause_start_time);
  for (size_t i = 0; i < 4; i++)
    if (pins[i])
      sandbox_ns_unpin (pins[i]);
  /* Whatever the record says: the tmpfs must not be emptied by rm_rf. */
  shm = xasprintf ("%s/shm", sb->state_dir);
  sandbox_shm_unmount (shm);
  sandbox_cgroup_release (store, sb);
  if (husk_rm_rf (sb->state_dir, &rm_err) < 0 || husk_rm_rf (sb->dir, &rm_err) < 0)
    {
      husk_warn ("%s", rm_err->msg);
      husk_error_free (&rm_err);
    }
  return 0;
}

/* A pod whose undo failed at CNI DEL: NOTREADY, listed, for
 * StopPodSandbox/RemovePodSandbox (or kubelet's garbage collection) to
 * retry the DEL and remove the rest. */
static void
keep_failed (struct sandbox_store *store, struct sandbox *sb, bool listed)
{
  struct husk_error *err = NULL;

  sandbox_pause_kill (sb->pause_pid, sb->pause_start_time);
  sb->creating = false;
  sb->state = SANDBOX_NOTREADY;
  sb->network_down = false;
  if (sandbox_save (sb, false, &err) < 0)
    {
      husk_warn ("pod sandbox %s: %s", sb->id, err->msg);
      husk_error_free (&err);
    }
  if (!listed)
    return;
  pthread_mutex_lock (&store->lock);
  store->items = xrealloc (store->items, (store->n + 1) * sizeof *store->items);
  store->items[store->n++] = sb;
  pthread_mutex_unlock (&store->lock);
}

static struct sandbox *
new_record (struct sandbox_store *store, const Runtime__V1__PodSandboxConfig *config,
            const char *runtime_handler)
{
  struct sandbox *sb = xcalloc (1, sizeof *sb);
  const Runtime__V1__NamespaceOption *ns = namespace_options (config);

  sb->id = random_id ();
  sb->config = sandbox_config_copy (config);
  sb->name = xstrdup (config->metadata->name);
  sb->namespace_ = xstrdup (config->metadata->namespace_);
  sb->uid = xstrdup (config->metadata->uid);
  sb->attempt = config->metadata->attempt;
  sb->state = SANDBOX_NOTREADY;
  sb->created_at = cri_now_ns ();
  sb->runtime_handler = xstrdup (runtime_handler ? runtime_handler : "");
  sb->creating = true;
  sandbox_set_paths (store, sb);
  if (ns->network != RUNTIME__V1__NAMESPACE_MODE__NODE)
    {
      sb->netns_path = xasprintf ("%s/net", sb->state_dir);
      sb->utsns_path = xasprintf ("%s/uts", sb->state_dir);
    }
  if (ns->ipc != RUNTIME__V1__NAMESPACE_MODE__NODE)
    sb->ipcns_path = xasprintf ("%s/ipc", sb->state_dir);
  if (ns->userns_options && ns->userns_options->mode == RUNTIME__V1__NAMESPACE_MODE__POD)
    sb->userns_path = xasprintf ("%s/user", sb->state_dir);
  sandbox_set_shm_path (sb);
  if (config->linux && !empty (config->linux->cgroup_parent))
    sb->cgroup_parent = xstrdup (config->linux->cgroup_parent);
  sb->ips = xcalloc (1, sizeof *sb->ips);
  return sb;
}

/* The pod's hostname: the config's, or (as containerd and CRI-O do) the
 * node's when the config has none or the pod shares the node's UTS
 * namespace.  Pod names can be longer than the 64 characters sethostname
 * allows, so they are never used. */
static int
hostname_of (const struct sandbox *sb, char *buf, size_t len, struct husk_error **err)
{
  if (sb->utsns_path && !empty (sb->config->hostname))
    {
      snprintf (buf, len, "%s", sb->config->hostname);
      return 0;
    }
  if (gethostname (buf, len) < 0)
    return husk_error_make (err, errno, "gethostname");
  buf[len - 1] = '\0';
  return 0;
}

/* The steps after the name is reserved; *NETWORK_ADDED says what to undo. */
void
sandbox_store_set_apparmor (struct sandbox_store *store, const struct cri_apparmor *apparmor)
{
  store->apparmor = apparmor;
}

/* The pause process's profile: the pod's SecurityProfile (no old string
 * form for pods), RuntimeDefault when it has none.  Only a pod that has a
 * pause process (a shared pid namespace) needs one. */
static int
pause_apparmor (struct sandbox_store *store, const Runtime__V1__PodSandboxConfig *config, char **out,
                struct husk_error **err)
{
  const Runtime__V1__LinuxSandboxSecurityContext *sc = config->linux ? config->linux->security_context : NULL;
  struct cri_apparmor_choice choice = {
    .has_profile = sc && sc->apparmor,
    .type = sc && sc->apparmor ? (int) sc->apparmor->profile_type : 0,
    .localhost_ref = sc && sc->apparmor ? sc->apparmor->localhost_ref : NULL,
    .privileged = sc && sc->privileged,
    .field = "linux.security_context",
  };

  *out = NULL;
  if (namespace_options (config)->pid != RUNTIME__V1__NAMESPACE_MODE__POD)
    return 0;
  return cri_apparmor_resolve (store->apparmor, &choice, out, err);
}

static int
create (struct sandbox_store *store, struct sandbox *sb, const struct cri_userns *userns,
        const struct sandbox_sysctl *sysctls, size_t n_sysctls, const char *pause_profile,
        bool *network_added, struct husk_error **err)
{
  struct sandbox_ns_setup setup = { .apparmor_profile = pause_profile,
                                    .net_pin = sb->netns_path,
                                    .ipc_pin = sb->ipcns_path,
                                    .uts_pin = sb->utsns_path,
                                    .user_pin = sb->userns_path,
                                    .userns = userns,
                                    .hostname = NULL,
                                    .sysctls = sysctls,
                                    .n_sysctls = n_sysctls };
  char host_name[HOST_NAME_MAX + 1];

  if (hostname_of (sb, host_name, sizeof host_name, err) < 0)
    return -1;
  if (sb->utsns_path)
    setup.hostname = host_name;
  if (husk_mkdir_p (sb->dir, 0700, err) < 0 || husk_mkdir_p (sb->state_dir, 0700, err) < 0
      || sandbox_save (sb, true, err) < 0 || sandbox_cgroup_create (store, sb, err) < 0)
    return -1;
  if ((setup.net_pin || setup.ipc_pin) && sandbox_ns_pin (&setup, err) < 0)
    return -1;
  if (sb->ipcns_path && sandbox_shm_mount (sb->shm_path, userns, err) < 0)
    return -1;
  if (namespace_options (sb->config)->pid == RUNTIME__V1__NAMESPACE_MODE__POD)
    {
      if (sandbox_pause_start (sb->id, &setup, &sb->pause_pid, &sb->pause_start_time, err) < 0)
        return -1;
      sb->pidns_path = xasprintf ("/proc/%d/ns/pid", sb->pause_pid);
      /* A restart from here on must find the pause process to kill it. */
      if (sandbox_save (sb, false, err) < 0)
        return -1;
    }
  if (sb->netns_path)
    {
      /* From here a failure is undone with DEL: ADD may have got half-way
       * (and then its own undo may have failed too). */
      *network_added = true;
      if (network_add (store, sb, err) < 0)
        return -1;
    }
  if (sandbox_write_files (sb, host_name, userns, err) < 0)
    return -1;
  sb->state = SANDBOX_READY;
  sb->creating = false;
  return sandbox_save (sb, false, err);
}

static char *
reservation_key (const struct sandbox *sb)
{
  return xasprintf ("%s/%s/%u", sb->namespace_, sb->name, sb->attempt);
}

/* Claims SB's name for the run, unless a READY pod or another run holds it. */
static bool
reserve (struct sandbox_store *store, const struct sandbox *sb)
{
  cleanup_free char *key = reservation_key (sb);
  bool taken = false;

  pthread_mutex_lock (&store->lock);
  for (size_t i = 0; i < store->n && !taken; i++)
    taken = store->items[i]->state == SANDBOX_READY && strcmp (store->items[i]->name, sb->name) == 0
            && strcmp (store->items[i]->namespace_, sb->namespace_) == 0
            && store->items[i]->attempt == sb->attempt;
  for (size_t i = 0; store->reserved[i] && !taken; i++)
    taken = strcmp (store->reserved[i], key) == 0;
  if (!taken)
    store->reserved = husk_strv_append (store->reserved, key);
  pthread_mutex_unlock (&store->lock);
  return !taken;
}

/* Ends the run: drops the reservation and, when it succeeded, lists SB. */
static void
finish_run (struct sandbox_store *store, const struct sandbox *reserved_for, struct sandbox *sb)
{
  cleanup_free char *key = reservation_key (reserved_for);
  size_t n;

  pthread_mutex_lock (&store->lock);
  n = husk_strv_len (store->reserved);
  for (size_t i = 0; i < n; i++)
    if (strcmp (store->reserved[i], key) == 0)
      {
        free (store->reserved[i]);
        store->reserved[i] = store->reserved[n - 1];
        store->reserved[n - 1] = NULL;
        break;
      }
  if (sb)
    {
      store->items = xrealloc (store->items, (store->n + 1) * sizeof *store->items);
      store->items[store->n++] = sb;
    }
  pthread_mutex_unlock (&store->lock);
}

/* A run that failed: undone, or, when its CNI DEL fails too, kept NOTREADY
 * and listed, as *ERR then says.  Returns SB when it is to be freed. */
static struct sandbox *
undo_run (struct sandbox_store *store, struct sandbox *sb, bool network_added, struct husk_error **err)
{
  struct husk_error *undo_err = NULL;
  cleanup_free char *msg = NULL;
  int errnum;

  if (teardown (store, sb, network_added, &undo_err) == 0)
    {
      finish_run (store, sb, NULL);
      return sb;
    }
  errnum = (*err)->errnum;
  msg = xstrdup ((*err)->msg);
  husk_error_make (err, 0,
                   "%s; undoing it failed too (%s): pod sandbox %s stays NOTREADY for RemovePodSandbox", msg,
                   undo_err->msg, sb->id);
  (*err)->errnum = errnum;
  husk_error_free (&undo_err);
  keep_failed (store, sb, false);
  finish_run (store, sb, sb);
  return NULL;
}

int
sandbox_run (struct sandbox_store *store, const Runtime__V1__PodSandboxConfig *config,
             const char *runtime_handler, char **id, struct husk_error **err)
{
  const Runtime__V1__NamespaceOption *ns;
  struct sandbox_sysctl *sysctls = NULL;
  size_t n_sysctls = 0;
  bool network_added = false, limited;
  cleanup_free char *pause_profile = NULL;
  struct cri_userns userns;
  struct cni_bandwidth bandwidth;
  struct sandbox *sb;
  int ret;

  if (validate (config, err) < 0 || sandbox_userns (config, &userns, err) < 0
      || check_userns_modes (config, &userns, err) < 0
      || sandbox_bandwidth (config, &bandwidth, &limited, err) < 0
      || sandbox_cgroup_check (config->linux ? config->linux->cgroup_parent : NULL, store->systemd_cgroup,
                               err)
             < 0
      || pause_apparmor (store, config, &pause_profile, err) < 0)
    return -1;
  ns = namespace_options (config);
  if (sandbox_sysctls (config, ns->network != RUNTIME__V1__NAMESPACE_MODE__NODE,
                       ns->ipc != RUNTIME__V1__NAMESPACE_MODE__NODE, &sysctls, &n_sysctls, err)
      < 0)
    return -1;
  sb = new_record (store, config, runtime_handler);
  if (!reserve (store, sb))
    {
      ret = husk_error_kind (err, EEXIST, "pod sandbox %s/%s (attempt %u) already exists", sb->namespace_,
                             sb->name, sb->attempt);
    }
  else if ((ret = create (store, sb, &userns, sysctls, n_sysctls, pause_profile, &network_added, err)) < 0)
    sb = undo_run (store, sb, network_added, err);
  else
    {
      *id = xstrdup (sb->id);
      finish_run (store, sb, sb);
      sb = NULL;
    }
  sandbox_free (sb);
  sandbox_sysctls_free (sysctls, n_sysctls);
  return ret;
}

/* ---------------------------------------------------------------- recovery */

/* What a crash left of one pod: its network (DEL runs from the cached
 * ADD result, and is harmless when ADD never ran), whatever runs in its
 * network namespace, pins and directories.  A pod whose DEL fails stays
 * listed, NOTREADY.  Takes SB. */
static void
roll_back (struct sandbox_store *store, struct sandbox *sb)
{
  int killed = sb->netns_path ? sandbox_ns_kill_members (sb->netns_path) : 0;
  cleanup_free char *why = sb->damaged
                               ? xasprintf ("its record is damaged (%s) and nothing of it runs", sb->damaged)
                               : xstrdup ("RunPodSandbox did not finish");
  struct husk_error *err = NULL;

  if (teardown (store, sb, sb->netns_path != NULL || sb->damaged != NULL, &err) < 0)
    {
      husk_warn (
          "pod sandbox %s: %s: rolling it back failed (%s): listed NOTREADY for RemovePodSandbox to retry",
          sb->id, why, err->msg);
      husk_error_free (&err);
      keep_failed (store, sb, true);
      return;
    }
  husk_warn ("pod sandbox %s: %s: rolled back (CNI DEL, %d process(es) killed, pins and files removed)",
             sb->id, why, killed);
  sandbox_free (sb);
}

static struct sandbox *
unreadable_record (struct sandbox_store *store, const char *id)
{
  struct sandbox *sb = xcalloc (1, sizeof *sb);
  const char *names[] = { "net", "ipc", "uts", "user" };
  char **paths[] = { &sb->netns_path, &sb->ipcns_path, &sb->utsns_path, &sb->userns_path };

  sb->id = xstrdup (id);
  sb->name = xstrdup ("");
  sb->namespace_ = xstrdup ("");
  sb->uid = xstrdup ("");
  sb->ips = xcalloc (1, sizeof *sb->ips);
  sandbox_set_paths (store, sb);
  for (size_t i = 0; i < 4; i++)
    {
      cleanup_free char *pin = xasprintf ("%s/%s", sb->state_dir, names[i]);
      if (access (pin, F_OK) == 0)
        *paths[i] = steal_pointer (&pin);
    }
  return sb;
}

/* Pins whose ROOT record is gone altogether: removed when their
 * namespaces are gone; a pod that may be running (ROOT not mounted yet)
 * is not torn down on a guess.  Appends the ids left alone to *KEPT. */
static void
recover_lost_pins (struct sandbox_store *store, const char *id, char ***kept)
{
  struct sandbox *sb = unreadable_record (store, id);
  const char *pins[] = { sb->netns_path, sb->ipcns_path, sb->utsns_path, sb->userns_path };
  struct husk_error *err = NULL;
  bool live = false;

  for (size_t p = 0; p < 4; p++)
    live = live || sandbox_ns_pinned (pins[p]);
  if (live)
    {
      husk_warn ("pod sandbox %s: no record under %s but its namespaces are pinned: left alone", sb->id,
                 store->sandboxes_dir);
      *kept = husk_strv_append (*kept, id);
    }
  /* CNI DEL from the cache frees what the plugins hold (a lease, portmap
   * and masquerade rules) without a namespace. */
  else if (teardown (store, sb, true, &err) < 0)
    {
      husk_warn ("pod sandbox %s: no record and no namespaces, but its CNI DEL failed (%s): its pins dir and "
                 "CNI cache entry stay until the next start",
                 sb->id, err->msg);
      husk_error_free (&err);
      *kept = husk_strv_append (*kept, id);
    }
  else
    husk_warn ("pod sandbox %s: no record and no namespaces: CNI DEL, files removed", sb->id);
  sandbox_free (sb);
}

static bool
owned (struct sandbox_store *store, char *const *kept, const char *id)
{
  for (size_t i = 0; i < store->n; i++)
    if (strcmp (store->items[i]->id, id) == 0)
      return true;
  for (size_t i = 0; kept[i]; i++)
    if (strcmp (kept[i], id) == 0)
      return true;
  return false;
}

/* CNI cache entries no pod owns (a record removed while its DEL failed,
 * by an older huskd or by hand): their DEL runs now, from the cache, and
 * each goes once it worked. */
static void
sweep_cni_cache (struct sandbox_store *store, char *const *kept)
{
  struct cni_ctx ctx = cni_ctx_of (store);
  cleanup_strv char **ids = NULL;
  struct husk_error *err = NULL;

  if (cni_cached_ids (&ctx, &ids, &err) < 0)
    {
      husk_warn ("%s", err->msg);
      husk_error_free (&err);
      return;
    }
  for (size_t i = 0; ids[i]; i++)
    {
      struct cni_pod pod = { .container_id = ids[i] };

      if (owned (store, kept, ids[i]))
        continue;
      if (cni_del (&ctx, NULL, &pod, &err) < 0)
        {
          husk_warn ("CNI cache of %s, which no pod sandbox owns: DEL failed (%s): kept for the next start",
                     ids[i], err->msg);
          husk_error_free (&err);
        }
      else
        husk_warn ("CNI cache of %s, which no pod sandbox owns: DEL done, entry removed", ids[i]);
    }
}

void
sandbox_store_recover (struct sandbox_store *store)
{
  cleanup_strv char **kept = xcalloc (1, sizeof *kept);

  for (size_t i = 0; i < store->n_unfinished; i++)
    roll_back (store, store->unfinished[i]);
  store->n_unfinished = 0;
  for (size_t i = 0; store->unreadable[i]; i++)
    recover_lost_pins (store, store->unreadable[i], &kept);
  husk_strvfreep (&store->unreadable);
  store->unreadable = xcalloc (1, sizeof *store->unreadable);
  sweep_cni_cache (store, kept);
}

/* ---------------------------------------------------------------- stop, remove */

/* The record of ID (owned by the store), marked busy once no other stop
 * or remove runs on it; NULL with *ERR when unknown (or removed while
 * waiting). */
static struct sandbox *
acquire (struct sandbox_store *store, const char *id, struct husk_error **err)
{
  struct sandbox *sb = NULL;
  ssize_t i;

  pthread_mutex_lock (&store->lock);
  while ((i = sandbox_store_find (store, id, err)) >= 0 && store->items[i]->busy)
    pthread_cond_wait (&store->idle, &store->lock);
  if (i >= 0)
    {
      sb = store->items[i];
      sb->busy = true;
    }
  pthread_mutex_unlock (&store->lock);
  return sb;
}

/* Ends a stop or remove; REMOVED: take SB out of the store and free it. */
static void
release (struct sandbox_store *store, struct sandbox *sb, bool removed)
{
  pthread_mutex_lock (&store->lock);
  sb->busy = false;
  for (size_t i = 0; removed && i < store->n; i++)
    if (store->items[i] == sb)
      {
        store->items[i] = store->items[--store->n];
        break;
      }
  pthread_cond_broadcast (&store->idle);
  pthread_mutex_unlock (&store->lock);
  if (removed)
    sandbox_free (sb);
}

/* A damaged record may not know its pause process (one of an older huskd,
 * not named by id): what runs in the pod's netns goes. */
static void
kill_pod_processes (struct sandbox *sb)
{
  sandbox_pause_kill (sb->pause_pid, sb->pause_start_time);
  if (sb->damaged && sb->pause_pid <= 0 && sb->netns_path)
    sandbox_ns_kill_members (sb->netns_path);
}

static int
stop_locked (struct sandbox_store *store, struct sandbox *sb, struct husk_error **err)
{
  if (sb->network_down)
    return 0;
  /* A damaged record's CNI cache entry says where it was attached. */
  if ((sb->netns_path || sb->damaged) && network_del (store, sb, err) < 0)
    return -1;
  kill_pod_processes (sb);
  /* The pod's tmpfs pages go now, not when kubelet gets to removing it:
   * containers that still hold it keep their own mount of it. */
  if (sb->ipcns_path)
    sandbox_shm_unmount (sb->shm_path);
  pthread_mutex_lock (&store->lock);
  sb->state = SANDBOX_NOTREADY;
  sb->network_down = true;
  pthread_mutex_unlock (&store->lock);
  return sandbox_save (sb, false, err);
}

int
sandbox_stop (struct sandbox_store *store, const char *id, bool *was_ready, struct husk_error **err)
{
  struct sandbox *sb = acquire (store, id, err);
  int ret;

  *was_ready = false;
  if (sb == NULL)
    return -1;
  *was_ready = sb->state == SANDBOX_READY;
  ret = stop_locked (store, sb, err);
  release (store, sb, false);
  return ret;
}

int
sandbox_remove (struct sandbox_store *store, const char *id, struct husk_error **err)
{
  struct sandbox *sb = acquire (store, id, err);

  if (sb == NULL)
    return -1;
  if (stop_locked (store, sb, err) < 0)
    {
      release (store, sb, false);
      return -1;
    }
  teardown (store, sb, false, NULL);
  release (store, sb, true);
  return 0;
}
