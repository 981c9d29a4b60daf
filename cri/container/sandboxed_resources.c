/* UpdateContainerResources for a pod its runtime handler owns.  runsc
 * (2022) has no `update` verb, and on the host a gVisor pod is one
 * sandbox: the sentry holds every container's memory and runs every
 * container's threads, all in the cgroup runsc made from the infra
 * container's cgroupsPath.  So a limit is enforced there, as the pod's
 * total, and recorded in the container's own cgroup (runsc makes one per
 * container, with no process in it), where kubelet's cAdvisor looks. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cri/container/sandboxed_resources.h"
#include "cri/proto/api.pb-c.h"
#include "cri/spec/cri_spec.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"

typedef Runtime__V1__LinuxContainerResources Resources;

struct sum_job
{
  const char *sandbox_id, *updated;
  struct sandboxed_pod_limits *out;
};

/* Sums saturate: a client's huge limits make the pod's total "no limit"
 * (memory at INT64_MAX, which the kernel takes as such; quota -1), never
 * an overflow. */
static void
add_saturating (int64_t *sum, int64_t value, int64_t on_overflow)
{
  if (*sum >= 0 && __builtin_add_overflow (*sum, value, sum))
    *sum = on_overflow;
}

static void
add_container (struct sandboxed_pod_limits *out, const Resources *res)
{
  int64_t period = res && res->cpu_period > 0 ? res->cpu_period : SANDBOXED_CPU_PERIOD;
  int64_t scaled;

  if (res == NULL || res->memory_limit_in_bytes <= 0)
    out->memory = -1;
  else
    add_saturating (&out->memory, res->memory_limit_in_bytes, INT64_MAX);
  if (res && res->cpu_shares > 0)
    add_saturating (&out->shares, res->cpu_shares, INT64_MAX);
  if (res == NULL || res->cpu_quota <= 0
      || __builtin_mul_overflow (res->cpu_quota, (int64_t) SANDBOXED_CPU_PERIOD, &scaled))
    out->quota = -1;
  else
    add_saturating (&out->quota, scaled / period, -1);
}

static void
sum_records (const struct cri_container *const *records, size_t n, void *arg)
{
  struct sum_job *job = arg;

  for (size_t i = 0; i < n; i++)
    {
      const struct cri_container *c = records[i];

      if (strcmp (c->id, job->updated) == 0 || c->state != CRI_CONTAINER_RUNNING || c->sandbox_id == NULL
          || strcmp (c->sandbox_id, job->sandbox_id) != 0)
        continue;
      add_container (job->out, c->config && c->config->linux ? c->config->linux->resources : NULL);
    }
}

int
sandboxed_pod_limits (struct container_store *store, const char *sandbox_id, const char *updated,
                      const Resources *res, struct sandboxed_pod_limits *out, struct husk_error **err)
{
  struct sum_job job = { .sandbox_id = sandbox_id, .updated = updated, .out = out };

  *out = (struct sandboxed_pod_limits){ 0 };
  add_container (out, res);
  return container_store_read (store, sum_records, &job, err);
}

/* The cgroup runsc made for ID under the pod's CGROUP_PARENT (the same
 * cgroupsPath husk gave it), or NULL when it gave none. */
static int
runsc_cgroup (const char *cgroup_parent, const char *id, char **path, struct husk_error **err)
{
  cleanup_free char *cgroups_path = cri_spec_cgroups_path (cgroup_parent, id);

  *path = NULL;
  if (cgroups_path == NULL)
    return 0;
  return cgroup_resolve (cgroups_path, id, false, path, err);
}

static int
write_cgroup (const char *path, json_t *resources, const char *where, struct husk_error **err)
{
  struct cgroup_resources parsed;
  int ret = cgroup_resources_parse (resources, where, &parsed, err);

  if (ret == 0)
    ret = cgroup_resources_write (path, &parsed, err);
  cgroup_resources_clear (&parsed);
  return ret;
}

