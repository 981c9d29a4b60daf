/* cri_exec_pid_is_ours (cri/container/exec_leftovers.c): the process a
 * pid file names counts as the exec's only if it started no later than
 * the file was written.  The file's mtime comes from the kernel's coarse
 * clock (one jiffy behind at most) and a process's start time from
 * /proc/PID/stat in whole clock ticks, so a process started in the same
 * tick as its file, as `husk exec` writes it within a millisecond, must
 * still count; one started a second after the file must not.  The cgroup
 * half of the check is given "/" here, which every cgroup line holds. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cri/container/exec_leftovers.h"
#include "husk/util.h"

static char dir[] = "/tmp/husk-test-exec-leftovers.XXXXXX";

static pid_t
spawn_sleeper (void)
{
  pid_t pid = fork ();

  if (pid == 0)
    {
      pause ();
      _exit (0);
    }
  assert_true (pid > 0);
  return pid;
}

static void
reap (pid_t pid)
{
  kill (pid, SIGKILL);
  waitpid (pid, NULL, 0);
}

static void
write_pid_file (const char *path, pid_t pid)
{
  FILE *f = fopen (path, "w");

  assert_non_null (f);
  fprintf (f, "%d", (int) pid);
  assert_int_equal (fclose (f), 0);
}

/* The exec's own process: started, then its file written at once, a new
 * file each time as husk_write_file_replace makes it (a new inode's
 * timestamps come from the coarse clock until someone reads them).  Many
 * rounds, so that some fall across a tick or a jiffy boundary. */
static void
test_started_just_before_its_file (void **state)
{
  int misses = 0;

  (void) state;
  for (int round = 0; round < 500; round++)
    {
      char path[128];
      pid_t pid = spawn_sleeper ();

      snprintf (path, sizeof path, "%s/exec-0123456789ab-r%d.pid", dir, round);
      write_pid_file (path, pid);
      if (!cri_exec_pid_is_ours (path, pid, "/"))
        misses++;
      reap (pid);
      unlink (path);
    }
  assert_int_equal (misses, 0);
}

/* A recycled pid: the process started a second after the file. */
static void
test_started_after_its_file (void **state)
{
  char path[128];
  struct timespec past[2];
  pid_t pid;

  (void) state;
  snprintf (path, sizeof path, "%s/exec-0123456789ab-2.pid", dir);
  pid = spawn_sleeper ();
  write_pid_file (path, pid);
  clock_gettime (CLOCK_REALTIME, &past[0]);
  past[0].tv_sec -= 1;
  past[1] = past[0];
  assert_int_equal (utimensat (AT_FDCWD, path, past, 0), 0);
  assert_false (cri_exec_pid_is_ours (path, pid, "/"));
  reap (pid);
}

/* Gone, or in no cgroup that names the container. */
static void
test_gone_or_elsewhere (void **state)
{
  char path[128];
  pid_t pid;

  (void) state;
  snprintf (path, sizeof path, "%s/exec-0123456789ab-3.pid", dir);
  pid = spawn_sleeper ();
  write_pid_file (path, pid);
  assert_false (cri_exec_pid_is_ours (path, pid, "no-such-cgroup-0123456789ab"));
  reap (pid);
  assert_false (cri_exec_pid_is_ours (path, pid, "/"));
}

static int
setup (void **state)
{
  (void) state;
  return mkdtemp (dir) ? 0 : -1;
}

static int
teardown (void **state)
{
  (void) state;
  return husk_rm_rf (dir, NULL);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_started_just_before_its_file),
    cmocka_unit_test (test_started_after_its_file),
    cmocka_unit_test (test_gone_or_elsewhere),
  };
  return cmocka_run_group_tests (tests, setup, teardown);
}
