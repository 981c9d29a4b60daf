/* Unit tests for common/spawn.c: a child that shares huskd's memory until
 * execve must start the program, report a failed exec, and never run one
 * of the parent's signal handlers on that shared memory. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "husk/spawn.h"

static volatile sig_atomic_t handler_ran;

static void
parent_handler (int sig)
{
  (void) sig;
  handler_ran = 1;
}

struct exec_start
{
  const char *path;
  int exec_errno; /* written by the child: the memory is shared */
};

HUSK_SPAWN_CHILD static int
exec_child (void *arg)
{
  struct exec_start *start = arg;
  char *const argv[] = { (char *) start->path, "-c", "exit 7", NULL };
  sigset_t none;

  sigemptyset (&none);
  husk_spawn_child_signals (&none);
  execv (start->path, argv);
  start->exec_errno = errno;
  _exit (127);
}

static int
wait_status (pid_t pid)
{
  int status = -1;

  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  return status;
}

/* The parent resumes only once the child has exec'd: the program runs. */
static void
test_spawn_execs (void **state)
{
  struct exec_start start = { "/bin/sh", 0 };
  pid_t pid = husk_spawn (exec_child, &start);
  int status;

  (void) state;
  assert_true (pid > 0);
  status = wait_status (pid);
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 7);
  assert_int_equal (start.exec_errno, 0);
}

/* A failed execve: the child's errno is in the parent's memory when
 * husk_spawn returns. */
static void
test_spawn_exec_fails (void **state)
{
  struct exec_start start = { "/nonexistent/husk-spawn-test", 0 };
  pid_t pid = husk_spawn (exec_child, &start);
  int status;

  (void) state;
  assert_true (pid > 0);
  assert_int_equal (start.exec_errno, ENOENT);
  status = wait_status (pid);
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 127);
}

struct signal_start
{
  int signal;
};

/* Raises a signal the parent handles (and one it ignores) after the
 * reset: the handled one must kill the child by its default action, the
 * ignored one must stay ignored. */
HUSK_SPAWN_CHILD static int
signal_child (void *arg)
{
  const struct signal_start *start = arg;
  sigset_t none;

  sigemptyset (&none);
  husk_spawn_child_signals (&none);
  raise (SIGPIPE);
  raise (start->signal);
  _exit (0);
}

static void
test_spawn_child_signals (void **state)
{
  struct sigaction handled = { .sa_handler = parent_handler }, ignored = { .sa_handler = SIG_IGN };
  struct sigaction old_usr1, old_pipe;
  struct signal_start start = { SIGUSR1 };
  pid_t pid;
  int status;

  (void) state;
  sigemptyset (&handled.sa_mask);
  sigemptyset (&ignored.sa_mask);
  assert_int_equal (sigaction (SIGUSR1, &handled, &old_usr1), 0);
  assert_int_equal (sigaction (SIGPIPE, &ignored, &old_pipe), 0);
  handler_ran = 0;
  pid = husk_spawn (signal_child, &start);
  assert_true (pid > 0);
  status = wait_status (pid);
  assert_true (WIFSIGNALED (status));
  assert_int_equal (WTERMSIG (status), SIGUSR1);
  assert_int_equal (handler_ran, 0);
  /* The parent's own handlers are untouched. */
  raise (SIGUSR1);
  assert_int_equal (handler_ran, 1);
  sigaction (SIGUSR1, &old_usr1, NULL);
  sigaction (SIGPIPE, &old_pipe, NULL);
}

/* The caller's signal mask is back as it was after the spawn. */
static void
test_spawn_restores_mask (void **state)
{
  struct exec_start start = { "/bin/sh", 0 };
  sigset_t before, after;
  pid_t pid;

  (void) state;
  sigemptyset (&before);
  sigaddset (&before, SIGUSR2);
  assert_int_equal (pthread_sigmask (SIG_SETMASK, &before, NULL), 0);
  pid = husk_spawn (exec_child, &start);
  assert_true (pid > 0);
  pthread_sigmask (SIG_SETMASK, NULL, &after);
  assert_true (sigismember (&after, SIGUSR2));
  assert_false (sigismember (&after, SIGUSR1));
  wait_status (pid);
  sigemptyset (&before);
  pthread_sigmask (SIG_SETMASK, &before, NULL);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_spawn_execs),
    cmocka_unit_test (test_spawn_exec_fails),
    cmocka_unit_test (test_spawn_child_signals),
    cmocka_unit_test (test_spawn_restores_mask),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
