/* The container RPCs of runtime.v1: create (rootfs snapshot + OCI bundle
 * from cri_spec), start (husk-monitor runs `RUNTIME create`, then huskd
 * runs `RUNTIME start`), stop, remove, status, list, ExecSync and log
 * reopening; the hooks that stop or remove a pod's containers; and the
 * container events of GetContainerEvents (cri/container/events.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cri/container/attach.h"
#include "cri/container/checkpoint_archive.h"
#include "cri/cdi/cdi.h"
#include "cri/server/container_lost.h"
#include "cri/server/container_info.h"
#include "cri/container/container_store.h"
#include "cri/container/containers.h"
#include "cri/container/exec_leftovers.h"
#include "cri/container/exec_sync.h"
#include "cri/container/sandboxed_resources.h"
#include "cri/spec/cri_spec.h"
#include "cri/spec/proto_copy.h"
#include "cri/container/events.h"
#include "cri/config/runtime_exec.h"
#include "cri/pod/sandbox.h"
#include "cri/server/service.h"
#include "cri/config/runtime_probe.h"
#include "husk/cleanup.h"
#include "husk/in_root.h"
#include "husk/util.h"
#include "image/images.h"
#include "image/snapshot.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/container.h"

#define EXEC_OUTPUT_MAX (16 * 1024 * 1024)
#define MONITOR_REPORT_TIMEOUT_MS 60000
/* After SIGKILL the monitor needs a moment to reap and write the exit file. */
#define KILL_GRACE_MS 10000

/* ------------------------------------------------------------------ */
/* the store, opened once                                               */

static int pod_stop_hook (struct cri_service *svc, const char *sandbox_id, struct husk_error **err);
static int pod_remove_hook (struct cri_service *svc, const char *sandbox_id, struct husk_error **err);
static void recover_containers (struct cri_service *svc);
static void rebuild_hook (struct container_store *store, struct cri_container *c, void *user);

int
cri_containers_init (struct cri_service *svc, struct husk_error **err)
{
  if (container_store_open (svc->cfg->root, svc->cfg->state, &svc->containers, err) < 0)
    return -1;
  svc->stop_pod_containers = pod_stop_hook;
  svc->remove_pod_containers = pod_remove_hook;
  container_store_set_rebuild (svc->containers, rebuild_hook, svc);
  recover_containers (svc);
  /* Execs a killed huskd left running: their clients are gone. */
  cri_exec_leftovers_recover (svc->cfg->state);
  return 0;
}

void
cri_containers_clear (struct cri_service *svc)
{
  container_store_free (svc->containers);
  svc->containers = NULL;
}

/* The events of a container's transitions (the end of this file). */

/* ------------------------------------------------------------------ */
/* CreateContainer                                                      */

static Runtime__V1__ContainerConfig *
config_copy (const Runtime__V1__ContainerConfig *config)
{
  return (Runtime__V1__ContainerConfig *) cri_message_copy (&config->base);
}

/* The pod's pinned user namespace, for its containers' idmapped rootfs. */
static int
open_pod_userns (const struct sandbox *sb, const struct cri_userns *userns, struct snapshot_idmap *idmap,
                 struct husk_error **err)
{
  if (sb->userns_path == NULL)
    return husk_error_kind (err, EINVAL, "pod sandbox %s has user namespace mappings but no user namespace",
                            sb->id);
  idmap->userns_fd = open (sb->userns_path, O_RDONLY | O_CLOEXEC);
  if (idmap->userns_fd < 0)
    return husk_error_make (err, errno, "open the pod's user namespace `%s`", sb->userns_path);
  idmap->root_uid = cri_userns_root_uid (userns);
  idmap->root_gid = cri_userns_root_gid (userns);
  return 0;
}

/* NODE_NAME (HOST_NAME_MAX + 1 bytes) holds the node's hostname, the pod's
 * when its config names none (see sandbox_run.c). */
static void
spec_sandbox_of (const struct sandbox *sb, struct cri_spec_sandbox *out, char *node_name)
{
  const Runtime__V1__PodSandboxConfig *config = sb->config;
  const Runtime__V1__LinuxPodSandboxConfig *lc = config ? config->linux : NULL;
  const Runtime__V1__LinuxSandboxSecurityContext *sc = lc ? lc->security_context : NULL;

  *out = (struct cri_spec_sandbox){
    .id = sb->id,
    .hostname = config && cri_nonempty (config->hostname) ? config->hostname : NULL,
    .netns_path = sb->netns_path,
    .ipcns_path = sb->ipcns_path,
    .utsns_path = sb->utsns_path,
    .userns_path = sb->userns_path,
    .pidns_path = sb->pidns_path,
    .host_pid
    = sc && sc->namespace_options && sc->namespace_options->pid == RUNTIME__V1__NAMESPACE_MODE__NODE,
    .hostname_path = sb->hostname_path,
    .hosts_path = sb->hosts_path,
    .resolv_conf_path = sb->resolv_conf_path,
    .shm_path = sb->shm_path,
    .cgroup_parent = sb->cgroup_parent,
  };
  if (out->hostname == NULL && gethostname (node_name, HOST_NAME_MAX + 1) == 0)
    {
      node_name[HOST_NAME_MAX] = '\0';
      out->hostname = node_name;
    }
}

