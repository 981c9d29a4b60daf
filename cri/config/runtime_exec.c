/* huskd's children: the OCI runtime's commands and ExecSync's process,
 * with output captured and a deadline. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cri/config/runtime_exec.h"
#include "husk/cleanup.h"
#include "husk/spawn.h"
#include "husk/util.h"

int64_t
cri_now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_REALTIME, &ts);
  return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t
cri_monotonic_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What the child needs, all made before the spawn.  EXEC_ERR_FD is
 * close-on-exec: a successful execv closes it, a failed one sends its
 * errno through it. */
struct child_start
{
  char *const *argv;
  int out_fd, err_fd, exec_err_fd;
};

static int
child_exec (void *arg)
{
  const struct child_start *start = arg;
  sigset_t none;
  int null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC);

  /* huskd blocks SIGINT/SIGTERM for gRPC's threads; the child must not. */
  sigemptyset (&none);
  husk_spawn_child_signals (&none);
  setpgid (0, 0);
  dup2 (null_fd, 0);
  dup2 (start->out_fd >= 0 ? start->out_fd : null_fd, 1);
  dup2 (start->err_fd >= 0 ? start->err_fd : null_fd, 2);
  execv (start->argv[0], start->argv);
  {
    int exec_errno = errno;
    if (write (start->exec_err_fd, &exec_errno, sizeof exec_errno) < 0)
      _exit (127);
  }
  _exit (127);
}

