/* The stats RPCs' cache of cgroups (cri/stats/cgroup_cache.h): entries
 * found by kind and id among hundreds, pruned and forgotten; kept samples
 * handed out while fresh enough, taken again when not, and refreshed by
 * the sampler thread with a CPU rate.  The samples read this host's root
 * cgroup ("/"), which every host has; a pod's network counters, this
 * process's /proc/self/net/dev. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cri/stats/cgroup_cache.h"
#include "cri/stats/cri_stats.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define N_IDS 300

static char *
id_of (unsigned i)
{
  /* Not in order: the index sorts them. */
  return xasprintf ("%08x%056u", (i * 2654435761u) ^ 0x5a5a5a5au, i);
}

static void
test_index (void **state)
{
  char *keep[N_IDS / 2 + 1] = { 0 };
  size_t n_keep = 0;

  (void) state;
  for (unsigned i = 0; i < N_IDS; i++)
    {
      cleanup_free char *id = id_of (i);
      cleanup_free char *path = xasprintf ("/husk/%s", id);
      cache_cgroup (i % 3 ? 'c' : 'p', id, path);
      cache_cgroup (i % 3 ? 'c' : 'p', id, "/elsewhere"); /* the first one stays */
    }
  for (unsigned i = 0; i < N_IDS; i++)
    {
      cleanup_free char *id = id_of (i);
      cleanup_free char *want = xasprintf ("/husk/%s", id);
      cleanup_free char *got = cached_cgroup (i % 3 ? 'c' : 'p', id);
      cleanup_free char *other_kind = cached_cgroup (i % 3 ? 'p' : 'c', id);
      assert_non_null (got);
      assert_string_equal (got, want);
      assert_null (other_kind);
    }
  /* Every other container stays; the pods are not touched by a 'c' prune. */
  for (unsigned i = 0; i < N_IDS; i++)
    if (i % 3 && i % 2 == 0)
      keep[n_keep++] = id_of (i);
  prune_cgroups ('c', keep, n_keep);
  for (unsigned i = 0; i < N_IDS; i++)
    {
      cleanup_free char *id = id_of (i);
      cleanup_free char *got = cached_cgroup (i % 3 ? 'c' : 'p', id);
      if (i % 3 == 0 || i % 2 == 0)
        assert_non_null (got);
      else
        assert_null (got);
    }
  for (unsigned i = 0; i < N_IDS; i += 3)
    {
      cleanup_free char *id = id_of (i);
      cleanup_free char *got = NULL;
      cri_stats_forget_pod (id);
      got = cached_cgroup ('p', id);
      assert_null (got);
    }
  for (size_t i = 0; i < n_keep; i++)
    {
      cleanup_free char *got = cached_cgroup ('c', keep[i]);
      assert_non_null (got);
      cri_stats_forget_container (keep[i]);
      free (keep[i]);
    }
}

static void
sleep_ms (long ms)
{
  struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

  nanosleep (&ts, NULL);
}

/* The root cgroup's CPU counter grows while this test spins. */
static void
spin_ms (long ms)
{
  struct timespec start, now;
  volatile unsigned long sink = 0;

  clock_gettime (CLOCK_MONOTONIC, &start);
  do
    {
      for (unsigned i = 0; i < 100000; i++)
        sink += i;
      clock_gettime (CLOCK_MONOTONIC, &now);
    }
  while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < ms);
}

static void
test_kept_samples (void **state)
{
  const int64_t second = 1000000000;
  struct cri_kept_sample first, again, fresh;
  struct husk_error *err = NULL;

  (void) state;
  cache_cgroup ('c', "root", "/");
  if (cached_sample ('c', "root", "/", second, &first, &err) < 0)
    fail_msg ("%s", err->msg);
  assert_true (first.stats.timestamp_ns > 0);
  assert_false (first.has_rate);
  /* Fresh enough: the same sample, not another read. */
  assert_int_equal (cached_sample ('c', "root", "/", 60 * second, &again, &err), 0);
  assert_true (again.stats.timestamp_ns == first.stats.timestamp_ns);
  /* Too old for the caller: read again, with the rate since the first. */
  spin_ms (30);
  assert_int_equal (cached_sample ('c', "root", "/", 0, &fresh, &err), 0);
  assert_true (fresh.stats.timestamp_ns > first.stats.timestamp_ns);
  if (fresh.stats.has_cpu)
    assert_true (fresh.has_rate);
  /* A cgroup that is not there fails, naming it. */
  cache_cgroup ('c', "gone", "/husk-test-no-such-cgroup");
  assert_int_equal (cached_sample ('c', "gone", "/husk-test-no-such-cgroup", 0, &again, &err), -1);
  assert_non_null (strstr (err->msg, "/husk-test-no-such-cgroup"));
  husk_error_free (&err);
  cri_stats_forget_container ("gone");
  cri_stats_forget_container ("root");
}

