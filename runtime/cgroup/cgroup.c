/* Finding, creating, joining, freezing and removing the container's
 * cgroup in every hierarchy (v2, and v1 through cgroup_v1.c); the
 * container operations (pause, resume) that only touch it are in
 * runtime/container_cgroup.c.  What is written into it lives in
 * cgroup_resources.c. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
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
#include "runtime/cgroup/cgroup.h"

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

/* systemd nests slices by their dashes: "a-b-c.slice" lives in
 * a.slice/a-b.slice/a-b-c.slice; "-.slice" is the root. */
int
cgroup_slice_dir (const char *slice, char **out, struct husk_error **err)
{
  size_t len = strlen (slice);
  cleanup_free char *path = xstrdup ("");

  if (strcmp (slice, "-.slice") == 0)
    {
      *out = steal_pointer (&path);
      return 0;
    }
  if (!husk_str_has_suffix (slice, ".slice") || len == strlen (".slice") || strchr (slice, '/')
      || slice[0] == '-' || strstr (slice, "--") || slice[len - strlen (".slice") - 1] == '-')
    return husk_error_make (err, 0, "invalid systemd slice `%s`", slice);
  for (size_t i = 0; i + strlen (".slice") <= len; i++)
    if (slice[i] == '-' || i + strlen (".slice") == len)
      {
        char *longer = xasprintf ("%s/%.*s.slice", path, (int) i, slice);
        free (path);
        path = longer;
      }
  *out = steal_pointer (&path);
  return 0;
}

/* slice:prefix:name, mapped to cgroupfs as crun does without systemd. */
static int
resolve_systemd (const char *mount, const char *cgroups_path, char **out, struct husk_error **err)
{
  cleanup_free char *copy = xstrdup (cgroups_path);
  cleanup_free char *slice_path = NULL;
  char *slice = copy, *prefix, *name;

  prefix = strchr (slice, ':');
  name = prefix ? strchr (prefix + 1, ':') : NULL;
  if (prefix == NULL || name == NULL || strchr (name + 1, ':'))
    return husk_error_make (err, 0, "linux.cgroupsPath `%s`: expected `slice:prefix:name`", cgroups_path);
  *prefix++ = '\0';
  *name++ = '\0';
  if (*name == '\0' || strchr (name, '/') || strchr (prefix, '/'))
    return husk_error_make (err, 0, "linux.cgroupsPath `%s`: expected `slice:prefix:name`", cgroups_path);
  if (cgroup_slice_dir (*slice ? slice : "system.slice", &slice_path, err) < 0)
    return husk_error_wrap (err, "linux.cgroupsPath `%s`", cgroups_path);
  if (husk_str_has_suffix (name, ".slice"))
    *out = xasprintf ("%s%s/%s", mount, slice_path, name);
  else
    *out = xasprintf ("%s%s/%s%s%s.scope", mount, slice_path, prefix, *prefix ? "-" : "", name);
  return 0;
}

int
cgroup_resolve (const char *cgroups_path, const char *id, bool systemd, char **out, struct husk_error **err)
{
  const char *mount = cgroup_primary_mount ();
  cleanup_free char *own = NULL;

  if (mount == NULL)
    return husk_error_make (err, 0,
                            "no cgroup hierarchy is mounted (no cgroup2 at /sys/fs/cgroup or "
                            "/sys/fs/cgroup/unified, no cgroup v1 controller in /proc/self/mountinfo)");
  if (cgroups_path == NULL || *cgroups_path == '\0')
    {
      *out = xasprintf ("%s/husk/%s", mount, id);
      return 0;
    }
  if (has_dotdot (cgroups_path))
    return husk_error_make (err, 0, "linux.cgroupsPath `%s`: must not contain `..`", cgroups_path);
  if (systemd || (cgroups_path[0] != '/' && strchr (cgroups_path, ':')))
    return resolve_systemd (mount, cgroups_path, out, err);
  if (cgroups_path[0] == '/')
    {
      *out = xasprintf ("%s%s", mount, cgroups_path);
      return 0;
    }
  own = own_cgroup ();
  *out = xasprintf ("%s%s%s%s", mount, own, strcmp (own, "/") == 0 ? "" : "/", cgroups_path);
  return 0;
}

