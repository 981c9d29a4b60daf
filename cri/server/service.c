/* The method table of huskd and what its handlers share. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cri/cdi/cdi.h"
#include "cri/container/container_store.h"
#include "cri/stats/layer_usage.h"
#include "cri/pod/sandbox.h"
#include "cri/server/service.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/images.h"

#define RUNTIME_SVC "/runtime.v1.RuntimeService/"
/* How often the list stats RPCs' cgroups are sampled off their path: a
 * list reports samples at most two periods old (cAdvisor's housekeeping
 * is 10 s), and 250 pods cost the sampler about 10 ms of CPU a period. */
#define STATS_SAMPLER_PERIOD_MS 2000
#define IMAGE_SVC "/runtime.v1.ImageService/"

#define M(service, name, fn, flags)                                                                          \
  {                                                                                                          \
    service #name, fn, NULL, flags                                                                           \
  }

static const struct rpc_method method_table[] = {
  M (RUNTIME_SVC, Version, cri_version, 0),
  M (RUNTIME_SVC, Status, cri_status, 0),
  M (RUNTIME_SVC, RuntimeConfig, cri_runtime_config, 0),
  M (RUNTIME_SVC, UpdateRuntimeConfig, cri_update_runtime_config, 0),
  M (RUNTIME_SVC, RunPodSandbox, cri_run_pod_sandbox, RPC_SLOW),
  M (RUNTIME_SVC, StopPodSandbox, cri_stop_pod_sandbox, RPC_SLOW),
  M (RUNTIME_SVC, RemovePodSandbox, cri_remove_pod_sandbox, RPC_SLOW),
  M (RUNTIME_SVC, PodSandboxStatus, cri_pod_sandbox_status, 0),
  M (RUNTIME_SVC, ListPodSandbox, cri_list_pod_sandbox, 0),
  M (RUNTIME_SVC, StreamPodSandboxes, cri_list_pod_sandbox, RPC_SERVER_STREAMING | RPC_BATCHED_STREAM),
  M (RUNTIME_SVC, CreateContainer, cri_create_container, RPC_SLOW),
  M (RUNTIME_SVC, StartContainer, cri_start_container, RPC_SLOW),
  M (RUNTIME_SVC, StopContainer, cri_stop_container, RPC_SLOW),
  M (RUNTIME_SVC, RemoveContainer, cri_remove_container, RPC_SLOW),
  M (RUNTIME_SVC, ListContainers, cri_list_containers, 0),
  M (RUNTIME_SVC, StreamContainers, cri_list_containers, RPC_SERVER_STREAMING | RPC_BATCHED_STREAM),
  M (RUNTIME_SVC, ContainerStatus, cri_container_status, 0),
  M (RUNTIME_SVC, UpdateContainerResources, cri_update_container_resources, RPC_SLOW),
  M (RUNTIME_SVC, ReopenContainerLog, cri_reopen_container_log, 0),
  M (RUNTIME_SVC, ExecSync, cri_exec_sync, RPC_SLOW | RPC_PROBE),
  M (RUNTIME_SVC, Exec, cri_exec, 0),
  M (RUNTIME_SVC, Attach, cri_attach, 0),
  M (RUNTIME_SVC, PortForward, cri_port_forward, 0),
  M (RUNTIME_SVC, ContainerStats, cri_container_stats, RPC_SLOW),
  M (RUNTIME_SVC, ListContainerStats, cri_list_container_stats, RPC_SLOW),
  M (RUNTIME_SVC, StreamContainerStats, cri_list_container_stats,
     RPC_SLOW | RPC_SERVER_STREAMING | RPC_BATCHED_STREAM),
  M (RUNTIME_SVC, PodSandboxStats, cri_pod_sandbox_stats, RPC_SLOW),
  M (RUNTIME_SVC, ListPodSandboxStats, cri_list_pod_sandbox_stats, RPC_SLOW),
  M (RUNTIME_SVC, StreamPodSandboxStats, cri_list_pod_sandbox_stats,
     RPC_SLOW | RPC_SERVER_STREAMING | RPC_BATCHED_STREAM),
  M (RUNTIME_SVC, CheckpointContainer, cri_checkpoint_container, RPC_SLOW),
  M (RUNTIME_SVC, GetContainerEvents, cri_get_container_events, RPC_SERVER_STREAMING),
  M (RUNTIME_SVC, ListMetricDescriptors, cri_list_metric_descriptors, 0),
  M (RUNTIME_SVC, ListPodSandboxMetrics, cri_list_pod_sandbox_metrics, RPC_SLOW),
  M (RUNTIME_SVC, StreamPodSandboxMetrics, cri_list_pod_sandbox_metrics,
     RPC_SLOW | RPC_SERVER_STREAMING | RPC_BATCHED_STREAM),
  M (RUNTIME_SVC, UpdatePodSandboxResources, cri_update_pod_sandbox_resources, 0),
  M (IMAGE_SVC, ListImages, cri_list_images, 0),
  M (IMAGE_SVC, StreamImages, cri_list_images, RPC_SERVER_STREAMING | RPC_BATCHED_STREAM),
  M (IMAGE_SVC, ImageStatus, cri_image_status, 0),
  M (IMAGE_SVC, PullImage, cri_pull_image, RPC_SLOW | RPC_BULK),
  M (IMAGE_SVC, RemoveImage, cri_remove_image, RPC_SLOW),
  M (IMAGE_SVC, ImageFsInfo, cri_image_fs_info, RPC_SLOW),
};
#define N_METHODS (sizeof method_table / sizeof method_table[0])

