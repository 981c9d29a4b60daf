/* Version, Status, RuntimeConfig and UpdateRuntimeConfig. */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cri/cdi/cdi.h"
#include "cri/cni/cni.h"
#include "cri/service.h"
#include "husk/cleanup.h"
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
  Runtime__V1__RuntimeHandlerFeatures husk_features = RUNTIME__V1__RUNTIME_HANDLER_FEATURES__INIT;
  Runtime__V1__RuntimeHandlerFeatures peer_features = RUNTIME__V1__RUNTIME_HANDLER_FEATURES__INIT;
  Runtime__V1__RuntimeFeatures features = RUNTIME__V1__RUNTIME_FEATURES__INIT;
  cleanup_free Runtime__V1__RuntimeHandler *handlers = NULL;
  cleanup_free Runtime__V1__RuntimeHandler **handler_ptrs = NULL;
  struct husk_error *net_err = NULL;
  size_t n = svc->cfg->n_runtimes;
  Runtime__V1__StatusResponse__InfoEntry cdi_entry = RUNTIME__V1__STATUS_RESPONSE__INFO_ENTRY__INIT;
  Runtime__V1__StatusResponse__InfoEntry *info[] = { &cdi_entry };
  cleanup_free char *cdi_json = NULL;

  if (request == NULL)
    return;
  husk_features.recursive_read_only_mounts = 1; /* mount_setattr(AT_RECURSIVE) */
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
  handlers = xcalloc (n + 1, sizeof *handlers);
  handler_ptrs = xcalloc (n + 1, sizeof *handler_ptrs);
  for (size_t i = 0; i < n; i++)
    {
      runtime__v1__runtime_handler__init (&handlers[i]);
      handlers[i].name = svc->cfg->runtimes[i].name;
      handlers[i].features = strcmp (handlers[i].name, "husk") == 0 ? &husk_features : &peer_features;
      handler_ptrs[i] = &handlers[i];
    }
  reply.n_runtime_handlers = n;
  reply.runtime_handlers = handler_ptrs;
  reply.features = &features;
  if (request->verbose)
    {
      cdi_json = cdi_info (svc);
      cdi_entry.key = "cdi";
      cdi_entry.value = cdi_json;
      reply.n_info = 1;
      reply.info = info;
    }
  cri_reply (call, &reply.base);
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
