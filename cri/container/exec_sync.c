/* ExecSync in a container of the husk handler without running the husk
 * binary: each container's exec plan (runtime/exec.c: state, config,
 * compiled seccomp filter, namespaces) is loaded once and kept
 * (runtime/exec_plans.c), and every call forks the process from huskd's exec
 * helper (`husk exec-helper`, exec_helper.c), or huskd itself when there is none, applying
 * what `husk exec` applies.  A probe every 10 s per pod then costs a fork and the joins,
 * not a runtime start (dynamic loading, the sealed re-exec, two config
 * parses and a seccomp compile). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cri/container/exec_helper.h"
#include "cri/container/exec_sync.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/exec_plans.h"

/* Linux's limit on one argument (MAX_ARG_STRLEN, 32 pages). */
#define EXEC_ARG_MAX (32 * 4096)

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

struct exec_job
{
  const char *root, *id, *pid_file;
  const char *const *args;
  size_t n_args;
  struct exec_plan_ref *plan; /* huskd's own fork */
  int reply_fd;               /* the helper's */
  bool declined;
};

static pid_t
spawn_by_helper (void *arg, const int stdio[3], struct husk_error **err)
{
  struct exec_job *job = arg;
  pid_t pid = cri_exec_helper_spawn (job->root, job->id, job->pid_file, job->args, job->n_args, stdio,
                                     &job->reply_fd, err);

  if (pid == CRI_EXEC_HELPER_DECLINED)
    {
      job->declined = true;
      return husk_error_make (err, 0, "declined by the exec helper");
    }
  return pid;
}

static void
wait_for_helper (void *arg, pid_t pid, int *wait_status)
{
  struct exec_job *job = arg;

  cri_exec_helper_wait (job->reply_fd, pid, wait_status);
}

static pid_t
spawn_by_huskd (void *arg, const int stdio[3], struct husk_error **err)
{
  struct exec_job *job = arg;

  return exec_plans_spawn (job->plan, (char *const *) job->args, stdio, job->pid_file, err);
}

/* Without the helper: the plan in huskd, huskd's own fork. */
static int
exec_by_huskd (struct exec_job *job, struct cri_child_run *run, struct husk_error **err)
{
  int ret;

  if ((job->plan = exec_plans_get (job->root, job->id, err)) == NULL)
    return -1;
  if (!exec_plans_spawnable (job->plan))
    ret = 1;
  else
    {
      run->spawn = spawn_by_huskd;
      run->spawn_arg = job;
      ret = cri_child_run (run, err);
    }
  exec_plans_release (job->plan);
  return ret;
}

int
cri_exec_sync_in_process (const struct huskd_runtime *rt, const char *id, const char *const *cmd,
                          size_t n_cmd, struct cri_child_run *run, struct husk_error **err)
{
  cleanup_free const char **args = NULL;
  struct exec_job job = { .root = rt->root, .id = id, .pid_file = run->pid_file, .n_args = n_cmd };
  int ret;

  if (check_exec_size (cmd, n_cmd, err) < 0)
    return -1;
  args = xcalloc (n_cmd + 1, sizeof *args);
  memcpy (args, cmd, n_cmd * sizeof *args);
  job.args = args;
  run->spawn = spawn_by_helper;
  run->wait = wait_for_helper;
  run->spawn_arg = &job;
  ret = cri_child_run (run, err);
  run->wait = NULL;
  if (ret < 0 && job.declined)
    {
      husk_error_free (err);
      ret = exec_by_huskd (&job, run, err);
    }
  run->spawn = NULL;
  run->spawn_arg = NULL;
  return ret;
}
