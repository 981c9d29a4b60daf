/* Which sysctls a pod may set: only those the kernel namespaces with the
 * pod's own network or ipc namespace (as kubelet's safe and unsafe lists
 * assume); anything else would change the node. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cri/pod/sandbox_internal.h"
#include "husk/util.h"

static const struct
{
  const char *prefix;
  bool exact; /* the whole name, not a prefix */
  bool needs_net;
} namespaced_sysctls[] = {
  { "net.", false, true },
  { "kernel.shmmax", true, false },
  { "kernel.shmall", true, false },
  { "kernel.shmmni", true, false },
  { "kernel.shm_rmid_forced", true, false },
  { "kernel.msgmax", true, false },
  { "kernel.msgmnb", true, false },
  { "kernel.msgmni", true, false },
  { "kernel.sem", true, false },
  { "fs.mqueue.", false, false },
};

/* "net/ipv4/ip_forward" and "net.ipv4.ip_forward" are the same key; a
 * dot inside a slash-separated key belongs to an interface name. */
static char *
dotted (const char *key)
{
  char *name = xstrdup (key);

  if (strchr (key, '/'))
    for (char *c = name; *c; c++)
      *c = *c == '/' ? '.' : *c == '.' ? '/' : *c;
  return name;
}

static char *
proc_path (const char *name)
{
  char *path = xasprintf ("/proc/sys/%s", name);

  for (char *c = path + strlen ("/proc/sys/"); *c; c++)
    *c = *c == '.' ? '/' : *c == '/' ? '.' : *c;
  return path;
}

static int
check_one (const char *key, const char *name, bool pod_net, bool pod_ipc, struct husk_error **err)
{
  if (strstr (name, "..") || strchr (name, ' ') || name[0] == '.' || strstr (key, "../"))
    return husk_error_kind (err, EINVAL, "linux.sysctls: `%s` is not a sysctl name", key);
  for (size_t i = 0; i < sizeof namespaced_sysctls / sizeof namespaced_sysctls[0]; i++)
    {
      bool match = namespaced_sysctls[i].exact ? strcmp (name, namespaced_sysctls[i].prefix) == 0
                                               : husk_str_has_prefix (name, namespaced_sysctls[i].prefix);
      if (!match)
        continue;
      if (namespaced_sysctls[i].needs_net ? pod_net : pod_ipc)
        return 0;
      return husk_error_kind (err, EINVAL,
                              "linux.sysctls: `%s` needs the pod's own %s namespace, not the host's", key,
                              namespaced_sysctls[i].needs_net ? "network" : "ipc");
    }
  return husk_error_kind (err, EINVAL, "linux.sysctls: `%s` is not namespaced: it would change the node",
                          key);
}

int
sandbox_sysctls (const Runtime__V1__PodSandboxConfig *config, bool pod_net, bool pod_ipc,
                 struct sandbox_sysctl **out, size_t *n, struct husk_error **err)
{
  const Runtime__V1__LinuxPodSandboxConfig *linux_cfg = config->linux;
  size_t count = linux_cfg ? linux_cfg->n_sysctls : 0;
  struct sandbox_sysctl *list = xcalloc (count + 1, sizeof *list);

  for (size_t i = 0; i < count; i++)
    {
      const char *key = linux_cfg->sysctls[i]->key, *value = linux_cfg->sysctls[i]->value;
      char *name = dotted (key ? key : "");

      if (check_one (key ? key : "", name, pod_net, pod_ipc, err) < 0)
        {
          free (name);
          sandbox_sysctls_free (list, i);
          return -1;
        }
      list[i].path = proc_path (name);
      list[i].value = xstrdup (value ? value : "");
      free (name);
    }
  *out = list;
  *n = count;
  return 0;
}

void
sandbox_sysctls_free (struct sandbox_sysctl *list, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      free (list[i].path);
      free (list[i].value);
    }
  free (list);
}
