/* cgroup v1 and hybrid hosts: which hierarchy holds each controller (the
 * unified one first, else a v1 mount from /proc/self/mountinfo), where a
 * container cgroup keeps a controller's files, and the v1 side of making,
 * freezing and reading one.  Callers name controllers by their v2 names. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
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

/* The v1 controllers husk puts a container in, each at most once. */
static const char *const v1_controllers[] = {
  "cpuset",   "cpu",   "cpuacct",    "memory",  "devices", "freezer", "net_cls",
  "net_prio", "blkio", "perf_event", "hugetlb", "pids",    "rdma",    "misc",
};
#define N_V1_CONTROLLERS (sizeof v1_controllers / sizeof v1_controllers[0])

struct layout
{
  const char *unified;                     /* mount of the v2 hierarchy, or NULL */
  char *unified_controllers;               /* its root's cgroup.controllers */
  char *mounts[N_V1_CONTROLLERS];          /* per controller: its v1 mount, or NULL */
  char *hierarchies[N_V1_CONTROLLERS + 1]; /* each v1 mount once */
};

static struct layout layout;
static pthread_once_t layout_once = PTHREAD_ONCE_INIT;

static int
controller_index (const char *name)
{
  for (size_t i = 0; i < N_V1_CONTROLLERS; i++)
    if (strcmp (v1_controllers[i], name) == 0)
      return (int) i;
  return -1;
}

/* One mountinfo line of a v1 hierarchy: its controllers from the super
 * options ("rw,cpu,cpuacct"), skipping named ones (name=systemd). */
static void
add_v1_mount (const char *mount_point, char *super_options)
{
  char *option, *save = NULL;
  bool used = false;

  for (option = strtok_r (super_options, ",", &save); option; option = strtok_r (NULL, ",", &save))
    {
      int i = controller_index (option);
      if (i < 0 || layout.mounts[i])
        continue;
      layout.mounts[i] = xstrdup (mount_point);
      if (!used)
        {
          layout.hierarchies[husk_strv_len (layout.hierarchies)] = layout.mounts[i];
          used = true;
        }
    }
}

/* The usual layout without reading /proc/self/mountinfo, which costs
 * milliseconds on a node with hundreds of mounts: every v1 controller
 * /proc/self/cgroup names is a cgroup mount point at /sys/fs/cgroup/NAME
 * (or a symlink there, cpu -> cpu,cpuacct), the controllers of one
 * hierarchy share a mount and different hierarchies do not.  runc looks
 * there first too.  Anything else returns false and mountinfo decides. */
static bool
load_v1_mounts_default (void)
{
  cleanup_file FILE *f = fopen ("/proc/self/cgroup", "re");
  char *mounts[N_V1_CONTROLLERS] = { 0 };
  dev_t devs[N_V1_CONTROLLERS];
  size_t n_devs = 0;
  struct stat top;
  char line[4096];
  bool ok = f != NULL && stat ("/sys/fs/cgroup", &top) == 0;

  while (ok && fgets (line, sizeof line, f))
    {
      char *controllers = strchr (line, ':'), *end, *option, *save = NULL;
      char *mount = NULL;
      dev_t dev = 0;

      end = controllers ? strchr (controllers + 1, ':') : NULL;
      if (end == NULL)
        continue;
      *end = '\0';
      for (option = strtok_r (controllers + 1, ",", &save); ok && option;
           option = strtok_r (NULL, ",", &save))
        {
          cleanup_free char *path = NULL;
          struct statfs fs;
          struct stat st;
          int i = controller_index (option);

          if (i < 0 || mounts[i])
            continue; /* name=systemd, or a controller husk does not use */
          path = xasprintf ("/sys/fs/cgroup/%s", option);
          if (mount == NULL)
            {
              mount = realpath (path, NULL);
              ok = mount != NULL && statfs (mount, &fs) == 0 && fs.f_type == CGROUP_SUPER_MAGIC
                   && stat (mount, &st) == 0 && st.st_dev != top.st_dev;
              dev = ok ? st.st_dev : 0;
              for (size_t k = 0; ok && k < n_devs; k++)
                ok = devs[k] != dev;
              if (ok)
                devs[n_devs++] = dev;
              mounts[i] = mount;
            }
          else
            {
              ok = stat (path, &st) == 0 && st.st_dev == dev;
              mounts[i] = xstrdup (mount);
            }
        }
      if (mount == NULL)
        continue;
      layout.hierarchies[husk_strv_len (layout.hierarchies)] = mount;
    }
  if (!ok)
    {
      /* Each hierarchy's string is the first of its controllers' mounts. */
      for (size_t i = 0; i < N_V1_CONTROLLERS; i++)
        free (mounts[i]);
      memset (layout.hierarchies, 0, sizeof layout.hierarchies);
      return false;
    }
  memcpy (layout.mounts, mounts, sizeof mounts);
  return true;
}

