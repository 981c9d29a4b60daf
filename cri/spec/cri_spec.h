/* CRI ContainerConfig + the pod sandbox + the image config -> OCI runtime
 * config: what kubelet asks for, in runtime-spec terms.  Built on ocispec
 * (process, user, env) and pure apart from reading the image's /etc files,
 * host paths of mounts and devices, a Localhost seccomp profile and the
 * list of loaded AppArmor profiles. */
#ifndef HUSK_CRI_CRI_SPEC_H
#define HUSK_CRI_CRI_SPEC_H

#include <jansson.h>
#include <stdbool.h>

#include "husk/error.h"
#include "image/images.h"

/* Tags of the protobuf-c messages (cri/proto/api.pb-c.h), so that this
 * header does not need the generated include path. */
struct Runtime__V1__ContainerConfig;
struct Runtime__V1__LinuxContainerResources;
struct cri_userns;
struct cri_apparmor;

/* What a container takes from its pod.  A NULL namespace path means the
 * host's namespace (the pod runs with NODE mode for it). */
struct cri_spec_sandbox
{
  const char *id;
  const char *hostname;
  const char *netns_path, *ipcns_path, *utsns_path;
  const char *userns_path;         /* the pod's user namespace, or NULL: the host's */
  const struct cri_userns *userns; /* its mappings (NULL: none), checked against the container's */
  const char *pidns_path;          /* the pod's shared pid namespace, or NULL */
  bool host_pid;                   /* the pod's pid mode is NODE */
  const char *hostname_path, *hosts_path, *resolv_conf_path; /* NULL: not mounted */
  const char *shm_path;      /* the pod's /dev/shm to bind; NULL: a tmpfs of the container's own */
  const char *cgroup_parent; /* NULL: none */
};

struct cri_spec_input
{
  const char *container_id;
  const struct Runtime__V1__ContainerConfig *config;
  struct cri_spec_sandbox sandbox;
  const struct image_config *image;
  const char *image_name; /* for annotations; may be NULL */
  const char *rootfs;     /* absolute; its /etc files resolve run_as_username */
  /* pid namespace of namespace_options.target_id (TARGET mode), found by
   * the caller; NULL when there is none. */
  const char *target_pidns_path;
  /* huskd's config: the capabilities a container starts from (names as
   * "CAP_X"; NULL: the built-in default set), and RuntimeDefault's seccomp
   * profile (NULL: the built-in one, fitted to the container's caps). */
  const char *const *default_capabilities;
  const json_t *seccomp_default;
  /* What huskd found of AppArmor at start (cri/apparmor.h); NULL: off. */
  const struct cri_apparmor *apparmor;
};

/* On a container whose oom_score_adj could not be set as asked (lowering
 * it needs CAP_SYS_RESOURCE): "asked -997, kept 0: ...". */
#define CRI_SPEC_OOM_SCORE_ADJ_ANNOTATION "io.husk.oom-score-adj"

/* Builds the OCI config.  Bad input fails with errnum EINVAL (or the
 * errno of a missing host path) and a message naming the CRI field:
 * `mounts[1].host_path `/x`: No such file or directory`. */
int cri_spec_build (const struct cri_spec_input *in, json_t **out, struct husk_error **err);

/* CRI resources as OCI linux.resources (cpu, memory, hugepageLimits,
 * unified; no devices): a new object, empty for NULL.  Zero fields are
 * left out, as kubelet means "not set" by them. */
json_t *cri_spec_resources (const struct Runtime__V1__LinuxContainerResources *res);

/* linux.cgroupsPath for container ID under PARENT: "<parent>/<id>", or
 * when PARENT is a slice the path systemd would give its scope
 * ("/a.slice/a-b.slice/husk-<id>.scope" for "a-b.slice"), which every
 * runtime's cgroupfs manager takes alike; NULL parent: NULL. */
char *cri_spec_cgroups_path (const char *parent, const char *id);

/* "CAP_NET_ADMIN" for "net_admin", "NET_ADMIN" or "CAP_NET_ADMIN"; NULL
 * for a name the kernel does not know. */
char *cri_spec_capability_name (const char *name);

#endif