static void
test_sampler_refreshes (void **state)
{
  const int64_t second = 1000000000;
  struct cri_kept_sample first, later;
  struct husk_error *err = NULL;
  bool refreshed = false;

  (void) state;
  assert_true (cri_stats_sampler_period_ns () == 0);
  if (cri_stats_sampler_start (40, &err) < 0)
    fail_msg ("%s", err->msg);
  assert_true (cri_stats_sampler_period_ns () == 40 * 1000000);
  cache_cgroup ('p', "root", "/");
  assert_int_equal (cached_sample ('p', "root", "/", 60 * second, &first, &err), 0);
  /* Asked about once: the thread keeps it fresh from then on, and the
   * caller that takes what is kept sees a newer sample with a rate. */
  for (int i = 0; i < 100 && !refreshed; i++)
    {
      spin_ms (20);
      assert_int_equal (cached_sample ('p', "root", "/", 60 * second, &later, &err), 0);
      refreshed = later.stats.timestamp_ns > first.stats.timestamp_ns;
    }
  assert_true (refreshed);
  if (later.stats.has_cpu)
    assert_true (later.has_rate);
  cri_stats_sampler_stop ();
  cri_stats_sampler_stop (); /* idempotent */
  assert_true (cri_stats_sampler_period_ns () == 0);
  cri_stats_forget_pod ("root");
  sleep_ms (1);
}

static bool
fd_is_open (int fd)
{
  return fcntl (fd, F_GETFD) >= 0 || errno != EBADF;
}

static bool
has_dev (const struct cri_net_dev *devs, size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp (devs[i].name, name) == 0)
      return true;
  return false;
}

/* A pod's net/dev: what a list RPC read, kept with the time it was read
 * and handed out while fresh enough; reread by the sampler through the
 * descriptor kept open; closed when the pod goes. */
static void
test_net_samples (void **state)
{
  const int64_t second = 1000000000;
  struct cri_net_dev eth0 = { .name = "eth0", .rx_bytes = 7 }, *devs = NULL;
  struct husk_error *err = NULL;
  int64_t taken = 0;
  bool refreshed = false;
  size_t n = 0;
  int fd;

  (void) state;
  assert_false (net_kept_sample ("pod", 60 * second, &devs, &n, &taken));
  assert_null (devs);
  /* A descriptor lent out comes back to no entry (the pod stopped
   * meanwhile): closed, not kept. */
  assert_true ((fd = open ("/proc/self/net/dev", O_RDONLY | O_CLOEXEC)) >= 0);
  net_fd_return ("pod", fd, false);
  assert_false (fd_is_open (fd));
  /* One just opened gets an entry, with no sample yet. */
  assert_true ((fd = open ("/proc/self/net/dev", O_RDONLY | O_CLOEXEC)) >= 0);
  net_fd_return ("pod", fd, true);
  assert_true (fd_is_open (fd));
  assert_false (net_kept_sample ("pod", 60 * second, &devs, &n, &taken));
  net_keep_sample ("pod", &eth0, 1, 1000);
  assert_true (net_kept_sample ("pod", 60 * second, &devs, &n, &taken));
  assert_int_equal (n, 1);
  assert_string_equal (devs[0].name, "eth0");
  assert_int_equal (devs[0].rx_bytes, 7);
  assert_true (taken == 1000);
  free (steal_pointer (&devs));
  /* An older read than the kept one is not kept. */
  net_keep_sample ("pod", &eth0, 0, 999);
  assert_true (net_kept_sample ("pod", 60 * second, &devs, &n, &taken));
  assert_true (n == 1 && taken == 1000);
  free (steal_pointer (&devs));
  /* Too old for the caller: none (it reads now). */
  sleep_ms (2);
  assert_false (net_kept_sample ("pod", 1000000, &devs, &n, &taken));
  /* The sampler rereads the kept descriptor: this process's interfaces,
   * timestamped when read. */
  if (cri_stats_sampler_start (40, &err) < 0)
    fail_msg ("%s", err->msg);
  for (int i = 0; i < 200 && !refreshed; i++)
    {
      sleep_ms (10);
      if (net_kept_sample ("pod", 60 * second, &devs, &n, &taken))
        refreshed = taken > 1000;
      if (!refreshed)
        free (steal_pointer (&devs));
    }
  assert_true (refreshed);
  assert_true (has_dev (devs, n, "lo"));
  free (steal_pointer (&devs));
  cri_stats_sampler_stop ();
  /* The pod stops: its descriptor is closed and nothing is kept. */
  assert_true (fd_is_open (fd));
  cri_stats_forget_pod ("pod");
  assert_false (fd_is_open (fd));
  assert_false (net_kept_sample ("pod", 60 * second, &devs, &n, &taken));
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_index),
    cmocka_unit_test (test_kept_samples),
    cmocka_unit_test (test_sampler_refreshes),
    cmocka_unit_test (test_net_samples),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