/* Waits until the child has exec'd (EOF) or says why it could not. */
static int
child_exec_errno (int exec_err_fd)
{
  int exec_errno = 0;
  ssize_t n;

  while ((n = read (exec_err_fd, &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR)
    ;
  return n == (ssize_t) sizeof exec_errno ? exec_errno : 0;
}

static void
child_read (int fd, struct cri_child_output *out, size_t max, bool *open_flag)
{
  char buf[65536];
  ssize_t n = read (fd, buf, sizeof buf);

  if (n <= 0)
    {
      if (n == 0 || (errno != EINTR && errno != EAGAIN))
        *open_flag = false;
      return;
    }
  if (out->len + (size_t) n > max)
    {
      out->truncated = true;
      n = (ssize_t) (max - out->len);
    }
  out->data = xrealloc (out->data, out->len + (size_t) n + 1);
  memcpy (out->data + out->len, buf, (size_t) n);
  out->len += (size_t) n;
  out->data[out->len] = '\0';
}

/* How long a child gets to reap the process of its pid file and exit. */
#define CHILD_REAP_GRACE_MS 5000

/* Kills the process named in PID_FILE; false when there is none (the file
 * is not written yet, or not a pid). */
static bool
kill_pid_file (const char *pid_file)
{
  cleanup_free char *text = NULL;
  struct husk_error *err = NULL;
  long long pid;

  if (pid_file == NULL || husk_read_file (pid_file, &text, NULL, &err) < 0)
    {
      husk_error_free (&err);
      return false;
    }
  text[strcspn (text, "\n")] = '\0';
  if (husk_parse_int64 (text, 2, INT32_MAX, &pid) < 0)
    return false;
  return kill ((pid_t) pid, SIGKILL) == 0;
}

/* Runs RUN->argv with stdout and stderr captured, killing its process
 * group at the deadline. */
int
cri_child_run (struct cri_child_run *run, struct husk_error **err)
{
  int pipes[2][2], exec_err[2];
  int64_t deadline = run->timeout_ms > 0 ? cri_monotonic_ms () + run->timeout_ms : 0;
  bool open_flags[2] = { true, true };
  pid_t pid;

  if (pipe2 (pipes[0], O_CLOEXEC) < 0)
    return husk_error_make (err, errno, "pipe");
  if (pipe2 (pipes[1], O_CLOEXEC) < 0)
    {
      close (pipes[0][0]), close (pipes[0][1]);
      return husk_error_make (err, errno, "pipe");
    }
  if (pipe2 (exec_err, O_CLOEXEC) < 0)
    {
      for (int i = 0; i < 2; i++)
        close (pipes[i][0]), close (pipes[i][1]);
      return husk_error_make (err, errno, "pipe");
    }
  {
    struct child_start start = { run->argv, pipes[0][1], pipes[1][1], exec_err[1] };
    pid = husk_spawn (child_exec, &start);
  }
  if (pid < 0)
    {
      int spawn_errno = errno;
      for (int i = 0; i < 2; i++)
        close (pipes[i][0]), close (pipes[i][1]), close (exec_err[i]);
      return husk_error_make (err, spawn_errno, "spawn `%s`", run->argv[0]);
    }
  close (pipes[0][1]);
  close (pipes[1][1]);
  close (exec_err[1]);
  {
    /* E2BIG (arguments too long) and the like: an error, not exit 127. */
    int exec_errno = child_exec_errno (exec_err[0]);
    close (exec_err[0]);
    if (exec_errno)
      {
        close (pipes[0][0]);
        close (pipes[1][0]);
        while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
          ;
        return husk_error_make (err, exec_errno, "run `%s`", run->argv[0]);
      }
  }
  while (open_flags[0] || open_flags[1])
    {
      struct pollfd fds[2] = { { open_flags[0] ? pipes[0][0] : -1, POLLIN, 0 },
                               { open_flags[1] ? pipes[1][0] : -1, POLLIN, 0 } };
      int64_t left = deadline ? deadline - cri_monotonic_ms () : -1;

      if (deadline && left <= 0)
        {
          /* The exec'd process first: its parent (`RUNTIME exec`) reaps
           * it, so no zombie of it is left in the container. */
          if (!run->timed_out && kill_pid_file (run->pid_file))
            {
              run->timed_out = true;
              deadline = cri_monotonic_ms () + CHILD_REAP_GRACE_MS;
              continue;
            }
          run->timed_out = true;
          kill (-pid, SIGKILL);
          kill (pid, SIGKILL);
          break;
        }
      if (poll (fds, 2, (int) (deadline ? left : -1)) < 0 && errno != EINTR)
        break;
      for (int i = 0; i < 2; i++)
        if (fds[i].revents)
          child_read (fds[i].fd, &run->out[i], run->output_max, &open_flags[i]);
    }
  close (pipes[0][0]);
  close (pipes[1][0]);
  while (waitpid (pid, &run->wait_status, 0) < 0 && errno == EINTR)
    ;
  return 0;
}

void
cri_child_run_clear (struct cri_child_run *run)
{
  free (run->out[0].data);
  free (run->out[1].data);
}

int
cri_child_exit_code (int wait_status)
{
  return WIFEXITED (wait_status) ? WEXITSTATUS (wait_status) : 128 + WTERMSIG (wait_status);
}

/* `RUNTIME --root ROOT ARGS...`; a failure carries the runtime's stderr. */
int
cri_run_runtime (const struct huskd_runtime *rt, const char *const *args, struct husk_error **err)
{
  const char *argv[16] = { rt->path, "--root", rt->root };
  size_t n = 3;
  struct cri_child_run run = { .argv = (char *const *) argv, .timeout_ms = 60000, .output_max = 65536 };
  int ret;

  for (; *args && n < 15; args++)
    argv[n++] = *args;
  if (cri_child_run (&run, err) < 0)
    return -1;
  ret = 0;
  if (run.timed_out || !WIFEXITED (run.wait_status) || WEXITSTATUS (run.wait_status) != 0)
    {
      char *msg = run.out[1].data ?: run.out[0].data ?: "";
      size_t len = strlen (msg);
      while (len && msg[len - 1] == '\n')
        msg[--len] = '\0';
      ret = husk_error_make (err, 0, "%s %s %s: %s", rt->path, argv[3], argv[n - 1],
                             run.timed_out ? "timed out"
                             : len         ? msg
                                           : "failed");
    }
  cri_child_run_clear (&run);
  return ret;
}

/* `RUNTIME --root ROOT state ID`, parsed. */
int
cri_runtime_state (const struct huskd_runtime *rt, const char *id, char **status, pid_t *pid,
                   struct husk_error **err)
{
  const char *argv[] = { rt->path, "--root", rt->root, "state", id, NULL };
  struct cri_child_run run = { .argv = (char *const *) argv, .timeout_ms = 10000, .output_max = 65536 };
  json_t *doc = NULL;
  const char *value;
  int ret = 0;

  if (cri_child_run (&run, err) < 0)
    return -1;
  if (!run.timed_out && WIFEXITED (run.wait_status) && WEXITSTATUS (run.wait_status) == 0 && run.out[0].data)
    doc = json_loads (run.out[0].data, 0, NULL);
  value = json_string_value (json_object_get (doc, "status"));
  if (value == NULL)
    {
      char *msg = run.out[1].data ?: "";
      msg[strcspn (msg, "\n")] = '\0';
      ret = husk_error_make (err, 0, "%s state %s: %s", rt->path, id,
                             run.timed_out ? "timed out"
                             : msg[0]      ? msg
                                           : "no status in its output");
    }
  else
    {
      *status = xstrdup (value);
      *pid = (pid_t) json_integer_value (json_object_get (doc, "pid"));
    }
  json_decref (doc);
  cri_child_run_clear (&run);
  return ret;
}

char *
cri_helper_path (const char *name)
{
  char self[4096];
  ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);

  if (n <= 0)
    return xstrdup (name);
  self[n] = '\0';
  return xasprintf ("%s/%s", dirname (self), name);
}

const struct huskd_runtime *
cri_runtime_for (const struct huskd_config *cfg, const char *handler, struct husk_error **err)
{
  const struct huskd_runtime *rt = huskd_config_runtime (cfg, handler);

  if (rt == NULL)
    {
      cleanup_free char *names = huskd_config_runtime_names (cfg);
      husk_error_kind (err, EINVAL, "runtime handler `%s` is not configured (configured: %s; \"\" is %s)",
                       handler ?: "", names, cfg->default_runtime);
    }
  return rt;
}
