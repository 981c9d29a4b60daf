/* ExecSync in a container of the husk handler without running the husk
 * binary: each container's exec plan (runtime/exec.c: state, config,
 * compiled seccomp filter, namespaces) is loaded once and kept, and every
 * call forks the process from huskd itself, applying what `husk exec`
 * applies.  A probe every 10 s per pod then costs a fork and the joins,
 * not a runtime start (dynamic loading, the sealed re-exec, two config
 * parses and a seccomp compile). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cri/container/exec_sync.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/container.h"

/* Linux's limit on one argument (MAX_ARG_STRLEN, 32 pages). */
#define EXEC_ARG_MAX (32 * 4096)
/* Plans kept at most; past it a plan is used once and freed. */
#define PLANS_MAX 4096

struct plan_entry
{
  char *root;
  char *id;
  struct exec_plan *plan;
  unsigned refs; /* calls using it, plus one while cached */
  struct plan_entry *next;
};

static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;
static struct plan_entry *plans;
static size_t n_plans;

static void
entry_unref_locked (struct plan_entry *e)
{
  if (--e->refs > 0)
    return;
  container_exec_plan_free (e->plan);
  free (e->root);
  free (e->id);
  free (e);
}

static void
entry_release (struct plan_entry *e)
{
  pthread_mutex_lock (&plans_lock);
  entry_unref_locked (e);
  pthread_mutex_unlock (&plans_lock);
}

/* Unlinks E from the cache (which drops the cache's reference). */
static void
unlink_locked (struct plan_entry **link)
{
  struct plan_entry *e = *link;

  *link = e->next;
  n_plans--;
  entry_unref_locked (e);
}

/* Drops the plans of containers whose init is gone. */
static void
sweep_locked (void)
{
  for (struct plan_entry **link = &plans; *link;)
    if (!container_exec_plan_current ((*link)->plan))
      unlink_locked (link);
    else
      link = &(*link)->next;
}

/* A current plan from the cache, referenced; NULL when there is none. */
static struct plan_entry *
cached (const char *root, const char *id)
{
  struct plan_entry *found = NULL;

  pthread_mutex_lock (&plans_lock);
  for (struct plan_entry **link = &plans; *link; link = &(*link)->next)
    if (strcmp ((*link)->id, id) == 0 && strcmp ((*link)->root, root) == 0)
      {
        if (container_exec_plan_current ((*link)->plan))
          {
            found = *link;
            found->refs++;
          }
        else
          unlink_locked (link);
        break;
      }
  pthread_mutex_unlock (&plans_lock);
  return found;
}

static struct plan_entry *
plan_get (const char *root, const char *id, struct husk_error **err)
{
  struct runtime_ctx ctx = { .root = root };
  struct plan_entry *e = cached (root, id);

  if (e)
    return e;
  e = xcalloc (1, sizeof *e);
  if (container_exec_plan_load (&ctx, id, &e->plan, err) < 0)
    {
      free (e);
      return NULL;
    }
  e->root = xstrdup (root);
  e->id = xstrdup (id);
  e->refs = 1;
  pthread_mutex_lock (&plans_lock);
  sweep_locked ();
  if (n_plans < PLANS_MAX)
    {
      e->refs++;
      e->next = plans;
      plans = e;
      n_plans++;
    }
  pthread_mutex_unlock (&plans_lock);
  return e;
}

bool
cri_exec_in_process (const struct huskd_runtime *rt)
{
  int known = __atomic_load_n (&rt->in_process_exec, __ATOMIC_RELAXED);

  if (known == 0)
    {
      cleanup_free char *ours = cri_helper_path ("husk");
      cleanup_free char *ours_real = realpath (ours, NULL);
      cleanup_free char *theirs_real = realpath (rt->path, NULL);
      const char *off = getenv ("HUSKD_EXEC_VIA_RUNTIME");

      known = ours_real && theirs_real && strcmp (ours_real, theirs_real) == 0
                      && !(off && strcmp (off, "1") == 0)
                  ? 1
                  : -1;
      __atomic_store_n (&((struct huskd_runtime *) rt)->in_process_exec, known, __ATOMIC_RELAXED);
    }
  return known > 0;
}

/* What execve would refuse with E2BIG, said before forking: one argument
 * over MAX_ARG_STRLEN, or all of them with the environment over ARG_MAX. */
static int
check_exec_size (const char *const *cmd, size_t n_cmd, struct husk_error **err)
{
  long arg_max = sysconf (_SC_ARG_MAX);
  size_t total = 0;

  for (size_t i = 0; i < n_cmd; i++)
    {
      size_t len = strlen (cmd[i]) + 1;
      if (len > EXEC_ARG_MAX)
        return husk_error_kind (err, E2BIG,
                                "cmd[%zu]: %zu bytes, more than one argument of exec may be (%d): %s", i,
                                len - 1, EXEC_ARG_MAX, strerror (E2BIG));
      total += len + sizeof (char *);
    }
  if (arg_max > 0 && total > (size_t) arg_max)
    return husk_error_kind (err, E2BIG, "cmd: %zu bytes in all, more than exec takes (%ld): %s", total,
                            arg_max, strerror (E2BIG));
  return 0;
}

struct spawn_job
{
  const struct exec_plan *plan;
  char *const *args;
  const char *pid_file;
};

/* Forks the process and writes its pid file, as `husk exec --pid-file`. */
static pid_t
spawn_plan (void *arg, const int stdio[3], struct husk_error **err)
{
  const struct spawn_job *job = arg;
  pid_t pid = container_exec_plan_spawn (job->plan, job->args, stdio, err);
  char buf[32];
  int n;

  if (pid < 0 || job->pid_file == NULL)
    return pid;
  n = snprintf (buf, sizeof buf, "%d", (int) pid);
  if (husk_write_file_replace (job->pid_file, buf, (size_t) n, 0644, err) < 0)
    {
      kill (pid, SIGKILL);
      while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
        ;
      return -1;
    }
  return pid;
}

int
cri_exec_sync_in_process (const struct huskd_runtime *rt, const char *id, const char *const *cmd,
                          size_t n_cmd, struct cri_child_run *run, struct husk_error **err)
{
  struct plan_entry *e;
  struct spawn_job job;
  cleanup_free const char **args = NULL;
  int ret;

  if (check_exec_size (cmd, n_cmd, err) < 0)
    return -1;
  if ((e = plan_get (rt->root, id, err)) == NULL)
    return -1;
  if (!container_exec_plan_spawnable (e->plan))
    {
      entry_release (e);
      return 1;
    }
  args = xcalloc (n_cmd + 1, sizeof *args);
  memcpy (args, cmd, n_cmd * sizeof *args);
  job = (struct spawn_job){ .plan = e->plan, .args = (char *const *) args, .pid_file = run->pid_file };
  run->spawn = spawn_plan;
  run->spawn_arg = &job;
  ret = cri_child_run (run, err);
  run->spawn = NULL;
  run->spawn_arg = NULL;
  entry_release (e);
  return ret;
}
