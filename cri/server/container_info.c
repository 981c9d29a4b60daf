/* Verbose ContainerStatus: what crictl inspect shows beyond the status
 * (see container_info.h). */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cri/server/container_info.h"
#include "cri/container/containers.h"
#include "cri/server/cri_json.h"
#include "runtime/cgroup/cgroup.h"
#include "cri/config/runtime_exec.h"
#include "cri/spec/cri_spec.h"
#include "husk/cleanup.h"
#include "husk/util.h"

static json_t *
load_spec (struct cri_service *svc, const char *id, char **bundle_out)
{
  cleanup_free char *bundle = containers_bundle_dir (svc->cfg->root, id);
  cleanup_free char *path = xasprintf ("%s/config.json", bundle);
  json_t *spec = json_load_file (path, 0, NULL);

  if (bundle_out)
    *bundle_out = steal_pointer (&bundle);
  return spec;
}

static const char *const state_names[] = { "created", "running", "exited" };

char *
cri_container_info_json (struct cri_service *svc, const struct cri_container *c)
{
  cleanup_free char *bundle = NULL;
  json_t *spec = load_spec (svc, c->id, &bundle);
  const struct huskd_runtime *rt = huskd_config_runtime (svc->cfg, c->runtime_handler);
  json_t *doc, *note;
  char *text;

  /* containerd's keys first (sandboxID, pid, removing, snapshotKey,
   * snapshotter, runtimeType, runtimeOptions, config, runtimeSpec), then
   * husk's own. */
  doc = json_pack ("{s:s, s:I, s:b, s:s, s:s, s:s, s:o, s:o, s:o*}", "sandboxID", c->sandbox_id, "pid",
                   (json_int_t) (c->state == CRI_CONTAINER_RUNNING ? c->pid : 0), "removing", 0,
                   "snapshotKey", c->id, "snapshotter", "overlayfs", "runtimeType", rt ? rt->name : "",
                   "runtimeOptions",
                   rt ? json_pack ("{s:s, s:s}", "binaryName", rt->path, "root", rt->root) : json_null (),
                   "config", cri_message_json ((const ProtobufCMessage *) c->config), "runtimeSpec", spec);
  json_object_set_new (doc, "runtimeHandler", json_string (c->runtime_handler ? c->runtime_handler : ""));
  json_object_set_new (doc, "state", json_string (state_names[c->state]));
  json_object_set_new (doc, "monitorPid",
                       json_integer (c->state == CRI_CONTAINER_RUNNING ? (json_int_t) c->monitor_pid : 0));
  json_object_set_new (doc, "bundle", json_string (bundle));
  json_object_set_new (doc, "rootfs", json_incref (json_object_get (json_object_get (spec, "root"), "path")));
  if (c->oom_killed)
    json_object_set_new (doc, "oomKilled", json_true ());
  /* The operator's first question about a Guaranteed pod on a node
   * without CAP_SYS_RESOURCE: did it get -997? */
  note = json_object_get (json_object_get (spec, "annotations"), CRI_SPEC_OOM_SCORE_ADJ_ANNOTATION);
  if (json_is_string (note))
    json_object_set_new (doc, "oomScoreAdjNotApplied", json_incref (note));
  text = json_dumps (doc, JSON_COMPACT);
  json_decref (doc);
  return text;
}

static int64_t
int_at (json_t *obj, const char *key)
{
  return json_integer_value (json_object_get (obj, key));
}

static char *
string_at (json_t *obj, const char *key)
{
  const char *s = json_string_value (json_object_get (obj, key));

  return xstrdup (s ? s : "");
}

static void
take_hugepages (Runtime__V1__LinuxContainerResources *res, json_t *limits)
{
  json_t *limit;
  size_t i;

  res->hugepage_limits = xcalloc (json_array_size (limits) + 1, sizeof *res->hugepage_limits);
  json_array_foreach (limits, i, limit)
  {
    Runtime__V1__HugepageLimit *h = xcalloc (1, sizeof *h);

    runtime__v1__hugepage_limit__init (h);
    h->page_size = string_at (limit, "pageSize");
    h->limit = (uint64_t) int_at (limit, "limit");
    res->hugepage_limits[res->n_hugepage_limits++] = h;
  }
}

static void
take_unified (Runtime__V1__LinuxContainerResources *res, json_t *unified)
{
  const char *key;
  json_t *value;

  res->unified = xcalloc (json_object_size (unified) + 1, sizeof *res->unified);
  json_object_foreach (unified, key, value)
  {
    Runtime__V1__LinuxContainerResources__UnifiedEntry *e = xcalloc (1, sizeof *e);

    runtime__v1__linux_container_resources__unified_entry__init (e);
    e->key = xstrdup (key);
    e->value = xstrdup (json_is_string (value) ? json_string_value (value) : "");
    res->unified[res->n_unified++] = e;
  }
}

Runtime__V1__LinuxContainerResources *
cri_container_spec_resources (struct cri_service *svc, const char *id)
{
  json_t *spec = load_spec (svc, id, NULL);
  json_t *res_json = json_object_get (json_object_get (spec, "linux"), "resources");
  json_t *cpu = json_object_get (res_json, "cpu"), *memory = json_object_get (res_json, "memory");
  Runtime__V1__LinuxContainerResources *res;

  if (!json_is_object (res_json))
    {
      json_decref (spec);
      return NULL;
    }
  res = xcalloc (1, sizeof *res);
  runtime__v1__linux_container_resources__init (res);
  res->cpu_period = int_at (cpu, "period");
  res->cpu_quota = int_at (cpu, "quota");
  res->cpu_shares = int_at (cpu, "shares");
  res->cpuset_cpus = string_at (cpu, "cpus");
  res->cpuset_mems = string_at (cpu, "mems");
  res->memory_limit_in_bytes = int_at (memory, "limit");
  res->memory_swap_limit_in_bytes = int_at (memory, "swap");
  res->oom_score_adj = int_at (json_object_get (spec, "process"), "oomScoreAdj");
  take_hugepages (res, json_object_get (res_json, "hugepageLimits"));
  take_unified (res, json_object_get (res_json, "unified"));
  json_decref (spec);
  return res;
}

/* runc and crun keep no state husk can read: the bundle's cgroupsPath,
 * resolved the way husk resolves it on this host. */
char *
cri_bundle_cgroup (struct cri_service *svc, const char *id)
{
  cleanup_free char *bundle = containers_bundle_dir (svc->cfg->root, id);
  cleanup_free char *config_path = xasprintf ("%s/config.json", bundle);
  json_t *config = json_load_file (config_path, 0, NULL);
  const char *cgroups_path
      = json_string_value (json_object_get (json_object_get (config, "linux"), "cgroupsPath"));
  struct husk_error *ignored = NULL;
  char *path = NULL;

  if (cri_nonempty (cgroups_path) && cgroup_resolve (cgroups_path, id, false, &path, &ignored) < 0)
    husk_error_free (&ignored);
  json_decref (config);
  return path;
}