static bool
word_in_list (const char *list, const char *word)
{
  size_t len = strlen (word);

  for (const char *p = list; (p = strstr (p, word)) != NULL; p += len)
    if ((p == list || p[-1] == ' ' || p[-1] == '\n') && (p[len] == '\0' || p[len] == ' ' || p[len] == '\n'))
      return true;
  return false;
}

bool
cgroup_has_controller (const char *path, const char *controller)
{
  cleanup_free char *list = cgroup_read_file (path, "cgroup.controllers");

  return list && word_in_list (list, controller);
}

/* Turns on in DIR's subtree_control every controller DIR has and does not
 * yet pass down.  Best effort: a parent holding processes refuses, and the
 * check of each limit reports what is missing. */
static void
enable_controllers (const char *dir)
{
  cleanup_free char *available = cgroup_read_file (dir, "cgroup.controllers");
  cleanup_free char *enabled = cgroup_read_file (dir, "cgroup.subtree_control");
  cleanup_free char *control = xasprintf ("%s/cgroup.subtree_control", dir);
  cleanup_free char *wanted = xstrdup ("");
  char *word, *save = NULL;

  if (available == NULL || enabled == NULL)
    return;
  for (word = strtok_r (available, " \n", &save); word; word = strtok_r (NULL, " \n", &save))
    if (!word_in_list (enabled, word))
      {
        char *longer = xasprintf ("%s%s+%s", wanted, *wanted ? " " : "", word);
        free (wanted);
        wanted = longer;
      }
  if (*wanted == '\0' || husk_write_file (control, wanted, strlen (wanted), NULL) == 0)
    return;
  /* One refused controller fails the whole write: try them one by one. */
  for (word = strtok_r (wanted, " ", &save); word; word = strtok_r (NULL, " ", &save))
    if (husk_write_file (control, word, strlen (word), NULL) < 0)
      husk_debug ("enable %s in `%s`: %s", word + 1, control, strerror (errno));
}

static int
create_v2 (const char *path, struct husk_error **err)
{
  const char *mount = cgroup_unified_mount ();
  cleanup_free char *parents = xstrdup (path);

  if (mount && husk_str_has_prefix (path, mount) && path[strlen (mount)] == '/')
    for (char *p = parents + strlen (mount); p; p = strchr (p + 1, '/'))
      {
        *p = '\0';
        if (mkdir (parents, 0755) < 0 && errno != EEXIST)
          return husk_error_make (err, errno, "create cgroup `%s`", parents);
        enable_controllers (parents);
        *p = '/';
      }
  if (husk_mkdir_p (path, 0755, err) < 0)
    return husk_error_wrap (err, "create cgroup");
  return 0;
}

int
cgroup_create (const char *path, struct husk_error **err)
{
  cleanup_strv char **dirs = cgroup_dirs (path);
  int fd;

  for (size_t i = 0; dirs[i]; i++)
    if ((cgroup_is_v1_dir (dirs[i]) ? cgroup_v1_create (dirs[i], err) : create_v2 (dirs[i], err)) < 0)
      {
        cgroup_destroy (path, NULL);
        return -1;
      }
  fd = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    {
      husk_error_make (err, errno, "open cgroup `%s`", path);
      cgroup_destroy (path, NULL);
      return -1;
    }
  return fd;
}

/* "cpu, memory" or "none": the v1 controllers mounted here. */
static char *
v1_controller_list (void)
{
  static const char *const names[]
      = { "cpuset",   "cpu",   "cpuacct", "memory", "devices", "freezer", "net_cls",
          "net_prio", "blkio", "hugetlb", "pids",   "rdma",    "misc" };
  char *list = xstrdup ("");

  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (cgroup_v1_mount (names[i]))
      {
        char *longer = xasprintf ("%s%s%s", list, *list ? " " : "", names[i]);
        free (list);
        list = longer;
      }
  if (*list == '\0')
    {
      free (list);
      list = xstrdup ("none");
    }
  return list;
}

