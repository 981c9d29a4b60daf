/* Unit tests for the pull progress view (image/pull_progress.h) on a
 * clock the test drives: the redraw limit (at most one per 0.1 s however
 * many updates come), per-layer rates from each layer's first byte,
 * "already exists" for present layers, one line per finished layer off a
 * terminal; and the sizes, ages and names of image/human.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "image/human.h"
#include "image/pull_progress.h"

static double fake_now;

static double
fake_clock (void)
{
  return fake_now;
}

#define DIGEST(c)                                                                                            \
  "sha256:" c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c  \
      c c c c c c c c c c c c c c c c

static void
send (struct pull_view *view, enum pull_phase phase, size_t index, uint64_t done, uint64_t total,
      bool existed)
{
  static const char *const digests[] = { DIGEST ("a"), DIGEST ("b"), DIGEST ("c") };
  struct pull_progress p = { .phase = phase,
                             .index = index,
                             .n_layers = 3,
                             .done = done,
                             .total = total,
                             .digest = index < 3 ? digests[index] : NULL,
                             .existed = existed };

  pull_view_update (&p, view);
}

static size_t
count (const char *text, const char *needle)
{
  size_t n = 0;

  for (const char *p = text; (p = strstr (p, needle)) != NULL; p += strlen (needle))
    n++;
  return n;
}

static void
test_rate_limit (void **state)
{
  struct rate_limit limit = { .interval_s = 0.1 };
  unsigned allowed = 0;

  (void) state;
  /* 10,000 updates over 2 s: at most one per 0.1 s, the first at once */
  for (int i = 0; i < 10000; i++)
    allowed += rate_limit_allow (&limit, 5.0 + i * 0.0002);
  assert_int_equal (20, allowed);
  assert_true (rate_limit_allow (&limit, 100.0));
  assert_false (rate_limit_allow (&limit, 100.05));
}

/* A pull like the (one layer present, two fetched, thousands of
 * curl callbacks) on a terminal. */
static void
test_tty_view (void **state)
{
  struct pull_view view;
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream (&text, &len);
  unsigned draws;

  (void) state;
  fake_now = 10.0;
  pull_view_init (&view, out, true, fake_clock);
  send (&view, PULL_RESOLVED, 0, 0, 0, false);
  send (&view, PULL_LAYER_DONE, 0, 1000, 1000, true);
  send (&view, PULL_LAYER_QUEUED, 1, 0, 20000000, false);
  send (&view, PULL_LAYER_QUEUED, 2, 0, 10000000, false);
  fflush (out);
  assert_int_equal (0, len); /* nothing drawn before the first byte */
  /* layer 1 starts at 10.0 and takes 2 s at 10 MB/s; layer 2 waits
   * its turn, starts at 11.0 and takes 1 s */
  for (int tick = 0; tick <= 2000; tick++)
    {
      fake_now = 10.0 + tick * 0.001;
      send (&view, PULL_DOWNLOADING, 1, (uint64_t) tick * 10000, 20000000, false);
      if (tick >= 1000)
        send (&view, PULL_DOWNLOADING, 2, (uint64_t) (tick - 1000) * 10000, 10000000, false);
      if (tick == 2000)
        {
          send (&view, PULL_LAYER_DONE, 2, 10000000, 10000000, false);
          send (&view, PULL_LAYER_DONE, 1, 20000000, 20000000, false);
        }
    }
  draws = view.redraws;
  send (&view, PULL_UNPACKING, 0, 0, 0, false);
  pull_view_clear (&view);
  fclose (out);
  /* 3,000 updates over 2 s: 21 draws on the 0.1 s ticks, the last one after */
  assert_in_range (draws, 20, 21);
  assert_in_range (count (text, "\033[3A"), 19, 21);
  assert_non_null (strstr (text, "aaaaaaaaaaaa  already exists"));
  /* each layer's own rate, from its own first byte */
  assert_non_null (strstr (text, "bbbbbbbbbbbb  done  20 MB in 2.0 s (10 MB/s)"));
  assert_non_null (strstr (text, "cccccccccccc  done  10 MB in 1.0 s (10 MB/s)"));
  assert_non_null (strstr (text, "cccccccccccc  waiting  10 MB"));
  assert_non_null (strstr (text, "bbbbbbbbbbbb  fetching  10.1 MB / 20 MB  10 MB/s"));
  assert_null (strstr (text, "aaaaaaaaaaaa  done"));
  assert_non_null (strstr (text, "unpacking 3 layers\n"));
  free (text);
}

