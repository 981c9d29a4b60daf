/* huskd's CRI service: the state every handler shares, and the method
 * table registered with the gRPC layer (rpc_server.h).  Handlers unpack
 * with protobuf-c, do the work through image/ and runtime/, and pack the
 * reply; a missing or contradictory field is INVALID_ARGUMENT naming it. */
#ifndef HUSK_CRI_SERVICE_H
#define HUSK_CRI_SERVICE_H

#include <protobuf-c/protobuf-c.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "cri/config/config.h"
#include "cri/container/container_store.h" /* enum cri_container_state */
#include "cri/spec/apparmor.h"
#include "cri/proto/api.pb-c.h"
#include "cri/rpc/server.h"
#include "cri/server/reply.h"
#include "cri/stats/cgroup_cache.h" /* cri_stats_forget_*: the container and pod RPCs call them */
#include "image/hosts.h"
#include "image/store.h"

struct cri_service;
struct sandbox_store;

/* A hook the container RPCs set: stop or remove every container of a pod. */
typedef int (*cri_pod_hook) (struct cri_service *svc, const char *sandbox_id, struct husk_error **err);

struct cri_service
{
  const struct huskd_config *cfg;
  struct store *store;
  struct hosts_config *hosts;
  pthread_mutex_t lock; /* guards pod_cidr; the rest is set once by cri_service_init */
  char *pod_cidr;       /* from UpdateRuntimeConfig */
  struct sandbox_store *sandboxes;
  cri_pod_hook stop_pod_containers;   /* NULL: none */
  cri_pod_hook remove_pod_containers; /* NULL: none */
  struct container_store *containers; /* opened by cri_containers_init */
  struct cri_events *events;          /* GetContainerEvents (cri/container/events.h) */
  struct streaming_server *streaming; /* Exec, Attach, PortForward URLs (cri/streaming/server.h) */
  struct cdi_registry *cdi;           /* CDI specs of cfg->cdi_spec_dirs (cri/cdi/cdi.h) */
  pthread_mutex_t cdi_lock;           /* the registry reloads on lookups: one at a time */
  struct metrics *metrics;            /* counters and the /metrics endpoint (cri/server/call_metrics.c) */
  struct metrics_http *metrics_http;  /* NULL unless cfg->metrics_address */
  struct cri_meter *meters;           /* one per method: what the metered handler calls */
  struct layer_usage *layers;         /* writable layers' usage (cri/stats/layer_usage.h) */
  struct cri_apparmor apparmor;       /* AppArmor and husk-default, found at start */
};

int cri_service_init (struct cri_service *svc, const struct huskd_config *cfg, struct husk_error **err);
void cri_service_clear (struct cri_service *svc);

/* Every RPC of runtime.v1; *N gets the count. */
const struct rpc_method *cri_service_methods (struct cri_service *svc, size_t *n);

/* Prometheus metrics (call_metrics.c): the registry of METHODS and,
 * with cfg->metrics_address, its endpoint; stop ends the endpoint and
 * frees the registry. */
int cri_metrics_start (struct cri_service *svc, const struct rpc_method *methods, size_t n,
                       struct husk_error **err);
void cri_metrics_stop (struct cri_service *svc);
/* METHODS (N, as cri_service_methods built them) with their handlers
 * wrapped to count each call, its status and its duration. */
void cri_metrics_wrap (struct cri_service *svc, struct rpc_method *methods, size_t n);
/* A PullImage ended (OK or not) after downloading BYTES of layers. */
void cri_metrics_pull (struct cri_service *svc, bool ok, uint64_t bytes);

