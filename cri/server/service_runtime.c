/* Version, Status, RuntimeConfig and UpdateRuntimeConfig.  Status lists
 * the runtime handlers with their features and, verbose (crictl info),
 * the effective config, the CNI network and the CDI devices in the keys
 * containerd uses. */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include "cri/cdi/cdi.h"
#include "cri/cni/cni.h"
#include "cri/config/runtime_exec.h"
#include "cri/server/service.h"
#include "cri/config/runtime_probe.h"
#include "husk/cleanup.h"
#include "husk/idmap.h"
#include "husk/util.h"

#define CRI_API_VERSION "v1"

/* Verbose Status's info["cdi"]: the spec dirs, the devices they define
 * (with their file) and the files refused, as JSON (crictl info parses
 * each info value as JSON). */
static char *
cdi_info (struct cri_service *svc)
{
  json_t *dirs = json_array (), *devices = json_array (), *errors = json_array ();
  const struct cdi_device_info *infos;
  const struct cdi_spec_error *errs;
  size_t n_infos, n_errs;
  char *text;

  for (char **d = svc->cfg->cdi_spec_dirs; d && *d; d++)
    json_array_append_new (dirs, json_string (*d));
  pthread_mutex_lock (&svc->cdi_lock);
  infos = cdi_registry_list (svc->cdi, &n_infos);
  errs = cdi_registry_errors (svc->cdi, &n_errs);
  for (size_t i = 0; i < n_infos; i++)
    json_array_append_new (devices, json_pack ("{s:s, s:s}", "name", infos[i].name, "file", infos[i].file));
  for (size_t i = 0; i < n_errs; i++)
    json_array_append_new (errors, json_pack ("{s:s, s:s}", "file", errs[i].file, "msg", errs[i].msg));
  pthread_mutex_unlock (&svc->cdi_lock);
  json_t *doc = json_pack ("{s:o, s:o, s:o}", "specDirs", dirs, "devices", devices, "errors", errors);
  text = json_dumps (doc, JSON_COMPACT);
  json_decref (doc);
  return text;
}

void
cri_version (struct rpc_call *call, const void *req, size_t len, void *user)
{
  Runtime__V1__VersionRequest *request
      = cri_unpack (call, &runtime__v1__version_request__descriptor, req, len);
  Runtime__V1__VersionResponse reply = RUNTIME__V1__VERSION_RESPONSE__INIT;

  if (request == NULL)
    return;
  reply.version = "0.1.0";
  reply.runtime_name = "husk";
  reply.runtime_version = HUSK_VERSION;
  reply.runtime_api_version = CRI_API_VERSION;
  cri_reply (call, &reply.base);
  protobuf_c_message_free_unpacked (&request->base, NULL);
}

/* ------------------------------------------------------------------ */
/* runtime handlers and their features                                  */

/* What `RUNTIME features` (the OCI runtime features document) says, asked
 * once per binary: "rro" among its mount options is what kubelet calls
 * recursive_read_only_mounts; the user namespace among its namespaces and
 * idmapped mounts (mountExtensions.idmap) are what a user-namespaced pod
 * needs of it.  A runtime without the verb (runc before 1.1, crun 1.8)
 * supports none of it. */
struct handler_features
{
  char *path;
  bool rro;
  bool userns;
};

static pthread_mutex_t features_lock = PTHREAD_MUTEX_INITIALIZER;
static struct handler_features *features_cache;
static size_t n_features_cache;

static bool
strings_have (json_t *array, const char *want)
{
  json_t *item;
  size_t i;

  json_array_foreach (array, i, item)
  {
    if (json_is_string (item) && strcmp (json_string_value (item), want) == 0)
      return true;
  }
  return false;
}

static struct handler_features
runtime_features (const char *path)
{
  char *argv[] = { (char *) path, "features", NULL };
  struct cri_child_run run = { .argv = argv, .timeout_ms = 5000, .output_max = 1 << 20 };
  struct husk_error *err = NULL;
  struct handler_features found = { .path = NULL };

  if (cri_child_run (&run, &err) < 0)
    husk_error_free (&err);
  else if (WIFEXITED (run.wait_status) && WEXITSTATUS (run.wait_status) == 0 && run.out[0].data)
    {
      json_t *doc = json_loads (run.out[0].data, 0, NULL);
      json_t *linux_section = json_object_get (doc, "linux");
      json_t *idmap = json_object_get (json_object_get (linux_section, "mountExtensions"), "idmap");

      found.rro = strings_have (json_object_get (doc, "mountOptions"), "rro");
      found.userns = strings_have (json_object_get (linux_section, "namespaces"), "user")
                     && json_is_true (json_object_get (idmap, "enabled"));
      json_decref (doc);
    }
  cri_child_run_clear (&run);
  return found;
}

