/* huskd's way of running a child (cri/config/runtime_exec.h): captured
 * output, and the err_path mode the start-up probe and runsc's create use
 * (stderr to a file, the call ends at the child's exit even while what it
 * left behind holds that stderr), with its deadline, a program that cannot
 * start and a symlink where the stderr file goes. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cri/config/runtime_exec.h"
#include "husk/cleanup.h"
#include "husk/util.h"

struct dir
{
  char path[64];
};

static int
setup (void **state)
{
  struct dir *d = xcalloc (1, sizeof *d);

  snprintf (d->path, sizeof d->path, "/tmp/husk-child-run.XXXXXX");
  if (mkdtemp (d->path) == NULL)
    return -1;
  *state = d;
  return 0;
}

static int
teardown (void **state)
{
  struct dir *d = *state;

  husk_rm_rf (d->path, NULL);
  free (d);
  return 0;
}

static char *
read_text (const char *path)
{
  char *text = NULL;

  if (husk_read_file (path, &text, NULL, NULL) < 0)
    return NULL;
  return text;
}

/* The pid a child's shell wrote to PATH, 0 when none. */
static pid_t
pid_in (const char *path)
{
  cleanup_free char *text = read_text (path);

  return text ? (pid_t) atoi (text) : 0;
}

/* Gone or a zombie waiting for its new parent, within 10 s. */
static bool
ends (pid_t pid)
{
  for (int i = 0; i < 1000; i++)
    {
      cleanup_free char *stat_path = xasprintf ("/proc/%d/stat", (int) pid);
      cleanup_free char *stat = read_text (stat_path);
      const char *state = stat ? strrchr (stat, ')') : NULL;

      if (state == NULL || state[2] == 'Z' || state[2] == 'X')
        return true;
      usleep (10 * 1000);
    }
  return false;
}

static void
test_captured (void **state)
{
  (void) state;
  char *const argv[] = { "/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL };
  struct cri_child_run run = { .argv = argv, .timeout_ms = 20000, .output_max = 100 };
  struct husk_error *err = NULL;

  assert_int_equal (cri_child_run (&run, &err), 0);
  assert_false (run.timed_out);
  assert_int_equal (cri_child_exit_code (run.wait_status), 3);
  assert_string_equal (run.out[0].data, "out\n");
  assert_string_equal (run.out[1].data, "err\n");
  cri_child_run_clear (&run);
}

static void
test_to_file (void **state)
{
  struct dir *d = *state;
  cleanup_free char *err_path = xasprintf ("%s/stderr", d->path);
  char *const argv[] = { "/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL };
  struct cri_child_run run = { .argv = argv, .timeout_ms = 20000, .err_path = err_path };
  struct husk_error *err = NULL;
  cleanup_free char *text = NULL;
  struct stat st;

  assert_int_equal (cri_child_run (&run, &err), 0);
  assert_false (run.timed_out);
  assert_int_equal (cri_child_exit_code (run.wait_status), 3);
  assert_null (run.out[0].data);
  text = read_text (err_path);
  assert_string_equal (text, "err\n");
  assert_int_equal (stat (err_path, &st), 0);
  assert_int_equal (st.st_mode & 0777, 0600);
  cri_child_run_clear (&run);
}

/* What the child leaves running keeps its stderr open: the call still
 * ends with the child, not at the deadline. */
static void
test_to_file_ends_at_exit (void **state)
{
  struct dir *d = *state;
  cleanup_free char *err_path = xasprintf ("%s/stderr", d->path);
  cleanup_free char *pid_path = xasprintf ("%s/left.pid", d->path);
  cleanup_free char *script = xasprintf ("sleep 60 & echo $! >%s; echo left >&2; exit 0", pid_path);
  char *const argv[] = { "/bin/sh", "-c", script, NULL };
  struct cri_child_run run = { .argv = argv, .timeout_ms = 30000, .err_path = err_path };
  struct husk_error *err = NULL;
  pid_t left;

  assert_int_equal (cri_child_run (&run, &err), 0);
  left = pid_in (pid_path);
  assert_true (left > 0);
  assert_false (run.timed_out);
  assert_int_equal (cri_child_exit_code (run.wait_status), 0);
  assert_int_equal (kill (left, 0), 0); /* still there: nothing killed it */
  kill (left, SIGKILL);
  assert_true (ends (left));
}

/* At the deadline the child's whole process group is killed. */
static void
test_to_file_deadline (void **state)
{
  struct dir *d = *state;
  cleanup_free char *err_path = xasprintf ("%s/stderr", d->path);
  cleanup_free char *pid_path = xasprintf ("%s/child.pid", d->path);
  cleanup_free char *script = xasprintf ("sleep 60 & echo $! >%s; wait", pid_path);
  char *const argv[] = { "/bin/sh", "-c", script, NULL };
  struct cri_child_run run = { .argv = argv, .timeout_ms = 300, .err_path = err_path };
  struct husk_error *err = NULL;
  pid_t grandchild;

  assert_int_equal (cri_child_run (&run, &err), 0);
  assert_true (run.timed_out);
  assert_true (WIFSIGNALED (run.wait_status));
  grandchild = pid_in (pid_path);
  assert_true (grandchild > 0);
  assert_true (ends (grandchild));
}

static void
test_cannot_start (void **state)
{
  struct dir *d = *state;
  cleanup_free char *err_path = xasprintf ("%s/stderr", d->path);
  char *const argv[] = { "/nonexistent/runtime", "create", NULL };
  struct cri_child_run run = { .argv = argv, .timeout_ms = 1000, .err_path = err_path };
  struct cri_child_run captured = { .argv = argv, .timeout_ms = 1000, .output_max = 100 };
  struct husk_error *err = NULL;

  assert_int_equal (cri_child_run (&run, &err), -1);
  assert_int_equal (err->errnum, ENOENT);
  assert_non_null (strstr (err->msg, "run `/nonexistent/runtime`"));
  husk_error_free (&err);
  assert_int_equal (cri_child_run (&captured, &err), -1);
  assert_int_equal (err->errnum, ENOENT);
  husk_error_free (&err);
}

/* A symlink where the stderr file goes is refused, its target untouched. */
static void
test_to_file_symlink (void **state)
{
  struct dir *d = *state;
  cleanup_free char *err_path = xasprintf ("%s/stderr", d->path);
  cleanup_free char *target = xasprintf ("%s/target", d->path);
  cleanup_free char *text = NULL;
  char *const argv[] = { "/bin/true", NULL };
  struct cri_child_run run = { .argv = argv, .timeout_ms = 1000, .err_path = err_path };
  struct husk_error *err = NULL;

  assert_int_equal (husk_write_file_replace (target, "keep", 4, 0644, NULL), 0);
  assert_int_equal (symlink (target, err_path), 0);
  assert_int_equal (cri_child_run (&run, &err), -1);
  assert_int_equal (err->errnum, ELOOP);
  assert_non_null (strstr (err->msg, err_path));
  husk_error_free (&err);
  text = read_text (target);
  assert_string_equal (text, "keep");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_captured),
    cmocka_unit_test_setup_teardown (test_to_file, setup, teardown),
    cmocka_unit_test_setup_teardown (test_to_file_ends_at_exit, setup, teardown),
    cmocka_unit_test_setup_teardown (test_to_file_deadline, setup, teardown),
    cmocka_unit_test_setup_teardown (test_cannot_start, setup, teardown),
    cmocka_unit_test_setup_teardown (test_to_file_symlink, setup, teardown),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
