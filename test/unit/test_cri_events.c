/* The event hub's parts that need no gRPC call: the per-container flags,
 * the exit-file watcher that wakes waiters and reports names, and its
 * watches of processes by pidfd. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cri/container/events.h"
#include "husk/cleanup.h"
#include "husk/util.h"

struct seen
{
  pthread_mutex_t lock;
  char names[8][80];
  int n;
};

static void
on_file (const char *name, void *user)
{
  struct seen *seen = user;

  pthread_mutex_lock (&seen->lock);
  if (seen->n < 8)
    snprintf (seen->names[seen->n++], sizeof seen->names[0], "%s", name);
  pthread_mutex_unlock (&seen->lock);
}

struct writer
{
  const char *dir;
  const char *name;
};

/* As the monitor writes an exit file: a temp name, then a rename. */
static void *
write_later (void *arg)
{
  struct writer *w = arg;
  struct timespec pause = { 0, 50 * 1000 * 1000 };
  cleanup_free char *tmp = xasprintf ("%s/.%s.tmp", w->dir, w->name);
  cleanup_free char *path = xasprintf ("%s/%s", w->dir, w->name);
  FILE *f;

  nanosleep (&pause, NULL);
  f = fopen (tmp, "w");
  if (f)
    {
      fputs ("{\"exit_code\":0}", f);
      fclose (f);
      rename (tmp, path);
    }
  return NULL;
}

static void
test_flags (void **state)
{
  struct cri_events *hub = cri_events_new ();

  cri_events_lock (hub);
  assert_int_equal (cri_events_flags (hub, "a"), 0);
  cri_events_set_flags (hub, "a", 1);
  cri_events_set_flags (hub, "b", 6);
  cri_events_set_flags (hub, "a", cri_events_flags (hub, "a") | 2);
  assert_int_equal (cri_events_flags (hub, "a"), 3);
  assert_int_equal (cri_events_flags (hub, "b"), 6);
  /* 0 forgets the id; others keep theirs. */
  cri_events_set_flags (hub, "a", 0);
  assert_int_equal (cri_events_flags (hub, "a"), 0);
  assert_int_equal (cri_events_flags (hub, "b"), 6);
  cri_events_unlock (hub);
  assert_int_equal (cri_events_subscribers (hub), 0);
  cri_events_free (hub);
  cri_events_free (NULL);
}

static void
test_watch_wakes_and_reports (void **state)
{
  char template[] = "/tmp/husk-events-test.XXXXXX";
  char *dir = mkdtemp (template);
  struct cri_events *hub = cri_events_new ();
  struct seen seen = { .lock = PTHREAD_MUTEX_INITIALIZER };
  struct husk_error *err = NULL;
  struct writer w = { dir, "c1" };
  cleanup_free char *path = NULL;
  pthread_t thread;

  assert_non_null (dir);
  path = xasprintf ("%s/c1", dir);
  assert_int_equal (cri_events_watch (hub, dir, on_file, &seen, &err), 0);
  /* Nothing comes: the wait ends at its timeout. */
  assert_false (cri_events_wait_file (hub, path, 100));
  assert_int_equal (pthread_create (&thread, NULL, write_later, &w), 0);
  assert_true (cri_events_wait_file (hub, path, 10000));
  pthread_join (thread, NULL);
  /* The watcher reports the renamed file by name, not the temp one. */
  for (int i = 0; i < 200; i++)
    {
      pthread_mutex_lock (&seen.lock);
      int n = seen.n;
      pthread_mutex_unlock (&seen.lock);
      if (n > 0)
        break;
      usleep (10000);
    }
  assert_int_equal (seen.n, 1);
  assert_string_equal (seen.names[0], "c1");
  /* A file already there: no wait at all. */
  assert_true (cri_events_wait_file (hub, path, 0));
  cri_events_free (hub);
  husk_rm_rf (dir, &err);
  husk_error_free (&err);
}

static void
test_wait_without_watcher (void **state)
{
  char template[] = "/tmp/husk-events-test.XXXXXX";
  char *dir = mkdtemp (template);
  struct writer w = { dir, "c2" };
  cleanup_free char *path = NULL;
  struct husk_error *err = NULL;
  pthread_t thread;

  assert_non_null (dir);
  path = xasprintf ("%s/c2", dir);
  /* No hub: it polls, and still sees the file. */
  assert_int_equal (pthread_create (&thread, NULL, write_later, &w), 0);
  assert_true (cri_events_wait_file (NULL, path, 10000));
  pthread_join (thread, NULL);
  husk_rm_rf (dir, &err);
  husk_error_free (&err);
}

struct pid_seen
{
  pthread_mutex_t lock;
  char key[32];
  int calls, exit_status;
};

static void
on_pid_exit (const char *key, int pidfd, void *user)
{
  struct pid_seen *seen = user;
  siginfo_t info = { 0 };

  pthread_mutex_lock (&seen->lock);
  snprintf (seen->key, sizeof seen->key, "%s", key);
  seen->calls++;
  /* The pidfd is still open in the callback: the test's own child can be
   * reaped through it. */
  if (waitid (P_PIDFD, (id_t) pidfd, &info, WEXITED) == 0)
    seen->exit_status = info.si_status;
  pthread_mutex_unlock (&seen->lock);
}

static void
test_watch_pid (void **state)
{
  char template[] = "/tmp/husk-events-test.XXXXXX";
  char *dir = mkdtemp (template);
  struct cri_events *hub = cri_events_new ();
  struct seen seen = { .lock = PTHREAD_MUTEX_INITIALIZER };
  struct pid_seen exits = { .lock = PTHREAD_MUTEX_INITIALIZER };
  struct husk_error *err = NULL;
  pid_t child;
  int calls = 0;

  assert_non_null (dir);
  /* No watcher yet: refused, the pidfd closed. */
  assert_int_equal (cri_events_watch_pid (hub, pidfd_open (getpid (), 0), "self", on_pid_exit, &exits, &err),
                    -1);
  assert_non_null (strstr (err->msg, "self"));
  husk_error_free (&err);
  assert_int_equal (cri_events_watch (hub, dir, on_file, &seen, &err), 0);
  child = fork ();
  if (child == 0)
    {
      usleep (100 * 1000);
      _exit (7);
    }
  assert_int_equal (cri_events_watch_pid (hub, pidfd_open (child, 0), "init:c1", on_pid_exit, &exits, &err),
                    1);
  /* A second watch of one key: kept once. */
  assert_int_equal (cri_events_watch_pid (hub, pidfd_open (child, 0), "init:c1", on_pid_exit, &exits, &err),
                    0);
  assert_true (cri_events_watching_pid (hub, "init:c1"));
  for (int i = 0; i < 500 && calls == 0; i++)
    {
      usleep (10000);
      pthread_mutex_lock (&exits.lock);
      calls = exits.calls;
      pthread_mutex_unlock (&exits.lock);
    }
  assert_int_equal (calls, 1);
  assert_string_equal (exits.key, "init:c1");
  assert_int_equal (exits.exit_status, 7);
  assert_false (cri_events_watching_pid (hub, "init:c1"));
  /* A process that never exits here is let go with the hub. */
  assert_int_equal (cri_events_watch_pid (hub, pidfd_open (getpid (), 0), "self", on_pid_exit, &exits, &err),
                    1);
  cri_events_free (hub);
  assert_int_equal (exits.calls, 1);
  husk_rm_rf (dir, &err);
  husk_error_free (&err);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_flags),
    cmocka_unit_test (test_watch_wakes_and_reports),
    cmocka_unit_test (test_wait_without_watcher),
    cmocka_unit_test (test_watch_pid),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