/* A ".." component would let a log path leave the pod's log directory. */
static bool
has_dotdot (const char *path)
{
  for (const char *p = path; (p = strstr (p, "..")) != NULL; p += 2)
    if ((p == path || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
      return true;
  return false;
}

static int
check_create_request (const Runtime__V1__CreateContainerRequest *req, struct husk_error **err)
{
  const Runtime__V1__ContainerConfig *config = req->config;

  if (!cri_nonempty (req->pod_sandbox_id))
    return husk_error_kind (err, EINVAL, "pod_sandbox_id: required");
  if (config == NULL)
    return husk_error_kind (err, EINVAL, "config: required");
  if (config->metadata == NULL || !cri_nonempty (config->metadata->name))
    return husk_error_kind (err, EINVAL, "config.metadata.name: required");
  if (config->image == NULL || !cri_nonempty (config->image->image))
    return husk_error_kind (err, EINVAL, "config.image.image: required");
  if (cri_nonempty (config->log_path) && (config->log_path[0] == '/' || has_dotdot (config->log_path)))
    return husk_error_kind (err, EINVAL, "config.log_path `%s`: must stay inside the log directory",
                            config->log_path);
  return 0;
}

static int
check_name_free (struct container_store *store, const char *sandbox_id,
                 const Runtime__V1__ContainerMetadata *meta, struct husk_error **err)
{
  cleanup_free char *holder = container_store_find_name (store, sandbox_id, meta->name, meta->attempt);

  if (holder)
    return husk_error_kind (err, EEXIST, "container `%s` attempt %u exists already in pod %s as %s",
                            meta->name, meta->attempt, sandbox_id, holder);
  return 0;
}

static char *
log_path_of (const struct sandbox *sb, const Runtime__V1__ContainerConfig *config)
{
  const char *dir = sb->config ? sb->config->log_directory : NULL;

  if (!cri_nonempty (dir) || !cri_nonempty (config->log_path))
    return xstrdup ("");
  return xasprintf ("%s/%s", dir, config->log_path);
}

/* TARGET mode: the pid namespace of another container of the pod. */
static char *
target_pidns (struct container_store *store, const Runtime__V1__ContainerConfig *config)
{
  const Runtime__V1__LinuxContainerSecurityContext *sc
      = config->linux ? config->linux->security_context : NULL;
  struct cri_container *target = NULL;
  struct husk_error *ignored = NULL;
  char *path = NULL;

  if (sc == NULL || sc->namespace_options == NULL
      || sc->namespace_options->pid != RUNTIME__V1__NAMESPACE_MODE__TARGET)
    return NULL;
  if (container_lookup (store, sc->namespace_options->target_id, &target, &ignored) == 0
      && target->state == CRI_CONTAINER_RUNNING && target->pid > 0)
    path = xasprintf ("/proc/%d/ns/pid", (int) target->pid);
  husk_error_free (&ignored);
  cri_container_free (target);
  return path;
}

struct create_job
{
  struct cri_service *svc;
  const Runtime__V1__CreateContainerRequest *req;
  struct sandbox *sb;
  struct image *image;
  struct cri_container *c;
  const char *archive; /* a checkpoint archive to restore from, or NULL */
};

/* ------------------------------------------------------------------ */
/* markers of operations in progress, for the recovery after a crash    */

/* ROOT/containers/<id>/creating: CreateContainer has not saved the
 * record yet.  .../starting: StartContainer has not saved the outcome.
 * Whoever finds one at start-up knows the operation was cut short. */
static char *
marker_path (struct cri_service *svc, const char *id, const char *marker)
{
  cleanup_free char *dir = container_store_dir (svc->containers, id);

  return xasprintf ("%s/%s", dir, marker);
}

static int
set_marker (struct cri_service *svc, const char *id, const char *marker, struct husk_error **err)
{
  cleanup_free char *dir = container_store_dir (svc->containers, id);
  cleanup_free char *path = marker_path (svc, id, marker);

  if (husk_mkdir_p (dir, 0700, err) < 0)
    return -1;
  return husk_write_file_replace (path, "", 0, 0600, err);
}

static int
clear_marker (struct cri_service *svc, const char *id, const char *marker, struct husk_error **err)
{
  cleanup_free char *path = marker_path (svc, id, marker);

  if (unlink (path) < 0 && errno != ENOENT)
    return husk_error_make (err, errno, "remove `%s`", path);
  return 0;
}

static bool
has_marker (struct cri_service *svc, const char *id, const char *marker)
{
  cleanup_free char *path = marker_path (svc, id, marker);

  return access (path, F_OK) == 0;
}

/* ------------------------------------------------------------------ */
/* CreateContainer (continued)                                          */

/* The CDI devices a container asks for: CDI_devices, then the values of
 * `cdi.k8s.io/...` annotations (comma-separated fully-qualified names, the
 * older convention); each once, in order.  NULL-terminated. */
static char **
cdi_names_of (const Runtime__V1__ContainerConfig *config)
{
  char **names = xcalloc (1, sizeof *names);

  for (size_t i = 0; i < config->n_cdi_devices; i++)
    if (config->cdi_devices[i]->name)
      cdi_names_add (&names, config->cdi_devices[i]->name);
  for (size_t i = 0; i < config->n_annotations; i++)
    {
      const Runtime__V1__ContainerConfig__AnnotationsEntry *a = config->annotations[i];
      cleanup_free char *value = NULL;

      if (a->key == NULL || strncmp (a->key, "cdi.k8s.io/", 11) != 0 || a->value == NULL)
        continue;
      value = xstrdup (a->value);
      /* An empty item ("a,,b") stays, to be refused as a malformed name. */
      for (char *p = value, *comma;; p = comma + 1)
        {
          comma = strchr (p, ',');
          if (comma)
            *comma = '\0';
          cdi_names_add (&names, p);
          if (comma == NULL)
            break;
        }
    }
  return names;
}

/* The container's own NVIDIA_VISIBLE_DEVICES (the last one), or NULL. */
static const char *
config_nvidia_env (const Runtime__V1__ContainerConfig *config)
{
  const char *found = NULL;

  for (size_t i = 0; i < config->n_envs; i++)
    if (config->envs[i]->key && strcmp (config->envs[i]->key, "NVIDIA_VISIBLE_DEVICES") == 0)
      found = config->envs[i]->value ?: "";
  return found;
}

static bool
sets_cpuset_mems (const Runtime__V1__ContainerConfig *config)
{
  const Runtime__V1__LinuxContainerResources *res = config->linux ? config->linux->resources : NULL;

  return res && res->cpuset_mems && res->cpuset_mems[0];
}

/* linux.resources.cpu.mems = the NUMA nodes of NAMES, when they have any
 * (cdi_numa_align). */
static int
align_numa (struct cri_service *svc, char *const *names, json_t *oci, struct husk_error **err)
{
  cleanup_free char *mems = NULL;
  json_t *linux_obj, *resources, *cpu;

  if (cdi_numa_nodes (svc->cdi, (const char *const *) names, &mems, err) < 0)
    return -1;
  if (mems == NULL)
    return 0;
  linux_obj = json_object_get (oci, "linux");
  if (!json_is_object (linux_obj))
    json_object_set_new (oci, "linux", linux_obj = json_object ());
  resources = json_object_get (linux_obj, "resources");
  if (!json_is_object (resources))
    json_object_set_new (linux_obj, "resources", resources = json_object ());
  cpu = json_object_get (resources, "cpu");
  if (!json_is_object (cpu))
    json_object_set_new (resources, "cpu", cpu = json_object ());
  json_object_set_new (cpu, "mems", json_string (mems));
  return 0;
}

/* The CDI devices of CONFIG plus what NVIDIA_VISIBLE_DEVICES names, then
 * applied to the OCI config (and with cdi_numa_align, the devices' NUMA
 * nodes as cpuset.mems).  Called with cdi_lock held. */
static int
apply_cdi_locked (struct cri_service *svc, const Runtime__V1__ContainerConfig *config,
                  const struct image_config *image, json_t *oci, struct husk_error **err)
{
  cleanup_strv char **names = cdi_names_of (config);
  const char *nvidia
      = cdi_nvidia_env_value (svc->cfg->nvidia_visible_devices, config_nvidia_env (config), image->env);

  if (cdi_nvidia_visible_devices (svc->cdi, nvidia, &names, err) < 0)
    return -1;
  if (names[0] == NULL)
    return 0;
  if (cdi_apply (svc->cdi, oci, (const char *const *) names, err) < 0)
    return -1;
  if (svc->cfg->cdi_numa_align && !sets_cpuset_mems (config))
    return align_numa (svc, names, oci, err);
  return 0;
}

/* Applies the CDI devices the container asks for; a name that is
 * malformed or no spec knows fails the create (INVALID_ARGUMENT). */
static int
apply_cdi (struct cri_service *svc, const Runtime__V1__ContainerConfig *config,
           const struct image_config *image, json_t *oci, struct husk_error **err)
{
  struct husk_error *cdi_err = NULL;
  int ret;

  pthread_mutex_lock (&svc->cdi_lock);
  ret = apply_cdi_locked (svc, config, image, oci, &cdi_err);
  pthread_mutex_unlock (&svc->cdi_lock);
  if (ret < 0)
    {
      husk_error_kind (err, EINVAL, "%s", cdi_err->msg);
      husk_error_free (&cdi_err);
    }
  return ret;
}

static int
build_bundle (struct create_job *job, struct husk_error **err)
{
  struct container_store *store = job->svc->containers;
  const char *root = job->svc->cfg->root;
  cleanup_free char *rootfs = NULL, *bundle = containers_bundle_dir (root, job->c->id);
  cleanup_free char *target = target_pidns (store, job->req->config);
  struct cri_spec_input in = {
    .container_id = job->c->id,
    .config = job->req->config,
    .image = &job->image->config,
    .image_name = job->req->config->image->image,
    .target_pidns_path = target,
    .default_capabilities = (const char *const *) job->svc->cfg->default_capabilities,
    .seccomp_default = job->svc->cfg->seccomp_default,
    .apparmor = &job->svc->apparmor,
  };
  json_t *config = NULL;
  char node_name[HOST_NAME_MAX + 1];
  struct cri_userns userns;
  struct snapshot_idmap idmap = { .userns_fd = -1 };
  int ret;

  spec_sandbox_of (job->sb, &in.sandbox, node_name);
  if (sandbox_userns (job->sb->config, &userns, err) < 0)
    return -1;
  in.sandbox.userns = &userns;
  if (userns.pod && open_pod_userns (job->sb, &userns, &idmap, err) < 0)
    return -1;
  ret = set_marker (job->svc, job->c->id, "creating", err);
  if (ret == 0)
    ret = containers_prepare_rootfs (root, job->c->id, job->image, false, userns.pod ? &idmap : NULL, &rootfs,
                                     err);
  husk_closep (&idmap.userns_fd);
  if (ret < 0)
    return -1;
  in.rootfs = rootfs;
  if (cri_spec_build (&in, &config, err) < 0)
    return -1;
  ret = apply_cdi (job->svc, job->req->config, &job->image->config, config, err);
  if (ret == 0)
    ret = containers_write_config (bundle, config, err);
  json_decref (config);
  if (ret < 0 || container_save (store, job->c, true, err) < 0)
    return -1;
  /* A marker left would have the next restart undo this create. */
  return clear_marker (job->svc, job->c->id, "creating", err);
}

static struct cri_container *
new_record (const struct create_job *job)
{
  const Runtime__V1__ContainerConfig *config = job->req->config;
  struct cri_container *c = xcalloc (1, sizeof *c);

  c->id = containers_new_id ();
  c->sandbox_id = xstrdup (job->sb->id);
  c->name = xstrdup (config->metadata->name);
  c->attempt = config->metadata->attempt;
  c->image = xstrdup (config->image->image);
  c->image_id = xstrdup (job->image->id);
  c->image_ref = xstrdup (job->image->repo_digests[0] ?: job->image->id);
  c->runtime_handler = xstrdup (job->sb->runtime_handler ?: "");
  c->log_path = log_path_of (job->sb, config);
  c->stop_signal = job->image->config.stop_signal ? xstrdup (job->image->config.stop_signal) : NULL;
  c->state = CRI_CONTAINER_CREATED;
  c->created_at = cri_now_ns ();
  c->config = config_copy (config);
  return c;
}

/* A `RUNTIME create` killed before it wrote its state (huskd and the
 * monitor died mid-start) leaves the cgroup directories it made, in every
 * hierarchy, where `delete` cannot find them: the bundle still names them.
 * Anything still in it is what that create had cloned, and is killed. */
static void
remove_crashed_cgroup (struct cri_service *svc, const char *id)
{
  cleanup_free char *cgroup = cri_bundle_cgroup (svc, id);
  struct husk_error *ignored = NULL;

  /* A bundle without linux.cgroupsPath (a pod without cgroup_parent):
   * husk's own default place, ROOT_CGROUP/husk/ID. */
  if (cgroup == NULL && cgroup_resolve (NULL, id, false, &cgroup, &ignored) < 0)
    husk_error_free (&ignored);
  if (cgroup == NULL || !cgroup_exists (cgroup))
    return;
  if (cgroup_kill_all (cgroup, SIGKILL, &ignored) < 0)
    husk_error_free (&ignored);
  if (cgroup_destroy (cgroup, &ignored) < 0)
    {
      husk_warn ("container %s: %s", id, ignored->msg);
      husk_error_free (&ignored);
    }
}

static void
undo_create (struct cri_service *svc, const char *id)
{
  cleanup_free char *bundle = containers_bundle_dir (svc->cfg->root, id);
  cleanup_free char *dir = container_store_dir (svc->containers, id);
  struct husk_error *ignored = NULL;

  remove_crashed_cgroup (svc, id);
  husk_rm_rf (bundle, &ignored);
  husk_error_free (&ignored);
  snapshot_remove_container (svc->cfg->root, id, &ignored);
  husk_error_free (&ignored);
  container_forget (svc->containers, id, &ignored);
  husk_error_free (&ignored);
  /* The marker and whatever else the create made there. */
  husk_rm_rf (dir, &ignored);
  husk_error_free (&ignored);
}

/* What a create in progress claims: its pod, name and attempt. */
static char *
create_key (const char *sandbox_id, const Runtime__V1__ContainerMetadata *meta)
{
  return xasprintf ("create:%s/%s/%u", sandbox_id, meta->name, meta->attempt);
}

/* Under the store lock: the name is neither taken by a record nor by a
 * create in progress, and is claimed for this one. */
static int
claim_name (struct container_store *store, const char *key, const char *sandbox_id,
            const Runtime__V1__ContainerMetadata *meta, struct husk_error **err)
{
  int ret = 0;

  pthread_mutex_lock (&store->lock);
  if (container_store_claimed (store, key))
    ret = husk_error_kind (err, EEXIST, "container `%s` attempt %u is being created in pod %s", meta->name,
                           meta->attempt, sandbox_id);
  else if ((ret = check_name_free (store, sandbox_id, meta, err)) == 0)
    container_store_claim (store, key);
  pthread_mutex_unlock (&store->lock);
  return ret;
}

/* What a handler that owns the pod (runsc) cannot give a container: the
 * host's devices and capabilities (privileged), a CRIU restore. */
static int
check_pod_owner (const struct huskd_runtime *rt, const Runtime__V1__CreateContainerRequest *req,
                 struct husk_error **err)
{
  const Runtime__V1__ContainerConfig *config = req->config;

  if (rt == NULL || !rt->owns_pod)
    return 0;
  if (config->linux && config->linux->security_context && config->linux->security_context->privileged)
    return husk_error_kind (
        err, EINVAL,
        "config.linux.security_context.privileged: runtime handler `%s` runs the pod in its "
        "own sandbox and refuses privileged containers",
        rt->name);
  if (cri_is_checkpoint_archive (config->image->image))
    return husk_error_kind (
        err, EINVAL, "config.image.image: restoring a checkpoint is not supported with runtime handler `%s`",
        rt->name);
  return 0;
}

/* Outside the store lock once the name is claimed: creates overlap, and
 * the pod hooks wait for those of their pod. */
static int
create_container (struct create_job *job, char **id, struct husk_error **err)
{
  const Runtime__V1__CreateContainerRequest *req = job->req;
  cleanup_free char *key = NULL;
  cleanup_free char *archive_image = NULL;
  int ret;

  if (check_create_request (req, err) < 0)
    return -1;
  if (sandbox_lookup (job->svc->sandboxes, req->pod_sandbox_id, &job->sb, err) < 0)
    return -1;
  if (job->sb->state != SANDBOX_READY)
    return husk_error_kind (err, EAGAIN, "pod sandbox %s is not ready", job->sb->id);
  if (cri_runtime_usable (huskd_config_runtime (job->svc->cfg, job->sb->runtime_handler), "CreateContainer",
                          err)
          < 0
      || check_pod_owner (huskd_config_runtime (job->svc->cfg, job->sb->runtime_handler), req, err) < 0)
    return -1;
  if (cri_is_checkpoint_archive (req->config->image->image))
    {
      if (cri_checkpoint_archive_image (req->config->image->image, &archive_image, err) < 0)
        return -1;
      job->archive = req->config->image->image;
    }
  if (images_lookup (job->svc->cfg->root, archive_image ?: req->config->image->image, &job->image, err) < 0)
    return husk_error_wrap (err, "config.image.image `%s`", archive_image ?: req->config->image->image);
  key = create_key (job->sb->id, req->config->metadata);
  if (claim_name (job->svc->containers, key, job->sb->id, req->config->metadata, err) < 0)
    return -1;
  job->c = new_record (job);
  ret = build_bundle (job, err);
  if (ret == 0 && job->archive)
    ret = cri_restore_prepare (job->svc, job->c->id, job->archive, err);
  if (ret < 0)
    undo_create (job->svc, job->c->id);
  else
    {
      cri_note_created (job->svc, job->c);
      *id = xstrdup (job->c->id);
    }
  pthread_mutex_lock (&job->svc->containers->lock);
  container_store_release (job->svc->containers, key);
  pthread_mutex_unlock (&job->svc->containers->lock);
  return ret;
}

void
cri_create_container (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__CreateContainerRequest *req
      = cri_unpack (call, &runtime__v1__create_container_request__descriptor, req_bytes, len);
  struct create_job job = { .svc = svc, .req = req };
  Runtime__V1__CreateContainerResponse resp = RUNTIME__V1__CREATE_CONTAINER_RESPONSE__INIT;
  struct husk_error *err = NULL;
  char *id = NULL;
  int ret;

  if (req == NULL)
    return;
  ret = create_container (&job, &id, &err);
  if (ret < 0)
    cri_fail (call, &err);
  else
    {
      resp.container_id = id;
      cri_reply (call, &resp.base);
    }
  free (id);
  sandbox_free (job.sb);
  image_free (job.image);
  cri_container_free (job.c);
  runtime__v1__create_container_request__free_unpacked (req, NULL);
}

/* ------------------------------------------------------------------ */
/* StartContainer                                                       */

/* The monitor's one report line: {"pid", "monitor_pid"} or {"error"}. */
static int
parse_monitor_report (const char *line, struct cri_container *c, struct husk_error **err)
{
  json_t *doc = line ? json_loads (line, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
  const char *error = json_string_value (json_object_get (doc, "error"));
  int ret = 0;

  if (doc == NULL)
    ret = husk_error_make (err, 0, "husk-monitor for %s: no report", c->id);
  else if (error)
    ret = husk_error_make (err, 0, "create container %s: %s", c->id, error);
  else
    {
      c->pid = (pid_t) json_integer_value (json_object_get (doc, "pid"));
      c->monitor_pid = (pid_t) json_integer_value (json_object_get (doc, "monitor_pid"));
      /* Both wait for us now (the init for `start`): their start times
       * tell them from a later process with the same pid. */
      c->pid_start = cri_proc_start (c->pid);
      c->monitor_start = cri_proc_start (c->monitor_pid);
    }
  json_decref (doc);
  return ret;
}

/* The pod's log dir that C's log_path lies in (log_directory), or NULL
 * when the log is huskd's own. */
static char *
pod_log_dir_of (const struct cri_container *c)
{
  const char *rel = c->config ? c->config->log_path : NULL;
  size_t len, rel_len;

  if (!cri_nonempty (c->log_path) || !cri_nonempty (rel))
    return NULL;
  len = strlen (c->log_path);
  rel_len = strlen (rel);
  if (rel_len + 1 >= len || strcmp (c->log_path + len - rel_len, rel) != 0
      || c->log_path[len - rel_len - 1] != '/')
    return NULL;
  return xasprintf ("%.*s", (int) (len - rel_len - 1), c->log_path);
}

/* The directories a log file needs: below the pod's log dir POD_DIR, those
 * of REL created one by one with none a symlink (a link planted there
 * would have huskd make directories anywhere on the host); without one,
 * LOG_PATH's parent. */
static int
make_log_dirs (const char *pod_dir, const char *rel, char *log_path, struct husk_error **err)
{
  cleanup_close int dir_fd = -1;
  cleanup_free char *rel_dir = NULL;
  const char *slash;

  if (pod_dir == NULL)
    return husk_mkdir_p (dirname (log_path), 0755, err);
  if (husk_mkdir_p (pod_dir, 0755, err) < 0)
    return -1;
  if ((slash = strrchr (rel, '/')) == NULL)
    return 0;
  dir_fd = open (pod_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0)
    return husk_error_make (err, errno, "open log dir `%s`", pod_dir);
  rel_dir = xasprintf ("%.*s", (int) (slash - rel), rel);
  if (husk_mkdir_beneath (dir_fd, rel_dir, 0755, err) < 0)
    return husk_error_wrap (err, "config.log_path `%s` in log dir `%s`", rel, pod_dir);
  return 0;
}

/* ARGV (N strings) and a --runtime-arg for each of RT's global flags. */
static const char **
with_runtime_args (const char *const *argv, size_t n, const struct huskd_runtime *rt)
{
  size_t n_flags = husk_strv_len (rt->args);
  const char **all = xcalloc (n + 2 * n_flags + 1, sizeof *all);

  memcpy (all, argv, n * sizeof *all);
  for (size_t i = 0; i < n_flags; i++)
    all[n + 2 * i] = "--runtime-arg", all[n + 2 * i + 1] = rt->args[i];
  return all;
}

static int
start_monitor (struct cri_service *svc, struct cri_container *c, const struct huskd_runtime *rt,
               struct husk_error **err)
{
  cleanup_free char *monitor = cri_helper_path ("husk-monitor");
  cleanup_free char *bundle = containers_bundle_dir (svc->cfg->root, c->id);
  cleanup_free char *dir = container_store_dir (svc->containers, c->id);
  cleanup_free char *internal_log = xasprintf ("%s/container.log", dir);
  cleanup_free char *monitor_log = xasprintf ("%s/monitor.log", dir);
  const char *log_path = cri_nonempty (c->log_path) ? c->log_path : internal_log;
  cleanup_free char *log_dir = xstrdup (log_path);
  cleanup_free char *pod_log_dir = pod_log_dir_of (c);
  /* STATE/exits/<id>.attach: CRI Attach connects there (cri/container/attach.h). */
  cleanup_free char *attach_socket = cri_attach_socket_path (svc->cfg->state, c->id);
  const char *argv[] = { monitor,
                         "--id",
                         c->id,
                         "--bundle",
                         bundle,
                         "--log-path",
                         log_path,
                         "--exit-dir",
                         svc->containers->exit_dir,
                         "--runtime",
                         rt->path,
                         "--runtime-root",
                         rt->root,
                         "--monitor-log",
                         monitor_log,
                         "--attach-socket",
                         attach_socket,
                         NULL, /* --terminal */
                         NULL, /* --stdin */
                         NULL, /* --restore */
                         NULL, /* its dir */
                         NULL, /* --log-dir */
                         NULL, /* the pod's log dir */
                         NULL, /* --start-and-wait */
                         NULL };
  size_t n_argv = 17;
  cleanup_free const char **all_argv = NULL;
  cleanup_free char *restore = cri_restore_images (svc, c->id);
  struct cri_child_run run
      = { .argv = (char *const *) argv, .timeout_ms = MONITOR_REPORT_TIMEOUT_MS, .output_max = 65536 };
  int ret;

  /* The spec's process.terminal is config.tty (cri_spec.c); a stdin is a
   * pipe (or the terminal) the monitor holds, written through the attach
   * socket. */
  if (c->config && c->config->tty)
    argv[n_argv++] = "--terminal";
  if (c->config && c->config->stdin)
    argv[n_argv++] = "--stdin";
  if (restore)
    {
      argv[n_argv++] = "--restore";
      argv[n_argv++] = restore;
    }

  if (pod_log_dir)
    {
      argv[n_argv++] = "--log-dir";
      argv[n_argv++] = pod_log_dir;
    }
  if (rt->owns_pod)
    argv[n_argv++] = "--start-and-wait";
  all_argv = with_runtime_args (argv, n_argv, rt);
  run.argv = (char *const *) all_argv;
  if (make_log_dirs (pod_log_dir, c->config ? c->config->log_path : NULL, log_dir, err) < 0)
    return -1;
  if (cri_child_run (&run, err) < 0)
    return -1;
  ret = run.timed_out ? husk_error_make (err, 0, "husk-monitor for %s: no report in time", c->id)
                      : parse_monitor_report (run.out[0].data, c, err);
  if (ret < 0 && run.out[1].data)
    husk_error_wrap (err, "%s", run.out[1].data);
  cri_child_run_clear (&run);
  return ret;
}

/* runsc ignores a joining container's linux.resources: the pod's total
 * with this container's limits goes into the sandbox's cgroup now, as an
 * update puts it (cri/container/sandboxed_resources.c).  A total the
 * sandbox is already past is a warning: the container runs, as it would
 * under containerd's runsc. */
static void
apply_sandboxed_limits (struct cri_service *svc, const struct cri_container *c)
{
  const Runtime__V1__LinuxContainerResources *res
      = c->config && c->config->linux ? c->config->linux->resources : NULL;
  struct sandbox *sb = NULL;
  struct husk_error *err = NULL;

  if (sandbox_lookup (svc->sandboxes, c->sandbox_id, &sb, &err) < 0
      || (cri_nonempty (sb->cgroup_parent)
          && sandboxed_resources_apply (svc->containers, sb->cgroup_parent, sb->id, c->id, res, &err) < 0))
    {
      husk_warn ("container %s: its limits are not in its sandbox's cgroup: %s", c->id, err->msg);
      husk_error_free (&err);
    }
  if (sb)
    sandbox_free (sb);
}

/* The monitor runs `RUNTIME create`, then `RUNTIME start`; the record says
 * how that went (a failed start: exited, reason StartError). */
static int
run_container (struct cri_service *svc, struct cri_container *c, const struct huskd_runtime *rt,
               struct husk_error **err)
{
  struct husk_error *ignored = NULL;
  int ret = -1;

  cleanup_free char *restore = cri_restore_images (svc, c->id);

  /* A create the runtime refused (a missing command, a bad mount) is a
   * failed start too, as containerd records it: EXITED, 128, StartError. */
  int started = start_monitor (svc, c, rt, err);

  /* Before: a short-lived container may be gone when start returns. */
  c->started_at = cri_now_ns ();
  /* A restored container runs already: no `start`. */
  /* A handler that owns the pod: the monitor ran `start` (--start-and-wait). */
  if (started < 0
      || (restore == NULL && !rt->owns_pod
          && cri_run_runtime (rt, (const char *[]){ "start", c->id, NULL }, err) < 0))
    {
      cri_run_runtime (rt, (const char *[]){ "delete", "--force", c->id, NULL }, &ignored);
      husk_error_free (&ignored);
      c->state = CRI_CONTAINER_EXITED;
      c->exit_code = 128;
      c->finished_at = cri_now_ns ();
      c->reason = xstrdup ("StartError");
      c->message = xstrdup ((*err)->msg);
    }
  else
    {
      c->state = CRI_CONTAINER_RUNNING;
      ret = 0;
      if (rt->owns_pod)
        apply_sandboxed_limits (svc, c);
    }
  /* CRIU's images are used once the runtime ran (a failed monitor
   * leaves them for RemoveContainer). */
  if (restore && started == 0)
    {
      cleanup_free char *dir = cri_restore_dir (svc, c->id);
      if (husk_rm_rf (dir, &ignored) < 0)
        husk_error_free (&ignored);
    }
  /* After a failed start the start error is the one to report. */
  if (ret == 0)
    ret = container_save (svc->containers, c, false, err);
  else if (container_save (svc->containers, c, false, &ignored) < 0)
    husk_error_free (&ignored);
  return ret;
}

/* Claims ID for the start under the store lock, or says why not; *OUT
 * the record and *RT its runtime. */
static int
claim_start (struct cri_service *svc, const char *id, struct cri_container **out,
             const struct huskd_runtime **rt, struct husk_error **err)
{
  struct container_store *store = svc->containers;
  int ret = 0;

  pthread_mutex_lock (&store->lock);
  container_store_wait_idle (store, id);
  if (container_lookup (store, id, out, err) < 0)
    ret = -1;
  else if ((*out)->state != CRI_CONTAINER_CREATED)
    ret = husk_error_kind (err, EAGAIN, "container %s is not in state created", (*out)->id);
  else if ((*rt = cri_runtime_for (svc->cfg, (*out)->runtime_handler, err)) == NULL)
    ret = -1;
  else
    container_store_claim (store, (*out)->id);
  pthread_mutex_unlock (&store->lock);
  return ret;
}

/* Outside the store lock once claimed: starts of different containers
 * overlap; remove, update and the pod hooks wait for this one. */
static int
start_container (struct cri_service *svc, const char *id, struct husk_error **err)
{
  struct cri_container *c = NULL;
  struct husk_error *ignored = NULL;
  const struct huskd_runtime *rt = NULL;
  int ret;

  if (claim_start (svc, id, &c, &rt, err) < 0)
    {
      cri_container_free (c);
      return -1;
    }
  cri_note_starting (svc, c->id);
  ret = set_marker (svc, c->id, "starting", err);
  if (ret == 0)
    ret = run_container (svc, c, rt, err);
  /* Harmless if it stays: recovery only acts on a CREATED record. */
  if (clear_marker (svc, c->id, "starting", &ignored) < 0)
    {
      husk_warn ("%s", ignored->msg);
      husk_error_free (&ignored);
    }
  cri_note_started (svc, c->id, ret == 0);
  /* From now on a monitor that dies without an exit file is noticed. */
  if (ret == 0)
    cri_watch_monitor (svc, c);
  pthread_mutex_lock (&svc->containers->lock);
  container_store_release (svc->containers, c->id);
  pthread_mutex_unlock (&svc->containers->lock);
  cri_container_free (c);
  return ret;
}

void
cri_start_container (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__StartContainerRequest *req
      = cri_unpack (call, &runtime__v1__start_container_request__descriptor, req_bytes, len);
  Runtime__V1__StartContainerResponse resp = RUNTIME__V1__START_CONTAINER_RESPONSE__INIT;
  struct husk_error *err = NULL;
  int ret;

  if (req == NULL)
    return;
  ret = start_container (svc, req->container_id, &err);
  if (ret < 0)
    cri_fail (call, &err);
  else
    cri_reply (call, &resp.base);
  runtime__v1__start_container_request__free_unpacked (req, NULL);
}

/* ------------------------------------------------------------------ */
/* recovery after a crash                                               */

/* Every husk-monitor whose command line names ID is killed with its
 * process group (the runtime command it may still be running). */
static void
kill_monitors_of (const char *id)
{
  cleanup_dir DIR *proc = opendir ("/proc");
  struct dirent *de;

  while (proc && (de = readdir (proc)) != NULL)
    {
      pid_t pid = (pid_t) atoi (de->d_name);

      if (pid > 1 && cri_is_monitor_of (pid, id, NULL))
        {
          pid_t group = getpgid (pid);
          if (group > 1 && group != getpgid (0))
            kill (-group, SIGKILL);
          kill (pid, SIGKILL);
        }
    }
}

/* StartContainer was cut short: whatever it got to (a monitor, a created
 * or running container) is killed and the container ends as a failed
 * start, the way a start error leaves it. */
static void
roll_back_start (struct cri_service *svc, struct cri_container *c)
{
  struct husk_error *ignored = NULL;
  const struct huskd_runtime *rt = cri_runtime_for (svc->cfg, c->runtime_handler, &ignored);

  husk_error_free (&ignored);
  kill_monitors_of (c->id);
  if (rt && cri_run_runtime (rt, (const char *[]){ "delete", "--force", c->id, NULL }, &ignored) < 0)
    husk_debug ("%s", ignored->msg);
  husk_error_free (&ignored);
  remove_crashed_cgroup (svc, c->id);
  c->state = CRI_CONTAINER_EXITED;
  c->exit_code = 128;
  c->finished_at = cri_now_ns ();
  free (c->reason);
  free (c->message);
  c->reason = xstrdup ("StartError");
  c->message = xstrdup ("huskd stopped while starting the container");
  if (container_save (svc->containers, c, false, &ignored) < 0)
    {
      husk_warn ("container %s: %s", c->id, ignored->msg);
      husk_error_free (&ignored);
    }
}

static void
recover_container (struct cri_service *svc, const char *id)
{
  struct cri_container *c = NULL;
  struct husk_error *ignored = NULL;

  if (has_marker (svc, id, "creating"))
    {
      husk_warn ("container %s: CreateContainer did not finish: rolled back", id);
      undo_create (svc, id);
      return;
    }
  /* No marker and no record file at all: a CreateContainer killed between
   * making the directory and writing its marker (the start-up sweep took
   * the marker's temp file), or a RemoveContainer killed after it removed
   * the records.  Nothing can list it: what there is goes. */
  if (!has_marker (svc, id, "starting") && !has_marker (svc, id, "cri.json")
      && !has_marker (svc, id, "config.pb"))
    {
      husk_warn ("container %s: a directory without records (a create or remove cut short): removed", id);
      undo_create (svc, id);
      return;
    }
  if (!has_marker (svc, id, "starting"))
    return;
  if (container_lookup (svc->containers, id, &c, &ignored) == 0 && c->state == CRI_CONTAINER_CREATED)
    {
      husk_warn ("container %s: StartContainer did not finish: rolled back to a start error", id);
      roll_back_start (svc, c);
    }
  husk_error_free (&ignored);
  cri_container_free (c);
  if (clear_marker (svc, id, "starting", &ignored) < 0)
    {
      husk_warn ("%s", ignored->msg);
      husk_error_free (&ignored);
    }
}

static void
recover_containers (struct cri_service *svc)
{
  cleanup_dir DIR *dir = opendir (svc->containers->containers_dir);
  struct dirent *de;

  while (dir && (de = readdir (dir)) != NULL)
    if (strlen (de->d_name) == 64 && strspn (de->d_name, "0123456789abcdef") == 64)
      recover_container (svc, de->d_name);
}

/* ------------------------------------------------------------------ */
/* a damaged record, rebuilt (the store's hook)                         */

/* The runtime whose root holds container ID, or NULL. */
static const struct huskd_runtime *
runtime_holding (struct cri_service *svc, const char *id)
{
  for (size_t i = 0; i < svc->cfg->n_runtimes; i++)
    {
      cleanup_free char *dir = xasprintf ("%s/%s", svc->cfg->runtimes[i].root, id);
      if (access (dir, F_OK) == 0)
        return &svc->cfg->runtimes[i];
    }
  return NULL;
}

/* The state: what the runtime says; without runtime state and exit file,
 * a container whose monitor has logged was started and has ended (its
 * runtime state went with a reboot), how is unknown. */
static void
rebuild_state (struct cri_service *svc, struct cri_container *c)
{
  const struct huskd_runtime *rt = runtime_holding (svc, c->id);
  cleanup_free char *status = NULL, *dir = container_store_dir (svc->containers, c->id);
  cleanup_free char *monitor_log = xasprintf ("%s/monitor.log", dir);
  cleanup_free char *exit_path = container_store_exit_path (svc->containers, c->id);
  struct husk_error *ignored = NULL;
  struct stat st;
  pid_t pid = 0;

  if (rt)
    {
      free (c->runtime_handler);
      c->runtime_handler = xstrdup (rt == huskd_config_runtime (svc->cfg, NULL) ? "" : rt->name);
    }
  if (rt && cri_runtime_state (rt, c->id, &status, &pid, &ignored) == 0)
    {
      /* A stopped one ends with its exit file: the monitor's, or the one
       * huskd writes for a lost monitor. */
      c->state = CRI_CONTAINER_RUNNING;
      c->pid = pid;
      c->pid_start = strcmp (status, "stopped") != 0 ? cri_proc_start (pid) : 0;
      c->started_at = cri_proc_start_ns (c->pid_start) ?: c->created_at;
    }
  else if (access (exit_path, F_OK) < 0 && stat (monitor_log, &st) == 0)
    {
      c->state = CRI_CONTAINER_EXITED;
      c->exit_code = 255;
      c->started_at = c->created_at;
      c->finished_at = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
      c->reason = xstrdup ("Unknown");
    }
  husk_error_free (&ignored);
}

/* Fills in C (rebuilt from the bundle, state CREATED) from the runtime,
 * the monitor's command line, the pod and the image store. */
static void
rebuild_hook (struct container_store *store, struct cri_container *c, void *user)
{
  struct cri_service *svc = user;
  cleanup_free char *dir = container_store_dir (store, c->id);
  cleanup_free char *internal_log = xasprintf ("%s/container.log", dir);
  cleanup_free char *log_path = NULL;
  struct husk_error *ignored = NULL;
  struct sandbox *sb = NULL;
  struct image *image = NULL;

  rebuild_state (svc, c);
  c->monitor_pid = cri_find_monitor (c->id, &log_path);
  c->monitor_start = cri_proc_start (c->monitor_pid);
  free (c->log_path);
  if (log_path && strcmp (log_path, internal_log) != 0)
    c->log_path = steal_pointer (&log_path);
  else if (sandbox_lookup (svc->sandboxes, c->sandbox_id, &sb, &ignored) == 0)
    c->log_path = log_path_of (sb, c->config);
  else
    c->log_path = xstrdup ("");
  if (c->image[0] && images_lookup (svc->cfg->root, c->image, &image, &ignored) == 0)
    {
      free (c->image_id);
      free (c->image_ref);
      c->image_id = xstrdup (image->id);
      c->image_ref = xstrdup (image->repo_digests[0] ?: image->id);
    }
  husk_error_free (&ignored);
  sandbox_free (sb);
  image_free (image);
}

/* ------------------------------------------------------------------ */
/* StopContainer, RemoveContainer and the pod hooks                     */

/* Woken by the exit watcher (cri/container/events.h) the moment the monitor renames
 * the exit file into place. */
static bool
wait_exit_file (struct cri_service *svc, const char *id, int64_t timeout_ms)
{
  cleanup_free char *path = container_store_exit_path (svc->containers, id);

  return cri_events_wait_file (svc->events, path, timeout_ms);
}

static int
stop_signal_of (const struct cri_container *c)
{
  struct husk_error *ignored = NULL;
  int sig = SIGTERM;

  if (c->stop_signal && container_parse_signal (c->stop_signal, &sig, &ignored) < 0)
    sig = SIGTERM;
  husk_error_free (&ignored);
  return sig;
}

/* An exited container's rootfs (image/snapshot.h's ROOT/containers/<id>/
 * merged) is unmounted (lazily) as soon as it exits, as containerd does at
 * the task's delete: the kernel lets the overlay go while the rest of a
 * pod's stop runs (CNI DEL), where RemoveContainer's rmdir of the mount
 * point would otherwise wait for it.  The upper dir stays for the stats
 * and the snapshot's removal; a rootfs mounted no more is fine for it. */
static void
release_rootfs (struct cri_service *svc, const char *id)
{
  cleanup_free char *dir = container_store_dir (svc->containers, id);
  cleanup_free char *merged = xasprintf ("%s/merged", dir);

  if (umount2 (merged, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
    husk_warn ("container %s: unmount `%s`: %s", id, merged, strerror (errno));
}

/* `RUNTIME kill [--all] ID SIG`.  For this build's husk huskd does the
 * same container_kill itself, from the runtime's state under its --root:
 * a pod's stop starts no runtime process for it (a `husk kill --all` is
 * an exec of husk, ~2 ms of CPU here). */
static int
kill_container (const struct huskd_runtime *rt, const char *id, int sig, bool all, struct husk_error **err)
{
  char signal_arg[16];

  if (cri_runtime_in_process (rt))
    {
      const struct runtime_ctx ctx = { .root = rt->root };
      return container_kill (&ctx, id, sig, all, err);
    }
  if (sig == SIGKILL)
    snprintf (signal_arg, sizeof signal_arg, "KILL");
  else
    snprintf (signal_arg, sizeof signal_arg, "%d", sig);
  if (all)
    return cri_run_runtime (rt, (const char *[]){ "kill", "--all", id, signal_arg, NULL }, err);
  return cri_run_runtime (rt, (const char *[]){ "kill", id, signal_arg, NULL }, err);
}

/* The stop signal, TIMEOUT seconds for the exit file, then SIGKILL to
 * every process of the container.  Stopping a stopped one is a no-op. */
static int
stop_container (struct cri_service *svc, const char *id, int64_t timeout, struct husk_error **err)
{
  struct cri_container *c = NULL;
  const struct huskd_runtime *rt;
  struct husk_error *ignored = NULL;
  int ret = 0;

  if (container_lookup (svc->containers, id, &c, err) < 0)
    {
      if ((*err)->errnum != ENOENT)
        return -1;
      husk_error_free (err);
      return 0;
    }
  if (c->state != CRI_CONTAINER_RUNNING || (rt = cri_runtime_for (svc->cfg, c->runtime_handler, err)) == NULL)
    {
      ret = c->state == CRI_CONTAINER_RUNNING ? -1 : 0;
      if (c->state == CRI_CONTAINER_EXITED)
        release_rootfs (svc, c->id);
      cri_container_free (c);
      return ret;
    }
  /* Without its monitor no exit file would come: huskd watches the init
   * itself (or records the exit now when the init is gone too). */
  if (!cri_monitor_alive (c))
    cri_monitor_lost (svc, c);
  /* A kill that fails because the process is gone already is fine.  No
   * grace period (StopPodSandbox, RemoveContainer): SIGKILL at once, as
   * containerd does. */
  if (timeout > 0 && kill_container (rt, c->id, stop_signal_of (c), false, &ignored) < 0)
    husk_error_free (&ignored);
  if (timeout <= 0 || !wait_exit_file (svc, c->id, timeout * 1000))
    {
      if (kill_container (rt, c->id, SIGKILL, true, &ignored) < 0)
        husk_error_free (&ignored);
      if (!wait_exit_file (svc, c->id, KILL_GRACE_MS))
        ret = husk_error_kind (err, ETIMEDOUT, "container %s did not exit after SIGKILL", c->id);
    }
  /* Folds the exit file into the record and sends STOPPED, unless the
   * watcher did already: before the reply, whichever is first. */
  if (ret == 0)
    cri_note_exit (svc, c->id);
  if (ret == 0)
    release_rootfs (svc, c->id);
  cri_container_free (c);
  return ret;
}

static int
remove_container (struct cri_service *svc, const char *id, struct husk_error **err)
{
  struct cri_container *c = NULL;
  const struct huskd_runtime *rt;
  struct husk_error *ignored = NULL;
  cleanup_free char *bundle = NULL, *dir = NULL;
  int ret = 0;

  if (stop_container (svc, id, 0, err) < 0)
    return -1;
  if (container_lookup (svc->containers, id, &c, err) < 0)
    {
      if ((*err)->errnum != ENOENT)
        return -1;
      husk_error_free (err);
      return 0;
    }
  /* STOPPED before DELETED, also when the watcher has not got to it. */
  if (c->state == CRI_CONTAINER_EXITED)
    cri_note_exit (svc, c->id);
  rt = cri_runtime_for (svc->cfg, c->runtime_handler, &ignored);
  husk_error_free (&ignored);
  /* The stats RPCs' open files of its cgroup closed before it goes. */
  cri_stats_forget_container (c->id);
  /* Never created by the runtime (never started): nothing to delete. */
  if (rt && c->state != CRI_CONTAINER_CREATED
      && cri_run_runtime (rt, (const char *[]){ "delete", "--force", c->id, NULL }, &ignored) < 0)
    {
      husk_debug ("%s", ignored->msg);
      husk_error_free (&ignored);
    }
  remove_crashed_cgroup (svc, c->id);
  cri_exec_leftovers_remove (svc->cfg->state, c->id);
  bundle = containers_bundle_dir (svc->cfg->root, c->id);
  dir = container_store_dir (svc->containers, c->id);
  if (snapshot_remove_container (svc->cfg->root, c->id, err) < 0 || husk_rm_rf (bundle, err) < 0)
    ret = -1;
  else
    {
      /* Then the directory with whatever is left (the monitor's logs, or
       * a record an unlocked lookup folded an exit into meanwhile: after
       * this such a write fails for want of a directory). */
      ret = container_forget (svc->containers, c->id, err);
      if (ret == 0)
        ret = husk_rm_rf (dir, err);
    }
  if (ret == 0)
    cri_note_deleted (svc, c);
  cri_container_free (c);
  return ret;
}

static int
for_pod (struct cri_service *svc, const char *sandbox_id, bool remove, struct husk_error **err)
{
  struct cri_container **list = NULL;
  size_t n = 0;
  int ret = 0;

  cleanup_free char *creates = xasprintf ("create:%s/", sandbox_id);

  pthread_mutex_lock (&svc->containers->lock);
  /* A create in progress in the pod would be missed by the list. */
  container_store_wait_idle (svc->containers, creates);
  if (container_list (svc->containers, &list, &n, err) < 0)
    ret = -1;
  for (size_t i = 0; i < n && ret == 0; i++)
    if (strcmp (list[i]->sandbox_id, sandbox_id) == 0)
      {
        container_store_wait_idle (svc->containers, list[i]->id);
        ret = remove ? remove_container (svc, list[i]->id, err) : stop_container (svc, list[i]->id, 0, err);
      }
  pthread_mutex_unlock (&svc->containers->lock);
  cri_containers_free (list, n);
  return ret;
}

static int
pod_stop_hook (struct cri_service *svc, const char *sandbox_id, struct husk_error **err)
{
  return for_pod (svc, sandbox_id, false, err);
}

static int
pod_remove_hook (struct cri_service *svc, const char *sandbox_id, struct husk_error **err)
{
  return for_pod (svc, sandbox_id, true, err);
}

void
cri_stop_container (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__StopContainerRequest *req
      = cri_unpack (call, &runtime__v1__stop_container_request__descriptor, req_bytes, len);
  Runtime__V1__StopContainerResponse resp = RUNTIME__V1__STOP_CONTAINER_RESPONSE__INIT;
  struct husk_error *err = NULL;
  int ret;

  if (req == NULL)
    return;
  /* Not under the store lock: a graceful stop may take the whole timeout,
   * and stopping is idempotent. */
  ret = stop_container (svc, req->container_id, req->timeout, &err);
  if (ret < 0)
    cri_fail (call, &err);
  else
    cri_reply (call, &resp.base);
  runtime__v1__stop_container_request__free_unpacked (req, NULL);
}

void
cri_remove_container (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  struct container_store *store = svc->containers;
  Runtime__V1__RemoveContainerRequest *req
      = cri_unpack (call, &runtime__v1__remove_container_request__descriptor, req_bytes, len);
  Runtime__V1__RemoveContainerResponse resp = RUNTIME__V1__REMOVE_CONTAINER_RESPONSE__INIT;
  struct husk_error *err = NULL;
  int ret;

  if (req == NULL)
    return;
  pthread_mutex_lock (&store->lock);
  container_store_wait_idle (store, req->container_id);
  ret = remove_container (svc, req->container_id, &err);
  pthread_mutex_unlock (&store->lock);
  if (ret < 0)
    cri_fail (call, &err);
  else
    cri_reply (call, &resp.base);
  runtime__v1__remove_container_request__free_unpacked (req, NULL);
}

/* ------------------------------------------------------------------ */
/* ContainerStatus, ListContainers                                      */

void
cri_container_status (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  struct container_store *store = svc->containers;
  Runtime__V1__ContainerStatusRequest *req
      = cri_unpack (call, &runtime__v1__container_status_request__descriptor, req_bytes, len);
  Runtime__V1__ContainerStatusResponse resp = RUNTIME__V1__CONTAINER_STATUS_RESPONSE__INIT;
  Runtime__V1__ContainerStatus status;
  struct cri_status_parts parts;
  struct cri_container *c = NULL;
  struct husk_error *err = NULL;
  Runtime__V1__ContainerStatusResponse__InfoEntry entry
      = RUNTIME__V1__CONTAINER_STATUS_RESPONSE__INFO_ENTRY__INIT;
  Runtime__V1__ContainerStatusResponse__InfoEntry *entries[] = { &entry };
  Runtime__V1__LinuxContainerResources *spec_resources = NULL;
  cleanup_free char *info = NULL;

  if (req == NULL)
    return;
  if (container_lookup (store, req->container_id, &c, &err) < 0)
    cri_fail (call, &err);
  else
    {
      cri_container_status_of (c, &status, &parts);
      /* Created without resources: what its bundle says it runs with. */
      if (status.resources == NULL && (spec_resources = cri_container_spec_resources (svc, c->id)))
        {
          parts.resources.linux = spec_resources;
          status.resources = &parts.resources;
        }
      if (req->verbose)
        {
          info = cri_container_info_json (svc, c);
          entry.key = "info";
          entry.value = info;
          resp.n_info = 1;
          resp.info = entries;
        }
      resp.status = &status;
      cri_reply (call, &resp.base);
    }
  if (spec_resources)
    runtime__v1__linux_container_resources__free_unpacked (spec_resources, NULL);
  cri_container_free (c);
  runtime__v1__container_status_request__free_unpacked (req, NULL);
}

static bool
matches_filter (const struct cri_container *c, const Runtime__V1__ContainerFilter *filter)
{
  if (filter == NULL)
    return true;
  if (cri_nonempty (filter->id) && !husk_str_has_prefix (c->id, filter->id))
    return false;
  if (filter->state && filter->state->state != cri_container_state_value (c->state))
    return false;
  if (cri_nonempty (filter->pod_sandbox_id) && !husk_str_has_prefix (c->sandbox_id, filter->pod_sandbox_id))
    return false;
  return cri_labels_match ((struct cri_string_entry *const *) c->config->labels, c->config->n_labels,
                           (struct cri_string_entry *const *) filter->label_selector,
                           filter->n_label_selector);
}

/* ListContainers' reply, packed under the store's lock from the records
 * themselves (container_store_read): no copy of each container first. */
struct list_reply
{
  const Runtime__V1__ContainerFilter *filter;
  uint8_t *bytes;
  size_t len;
};

static void
pack_containers (const struct cri_container *const *records, size_t n, void *arg)
{
  struct list_reply *out = arg;
  Runtime__V1__ListContainersResponse resp = RUNTIME__V1__LIST_CONTAINERS_RESPONSE__INIT;
  cleanup_free Runtime__V1__Container *items = xcalloc (n + 1, sizeof *items);
  cleanup_free Runtime__V1__ImageSpec *images = xcalloc (n + 1, sizeof *images);
  cleanup_free Runtime__V1__Container **ptrs = xcalloc (n + 1, sizeof *ptrs);

  for (size_t i = 0; i < n; i++)
    {
      const struct cri_container *c = records[i];
      Runtime__V1__Container *item = &items[resp.n_containers];

      if (!matches_filter (c, out->filter))
        continue;
      runtime__v1__container__init (item);
      runtime__v1__image_spec__init (&images[resp.n_containers]);
      images[resp.n_containers].image = c->image;
      item->id = c->id;
      item->pod_sandbox_id = c->sandbox_id;
      item->metadata = c->config->metadata;
      item->image = &images[resp.n_containers];
      item->image_ref = c->image_ref;
      item->image_id = c->image_id;
      item->state = cri_container_state_value (c->state);
      item->created_at = c->created_at;
      item->n_labels = c->config->n_labels;
      item->labels = (Runtime__V1__Container__LabelsEntry **) c->config->labels;
      item->n_annotations = c->config->n_annotations;
      item->annotations = (Runtime__V1__Container__AnnotationsEntry **) c->config->annotations;
      ptrs[resp.n_containers++] = item;
    }
  resp.containers = ptrs;
  out->len = protobuf_c_message_get_packed_size (&resp.base);
  out->bytes = xmalloc (out->len ? out->len : 1);
  protobuf_c_message_pack (&resp.base, out->bytes);
}

void
cri_list_containers (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__ListContainersRequest *req
      = cri_unpack (call, &runtime__v1__list_containers_request__descriptor, req_bytes, len);
  struct list_reply reply = { 0 };
  struct husk_error *err = NULL;

  if (req == NULL)
    return;
  reply.filter = req->filter;
  if (container_store_read (svc->containers, pack_containers, &reply, &err) < 0)
    cri_fail (call, &err);
  else
    rpc_reply (call, reply.bytes, reply.len);
  free (reply.bytes);
  runtime__v1__list_containers_request__free_unpacked (req, NULL);
}

/* ------------------------------------------------------------------ */
/* ExecSync                                                             */

/* The husk handler's ExecSync without the husk binary (a probe's cost);
 * 1 when the container needs `husk exec` after all.  RUN->timeout_ms is
 * set. */
static int
exec_sync_in_process (const struct huskd_runtime *rt, const char *id, const Runtime__V1__ExecSyncRequest *req,
                      struct cri_child_run *run, struct husk_error **err)
{
  run->output_max = EXEC_OUTPUT_MAX;
  return cri_exec_sync_in_process (rt, id, (const char *const *) req->cmd, req->n_cmd, run, err);
}

static int
exec_sync (struct cri_service *svc, const Runtime__V1__ExecSyncRequest *req, struct cri_child_run *run,
           struct husk_error **err)
{
  struct cri_container *c = NULL;
  const struct huskd_runtime *rt;
  const char **argv;
  size_t n = 0;
  int ret = 0;

  if (req->n_cmd == 0)
    return husk_error_kind (err, EINVAL, "cmd: required");
  if (container_lookup (svc->containers, req->container_id, &c, err) < 0)
    return -1;
  if (c->state != CRI_CONTAINER_RUNNING)
    ret = husk_error_kind (err, EAGAIN, "container %s is not running", c->id);
  else if ((rt = cri_runtime_for (svc->cfg, c->runtime_handler, err)) == NULL)
    ret = -1;
  else
    {
      static atomic_uint exec_serial;
      cleanup_free char *pid_file
          = xasprintf ("%s/exec-%s-%u.pid", svc->cfg->state, c->id, atomic_fetch_add (&exec_serial, 1));

      /* The pid file lets the next huskd kill what a killed one ran. */
      run->pid_file = pid_file;
      if (!cri_runtime_in_process (rt) || (ret = exec_sync_in_process (rt, c->id, req, run, err)) > 0)
        {
          argv = cri_runtime_argv (rt, (const char *[]){ "exec", "--pid-file", pid_file, c->id, NULL },
                                   req->n_cmd);
          n = 7 + husk_strv_len (rt->args);
          for (size_t i = 0; i < req->n_cmd; i++)
            argv[n++] = req->cmd[i];
          run->argv = (char *const *) argv;
          run->output_max = EXEC_OUTPUT_MAX;
          ret = cri_child_run (run, err);
          free (argv);
        }
      if (ret < 0)
        husk_error_wrap (err, "ExecSync in %s", c->id);
      run->pid_file = NULL;
      unlink (pid_file);
    }
  cri_container_free (c);
  return ret;
}

/* REQ's timeout in ms, less the WAITED_MS the call waited for a worker: 0
 * for none, -1 when it has passed.  Past 68 years a timeout is none
 * (seconds * 1000 must not overflow). */
static int64_t
exec_timeout_left_ms (const Runtime__V1__ExecSyncRequest *req, int64_t waited_ms)
{
  if (req->timeout <= 0 || req->timeout > INT32_MAX)
    return 0;
  return req->timeout * 1000 > waited_ms ? req->timeout * 1000 - waited_ms : -1;
}

void
cri_exec_sync (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__ExecSyncRequest *req
      = cri_unpack (call, &runtime__v1__exec_sync_request__descriptor, req_bytes, len);
  Runtime__V1__ExecSyncResponse resp = RUNTIME__V1__EXEC_SYNC_RESPONSE__INIT;
  struct cri_child_run run = { 0 };
  struct husk_error *err = NULL;
  /* The request's timeout counts from the call's arrival, as kubelet's
   * probe timer does: a call that waited for a worker runs for the rest. */
  int64_t waited_ms = rpc_call_age_ms (call);

  if (req == NULL)
    return;
  run.timeout_ms = exec_timeout_left_ms (req, waited_ms);
  if (run.timeout_ms < 0)
    rpc_fail (call, GRPC_STATUS_DEADLINE_EXCEEDED,
              "ExecSync in %s: timeout %llds exceeded while the call waited %lld ms for a worker",
              req->container_id, (long long) req->timeout, (long long) waited_ms);
  else if (exec_sync (svc, req, &run, &err) < 0)
    cri_fail (call, &err);
  else if (run.timed_out)
    rpc_fail (call, GRPC_STATUS_DEADLINE_EXCEEDED, "ExecSync in %s: timeout %llds exceeded",
              req->container_id, (long long) req->timeout);
  else
    {
      resp.stdout.data = (uint8_t *) run.out[0].data;
      resp.stdout.len = run.out[0].len;
      resp.stderr.data = (uint8_t *) run.out[1].data;
      resp.stderr.len = run.out[1].len;
      resp.exit_code = cri_child_exit_code (run.wait_status);
      cri_reply (call, &resp.base);
    }
  cri_child_run_clear (&run);
  runtime__v1__exec_sync_request__free_unpacked (req, NULL);
}

/* ------------------------------------------------------------------ */
/* ReopenContainerLog                                                   */

/* The monitor reopens the log on SIGUSR1 and answers in
 * STATE/exits/<id>.reopen (cri/monitor/exit.h, its --help):
 * {"monotonic_ns": when the reopen began} and "errno"/"error" when it
 * failed.  An answer that began after we read the clock, just before
 * signalling, is ours (or a later one's, which reopened after ours). */
#define REOPEN_ANSWER_TIMEOUT_MS 5000

static int64_t
monotonic_ns (void)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (int64_t) now.tv_sec * 1000000000 + now.tv_nsec;
}

/* A pidfd for C's monitor, checked to be it while the pidfd is open: if
 * the monitor died and its pid went to another process, the check fails;
 * if it dies after the check, signals through the pidfd reach no one. */
static int
open_monitor (const struct cri_container *c, struct husk_error **err)
{
  int pidfd = (int) syscall (SYS_pidfd_open, c->monitor_pid, 0);

  if (pidfd < 0 && errno == ESRCH)
    return husk_error_kind (err, EAGAIN, "container %s: its monitor (pid %d) is gone", c->id,
                            (int) c->monitor_pid);
  if (pidfd < 0)
    return husk_error_make (err, errno, "pidfd_open the monitor of %s (pid %d)", c->id, (int) c->monitor_pid);
  if (!cri_is_monitor_of (c->monitor_pid, c->id, NULL))
    {
      close (pidfd);
      return husk_error_kind (err, EAGAIN,
                              "container %s: pid %d is no longer its monitor (husk-monitor --id %s)", c->id,
                              (int) c->monitor_pid, c->id);
    }
  return pidfd;
}

/* Sends SIGUSR1 to C's monitor; *ASKED_AT is the clock just before. */
static int
signal_monitor (const struct cri_container *c, int64_t *asked_at, struct husk_error **err)
{
  cleanup_close int pidfd = open_monitor (c, err);

  if (pidfd < 0)
    return -1;
  *asked_at = monotonic_ns ();
  if (syscall (SYS_pidfd_send_signal, pidfd, SIGUSR1, NULL, 0) == 0)
    return 0;
  if (errno == ESRCH)
    return husk_error_kind (err, EAGAIN, "container %s: its monitor (pid %d) is gone", c->id,
                            (int) c->monitor_pid);
  return husk_error_make (err, errno, "signal the monitor of %s (pid %d)", c->id, (int) c->monitor_pid);
}

/* The answer at PATH if it is one to a request made at ASKED_AT. */
static json_t *
read_reopen_answer (const char *path, int64_t asked_at)
{
  json_t *doc = json_load_file (path, 0, NULL);

  if (doc && json_integer_value (json_object_get (doc, "monotonic_ns")) >= asked_at)
    return doc;
  json_decref (doc);
  return NULL;
}

static int
wait_reopen_answer (struct cri_service *svc, const struct cri_container *c, int64_t asked_at,
                    struct husk_error **err)
{
  cleanup_free char *exit_path = container_store_exit_path (svc->containers, c->id);
  cleanup_free char *path = xasprintf ("%s.reopen", exit_path);
  int64_t deadline = cri_monotonic_ms () + REOPEN_ANSWER_TIMEOUT_MS;
  json_t *answer;
  int ret = 0;

  /* Polled from 1 ms up to every 16 ms: a monitor answers in about 1 ms. */
  for (int delay_ms = 1;
       (answer = read_reopen_answer (path, asked_at)) == NULL && cri_monotonic_ms () < deadline;
       delay_ms = delay_ms < 16 ? delay_ms * 2 : 16)
    poll (NULL, 0, delay_ms);
  if (answer && json_string_value (json_object_get (answer, "error")))
    ret = husk_error_kind (err, 0, "reopen the log of container %s: %s", c->id,
                           json_string_value (json_object_get (answer, "error")));
  /* A monitor from before answers existed: the file at its path is all
   * there is to go by. */
  else if (answer == NULL && (!cri_nonempty (c->log_path) || access (c->log_path, F_OK) < 0))
    ret = husk_error_kind (err, ETIMEDOUT,
                           "container %s: its monitor (pid %d) did not reopen the log within %d s", c->id,
                           (int) c->monitor_pid, REOPEN_ANSWER_TIMEOUT_MS / 1000);
  json_decref (answer);
  return ret;
}

static int
reopen_log (struct cri_service *svc, const char *id, struct husk_error **err)
{
  struct cri_container *c = NULL;
  int64_t asked_at = 0;
  int ret;

  if (container_lookup (svc->containers, id, &c, err) < 0)
    return -1;
  if (c->state != CRI_CONTAINER_RUNNING || c->monitor_pid <= 0)
    ret = husk_error_kind (err, EAGAIN, "container %s is not running", c->id);
  else
    ret = signal_monitor (c, &asked_at, err) < 0 ? -1 : wait_reopen_answer (svc, c, asked_at, err);
  cri_container_free (c);
  return ret;
}

void
cri_reopen_container_log (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__ReopenContainerLogRequest *req
      = cri_unpack (call, &runtime__v1__reopen_container_log_request__descriptor, req_bytes, len);
  Runtime__V1__ReopenContainerLogResponse resp = RUNTIME__V1__REOPEN_CONTAINER_LOG_RESPONSE__INIT;
  struct husk_error *err = NULL;

  if (req == NULL)
    return;
  if (reopen_log (svc, req->container_id, &err) < 0)
    cri_fail (call, &err);
  else
    cri_reply (call, &resp.base);
  runtime__v1__reopen_container_log_request__free_unpacked (req, NULL);
}

/* Registers the stream and returns: events are sent by the threads that
 * make them. */
void
cri_get_container_events (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__GetEventsRequest *req
      = cri_unpack (call, &runtime__v1__get_events_request__descriptor, req_bytes, len);

  if (req == NULL)
    return;
  runtime__v1__get_events_request__free_unpacked (req, NULL);
  if (svc->events == NULL)
    rpc_fail (call, GRPC_STATUS_UNAVAILABLE, "GetContainerEvents: huskd has no event hub");
  else
    cri_events_subscribe (svc->events, call);
}
