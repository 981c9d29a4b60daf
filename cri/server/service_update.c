/* UpdateContainerResources: new limits merged into the container's
 * recorded resources (a field kubelet leaves zero keeps its value, as in
 * containerd), applied by `RUNTIME update` to a running container (by
 * husk into the sandbox's cgroups where the handler owns the pod) or
 * written into the bundle of one not started yet, then recorded.  A
 * refused update leaves the record as it was. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cri/container/container_store.h"
#include "cri/container/containers.h"
#include "cri/container/sandboxed_resources.h"
#include "cri/pod/sandbox.h"
#include "cri/spec/cri_spec.h"
#include "cri/config/runtime_exec.h"
#include "cri/server/service.h"
#include "husk/cleanup.h"
#include "husk/util.h"

typedef Runtime__V1__LinuxContainerResources Resources;

/* Protobuf's own merge: the later of two concatenated encodings wins for
 * every scalar it sets, and proto3 encodes no zero scalar or empty
 * string, so unset fields of NEWER keep OLDER's values.  Repeated fields
 * append: drop_duplicates keeps the last of each. */
static Resources *
merge_resources (const Resources *older, const Resources *newer)
{
  size_t n_old = older ? runtime__v1__linux_container_resources__get_packed_size (older) : 0;
  size_t n_new = runtime__v1__linux_container_resources__get_packed_size (newer);
  cleanup_free uint8_t *buf = xmalloc (n_old + n_new + 1);

  if (older)
    runtime__v1__linux_container_resources__pack (older, buf);
  runtime__v1__linux_container_resources__pack (newer, buf + n_old);
  return runtime__v1__linux_container_resources__unpack (NULL, n_old + n_new, buf);
}

static void
drop_duplicates (Resources *res)
{
  size_t kept = 0;

  for (size_t i = 0; i < res->n_hugepage_limits; i++)
    {
      bool later = false;
      for (size_t j = i + 1; j < res->n_hugepage_limits && !later; j++)
        later = strcmp (res->hugepage_limits[i]->page_size, res->hugepage_limits[j]->page_size) == 0;
      if (later)
        runtime__v1__hugepage_limit__free_unpacked (res->hugepage_limits[i], NULL);
      else
        res->hugepage_limits[kept++] = res->hugepage_limits[i];
    }
  res->n_hugepage_limits = kept;
  kept = 0;
  for (size_t i = 0; i < res->n_unified; i++)
    {
      bool later = false;
      for (size_t j = i + 1; j < res->n_unified && !later; j++)
        later = strcmp (res->unified[i]->key, res->unified[j]->key) == 0;
      if (later)
        protobuf_c_message_free_unpacked (&res->unified[i]->base, NULL);
      else
        res->unified[kept++] = res->unified[i];
    }
  res->n_unified = kept;
}

/* The container was never created by the runtime: its bundle is what
 * StartContainer will run, so the limits go there. */
static int
update_bundle (struct cri_service *svc, const char *id, json_t *resources, struct husk_error **err)
{
  cleanup_free char *bundle = containers_bundle_dir (svc->cfg->root, id);
  cleanup_free char *path = xasprintf ("%s/config.json", bundle);
  json_error_t jerr;
  json_t *config = json_load_file (path, 0, &jerr);
  json_t *linux_obj, *current;
  char *text;
  int ret;

  if (config == NULL)
    return husk_error_make (err, 0, "read `%s`: %s", path, jerr.text);
  linux_obj = json_object_get (config, "linux");
  if (!json_is_object (linux_obj))
    json_object_set_new (config, "linux", linux_obj = json_object ());
  current = json_object_get (linux_obj, "resources");
  if (!json_is_object (current))
    json_object_set_new (linux_obj, "resources", current = json_object ());
  /* Devices stay: they are not CRI resources. */
  json_object_update (current, resources);
  text = json_dumps (config, JSON_COMPACT);
  json_decref (config);
  ret = husk_write_file_atomic (path, text, strlen (text), 0644, err);
  free (text);
  return ret;
}

/* A handler that owns the pod (runsc 2022) has no `update`: husk writes
 * the sandbox's cgroups itself (cri/container/sandboxed_resources.c). */
static int
update_sandboxed (struct cri_service *svc, const struct cri_container *c, const Resources *merged,
                  struct husk_error **err)
{
  struct sandbox *sb = NULL;
  int ret;

  if (sandbox_lookup (svc->sandboxes, c->sandbox_id, &sb, err) < 0)
    return -1;
  ret = sandboxed_resources_apply (svc->containers, sb->cgroup_parent, sb->id, c->id, merged, err);
  sandbox_free (sb);
  return ret;
}

static int
update_running (struct cri_service *svc, const struct cri_container *c, json_t *resources,
                const Resources *merged, struct husk_error **err)
{
  const struct huskd_runtime *rt = cri_runtime_for (svc->cfg, c->runtime_handler, err);
  cleanup_free char *dir = container_store_dir (svc->containers, c->id);
  cleanup_free char *path = xasprintf ("%s/resources.json", dir);
  char *text;
  int ret;

  if (rt == NULL)
    return -1;
  if (rt->owns_pod)
    return update_sandboxed (svc, c, merged, err);
  text = json_dumps (resources, JSON_COMPACT);
  ret = husk_write_file_replace (path, text, strlen (text), 0600, err);
  free (text);
  if (ret == 0)
    ret = cri_run_runtime (rt, (const char *[]){ "update", "--resources", path, c->id, NULL }, err);
  unlink (path);
  return ret;
}

