/* The stats RPCs' cache of cgroups (cgroup_cache.c): each running
 * container's and pod's cgroup directory found once, with a reader that
 * keeps its files open, and each pod's net/dev descriptor; dropped when a
 * container or pod goes (cri_stats_forget_*) or at a list RPC's prune.
 * Thread-safe.  KIND: 'c' a container, 'p' a pod, 'n' a pod's net/dev. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cri/stats/cgroup_cache.h"
#include "husk/cgroup_stats.h"
#include "husk/cleanup.h"
#include "husk/util.h"

/* The cgroup directories of running containers, found once each (a
 * container keeps its cgroup while it runs, and the stats RPCs of many
 * containers would otherwise read each one's runtime state every time),
 * with a reader of each that keeps its files open (husk/cgroup_stats.h):
 * a sample is then one pread per file.  An entry goes, closing its files,
 * when its container is no longer running at a list RPC or its cgroup is
 * gone; the descriptors held stay within a quarter of RLIMIT_NOFILE
 * (beyond, readers open and close their files each time). */
struct cgroup_entry
{
  char kind; /* 'c' a container, 'p' a pod (its cgroup_parent), 'n' a
              * pod's net/dev (no path nor reader) */
  char *id, *path;
  struct husk_cgroup_reader *reader; /* NULL: lent out, or none yet */
  int net_fd;                        /* 'n': net/dev opened in the pod's netns, -1 lent out */
  size_t n_fds;                      /* counted in cgroups.fds */
};

static struct
{
  pthread_mutex_t lock;
  struct cgroup_entry *entries;
  size_t n, fds, fds_max;
} cgroups = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0 };

/* Under LOCK. */
static struct cgroup_entry *
find_cgroup (char kind, const char *id)
{
  for (size_t i = 0; i < cgroups.n; i++)
    if (cgroups.entries[i].kind == kind && strcmp (cgroups.entries[i].id, id) == 0)
      return &cgroups.entries[i];
  return NULL;
}

/* Under LOCK: entry I goes with its reader's files. */
static void
drop_cgroup (size_t i)
{
  struct cgroup_entry *e = &cgroups.entries[i];

  free (e->id);
  free (e->path);
  husk_cgroup_reader_free (e->reader);
  if (e->kind == 'n' && e->net_fd >= 0)
    close (e->net_fd);
  cgroups.fds -= e->n_fds;
  *e = cgroups.entries[--cgroups.n];
}

char *
cached_cgroup (char kind, const char *id)
{
  struct cgroup_entry *e;
  char *path = NULL;

  pthread_mutex_lock (&cgroups.lock);
  if ((e = find_cgroup (kind, id)) != NULL)
    path = xstrdup (e->path);
  pthread_mutex_unlock (&cgroups.lock);
  return path;
}

void
cache_cgroup (char kind, const char *id, const char *path)
{
  pthread_mutex_lock (&cgroups.lock);
  if (find_cgroup (kind, id) == NULL)
    {
      cgroups.entries = xrealloc (cgroups.entries, (cgroups.n + 1) * sizeof *cgroups.entries);
      cgroups.entries[cgroups.n++]
          = (struct cgroup_entry){ .kind = kind, .id = xstrdup (id), .path = xstrdup (path) };
    }
  pthread_mutex_unlock (&cgroups.lock);
}

/* The KIND entries of KEEP stay, the others of KIND go (KEEP sorted here:
 * a list RPC prunes hundreds of entries against hundreds of ids). */
void
prune_cgroups (char kind, char *const *keep, size_t n_keep)
{
  cleanup_free char **sorted = husk_strv_sorted_copy (keep, n_keep);
  size_t i = 0;

  pthread_mutex_lock (&cgroups.lock);
  while (i < cgroups.n)
    if (cgroups.entries[i].kind != kind || husk_sorted_strv_contains (sorted, n_keep, cgroups.entries[i].id))
      i++;
    else
      drop_cgroup (i);
  pthread_mutex_unlock (&cgroups.lock);
}

