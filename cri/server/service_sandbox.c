/* The pod sandbox RPCs of runtime.v1.RuntimeService over cri/pod/sandbox.h:
 * RunPodSandbox, StopPodSandbox, RemovePodSandbox, PodSandboxStatus and
 * ListPodSandbox.  Stop and Remove of an unknown pod succeed (CRI). */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cri/config/runtime_exec.h"
#include "cri/pod/sandbox.h"
#include "cri/server/pod_status.h"
#include "cri/server/service.h"
#include "cri/config/runtime_probe.h"
#include "husk/cleanup.h"
#include "husk/util.h"

static void
fail (struct rpc_call *call, const char *rpc, struct husk_error **err)
{
  rpc_fail (call, cri_status_of (*err), "%s: %s", rpc, (*err)->msg);
  husk_error_free (err);
}

#define FREE_REQUEST(request) protobuf_c_message_free_unpacked (&(request)->base, NULL)

/* The pod, and for a handler that owns it (runsc) its infra container
 * through the handler; a failure of that undoes the pod. */
static int
run_pod (struct cri_service *svc, const Runtime__V1__RunPodSandboxRequest *request, char **id,
         struct husk_error **err)
{
  const struct huskd_runtime *rt = huskd_config_runtime (svc->cfg, request->runtime_handler);
  struct husk_error *ignored = NULL;
  struct sandbox *sb = NULL;
  int ret;

  if (rt->owns_pod && sandbox_handler_check (rt, request->config, err) < 0)
    return -1;
  if (sandbox_run (svc->sandboxes, request->config, request->runtime_handler, id, err) < 0)
    return -1;
  if (!rt->owns_pod)
    return 0;
  ret = sandbox_lookup (svc->sandboxes, *id, &sb, err);
  if (ret == 0)
    ret = sandbox_handler_start (rt, sb, err);
  sandbox_free (sb);
  if (ret < 0 && sandbox_remove (svc->sandboxes, *id, &ignored) < 0)
    {
      husk_warn ("RunPodSandbox: undo pod %s: %s", *id, ignored->msg);
      husk_error_free (&ignored);
    }
  if (ret < 0)
    free (steal_pointer (id));
  return ret;
}

/* StopPodSandbox of a pod whose handler owns it: the handler's sandbox
 * goes, once its app containers were stopped. */
static int
stop_pod_owner (struct cri_service *svc, const char *id, struct husk_error **err)
{
  struct sandbox *sb = NULL;
  const struct huskd_runtime *rt;
  int ret = 0;

  if (sandbox_lookup (svc->sandboxes, id, &sb, err) < 0)
    {
      if ((*err)->errnum != ENOENT)
        return -1;
      husk_error_free (err);
      return 0;
    }
  rt = huskd_config_runtime (svc->cfg, sb->runtime_handler);
  if (rt && rt->owns_pod)
    ret = sandbox_handler_stop (rt, sb->id, err);
  sandbox_free (sb);
  return ret;
}

void
cri_run_pod_sandbox (struct rpc_call *call, const void *req, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__RunPodSandboxRequest *request
      = cri_unpack (call, &runtime__v1__run_pod_sandbox_request__descriptor, req, len);
  Runtime__V1__RunPodSandboxResponse reply = RUNTIME__V1__RUN_POD_SANDBOX_RESPONSE__INIT;
  struct husk_error *err = NULL;
  cleanup_free char *id = NULL;

  if (request == NULL)
    return;
  if (huskd_config_runtime (svc->cfg, request->runtime_handler) == NULL)
    {
      cleanup_free char *names = huskd_config_runtime_names (svc->cfg);
      rpc_fail (call, GRPC_STATUS_INVALID_ARGUMENT,
                "RunPodSandbox: runtime_handler `%s` is not configured (configured: %s; \"\" is %s)",
                request->runtime_handler, names, svc->cfg->default_runtime);
    }
  else if (cri_runtime_usable (huskd_config_runtime (svc->cfg, request->runtime_handler), "RunPodSandbox",
                               &err)
           < 0)
    cri_fail (call, &err);
  else if (run_pod (svc, request, &id, &err) < 0)
    fail (call, "RunPodSandbox", &err);
  else
    {
      cri_pod_event (svc, RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_CREATED_EVENT, id);
      cri_pod_event (svc, RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STARTED_EVENT, id);
      reply.pod_sandbox_id = id;
      cri_reply (call, &reply.base);
    }
  FREE_REQUEST (request);
}

