/* A pod's cgroup parent: its form checked against the cgroup driver, the
 * directories of it that do not exist yet made at RunPodSandbox (kubelet
 * makes them on a real node; crictl and critest do not), and those husk
 * made removed again when the last pod under them goes.
 *
 * What husk made is recorded, directory by directory (a level may exist
 * in one hierarchy of a hybrid host and not in another), in
 * STATE/cgroups-created.json (volatile like the cgroups themselves), so a
 * parent shared by pods goes with the last of them whichever pod made it,
 * and a parent someone else made (kubelet's kubepods.slice) is never
 * touched. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cri/pod/sandbox_internal.h"
#include "cri/pod/sandbox_store.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"

static bool
is_slice (const char *parent)
{
  const char *slash = strrchr (parent, '/');

  return husk_str_has_suffix (slash ? slash + 1 : parent, ".slice");
}

/* "/a//b/" as "/a/b". */
static char *
tidy_path (const char *path)
{
  char *out = xstrdup (path), *w = out;

  for (const char *r = path; *r; r++)
    if (*r != '/' || w == out || w[-1] != '/')
      *w++ = *r;
  if (w > out + 1 && w[-1] == '/')
    w--;
  *w = '\0';
  return out;
}

int
sandbox_cgroup_name (const char *parent, char **name, struct husk_error **err)
{
  cleanup_free char *path = NULL;
  const char *below;

  *name = NULL;
  if (parent == NULL || *parent == '\0')
    return 0;
  if (is_slice (parent))
    {
      const char *slash = strrchr (parent, '/');
      return cgroup_slice_dir (slash ? slash + 1 : parent, name, err);
    }
  if (cgroup_resolve (parent, "pod", false, &path, err) < 0)
    return -1;
  below = cgroup_name (path);
  *name = tidy_path (below ? below : path);
  if (strcmp (*name, "/") == 0)
    **name = '\0';
  return 0;
}

int
sandbox_cgroup_check (const char *parent, bool systemd, struct husk_error **err)
{
  cleanup_free char *name = NULL;

  if (parent == NULL || *parent == '\0')
    return 0;
  if (systemd && !is_slice (parent))
    return husk_error_kind (
        err, EINVAL,
        "config.linux.cgroup_parent `%s` is not a systemd slice (NAME.slice), but huskd's "
        "cgroup_driver is systemd (it must match kubelet's cgroupDriver)",
        parent);
  if (!systemd && is_slice (parent))
    return husk_error_kind (
        err, EINVAL,
        "config.linux.cgroup_parent `%s` is a systemd slice, but huskd's cgroup_driver is "
        "cgroupfs (it must match kubelet's cgroupDriver: set cgroup_driver: systemd)",
        parent);
  if (sandbox_cgroup_name (parent, &name, err) < 0)
    {
      (*err)->errnum = EINVAL;
      return husk_error_wrap (err, "config.linux.cgroup_parent `%s`", parent);
    }
  return 0;
}

/* ------------------------------------------------------------ the record */

static char **
record_load (const struct sandbox_store *store)
{
  json_t *doc = json_load_file (store->cgroups_record, 0, NULL), *name;
  char **names = xcalloc (1, sizeof *names);
  size_t i;

  json_array_foreach (json_object_get (doc, "created"), i, name)
  {
    if (json_is_string (name))
      names = husk_strv_append (names, json_string_value (name));
  }
  json_decref (doc);
  return names;
}

static int
record_save (const struct sandbox_store *store, char *const *names, struct husk_error **err)
{
  json_t *list = json_array (), *doc;
  cleanup_free char *text = NULL;

  for (size_t i = 0; names[i]; i++)
    json_array_append_new (list, json_string (names[i]));
  doc = json_pack ("{s:o}", "created", list);
  text = json_dumps (doc, JSON_COMPACT);
  json_decref (doc);
  return husk_write_file_replace (store->cgroups_record, text, strlen (text), 0600, err);
}

/* Drops the first S from V; false when it has none. */
static bool
strv_drop (char **v, const char *s)
{
  size_t n = husk_strv_len (v);

  for (size_t i = 0; i < n; i++)
    if (strcmp (v[i], s) == 0)
      {
        free (v[i]);
        memmove (&v[i], &v[i + 1], (n - i) * sizeof *v);
        return true;
      }
  return false;
}

/* ------------------------------------------------------- make, remove */

/* The named v1 hierarchies, read from /proc/self/mountinfo once, as
 * runtime/cgroup reads the others: that file holds every pod's mounts, so
 * reading it for each level of each pod made a 250-pod storm quadratic
 * (a third of huskd's CPU in a teardown storm at 100 pods). */
static char **named_mounts;
static pthread_once_t named_mounts_once = PTHREAD_ONCE_INIT;

static void
read_named_mounts (void)
{
  named_mounts = husk_cgroup_mounts (true);
}

/* PATH's directory in every hierarchy: the runtime's, then the named ones
 * (name=systemd on hybrid hosts): they hold no controller, so the
 * runtime's cgroups leave them alone, but runc joins them too, making the
 * parents there as well. */
static char **
level_dirs (const char *path)
{
  char **dirs = cgroup_dirs (path);
  const char *name = cgroup_name (path);
  char **named = NULL;

  if (name)
    {
      pthread_once (&named_mounts_once, read_named_mounts);
      named = named_mounts;
    }
  for (size_t i = 0; named && named[i]; i++)
    {
      cleanup_free char *dir = xasprintf ("%s%s", named[i], name);
      dirs = husk_strv_append (dirs, dir);
    }
  return dirs;
}

/* rmdir, once: a cgroup that holds a child or a process is busy, and is
 * left (a warning for the pod's own cgroup, which nothing but its
 * containers should hold by now).  True when DIR is gone. */
