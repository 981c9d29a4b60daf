/* `RUNTIME create` under the monitor: the container's stdio are pipes (or a
 * pty from --console-socket) whose other ends the monitor keeps, and since
 * the monitor is a child subreaper, the container's init becomes its child
 * once the runtime exits. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "cri/monitor/monitor.h"
#include "runtime/container.h"

/* A runtime that takes longer is hung; huskd's own deadline is shorter. */
#define CREATE_TIMEOUT_MS (120 * 1000)
/* The tail of the runtime's output kept for the error message. */
#define RUNTIME_OUTPUT_MAX 4096

/* What the create phase holds until the runtime has exited. */
struct create_phase
{
  char private_dir[32]; /* console socket and default pid file */
  pid_t runtime_pid;
  int runtime_status;
  bool runtime_exited;
  int console_listen_fd;
  int master_fd;
  char *console_error; /* told only if the runtime itself succeeded */
  /* Read while the runtime runs, so that it never blocks on a full pipe:
   * before `start` the container pipes carry only the runtime's output. */
  int capture_fd[MONITOR_N_STREAMS];
  char output[RUNTIME_OUTPUT_MAX];
  size_t output_len;
};

static void
create_phase_clear (struct create_phase *phase)
{
  husk_closep (&phase->console_listen_fd);
  husk_closep (&phase->master_fd);
  free (phase->console_error);
  if (phase->private_dir[0])
    husk_rm_rf (phase->private_dir, NULL);
}

static int
make_pipe (int fds[2], const char *what, struct husk_error **err)
{
  if (pipe2 (fds, O_CLOEXEC) < 0)
    return husk_error_make (err, errno, "create the %s pipe", what);
  return 0;
}

static void
set_nonblocking (int fd)
{
  fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) | O_NONBLOCK);
}

/* Fills CHILD_STDIO with what the runtime gets as fds 0-2, and the
 * monitor's ends in MONITOR and PHASE. */
