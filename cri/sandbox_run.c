/* A pod sandbox's lifecycle: RunPodSandbox's steps (each with its undo),
 * StopPodSandbox and RemovePodSandbox.  The record is written NOTREADY
 * before the first namespace exists, so a crash mid-way leaves a record
 * that Stop and Remove clean up, never an unlisted leak. */
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
      husk_error_wrap (err, "no CNI network config in %s", conf_dir);
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

/* Undoes whatever of RUN exists; each step is safe on what was never done. */
static void
teardown (struct sandbox_store *store, struct sandbox *sb, bool network_added)
{
  struct husk_error *err = NULL;
  const char *pins[] = { sb->netns_path, sb->ipcns_path, sb->utsns_path };
  cleanup_free char *shm = NULL;

  if (network_added && network_del (store, sb, &err) < 0)
    {
      husk_warn ("%s", err->msg);
      husk_error_free (&err);
    }
  sandbox_pause_kill (sb->pause_pid, sb->pause_start_time);
  for (size_t i = 0; i < 3; i++)
    if (pins[i])
      sandbox_ns_unpin (pins[i]);
  /* Whatever the record says: the tmpfs must not be emptied by rm_rf. */
  shm = xasprintf ("%s/shm", sb->state_dir);
  sandbox_shm_unmount (shm);
  if (husk_rm_rf (sb->state_dir, &err) < 0 || husk_rm_rf (sb->dir, &err) < 0)
    {
      husk_warn ("%s", err->msg);
      husk_error_free (&err);
    }
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
static int
create (struct sandbox_store *store, struct sandbox *sb, const struct sandbox_sysctl *sysctls,
        size_t n_sysctls, bool *network_added, struct husk_error **err)
{
  struct sandbox_ns_setup setup = { .net_pin = sb->netns_path,
                                    .ipc_pin = sb->ipcns_path,
                                    .uts_pin = sb->utsns_path,
                                    .hostname = NULL,
                                    .sysctls = sysctls,
                                    .n_sysctls = n_sysctls };
  char host_name[HOST_NAME_MAX + 1];

  if (hostname_of (sb, host_name, sizeof host_name, err) < 0)
    return -1;
  if (sb->utsns_path)
    setup.hostname = host_name;
  if (husk_mkdir_p (sb->dir, 0700, err) < 0 || husk_mkdir_p (sb->state_dir, 0700, err) < 0
      || sandbox_save (sb, true, err) < 0)
    return -1;
  if ((setup.net_pin || setup.ipc_pin) && sandbox_ns_pin (&setup, err) < 0)
    return -1;
  if (sb->ipcns_path && sandbox_shm_mount (sb->shm_path, err) < 0)
    return -1;
  if (namespace_options (sb->config)->pid == RUNTIME__V1__NAMESPACE_MODE__POD)
    {
      if (sandbox_pause_start (sb->netns_path, sb->ipcns_path, sb->utsns_path, &sb->pause_pid,
                               &sb->pause_start_time, err)
          < 0)
        return -1;
      sb->pidns_path = xasprintf ("/proc/%d/ns/pid", sb->pause_pid);
      /* A restart from here on must find the pause process to kill it. */
      if (sandbox_save (sb, false, err) < 0)
        return -1;
    }
  if (sb->netns_path)
    {
      if (network_add (store, sb, err) < 0)
        return -1;
      *network_added = true;
    }
  if (sandbox_write_files (sb, host_name, err) < 0)
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

int
sandbox_run (struct sandbox_store *store, const Runtime__V1__PodSandboxConfig *config,
             const char *runtime_handler, char **id, struct husk_error **err)
{
  const Runtime__V1__NamespaceOption *ns;
  struct sandbox_sysctl *sysctls = NULL;
  size_t n_sysctls = 0;
  bool network_added = false, limited;
  struct cni_bandwidth bandwidth;
  struct sandbox *sb;
  int ret;

  if (validate (config, err) < 0 || sandbox_bandwidth (config, &bandwidth, &limited, err) < 0)
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
  else if ((ret = create (store, sb, sysctls, n_sysctls, &network_added, err)) < 0)
    {
      teardown (store, sb, network_added);
      finish_run (store, sb, NULL);
    }
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
 * network namespace, pins and directories. */
static void
roll_back (struct sandbox_store *store, struct sandbox *sb, const char *why)
{
  int killed = sb->netns_path ? sandbox_ns_kill_members (sb->netns_path) : 0;

  husk_warn ("pod sandbox %s: %s: rolled back (CNI DEL, %d process(es) killed, pins and files removed)",
             sb->id, why, killed);
  teardown (store, sb, sb->netns_path != NULL);
}

static struct sandbox *
unreadable_record (struct sandbox_store *store, const char *id)
{
  struct sandbox *sb = xcalloc (1, sizeof *sb);
  const char *names[] = { "net", "ipc", "uts" };
  char **paths[] = { &sb->netns_path, &sb->ipcns_path, &sb->utsns_path };

  sb->id = xstrdup (id);
  sb->name = xstrdup ("");
  sb->namespace_ = xstrdup ("");
  sb->uid = xstrdup ("");
  sb->ips = xcalloc (1, sizeof *sb->ips);
  sandbox_set_paths (store, sb);
  for (size_t i = 0; i < 3; i++)
    {
      cleanup_free char *pin = xasprintf ("%s/%s", sb->state_dir, names[i]);
      if (access (pin, F_OK) == 0)
        *paths[i] = steal_pointer (&pin);
    }
  return sb;
}

void
sandbox_store_recover (struct sandbox_store *store)
{
  for (size_t i = 0; i < store->n_unfinished; i++)
    {
      roll_back (store, store->unfinished[i], "RunPodSandbox did not finish");
      sandbox_free (store->unfinished[i]);
    }
  store->n_unfinished = 0;
  for (size_t i = 0; store->unreadable[i]; i++)
    {
      struct sandbox *sb = unreadable_record (store, store->unreadable[i]);
      const char *pins[] = { sb->netns_path, sb->ipcns_path, sb->utsns_path };
      bool live = false;

      for (size_t p = 0; p < 3; p++)
        live = live || sandbox_ns_pinned (pins[p]);
      /* A pod that may be running (ROOT not mounted yet, a record this
       * version cannot read) is not torn down on a guess. */
      if (live)
        husk_warn ("pod sandbox %s: no readable record under %s but its namespaces are pinned: left alone",
                   sb->id, store->sandboxes_dir);
      else
        {
          /* CNI DEL from the cache frees what the plugins hold (a lease,
           * portmap rules) without a namespace. */
          husk_warn ("pod sandbox %s: no readable record and no namespaces: CNI DEL, files removed", sb->id);
          teardown (store, sb, true);
        }
      sandbox_free (sb);
    }
  husk_strvfreep (&store->unreadable);
  store->unreadable = xcalloc (1, sizeof *store->unreadable);
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

static int
stop_locked (struct sandbox_store *store, struct sandbox *sb, struct husk_error **err)
{
  if (sb->network_down)
    return 0;
  if (sb->netns_path && network_del (store, sb, err) < 0)
    return -1;
  sandbox_pause_kill (sb->pause_pid, sb->pause_start_time);
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
  teardown (store, sb, false);
  release (store, sb, true);
  return 0;
}