const struct rpc_method *
cri_service_methods (struct cri_service *svc, size_t *n)
{
  struct rpc_method *methods = xcalloc (N_METHODS, sizeof *methods);

  memcpy (methods, method_table, sizeof method_table);
  for (size_t i = 0; i < N_METHODS; i++)
    methods[i].user = svc;
  cri_metrics_wrap (svc, methods, N_METHODS);
  *n = N_METHODS;
  return methods;
}

/* What a huskd killed during a pull left (ingest files, blobs and
 * snapshots no image references), and a GC a failed pull had to defer.
 * Deferred in turn while `husk image pull` works on the same root. */
static void
collect_image_garbage (struct store *store)
{
  struct husk_error *gc_err = NULL;
  struct images_gc_stats stats;

  if (images_gc (store, &stats, &gc_err) < 0)
    {
      husk_warn ("%s", gc_err->msg);
      husk_error_free (&gc_err);
    }
  else if (stats.blobs_removed || stats.snapshots_removed)
    husk_warn ("image GC at start: removed %u blobs and %u snapshots no image references",
               stats.blobs_removed, stats.snapshots_removed);
}

/* The writable layers of the containers found at the start are walked by
 * the usage thread now, not by the first stats RPC to ask. */
static void
prime_layer_usage (struct cri_service *svc)
{
  struct cri_container **list = NULL;
  struct husk_error *err = NULL;
  char **dirs = NULL;
  size_t n = 0;

  if (container_list (svc->containers, &list, &n, &err) < 0)
    {
      husk_warn ("writable layers' usage: %s", err->msg);
      husk_error_free (&err);
      return;
    }
  dirs = xcalloc (n + 1, sizeof *dirs);
  for (size_t i = 0; i < n; i++)
    {
      cleanup_free char *dir = container_store_dir (svc->containers, list[i]->id);
      dirs[i] = xasprintf ("%s/upper", dir);
    }
  layer_usage_prime (svc->layers, dirs, n);
  husk_strvfreep (&dirs);
  cri_containers_free (list, n);
}

