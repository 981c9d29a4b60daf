/* The stats RPCs' cache of cgroups (cri/stats/cgroup_cache.h): entries
 * found by kind and id among hundreds, pruned and forgotten; kept samples
 * handed out while fresh enough, taken again when not, and refreshed by
 * the sampler thread with a CPU rate.  The samples read this host's root
 * cgroup ("/"), which every host has. */
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

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_index),
    cmocka_unit_test (test_kept_samples),
    cmocka_unit_test (test_sampler_refreshes),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