static struct handler_features
handler_features_of (const struct huskd_runtime *rt)
{
  struct handler_features found;

  pthread_mutex_lock (&features_lock);
  for (size_t i = 0; i < n_features_cache; i++)
    if (strcmp (features_cache[i].path, rt->path) == 0)
      {
        found = features_cache[i];
        pthread_mutex_unlock (&features_lock);
        return found;
      }
  pthread_mutex_unlock (&features_lock);
  found = runtime_features (rt->path); /* not under the lock: it runs a program */
  found.path = xstrdup (rt->path);
  pthread_mutex_lock (&features_lock);
  features_cache = xrealloc (features_cache, (n_features_cache + 1) * sizeof *features_cache);
  features_cache[n_features_cache++] = found;
  pthread_mutex_unlock (&features_lock);
  return found;
}

/* What huskd itself needs for a user-namespaced pod, asked once: overlayfs
 * that takes idmapped lower layers (Linux 5.19) and idmapped mounts of the
 * filesystem under ROOT, where the image snapshots are. */
static pthread_mutex_t node_userns_lock = PTHREAD_MUTEX_INITIALIZER;
static int node_userns = -1; /* -1: not asked yet */

static bool
kernel_at_least (int want_major, int want_minor)
{
  struct utsname u;
  int major = 0, minor = 0;

  if (uname (&u) < 0 || sscanf (u.release, "%d.%d", &major, &minor) != 2)
    return false;
  return major > want_major || (major == want_major && minor >= want_minor);
}

static bool
node_supports_userns (const char *root)
{
  bool supported;

  pthread_mutex_lock (&node_userns_lock);
  if (node_userns < 0)
    node_userns = kernel_at_least (5, 19) && husk_idmap_supported (root);
  supported = node_userns == 1;
  pthread_mutex_unlock (&node_userns_lock);
  return supported;
}

/* One handler per configured runtime, and "" (the default one, what a pod
 * without a RuntimeClass gets) first, as kubelet lists them. */
struct handler_list
{
  Runtime__V1__RuntimeHandler *handlers;
  Runtime__V1__RuntimeHandlerFeatures *features;
  Runtime__V1__RuntimeHandler **ptrs;
  size_t n;
};

static void
handler_list_init (struct handler_list *list, const struct huskd_config *cfg)
{
  size_t n = cfg->n_runtimes + 1;

  list->handlers = xcalloc (n, sizeof *list->handlers);
  list->features = xcalloc (n, sizeof *list->features);
  list->ptrs = xcalloc (n, sizeof *list->ptrs);
  list->n = 0;
  for (size_t i = 0; i <= cfg->n_runtimes; i++)
    {
      const struct huskd_runtime *rt = i == 0 ? huskd_config_runtime (cfg, NULL) : &cfg->runtimes[i - 1];
      Runtime__V1__RuntimeHandler *h = &list->handlers[list->n];

      if (rt == NULL)
        continue;
      runtime__v1__runtime_handler__init (h);
      runtime__v1__runtime_handler_features__init (&list->features[list->n]);
      h->name = i == 0 ? "" : rt->name;
      struct handler_features found = handler_features_of (rt);

      list->features[list->n].recursive_read_only_mounts = found.rro;
      list->features[list->n].user_namespaces = found.userns && node_supports_userns (cfg->root);
      h->features = &list->features[list->n];
      list->ptrs[list->n++] = h;
    }
}

static void
handler_list_clear (struct handler_list *list)
{
  free (list->handlers);
  free (list->features);
  free (list->ptrs);
}

/* ------------------------------------------------------------------ */
/* verbose Status: the effective config and the CNI state                */

static json_t *
dirs_json (const char *colon_list)
{
  json_t *list = json_array ();
  cleanup_free char *copy = xstrdup (colon_list ? colon_list : "");
  char *save = NULL;

  for (char *dir = strtok_r (copy, ":", &save); dir; dir = strtok_r (NULL, ":", &save))
    json_array_append_new (list, json_string (dir));
  return list;
}

