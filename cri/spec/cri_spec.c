/* CRI ContainerConfig -> OCI config (see cri_spec.h).  ocispec builds the
 * process; each CRI area below then edits the document, one function per
 * area, in the order of spec_steps[]. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "cri/spec/apparmor.h"
#include "cri/spec/cri_spec.h"
#include "cri/spec/ocispec.h"
#include "cri/proto/api.pb-c.h"
#include "cri/spec/seccomp_default.h"
#include "cri/spec/userns.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/spec/spec.h"

#define N_ELEMENTS(a) (sizeof (a) / sizeof ((a)[0]))

typedef Runtime__V1__ContainerConfig container_config;
typedef Runtime__V1__LinuxContainerSecurityContext security_context;

static const security_context *
security_of (const container_config *config)
{
  return config->linux ? config->linux->security_context : NULL;
}

static bool
is_privileged (const container_config *config)
{
  const security_context *sc = security_of (config);
  return sc && sc->privileged;
}

static bool
nonempty (const char *s)
{
  return s && s[0];
}

static json_t *
linux_of (json_t *config)
{
  return json_object_get (config, "linux");
}

static json_t *
object_member (json_t *parent, const char *key)
{
  json_t *member = json_object_get (parent, key);

  if (member == NULL)
    json_object_set_new (parent, key, member = json_object ());
  return member;
}

/* ------------------------------------------------------------------ */
/* user and command: the request for ocispec                            */

static int
user_spec (const security_context *sc, char **out, struct husk_error **err)
{
  bool has_user = sc && (sc->run_as_user || nonempty (sc->run_as_username));

  *out = NULL;
  if (sc && sc->run_as_group && !has_user)
    return husk_error_kind (err, EINVAL,
                            "linux.security_context.run_as_group: needs run_as_user or run_as_username");
  if (!has_user)
    return 0;
  if (sc->run_as_user && sc->run_as_user->value < 0)
    return husk_error_kind (err, EINVAL, "linux.security_context.run_as_user: %lld is negative",
                            (long long) sc->run_as_user->value);
  if (sc->run_as_group && sc->run_as_group->value < 0)
    return husk_error_kind (err, EINVAL, "linux.security_context.run_as_group: %lld is negative",
                            (long long) sc->run_as_group->value);
  {
    cleanup_free char *user = sc->run_as_user ? xasprintf ("%lld", (long long) sc->run_as_user->value)
                                              : xstrdup (sc->run_as_username);
    *out = sc->run_as_group ? xasprintf ("%s:%lld", user, (long long) sc->run_as_group->value)
                            : steal_pointer (&user);
  }
  return 0;
}

static char **
env_list (const container_config *config, const char *hostname)
{
  char **env = NULL;

  if (hostname)
    {
      cleanup_free char *kv = xasprintf ("HOSTNAME=%s", hostname);
      env = husk_strv_append (env, kv);
    }
  for (size_t i = 0; i < config->n_envs; i++)
    {
      cleanup_free char *kv = xasprintf ("%s=%s", config->envs[i]->key, config->envs[i]->value);
      env = husk_strv_append (env, kv);
    }
  return env;
}

/* protobuf-c's repeated strings are counted, not NULL-terminated; an
 * empty list is "not set" (kubelet semantics). */
static char **
strv_of (char **strings, size_t n)
{
  char **v = NULL;

  for (size_t i = 0; i < n; i++)
    v = husk_strv_append (v, strings[i]);
  return v;
}

static int
build_process (const struct cri_spec_input *in, json_t **out, struct husk_error **err)
{
  const container_config *config = in->config;
  const security_context *sc = security_of (config);
  cleanup_free char *user = NULL;
  cleanup_strv char **env = env_list (config, in->sandbox.utsns_path ? in->sandbox.hostname : NULL);
  cleanup_strv char **command = strv_of (config->command, config->n_command);
  cleanup_strv char **args = strv_of (config->args, config->n_args);
  struct ocispec_request req = {
    .entrypoint = command,
    .args = args,
    .env = env,
    .workdir = nonempty (config->working_dir) ? config->working_dir : NULL,
    .terminal = config->tty,
    .readonly_rootfs = sc && sc->readonly_rootfs,
    .user_field = "linux.security_context.run_as_user",
  };

  if (user_spec (sc, &user, err) < 0)
    return -1;
  req.user = user;
  if (sc && !sc->run_as_user && nonempty (sc->run_as_username))
    req.user_field = "linux.security_context.run_as_username";
  if (ocispec_build (in->image, &req, in->rootfs, out, err) < 0)
    {
      /* ocispec's own failures are all about the request or the image. */
      if ((*err)->errnum == 0)
        (*err)->errnum = EINVAL;
      return -1;
    }
  return 0;
}

/* ------------------------------------------------------------------ */
/* process: groups, capabilities, privileges                           */

static int
add_supplemental_groups (json_t *config, const struct cri_spec_input *in, struct husk_error **err)
{
  const security_context *sc = security_of (in->config);
  json_t *user = json_object_get (json_object_get (config, "process"), "user");
  json_t *gids = json_object_get (user, "additionalGids");

  if (!json_is_array (gids))
    json_object_set_new (user, "additionalGids", gids = json_array ());
  for (size_t i = 0; sc && i < sc->n_supplemental_groups; i++)
    {
      json_int_t gid = sc->supplemental_groups[i];
      bool present = false;
      size_t j;
      json_t *have;

      if (gid < 0 || gid > UINT32_MAX)
        return husk_error_kind (err, EINVAL,
                                "linux.security_context.supplemental_groups[%zu]: %lld is out of range", i,
                                (long long) gid);
      json_array_foreach (gids, j, have) present |= json_integer_value (have) == gid;
      if (!present)
        json_array_append_new (gids, json_integer (gid));
    }
  return 0;
}

