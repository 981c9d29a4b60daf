/* Finding, creating, joining and removing the container's cgroup v2 dir. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup.h"

const char *
cgroup_unified_mount (void)
{
  static const char *const candidates[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
  struct statfs fs;

  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++)
    if (statfs (candidates[i], &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC)
      return candidates[i];
  return NULL;
}

/* The runtime's own cgroup ("0::/path" in /proc/self/cgroup). */
static char *
own_cgroup (void)
{
  cleanup_free char *content = NULL;
  char *line, *save = NULL;

  if (husk_read_file ("/proc/self/cgroup", &content, NULL, NULL) < 0)
    return xstrdup ("/");
  for (line = strtok_r (content, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    if (husk_str_has_prefix (line, "0::"))
      return xstrdup (line + 3);
  return xstrdup ("/");
}

static bool
has_dotdot (const char *path)
{
  const char *p = path;

  while ((p = strstr (p, "..")) != NULL)
    {
      bool starts = p == path || p[-1] == '/';
      bool ends = p[2] == '\0' || p[2] == '/';
      if (starts && ends)
        return true;
      p += 2;
    }
  return false;
}

int
cgroup_resolve (const char *cgroups_path, const char *id, bool systemd, char **out, struct husk_error **err)
{
  const char *mount = cgroup_unified_mount ();
  cleanup_free char *own = NULL;

  if (mount == NULL)
    return husk_error_make (err, 0,
                            "no cgroup v2 hierarchy is mounted (looked at /sys/fs/cgroup and "
                            "/sys/fs/cgroup/unified)");
  if (cgroups_path == NULL || *cgroups_path == '\0')
    {
      *out = xasprintf ("%s/husk/%s", mount, id);
      return 0;
    }
  if (has_dotdot (cgroups_path))
    return husk_error_make (err, 0, "linux.cgroupsPath `%s`: must not contain `..`", cgroups_path);
  if (systemd || (cgroups_path[0] != '/' && strchr (cgroups_path, ':')))
    {
      /* slice:prefix:name, as crun maps it when systemd does not manage the node */
      cleanup_free char *copy = xstrdup (cgroups_path);
      char *slice = copy, *prefix, *name;

      prefix = strchr (slice, ':');
      name = prefix ? strchr (prefix + 1, ':') : NULL;
      if (prefix == NULL || name == NULL)
        return husk_error_make (err, 0, "linux.cgroupsPath `%s`: expected `slice:prefix:name`", cgroups_path);
      *prefix++ = '\0';
      *name++ = '\0';
      *out = xasprintf ("%s/%s/%s%s%s.scope", mount, *slice ? slice : "system.slice", prefix,
                        *prefix ? "-" : "", name);
      return 0;
    }
  if (cgroups_path[0] == '/')
    {
      *out = xasprintf ("%s%s", mount, cgroups_path);
      return 0;
    }
  own = own_cgroup ();
  *out = xasprintf ("%s%s%s%s", mount, own, strcmp (own, "/") == 0 ? "" : "/", cgroups_path);
  return 0;
}

int
cgroup_create (const char *path, struct husk_error **err)
{
  int fd;

  if (husk_mkdir_p (path, 0755, err) < 0)
    return husk_error_wrap (err, "create cgroup");
  fd = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return husk_error_make (err, errno, "open cgroup `%s`", path);
  return fd;
}

/* The controller a resource needs, from the name the parser recorded
 * ("memory.limit" -> "memory", "blockIO.weight" -> "io"). */
static char *
controller_of (const char *limit)
{
  static const struct
  {
    const char *prefix, *controller;
  } map[] = {
    { "memory", "memory" },
    { "cpu", "cpu" },
    { "pids", "pids" },
    { "blockIO", "io" },
    { "hugepageLimits", "hugetlb" },
    { "rdma", "rdma" },
    { "network", "net_cls/net_prio" },
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (husk_str_has_prefix (limit, map[i].prefix))
      return xstrdup (map[i].controller);
  return xstrdup (limit);
}

int
cgroup_check_resources (const struct spec *spec, const char *path, struct husk_error **err)
{
  cleanup_free char *controller = NULL;

  if (!spec->resources.has_limits)
    return 0;
  controller = controller_of (spec->resources.first_limit ? spec->resources.first_limit : "unknown");
  return husk_error_make (err, 0,
                          "linux.resources.%s: cannot apply: the %s controller is not managed by husk yet "
                          "(cgroup v2 hierarchy %s)",
                          spec->resources.first_limit ? spec->resources.first_limit : "?", controller,
                          cgroup_unified_mount () ? cgroup_unified_mount () : "none");
}

int
cgroup_enter (const char *path, pid_t pid, struct husk_error **err)
{
  cleanup_free char *procs = xasprintf ("%s/cgroup.procs", path);
  char buf[32];
  int n = snprintf (buf, sizeof buf, "%d", (int) pid);

  return husk_write_file (procs, buf, (size_t) n, err);
}

int
cgroup_pids (const char *path, pid_t **pids, size_t *n, struct husk_error **err)
{
  cleanup_free char *procs = xasprintf ("%s/cgroup.procs", path);
  cleanup_free char *content = NULL;
  size_t count = 0, cap = 16;
  pid_t *list;
  char *line, *save = NULL;

  if (husk_read_file (procs, &content, NULL, err) < 0)
    return -1;
  list = xmalloc (cap * sizeof *list);
  for (line = strtok_r (content, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      if (count == cap)
        list = xrealloc (list, (cap *= 2) * sizeof *list);
      list[count++] = (pid_t) atoi (line);
    }
  *pids = list;
  *n = count;
  return 0;
}

int
cgroup_kill_all (const char *path, int sig, struct husk_error **err)
{
  cleanup_free pid_t *pids = NULL;
  size_t n = 0;

  if (sig == SIGKILL)
    {
      cleanup_free char *kill_file = xasprintf ("%s/cgroup.kill", path);
      if (access (kill_file, F_OK) == 0)
        return husk_write_file (kill_file, "1", 1, err);
    }
  if (cgroup_pids (path, &pids, &n, err) < 0)
    return -1;
  for (size_t i = 0; i < n; i++)
    if (kill (pids[i], sig) < 0 && errno != ESRCH)
      return husk_error_make (err, errno, "kill %d", (int) pids[i]);
  return 0;
}

int
cgroup_destroy (const char *path, struct husk_error **err)
{
  for (int attempt = 0; attempt < 100; attempt++)
    {
      struct timespec pause = { 0, 10 * 1000 * 1000 };

      if (rmdir (path) == 0 || errno == ENOENT)
        return 0;
      if (errno != EBUSY)
        break;
      nanosleep (&pause, NULL);
    }
  return husk_error_make (err, errno, "remove cgroup `%s`", path);
}