static bool
remove_once (const char *dir, bool pod_level)
{
  if (rmdir (dir) == 0 || errno == ENOENT)
    return true;
  if (pod_level)
    husk_warn ("pod cgroup `%s` stays: %s", dir, strerror (errno));
  else
    husk_debug ("cgroup `%s` stays: %s", dir, strerror (errno));
  return false;
}

/* Removes the recorded directories of each level of NAME, deepest first,
 * until a level holds the cgroup of another pod or one of them is busy.
 * A directory husk did not make is left, and keeps its ancestors in that
 * hierarchy busy. */
static void
remove_levels (struct sandbox_store *store, const char *mount, const char *name, char **record)
{
  cleanup_free char *level = xstrdup (name);
  bool changed = false, busy = false;
  struct husk_error *err = NULL;

  while (*level && !busy)
    {
      cleanup_free char *path = xasprintf ("%s%s", mount, level);
      cleanup_strv char **dirs = NULL;
      size_t len = strlen (level);

      for (size_t i = 0; store->cgroup_users[i] && !busy; i++)
        busy = strncmp (store->cgroup_users[i], level, len) == 0
               && (store->cgroup_users[i][len] == '\0' || store->cgroup_users[i][len] == '/');
      dirs = busy ? NULL : level_dirs (path);
      for (size_t i = 0; dirs && dirs[i] && !busy; i++)
        {
          if (!husk_strv_contains (record, dirs[i]))
            continue;
          busy = !remove_once (dirs[i], strcmp (level, name) == 0);
          if (!busy)
            changed = strv_drop (record, dirs[i]) || changed;
        }
      *strrchr (level, '/') = '\0';
    }
  if (changed && record_save (store, record, &err) < 0)
    {
      husk_warn ("cgroup parents husk created: %s", err->msg);
      husk_error_free (&err);
    }
}

/* Makes each level of NAME that is missing in some hierarchy, recording
 * the directories it makes first (a crash in between leaves a record
 * whose rmdir finds nothing, never a directory without one). */
static int
make_levels (struct sandbox_store *store, const char *mount, const char *name, char ***record,
             struct husk_error **err)
{
  cleanup_free char *level = xstrdup (name);

  for (char *slash = strchr (level + 1, '/');; slash = strchr (slash + 1, '/'))
    {
      cleanup_free char *path = NULL;
      cleanup_strv char **dirs = NULL;
      bool missing = false;
      int fd;

      if (slash)
        *slash = '\0';
      path = xasprintf ("%s%s", mount, level);
      dirs = level_dirs (path);
      for (size_t i = 0; dirs[i]; i++)
        if (access (dirs[i], F_OK) < 0)
          {
            missing = true;
            if (!husk_strv_contains (*record, dirs[i]))
              *record = husk_strv_append (*record, dirs[i]);
          }
      if (missing)
        {
          if (record_save (store, *record, err) < 0)
            return -1;
          if ((fd = cgroup_create (path, err)) < 0)
            return -1;
          close (fd);
          for (size_t i = 0; dirs[i]; i++)
            if (mkdir (dirs[i], 0755) < 0 && errno != EEXIST)
              return husk_error_make (err, errno, "create cgroup `%s`", dirs[i]);
        }
      if (slash == NULL)
        return 0;
      *slash = '/';
    }
}

int
sandbox_cgroup_create (struct sandbox_store *store, struct sandbox *sb, struct husk_error **err)
{
  cleanup_free char *name = NULL;
  cleanup_strv char **record = NULL;
  const char *mount = cgroup_primary_mount ();
  int ret;

  if (sandbox_cgroup_name (sb->cgroup_parent, &name, err) < 0)
    return husk_error_wrap (err, "cgroup parent `%s`", sb->cgroup_parent);
  if (name == NULL || *name == '\0' || mount == NULL)
    return 0;
  pthread_mutex_lock (&store->cgroup_lock);
  record = record_load (store);
  store->cgroup_users = husk_strv_append (store->cgroup_users, name);
  sb->cgroup_held = true;
  ret = make_levels (store, mount, name, &record, err);
  pthread_mutex_unlock (&store->cgroup_lock);
  if (ret < 0)
    return husk_error_wrap (err, "cgroup parent `%s`", sb->cgroup_parent);
  return 0;
}

void
sandbox_cgroup_release (struct sandbox_store *store, struct sandbox *sb)
{
  cleanup_free char *name = NULL;
  cleanup_strv char **record = NULL;
  struct husk_error *ignored = NULL;
  const char *mount = cgroup_primary_mount ();

  if (!sb->cgroup_held || sandbox_cgroup_name (sb->cgroup_parent, &name, &ignored) < 0 || mount == NULL)
    {
      husk_error_free (&ignored);
      return;
    }
  pthread_mutex_lock (&store->cgroup_lock);
  strv_drop (store->cgroup_users, name);
  sb->cgroup_held = false;
  record = record_load (store);
  remove_levels (store, mount, name, record);
  pthread_mutex_unlock (&store->cgroup_lock);
}

void
sandbox_cgroup_adopt (struct sandbox_store *store, struct sandbox *sb)
{
  cleanup_free char *name = NULL;
  struct husk_error *ignored = NULL;

  if (sandbox_cgroup_name (sb->cgroup_parent, &name, &ignored) < 0 || name == NULL || *name == '\0')
    {
      husk_error_free (&ignored);
      return;
    }
  pthread_mutex_lock (&store->cgroup_lock);
  store->cgroup_users = husk_strv_append (store->cgroup_users, name);
  sb->cgroup_held = true;
  pthread_mutex_unlock (&store->cgroup_lock);
}

void
sandbox_store_set_cgroup_driver (struct sandbox_store *store, bool systemd)
{
  store->systemd_cgroup = systemd;
}