static void
test_plain_view (void **state)
{
  struct pull_view view;
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream (&text, &len);

  (void) state;
  fake_now = 0;
  pull_view_init (&view, out, false, fake_clock);
  send (&view, PULL_RESOLVED, 0, 0, 0, false);
  send (&view, PULL_LAYER_DONE, 0, 1000, 1000, true);
  send (&view, PULL_LAYER_QUEUED, 1, 0, 4000, false);
  send (&view, PULL_LAYER_QUEUED, 2, 0, 0, false);
  for (int i = 1; i <= 400; i++)
    {
      fake_now = i * 0.001;
      send (&view, PULL_DOWNLOADING, 1, (uint64_t) i * 10, 4000, false);
    }
  send (&view, PULL_LAYER_DONE, 1, 4000, 4000, false);
  /* an empty layer that never reported a byte was still fetched */
  send (&view, PULL_LAYER_DONE, 2, 0, 0, false);
  send (&view, PULL_UNPACKING, 0, 0, 0, false);
  pull_view_clear (&view);
  fclose (out);
  assert_string_equal ("aaaaaaaaaaaa  already exists\n"
                       "bbbbbbbbbbbb  done  4 kB in 0.4 s (10 kB/s)\n"
                       "cccccccccccc  done  0 B in 0.0 s (0 B/s)\n"
                       "unpacking 3 layers\n",
                       text);
  assert_int_equal (0, view.redraws);
  free (text);
}

static void
test_human (void **state)
{
  char buf[64];
  char *repo = NULL, *tag = NULL;
  long long t;

  (void) state;
  human_size (0, buf, sizeof buf);
  assert_string_equal ("0 B", buf);
  human_size (999, buf, sizeof buf);
  assert_string_equal ("999 B", buf);
  human_size (1038575, buf, sizeof buf);
  assert_string_equal ("1.04 MB", buf);
  human_size (35123456, buf, sizeof buf);
  assert_string_equal ("35.1 MB", buf);
  human_size (4270000000ULL, buf, sizeof buf);
  assert_string_equal ("4.27 GB", buf);
  human_ago (0, buf, sizeof buf);
  assert_string_equal ("Less than a second ago", buf);
  human_ago (1, buf, sizeof buf);
  assert_string_equal ("1 second ago", buf);
  human_ago (90, buf, sizeof buf);
  assert_string_equal ("About a minute ago", buf);
  human_ago (3 * 3600, buf, sizeof buf);
  assert_string_equal ("3 hours ago", buf);
  human_ago (3 * 86400, buf, sizeof buf);
  assert_string_equal ("3 days ago", buf);
  human_ago (3 * 7 * 86400, buf, sizeof buf);
  assert_string_equal ("3 weeks ago", buf);
  human_ago (3 * 365 * 86400LL, buf, sizeof buf);
  assert_string_equal ("3 years ago", buf);
  assert_int_equal (0, parse_rfc3339 ("2024-01-01T00:00:00Z", &t));
  assert_int_equal (1704067200, t);
  assert_int_equal (0, parse_rfc3339 ("2024-01-01T01:00:00.123456789+01:00", &t));
  assert_int_equal (1704067200, t);
  assert_int_equal (-1, parse_rfc3339 ("2024-01-01", &t));
  assert_int_equal (-1, parse_rfc3339 (NULL, &t));
  split_repo_tag ("127.0.0.1:5000/test/busybox:latest", &repo, &tag);
  assert_string_equal ("127.0.0.1:5000/test/busybox", repo);
  assert_string_equal ("latest", tag);
  free (repo);
  free (tag);
  split_repo_tag ("127.0.0.1:5000/test/busybox@sha256:00", &repo, &tag);
  assert_string_equal ("127.0.0.1:5000/test/busybox", repo);
  assert_string_equal ("<none>", tag);
  free (repo);
  free (tag);
  split_repo_tag ("localhost:5000/x", &repo, &tag);
  assert_string_equal ("localhost:5000/x", repo);
  assert_string_equal ("<none>", tag);
  free (repo);
  free (tag);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_rate_limit),
    cmocka_unit_test (test_tty_view),
    cmocka_unit_test (test_plain_view),
    cmocka_unit_test (test_human),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
