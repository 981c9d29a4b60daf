/* The stats RPCs' cache of cgroups (cgroup_cache.c): each running
 * container's and pod's cgroup directory found once, with a reader that
 * keeps its files open, and each pod's net/dev descriptor; dropped when a
 * container or pod goes (cri_stats_forget_*) or at a list RPC's prune.
 * Thread-safe.  KIND: 'c' a container, 'p' a pod, 'n' a pod's net/dev. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cri/stats/cgroup_cache.h"
#include "cri/stats/cri_stats.h"
#include "husk/cgroup_stats.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"

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
  /* The latest sample of PATH ('c', 'p'), taken by a list RPC or the
   * sampler thread at SAMPLED_AT (CLOCK_MONOTONIC ns), with the CPU rate
   * since the one before it; WANTED_AT: when a list RPC last asked. */
  bool has_sample, has_rate;
  struct husk_cgroup_stats sample; /* usage fields only: no io, no hugetlb */
  uint64_t nano_cores;
  int64_t sampled_at, wanted_at;
  /* 'n': the interfaces of the latest sample (has_sample), read at
   * NET_TAKEN_NS (CLOCK_REALTIME, NetworkUsage's timestamp). */
  struct cri_net_dev *devs;
  size_t n_devs;
  int64_t net_taken_ns;
};

/* ENTRIES sorted by kind, then id: each list RPC looks up every
 * container and pod a few times. */
static struct
{
  pthread_mutex_t lock;
  struct cgroup_entry *entries;
  size_t n, fds, fds_max;
} cgroups = { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0 };

static int
entry_order (char kind, const char *id, const struct cgroup_entry *e)
{
  return kind != e->kind ? (kind > e->kind) - (kind < e->kind) : strcmp (id, e->id);
}

