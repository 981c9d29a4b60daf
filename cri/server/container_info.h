/* What verbose ContainerStatus (crictl inspect) adds: info["info"], in
 * containerd's layout (sandboxID, pid, runtimeSpec, config, ...), and the
 * resources of a container created without any, read back from its
 * bundle's OCI linux.resources. */
#ifndef HUSK_CRI_CONTAINER_INFO_H
#define HUSK_CRI_CONTAINER_INFO_H

#include "cri/container/container_store.h"
#include "cri/server/service.h"

/* The JSON text of info["info"] (malloc'd). */
char *cri_container_info_json (struct cri_service *svc, const struct cri_container *c);

/* The bundle's linux.resources (and process.oomScoreAdj) as CRI
 * resources; NULL when the bundle has none.  Free with
 * runtime__v1__linux_container_resources__free_unpacked. */
Runtime__V1__LinuxContainerResources *cri_container_spec_resources (struct cri_service *svc, const char *id);

/* The cgroup directory the container's bundle names (cgroupsPath resolved
 * as the runtime resolves it), or NULL. */
char *cri_bundle_cgroup (struct cri_service *svc, const char *id);

#endif