static void
load_v1_mountinfo (void)
{
  cleanup_file FILE *f = fopen ("/proc/self/mountinfo", "re");
  char line[4096];

  while (f && fgets (line, sizeof line, f))
    {
      char mount_point[1024], fs_type[64], super_options[1024];
      const char *dash = strstr (line, " - ");

      if (dash == NULL || sscanf (line, "%*s %*s %*s %*s %1023s", mount_point) != 1
          || sscanf (dash + 3, "%63s %*s %1023s", fs_type, super_options) != 2
          || strcmp (fs_type, "cgroup") != 0)
        continue;
      add_v1_mount (mount_point, super_options);
    }
}

static void
load_v1_mounts (void)
{
  if (!load_v1_mounts_default ())
    load_v1_mountinfo ();
}

static void
load_layout (void)
{
  layout.unified = cgroup_unified_mount ();
  if (layout.unified)
    layout.unified_controllers = cgroup_read_file (layout.unified, "cgroup.controllers");
  load_v1_mounts ();
}

static const struct layout *
host_layout (void)
{
  pthread_once (&layout_once, load_layout);
  return &layout;
}

/* v1 names the io controller blkio; v2 accounts cpu time in cpu. */
static const char *
v1_name (const char *controller)
{
  return strcmp (controller, "io") == 0 ? "blkio" : controller;
}

static const char *
v2_name (const char *controller)
{
  return strcmp (controller, "cpuacct") == 0 ? "cpu" : strcmp (controller, "blkio") == 0 ? "io" : controller;
}

static bool
in_word_list (const char *list, const char *word)
{
  size_t len = strlen (word);

  for (const char *p = list; p && (p = strstr (p, word)) != NULL; p += len)
    if ((p == list || p[-1] == ' ') && (p[len] == '\0' || p[len] == ' ' || p[len] == '\n'))
      return true;
  return false;
}

const char *
cgroup_v1_mount (const char *controller)
{
  int i = controller_index (v1_name (controller));

  return i < 0 ? NULL : host_layout ()->mounts[i];
}

char *const *
cgroup_v1_hierarchies (void)
{
  return host_layout ()->hierarchies;
}

enum cgroup_version
cgroup_controller_version (const char *controller)
{
  const struct layout *l = host_layout ();

  if (l->unified && in_word_list (l->unified_controllers, v2_name (controller)))
    return CGROUP_V2;
  if (cgroup_v1_mount (controller))
    return CGROUP_V1;
  /* Device filters (BPF), cgroup.freeze and cpu.stat's usage are part of
   * every v2 cgroup. */
  if (l->unified
      && (strcmp (controller, "devices") == 0 || strcmp (controller, "freezer") == 0
          || strcmp (controller, "cpuacct") == 0))
    return CGROUP_V2;
  return CGROUP_NONE;
}

/* The mount PATH lies under (unified or v1), NULL if none. */
static const char *
mount_of (const char *path)
{
  const struct layout *l = host_layout ();
  const char *best = NULL;
  size_t best_len = 0;

  if (l->unified && husk_str_has_prefix (path, l->unified)
      && (path[strlen (l->unified)] == '/' || path[strlen (l->unified)] == '\0'))
    {
      best = l->unified;
      best_len = strlen (best);
    }
  for (size_t i = 0; l->hierarchies[i]; i++)
    {
      size_t len = strlen (l->hierarchies[i]);
      if (len > best_len && husk_str_has_prefix (path, l->hierarchies[i])
          && (path[len] == '/' || path[len] == '\0'))
        {
          best = l->hierarchies[i];
          best_len = len;
        }
    }
  return best;
}

const char *
cgroup_name (const char *path)
{
  const char *mount = mount_of (path);

  return mount ? path + strlen (mount) : NULL;
}

const char *
cgroup_primary_mount (void)
{
  static const char *const preferred[] = { "pids", "memory", "cpu", "freezer", "devices" };
  const struct layout *l = host_layout ();

  if (l->unified)
    return l->unified;
  for (size_t i = 0; i < sizeof preferred / sizeof preferred[0]; i++)
    if (cgroup_v1_mount (preferred[i]))
      return cgroup_v1_mount (preferred[i]);
  return l->hierarchies[0];
}

enum cgroup_version
cgroup_locate (const char *path, const char *controller, char **dir)
{
  const char *name = cgroup_name (path);
  enum cgroup_version version;

  *dir = NULL;
  if (name == NULL)
    {
      /* A directory outside every mount: a v2 cgroup by itself. */
      *dir = xstrdup (path);
      return CGROUP_V2;
    }
  version = cgroup_controller_version (controller);
  if (version == CGROUP_V2)
    *dir = xasprintf ("%s%s", host_layout ()->unified, name);
  else if (version == CGROUP_V1)
    *dir = xasprintf ("%s%s", cgroup_v1_mount (controller), name);
  return version;
}