/* Runs a container hook for the pod (set by the container RPCs). */
static int
run_hook (struct cri_service *svc, cri_pod_hook hook, const char *sandbox_id, struct husk_error **err)
{
  return hook ? hook (svc, sandbox_id, err) : 0;
}

/* Resolves a (prefix) id; *ID NULL and 0 when unknown, as Stop and Remove
 * treat that as done. */
static int
resolve (struct cri_service *svc, const char *given, char **id, struct husk_error **err)
{
  struct sandbox *sb = NULL;

  *id = NULL;
  if (given == NULL || *given == '\0')
    {
      return husk_error_kind (err, EINVAL, "pod_sandbox_id is required");
    }
  if (sandbox_lookup (svc->sandboxes, given, &sb, err) < 0)
    {
      if ((*err)->errnum != ENOENT)
        return -1;
      husk_error_free (err);
      return 0;
    }
  *id = xstrdup (sb->id);
  sandbox_free (sb);
  return 0;
}

struct stop_job
{
  struct cri_service *svc;
  const char *id;
  struct husk_error *err;
  int ret;
};

static void *
stop_containers (void *arg)
{
  struct stop_job *job = arg;

  job->ret = run_hook (job->svc, job->svc->stop_pod_containers, job->id, &job->err);
  return NULL;
}

/* The containers are killed (no grace period: kubelet stopped them one by
 * one before, as it wanted) while CNI DEL runs: both take tens of ms, and
 * neither needs the other done.  A failure of either fails the stop, which
 * kubelet retries; both halves are idempotent. */
static int
stop (struct cri_service *svc, const char *id, struct husk_error **err)
{
  struct stop_job job = { .svc = svc, .id = id };
  pthread_t thread;
  bool threaded = pthread_create (&thread, NULL, stop_containers, &job) == 0;
  bool was_ready;
  int ret;

  if (!threaded)
    stop_containers (&job);
  /* Before its network goes: the stats RPCs hold its net/dev open. */
  cri_stats_forget_pod (id);
  ret = sandbox_stop (svc->sandboxes, id, &was_ready, err);
  /* Sent by the one call that stopped it, whatever became of the
   * containers (a retry finds the pod stopped already). */
  if (ret == 0 && was_ready)
    cri_pod_event (svc, RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STOPPED_EVENT, id);
  /* Removed meanwhile by another call: stopped is what was asked. */
  if (ret < 0 && (*err)->errnum == ENOENT)
    {
      husk_error_free (err);
      ret = 0;
    }
  if (threaded)
    pthread_join (thread, NULL);
  if (ret == 0 && job.ret == 0)
    ret = stop_pod_owner (svc, id, err);
  if (job.ret < 0)
    {
      husk_error_free (err);
      *err = steal_pointer (&job.err);
      return husk_error_wrap (err, "stop the containers of pod sandbox %s", id);
    }
  return ret;
}

void
cri_stop_pod_sandbox (struct rpc_call *call, const void *req, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__StopPodSandboxRequest *request
      = cri_unpack (call, &runtime__v1__stop_pod_sandbox_request__descriptor, req, len);
  Runtime__V1__StopPodSandboxResponse reply = RUNTIME__V1__STOP_POD_SANDBOX_RESPONSE__INIT;
  struct husk_error *err = NULL;
  cleanup_free char *id = NULL;

  if (request == NULL)
    return;
  if (resolve (svc, request->pod_sandbox_id, &id, &err) < 0 || (id && stop (svc, id, &err) < 0))
    fail (call, "StopPodSandbox", &err);
  else
    cri_reply (call, &reply.base);
  FREE_REQUEST (request);
}