/* The handlers, by service (service_runtime.c, service_image.c). */
void cri_version (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_status (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_runtime_config (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_update_runtime_config (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_list_images (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_image_status (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_pull_image (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_remove_image (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_image_fs_info (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_run_pod_sandbox (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_stop_pod_sandbox (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_remove_pod_sandbox (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_pod_sandbox_status (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_list_pod_sandbox (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_update_pod_sandbox_resources (struct rpc_call *call, const void *req, size_t len, void *user);

/* Container RPCs (service_container.c).  cri_containers_init (called by
 * cri_service_init) opens the container store, sets the pod hooks and
 * rolls back what a crash cut short. */
int cri_containers_init (struct cri_service *svc, struct husk_error **err);
void cri_containers_clear (struct cri_service *svc);
void cri_create_container (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_start_container (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_stop_container (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_remove_container (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_list_containers (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_container_status (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_exec_sync (struct rpc_call *call, const void *req, size_t len, void *user);
/* service_stream.c: the streaming server and the RPCs handing out its URLs. */
int cri_streaming_start (struct cri_service *svc, struct husk_error **err);
void cri_streaming_stop (struct cri_service *svc);
void cri_exec (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_attach (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_port_forward (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_reopen_container_log (struct rpc_call *call, const void *req, size_t len, void *user);

/* Container events (container_events.c, over cri/container/events.h,
 * under the handlers): start creates svc->events and its watcher of the
 * container store's exit directory (after cri_containers_init); stop ends
 * the streams, the watcher and frees the hub.  The GetContainerEvents
 * handler is service_container.c's. */
int cri_container_events_start (struct cri_service *svc, struct husk_error **err);
void cri_container_events_stop (struct cri_service *svc);
void cri_get_container_events (struct rpc_call *call, const void *req, size_t len, void *user);
/* An event for the pod itself, as containerd sends them: its id as the
 * container id (CREATED and STARTED on run, STOPPED, DELETED). */
void cri_pod_event (struct cri_service *svc, Runtime__V1__ContainerEventType type, const char *sandbox_id);
/* What the container handlers tell the hub: C created, ID's start begun
 * and done (STARTED, then STOPPED when it has already exited), ID's exit
 * file seen, C removed. */
struct cri_container;
void cri_note_created (struct cri_service *svc, const struct cri_container *c);
void cri_note_starting (struct cri_service *svc, const char *id);
void cri_note_started (struct cri_service *svc, const char *id, bool started);
void cri_note_exit (struct cri_service *svc, const char *id);
void cri_note_deleted (struct cri_service *svc, const struct cri_container *c);
/* A container's CRI status (container_events.c: ContainerStatus replies
 * with it, events carry it), pointing into C and PARTS. */
/* What a ContainerStatus points to besides the record. */
struct cri_status_parts
{
  Runtime__V1__ImageSpec image;
  Runtime__V1__ContainerResources resources;
};
Runtime__V1__ContainerState cri_container_state_value (enum cri_container_state state);
void cri_container_status_of (const struct cri_container *c, Runtime__V1__ContainerStatus *status,
                              struct cri_status_parts *parts);

/* PodSandboxStatus of SB as the PodSandboxStatus RPC builds it, pointing
 * into SB (pod_status.c); free it before SB. */
struct sandbox;
Runtime__V1__PodSandboxStatus *cri_pod_status_new (const struct sandbox *sb);
void cri_pod_status_free (Runtime__V1__PodSandboxStatus *status);

/* UpdateContainerResources (service_update.c). */
void cri_update_container_resources (struct rpc_call *call, const void *req, size_t len, void *user);
/* service_checkpoint.c */
void cri_checkpoint_container (struct rpc_call *call, const void *req, size_t len, void *user);
/* At start: the work dirs (and partial archives) of checkpoints a killed
 * huskd left, removed. */
void cri_checkpoint_sweep (struct cri_service *svc);
/* CreateContainer's image is a checkpoint archive (an existing file):
 * its image's name, the restore dir, and the images the monitor restores
 * (checkpoint_restore.c). */
bool cri_is_checkpoint_archive (const char *image);
char *cri_restore_dir (struct cri_service *svc, const char *id);
int cri_restore_prepare (struct cri_service *svc, const char *id, const char *archive,
                         struct husk_error **err);
char *cri_restore_images (struct cri_service *svc, const char *id);

/* Stats RPCs (service_stats.c): cgroup, writable layer and pod network
 * usage of containers and pods. */
void cri_container_stats (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_list_container_stats (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_pod_sandbox_stats (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_list_pod_sandbox_stats (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_list_metric_descriptors (struct rpc_call *call, const void *req, size_t len, void *user);
void cri_list_pod_sandbox_metrics (struct rpc_call *call, const void *req, size_t len, void *user);

#endif