char *
cri_spec_capability_name (const char *name)
{
  cleanup_free char *upper = xstrdup (name);
  char *full;

  for (char *c = upper; *c; c++)
    *c = toupper ((unsigned char) *c);
  full = husk_str_has_prefix (upper, "CAP_") ? xstrdup (upper) : xasprintf ("CAP_%s", upper);
  if (spec_capability_from_name (full) < 0)
    {
      free (full);
      return NULL;
    }
  return full;
}

/* One of huskd's capability sets from /proc/self/status ("CapBnd: %llx"),
 * limited to the capabilities the kernel knows. */
static uint64_t
own_caps (const char *format)
{
  int last = spec_cap_last_cap ();
  uint64_t known = last >= 63 ? UINT64_MAX : (UINT64_C (1) << (last + 1)) - 1;
  cleanup_file FILE *status = fopen ("/proc/self/status", "re");
  char line[256];
  unsigned long long mask;

  while (status && fgets (line, sizeof line, status))
    if (sscanf (line, format, &mask) == 1)
      return known & mask;
  return known;
}

/* "Every capability" is every one huskd's bounding set holds: asking for
 * one the node took away (CAP_SYS_RESOURCE here) fails in the runtime. */
static uint64_t
all_caps (void)
{
  return own_caps ("CapBnd: %llx");
}

static uint64_t
caps_mask (json_t *names)
{
  uint64_t mask = 0;
  size_t i;
  json_t *name;

  json_array_foreach (names, i, name)
  {
    int cap = spec_capability_from_name (json_string_value (name) ?: "");
    if (cap >= 0)
      mask |= UINT64_C (1) << cap;
  }
  return mask;
}

static json_t *
caps_json (uint64_t mask)
{
  json_t *names = json_array ();

  for (int cap = 0; cap < 64; cap++)
    if (mask & (UINT64_C (1) << cap))
      json_array_append_new (names, json_string (spec_capability_name (cap)));
  return names;
}

/* Applies one list of CRI capability names to *MASK: "ALL" means every
 * capability; FIELD names the list in errors. */
static int
apply_caps (uint64_t *mask, char **names, size_t n, bool add, const char *field, struct husk_error **err)
{
  for (size_t i = 0; i < n; i++)
    {
      cleanup_free char *name = NULL;
      uint64_t bits;

      if (strcasecmp (names[i], "ALL") == 0)
        bits = all_caps ();
      else if ((name = cri_spec_capability_name (names[i])) == NULL)
        return husk_error_kind (err, EINVAL,
                                "linux.security_context.capabilities.%s[%zu]: unknown capability `%s`", field,
                                i, names[i]);
      else
        bits = UINT64_C (1) << spec_capability_from_name (name);
      *mask = add ? (*mask | bits) : (*mask & ~bits);
    }
  return 0;
}

/* In the host's user namespace a container gets at most what huskd's
 * bounding set holds; the runtime would refuse the rest at start, so refuse
 * it here, where the answer is CreateContainer's.  A pod's own user
 * namespace gives every capability back (namespaced). */
static int
check_caps_grantable (const struct cri_spec_input *in, uint64_t wanted, struct husk_error **err)
{
  uint64_t missing = wanted & ~all_caps ();

  if (in->sandbox.userns_path != NULL || missing == 0)
    return 0;
  for (int cap = 0; cap < 64; cap++)
    if (missing & (UINT64_C (1) << cap))
      return husk_error_kind (
          err, EINVAL,
          "linux.security_context.capabilities: %s is not in huskd's bounding set (the node "
          "does not hold it): it cannot be granted",
          spec_capability_name (cap));
  return 0;
}

/* Kubernetes' order: "drop ALL" empties the default set first, so that
 * `drop: [ALL], add: [X]` leaves exactly X; other drops win over adds. */
static int
add_capabilities (json_t *config, const struct cri_spec_input *in, struct husk_error **err)
{
  const security_context *sc = security_of (in->config);
  const Runtime__V1__Capability *caps = sc ? sc->capabilities : NULL;
  json_t *process_caps = json_object_get (json_object_get (config, "process"), "capabilities");
  uint64_t mask
      = is_privileged (in->config) ? all_caps () : caps_mask (json_object_get (process_caps, "bounding"));
  uint64_t ambient = 0;

  if (in->default_capabilities && !is_privileged (in->config))
    {
      mask = 0;
      for (size_t i = 0; in->default_capabilities[i]; i++)
        {
          int cap = spec_capability_from_name (in->default_capabilities[i]);
          if (cap >= 0)
            mask |= UINT64_C (1) << cap;
        }
    }

  if (caps && !is_privileged (in->config))
    {
      for (size_t i = 0; i < caps->n_drop_capabilities; i++)
        if (strcasecmp (caps->drop_capabilities[i], "ALL") == 0)
          mask = 0;
      if (apply_caps (&mask, caps->add_capabilities, caps->n_add_capabilities, true, "add_capabilities", err)
              < 0
          || apply_caps (&ambient, caps->add_ambient_capabilities, caps->n_add_ambient_capabilities, true,
                         "add_ambient_capabilities", err)
                 < 0)
        return -1;
      mask |= ambient;
      for (size_t i = 0; i < caps->n_drop_capabilities; i++)
        if (strcasecmp (caps->drop_capabilities[i], "ALL") != 0
            && apply_caps (&mask, &caps->drop_capabilities[i], 1, false, "drop_capabilities", err) < 0)
          return -1;
      ambient &= mask;
    }
  if (check_caps_grantable (in, mask | ambient, err) < 0)
    return -1;
  json_object_set_new (json_object_get (config, "process"), "capabilities",
                       json_pack ("{s:o, s:o, s:o, s:o, s:o}", "bounding", caps_json (mask), "effective",
                                  caps_json (mask), "permitted", caps_json (mask), "inheritable",
                                  caps_json (ambient), "ambient", caps_json (ambient)));
  return 0;
}