/* v2 OOM-kills the pod when memory.max goes below its usage, and v1
 * reclaims for a while before it refuses: a total below what the sandbox
 * uses now is refused first. */
static int
check_usage (const char *path, int64_t limit, struct husk_error **err)
{
  cleanup_free char *dir = NULL;
  cleanup_free char *usage_text = NULL;
  enum cgroup_version version = cgroup_locate (path, "memory", &dir);
  long long usage;

  if (limit < 0 || version == CGROUP_NONE)
    return 0;
  usage_text = cgroup_read_file (dir, version == CGROUP_V1 ? "memory.usage_in_bytes" : "memory.current");
  if (usage_text == NULL || sscanf (usage_text, "%lld", &usage) != 1 || limit >= usage)
    return 0;
  return husk_error_kind (err, EAGAIN,
                          "linux.memory_limit_in_bytes: the pod's total %lld bytes is below what its "
                          "sandbox uses now (%lld bytes in `%s`)",
                          (long long) limit, usage, dir);
}

static json_t *
pod_resources (const struct sandboxed_pod_limits *pod)
{
  json_t *cpu = json_pack ("{s:I, s:I}", "quota", (json_int_t) pod->quota, "period",
                           (json_int_t) SANDBOXED_CPU_PERIOD);

  if (pod->shares > 0)
    json_object_set_new (cpu, "shares", json_integer (pod->shares < 262144 ? pod->shares : 262144));
  return json_pack ("{s:{s:I}, s:o}", "memory", "limit", (json_int_t) pod->memory, "cpu", cpu);
}

/* Memory and CPU time only: runsc makes the container no cpuset,
 * hugetlb or other cgroup, and the sandbox enforces no per-container
 * cpuset, hugepage or unified limit. */
static json_t *
container_resources (const Resources *res)
{
  json_t *all = cri_spec_resources (res);
  json_t *kept = json_object ();
  json_t *cpu = json_object_get (all, "cpu");

  if (json_object_get (all, "memory"))
    json_object_set (kept, "memory", json_object_get (all, "memory"));
  if (cpu)
    {
      json_object_del (cpu, "cpus");
      json_object_del (cpu, "mems");
      if (json_object_size (cpu))
        json_object_set (kept, "cpu", cpu);
    }
  json_decref (all);
  return kept;
}

int
sandboxed_resources_apply (struct container_store *store, const char *cgroup_parent, const char *sandbox_id,
                           const char *id, const Resources *res, struct husk_error **err)
{
  cleanup_free char *sandbox_cgroup = NULL;
  cleanup_free char *own_cgroup = NULL;
  struct sandboxed_pod_limits pod;
  json_t *wanted;
  int ret;

  if (runsc_cgroup (cgroup_parent, sandbox_id, &sandbox_cgroup, err) < 0
      || runsc_cgroup (cgroup_parent, id, &own_cgroup, err) < 0)
    return -1;
  if (sandbox_cgroup == NULL || !cgroup_exists (sandbox_cgroup))
    return husk_error_kind (err, EAGAIN,
                            "pod %s has no cgroup of its sandbox to hold the limits (a pod without "
                            "linux.cgroup_parent: runsc made none)",
                            sandbox_id);
  if (sandboxed_pod_limits (store, sandbox_id, id, res, &pod, err) < 0
      || check_usage (sandbox_cgroup, pod.memory, err) < 0)
    return -1;
  wanted = pod_resources (&pod);
  ret = write_cgroup (sandbox_cgroup, wanted, "the pod's sandbox cgroup", err);
  json_decref (wanted);
  if (ret < 0 || own_cgroup == NULL || !cgroup_exists (own_cgroup))
    return ret;
  wanted = container_resources (res);
  ret = write_cgroup (own_cgroup, wanted, "linux", err);
  json_decref (wanted);
  return ret;
}
