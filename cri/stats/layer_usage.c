/* The writable layers' disk usage, refreshed in the background (see
 * layer_usage.h).  The walks run without the lock; readers only ever wait
 * for a copy of two numbers. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cri/stats/cri_stats.h"
#include "cri/stats/layer_usage.h"
#include "husk/cleanup.h"
#include "husk/util.h"

struct layer_entry
{
  char *dir;
  struct cri_dir_usage usage;
  int64_t taken_ns;
  bool measured; /* false: primed, its first walk to come */
};

struct layer_usage
{
  unsigned period_s;
  pthread_mutex_t lock; /* guards what follows */
  pthread_cond_t wake;
  pthread_cond_t measured;     /* a primed entry was walked or dropped */
  struct layer_entry *entries; /* sorted by dir: a list RPC looks up hundreds */
  size_t n;
  bool stopping, refresh_now;
  unsigned long passes_started, passes_done;
  pthread_t thread;
};

/* Under LOCK: where DIR is, or would go. */
static size_t
lower_bound (const struct layer_usage *cache, const char *dir)
{
  size_t lo = 0, hi = cache->n;

  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (strcmp (cache->entries[mid].dir, dir) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

/* Under LOCK. */
static struct layer_entry *
find_entry (struct layer_usage *cache, const char *dir)
{
  size_t i = lower_bound (cache, dir);

  return i < cache->n && strcmp (cache->entries[i].dir, dir) == 0 ? &cache->entries[i] : NULL;
}

/* Under LOCK: a new entry for DIR (not there yet), in its place. */
static struct layer_entry *
insert_entry (struct layer_usage *cache, const char *dir)
{
  size_t i = lower_bound (cache, dir);

  cache->entries = xrealloc (cache->entries, (cache->n + 1) * sizeof *cache->entries);
  memmove (&cache->entries[i + 1], &cache->entries[i], (cache->n - i) * sizeof *cache->entries);
  cache->n++;
  cache->entries[i] = (struct layer_entry){ .dir = xstrdup (dir) };
  return &cache->entries[i];
}

/* Under LOCK. */
static void
drop_entry (struct layer_usage *cache, const char *dir)
{
  struct layer_entry *e = find_entry (cache, dir);

  if (e == NULL)
    return;
  free (e->dir);
  memmove (e, e + 1, (size_t) (&cache->entries[cache->n] - (e + 1)) * sizeof *e);
  cache->n--;
  pthread_cond_broadcast (&cache->measured);
}

/* Under LOCK: DIR's reading stored (added when new). */
static void
store_reading (struct layer_usage *cache, const char *dir, const struct cri_dir_usage *usage,
               int64_t taken_ns)
{
  struct layer_entry *e = find_entry (cache, dir);

  if (e == NULL)
    e = insert_entry (cache, dir);
  e->usage = *usage;
  e->taken_ns = taken_ns;
  if (!e->measured)
    {
      e->measured = true;
      pthread_cond_broadcast (&cache->measured);
    }
}

/* One pass over every directory known when it began. */
static void
refresh_all (struct layer_usage *cache)
{
  char **dirs = NULL;

  pthread_mutex_lock (&cache->lock);
  for (size_t i = 0; i < cache->n; i++)
    dirs = husk_strv_append (dirs, cache->entries[i].dir);
  pthread_mutex_unlock (&cache->lock);
  for (size_t i = 0; dirs && dirs[i]; i++)
    {
      struct cri_dir_usage usage;
      struct husk_error *err = NULL;
      int64_t taken = husk_clock_ns (CLOCK_REALTIME);
      int ret = cri_stats_dir_usage (dirs[i], &usage, &err);

      pthread_mutex_lock (&cache->lock);
      /* Forgotten meanwhile (gone, asked about as gone): stays forgotten. */
      if (ret == 0 && find_entry (cache, dirs[i]))
        store_reading (cache, dirs[i], &usage, taken);
      else if (ret < 0)
        drop_entry (cache, dirs[i]);
      pthread_mutex_unlock (&cache->lock);
      if (ret < 0 && err->errnum != ENOENT)
        husk_warn ("%s", err->msg);
      husk_error_free (&err);
    }
  husk_strvfreep (&dirs);
}

static void *
refresher (void *arg)
{
  struct layer_usage *cache = arg;

  cri_stats_background_thread ();
  pthread_mutex_lock (&cache->lock);
  while (!cache->stopping)
    {
      struct timespec until;

      clock_gettime (CLOCK_REALTIME, &until);
      until.tv_sec += cache->period_s;
      while (!cache->stopping && !cache->refresh_now)
        if (pthread_cond_timedwait (&cache->wake, &cache->lock, &until) == ETIMEDOUT)
          break;
      if (cache->stopping)
        break;
      cache->refresh_now = false;
      cache->passes_started++;
      pthread_mutex_unlock (&cache->lock);
      refresh_all (cache);
      pthread_mutex_lock (&cache->lock);
      cache->passes_done = cache->passes_started;
      pthread_cond_broadcast (&cache->wake);
    }
  pthread_mutex_unlock (&cache->lock);
  return NULL;
}

int
layer_usage_new (unsigned period_s, struct layer_usage **out, struct husk_error **err)
{
  struct layer_usage *cache = xcalloc (1, sizeof *cache);
  int ret;

  cache->period_s = period_s ? period_s : 1;
  pthread_mutex_init (&cache->lock, NULL);
  pthread_cond_init (&cache->wake, NULL);
  pthread_cond_init (&cache->measured, NULL);
  if ((ret = pthread_create (&cache->thread, NULL, refresher, cache)) != 0)
    {
      pthread_mutex_destroy (&cache->lock);
      pthread_cond_destroy (&cache->wake);
      pthread_cond_destroy (&cache->measured);
      free (cache);
      return husk_error_make (err, ret, "start the thread that refreshes the writable layers' usage");
    }
  *out = cache;
  return 0;
}

void
layer_usage_free (struct layer_usage *cache)
{
  if (cache == NULL)
    return;
  pthread_mutex_lock (&cache->lock);
  cache->stopping = true;
  pthread_cond_broadcast (&cache->wake);
  pthread_cond_broadcast (&cache->measured);
  pthread_mutex_unlock (&cache->lock);
  pthread_join (cache->thread, NULL);
  for (size_t i = 0; i < cache->n; i++)
    free (cache->entries[i].dir);
  free (cache->entries);
  pthread_mutex_destroy (&cache->lock);
  pthread_cond_destroy (&cache->wake);
  pthread_cond_destroy (&cache->measured);
  free (cache);
}

int
layer_usage_get (struct layer_usage *cache, const char *dir, struct cri_dir_usage *out, int64_t *taken_ns,
                 struct husk_error **err)
{
  struct layer_entry *e;
  int64_t taken;

  pthread_mutex_lock (&cache->lock);
  /* Primed: its walk is the thread's, under way. */
  while ((e = find_entry (cache, dir)) != NULL && !e->measured && !cache->stopping)
    pthread_cond_wait (&cache->measured, &cache->lock);
  if (e && e->measured)
    {
      *out = e->usage;
      *taken_ns = e->taken_ns;
    }
  pthread_mutex_unlock (&cache->lock);
  if (e && e->measured)
    return 0;
  /* New: walked here, once (a fresh container's layer is near empty). */
  taken = husk_clock_ns (CLOCK_REALTIME);
  if (cri_stats_dir_usage (dir, out, err) < 0)
    return -1;
  pthread_mutex_lock (&cache->lock);
  store_reading (cache, dir, out, taken);
  pthread_mutex_unlock (&cache->lock);
  *taken_ns = taken;
  return 0;
}

void
layer_usage_refresh (struct layer_usage *cache)
{
  unsigned long pass;

  pthread_mutex_lock (&cache->lock);
  /* A pass that began before the call may have missed what the caller
   * just wrote: the next one to begin. */
  pass = cache->passes_started + 1;
  cache->refresh_now = true;
  pthread_cond_broadcast (&cache->wake);
  while (cache->passes_done < pass && !cache->stopping)
    pthread_cond_wait (&cache->wake, &cache->lock);
  pthread_mutex_unlock (&cache->lock);
}

void
layer_usage_prime (struct layer_usage *cache, char *const *dirs, size_t n)
{
  pthread_mutex_lock (&cache->lock);
  for (size_t i = 0; i < n; i++)
    if (find_entry (cache, dirs[i]) == NULL)
      insert_entry (cache, dirs[i]);
  cache->refresh_now = true;
  pthread_cond_broadcast (&cache->wake);
  pthread_mutex_unlock (&cache->lock);
}