int
cgroup_controller_error (const char *path, const char *field, const char *controller, struct husk_error **err)
{
  const char *mount = cgroup_unified_mount ();
  cleanup_free char *root_list = NULL;
  cleanup_free char *v1 = v1_controller_list ();

  if (cgroup_name (path) == NULL)
    {
      /* A directory given by itself: what it has is all there is. */
      cleanup_free char *own = cgroup_read_file (path, "cgroup.controllers");
      if (own)
        own[strcspn (own, "\n")] = '\0';
      return husk_error_make (
          err, 0, "%s: cannot apply: the %s controller is not available in cgroup `%s` (it has: %s)", field,
          controller, path, own && *own ? own : "none");
    }
  root_list = mount ? cgroup_read_file (mount, "cgroup.controllers") : NULL;
  if (root_list && word_in_list (root_list, controller))
    return husk_error_make (err, 0,
                            "%s: cannot apply: the %s controller of the cgroup v2 hierarchy at %s is not "
                            "enabled for `%s` (does a parent cgroup hold processes?)",
                            field, controller, mount, path);
  if (root_list)
    root_list[strcspn (root_list, "\n")] = '\0';
  if (mount == NULL)
    return husk_error_make (err, 0,
                            "%s: cannot apply: no cgroup hierarchy on this host has the %s controller (no "
                            "cgroup v2 hierarchy; cgroup v1 has: %s)",
                            field, controller, v1);
  return husk_error_make (
      err, 0,
      "%s: cannot apply: no cgroup hierarchy on this host has the %s controller (the cgroup "
      "v2 hierarchy at %s has: %s; cgroup v1 has: %s)",
      field, controller, mount, root_list && *root_list ? root_list : "none", v1);
}

int
cgroup_enter (const char *path, pid_t pid, struct husk_error **err)
{
  cleanup_strv char **dirs = cgroup_dirs (path);
  char buf[32];
  int n = snprintf (buf, sizeof buf, "%d", (int) pid);

  for (size_t i = 0; dirs[i]; i++)
    {
      cleanup_free char *procs = xasprintf ("%s/cgroup.procs", dirs[i]);
      if (husk_write_file (procs, buf, (size_t) n, err) < 0)
        return -1;
    }
  return 0;
}

int
cgroup_enter_unified (const char *path, pid_t pid, struct husk_error **err)
{
  cleanup_strv char **dirs = cgroup_dirs (path);
  char buf[32];
  int n = snprintf (buf, sizeof buf, "%d", (int) pid);

  for (size_t i = 0; dirs[i]; i++)
    {
      cleanup_free char *procs = NULL;
      if (cgroup_is_v1_dir (dirs[i]))
        continue;
      procs = xasprintf ("%s/cgroup.procs", dirs[i]);
      if (husk_write_file (procs, buf, (size_t) n, err) < 0)
        return -1;
    }
  return 0;
}

int
cgroup_enter_v1_self (const char *path, struct husk_error **err)
{
  cleanup_strv char **dirs = cgroup_dirs (path);

  for (size_t i = 0; dirs[i]; i++)
    {
      cleanup_free char *tasks = NULL;
      if (!cgroup_is_v1_dir (dirs[i]))
        continue;
      tasks = xasprintf ("%s/tasks", dirs[i]);
      if (husk_write_file (tasks, "0", 1, err) < 0)
        return -1;
    }
  return 0;
}

bool
cgroup_exists (const char *path)
{
  cleanup_strv char **dirs = NULL;

  if (path == NULL)
    return false;
  dirs = cgroup_dirs (path);
  for (size_t i = 0; dirs[i]; i++)
    if (access (dirs[i], F_OK) == 0)
      return true;
  return false;
}