char **
cgroup_dirs (const char *path)
{
  const struct layout *l = host_layout ();
  const char *name = cgroup_name (path);
  char **dirs = NULL;

  if (name == NULL)
    return husk_strv_append (NULL, path);
  if (l->unified)
    {
      cleanup_free char *dir = xasprintf ("%s%s", l->unified, name);
      dirs = husk_strv_append (dirs, dir);
    }
  for (size_t i = 0; l->hierarchies[i]; i++)
    {
      cleanup_free char *dir = xasprintf ("%s%s", l->hierarchies[i], name);
      dirs = husk_strv_append (dirs, dir);
    }
  return dirs ? dirs : husk_strv_append (NULL, path);
}

bool
cgroup_is_v1_dir (const char *dir)
{
  const char *mount = mount_of (dir);

  return mount && mount != host_layout ()->unified;
}

/* A new v1 cpuset cgroup starts with no cpus and no mems, and a process
 * cannot join it: each new level gets its parent's. */
static int
inherit_cpuset (const char *dir, struct husk_error **err)
{
  static const char *const files[] = { "cpuset.cpus", "cpuset.mems" };
  cleanup_free char *parent = xstrdup (dir);

  *strrchr (parent, '/') = '\0';
  for (size_t i = 0; i < 2; i++)
    {
      cleanup_free char *own = cgroup_read_file (dir, files[i]);
      cleanup_free char *inherited = cgroup_read_file (parent, files[i]);
      cleanup_free char *target = xasprintf ("%s/%s", dir, files[i]);

      if (own == NULL || inherited == NULL || own[strspn (own, " \n")] != '\0')
        continue;
      if (husk_write_file (target, inherited, strlen (inherited), err) < 0)
        return husk_error_wrap (err, "create cgroup `%s`", dir);
    }
  return 0;
}

static void
write_clone_children (const char *dir)
{
  cleanup_free char *path = xasprintf ("%s/cgroup.clone_children", dir);
  struct husk_error *ignored = NULL;

  if (husk_write_file (path, "1", 1, &ignored) < 0)
    husk_error_free (&ignored);
}

int
cgroup_v1_create (const char *dir, struct husk_error **err)
{
  const char *mount = mount_of (dir);
  bool cpuset = mount && mount == cgroup_v1_mount ("cpuset");
  cleanup_free char *levels = xstrdup (dir);
  bool made;

  if (mount == NULL)
    return husk_error_make (err, 0, "create cgroup `%s`: not in a cgroup v1 hierarchy", dir);
  /* Where the levels above are there, one mkdir (kernfs lookups are slow:
   * the EEXIST of each level above cost ~15 us); cpuset's levels each
   * need their cpus and mems. */
  if (!cpuset && (mkdir (dir, 0755) == 0 || errno == EEXIST))
    return 0;
  for (size_t i = strlen (mount) + 1; i <= strlen (dir); i++)
    {
      char end = levels[i];

      if (end != '/' && end != '\0')
        continue;
      levels[i] = '\0';
      made = mkdir (levels, 0755) == 0;
      if (!made && errno != EEXIST)
        return husk_error_make (err, errno, "create cgroup `%s`", levels);
      if (cpuset && inherit_cpuset (levels, err) < 0)
        return -1;
      /* A level we made above the container's own: its new children get
       * its cpus and mems from the kernel when they are made.  Writing
       * them into an empty cpuset makes the kernel rebuild the scheduler
       * domains, ~1 ms of every create on this 2-CPU machine. */
      if (cpuset && made && end == '/')
        write_clone_children (levels);
      levels[i] = end;
    }
  return 0;
}

/* ------------------------------------------------------------- freezer */

static char *
freezer_state (const char *dir)
{
  char *state = cgroup_read_file (dir, "freezer.state");

  if (state)
    state[strcspn (state, "\n")] = '\0';
  return state;
}

bool
cgroup_v1_frozen (const char *dir)
{
  cleanup_free char *state = freezer_state (dir);

  return state && strcmp (state, "THAWED") != 0;
}

int
cgroup_v1_freeze (const char *dir, bool frozen, struct husk_error **err)
{
  cleanup_free char *file = xasprintf ("%s/freezer.state", dir);
  const char *want = frozen ? "FROZEN" : "THAWED";
  const char *verb = frozen ? "freeze" : "thaw";

  /* FREEZING can stay while a task sleeps uninterruptibly: write again. */
  for (int attempt = 0; attempt < 1000; attempt++)
    {
      struct timespec pause = { 0, 10 * 1000 * 1000 };
      cleanup_free char *state = NULL;

      if (husk_write_file (file, want, strlen (want), err) < 0)
        return husk_error_wrap (err, "%s cgroup", verb);
      state = freezer_state (dir);
      if (state && strcmp (state, want) == 0)
        return 0;
      nanosleep (&pause, NULL);
    }
  if (frozen)
    husk_write_file (file, "THAWED", 6, NULL);
  return husk_error_make (err, 0, "%s cgroup `%s`: not done after 10 s", verb, dir);
}