/* The network huskd would use now, in the layout of containerd's
 * "cniconfig" (go-cni's ConfigResult), and "OK" or why none is usable
 * (containerd's "lastCNILoadStatus"). */
static json_t *
cni_info (const struct huskd_config *cfg, char **load_status)
{
  json_t *doc = json_pack ("{s:o, s:s, s:i, s:s}", "PluginDirs", dirs_json (cfg->cni_bin_dirs),
                           "PluginConfDir", cfg->cni_conf_dir, "PluginMaxConfNum", 1, "Prefix", "eth");
  json_t *networks = json_array ();
  struct cni_network *net = NULL;
  struct husk_error *err = NULL;

  if (cni_config_load_dir (cfg->cni_conf_dir, &net, &err) == 0)
    {
      json_t *plugins = json_array (), *skipped = json_array ();

      for (size_t i = 0; i < net->n_plugins; i++)
        {
          char *source = json_dumps (net->plugins[i].conf, JSON_COMPACT);
          json_array_append_new (plugins, json_pack ("{s:{s:s}, s:s}", "Network", "type",
                                                     net->plugins[i].type, "Source", source));
          free (source);
        }
      for (char **s = net->skipped; s && *s; s++)
        json_array_append_new (skipped, json_string (*s));
      char *source = json_dumps (net->conflist, JSON_COMPACT);
      json_array_append_new (networks, json_pack ("{s:{s:s, s:s, s:o, s:s, s:s?, s:o}, s:s}", "Config",
                                                  "Name", net->name, "CNIVersion", net->cni_version,
                                                  "Plugins", plugins, "Source", source, "File", net->path,
                                                  "Skipped", skipped, "IFName", CNI_DEFAULT_IFNAME));
      free (source);
      if (cni_network_check_plugins (net, cfg->cni_bin_dirs, &err) == 0)
        *load_status = xstrdup ("OK");
    }
  if (err)
    *load_status = xasprintf ("cni config load failed: %s", err->msg);
  json_object_set_new (doc, "Networks", networks);
  husk_error_free (&err);
  cni_network_free (net);
  return doc;
}

/* crictl info prints each info value parsed as JSON under its key. */
struct status_info
{
  Runtime__V1__StatusResponse__InfoEntry entries[6];
  Runtime__V1__StatusResponse__InfoEntry *ptrs[6];
  char *values[6];
  size_t n;
};

static void
status_info_add (struct status_info *info, const char *key, char *json_text)
{
  Runtime__V1__StatusResponse__InfoEntry *e = &info->entries[info->n];

  runtime__v1__status_response__info_entry__init (e);
  e->key = (char *) key;
  e->value = json_text;
  info->values[info->n] = json_text;
  info->ptrs[info->n++] = e;
}

/* What huskd's start-up probe found of each handler (runtime_probe.h):
 * {"crun": {"path": ..., "usable": false, "reason": "..."}}; "probing"
 * while it runs. */
static char *
handler_probes_info (const struct huskd_config *cfg)
{
  json_t *doc = cri_runtime_probe_done () ? json_object () : json_string ("probing");
  char *text;

  for (size_t i = 0; json_is_object (doc) && i < cfg->n_runtimes; i++)
    {
      const struct huskd_runtime *rt = &cfg->runtimes[i];
      json_t *entry = json_pack ("{s:s, s:b}", "path", rt->path, "usable", rt->unusable == NULL);

      if (rt->unusable)
        json_object_set_new (entry, "reason", json_string (rt->unusable));
      json_object_set_new (doc, rt->name, entry);
    }
  text = json_dumps (doc, JSON_COMPACT | JSON_ENCODE_ANY);
  json_decref (doc);
  return text;
}

static void
status_info_fill (struct status_info *info, struct cri_service *svc)
{
  json_t *config = huskd_config_to_json (svc->cfg), *cni;
  char *load_status = NULL;

  info->n = 0;
  cni = cni_info (svc->cfg, &load_status);
  status_info_add (info, "config", json_dumps (config, JSON_COMPACT));
  status_info_add (info, "cniconfig", json_dumps (cni, JSON_COMPACT));
  {
    json_t *s = json_string (load_status);
    status_info_add (info, "lastCNILoadStatus", json_dumps (s, JSON_ENCODE_ANY));
    status_info_add (info, "lastCNILoadStatus.default", json_dumps (s, JSON_ENCODE_ANY));
    json_decref (s);
  }
  status_info_add (info, "cdi", cdi_info (svc));
  status_info_add (info, "runtimeHandlerProbes", handler_probes_info (svc->cfg));
  free (load_status);
  json_decref (config);
  json_decref (cni);
}

