/* Unit tests for runtime/hooks.c: real hooks (shell scripts written into a
 * temp dir) run in order with the state on stdin, their own argv and env, a
 * timeout, and errors that name the hook. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/hooks.h"

#define STATE_JSON                                                                                           \
  "{\"ociVersion\":\"1.2.0\",\"id\":\"c1\",\"status\":\"creating\",\"pid\":42,\"bundle\":\"/b\"}"

struct fixture
{
  char dir[64];
};

static int
setup (void **state)
{
  struct fixture *fx = xcalloc (1, sizeof *fx);

  strcpy (fx->dir, "/tmp/husk-hooks-XXXXXX");
  if (mkdtemp (fx->dir) == NULL)
    return -1;
  *state = fx;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *fx = *state;

  husk_rm_rf (fx->dir, NULL);
  free (fx);
  return 0;
}

static char *
fx_path (struct fixture *fx, const char *name)
{
  return xasprintf ("%s/%s", fx->dir, name);
}

/* Writes an executable /bin/sh script NAME with BODY; returns its path. */
static char *
write_script (struct fixture *fx, const char *name, const char *fmt, ...)
{
  char *path = fx_path (fx, name);
  cleanup_free char *body = NULL;
  cleanup_free char *text = NULL;
  va_list ap;

  va_start (ap, fmt);
  assert_true (vasprintf (&body, fmt, ap) >= 0);
  va_end (ap);
  text = xasprintf ("#!/bin/sh\n%s\n", body);
  assert_int_equal (husk_write_file_atomic (path, text, strlen (text), 0755, NULL), 0);
  return path;
}

static char *
read_text (const char *path)
{
  char *text = NULL;

  assert_int_equal (husk_read_file (path, &text, NULL, NULL), 0);
  return text;
}

static void
set_hooks (struct spec_hooks *hooks, enum spec_hook_kind kind, struct spec_hook *list, size_t n)
{
  memset (hooks, 0, sizeof *hooks);
  hooks->list[kind] = list;
  hooks->count[kind] = n;
}