/* huskd's own oom_score_adj, which its children inherit (0 if unknown). */
static int
own_oom_score_adj (void)
{
  cleanup_free char *text = NULL;
  long long value = 0;

  if (husk_read_file ("/proc/self/oom_score_adj", &text, NULL, NULL) == 0)
    {
      text[strcspn (text, "\n")] = '\0';
      if (husk_parse_int64 (text, -1000, 1000, &value) < 0)
        value = 0;
    }
  return (int) value;
}

/* A container inherits huskd's oom_score_adj.  A higher value is set (a
 * container never keeps huskd's own protection, OOMScoreAdjust=-999 in
 * huskd.service); a lower one needs CAP_SYS_RESOURCE.  Without it the value
 * is left out (so that no runtime fails on it: runc and crun would), and
 * the container says so: an annotation its verbose status shows, and a
 * line in huskd's log.  0 is kubelet's "not set". */
static void
set_oom_score_adj (json_t *config, const struct cri_spec_input *in, int64_t asked)
{
  int current = own_oom_score_adj ();
  const char *name = in->config->metadata && in->config->metadata->name ? in->config->metadata->name : "";
  cleanup_free char *note = NULL;

  if (asked == current)
    return;
  if (asked > current || (own_caps ("CapEff: %llx") & (UINT64_C (1) << CAP_SYS_RESOURCE)))
    {
      json_object_set_new (json_object_get (config, "process"), "oomScoreAdj", json_integer (asked));
      return;
    }
  if (asked == 0)
    return;
  note = xasprintf (
      "asked %lld, kept %d: lowering oom_score_adj needs CAP_SYS_RESOURCE, which huskd does not hold",
      (long long) asked, current);
  json_object_set_new (object_member (config, "annotations"), CRI_SPEC_OOM_SCORE_ADJ_ANNOTATION,
                       json_string (note));
  husk_warn ("container %s (%s): oom_score_adj %s", in->container_id ? in->container_id : "?", name, note);
}

static int
set_process_flags (json_t *config, const struct cri_spec_input *in, struct husk_error **err)
{
  const security_context *sc = security_of (in->config);
  const Runtime__V1__LinuxContainerResources *res = in->config->linux ? in->config->linux->resources : NULL;
  json_t *process = json_object_get (config, "process");

  json_object_set_new (process, "noNewPrivileges", json_boolean (sc && sc->no_new_privs));
  /* The runtime's rlimits are inherited, as with containerd. */
  json_object_del (process, "rlimits");
  if (res)
    set_oom_score_adj (config, in, res->oom_score_adj);
  return 0;
}

/* ------------------------------------------------------------------ */
/* namespaces and hostname                                              */

static void
set_namespace (json_t *config, const char *type, const char *path, bool host)
{
  json_t *namespaces = json_object_get (linux_of (config), "namespaces");
  size_t i;
  json_t *ns;

  json_array_foreach (namespaces, i, ns)
  {
    if (strcmp (json_string_value (json_object_get (ns, "type")) ?: "", type) != 0)
      continue;
    if (host)
      json_array_remove (namespaces, i);
    else if (path)
      json_object_set_new (ns, "path", json_string (path));
    return;
  }
  if (!host)
    json_array_append_new (namespaces, path ? json_pack ("{s:s, s:s}", "type", type, "path", path)
                                            : json_pack ("{s:s}", "type", type));
}

static int
pid_namespace (json_t *config, const struct cri_spec_input *in, struct husk_error **err)
{
  const security_context *sc = security_of (in->config);
  Runtime__V1__NamespaceMode mode = sc && sc->namespace_options ? sc->namespace_options->pid
                                    : in->sandbox.host_pid      ? RUNTIME__V1__NAMESPACE_MODE__NODE
                                                                : RUNTIME__V1__NAMESPACE_MODE__POD;

  switch (mode)
    {
    case RUNTIME__V1__NAMESPACE_MODE__POD:
      /* Without a shared one the pod's pid mode was NODE or CONTAINER. */
      if (in->sandbox.pidns_path)
        set_namespace (config, "pid", in->sandbox.pidns_path, false);
      else
        set_namespace (config, "pid", NULL, in->sandbox.host_pid);
      return 0;
    case RUNTIME__V1__NAMESPACE_MODE__CONTAINER:
      set_namespace (config, "pid", NULL, false);
      return 0;
    case RUNTIME__V1__NAMESPACE_MODE__NODE:
      set_namespace (config, "pid", NULL, true);
      return 0;
    case RUNTIME__V1__NAMESPACE_MODE__TARGET:
      if (in->target_pidns_path == NULL)
        return husk_error_kind (err, EINVAL,
                                "linux.security_context.namespace_options.target_id `%s`: no such container",
                                sc->namespace_options->target_id);
      set_namespace (config, "pid", in->target_pidns_path, false);
      return 0;
    default:
      return husk_error_kind (err, EINVAL, "linux.security_context.namespace_options.pid: unknown mode %d",
                              (int) mode);
    }
}

/* A container runs in its pod's user namespace: kubelet repeats the pod's
 * userns_options for each container, and anything else is refused.  Its
 * cgroup namespace is then new, owned by the pod's (or the container's
 * root could not mount its cgroup). */