/* What an operator looks for after a restart: how much huskd found. */
static void
log_recovered (struct cri_service *svc)
{
  struct cri_container **containers = NULL;
  struct sandbox **pods = NULL;
  struct husk_error *err = NULL;
  size_t n_pods = 0, n_containers = 0, n_running = 0;

  if (sandbox_list (svc->sandboxes, &pods, &n_pods, &err) < 0
      || container_list (svc->containers, &containers, &n_containers, &err) < 0)
    {
      husk_warn ("count what was recovered: %s", err->msg);
      husk_error_free (&err);
    }
  for (size_t i = 0; i < n_containers; i++)
    n_running += containers[i]->state == CRI_CONTAINER_RUNNING;
  husk_log (HUSK_LOG_INFO, "recovered %zu pods, %zu containers (%zu running)", n_pods, n_containers,
            n_running);
  sandboxes_free (pods, n_pods);
  cri_containers_free (containers, n_containers);
}

static int
service_start (struct cri_service *svc, const struct huskd_config *cfg, struct husk_error **err)
{
  svc->cdi = cdi_registry_new ((const char *const *) cfg->cdi_spec_dirs);
  cri_apparmor_init (&svc->apparmor);
  if (store_open (cfg->root, &svc->store, err) < 0)
    return husk_error_wrap (err, "image store");
  collect_image_garbage (svc->store);
  if ((cfg->registries_file ? hosts_config_load (cfg->registries_file, &svc->hosts, err)
                            : hosts_config_load_default (&svc->hosts, err))
      < 0)
    return -1;
  if (sandbox_store_open (cfg->root, cfg->state, &svc->sandboxes, err) < 0)
    return -1;
  sandbox_store_set_network (svc->sandboxes, cfg->cni_conf_dir, cfg->cni_bin_dirs);
  sandbox_store_set_cgroup_driver (svc->sandboxes, huskd_config_systemd_cgroup (cfg));
  sandbox_store_set_apparmor (svc->sandboxes, &svc->apparmor);
  sandbox_store_recover (svc->sandboxes);
  sandbox_store_log_network (svc->sandboxes);
  /* Now, not on the first container RPC: after a restart StopPodSandbox
   * must already find the pod's containers. */
  if (cri_containers_init (svc, err) < 0)
    return -1;
  cri_checkpoint_sweep (svc);
  log_recovered (svc);
  if (layer_usage_new ((unsigned) cfg->stats_collect_period_s, &svc->layers, err) < 0)
    return -1;
  prime_layer_usage (svc);
  if (cri_stats_sampler_start (STATS_SAMPLER_PERIOD_MS, err) < 0)
    return -1;
  if (cri_streaming_start (svc, err) < 0)
    return -1;
  if (cri_metrics_start (svc, method_table, N_METHODS, err) < 0)
    return -1;
  return cri_container_events_start (svc, err);
}

/* On failure whatever was started is stopped and freed again (a bad
 * metrics_address, say, found after the stores were opened). */
int
cri_service_init (struct cri_service *svc, const struct huskd_config *cfg, struct husk_error **err)
{
  memset (svc, 0, sizeof *svc);
  svc->cfg = cfg;
  pthread_mutex_init (&svc->lock, NULL);
  pthread_mutex_init (&svc->cdi_lock, NULL);
  if (service_start (svc, cfg, err) < 0)
    {
      cri_service_clear (svc);
      return -1;
    }
  return 0;
}

void
cri_service_clear (struct cri_service *svc)
{
  /* First: their threads use the container store. */
  cri_stats_sampler_stop ();
  cri_metrics_stop (svc);
  cri_streaming_stop (svc);
  cri_container_events_stop (svc);
  layer_usage_free (svc->layers);
  store_free (svc->store);
  hosts_config_free (svc->hosts);
  cri_containers_clear (svc);
  sandbox_store_free (svc->sandboxes);
  free (svc->pod_cidr);
  cdi_registry_free (svc->cdi);
  cri_apparmor_clear (&svc->apparmor);
  pthread_mutex_destroy (&svc->cdi_lock);
  pthread_mutex_destroy (&svc->lock);
}