static void
set_resources (struct cri_container *c, Resources *merged)
{
  Runtime__V1__ContainerConfig *config = c->config;

  if (config->linux == NULL)
    {
      config->linux = xmalloc (sizeof *config->linux);
      runtime__v1__linux_container_config__init (config->linux);
    }
  if (config->linux->resources)
    runtime__v1__linux_container_resources__free_unpacked (config->linux->resources, NULL);
  config->linux->resources = merged;
}

/* What the runtime would refuse anyway, refused here as the client's
 * mistake (INVALID_ARGUMENT), not as huskd's failure (UNKNOWN). */
static int
check_resources (const Resources *res, struct husk_error **err)
{
  if (res->memory_limit_in_bytes > 0 && res->memory_limit_in_bytes < 4096)
    return husk_error_kind (err, EINVAL,
                            "linux.memory_limit_in_bytes: %lld bytes is less than one page (4096)",
                            (long long) res->memory_limit_in_bytes);
  if (res->memory_swap_limit_in_bytes > 0 && res->memory_limit_in_bytes > 0
      && res->memory_swap_limit_in_bytes < res->memory_limit_in_bytes)
    return husk_error_kind (
        err, EINVAL,
        "linux.memory_swap_limit_in_bytes %lld: less than memory_limit_in_bytes %lld (it is "
        "memory plus swap)",
        (long long) res->memory_swap_limit_in_bytes, (long long) res->memory_limit_in_bytes);
  if (res->cpu_shares != 0 && (res->cpu_shares < 2 || res->cpu_shares > 262144))
    return husk_error_kind (err, EINVAL, "linux.cpu_shares %lld: must be between 2 and 262144",
                            (long long) res->cpu_shares);
  if (res->cpu_quota > 0 && res->cpu_quota < 1000)
    return husk_error_kind (err, EINVAL,
                            "linux.cpu_quota %lld: must be -1 (no limit) or at least 1000 (microseconds)",
                            (long long) res->cpu_quota);
  if (res->cpu_period != 0 && (res->cpu_period < 1000 || res->cpu_period > 1000000))
    return husk_error_kind (err, EINVAL,
                            "linux.cpu_period %lld: must be between 1000 and 1000000 (microseconds)",
                            (long long) res->cpu_period);
  if (res->oom_score_adj < -1000 || res->oom_score_adj > 1000)
    return husk_error_kind (err, EINVAL, "linux.oom_score_adj %lld: must be between -1000 and 1000",
                            (long long) res->oom_score_adj);
  return 0;
}

static int
update_resources (struct cri_service *svc, const char *id, const Resources *wanted, struct husk_error **err)
{
  struct cri_container *c = NULL;
  const Resources *current;
  Resources *merged;
  json_t *resources;
  int ret = 0;

  if (check_resources (wanted, err) < 0 || container_lookup (svc->containers, id, &c, err) < 0)
    return -1;
  current = c->config && c->config->linux ? c->config->linux->resources : NULL;
  merged = merge_resources (current, wanted);
  if (merged == NULL)
    {
      cri_container_free (c);
      return husk_error_kind (err, EINVAL, "linux: resources cannot be merged");
    }
  drop_duplicates (merged);
  resources = cri_spec_resources (merged);
  /* An exited container keeps the new limits in its record only, as
   * containerd does; a running one with nothing to set has nothing to
   * tell the runtime. */
  if (c->state == CRI_CONTAINER_CREATED)
    ret = update_bundle (svc, c->id, resources, err);
  else if (c->state == CRI_CONTAINER_RUNNING && json_object_size (resources))
    ret = update_running (svc, c, resources, merged, err);
  json_decref (resources);
  if (ret < 0)
    runtime__v1__linux_container_resources__free_unpacked (merged, NULL);
  else if (c->config)
    {
      set_resources (c, merged);
      ret = container_save (svc->containers, c, true, err);
    }
  else
    runtime__v1__linux_container_resources__free_unpacked (merged, NULL);
  cri_container_free (c);
  return ret;
}

void
cri_update_container_resources (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__UpdateContainerResourcesRequest *req
      = cri_unpack (call, &runtime__v1__update_container_resources_request__descriptor, req_bytes, len);
  Runtime__V1__UpdateContainerResourcesResponse resp = RUNTIME__V1__UPDATE_CONTAINER_RESOURCES_RESPONSE__INIT;
  Resources none = RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT;
  struct husk_error *err = NULL;
  int ret;

  if (req == NULL)
    return;
  if (req->container_id == NULL || req->container_id[0] == '\0')
    {
      rpc_fail (call, GRPC_STATUS_INVALID_ARGUMENT, "container_id: empty");
      runtime__v1__update_container_resources_request__free_unpacked (req, NULL);
      return;
    }
  /* Under the store lock, after any start of it: the runtime sees the
   * container in one state. */
  pthread_mutex_lock (&svc->containers->lock);
  container_store_wait_idle (svc->containers, req->container_id);
  ret = update_resources (svc, req->container_id, req->linux ? req->linux : &none, &err);
  pthread_mutex_unlock (&svc->containers->lock);
  if (ret < 0)
    {
      husk_error_wrap (&err, "UpdateContainerResources %s", req->container_id);
      cri_fail (call, &err);
    }
  else
    cri_reply (call, &resp.base);
  runtime__v1__update_container_resources_request__free_unpacked (req, NULL);
}
