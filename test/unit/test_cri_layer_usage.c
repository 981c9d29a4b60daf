/* The writable layers' usage cache: a directory is walked when first asked
 * about (or by the thread, when primed), then only by the refreshing
 * thread; a directory that went is forgotten. */
#include <errno.h>
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

#include "cri/stats/layer_usage.h"
#include "husk/cleanup.h"
#include "husk/util.h"

static void
write_bytes (const char *path, size_t len)
{
  cleanup_free char *data = xcalloc (1, len);
  struct husk_error *err = NULL;

  /* Random-ish bytes: no sparse file, no compression. */
  for (size_t i = 0; i < len; i++)
    data[i] = (char) (i * 7919 % 251 + 1);
  if (husk_write_file_replace (path, data, len, 0600, &err) < 0)
    fail_msg ("%s", err->msg);
}

static void
test_cached_then_refreshed (void **state)
{
  char dir[] = "/tmp/test_cri_layer_usage.XXXXXX";
  cleanup_free char *file = NULL;
  struct layer_usage *cache = NULL;
  struct husk_error *err = NULL;
  struct cri_dir_usage first, again, later;
  int64_t t1 = 0, t2 = 0, t3 = 0;

  (void) state;
  assert_non_null (mkdtemp (dir));
  file = xasprintf ("%s/data", dir);
  /* A long period: only layer_usage_refresh walks again. */
  assert_int_equal (layer_usage_new (3600, &cache, &err), 0);
  assert_int_equal (layer_usage_get (cache, dir, &first, &t1, &err), 0);
  assert_int_equal (first.inodes, 1);
  assert_true (t1 > 0);
  write_bytes (file, 1 << 20);
  assert_int_equal (layer_usage_get (cache, dir, &again, &t2, &err), 0);
  assert_int_equal (again.inodes, first.inodes);
  assert_int_equal (again.bytes, first.bytes);
  assert_int_equal (t2, t1);
  layer_usage_refresh (cache);
  assert_int_equal (layer_usage_get (cache, dir, &later, &t3, &err), 0);
  assert_int_equal (later.inodes, 2);
  assert_true (later.bytes >= first.bytes + (1 << 20));
  assert_true (t3 > t1);
  /* Gone: forgotten at the next refresh, then a missing directory. */
  assert_int_equal (unlink (file), 0);
  assert_int_equal (rmdir (dir), 0);
  layer_usage_refresh (cache);
  assert_int_equal (layer_usage_get (cache, dir, &later, &t3, &err), -1);
  assert_int_equal (err->errnum, ENOENT);
  husk_error_free (&err);
  layer_usage_free (cache);
}

static void
test_period_refreshes (void **state)
{
  char dir[] = "/tmp/test_cri_layer_usage.XXXXXX";
  cleanup_free char *file = NULL;
  struct layer_usage *cache = NULL;
  struct husk_error *err = NULL;
  struct cri_dir_usage usage;
  int64_t taken = 0;
  int tries = 0;

  (void) state;
  assert_non_null (mkdtemp (dir));
  file = xasprintf ("%s/data", dir);
  assert_int_equal (layer_usage_new (1, &cache, &err), 0);
  assert_int_equal (layer_usage_get (cache, dir, &usage, &taken, &err), 0);
  write_bytes (file, 4096);
  /* Within the period (1 s) and a margin the thread has seen the file. */
  while (usage.inodes < 2 && tries++ < 30)
    {
      usleep (100 * 1000);
      assert_int_equal (layer_usage_get (cache, dir, &usage, &taken, &err), 0);
    }
  assert_int_equal (usage.inodes, 2);
  layer_usage_free (cache);
  unlink (file);
  rmdir (dir);
}

static int64_t
now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_REALTIME, &ts);
  return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Primed directories are walked by the thread (the reading predates the
 * ask); a primed one that is missing is forgotten, an error when asked. */
static void
test_primed (void **state)
{
  char dir[] = "/tmp/test_cri_layer_usage.XXXXXX";
  cleanup_free char *file = NULL;
  cleanup_free char *missing = NULL;
  struct layer_usage *cache = NULL;
  struct husk_error *err = NULL;
  struct cri_dir_usage usage;
  int64_t taken = 0, asked;

  (void) state;
  assert_non_null (mkdtemp (dir));
  file = xasprintf ("%s/data", dir);
  missing = xasprintf ("%s/missing", dir);
  write_bytes (file, 1 << 20);
  assert_int_equal (layer_usage_new (3600, &cache, &err), 0);
  {
    char *dirs[] = { dir, missing, NULL };
    layer_usage_prime (cache, dirs, 2);
  }
  /* Asked right away: waits for the thread's walk. */
  assert_int_equal (layer_usage_get (cache, dir, &usage, &taken, &err), 0);
  assert_int_equal (usage.inodes, 2);
  assert_true (usage.bytes >= 1 << 20);
  usleep (50 * 1000);
  asked = now_ns ();
  assert_int_equal (layer_usage_get (cache, dir, &usage, &taken, &err), 0);
  assert_true (taken < asked);
  assert_int_equal (layer_usage_get (cache, missing, &usage, &taken, &err), -1);
  assert_int_equal (err->errnum, ENOENT);
  husk_error_free (&err);
  layer_usage_free (cache);
  unlink (file);
  rmdir (dir);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_cached_then_refreshed),
    cmocka_unit_test (test_period_refreshes),
    cmocka_unit_test (test_primed),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