static void
status_info_clear (struct status_info *info)
{
  for (size_t i = 0; i < info->n; i++)
    free (info->values[i]);
}

void
cri_status (struct rpc_call *call, const void *req, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__StatusRequest *request = cri_unpack (call, &runtime__v1__status_request__descriptor, req, len);
  Runtime__V1__RuntimeCondition runtime_ready = RUNTIME__V1__RUNTIME_CONDITION__INIT;
  Runtime__V1__RuntimeCondition network_ready = RUNTIME__V1__RUNTIME_CONDITION__INIT;
  Runtime__V1__RuntimeCondition *conditions[] = { &runtime_ready, &network_ready };
  Runtime__V1__RuntimeStatus status = RUNTIME__V1__RUNTIME_STATUS__INIT;
  Runtime__V1__StatusResponse reply = RUNTIME__V1__STATUS_RESPONSE__INIT;
  Runtime__V1__RuntimeFeatures features = RUNTIME__V1__RUNTIME_FEATURES__INIT;
  struct handler_list handlers;
  struct status_info info = { .n = 0 };
  struct husk_error *net_err = NULL;

  if (request == NULL)
    return;
  runtime_ready.type = "RuntimeReady";
  runtime_ready.status = 1;
  network_ready.type = "NetworkReady";
  /* Ready only with a usable CNI config whose plugins are installed. */
  network_ready.status = cni_network_ready (svc->cfg->cni_conf_dir, svc->cfg->cni_bin_dirs, &net_err) == 0;
  if (!network_ready.status)
    {
      network_ready.reason = "NetworkPluginNotReady";
      network_ready.message = net_err ? net_err->msg : "no CNI network config";
    }
  status.n_conditions = 2;
  status.conditions = conditions;
  reply.status = &status;
  handler_list_init (&handlers, svc->cfg);
  reply.n_runtime_handlers = handlers.n;
  reply.runtime_handlers = handlers.ptrs;
  reply.features = &features;
  if (request->verbose)
    {
      status_info_fill (&info, svc);
      reply.n_info = info.n;
      reply.info = info.ptrs;
    }
  cri_reply (call, &reply.base);
  status_info_clear (&info);
  handler_list_clear (&handlers);
  husk_error_free (&net_err);
  protobuf_c_message_free_unpacked (&request->base, NULL);
}

void
cri_runtime_config (struct rpc_call *call, const void *req, size_t len, void *user)
{
  Runtime__V1__RuntimeConfigRequest *request
      = cri_unpack (call, &runtime__v1__runtime_config_request__descriptor, req, len);
  Runtime__V1__LinuxRuntimeConfiguration linux_cfg = RUNTIME__V1__LINUX_RUNTIME_CONFIGURATION__INIT;
  Runtime__V1__RuntimeConfigResponse reply = RUNTIME__V1__RUNTIME_CONFIG_RESPONSE__INIT;

  if (request == NULL)
    return;
  /* The form of cgroup parent RunPodSandbox takes (husk maps the systemd
   * form to cgroupfs itself). */
  linux_cfg.cgroup_driver = huskd_config_systemd_cgroup (((struct cri_service *) user)->cfg)
                                ? RUNTIME__V1__CGROUP_DRIVER__SYSTEMD
                                : RUNTIME__V1__CGROUP_DRIVER__CGROUPFS;
  reply.linux = &linux_cfg;
  cri_reply (call, &reply.base);
  protobuf_c_message_free_unpacked (&request->base, NULL);
}

void
cri_update_runtime_config (struct rpc_call *call, const void *req, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__UpdateRuntimeConfigRequest *request
      = cri_unpack (call, &runtime__v1__update_runtime_config_request__descriptor, req, len);
  Runtime__V1__UpdateRuntimeConfigResponse reply = RUNTIME__V1__UPDATE_RUNTIME_CONFIG_RESPONSE__INIT;

  if (request == NULL)
    return;
  if (request->runtime_config && request->runtime_config->network_config)
    {
      pthread_mutex_lock (&svc->lock);
      free (svc->pod_cidr);
      svc->pod_cidr = xstrdup (request->runtime_config->network_config->pod_cidr);
      pthread_mutex_unlock (&svc->lock);
    }
  cri_reply (call, &reply.base);
  protobuf_c_message_free_unpacked (&request->base, NULL);
}
