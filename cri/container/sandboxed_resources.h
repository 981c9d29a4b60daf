/* New limits for a running container of a pod its runtime handler owns
 * (gVisor's runsc 2022, which has no `update`): written by husk itself
 * into the cgroups runsc made, the container's own and the sandbox's. */
#ifndef HUSK_CRI_CONTAINER_SANDBOXED_RESOURCES_H
#define HUSK_CRI_CONTAINER_SANDBOXED_RESOURCES_H

#include <stdint.h>

#include "cri/container/container_store.h"
#include "husk/error.h"

struct Runtime__V1__LinuxContainerResources;

/* The pod's limits: the sum over its running containers, each counted with
 * its recorded resources except UPDATED, counted with RES. */
struct sandboxed_pod_limits
{
  int64_t memory; /* bytes; -1: some container has no limit */
  int64_t shares; /* 0: none of them sets cpu shares */
  int64_t quota;  /* microseconds per SANDBOXED_CPU_PERIOD; -1: some has none */
};

#define SANDBOXED_CPU_PERIOD 100000

int sandboxed_pod_limits (struct container_store *store, const char *sandbox_id, const char *updated,
                          const struct Runtime__V1__LinuxContainerResources *res,
                          struct sandboxed_pod_limits *out, struct husk_error **err);

/* Applies RES (the container's merged resources) to running container ID
 * of pod SANDBOX_ID, whose cgroups runsc made from the pod's CGROUP_PARENT:
 * the pod's totals go to the sandbox's cgroup, where the sentry and so
 * every process of the pod is charged (that is what enforces them), then
 * RES itself to the container's own cgroup (runsc's empty one, which
 * cAdvisor reads), if it exists: memory and CPU time only.  A value the
 * kernel refuses for the sandbox changes nothing. */
int sandboxed_resources_apply (struct container_store *store, const char *cgroup_parent,
                               const char *sandbox_id, const char *id,
                               const struct Runtime__V1__LinuxContainerResources *res,
                               struct husk_error **err);

#endif
