/* Pods owned by their runtime handler (`"sandbox": "runtime"`: gVisor's
 * runsc): the pod's infra container is created and started through the
 * handler in the namespaces husk made for the pod, so that the handler's
 * sandbox (a second kernel) holds the pod, and every app container joins
 * it by the io.kubernetes.cri.sandbox-id annotation.  Its bundle lives in
 * STATE/sandboxes/<id>/infra; its id is the pod's. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cri/config/runtime_exec.h"
#include "cri/pod/sandbox.h"
#include "cri/spec/cri_spec.h"
#include "husk/cleanup.h"
#include "husk/util.h"

static char *
infra_bundle (const struct sandbox *sb)
{
  return xasprintf ("%s/infra", sb->state_dir);
}

/* rootfs/husk-pause: the infra container's only file. */
static int
write_rootfs (const char *bundle, struct husk_error **err)
{
  cleanup_free char *pause = cri_helper_path ("husk-pause");
  cleanup_free char *rootfs = xasprintf ("%s/rootfs", bundle);
  cleanup_free char *target = xasprintf ("%s/husk-pause", rootfs);
  cleanup_free char *binary = NULL;
  size_t len = 0;

  if (husk_mkdir_p (rootfs, 0755, err) < 0)
    return -1;
  if (husk_read_file (pause, &binary, &len, err) < 0)
    return husk_error_wrap (err, "the pod's infra process");
  return husk_write_file_replace (target, binary, len, 0755, err);
}

static json_t *
namespaces_of (const struct sandbox *sb)
{
  json_t *list = json_pack ("[{s:s}, {s:s}]", "type", "pid", "type", "mount");
  const struct
  {
    const char *type, *path;
  } joined[] = { { "network", sb->netns_path }, { "ipc", sb->ipcns_path }, { "uts", sb->utsns_path } };

  for (size_t i = 0; i < sizeof joined / sizeof joined[0]; i++)
    json_array_append_new (
        list, joined[i].path ? json_pack ("{s:s, s:s}", "type", joined[i].type, "path", joined[i].path)
                             : json_pack ("{s:s}", "type", joined[i].type));
  return list;
}

static json_t *
infra_spec (const struct sandbox *sb)
{
  cleanup_free char *cgroups_path = cri_spec_cgroups_path (sb->cgroup_parent, sb->id);
  const char *hostname = sb->config->hostname && *sb->config->hostname ? sb->config->hostname : NULL;
  json_t *linux_ = json_pack ("{s:o}", "namespaces", namespaces_of (sb));
  json_t *annotations = json_pack ("{s:s, s:s, s:s, s:s, s:s}", "io.kubernetes.cri.container-type", "sandbox",
                                   "io.kubernetes.cri.sandbox-id", sb->id, "io.kubernetes.cri.sandbox-name",
                                   sb->name, "io.kubernetes.cri.sandbox-namespace", sb->namespace_,
                                   "io.kubernetes.cri.sandbox-uid", sb->uid);
  json_t *spec = json_pack (
      "{s:s, s:{s:[s], s:s, s:[s], s:{s:i, s:i}, s:b}, s:{s:s, s:b}, s:[{s:s, s:s, s:s}], s:o, s:o}",
      "ociVersion", "1.0.2", "process", "args", "/husk-pause", "cwd", "/", "env",
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "user", "uid", 0, "gid", 0,
      "noNewPrivileges", 1, "root", "path", "rootfs", "readonly", 1, "mounts", "destination", "/proc", "type",
      "proc", "source", "proc", "annotations", annotations, "linux", linux_);

  if (hostname)
    json_object_set_new (spec, "hostname", json_string (hostname));
  if (cgroups_path)
    json_object_set_new (linux_, "cgroupsPath", json_string (cgroups_path));
  return spec;
}

static int
write_bundle (const struct sandbox *sb, const char *bundle, struct husk_error **err)
{
  cleanup_free char *config_path = xasprintf ("%s/config.json", bundle);
  json_t *spec = infra_spec (sb);
  cleanup_free char *text = json_dumps (spec, JSON_INDENT (2));

  json_decref (spec);
  if (write_rootfs (bundle, err) < 0)
    return -1;
  return husk_write_file_replace (config_path, text, strlen (text), 0644, err);
}

int
sandbox_handler_check (const struct huskd_runtime *rt, const Runtime__V1__PodSandboxConfig *config,
                       struct husk_error **err)
{
  const Runtime__V1__LinuxPodSandboxConfig *linux_ = config ? config->linux : NULL;
  const Runtime__V1__LinuxSandboxSecurityContext *security = linux_ ? linux_->security_context : NULL;

  if (security && security->namespace_options
      && security->namespace_options->network == RUNTIME__V1__NAMESPACE_MODE__NODE)
    return husk_error_kind (
        err, EINVAL,
        "config.linux.security_context.namespace_options.network: runtime handler `%s` owns "
        "the pod and refuses the host's network (NODE)",
        rt->name);
  if (security && security->privileged)
    return husk_error_kind (err, EINVAL,
                            "config.linux.security_context.privileged: runtime handler `%s` owns the pod and "
                            "refuses privileged pods",
                            rt->name);
  return 0;
}

int
sandbox_handler_start (const struct huskd_runtime *rt, const struct sandbox *sb, struct husk_error **err)
{
  cleanup_free char *bundle = infra_bundle (sb);
  cleanup_free char *err_path = xasprintf ("%s/runtime.err", bundle);
  struct husk_error *ignored = NULL;

  if (sb->netns_path == NULL)
    return husk_error_kind (
        err, EINVAL,
        "config.linux.security_context.namespace_options.network: runtime handler `%s` owns "
        "the pod and refuses the host's network (NODE)",
        rt->name);
  if (write_bundle (sb, bundle, err) < 0)
    return husk_error_wrap (err, "the pod's infra container for `%s`", rt->name);
  if (cri_run_runtime_to_file (rt, (const char *[]){ "create", "--bundle", bundle, sb->id, NULL }, err_path,
                               err)
          < 0
      || cri_run_runtime_to_file (rt, (const char *[]){ "start", sb->id, NULL }, err_path, err) < 0)
    {
      husk_error_wrap (err, "the pod's infra container");
      if (sandbox_handler_stop (rt, sb->id, &ignored) < 0)
        {
          husk_warn ("%s", ignored->msg);
          husk_error_free (&ignored);
        }
      return -1;
    }
  return 0;
}

/* `delete --force` kills the whole sandbox (gofers, the sentry) and
 * removes its state; a container the handler does not know is gone
 * already. */
int
sandbox_handler_stop (const struct huskd_runtime *rt, const char *sandbox_id, struct husk_error **err)
{
  cleanup_free char *status = NULL;
  struct husk_error *unknown = NULL;
  pid_t pid = 0;

  if (cri_runtime_state (rt, sandbox_id, &status, &pid, &unknown) < 0)
    {
      husk_debug ("pod %s: no infra container left: %s", sandbox_id, unknown->msg);
      husk_error_free (&unknown);
      return 0;
    }
  if (cri_run_runtime (rt, (const char *[]){ "delete", "--force", sandbox_id, NULL }, err) < 0)
    return husk_error_wrap (err, "delete the pod's infra container");
  return 0;
}

bool
sandbox_handler_running (const struct huskd_runtime *rt, const char *sandbox_id)
{
  cleanup_free char *status = NULL;
  struct husk_error *unknown = NULL;
  pid_t pid = 0;

  if (cri_runtime_state (rt, sandbox_id, &status, &pid, &unknown) < 0)
    {
      husk_error_free (&unknown);
      return false;
    }
  return strcmp (status, "running") == 0;
}