static int
set_user_namespace (json_t *config, const struct cri_spec_input *in, struct husk_error **err)
{
  static const char field[] = "linux.security_context.namespace_options.userns_options";
  const struct cri_spec_sandbox *sb = &in->sandbox;
  const Runtime__V1__LinuxContainerSecurityContext *sc
      = in->config->linux ? in->config->linux->security_context : NULL;
  const Runtime__V1__UserNamespace *options
      = sc && sc->namespace_options ? sc->namespace_options->userns_options : NULL;
  struct cri_userns *mine = xcalloc (1, sizeof *mine);
  bool pod_userns = sb->userns && sb->userns->pod;
  int ret = 0;

  if (options && cri_userns_parse (options, field, mine, err) < 0)
    ret = -1;
  else if (options && (pod_userns ? !cri_userns_equal (mine, sb->userns) : mine->pod))
    ret = husk_error_kind (
        err, EINVAL, "%s: differs from the pod's (a container runs in its pod's user namespace)", field);
  free (mine);
  if (ret < 0)
    return -1;
  set_namespace (config, "user", sb->userns_path, sb->userns_path == NULL);
  if (sb->userns_path)
    set_namespace (config, "cgroup", NULL, false);
  return 0;
}

/* Network, IPC and UTS are the pod's, whatever the container asks. */
static int
set_namespaces (json_t *config, const struct cri_spec_input *in, struct husk_error **err)
{
  const struct cri_spec_sandbox *sb = &in->sandbox;

  if (set_user_namespace (config, in, err) < 0)
    return -1;

  set_namespace (config, "network", sb->netns_path, sb->netns_path == NULL);
  set_namespace (config, "ipc", sb->ipcns_path, sb->ipcns_path == NULL);
  set_namespace (config, "uts", sb->utsns_path, sb->utsns_path == NULL);
  /* In the host's UTS namespace a hostname would rename the node. */
  if (sb->utsns_path && sb->hostname)
    json_object_set_new (config, "hostname", json_string (sb->hostname));
  else
    json_object_del (config, "hostname");
  return pid_namespace (config, in, err);
}

/* ------------------------------------------------------------------ */
/* mounts                                                               */

static bool
has_user_mount (const container_config *config, const char *destination)
{
  for (size_t i = 0; i < config->n_mounts; i++)
    if (strcmp (config->mounts[i]->container_path, destination) == 0)
      return true;
  return false;
}

static void
drop_mounts_at (json_t *mounts, const char *destination)
{
  for (size_t i = json_array_size (mounts); i-- > 0;)
    if (strcmp (json_string_value (json_object_get (json_array_get (mounts, i), "destination")) ?: "",
                destination)
        == 0)
      json_array_remove (mounts, i);
}

static json_t *
bind_mount (const char *source, const char *destination, const char *propagation, bool readonly)
{
  return json_pack ("{s:s, s:s, s:s, s:[s,s,s]}", "destination", destination, "type", "bind", "source",
                    source, "options", "rbind", propagation, readonly ? "ro" : "rw");
}

/* The containers of a pod share its /dev/shm (writable even on a
 * read-only rootfs), in place of the tmpfs of their own. */
static void
share_pod_shm (json_t *mounts, const char *shm_path)
{
  json_t *shm
      = json_pack ("{s:s, s:s, s:s, s:[s,s,s,s,s,s]}", "destination", "/dev/shm", "type", "bind", "source",
                   shm_path, "options", "rbind", "rprivate", "nosuid", "nodev", "noexec", "rw");
  size_t i;
  json_t *m;

  json_array_foreach (mounts, i, m)
  {
    if (strcmp (json_string_value (json_object_get (m, "destination")) ?: "", "/dev/shm") == 0)
      {
        json_array_set_new (mounts, i, shm);
        return;
      }
  }
  json_array_append_new (mounts, shm);
}

static int
add_sandbox_files (json_t *config, const struct cri_spec_input *in, struct husk_error **err)
{
  const struct
  {
    const char *source, *destination;
  } files[] = {
    { in->sandbox.hosts_path, "/etc/hosts" },
    { in->sandbox.hostname_path, "/etc/hostname" },
    { in->sandbox.resolv_conf_path, "/etc/resolv.conf" },
  };
  const security_context *sc = security_of (in->config);
  json_t *mounts = json_object_get (config, "mounts");

  for (size_t i = 0; i < N_ELEMENTS (files); i++)
    if (files[i].source && !has_user_mount (in->config, files[i].destination))
      json_array_append_new (
          mounts, bind_mount (files[i].source, files[i].destination, "rprivate", sc && sc->readonly_rootfs));
  if (in->sandbox.shm_path && !has_user_mount (in->config, "/dev/shm"))
    share_pod_shm (mounts, in->sandbox.shm_path);
  return 0;
}

static size_t
path_depth (const char *path)
{
  size_t depth = 0;

  for (const char *c = path; *c; c++)
    depth += *c == '/' && c[1] && c[1] != '/';
  return depth;
}

static const char *
propagation_option (Runtime__V1__MountPropagation propagation)
{
  switch (propagation)
    {
    case RUNTIME__V1__MOUNT_PROPAGATION__PROPAGATION_PRIVATE:
      return "rprivate";
    case RUNTIME__V1__MOUNT_PROPAGATION__PROPAGATION_HOST_TO_CONTAINER:
      return "rslave";
    case RUNTIME__V1__MOUNT_PROPAGATION__PROPAGATION_BIDIRECTIONAL:
      return "rshared";
    default:
      return NULL;
    }
}

