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
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cri/config/runtime_exec.h"
#include "cri/config/self_exe.h"
#include "husk/cleanup.h"
#include "husk/spawn.h"
#include "husk/util.h"

int64_t
cri_now_ns (void)
{
  return husk_clock_ns (CLOCK_REALTIME);
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

HUSK_SPAWN_CHILD static int
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

/* RUN->spawn with stdin /dev/null and the write ends of PIPES; closes them. */
static pid_t
child_spawn (struct cri_child_run *run, int pipes[2][2], struct husk_error **err)
{
  int null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC);
  pid_t pid = -1;

  if (null_fd < 0)
    husk_error_make (err, errno, "open /dev/null");
  else
    pid = run->spawn (run->spawn_arg, (const int[3]){ null_fd, pipes[0][1], pipes[1][1] }, err);
  if (null_fd >= 0)
    close (null_fd);
  close (pipes[0][1]);
  close (pipes[1][1]);
  if (pid < 0)
    close (pipes[0][0]), close (pipes[1][0]);
  return pid;
}

static void child_collect (struct cri_child_run *run, pid_t pid, int out_fd, int err_fd);

/* Spawns RUN->argv with OUT_FD and ERR_FD (-1: /dev/null) as its stdout
 * and stderr; the caller closes them.  Its pid, or -1 when it could not
 * exec (E2BIG and the like are errors, not exit 127). */
static pid_t
child_start_argv (struct cri_child_run *run, int out_fd, int err_fd, struct husk_error **err)
{
  int exec_err[2], exec_errno;
  pid_t pid;

  if (pipe2 (exec_err, O_CLOEXEC) < 0)
    return husk_error_make (err, errno, "pipe");
  {
    struct child_start start = { run->argv, out_fd, err_fd, exec_err[1] };
    pid = husk_spawn (child_exec, &start);
  }
  if (pid < 0)
    {
      int spawn_errno = errno;
      close (exec_err[0]), close (exec_err[1]);
      return husk_error_make (err, spawn_errno, "spawn `%s`", run->argv[0]);
    }
  close (exec_err[1]);
  exec_errno = child_exec_errno (exec_err[0]);
  close (exec_err[0]);
  if (exec_errno == 0)
    return pid;
  while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
  return husk_error_make (err, exec_errno, "run `%s`", run->argv[0]);
}

/* Whether PID has ended, leaving it to be reaped. */
static bool
child_exited (pid_t pid)
{
  siginfo_t info = { 0 };

  return waitid (P_PID, (id_t) pid, &info, WEXITED | WNOHANG | WNOWAIT) < 0 || info.si_pid != 0;
}

/* Reaps PID, killing its process group at RUN's deadline.  Waits on a
 * pidfd, or polls where the kernel has none. */
static void
child_wait_exit (struct cri_child_run *run, pid_t pid)
{
  int64_t deadline = run->timeout_ms > 0 ? cri_monotonic_ms () + run->timeout_ms : 0;
  int pidfd = (int) syscall (SYS_pidfd_open, pid, 0);
  struct timespec pause = { 0, 2 * 1000 * 1000 };

  for (;;)
    {
      int64_t left = deadline ? deadline - cri_monotonic_ms () : -1;
      struct pollfd p = { .fd = pidfd, .events = POLLIN };

      if (deadline && left <= 0)
        {
          run->timed_out = true;
          kill (-pid, SIGKILL);
          kill (pid, SIGKILL);
          break;
        }
      if (pidfd >= 0 ? poll (&p, 1, (int) left) > 0 : child_exited (pid))
        break;
      if (pidfd < 0)
        nanosleep (&pause, NULL);
    }
  if (pidfd >= 0)
    close (pidfd);
  while (waitpid (pid, &run->wait_status, 0) < 0 && errno == EINTR)
    ;
}