/* KIND/ID's entry goes (its cgroup went). */
void
forget_cgroup (char kind, const char *id)
{
  pthread_mutex_lock (&cgroups.lock);
  for (size_t i = 0; i < cgroups.n; i++)
    if (cgroups.entries[i].kind == kind && strcmp (cgroups.entries[i].id, id) == 0)
      {
        drop_cgroup (i);
        break;
      }
  pthread_mutex_unlock (&cgroups.lock);
}

void
cri_stats_forget_container (const char *id)
{
  forget_cgroup ('c', id);
}

static size_t
fds_budget (void)
{
  struct rlimit limit;

  if (getrlimit (RLIMIT_NOFILE, &limit) < 0 || limit.rlim_cur == RLIM_INFINITY)
    return 4096;
  return (size_t) (limit.rlim_cur / 4);
}

/* KIND/ID's reader of PATH, lent out until reader_return: one sample at a time
 * per reader (another caller meanwhile gets one of its own). */
struct husk_cgroup_reader *
reader_lend (char kind, const char *id, const char *path)
{
  struct husk_cgroup_reader *reader = NULL;
  struct cgroup_entry *e;
  bool keep_open;

  pthread_mutex_lock (&cgroups.lock);
  if (cgroups.fds_max == 0)
    cgroups.fds_max = fds_budget ();
  e = find_cgroup (kind, id);
  if (e && e->reader && strcmp (e->path, path) == 0)
    reader = steal_pointer (&e->reader);
  /* A v1 host's usage files are 7; room for a few more. */
  keep_open = cgroups.fds + 16 <= cgroups.fds_max;
  pthread_mutex_unlock (&cgroups.lock);
  return reader ? reader : husk_cgroup_reader_new (path, HUSK_CGROUP_STATS_USAGE, keep_open);
}

/* READER back into KIND/ID's entry, or freed when that went meanwhile. */
void
reader_return (char kind, const char *id, struct husk_cgroup_reader *reader)
{
  struct cgroup_entry *e;

  pthread_mutex_lock (&cgroups.lock);
  e = find_cgroup (kind, id);
  if (e && e->reader == NULL)
    {
      size_t n_fds = husk_cgroup_reader_open_files (reader);
      cgroups.fds = cgroups.fds - e->n_fds + n_fds;
      e->n_fds = n_fds;
      e->reader = steal_pointer (&reader);
    }
  pthread_mutex_unlock (&cgroups.lock);
  husk_cgroup_reader_free (reader);
}

/* The /proc/thread-self/net/dev that a thread in pod ID's network
 * namespace opened, lent out until net_fd_return; -1 when there is none.
 * The descriptor keeps reading that namespace's counters (and holds the
 * namespace): closed when the pod stops, is no longer ready at a
 * ListPodSandboxStats, or beyond the descriptors' budget. */
int
net_fd_lend (const char *id)
{
  struct cgroup_entry *e;
  int fd = -1;

  pthread_mutex_lock (&cgroups.lock);
  if ((e = find_cgroup ('n', id)) != NULL)
    {
      fd = e->net_fd;
      e->net_fd = -1;
    }
  pthread_mutex_unlock (&cgroups.lock);
  return fd;
}

void
net_fd_return (const char *id, int fd)
{
  struct cgroup_entry *e;

  if (fd < 0)
    return;
  pthread_mutex_lock (&cgroups.lock);
  if (cgroups.fds_max == 0)
    cgroups.fds_max = fds_budget ();
  e = find_cgroup ('n', id);
  if (e == NULL && cgroups.fds + 16 <= cgroups.fds_max)
    {
      cgroups.entries = xrealloc (cgroups.entries, (cgroups.n + 1) * sizeof *cgroups.entries);
      e = &cgroups.entries[cgroups.n++];
      *e = (struct cgroup_entry){
        .kind = 'n', .id = xstrdup (id), .path = xstrdup (""), .net_fd = -1, .n_fds = 1
      };
      cgroups.fds++;
    }
  if (e && e->net_fd < 0)
    {
      e->net_fd = fd;
      fd = -1;
    }
  pthread_mutex_unlock (&cgroups.lock);
  if (fd >= 0)
    close (fd);
}

void
cri_stats_forget_pod (const char *id)
{
  forget_cgroup ('n', id);
  forget_cgroup ('p', id);
}