static int
check_mount (const Runtime__V1__Mount *m, size_t i, struct husk_error **err)
{
  struct stat st;

  if (!nonempty (m->container_path) || m->container_path[0] != '/')
    return husk_error_kind (err, EINVAL, "mounts[%zu].container_path `%s`: must be an absolute path", i,
                            m->container_path);
  if (!nonempty (m->host_path))
    return husk_error_kind (err, EINVAL, "mounts[%zu].host_path: required (image mounts are not supported)",
                            i);
  if (propagation_option (m->propagation) == NULL)
    return husk_error_kind (err, EINVAL, "mounts[%zu].propagation: unknown value %d", i,
                            (int) m->propagation);
  if (stat (m->host_path, &st) < 0)
    return husk_error_make (err, errno, "mounts[%zu].host_path `%s`", i, m->host_path);
  if ((m->n_uidmappings == 0) != (m->n_gidmappings == 0))
    return husk_error_kind (err, EINVAL, "mounts[%zu].%s: required with %s (an idmapped mount needs both)", i,
                            m->n_uidmappings ? "gidMappings" : "uidMappings",
                            m->n_uidmappings ? "uidMappings" : "gidMappings");
  for (size_t k = 0; k < m->n_uidmappings + m->n_gidmappings; k++)
    {
      bool uid = k < m->n_uidmappings;
      const Runtime__V1__IDMapping *map = uid ? m->uidmappings[k] : m->gidmappings[k - m->n_uidmappings];
      if (map->length == 0)
        return husk_error_kind (err, EINVAL, "mounts[%zu].%s[%zu].length: must not be 0", i,
                                uid ? "uidMappings" : "gidMappings", uid ? k : k - m->n_uidmappings);
    }
  return 0;
}

/* kubelet's Mount uidMappings/gidMappings (the pod's mappings, for a pod
 * with a user namespace): an idmapped bind, so the volume's host-root files
 * appear as the pod's root's, without a chown on the host. */
static void
add_mount_mappings (json_t *mount, const Runtime__V1__Mount *m)
{
  json_t *uids = json_array (), *gids = json_array ();

  if (m->n_uidmappings == 0)
    {
      json_decref (uids);
      json_decref (gids);
      return;
    }
  for (size_t k = 0; k < m->n_uidmappings; k++)
    json_array_append_new (uids, json_pack ("{s:I, s:I, s:I}", "containerID",
                                            (json_int_t) m->uidmappings[k]->container_id, "hostID",
                                            (json_int_t) m->uidmappings[k]->host_id, "size",
                                            (json_int_t) m->uidmappings[k]->length));
  for (size_t k = 0; k < m->n_gidmappings; k++)
    json_array_append_new (gids, json_pack ("{s:I, s:I, s:I}", "containerID",
                                            (json_int_t) m->gidmappings[k]->container_id, "hostID",
                                            (json_int_t) m->gidmappings[k]->host_id, "size",
                                            (json_int_t) m->gidmappings[k]->length));
  json_object_set_new (mount, "uidMappings", uids);
  json_object_set_new (mount, "gidMappings", gids);
}

/* Mounts go in by depth, so that /a is mounted before /a/b whatever the
 * order kubelet sent them in; the rootfs propagation follows the most
 * shared one. */
static int
add_user_mounts (json_t *config, const struct cri_spec_input *in, struct husk_error **err)
{
  const container_config *cc = in->config;
  json_t *mounts = json_object_get (config, "mounts");
  cleanup_free size_t *order = xcalloc (cc->n_mounts + 1, sizeof *order);
  const char *rootfs_propagation = NULL;

  for (size_t i = 0; i < cc->n_mounts; i++)
    {
      size_t j = i;

      if (check_mount (cc->mounts[i], i, err) < 0)
        return -1;
      for (; j > 0
             && path_depth (cc->mounts[order[j - 1]]->container_path)
                    > path_depth (cc->mounts[i]->container_path);
           j--)
        order[j] = order[j - 1];
      order[j] = i;
    }
  for (size_t k = 0; k < cc->n_mounts; k++)
    {
      const Runtime__V1__Mount *m = cc->mounts[order[k]];
      const char *propagation = propagation_option (m->propagation);

      json_t *mount = bind_mount (m->host_path, m->container_path, propagation, m->readonly);

      drop_mounts_at (mounts, m->container_path);
      add_mount_mappings (mount, m);
      json_array_append_new (mounts, mount);
      if (strcmp (propagation, "rshared") == 0)
        rootfs_propagation = "rshared";
      else if (strcmp (propagation, "rslave") == 0 && rootfs_propagation == NULL)
        rootfs_propagation = "rslave";
    }
  if (rootfs_propagation)
    json_object_set_new (linux_of (config), "rootfsPropagation", json_string (rootfs_propagation));
  return 0;
}