/* Under LOCK: where KIND/ID is, or would go. */
static size_t
lower_bound (char kind, const char *id)
{
  size_t lo = 0, hi = cgroups.n;

  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (entry_order (kind, id, &cgroups.entries[mid]) > 0)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

/* Under LOCK. */
static struct cgroup_entry *
find_cgroup (char kind, const char *id)
{
  size_t i = lower_bound (kind, id);

  return i < cgroups.n && entry_order (kind, id, &cgroups.entries[i]) == 0 ? &cgroups.entries[i] : NULL;
}

/* Under LOCK: a new entry for KIND/ID (not there yet), zeroed but for its
 * kind and id; the pointer holds until the next insertion or removal. */
static struct cgroup_entry *
insert_cgroup (char kind, const char *id)
{
  size_t i = lower_bound (kind, id);

  cgroups.entries = xrealloc (cgroups.entries, (cgroups.n + 1) * sizeof *cgroups.entries);
  memmove (&cgroups.entries[i + 1], &cgroups.entries[i], (cgroups.n - i) * sizeof *cgroups.entries);
  cgroups.n++;
  cgroups.entries[i] = (struct cgroup_entry){ .kind = kind, .id = xstrdup (id), .net_fd = -1 };
  return &cgroups.entries[i];
}

/* Under LOCK: entry I goes with its reader's files. */
static void
drop_cgroup (size_t i)
{
  struct cgroup_entry *e = &cgroups.entries[i];

  free (e->id);
  free (e->path);
  husk_cgroup_reader_free (e->reader);
  husk_cgroup_stats_clear (&e->sample);
  free (e->devs);
  if (e->kind == 'n' && e->net_fd >= 0)
    close (e->net_fd);
  cgroups.fds -= e->n_fds;
  memmove (&cgroups.entries[i], &cgroups.entries[i + 1], (cgroups.n - i - 1) * sizeof *cgroups.entries);
  cgroups.n--;
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
    insert_cgroup (kind, id)->path = xstrdup (path);
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
  if (find_cgroup (kind, id) != NULL)
    drop_cgroup (lower_bound (kind, id));
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
net_fd_return (const char *id, int fd, bool opened)
{
  struct cgroup_entry *e;

  if (fd < 0)
    return;
  pthread_mutex_lock (&cgroups.lock);
  if (cgroups.fds_max == 0)
    cgroups.fds_max = fds_budget ();
  e = find_cgroup ('n', id);
  if (e == NULL && opened && cgroups.fds + 16 <= cgroups.fds_max)
    {
      e = insert_cgroup ('n', id);
      e->path = xstrdup ("");
      e->n_fds = 1;
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

/* ------------------------------------------------------------------ */
/* samples for the list RPCs, kept fresh by a thread                    */

/* One sample of PATH through KIND/ID's reader.  A container without a
 * memory controller gets what its processes hold, as CRI wants memory. */
static int
take_sample (char kind, const char *id, const char *path, struct husk_cgroup_stats *out,
             struct husk_error **err)
{
  struct husk_cgroup_reader *reader = reader_lend (kind, id, path);
  int ret = husk_cgroup_reader_sample (reader, out, err);

  reader_return (kind, id, reader);
  if (ret == 0)
    {
      /* A usage reader reads none; kept samples hold no pointers. */
      free (out->io), free (out->hugetlb);
      out->io = NULL, out->n_io = 0;
      out->hugetlb = NULL, out->n_hugetlb = 0;
    }
  if (ret == 0 && kind == 'c' && !out->has_memory)
    {
      cleanup_free pid_t *pids = NULL;
      struct husk_error *ignored = NULL;
      size_t n = 0;

      if (cgroup_pids (path, &pids, &n, &ignored) < 0)
        husk_error_free (&ignored);
      cri_stats_memory_from_pids (out, "/proc", pids, n);
    }
  return ret;
}

/* Under LOCK: SAMPLE (taken at monotonic TAKEN_AT) kept in E, the CPU
 * rate since the one kept before; an older one than kept is dropped. */
static void
keep_sample (struct cgroup_entry *e, const struct husk_cgroup_stats *sample, int64_t taken_at)
{
  if (e->has_sample && sample->timestamp_ns <= e->sample.timestamp_ns)
    return;
  e->has_rate = e->has_sample && e->sample.has_cpu && sample->has_cpu
                && cri_stats_nano_cores (e->sample.cpu.usage_usec * 1000, e->sample.timestamp_ns,
                                         sample->cpu.usage_usec * 1000, sample->timestamp_ns, &e->nano_cores);
  e->sample = *sample;
  e->has_sample = true;
  e->sampled_at = taken_at;
}

/* Under LOCK: E's kept sample copied into OUT. */
static void
copy_sample (const struct cgroup_entry *e, struct cri_kept_sample *out)
{
  out->stats = e->sample;
  out->has_rate = e->has_rate;
  out->nano_cores = e->nano_cores;
}

int
cached_sample (char kind, const char *id, const char *path, int64_t max_age_ns, struct cri_kept_sample *out,
               struct husk_error **err)
{
  int64_t now = husk_clock_ns (CLOCK_MONOTONIC);
  struct husk_cgroup_stats fresh;
  struct cgroup_entry *e;

  memset (out, 0, sizeof *out);
  pthread_mutex_lock (&cgroups.lock);
  if ((e = find_cgroup (kind, id)) != NULL && strcmp (e->path, path) == 0)
    {
      e->wanted_at = now;
      if (e->has_sample && now - e->sampled_at <= max_age_ns)
        {
          copy_sample (e, out);
          pthread_mutex_unlock (&cgroups.lock);
          return 0;
        }
    }
  pthread_mutex_unlock (&cgroups.lock);
  if (take_sample (kind, id, path, &fresh, err) < 0)
    return -1;
  pthread_mutex_lock (&cgroups.lock);
  if ((e = find_cgroup (kind, id)) != NULL && strcmp (e->path, path) == 0)
    {
      keep_sample (e, &fresh, now);
      if (e->sample.timestamp_ns == fresh.timestamp_ns)
        {
          copy_sample (e, out);
          pthread_mutex_unlock (&cgroups.lock);
          return 0;
        }
    }
  pthread_mutex_unlock (&cgroups.lock);
  out->stats = fresh; /* not kept (its entry went): no rate */
  return 0;
}

/* ------------------------------------------------------------------ */
/* pods' network counters, kept as the cgroups' samples                 */

/* Under LOCK: DEVS (N interfaces read at TAKEN_NS, realtime, and AT,
 * monotonic) kept in the 'n' entry E, unless what it keeps is newer. */
static void
keep_net (struct cgroup_entry *e, const struct cri_net_dev *devs, size_t n, int64_t taken_ns, int64_t at)
{
  if (e->has_sample && taken_ns <= e->net_taken_ns)
    return;
  free (e->devs);
  e->devs = xcalloc (n + 1, sizeof *e->devs);
  memcpy (e->devs, devs, n * sizeof *devs);
  e->n_devs = n;
  e->net_taken_ns = taken_ns;
  e->has_sample = true;
  e->sampled_at = at;
}

bool
net_kept_sample (const char *id, int64_t max_age_ns, struct cri_net_dev **devs, size_t *n, int64_t *taken_ns)
{
  int64_t now = husk_clock_ns (CLOCK_MONOTONIC);
  struct cgroup_entry *e;
  bool kept = false;

  *devs = NULL;
  *n = 0;
  pthread_mutex_lock (&cgroups.lock);
  if ((e = find_cgroup ('n', id)) != NULL)
    {
      e->wanted_at = now;
      kept = e->has_sample && now - e->sampled_at <= max_age_ns;
    }
  if (kept)
    {
      *devs = xcalloc (e->n_devs + 1, sizeof **devs);
      memcpy (*devs, e->devs, e->n_devs * sizeof **devs);
      *n = e->n_devs;
      *taken_ns = e->net_taken_ns;
    }
  pthread_mutex_unlock (&cgroups.lock);
  return kept;
}

void
net_keep_sample (const char *id, const struct cri_net_dev *devs, size_t n, int64_t taken_ns)
{
  int64_t now = husk_clock_ns (CLOCK_MONOTONIC);
  struct cgroup_entry *e;

  pthread_mutex_lock (&cgroups.lock);
  if ((e = find_cgroup ('n', id)) != NULL)
    {
      keep_net (e, devs, n, taken_ns, now);
      e->wanted_at = now;
    }
  pthread_mutex_unlock (&cgroups.lock);
}

/* The sampler's read of pod ID's net/dev through the descriptor its entry
 * keeps (none: a list RPC has it now, or the pod went).  A descriptor that
 * fails goes with its entry: the next list RPC opens the namespace again
 * and says what is wrong. */
static void
refresh_net (const char *id)
{
  cleanup_free char *text = NULL;
  cleanup_free struct cri_net_dev *devs = NULL;
  struct husk_error *err = NULL;
  int64_t taken_ns = husk_clock_ns (CLOCK_REALTIME), at = husk_clock_ns (CLOCK_MONOTONIC);
  struct cgroup_entry *e;
  size_t n = 0;
  int fd = net_fd_lend (id);

  if (fd < 0)
    return;
  if (husk_reread_fd (fd, &text, NULL, "/proc/thread-self/net/dev", &err) < 0
      || cri_stats_parse_net_dev (text, &devs, &n, &err) < 0)
    {
      husk_error_free (&err);
      close (fd);
      forget_cgroup ('n', id);
      return;
    }
  pthread_mutex_lock (&cgroups.lock);
  /* Not while it was lent out: the pod stopped (its entry went), or a
   * list RPC opened another meanwhile and keeps that one. */
  if ((e = find_cgroup ('n', id)) != NULL && e->net_fd < 0)
    {
      e->net_fd = fd;
      fd = -1;
      keep_net (e, devs, n, taken_ns, at);
    }
  pthread_mutex_unlock (&cgroups.lock);
  if (fd >= 0)
    close (fd);
}

/* What one pass of the sampler refreshes. */
struct due_sample
{
  char kind;
  char *id, *path;
};

/* Under LOCK: the 'c' and 'p' entries, and the 'n' ones whose descriptor
 * is here, that a list RPC asked about within WANTED_NS and whose sample
 * is older than AGE_NS. */
static struct due_sample *
due_samples (int64_t now, int64_t age_ns, int64_t wanted_ns, size_t *n)
{
  struct due_sample *due = xcalloc (cgroups.n + 1, sizeof *due);

  *n = 0;
  for (size_t i = 0; i < cgroups.n; i++)
    {
      const struct cgroup_entry *e = &cgroups.entries[i];
      if ((e->kind == 'c' || e->kind == 'p' || (e->kind == 'n' && e->net_fd >= 0)) && e->wanted_at
          && now - e->wanted_at <= wanted_ns && (!e->has_sample || now - e->sampled_at >= age_ns))
        due[(*n)++] = (struct due_sample){ e->kind, xstrdup (e->id), xstrdup (e->path) };
    }
  return due;
}

static void
refresh_samples (int64_t age_ns, int64_t wanted_ns)
{
  struct due_sample *due;
  size_t n;

  pthread_mutex_lock (&cgroups.lock);
  due = due_samples (husk_clock_ns (CLOCK_MONOTONIC), age_ns, wanted_ns, &n);
  pthread_mutex_unlock (&cgroups.lock);
  for (size_t i = 0; i < n; i++)
    {
      struct husk_cgroup_stats fresh;
      struct husk_error *err = NULL;
      int64_t taken_at = husk_clock_ns (CLOCK_MONOTONIC);
      struct cgroup_entry *e;

      if (due[i].kind == 'n')
        refresh_net (due[i].id);
      else if (take_sample (due[i].kind, due[i].id, due[i].path, &fresh, &err) < 0)
        {
          /* Gone: the next list RPC finds out, as before. */
          husk_error_free (&err);
          forget_cgroup (due[i].kind, due[i].id);
        }
      else
        {
          pthread_mutex_lock (&cgroups.lock);
          if ((e = find_cgroup (due[i].kind, due[i].id)) != NULL && strcmp (e->path, due[i].path) == 0)
            keep_sample (e, &fresh, taken_at);
          else
            husk_cgroup_stats_clear (&fresh);
          pthread_mutex_unlock (&cgroups.lock);
        }
      free (due[i].id);
      free (due[i].path);
    }
  free (due);
}

static struct
{
  pthread_mutex_t lock;
  pthread_cond_t wake;
  pthread_t thread;
  bool running, stopping;
  int64_t period_ns;
} sampler = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false, false, 0 };

static void *
sampler_main (void *arg)
{
  (void) arg;
  cri_stats_background_thread ();
  pthread_mutex_lock (&sampler.lock);
  while (!sampler.stopping)
    {
      struct timespec until;
      int64_t ns;

      clock_gettime (CLOCK_MONOTONIC, &until);
      ns = until.tv_nsec + sampler.period_ns / 2;
      until.tv_sec += ns / 1000000000;
      until.tv_nsec = ns % 1000000000;
      while (!sampler.stopping && pthread_cond_timedwait (&sampler.wake, &sampler.lock, &until) != ETIMEDOUT)
        ;
      if (sampler.stopping)
        break;
      pthread_mutex_unlock (&sampler.lock);
      /* Every half period: what is older than a period, of what kubelet
       * (every 10 s) or a scraper asked about in the last minute. */
      refresh_samples (sampler.period_ns, 60 * (int64_t) 1000000000);
      pthread_mutex_lock (&sampler.lock);
    }
  pthread_mutex_unlock (&sampler.lock);
  return NULL;
}

int
cri_stats_sampler_start (unsigned period_ms, struct husk_error **err)
{
  pthread_condattr_t attr;
  int ret;

  pthread_mutex_lock (&sampler.lock);
  sampler.period_ns = (int64_t) (period_ms ? period_ms : 1000) * 1000000;
  if (sampler.running)
    {
      pthread_mutex_unlock (&sampler.lock);
      return 0;
    }
  sampler.stopping = false;
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_destroy (&sampler.wake);
  pthread_cond_init (&sampler.wake, &attr);
  pthread_condattr_destroy (&attr);
  ret = pthread_create (&sampler.thread, NULL, sampler_main, NULL);
  sampler.running = ret == 0;
  pthread_mutex_unlock (&sampler.lock);
  if (ret != 0)
    return husk_error_make (err, ret, "start the thread that samples the cgroups of the stats RPCs");
  return 0;
}

void
cri_stats_sampler_stop (void)
{
  bool running;

  pthread_mutex_lock (&sampler.lock);
  running = sampler.running;
  sampler.stopping = true;
  sampler.running = false;
  pthread_cond_broadcast (&sampler.wake);
  pthread_mutex_unlock (&sampler.lock);
  if (running)
    pthread_join (sampler.thread, NULL);
}

int64_t
cri_stats_sampler_period_ns (void)
{
  int64_t period;

  pthread_mutex_lock (&sampler.lock);
  period = sampler.running ? sampler.period_ns : 0;
  pthread_mutex_unlock (&sampler.lock);
  return period;
}