static int
remove_pod (struct cri_service *svc, const char *id, struct husk_error **err)
{
  if (stop (svc, id, err) < 0)
    return -1;
  if (run_hook (svc, svc->remove_pod_containers, id, err) < 0)
    return husk_error_wrap (err, "remove the containers of pod sandbox %s", id);
  if (sandbox_remove (svc->sandboxes, id, err) < 0)
    {
      if ((*err)->errnum != ENOENT)
        return -1;
      husk_error_free (err);
      return 0;
    }
  cri_pod_event (svc, RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_DELETED_EVENT, id);
  return 0;
}

void
cri_remove_pod_sandbox (struct rpc_call *call, const void *req, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__RemovePodSandboxRequest *request
      = cri_unpack (call, &runtime__v1__remove_pod_sandbox_request__descriptor, req, len);
  Runtime__V1__RemovePodSandboxResponse reply = RUNTIME__V1__REMOVE_POD_SANDBOX_RESPONSE__INIT;
  struct husk_error *err = NULL;
  cleanup_free char *id = NULL;

  if (request == NULL)
    return;
  if (resolve (svc, request->pod_sandbox_id, &id, &err) < 0 || (id && remove_pod (svc, id, &err) < 0))
    fail (call, "RemovePodSandbox", &err);
  else
    cri_reply (call, &reply.base);
  FREE_REQUEST (request);
}

/* ---------------------------------------------------------------- views */

/* verbose: where the pod's namespaces and files are, as JSON "info"
 * (and why its record could not be read, when it could not). */
static char *
status_info_json (const struct sandbox *sb)
{
  json_t *doc
      = json_pack ("{s:i, s:s?, s:s?, s:s?, s:s?, s:s, s:s, s:s, s:s?, s:s?}", "pid", (int) sb->pause_pid,
                   "netns", sb->netns_path, "ipcns", sb->ipcns_path, "utsns", sb->utsns_path, "pidns",
                   sb->pidns_path, "hostname", sb->hostname_path, "hosts", sb->hosts_path, "resolv_conf",
                   sb->resolv_conf_path, "cgroup_parent", sb->cgroup_parent, "record_damaged", sb->damaged);
  char *text = json_dumps (doc, JSON_COMPACT);

  json_decref (doc);
  return text;
}

void
cri_pod_sandbox_status (struct rpc_call *call, const void *req, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__PodSandboxStatusRequest *request
      = cri_unpack (call, &runtime__v1__pod_sandbox_status_request__descriptor, req, len);
  Runtime__V1__PodSandboxStatusResponse reply = RUNTIME__V1__POD_SANDBOX_STATUS_RESPONSE__INIT;
  Runtime__V1__PodSandboxStatusResponse__InfoEntry entry
      = RUNTIME__V1__POD_SANDBOX_STATUS_RESPONSE__INFO_ENTRY__INIT;
  Runtime__V1__PodSandboxStatusResponse__InfoEntry *entries[] = { &entry };
  cleanup_free char *info = NULL;
  struct husk_error *err = NULL;
  struct status_view view;
  struct sandbox *sb = NULL;

  if (request == NULL)
    return;
  if (sandbox_lookup (svc->sandboxes, request->pod_sandbox_id, &sb, &err) < 0)
    {
      fail (call, "PodSandboxStatus", &err);
      FREE_REQUEST (request);
      return;
    }
  cri_pod_status_view_init (&view, sb);
  reply.status = &view.status;
  reply.timestamp = cri_now_ns ();
  if (request->verbose)
    {
      info = status_info_json (sb);
      entry.key = "info";
      entry.value = info;
      reply.n_info = 1;
      reply.info = entries;
    }
  cri_reply (call, &reply.base);
  cri_pod_status_view_clear (&view);
  sandbox_free (sb);
  FREE_REQUEST (request);
}

static bool
matches (const struct sandbox *sb, const Runtime__V1__PodSandboxFilter *filter)
{
  if (filter == NULL)
    return true;
  if (filter->id && *filter->id && !husk_str_has_prefix (sb->id, filter->id))
    return false;
  if (filter->state
      && (filter->state->state == RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY)
             != (sb->state == SANDBOX_READY))
    return false;
  return cri_labels_match ((struct cri_string_entry *const *) sb->config->labels, sb->config->n_labels,
                           (struct cri_string_entry *const *) filter->label_selector,
                           filter->n_label_selector);
}