/* RUN->err_path's way: nothing captured, the child's exit ends the call. */
static int
child_run_to_file (struct cri_child_run *run, struct husk_error **err)
{
  int err_fd = open (run->err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  pid_t pid;

  if (err_fd < 0)
    return husk_error_make (err, errno, "open `%s`", run->err_path);
  pid = child_start_argv (run, -1, err_fd, err);
  close (err_fd);
  if (pid < 0)
    return -1;
  child_wait_exit (run, pid);
  return 0;
}

/* Runs RUN->argv with stdout and stderr captured, killing its process
 * group at the deadline. */
int
cri_child_run (struct cri_child_run *run, struct husk_error **err)
{
  int pipes[2][2];
  pid_t pid;

  if (run->err_path && !run->spawn)
    return child_run_to_file (run, err);
  if (pipe2 (pipes[0], O_CLOEXEC) < 0)
    return husk_error_make (err, errno, "pipe");
  if (pipe2 (pipes[1], O_CLOEXEC) < 0)
    {
      close (pipes[0][0]), close (pipes[0][1]);
      return husk_error_make (err, errno, "pipe");
    }
  if (run->spawn)
    pid = child_spawn (run, pipes, err);
  else
    {
      pid = child_start_argv (run, pipes[0][1], pipes[1][1], err);
      close (pipes[0][1]), close (pipes[1][1]);
      if (pid < 0)
        close (pipes[0][0]), close (pipes[1][0]);
    }
  if (pid < 0)
    return -1;
  child_collect (run, pid, pipes[0][0], pipes[1][0]);
  return 0;
}

/* Reads PID's stdout and stderr until both close or the deadline, then
 * reaps it; closes the fds. */
static void
child_collect (struct cri_child_run *run, pid_t pid, int out_fd, int err_fd)
{
  int64_t deadline = run->timeout_ms > 0 ? cri_monotonic_ms () + run->timeout_ms : 0;
  bool open_flags[2] = { true, true };
  int fd[2] = { out_fd, err_fd };

  while (open_flags[0] || open_flags[1])
    {
      struct pollfd fds[2]
          = { { open_flags[0] ? fd[0] : -1, POLLIN, 0 }, { open_flags[1] ? fd[1] : -1, POLLIN, 0 } };
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
  close (fd[0]);
  close (fd[1]);
  if (run->spawn && run->wait)
    run->wait (run->spawn_arg, pid, &run->wait_status);
  else
    while (waitpid (pid, &run->wait_status, 0) < 0 && errno == EINTR)
      ;
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

const char **
cri_runtime_argv (const struct huskd_runtime *rt, const char *const *args, size_t extra)
{
  size_t n_args = 0, n = 0;
  const char **argv;

  while (args && args[n_args])
    n_args++;
  argv = xcalloc (3 + husk_strv_len (rt->args) + n_args + extra + 1, sizeof *argv);
  argv[n++] = rt->path, argv[n++] = "--root", argv[n++] = rt->root;
  for (char **flag = rt->args; flag && *flag; flag++)
    argv[n++] = *flag;
  for (size_t i = 0; i < n_args; i++)
    argv[n++] = args[i];
  return argv;
}

/* `RUNTIME --root ROOT ARGS...`; a failure carries the runtime's stderr. */
int
cri_run_runtime (const struct huskd_runtime *rt, const char *const *args, struct husk_error **err)
{
  cleanup_free const char **argv = cri_runtime_argv (rt, args, 0);
  struct cri_child_run run = { .argv = (char *const *) argv, .timeout_ms = 60000, .output_max = 65536 };
  size_t n_args = 0;
  int ret;

  while (args[n_args])
    n_args++;
  if (cri_child_run (&run, err) < 0)
    return -1;
  ret = 0;
  if (run.timed_out || !WIFEXITED (run.wait_status) || WEXITSTATUS (run.wait_status) != 0)
    {
      char *msg = run.out[1].data ?: run.out[0].data ?: "";
      size_t len = strlen (msg);
      while (len && msg[len - 1] == '\n')
        msg[--len] = '\0';
      ret = husk_error_make (err, 0, "%s %s %s: %s", rt->path, args[0], n_args ? args[n_args - 1] : "",
                             run.timed_out ? "timed out"
                             : len         ? msg
                                           : "failed");
    }
  cri_child_run_clear (&run);
  return ret;
}

/* The last non-empty line of PATH (the runtime's stderr), or "failed". */
static char *
last_line_of (const char *path)
{
  cleanup_free char *text = NULL;
  char *line;
  size_t len;

  if (husk_read_file (path, &text, NULL, NULL) < 0)
    return xstrdup ("failed");
  len = strlen (text);
  while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
    text[--len] = '\0';
  line = strrchr (text, '\n');
  line = line ? line + 1 : text;
  return xstrdup (*line ? line : "failed");
}

int
cri_run_runtime_to_file (const struct huskd_runtime *rt, const char *const *args, const char *err_path,
                         struct husk_error **err)
{
  cleanup_free const char **argv = cri_runtime_argv (rt, args, 0);
  struct cri_child_run run = { .argv = (char *const *) argv, .timeout_ms = 60000, .err_path = err_path };
  const char *id = argv[husk_strv_len ((char **) argv) - 1];
  cleanup_free char *line = NULL;

  if (cri_child_run (&run, err) < 0)
    return -1;
  if (run.timed_out)
    return husk_error_make (err, 0, "%s %s %s: timed out", rt->path, args[0], id);
  if (WIFEXITED (run.wait_status) && WEXITSTATUS (run.wait_status) == 0)
    return 0;
  line = last_line_of (err_path);
  return husk_error_make (err, 0, "%s %s %s: %s", rt->path, args[0], id, line);
}

/* `RUNTIME --root ROOT state ID`, parsed. */
int
cri_runtime_state (const struct huskd_runtime *rt, const char *id, char **status, pid_t *pid,
                   struct husk_error **err)
{
  cleanup_free const char **argv = cri_runtime_argv (rt, (const char *[]){ "state", id, NULL }, 0);
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
  cleanup_free char *self = cri_self_exe ();

  if (self == NULL)
    return xstrdup (name);
  return xasprintf ("%s/%s", dirname (self), name);
}

bool
cri_runtime_in_process (const struct huskd_runtime *rt)
{
  int known = __atomic_load_n (&rt->in_process, __ATOMIC_RELAXED);

  if (known == 0)
    {
      cleanup_free char *ours = cri_helper_path ("husk");
      cleanup_free char *ours_real = realpath (ours, NULL);
      cleanup_free char *theirs_real = realpath (rt->path, NULL);
      const char *off = getenv ("HUSKD_EXEC_VIA_RUNTIME");

      known = ours_real && theirs_real && strcmp (ours_real, theirs_real) == 0
                      && !(off && strcmp (off, "1") == 0) && husk_strv_len (rt->args) == 0 && !rt->owns_pod
                  ? 1
                  : -1;
      __atomic_store_n (&((struct huskd_runtime *) rt)->in_process, known, __ATOMIC_RELAXED);
    }
  return known > 0;
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