/* A privileged container sees /sys and its cgroups writable. */
static int
privileged_mounts (json_t *config, const struct cri_spec_input *in, struct husk_error **err)
{
  json_t *mounts = json_object_get (config, "mounts");
  size_t i;
  json_t *mount;

  if (!is_privileged (in->config))
    return 0;
  json_array_foreach (mounts, i, mount)
  {
    const char *type = json_string_value (json_object_get (mount, "type")) ?: "";
    json_t *options = json_object_get (mount, "options");

    if (strcmp (type, "sysfs") != 0 && strcmp (type, "cgroup") != 0 && strcmp (type, "cgroup2") != 0)
      continue;
    for (size_t o = json_array_size (options); o-- > 0;)
      if (strcmp (json_string_value (json_array_get (options, o)) ?: "", "ro") == 0)
        json_array_set_new (options, o, json_string ("rw"));
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* devices                                                              */

static json_t *
device_json (const char *container_path, const struct stat *st)
{
  return json_pack ("{s:s, s:s, s:I, s:I, s:i, s:i, s:i}", "path", container_path, "type",
                    S_ISCHR (st->st_mode) ? "c" : "b", "major", (json_int_t) major (st->st_rdev), "minor",
                    (json_int_t) minor (st->st_rdev), "fileMode", (int) (st->st_mode & 07777), "uid", 0,
                    "gid", 0);
}

static json_t *
device_rule (const struct stat *st, const char *access)
{
  return json_pack ("{s:b, s:s, s:I, s:I, s:s}", "allow", 1, "type", S_ISCHR (st->st_mode) ? "c" : "b",
                    "major", (json_int_t) major (st->st_rdev), "minor", (json_int_t) minor (st->st_rdev),
                    "access", access);
}

static int
check_device (const Runtime__V1__Device *d, size_t i, struct stat *st, struct husk_error **err)
{
  if (!nonempty (d->container_path) || d->container_path[0] != '/')
    return husk_error_kind (err, EINVAL, "devices[%zu].container_path `%s`: must be an absolute path", i,
                            d->container_path);
  if (strspn (d->permissions, "rwm") != strlen (d->permissions))
    return husk_error_kind (err, EINVAL, "devices[%zu].permissions `%s`: only r, w and m are allowed", i,
                            d->permissions);
  /* stat: a symlink (/dev/disk/by-id/..., a plugin's alias) is followed. */
  if (stat (d->host_path, st) < 0)
    return husk_error_make (err, errno, "devices[%zu].host_path `%s`", i, d->host_path);
  if (!S_ISCHR (st->st_mode) && !S_ISBLK (st->st_mode) && !S_ISDIR (st->st_mode))
    return husk_error_kind (err, EINVAL, "devices[%zu].host_path `%s`: not a device or a directory", i,
                            d->host_path);
  return 0;
}

/* A directory given as a device (e.g. /dev/snd, /dev/dri, a plugin's
 * /dev/vfio): every device node under it, at the same place under
 * CONTAINER_PATH, as containerd and CRI-O do; symlinks inside are not
 * followed.  Returns how many it added. */
static size_t
add_device_dir (json_t *devices, json_t *rules, const char *host_dir, const char *container_dir,
                const char *access, int depth)
{
  cleanup_dir DIR *dir = depth < 8 ? opendir (host_dir) : NULL;
  struct dirent *entry;
  size_t added = 0;

  while (dir && (entry = readdir (dir)))
    {
      cleanup_free char *path = xasprintf ("%s/%s", host_dir, entry->d_name);
      cleanup_free char *target = xasprintf ("%s/%s", container_dir, entry->d_name);
      struct stat st;

      if (strcmp (entry->d_name, ".") == 0 || strcmp (entry->d_name, "..") == 0 || lstat (path, &st) < 0)
        continue;
      if (S_ISDIR (st.st_mode))
        added += add_device_dir (devices, rules, path, target, access, depth + 1);
      else if (S_ISCHR (st.st_mode) || S_ISBLK (st.st_mode))
        {
          json_array_append_new (devices, device_json (target, &st));
          json_array_append_new (rules, device_rule (&st, access));
          added++;
        }
    }
  return added;
}

/* Nodes every container gets from the runtime anyway. */
static bool
is_default_device (const char *name)
{
  static const char *const defaults[] = { "null",    "zero", "full", "random", "urandom", "tty",
                                          "console", "ptmx", "fd",   "stdin",  "stdout",  "stderr" };
  for (size_t i = 0; i < N_ELEMENTS (defaults); i++)
    if (strcmp (name, defaults[i]) == 0)
      return true;
  return false;
}

/* Privileged: every device node directly under the host's /dev. */
static void
add_host_devices (json_t *devices)
{
  cleanup_dir DIR *dir = opendir ("/dev");
  struct dirent *entry;

  while (dir && (entry = readdir (dir)))
    {
      cleanup_free char *path = xasprintf ("/dev/%s", entry->d_name);
      struct stat st;

      if (is_default_device (entry->d_name) || lstat (path, &st) < 0
          || !(S_ISCHR (st.st_mode) || S_ISBLK (st.st_mode)))
        continue;
      json_array_append_new (devices, device_json (path, &st));
    }
}

static int
add_devices (json_t *config, const struct cri_spec_input *in, struct husk_error **err)
{
  const container_config *cc = in->config;
  json_t *linux_obj = linux_of (config);
  json_t *devices = object_member (linux_obj, "devices");
  json_t *rules = object_member (object_member (linux_obj, "resources"), "devices");

  if (!json_is_array (devices))
    json_object_set_new (linux_obj, "devices", devices = json_array ());
  if (!json_is_array (rules))
    json_object_set_new (json_object_get (linux_obj, "resources"), "devices", rules = json_array ());
  for (size_t i = 0; i < cc->n_devices; i++)
    {
      const Runtime__V1__Device *d = cc->devices[i];
      struct stat st;

      const char *access = nonempty (d->permissions) ? d->permissions : "rwm";

      if (check_device (d, i, &st, err) < 0)
        return -1;
      if (S_ISDIR (st.st_mode))
        {
          if (add_device_dir (devices, rules, d->host_path, d->container_path, access, 0) == 0)
            return husk_error_kind (err, EINVAL,
                                    "devices[%zu].host_path `%s`: a directory without device nodes", i,
                                    d->host_path);
          continue;
        }
      json_array_append_new (devices, device_json (d->container_path, &st));
      json_array_append_new (rules, device_rule (&st, access));
    }
  if (is_privileged (cc))
    {
      add_host_devices (devices);
      json_array_clear (rules);
      json_array_append_new (rules, json_pack ("{s:b, s:s}", "allow", 1, "access", "rwm"));
    }
  return 0;
}

/* ------------------------------------------------------------------ */
/* masked and read-only paths                                           */

static json_t *
path_list (char **paths, size_t n)
{
  json_t *list = json_array ();

  for (size_t i = 0; i < n; i++)
    json_array_append_new (list, json_string (paths[i]));
  return list;
}

static int
set_masked_paths (json_t *config, const struct cri_spec_input *in, struct husk_error **err)
{
  const security_context *sc = security_of (in->config);
  json_t *linux_obj = linux_of (config);

  if (is_privileged (in->config))
    {
      json_object_set_new (linux_obj, "maskedPaths", json_array ());
      json_object_set_new (linux_obj, "readonlyPaths", json_array ());
      return 0;
    }
  for (size_t i = 0; sc && i < sc->n_masked_paths; i++)
    if (sc->masked_paths[i][0] != '/')
      return husk_error_kind (err, EINVAL, "linux.security_context.masked_paths[%zu] `%s`: must be absolute",
                              i, sc->masked_paths[i]);
  for (size_t i = 0; sc && i < sc->n_readonly_paths; i++)
    if (sc->readonly_paths[i][0] != '/')
      return husk_error_kind (err, EINVAL,
                              "linux.security_context.readonly_paths[%zu] `%s`: must be absolute", i,
                              sc->readonly_paths[i]);
  if (sc && sc->n_masked_paths)
    json_object_set_new (linux_obj, "maskedPaths", path_list (sc->masked_paths, sc->n_masked_paths));
  if (sc && sc->n_readonly_paths)
    json_object_set_new (linux_obj, "readonlyPaths", path_list (sc->readonly_paths, sc->n_readonly_paths));
  return 0;
}

/* ------------------------------------------------------------------ */
/* seccomp                                                              */

static int
load_profile (const char *path, json_t **out, struct husk_error **err)
{
  json_error_t jerr;

  if (path[0] != '/')
    return husk_error_kind (
        err, EINVAL, "linux.security_context.seccomp.localhost_ref `%s`: must be an absolute path", path);
  if (access (path, R_OK) < 0)
    return husk_error_make (err, errno, "linux.security_context.seccomp.localhost_ref `%s`", path);
  *out = json_load_file (path, 0, &jerr);
  if (*out == NULL || !json_is_object (*out))
    {
      json_decref (*out);
      return husk_error_kind (err, EINVAL, "linux.security_context.seccomp.localhost_ref `%s`: line %d: %s",
                              path, jerr.line, *out ? "not a JSON object" : jerr.text);
    }
  return 0;
}

/* The profile type, from field 15 or the old string form. */
static Runtime__V1__SecurityProfile__ProfileType
seccomp_type (const security_context *sc, const char **localhost)
{
  /* Old kubelets send only the deprecated string. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  const char *old = sc ? sc->seccomp_profile_path : NULL;
#pragma GCC diagnostic pop

  *localhost = NULL;
  if (sc && sc->seccomp)
    {
      *localhost = sc->seccomp->localhost_ref;
      return sc->seccomp->profile_type;
    }
  if (old && husk_str_has_prefix (old, "localhost/"))
    {
      *localhost = old + strlen ("localhost");
      return RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost;
    }
  if (old && (strcmp (old, "runtime/default") == 0 || strcmp (old, "docker/default") == 0))
    return RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault;
  return RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined;
}

static int
set_seccomp (json_t *config, const struct cri_spec_input *in, struct husk_error **err)
{
  const security_context *sc = security_of (in->config);
  const char *localhost;
  json_t *profile = NULL;
  uint64_t caps = caps_mask (
      json_object_get (json_object_get (json_object_get (config, "process"), "capabilities"), "bounding"));

  if (is_privileged (in->config))
    return 0;
  switch (seccomp_type (sc, &localhost))
    {
    case RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined:
      return 0;
    case RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault:
      /* huskd's seccomp_profile replaces the built-in one as it is. */
      profile = in->seccomp_default ? json_deep_copy (in->seccomp_default) : seccomp_default_profile (caps);
      break;
    case RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost:
      if (!nonempty (localhost))
        return husk_error_kind (err, EINVAL,
                                "linux.security_context.seccomp.localhost_ref: required for Localhost");
      if (load_profile (localhost, &profile, err) < 0)
        return -1;
      break;
    default:
      return husk_error_kind (err, EINVAL, "linux.security_context.seccomp.profile_type: unknown value %d",
                              (int) sc->seccomp->profile_type);
    }
  json_object_set_new (linux_of (config), "seccomp", profile);
  return 0;
}

/* ------------------------------------------------------------------ */
/* AppArmor                                                             */

/* Field 16 wins over the old string (field 9), as in kubelet and
 * containerd; the choice itself is cri/apparmor.c's. */
static int
set_apparmor (json_t *config, const struct cri_spec_input *in, struct husk_error **err)
{
  const security_context *sc = security_of (in->config);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  struct cri_apparmor_choice choice = {
    .has_profile = sc && sc->apparmor,
    .type = sc && sc->apparmor ? (int) sc->apparmor->profile_type : 0,
    .localhost_ref = sc && sc->apparmor ? sc->apparmor->localhost_ref : NULL,
    .old = sc ? sc->apparmor_profile : NULL,
    .privileged = is_privileged (in->config),
    .field = "linux.security_context",
  };
#pragma GCC diagnostic pop
  char *profile = NULL;

  if (cri_apparmor_resolve (in->apparmor, &choice, &profile, err) < 0)
    return -1;
  if (profile)
    json_object_set_new (json_object_get (config, "process"), "apparmorProfile", json_string (profile));
  else
    json_object_del (json_object_get (config, "process"), "apparmorProfile");
  free (profile);
  return 0;
}

/* ------------------------------------------------------------------ */
/* resources, cgroups, annotations                                      */

json_t *
cri_spec_resources (const struct Runtime__V1__LinuxContainerResources *res)
{
  json_t *resources = json_object ();
  json_t *cpu = json_object (), *memory = json_object ();

  if (res == NULL)
    {
      json_decref (cpu);
      json_decref (memory);
      return resources;
    }
  if (res->cpu_shares > 0)
    json_object_set_new (cpu, "shares", json_integer (res->cpu_shares));
  if (res->cpu_quota > 0)
    json_object_set_new (cpu, "quota", json_integer (res->cpu_quota));
  if (res->cpu_period > 0)
    json_object_set_new (cpu, "period", json_integer (res->cpu_period));
  if (nonempty (res->cpuset_cpus))
    json_object_set_new (cpu, "cpus", json_string (res->cpuset_cpus));
  if (nonempty (res->cpuset_mems))
    json_object_set_new (cpu, "mems", json_string (res->cpuset_mems));
  if (res->memory_limit_in_bytes > 0)
    json_object_set_new (memory, "limit", json_integer (res->memory_limit_in_bytes));
  if (res->memory_swap_limit_in_bytes > 0)
    json_object_set_new (memory, "swap", json_integer (res->memory_swap_limit_in_bytes));
  if (json_object_size (cpu))
    json_object_set (resources, "cpu", cpu);
  if (json_object_size (memory))
    json_object_set (resources, "memory", memory);
  json_decref (cpu);
  json_decref (memory);
  if (res->n_hugepage_limits)
    {
      json_t *limits = json_array ();
      for (size_t i = 0; i < res->n_hugepage_limits; i++)
        json_array_append_new (limits,
                               json_pack ("{s:s, s:I}", "pageSize", res->hugepage_limits[i]->page_size,
                                          "limit", (json_int_t) res->hugepage_limits[i]->limit));
      json_object_set_new (resources, "hugepageLimits", limits);
    }
  if (res->n_unified)
    {
      json_t *unified = object_member (resources, "unified");
      for (size_t i = 0; i < res->n_unified; i++)
        json_object_set_new (unified, res->unified[i]->key, json_string (res->unified[i]->value));
    }
  return resources;
}

static int
set_resources (json_t *config, const struct cri_spec_input *in, struct husk_error **err)
{
  const Runtime__V1__LinuxContainerResources *res = in->config->linux ? in->config->linux->resources : NULL;

  json_t *resources = cri_spec_resources (res);

  json_object_update (object_member (linux_of (config), "resources"), resources);
  json_decref (resources);
  return 0;
}

char *
cri_spec_cgroups_path (const char *parent, const char *id)
{
  if (!nonempty (parent))
    return NULL;
  if (husk_str_has_suffix (parent, ".slice"))
    {
      const char *slash = strrchr (parent, '/');
      const char *slice = slash ? slash + 1 : parent;
      struct husk_error *invalid = NULL;
      cleanup_free char *dir = NULL;

      /* As a path, not runc's "slice:husk:id": husk does not ask systemd
       * for the scope, and runc or crun without --systemd-cgroup would
       * take that form for a directory name.  An invalid slice (refused
       * at RunPodSandbox) is left for the runtime to name. */
      if (cgroup_slice_dir (slice, &dir, &invalid) < 0)
        {
          husk_error_free (&invalid);
          return xasprintf ("%s:husk:%s", slice, id);
        }
      return xasprintf ("%s/husk-%s.scope", dir, id);
    }
  return xasprintf ("%s%s%s", parent, husk_str_has_suffix (parent, "/") ? "" : "/", id);
}

static int
set_cgroups_path (json_t *config, const struct cri_spec_input *in, struct husk_error **err)
{
  cleanup_free char *path = cri_spec_cgroups_path (in->sandbox.cgroup_parent, in->container_id);

  if (path)
    json_object_set_new (linux_of (config), "cgroupsPath", json_string (path));
  return 0;
}

static int
set_annotations (json_t *config, const struct cri_spec_input *in, struct husk_error **err)
{
  const container_config *cc = in->config;
  json_t *annotations = object_member (config, "annotations");

  /* protobuf-c keeps duplicate map keys: the last one wins. */
  for (size_t i = 0; i < cc->n_annotations; i++)
    if (strcmp (cc->annotations[i]->key, CRI_SPEC_OOM_SCORE_ADJ_ANNOTATION) != 0) /* huskd's word only */
      json_object_set_new (annotations, cc->annotations[i]->key, json_string (cc->annotations[i]->value));
  json_object_set_new (annotations, "io.kubernetes.cri.container-type", json_string ("container"));
  if (in->sandbox.id)
    json_object_set_new (annotations, "io.kubernetes.cri.sandbox-id", json_string (in->sandbox.id));
  if (cc->metadata && nonempty (cc->metadata->name))
    json_object_set_new (annotations, "io.kubernetes.cri.container-name", json_string (cc->metadata->name));
  if (in->image_name)
    json_object_set_new (annotations, "io.kubernetes.cri.image-name", json_string (in->image_name));
  /* The image's StopSignal, as podman writes it: a record rebuilt from the
   * bundle (container_store.c) keeps stopping the container with it. */
  if (in->image && nonempty (in->image->stop_signal))
    json_object_set_new (annotations, "org.opencontainers.image.stopSignal",
                         json_string (in->image->stop_signal));
  return 0;
}

/* ------------------------------------------------------------------ */

typedef int (*spec_step) (json_t *config, const struct cri_spec_input *in, struct husk_error **err);

/* Capabilities come before seccomp, whose default profile depends on
 * them; mounts of the sandbox before the user's, which may replace them. */
static const spec_step spec_steps[] = {
  add_supplemental_groups, add_capabilities, set_process_flags, set_namespaces,
  add_sandbox_files,       add_user_mounts,  privileged_mounts, add_devices,
  set_masked_paths,        set_seccomp,      set_apparmor,      set_resources,
  set_cgroups_path,        set_annotations,
};

int
cri_spec_build (const struct cri_spec_input *in, json_t **out, struct husk_error **err)
{
  json_t *config;

  if (in->config == NULL)
    return husk_error_kind (err, EINVAL, "config: required");
  if (build_process (in, &config, err) < 0)
    return -1;
  for (size_t i = 0; i < N_ELEMENTS (spec_steps); i++)
    if (spec_steps[i](config, in, err) < 0)
      {
        json_decref (config);
        return -1;
      }
  *out = config;
  return 0;
}