static void
list_item_init (Runtime__V1__PodSandbox *item, const struct sandbox *sb)
{
  const Runtime__V1__PodSandboxConfig *config = sb->config;

  runtime__v1__pod_sandbox__init (item);
  item->id = sb->id;
  item->metadata = config->metadata;
  item->state = sb->state == SANDBOX_READY ? RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY
                                           : RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_NOTREADY;
  item->created_at = sb->created_at;
  item->runtime_handler = sb->runtime_handler;
  COPY_MAP (Runtime__V1__PodSandbox__LabelsEntry, RUNTIME__V1__POD_SANDBOX__LABELS_ENTRY__INIT,
            config->labels, config->n_labels, item->labels);
  item->n_labels = config->n_labels;
  COPY_MAP (Runtime__V1__PodSandbox__AnnotationsEntry, RUNTIME__V1__POD_SANDBOX__ANNOTATIONS_ENTRY__INIT,
            config->annotations, config->n_annotations, item->annotations);
  item->n_annotations = config->n_annotations;
}

void
cri_list_pod_sandbox (struct rpc_call *call, const void *req, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__ListPodSandboxRequest *request
      = cri_unpack (call, &runtime__v1__list_pod_sandbox_request__descriptor, req, len);
  Runtime__V1__ListPodSandboxResponse reply = RUNTIME__V1__LIST_POD_SANDBOX_RESPONSE__INIT;
  struct husk_error *err = NULL;
  struct sandbox **list = NULL;
  size_t n = 0, kept = 0;

  if (request == NULL)
    return;
  /* Kubelet relists every second: no copy of what the reply leaves out. */
  if (sandbox_list_attributes (svc->sandboxes, &list, &n, &err) < 0)
    {
      fail (call, "ListPodSandbox", &err);
      FREE_REQUEST (request);
      return;
    }
  {
    cleanup_free Runtime__V1__PodSandbox *items = xcalloc (n + 1, sizeof *items);
    cleanup_free Runtime__V1__PodSandbox **ptrs = xcalloc (n + 1, sizeof *ptrs);

    for (size_t i = 0; i < n; i++)
      if (matches (list[i], request->filter))
        {
          list_item_init (&items[kept], list[i]);
          ptrs[kept] = &items[kept];
          kept++;
        }
    reply.n_items = kept;
    reply.items = ptrs;
    cri_reply (call, &reply.base);
    for (size_t i = 0; i < kept; i++)
      {
        cri_map_free (items[i].labels);
        cri_map_free (items[i].annotations);
      }
  }
  sandboxes_free (list, n);
  FREE_REQUEST (request);
}

/* kubelet has resized the pod's cgroup itself by the time it calls this,
 * and treats it as best effort: huskd has nothing to apply (no NRI
 * plugins to tell), so it only checks that the pod exists. */
void
cri_update_pod_sandbox_resources (struct rpc_call *call, const void *req, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__UpdatePodSandboxResourcesRequest *request
      = cri_unpack (call, &runtime__v1__update_pod_sandbox_resources_request__descriptor, req, len);
  Runtime__V1__UpdatePodSandboxResourcesResponse reply
      = RUNTIME__V1__UPDATE_POD_SANDBOX_RESOURCES_RESPONSE__INIT;
  struct husk_error *err = NULL;
  struct sandbox *sb = NULL;

  if (request == NULL)
    return;
  if (request->pod_sandbox_id == NULL || request->pod_sandbox_id[0] == '\0')
    rpc_fail (call, GRPC_STATUS_INVALID_ARGUMENT, "UpdatePodSandboxResources: pod_sandbox_id: empty");
  else if (sandbox_lookup (svc->sandboxes, request->pod_sandbox_id, &sb, &err) < 0)
    fail (call, "UpdatePodSandboxResources", &err);
  else
    cri_reply (call, &reply.base);
  sandbox_free (sb);
  FREE_REQUEST (request);
}