static int
setup_stdio (struct monitor *monitor, struct create_phase *phase, int child_stdio[3], struct husk_error **err)
{
  const struct monitor_options *opts = monitor->opts;
  int fds[2];

  if (opts->stdin_pipe && !opts->terminal)
    {
      if (make_pipe (fds, "stdin", err) < 0)
        return -1;
      child_stdio[0] = fds[0];
      monitor->stdin_target_fd = fds[1];
      set_nonblocking (fds[1]);
    }
  else if ((child_stdio[0] = open ("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
    return husk_error_make (err, errno, "open /dev/null");

  /* With a terminal the runtime's stdout and stderr are its own: one pipe. */
  for (int i = 0; i < (opts->terminal ? 1 : MONITOR_N_STREAMS); i++)
    {
      if (make_pipe (fds, i == MONITOR_STDOUT ? "stdout" : "stderr", err) < 0)
        return -1;
      child_stdio[1 + i] = fds[1];
      phase->capture_fd[i] = fds[0];
      set_nonblocking (fds[0]);
    }
  if (opts->terminal)
    child_stdio[2] = fcntl (child_stdio[1], F_DUPFD_CLOEXEC, 3);
  return 0;
}

static char **
runtime_argv (const struct monitor_options *opts, const char *pid_file, const char *console_socket)
{
  char **global = monitor_runtime_argv (opts, NULL);
  size_t n = husk_strv_len (global);
  char **argv = xcalloc (n + 14, sizeof *argv);

  memcpy (argv, global, n * sizeof *argv);
  free (global);
  if (opts->restore_dir)
    {
      /* The runtime restores it running: no `start` follows. */
      argv[n++] = xstrdup ("restore");
      argv[n++] = xstrdup ("--detach");
      argv[n++] = xstrdup ("--image-path");
      argv[n++] = xstrdup (opts->restore_dir);
    }
  else
    argv[n++] = xstrdup ("create");
  argv[n++] = xstrdup ("--bundle");
  argv[n++] = xstrdup (opts->bundle);
  argv[n++] = xstrdup ("--pid-file");
  argv[n++] = xstrdup (pid_file);
  if (console_socket)
    {
      argv[n++] = xstrdup ("--console-socket");
      argv[n++] = xstrdup (console_socket);
    }
  argv[n++] = xstrdup (opts->id);
  return argv;
}

static void __attribute__ ((noreturn)) exec_runtime (char **argv, const int child_stdio[3], bool sealed)
{
  sigset_t none;

  for (int i = 0; i < 3; i++)
    if (dup2 (child_stdio[i], i) < 0)
      _exit (127);
  /* The container inherits the mask and dispositions through the runtime. */
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  signal (SIGPIPE, SIG_DFL);
  /* Our husk's create, exec'd from a private read-only overlay of its
   * directory (else a sealed copy), runs sealed from its first
   * instruction, as its own re-exec would make it (CVE-2019-5736), one
   * exec sooner.  Where neither can be made, it re-executes itself.
   * (restore re-executes nothing: it is exec'd as it is.) */
  if (sealed)
    {
      struct husk_error *ignored = NULL;

      container_exec_sealed (argv[0], argv, &ignored);
      husk_error_free (&ignored);
    }
  execv (argv[0], argv);
  dprintf (2, "husk-monitor: exec `%s`: %s\n", argv[0], strerror (errno));
  _exit (127);
}

static int
spawn_runtime (const struct monitor_options *opts, char **argv, int child_stdio[3],
               struct create_phase *phase, struct husk_error **err)
{
  pid_t pid = fork ();

  if (pid < 0)
    return husk_error_make (err, errno, "fork for `%s create`", argv[0]);
  if (pid == 0)
    exec_runtime (argv, child_stdio, opts->runtime_is_ours && opts->restore_dir == NULL);
  phase->runtime_pid = pid;
  return 0;
}

static void
keep_output (struct create_phase *phase, const char *bytes, size_t len)
{
  if (len >= RUNTIME_OUTPUT_MAX)
    {
      bytes += len - RUNTIME_OUTPUT_MAX + 1;
      len = RUNTIME_OUTPUT_MAX - 1;
    }
  if (phase->output_len + len >= RUNTIME_OUTPUT_MAX)
    {
      size_t drop = phase->output_len + len - (RUNTIME_OUTPUT_MAX - 1);
      memmove (phase->output, phase->output + drop, phase->output_len - drop);
      phase->output_len -= drop;
    }
  memcpy (phase->output + phase->output_len, bytes, len);
  phase->output_len += len;
  phase->output[phase->output_len] = '\0';
}

/* Reads what is there without blocking; closes the fd at EOF. */
static void
capture (struct create_phase *phase, int *fd)
{
  char buf[4096];
  ssize_t n;

  while ((n = read (*fd, buf, sizeof buf)) > 0)
    keep_output (phase, buf, (size_t) n);
  if (n == 0)
    husk_closep (fd);
}

static int
handle_signals (struct monitor *monitor, struct create_phase *phase, struct husk_error **err)
{
  struct signalfd_siginfo info;

  while (read (monitor->signal_fd, &info, sizeof info) == sizeof info)
    {
      if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT)
        {
          kill (phase->runtime_pid, SIGKILL);
          waitpid (phase->runtime_pid, NULL, 0);
          phase->runtime_exited = true;
          return husk_error_make (err, 0, "interrupted by signal %d while the runtime created the container",
                                  (int) info.ssi_signo);
        }
    }
  /* Only the runtime: the container's init is reaped by the run phase. */
  if (waitpid (phase->runtime_pid, &phase->runtime_status, WNOHANG) == phase->runtime_pid)
    phase->runtime_exited = true;
  return 0;
}

static void
accept_console (struct create_phase *phase)
{
  struct husk_error *err = NULL;

  phase->master_fd = console_socket_receive (phase->console_listen_fd, &err);
  if (phase->master_fd < 0)
    {
      phase->console_error = xstrdup (err->msg);
      husk_error_free (&err);
    }
  husk_closep (&phase->console_listen_fd);
}

static long long
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
wait_for_runtime (struct monitor *monitor, struct create_phase *phase, struct husk_error **err)
{
  long long deadline = now_ms () + CREATE_TIMEOUT_MS;

  while (!phase->runtime_exited)
    {
      struct pollfd fds[] = {
        { .fd = monitor->signal_fd, .events = POLLIN },
        { .fd = phase->console_listen_fd, .events = POLLIN },
        { .fd = phase->capture_fd[0], .events = POLLIN },
        { .fd = phase->capture_fd[1], .events = POLLIN },
      };
      long long left = deadline - now_ms ();

      if (left <= 0)
        {
          kill (phase->runtime_pid, SIGKILL);
          waitpid (phase->runtime_pid, NULL, 0);
          phase->runtime_exited = true;
          return husk_error_make (err, 0, "`%s create` did not finish within %d s", monitor->opts->runtime,
                                  CREATE_TIMEOUT_MS / 1000);
        }
      if (poll (fds, 4, (int) left) < 0 && errno != EINTR)
        return husk_error_make (err, errno, "poll while the runtime creates the container");
      if (fds[1].revents)
        accept_console (phase);
      for (int i = 0; i < MONITOR_N_STREAMS; i++)
        if (fds[2 + i].revents)
          capture (phase, &phase->capture_fd[i]);
      if (fds[0].revents && handle_signals (monitor, phase, err) < 0)
        return -1;
    }
  for (int i = 0; i < MONITOR_N_STREAMS; i++)
    if (phase->capture_fd[i] >= 0)
      capture (phase, &phase->capture_fd[i]);
  return 0;
}

/* The last line the runtime printed: its error message. */
static const char *
last_output_line (struct create_phase *phase)
{
  char *line;

  while (phase->output_len > 0
         && (phase->output[phase->output_len - 1] == '\n' || phase->output[phase->output_len - 1] == '\r'))
    phase->output[--phase->output_len] = '\0';
  line = strrchr (phase->output, '\n');
  return line ? line + 1 : phase->output;
}

static int
check_runtime_status (const struct monitor_options *opts, struct create_phase *phase, struct husk_error **err)
{
  int status = phase->runtime_status;
  const char *message = last_output_line (phase);

  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    return 0;
  if (WIFSIGNALED (status))
    return husk_error_make (err, 0, "`%s create %s` was killed by signal %d%s%s", opts->runtime, opts->id,
                            WTERMSIG (status), *message ? ": " : "", message);
  return husk_error_make (err, 0, "`%s create %s` failed (exit status %d)%s%s", opts->runtime, opts->id,
                          WEXITSTATUS (status), *message ? ": " : "", message);
}

static int
read_container_pid (const char *pid_file, pid_t *pid, struct husk_error **err)
{
  cleanup_free char *content = NULL;
  siginfo_t info = { 0 };
  long long value;

  if (husk_read_file (pid_file, &content, NULL, err) < 0)
    return husk_error_wrap (err, "read the container's pid file");
  content[strcspn (content, " \n")] = '\0';
  if (husk_parse_int64 (content, 1, INT32_MAX, &value) < 0)
    return husk_error_make (err, 0, "pid file `%s`: `%s` is not a pid", pid_file, content);
  /* WNOWAIT leaves a dead init for the run phase to reap and report. */
  if (waitid (P_PID, (id_t) value, &info, WEXITED | WNOHANG | WNOWAIT) < 0)
    return husk_error_make (err, errno, "the container's init (pid %lld) is not a child of the monitor",
                            value);
  *pid = (pid_t) value;
  return 0;
}

/* The container lives in the runtime's sandbox, not under us: its pid is
 * the sandbox's (the runtime's word, never signalled by us), `start` runs
 * with its stdio, and `wait` tells us its exit. */
static int
start_in_sandbox (struct monitor *monitor, struct create_phase *phase, int child_stdio[3],
                  const char *pid_file, struct husk_error **err)
{
  cleanup_free char *content = NULL;
  long long value;

  if (husk_read_file (pid_file, &content, NULL, err) < 0)
    return husk_error_wrap (err, "read the container's pid file");
  content[strcspn (content, " \n")] = '\0';
  if (husk_parse_int64 (content, 1, INT32_MAX, &value) < 0)
    return husk_error_make (err, 0, "pid file `%s`: `%s` is not a pid", pid_file, content);
  monitor->container_pid = (pid_t) value;
  if (monitor_runtime_start (monitor, child_stdio, phase->capture_fd, err) < 0)
    return -1;
  return monitor_runtime_wait_spawn (monitor, err);
}

static int
run_create (struct monitor *monitor, struct create_phase *phase, struct husk_error **err)
{
  const struct monitor_options *opts = monitor->opts;
  cleanup_free char *default_pid_file = xasprintf ("%s/container.pid", phase->private_dir);
  cleanup_free char *console_path = NULL;
  cleanup_strv char **argv = NULL;
  int child_stdio[3] = { -1, -1, -1 };
  int rc;

  if (opts->terminal
      && (phase->console_listen_fd = console_socket_listen (phase->private_dir, &console_path, err)) < 0)
    return -1;
  rc = setup_stdio (monitor, phase, child_stdio, err);
  argv = runtime_argv (opts, opts->pid_file ? opts->pid_file : default_pid_file, console_path);
  if (rc == 0)
    rc = spawn_runtime (opts, argv, child_stdio, phase, err);
  /* --start-and-wait: `start` gets them too (runtime_wait.c). */
  if (rc < 0 || !opts->start_and_wait)
    for (int i = 0; i < 3; i++)
      husk_closep (&child_stdio[i]);
  if (rc < 0 || wait_for_runtime (monitor, phase, err) < 0 || check_runtime_status (opts, phase, err) < 0)
    rc = -1;
  else if (opts->terminal && phase->master_fd < 0)
    rc = husk_error_make (err, 0, "`%s create` sent no terminal over the console socket%s%s", opts->runtime,
                          phase->console_error ? ": " : "", phase->console_error ? phase->console_error : "");
  else if (opts->start_and_wait)
    rc = start_in_sandbox (monitor, phase, child_stdio, opts->pid_file ? opts->pid_file : default_pid_file,
                           err);
  else
    rc = read_container_pid (opts->pid_file ? opts->pid_file : default_pid_file, &monitor->container_pid,
                             err);
  for (int i = 0; i < 3; i++)
    husk_closep (&child_stdio[i]);
  return rc;
}

int
monitor_create_container (struct monitor *monitor, struct husk_error **err)
{
  struct create_phase phase = { .console_listen_fd = -1, .master_fd = -1, .capture_fd = { -1, -1 } };
  int rc;

  strcpy (phase.private_dir, "/tmp/husk-monitor.XXXXXX");
  if (mkdtemp (phase.private_dir) == NULL)
    {
      phase.private_dir[0] = '\0';
      return husk_error_make (err, errno, "create a private directory under /tmp");
    }
  rc = run_create (monitor, &phase, err);
  if (rc == 0 && phase.output_len > 0)
    husk_debug ("runtime output during create: %s", phase.output);
  if (rc == 0 && monitor->opts->terminal)
    {
      monitor->output_fd[MONITOR_STDOUT] = steal_fd (&phase.master_fd);
      if (monitor->opts->stdin_pipe)
        monitor->stdin_target_fd = fcntl (monitor->output_fd[MONITOR_STDOUT], F_DUPFD_CLOEXEC, 3);
      husk_closep (&phase.capture_fd[MONITOR_STDOUT]);
    }
  else
    for (int i = 0; i < MONITOR_N_STREAMS; i++)
      monitor->output_fd[i] = steal_fd (&phase.capture_fd[i]);
  create_phase_clear (&phase);
  return rc;
}