/* Appends the pids of PROCS (one per line) that LIST does not hold yet. */
static void
add_pids (char *procs, pid_t **list, size_t *count, size_t *cap)
{
  char *line, *save = NULL;

  for (line = strtok_r (procs, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      pid_t pid = (pid_t) atoi (line);
      bool seen = false;

      for (size_t i = 0; i < *count && !seen; i++)
        seen = (*list)[i] == pid;
      if (seen)
        continue;
      if (*count == *cap)
        *list = xrealloc (*list, (*cap *= 2) * sizeof **list);
      (*list)[(*count)++] = pid;
    }
}

int
cgroup_pids (const char *path, pid_t **pids, size_t *n, struct husk_error **err)
{
  cleanup_strv char **dirs = cgroup_dirs (path);
  size_t count = 0, cap = 16, found = 0;
  pid_t *list = xmalloc (cap * sizeof *list);

  /* The union over every hierarchy: they hold the same processes, except
   * while a process joins them one by one — a create killed then leaves its
   * init in some only (on a hybrid host, often the unified one alone). */
  for (size_t i = 0; dirs[i]; i++)
    {
      cleanup_free char *procs = xasprintf ("%s/cgroup.procs", dirs[i]);
      cleanup_free char *content = NULL;
      struct husk_error *ignored = NULL;

      if (access (dirs[i], F_OK) < 0 && (found > 0 || dirs[i + 1] != NULL))
        continue;
      if (husk_read_file (procs, &content, NULL, found > 0 ? &ignored : err) < 0)
        {
          if (found > 0)
            {
              husk_error_free (&ignored);
              continue;
            }
          free (list);
          return -1;
        }
      found++;
      add_pids (content, &list, &count, &cap);
    }
  *pids = list;
  *n = count;
  return 0;
}

static int
signal_pids (const char *path, int sig, struct husk_error **err)
{
  cleanup_free pid_t *pids = NULL;
  size_t n = 0;

  if (cgroup_pids (path, &pids, &n, err) < 0)
    return -1;
  for (size_t i = 0; i < n; i++)
    if (kill (pids[i], sig) < 0 && errno != ESRCH)
      return husk_error_make (err, errno, "kill %d", (int) pids[i]);
  return 0;
}

/* cgroup.kill of the unified directory (hybrid hosts have it too), NULL
 * without one or on kernels before 5.14. */
static char *
kill_file (const char *path)
{
  cleanup_strv char **dirs = cgroup_dirs (path);
  char *file;

  if (cgroup_is_v1_dir (dirs[0]))
    return NULL;
  file = xasprintf ("%s/cgroup.kill", dirs[0]);
  if (access (file, F_OK) == 0)
    return file;
  free (file);
  return NULL;
}

int
cgroup_kill_all (const char *path, int sig, struct husk_error **err)
{
  cleanup_free char *freezer = NULL;
  cleanup_free char *kill_path = sig == SIGKILL ? kill_file (path) : NULL;
  bool thaw = false;
  int ret;

  /* On a hybrid host cgroup.kill reaches only the unified hierarchy's
   * members; one that joined only v1 ones (a create killed midway) gets
   * the signal from the union of their cgroup.procs. */
  if (kill_path)
    {
      cleanup_strv char **dirs = cgroup_dirs (path);

      if (husk_write_file (kill_path, "1", 1, err) < 0)
        return -1;
      return dirs[0] && dirs[1] ? signal_pids (path, sig, err) : 0;
    }
  /* Without cgroup.kill a forking process could escape the signal: freeze
   * it first where the v1 freezer can.  An empty cgroup has no process
   * that could fork, so it needs no freeze: freezing and thawing costs a
   * kernel text patch with IPIs to every CPU (the freezer's static key),
   * about 0.4 ms of each `husk run`'s delete. */
  if (cgroup_locate (path, "freezer", &freezer) == CGROUP_V1 && !cgroup_v1_frozen (freezer))
    {
      cleanup_free pid_t *pids = NULL;
      size_t n = 0;

      if (cgroup_pids (path, &pids, &n, err) < 0)
        return -1;
      if (n == 0)
        return 0;
      thaw = cgroup_v1_freeze (freezer, true, NULL) == 0;
    }
  ret = signal_pids (path, sig, err);
  if (thaw && cgroup_v1_freeze (freezer, false, ret < 0 ? NULL : err) < 0)
    return -1;
  return ret;
}

/* "frozen 0|1" from an open cgroup.events; -1 if it cannot be read.
 * Reading through the fd also re-arms its poll notification. */
static int
frozen_state (int events_fd)
{
  char buf[256];
  ssize_t n;
  const char *line;

  if (lseek (events_fd, 0, SEEK_SET) < 0 || (n = read (events_fd, buf, sizeof buf - 1)) < 0)
    return -1;
  buf[n] = '\0';
  line = strstr (buf, "frozen ");
  return line ? line[strlen ("frozen ")] == '1' : -1;
}

static long long
now_ms (void)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (long long) now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static int
freeze_v2 (const char *path, bool frozen, struct husk_error **err)
{
  cleanup_free char *freeze = xasprintf ("%s/cgroup.freeze", path);
  cleanup_free char *events = xasprintf ("%s/cgroup.events", path);
  cleanup_close int events_fd = -1;
  const char *verb = frozen ? "freeze" : "thaw";
  long long deadline = now_ms () + 10000;

  if (access (freeze, F_OK) < 0)
    return husk_error_make (err, errno, "%s cgroup `%s`: no cgroup.freeze (the kernel needs 5.2 or later)",
                            verb, path);
  events_fd = open (events, O_RDONLY | O_CLOEXEC);
  if (events_fd < 0)
    return husk_error_make (err, errno, "%s cgroup: open `%s`", verb, events);
  if (husk_write_file (freeze, frozen ? "1" : "0", 1, err) < 0)
    return husk_error_wrap (err, "%s cgroup", verb);
  /* Freezing completes when every task has stopped; cgroup.events then
   * says so and wakes pollers with POLLPRI. */
  while (frozen_state (events_fd) != (int) frozen)
    {
      struct pollfd pfd = { .fd = events_fd, .events = POLLPRI };

      if (now_ms () > deadline)
        {
          if (frozen)
            husk_write_file (freeze, "0", 1, NULL);
          return husk_error_make (err, 0, "%s cgroup `%s`: not done after 10 s", verb, path);
        }
      poll (&pfd, 1, 100);
    }
  return 0;
}

int
cgroup_freeze (const char *path, bool frozen, struct husk_error **err)
{
  cleanup_free char *dir = NULL;

  switch (cgroup_locate (path, "freezer", &dir))
    {
    case CGROUP_V2:
      return freeze_v2 (dir, frozen, err);
    case CGROUP_V1:
      return cgroup_v1_freeze (dir, frozen, err);
    default:
      return husk_error_make (err, 0,
                              "%s cgroup `%s`: no freezer (no cgroup v2 hierarchy, no v1 freezer controller)",
                              frozen ? "freeze" : "thaw", path);
    }
}

bool
cgroup_is_frozen (const char *path)
{
  cleanup_free char *dir = NULL;
  cleanup_free char *content = NULL;

  if (path == NULL)
    return false;
  switch (cgroup_locate (path, "freezer", &dir))
    {
    case CGROUP_V2:
      content = cgroup_read_file (dir, "cgroup.freeze");
      return content && content[0] == '1';
    case CGROUP_V1:
      return cgroup_v1_frozen (dir);
    default:
      return false;
    }
}

static int
remove_dir (const char *dir, struct husk_error **err)
{
  for (int attempt = 0; attempt < 100; attempt++)
    {
      struct timespec pause = { 0, 10 * 1000 * 1000 };

      if (rmdir (dir) == 0 || errno == ENOENT)
        return 0;
      if (errno != EBUSY)
        break;
      nanosleep (&pause, NULL);
    }
  return husk_error_make (err, errno, "remove cgroup `%s`", dir);
}

bool
cgroup_remove_if_empty (const char *path)
{
  cleanup_strv char **dirs = cgroup_dirs (path);
  bool gone = true;

  for (size_t i = 0; dirs[i]; i++)
    if (rmdir (dirs[i]) < 0 && errno != ENOENT)
      gone = false;
  return gone;
}

int
cgroup_destroy (const char *path, struct husk_error **err)
{
  cleanup_strv char **dirs = cgroup_dirs (path);
  int ret = 0;

  /* Every hierarchy, even after one refused, so that little is left. */
  for (size_t i = 0; dirs[i]; i++)
    if (remove_dir (dirs[i], ret < 0 ? NULL : err) < 0)
      ret = -1;
  return ret;
}
