/* Unit tests for common/util.c's sweep of the temp files that atomic
 * writes cut short leave (PATH.tmp.PID.TID of a writer that is gone). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "husk/cleanup.h"
#include "husk/util.h"

static pid_t
dead_pid (void)
{
  pid_t pid = fork ();

  if (pid == 0)
    _exit (0);
  assert_true (pid > 0);
  assert_int_equal (waitpid (pid, NULL, 0), pid);
  return pid;
}

static void
touch (const char *dir, const char *name)
{
  cleanup_free char *path = xasprintf ("%s/%s", dir, name);
  struct husk_error *err = NULL;

  assert_int_equal (husk_write_file_replace (path, "x", 1, 0600, &err), 0);
}

static bool
exists (const char *dir, const char *name)
{
  cleanup_free char *path = xasprintf ("%s/%s", dir, name);
  return access (path, F_OK) == 0;
}

static bool
listed (char *const *removed, const char *dir, const char *name)
{
  cleanup_free char *path = xasprintf ("%s/%s", dir, name);

  for (size_t i = 0; removed[i]; i++)
    if (strcmp (removed[i], path) == 0)
      return true;
  return false;
}

static void
test_remove_stale_tmp (void **state)
{
  char dir[] = "/tmp/husk-util-XXXXXX";
  pid_t dead = dead_pid ();
  cleanup_free char *stale = xasprintf ("state.json.tmp.%d.%d", dead, dead);
  cleanup_free char *stale_deeper = xasprintf ("a/b/config.pb.tmp.%d.7", dead);
  cleanup_free char *too_deep = xasprintf ("a/b/c/x.tmp.%d.7", dead);
  cleanup_free char *live = xasprintf ("index.json.tmp.%d.%d", (int) getpid (), (int) gettid ());
  char *not_ours[] = { xasprintf ("notes.tmp.%d", dead), xasprintf ("x.tmp.%d.y", dead),
                       xasprintf (".tmp.%d.1", dead), xasprintf ("x.tmp.-%d.1", dead) };
  cleanup_strv char **removed = NULL;
  struct husk_error *err = NULL;

  (void) state;
  assert_non_null (mkdtemp (dir));
  {
    cleanup_free char *c = xasprintf ("%s/a/b/c", dir);
    assert_int_equal (husk_mkdir_p (c, 0700, &err), 0);
  }
  touch (dir, stale);
  touch (dir, stale_deeper);
  touch (dir, too_deep);
  touch (dir, live);
  for (size_t i = 0; i < 4; i++)
    touch (dir, not_ours[i]);

  assert_int_equal (husk_remove_stale_tmp (dir, 2, &removed, &err), 0);
  assert_int_equal (husk_strv_len (removed), 2);
  assert_true (listed (removed, dir, stale));
  assert_true (listed (removed, dir, stale_deeper));
  assert_false (exists (dir, stale));
  assert_false (exists (dir, stale_deeper));
  assert_true (exists (dir, too_deep));
  assert_true (exists (dir, live));
  for (size_t i = 0; i < 4; i++)
    assert_true (exists (dir, not_ours[i]));

  husk_strvfreep (&removed);
  assert_int_equal (husk_remove_stale_tmp ("/nonexistent/husk", 2, &removed, &err), 0);
  assert_null (removed[0]);
  assert_int_equal (husk_rm_rf (dir, &err), 0);
  for (size_t i = 0; i < 4; i++)
    free (not_ours[i]);
}

/* The two-step atomic write: nothing at PATH until the commit, the temp
 * file gone after a commit or a discard. */
static void
test_write_prepare_commit (void **state)
{
  char dir[] = "/tmp/husk-test-util.XXXXXX";
  struct husk_error *err = NULL;
  cleanup_free char *path = NULL, *text = NULL;
  char *tmp = NULL;

  (void) state;
  assert_non_null (mkdtemp (dir));
  path = xasprintf ("%s/record", dir);
  assert_int_equal (husk_write_file_prepare (path, "new", 3, 0600, &tmp, &err), 0);
  assert_non_null (tmp);
  assert_int_equal (access (path, F_OK), -1);
  assert_int_equal (access (tmp, F_OK), 0);
  assert_int_equal (husk_write_file_commit (&tmp, path, &err), 0);
  assert_null (tmp);
  assert_int_equal (husk_read_file (path, &text, NULL, &err), 0);
  assert_string_equal (text, "new");

  assert_int_equal (husk_write_file_prepare (path, "other", 5, 0600, &tmp, &err), 0);
  {
    cleanup_free char *kept = xstrdup (tmp);
    husk_write_file_discard (&tmp);
    assert_null (tmp);
    assert_int_equal (access (kept, F_OK), -1);
  }
  free (text);
  text = NULL;
  assert_int_equal (husk_read_file (path, &text, NULL, &err), 0);
  assert_string_equal (text, "new");
  assert_int_equal (husk_rm_rf (dir, &err), 0);
}

/* husk_status_ns_pid: the innermost pid of NSpid, whatever the nesting,
 * and 0 for a status without one (a kernel before 4.1) or a bad line. */
static void
test_status_ns_pid (void **state)
{
  (void) state;
  assert_int_equal (husk_status_ns_pid ("Name:\tsh\nPid:\t4242\nNSpid:\t4242\nNSpgid:\t1\n"), 4242);
  assert_int_equal (husk_status_ns_pid ("Name:\tsh\nNSpid:\t4242\t17\t1\nSigIgn:\t0\n"), 1);
  assert_int_equal (husk_status_ns_pid ("Name:\tsh\nNSpid:\t4242\t17"), 17);
  assert_int_equal (husk_status_ns_pid ("Name:\tsh\nPid:\t4242\n"), 0);
  assert_int_equal (husk_status_ns_pid ("Name:\tsh\nNSpid:\tx\n"), 0);
  /* A name that holds the field is not the field: Name escapes \n. */
  assert_int_equal (husk_status_ns_pid ("Name:\tNSpid:\t9\nNSpid:\t5\n"), 5);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_remove_stale_tmp),
    cmocka_unit_test (test_write_prepare_commit),
    cmocka_unit_test (test_status_ns_pid),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
