/* --start-and-wait: for a runtime that owns the pod (gVisor's runsc), whose
 * containers run inside its sandbox and never become our children.  The
 * monitor runs `RUNTIME start ID` itself, because runsc hands the stdio of
 * `start` (not of `create`) to a container that joins a sandbox, then
 * learns the exit from `RUNTIME wait ID` ({"id","exitStatus"}). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "cri/monitor/monitor.h"

/* `start` of a container joining a running sandbox takes well under this. */
#define START_TIMEOUT_MS (60 * 1000)
#define WAIT_OUTPUT_MAX 4096

char **
monitor_runtime_argv (const struct monitor_options *opts, const char *const *verb_args)
{
  char **argv = husk_strv_append (NULL, opts->runtime);

  if (opts->runtime_root)
    {
      argv = husk_strv_append (argv, "--root");
      argv = husk_strv_append (argv, opts->runtime_root);
    }
  for (char *const *flag = opts->runtime_args; flag && *flag; flag++)
    argv = husk_strv_append (argv, *flag);
  for (; verb_args && *verb_args; verb_args++)
    argv = husk_strv_append (argv, *verb_args);
  return argv;
}

static pid_t
spawn (char **argv, const int stdio[3])
{
  pid_t pid = fork ();

  if (pid == 0)
    {
      sigset_t none;

      for (int i = 0; i < 3; i++)
        if (dup2 (stdio[i], i) < 0)
          _exit (127);
      sigemptyset (&none);
      sigprocmask (SIG_SETMASK, &none, NULL);
      signal (SIGPIPE, SIG_DFL);
      execv (argv[0], argv);
      _exit (127);
    }
  return pid;
}

/* Waits for PID, at most TIMEOUT_MS; -1 with it killed after that. */
static int
wait_child (pid_t pid, int timeout_ms, int *status)
{
  struct timespec pause = { 0, 5 * 1000 * 1000 };

  for (int waited = 0; waited < timeout_ms; waited += 5)
    {
      pid_t reaped = waitpid (pid, status, WNOHANG);
      if (reaped == pid)
        return 0;
      if (reaped < 0 && errno != EINTR)
        return -1;
      nanosleep (&pause, NULL);
    }
  kill (pid, SIGKILL);
  waitpid (pid, status, 0);
  return -1;
}

/* What `start` wrote to the container's pipes (nothing of the container's
 * own: it did not start): its last line. */
static char *
start_output (struct monitor *monitor, int capture_fd[MONITOR_N_STREAMS])
{
  char text[WAIT_OUTPUT_MAX];
  size_t len = 0;

  for (int i = MONITOR_N_STREAMS - 1; i >= 0; i--)
    {
      ssize_t n;
      if (capture_fd[i] < 0)
        continue;
      while (len + 1 < sizeof text && (n = read (capture_fd[i], text + len, sizeof text - 1 - len)) > 0)
        len += (size_t) n;
    }
  (void) monitor;
  while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
    len--;
  text[len] = '\0';
  {
    char *line = strrchr (text, '\n');
    return xstrdup (line ? line + 1 : text);
  }
}

int
monitor_runtime_start (struct monitor *monitor, const int child_stdio[3], int capture_fd[MONITOR_N_STREAMS],
                       struct husk_error **err)
{
  const struct monitor_options *opts = monitor->opts;
  cleanup_strv char **argv = monitor_runtime_argv (opts, (const char *[]){ "start", opts->id, NULL });
  cleanup_free char *message = NULL;
  int status = 0;
  pid_t pid = spawn (argv, child_stdio);

  if (pid < 0)
    return husk_error_make (err, errno, "fork for `%s start`", opts->runtime);
  if (wait_child (pid, START_TIMEOUT_MS, &status) < 0)
    return husk_error_make (err, 0, "`%s start %s` did not finish within %d s", opts->runtime, opts->id,
                            START_TIMEOUT_MS / 1000);
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    return 0;
  message = start_output (monitor, capture_fd);
  if (WIFSIGNALED (status))
    return husk_error_make (err, 0, "`%s start %s` was killed by signal %d%s%s", opts->runtime, opts->id,
                            WTERMSIG (status), *message ? ": " : "", message);
  return husk_error_make (err, 0, "`%s start %s` failed (exit status %d)%s%s", opts->runtime, opts->id,
                          WEXITSTATUS (status), *message ? ": " : "", message);
}

int
monitor_runtime_wait_spawn (struct monitor *monitor, struct husk_error **err)
{
  const struct monitor_options *opts = monitor->opts;
  cleanup_strv char **argv = monitor_runtime_argv (opts, (const char *[]){ "wait", opts->id, NULL });
  cleanup_close int null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC);
  int out[2];

  if (null_fd < 0)
    return husk_error_make (err, errno, "open /dev/null");
  if (pipe2 (out, O_CLOEXEC) < 0)
    return husk_error_make (err, errno, "create the pipe of `%s wait`", opts->runtime);
  monitor->wait_pid = spawn (argv, (const int[3]){ null_fd, out[1], null_fd });
  close (out[1]);
  if (monitor->wait_pid < 0)
    {
      close (out[0]);
      monitor->wait_pid = 0;
      return husk_error_make (err, errno, "fork for `%s wait`", opts->runtime);
    }
  monitor->wait_fd = out[0];
  return 0;
}

/* The container's exit as a wait status, from what `wait` printed (its
 * exitStatus is a shell's: 128 + N for signal N, which stays an exit code
 * here); 255 when it printed none (the container was deleted under it). */
int
monitor_runtime_wait_status (struct monitor *monitor, int wait_process_status)
{
  char text[WAIT_OUTPUT_MAX];
  size_t len = 0;
  ssize_t n;
  json_t *doc, *status;
  int code = 255;

  while (monitor->wait_fd >= 0 && len + 1 < sizeof text
         && (n = read (monitor->wait_fd, text + len, sizeof text - 1 - len)) > 0)
    len += (size_t) n;
  text[len] = '\0';
  husk_closep (&monitor->wait_fd);
  doc = json_loads (text, JSON_DISABLE_EOF_CHECK, NULL);
  status = json_object_get (doc, "exitStatus");
  if (json_is_integer (status) && json_integer_value (status) >= 0 && json_integer_value (status) <= 255)
    code = (int) json_integer_value (status);
  else
    monitor->wait_unknown = true;
  if (monitor->wait_unknown)
    husk_warn ("`%s wait %s` gave no exit status (its own: %d): %s", monitor->opts->runtime,
               monitor->opts->id, WIFEXITED (wait_process_status) ? WEXITSTATUS (wait_process_status) : -1,
               text);
  json_decref (doc);
  return W_EXITCODE (code, 0);
}