static double
now_seconds (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void
test_kind_names (void **state)
{
  assert_string_equal (spec_hook_kind_name (SPEC_HOOK_PRESTART), "prestart");
  assert_string_equal (spec_hook_kind_name (SPEC_HOOK_CREATE_RUNTIME), "createRuntime");
  assert_string_equal (spec_hook_kind_name (SPEC_HOOK_CREATE_CONTAINER), "createContainer");
  assert_string_equal (spec_hook_kind_name (SPEC_HOOK_START_CONTAINER), "startContainer");
  assert_string_equal (spec_hook_kind_name (SPEC_HOOK_POSTSTART), "poststart");
  assert_string_equal (spec_hook_kind_name (SPEC_HOOK_POSTSTOP), "poststop");
}

static void
test_order (void **state)
{
  struct fixture *fx = *state;
  cleanup_free char *log = fx_path (fx, "order.log");
  cleanup_free char *first = write_script (fx, "first.sh", "echo first >> '%s'", log);
  cleanup_free char *second = write_script (fx, "second.sh", "echo second >> '%s'", log);
  cleanup_free char *third = write_script (fx, "third.sh", "echo third >> '%s'", log);
  struct spec_hook list[] = { { .path = first }, { .path = second }, { .path = third } };
  struct spec_hooks hooks;
  struct husk_error *err = NULL;
  cleanup_free char *text = NULL;

  /* Hooks of another kind must not run. */
  set_hooks (&hooks, SPEC_HOOK_CREATE_RUNTIME, list, 3);
  assert_int_equal (hooks_run (&hooks, SPEC_HOOK_PRESTART, STATE_JSON, &err), 0);
  assert_int_equal (access (log, F_OK), -1);
  assert_int_equal (hooks_run (&hooks, SPEC_HOOK_CREATE_RUNTIME, STATE_JSON, &err), 0);
  assert_null (err);
  text = read_text (log);
  assert_string_equal (text, "first\nsecond\nthird\n");
  assert_int_equal (hooks_run (NULL, SPEC_HOOK_POSTSTOP, STATE_JSON, &err), 0);
}

static void
test_stdin_gets_state (void **state)
{
  struct fixture *fx = *state;
  cleanup_free char *out = fx_path (fx, "stdin.out");
  cleanup_free char *hook_path = write_script (fx, "cat.sh", "cat > '%s'", out);
  struct spec_hook hook = { .path = hook_path };
  struct spec_hooks hooks;
  struct husk_error *err = NULL;
  cleanup_free char *text = NULL;

  set_hooks (&hooks, SPEC_HOOK_POSTSTART, &hook, 1);
  assert_int_equal (hooks_run (&hooks, SPEC_HOOK_POSTSTART, STATE_JSON, &err), 0);
  text = read_text (out);
  assert_string_equal (text, STATE_JSON);
}

/* More than a pipe holds: a hook that reads it all gets it all, one that
 * never reads does not hang us and is no error (nor a SIGPIPE for us). */
static void
test_large_state (void **state)
{
  struct fixture *fx = *state;
  size_t size = 1 << 20;
  cleanup_free char *big = xmalloc (size + 1);
  cleanup_free char *out = fx_path (fx, "big.out");
  cleanup_free char *reader = write_script (fx, "reader.sh", "cat > '%s'", out);
  cleanup_free char *ignorer = write_script (fx, "ignorer.sh", "exit 0");
  struct spec_hook list[] = { { .path = reader, .timeout = 20 }, { .path = ignorer, .timeout = 20 } };
  struct spec_hooks hooks;
  struct husk_error *err = NULL;
  cleanup_free char *text = NULL;

  for (size_t i = 0; i < size; i++)
    big[i] = (char) ('a' + i % 26);
  big[size] = '\0';
  set_hooks (&hooks, SPEC_HOOK_PRESTART, list, 2);
  assert_int_equal (hooks_run (&hooks, SPEC_HOOK_PRESTART, big, &err), 0);
  assert_null (err);
  text = read_text (out);
  assert_int_equal (strlen (text), size);
  assert_memory_equal (text, big, size);
}

/* /proc/PID/environ and cmdline show exactly what execve was given. */
static void
test_env_and_args (void **state)
{
  struct fixture *fx = *state;
  cleanup_free char *env_out = fx_path (fx, "env.out");
  cleanup_free char *cmdline_out = fx_path (fx, "cmdline.out");
  cleanup_free char *args_out = fx_path (fx, "args.out");
  cleanup_free char *env_script = xasprintf ("tr '\\0' '\\n' < /proc/$$/environ > '%s'", env_out);
  cleanup_free char *cmdline_script = xasprintf ("tr '\\0' '\\n' < /proc/$$/cmdline > '%s'", cmdline_out);
  cleanup_free char *args_hook = write_script (fx, "args.sh", "printf '[%%s]\\n' \"$@\" > '%s'", args_out);
  char *env_args[] = { "sh", "-c", env_script, NULL };
  char *env[] = { "FOO=bar", "HUSK_HOOK=1", NULL };
  char *cmdline_args[] = { "custom-argv0", "-c", cmdline_script, NULL };
  char *script_args[] = { "ignored-argv0", "one", "two words", NULL };
  struct spec_hook list[] = {
    { .path = "/bin/sh", .args = env_args, .env = env },
    { .path = "/bin/sh", .args = cmdline_args },
    { .path = args_hook, .args = script_args },
  };
  struct spec_hooks hooks;
  struct husk_error *err = NULL;
  cleanup_free char *env_text = NULL;
  cleanup_free char *cmdline_text = NULL;
  cleanup_free char *args_text = NULL;
  cleanup_free char *expected_cmdline = NULL;

  set_hooks (&hooks, SPEC_HOOK_CREATE_CONTAINER, list, 3);
  assert_int_equal (hooks_run (&hooks, SPEC_HOOK_CREATE_CONTAINER, STATE_JSON, &err), 0);
  env_text = read_text (env_out);
  assert_string_equal (env_text, "FOO=bar\nHUSK_HOOK=1\n");
  /* No env given: the hook gets an empty environment. */
  cmdline_text = read_text (cmdline_out);
  expected_cmdline = xasprintf ("custom-argv0\n-c\n%s\n", cmdline_script);
  assert_string_equal (cmdline_text, expected_cmdline);
  args_text = read_text (args_out);
  assert_string_equal (args_text, "[one]\n[two words]\n");
}

static void
test_no_env_means_empty (void **state)
{
  struct fixture *fx = *state;
  cleanup_free char *out = fx_path (fx, "noenv.out");
  cleanup_free char *script = xasprintf ("wc -c < /proc/$$/environ > '%s'", out);
  char *args[] = { "sh", "-c", script, NULL };
  struct spec_hook hook = { .path = "/bin/sh", .args = args };
  struct spec_hooks hooks;
  cleanup_free char *text = NULL;

  setenv ("HUSK_TEST_LEAK", "1", 1);
  set_hooks (&hooks, SPEC_HOOK_START_CONTAINER, &hook, 1);
  assert_int_equal (hooks_run (&hooks, SPEC_HOOK_START_CONTAINER, STATE_JSON, NULL), 0);
  unsetenv ("HUSK_TEST_LEAK");
  text = read_text (out);
  assert_int_equal (atoi (text), 0);
}

static void
test_failure_stops_chain (void **state)
{
  struct fixture *fx = *state;
  cleanup_free char *log = fx_path (fx, "fail.log");
  cleanup_free char *ok = write_script (fx, "ok.sh", "echo ok >> '%s'", log);
  cleanup_free char *failing = write_script (fx, "fail.sh", "exit 3");
  cleanup_free char *after = write_script (fx, "after.sh", "echo after >> '%s'", log);
  struct spec_hook list[] = { { .path = ok }, { .path = failing }, { .path = after } };
  struct spec_hooks hooks;
  struct husk_error *err = NULL;
  cleanup_free char *expected = xasprintf ("prestart hook #1 (`%s`): exited with status 3", failing);
  cleanup_free char *text = NULL;

  set_hooks (&hooks, SPEC_HOOK_PRESTART, list, 3);
  assert_int_equal (hooks_run (&hooks, SPEC_HOOK_PRESTART, STATE_JSON, &err), -1);
  assert_non_null (err);
  assert_string_equal (err->msg, expected);
  husk_error_free (&err);
  text = read_text (log);
  assert_string_equal (text, "ok\n");
}

static void
test_killed_by_signal (void **state)
{
  struct fixture *fx = *state;
  cleanup_free char *hook_path = write_script (fx, "suicide.sh", "kill -TERM $$");
  struct spec_hook hook = { .path = hook_path };
  struct spec_hooks hooks;
  struct husk_error *err = NULL;
  cleanup_free char *expected
      = xasprintf ("poststop hook #0 (`%s`): killed by signal %d", hook_path, SIGTERM);

  set_hooks (&hooks, SPEC_HOOK_POSTSTOP, &hook, 1);
  assert_int_equal (hooks_run (&hooks, SPEC_HOOK_POSTSTOP, STATE_JSON, &err), -1);
  assert_string_equal (err->msg, expected);
  husk_error_free (&err);
}

/* After the process started a failure is a warning: the hooks after it
 * run, and the error names each one that failed. */
static void
test_poststop_failure_runs_the_rest (void **state)
{
  struct fixture *fx = *state;
  cleanup_free char *log = fx_path (fx, "log");
  cleanup_free char *bad1 = write_script (fx, "bad1.sh", "echo bad1 >> '%s'; exit 3", log);
  cleanup_free char *good = write_script (fx, "good.sh", "echo good >> '%s'", log);
  cleanup_free char *bad2 = write_script (fx, "bad2.sh", "echo bad2 >> '%s'; exit 4", log);
  struct spec_hook list[] = { { .path = bad1 }, { .path = good }, { .path = bad2 } };
  struct spec_hooks hooks;
  struct husk_error *err = NULL;
  cleanup_free char *text = NULL;
  cleanup_free char *expected = xasprintf ("poststop hook #0 (`%s`): exited with status 3; "
                                           "poststop hook #2 (`%s`): exited with status 4",
                                           bad1, bad2);

  const enum spec_hook_kind kinds[] = { SPEC_HOOK_POSTSTART, SPEC_HOOK_POSTSTOP };

  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    {
      enum spec_hook_kind kind = kinds[i];

      unlink (log);
      set_hooks (&hooks, kind, list, 3);
      assert_int_equal (hooks_run (&hooks, kind, STATE_JSON, &err), -1);
      text = read_text (log);
      assert_string_equal (text, "bad1\ngood\nbad2\n");
      free (text);
      text = NULL;
      if (kind == SPEC_HOOK_POSTSTOP)
        assert_string_equal (err->msg, expected);
      husk_error_free (&err);
    }
}

static void
test_timeout (void **state)
{
  struct fixture *fx = *state;
  cleanup_free char *marker = fx_path (fx, "survivor");
  cleanup_free char *hook_path = write_script (fx, "slow.sh", "sleep 10\ntouch '%s'", marker);
  struct spec_hook hook = { .path = hook_path, .timeout = 1 };
  struct spec_hooks hooks;
  struct husk_error *err = NULL;
  cleanup_free char *expected = xasprintf ("createRuntime hook #0 (`%s`): timed out after 1s", hook_path);
  double started, took;

  set_hooks (&hooks, SPEC_HOOK_CREATE_RUNTIME, &hook, 1);
  started = now_seconds ();
  assert_int_equal (hooks_run (&hooks, SPEC_HOOK_CREATE_RUNTIME, STATE_JSON, &err), -1);
  took = now_seconds () - started;
  assert_non_null (err);
  assert_string_equal (err->msg, expected);
  husk_error_free (&err);
  assert_true (took >= 0.9);
  assert_true (took < 5.0);
}

static void
test_missing_path (void **state)
{
  struct fixture *fx = *state;
  cleanup_free char *missing = fx_path (fx, "does-not-exist");
  cleanup_free char *not_exec = fx_path (fx, "not-exec");
  struct spec_hook list[] = { { .path = missing }, { .path = not_exec } };
  struct spec_hooks hooks;
  struct husk_error *err = NULL;
  cleanup_free char *expected
      = xasprintf ("startContainer hook #0 (`%s`): exec: No such file or directory", missing);
  cleanup_free char *expected_perm
      = xasprintf ("startContainer hook #0 (`%s`): exec: Permission denied", not_exec);

  set_hooks (&hooks, SPEC_HOOK_START_CONTAINER, list, 2);
  assert_int_equal (hooks_run (&hooks, SPEC_HOOK_START_CONTAINER, STATE_JSON, &err), -1);
  assert_string_equal (err->msg, expected);
  assert_int_equal (err->errnum, ENOENT);
  husk_error_free (&err);

  assert_int_equal (husk_write_file_atomic (not_exec, "x", 1, 0644, NULL), 0);
  set_hooks (&hooks, SPEC_HOOK_START_CONTAINER, &list[1], 1);
  assert_int_equal (hooks_run (&hooks, SPEC_HOOK_START_CONTAINER, STATE_JSON, &err), -1);
  assert_string_equal (err->msg, expected_perm);
  husk_error_free (&err);
}

static int
redirect_fd (int target, const char *path)
{
  int saved = dup (target);
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

  assert_true (saved >= 0 && fd >= 0);
  assert_int_equal (dup2 (fd, target), target);
  close (fd);
  return saved;
}

static void
restore_fd (int target, int saved)
{
  dup2 (saved, target);
  close (saved);
}

/* Hook output goes to our stderr only; our stdout stays clean, and the hook
 * gets no fd of ours beyond 0-2. */
static void
test_output_goes_to_stderr (void **state)
{
  struct fixture *fx = *state;
  cleanup_free char *talk = write_script (fx, "talk.sh", "echo to-stdout\necho to-stderr >&2");
  /* ls prints its fds: 0-2 and 3, the one it reads /proc/self/fd with. */
  char *ls_args[] = { "ls", "/proc/self/fd", NULL };
  struct spec_hook list[] = { { .path = talk }, { .path = "/bin/ls", .args = ls_args } };
  struct spec_hooks hooks;
  cleanup_free char *stdout_path = fx_path (fx, "stdout");
  cleanup_free char *stderr_path = fx_path (fx, "stderr");
  cleanup_free char *stdout_text = NULL;
  cleanup_free char *stderr_text = NULL;
  int leaked = open ("/dev/null", O_RDONLY); /* not CLOEXEC on purpose */
  int saved_stdout, saved_stderr, rc;

  fflush (stdout);
  fflush (stderr);
  saved_stdout = redirect_fd (1, stdout_path);
  saved_stderr = redirect_fd (2, stderr_path);
  set_hooks (&hooks, SPEC_HOOK_POSTSTART, list, 2);
  rc = hooks_run (&hooks, SPEC_HOOK_POSTSTART, STATE_JSON, NULL);
  restore_fd (1, saved_stdout);
  restore_fd (2, saved_stderr);
  close (leaked);
  assert_int_equal (rc, 0);
  stdout_text = read_text (stdout_path);
  stderr_text = read_text (stderr_path);
  assert_string_equal (stdout_text, "");
  assert_string_equal (stderr_text, "to-stdout\nto-stderr\n0\n1\n2\n3\n");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_kind_names),
    cmocka_unit_test_setup_teardown (test_order, setup, teardown),
    cmocka_unit_test_setup_teardown (test_stdin_gets_state, setup, teardown),
    cmocka_unit_test_setup_teardown (test_large_state, setup, teardown),
    cmocka_unit_test_setup_teardown (test_env_and_args, setup, teardown),
    cmocka_unit_test_setup_teardown (test_no_env_means_empty, setup, teardown),
    cmocka_unit_test_setup_teardown (test_failure_stops_chain, setup, teardown),
    cmocka_unit_test_setup_teardown (test_killed_by_signal, setup, teardown),
    cmocka_unit_test_setup_teardown (test_poststop_failure_runs_the_rest, setup, teardown),
    cmocka_unit_test_setup_teardown (test_timeout, setup, teardown),
    cmocka_unit_test_setup_teardown (test_missing_path, setup, teardown),
    cmocka_unit_test_setup_teardown (test_output_goes_to_stderr, setup, teardown),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
