/* The run phase: one poll loop, no threads.  Container output goes to the
 * CRI log as it comes, --stdin-fd is copied into the container's stdin,
 * signals arrive on a signalfd (SIGCHLD: reap; SIGUSR1: reopen the log;
 * SIGTERM/SIGINT: passed on to the container's init). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "cri/monitor/monitor.h"

#define READ_CHUNK 32768
/* After init exited: what is left in a pipe is at most its capacity, but a
 * process outside a PID namespace may still be writing.  Bounded. */
#define DRAIN_READS_MAX 64

struct stdin_copy
{
  int source_fd;
  char buf[4096];
  size_t len, off;
};

struct run_state
{
  struct monitor *monitor;
  struct stdin_copy in;
  char read_buf[READ_CHUNK];
  bool exited;
  int wait_status;
  struct timespec finished_at;
};

bool
monitor_reap (pid_t pid, int *wait_status)
{
  bool found = false;
  int status;
  pid_t reaped;

  /* As a subreaper we also inherit orphans of the container (without a
   * PID namespace): reap them all. */
  while ((reaped = waitpid (-1, &status, WNOHANG)) > 0)
    if (reaped == pid)
      {
        *wait_status = status;
        found = true;
      }
  return found;
}

static void
check_exited (struct run_state *run)
{
  if (!run->exited && monitor_reap (run->monitor->container_pid, &run->wait_status))
    {
      run->exited = true;
      clock_gettime (CLOCK_REALTIME, &run->finished_at);
    }
}

/* SIGUSR1: the log file was moved away (rotated).  Whoever asked learns
 * how it went from the answer file, the error included. */
static void
reopen_log (struct monitor *monitor)
{
  const struct monitor_options *opts = monitor->opts;
  struct husk_error *failure = NULL;
  struct husk_error *err = NULL;
  struct timespec began;

  clock_gettime (CLOCK_MONOTONIC, &began);
  if (log_file_reopen (&monitor->log, &failure) < 0)
    husk_warn ("%s", failure->msg);
  if (monitor_reopen_answer_write (opts->exit_dir, opts->id,
                                   (long long) began.tv_sec * 1000000000LL + began.tv_nsec, failure, &err)
      < 0)
    {
      husk_warn ("%s", err->msg);
      husk_error_free (&err);
    }
  husk_error_free (&failure);
}

static void
handle_signals (struct run_state *run)
{
  struct monitor *monitor = run->monitor;
  struct signalfd_siginfo info;

  while (read (monitor->signal_fd, &info, sizeof info) == sizeof info)
    switch (info.ssi_signo)
      {
      case SIGUSR1:
        reopen_log (monitor);
        break;
      case SIGTERM:
      case SIGINT:
        kill (monitor->container_pid, (int) info.ssi_signo);
        break;
      default:
        break;
      }
  check_exited (run);
}

static void
close_stream (struct monitor *monitor, enum monitor_stream stream)
{
  struct timespec now;

  clock_gettime (CLOCK_REALTIME, &now);
  log_stream_finish (&monitor->streams[stream], &monitor->log.sink, &now);
  husk_closep (&monitor->output_fd[stream]);
}

/* One read into the log; false when nothing more came (for now). */
static bool
read_output (struct run_state *run, enum monitor_stream stream)
{
  struct monitor *monitor = run->monitor;
  ssize_t n = read (monitor->output_fd[stream], run->read_buf, sizeof run->read_buf);
  struct timespec now;

  if (n > 0)
    {
      clock_gettime (CLOCK_REALTIME, &now);
      log_stream_feed (&monitor->streams[stream], &monitor->log.sink, &now, run->read_buf, (size_t) n);
      return true;
    }
  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return false;
  /* EOF, or EIO from a pty master once no one holds the terminal. */
  close_stream (monitor, stream);
  return false;
}

static void
stop_stdin (struct run_state *run)
{
  husk_closep (&run->in.source_fd);
  husk_closep (&run->monitor->stdin_target_fd);
  run->in.len = run->in.off = 0;
}

static void
read_stdin (struct run_state *run)
{
  ssize_t n = read (run->in.source_fd, run->in.buf, sizeof run->in.buf);

  if (n > 0)
    {
      run->in.len = (size_t) n;
      run->in.off = 0;
    }
  else if (n == 0 || (errno != EAGAIN && errno != EINTR))
    /* StdinOnce: the container sees EOF when its one writer is done. */
    stop_stdin (run);
}

static void
write_stdin (struct run_state *run)
{
  ssize_t n = write (run->monitor->stdin_target_fd, run->in.buf + run->in.off, run->in.len - run->in.off);

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n < 0)
    {
      /* The container closed its stdin: nothing more can go in. */
      stop_stdin (run);
      return;
    }
  run->in.off += (size_t) n;
  if (run->in.off == run->in.len)
    run->in.len = run->in.off = 0;
}

enum
{
  POLL_SIGNALS,
  POLL_STDOUT,
  POLL_STDERR,
  POLL_STDIN_SOURCE,
  POLL_STDIN_TARGET,
  POLL_N,
};

static int
poll_once (struct run_state *run, struct husk_error **err)
{
  struct monitor *monitor = run->monitor;
  bool stdin_pending = run->in.len > 0;
  struct pollfd fds[POLL_N] = {
    [POLL_SIGNALS] = { .fd = monitor->signal_fd, .events = POLLIN },
    [POLL_STDOUT] = { .fd = monitor->output_fd[MONITOR_STDOUT], .events = POLLIN },
    [POLL_STDERR] = { .fd = monitor->output_fd[MONITOR_STDERR], .events = POLLIN },
    [POLL_STDIN_SOURCE] = { .fd = stdin_pending ? -1 : run->in.source_fd, .events = POLLIN },
    [POLL_STDIN_TARGET] = { .fd = stdin_pending ? monitor->stdin_target_fd : -1, .events = POLLOUT },
  };

  if (poll (fds, POLL_N, -1) < 0)
    return errno == EINTR ? 0 : husk_error_make (err, errno, "poll the container's stdio");
  for (int i = 0; i < MONITOR_N_STREAMS; i++)
    if (fds[POLL_STDOUT + i].revents)
      read_output (run, (enum monitor_stream) i);
  if (fds[POLL_STDIN_SOURCE].revents)
    read_stdin (run);
  if (fds[POLL_STDIN_TARGET].revents)
    write_stdin (run);
  if (fds[POLL_SIGNALS].revents)
    handle_signals (run);
  return 0;
}

/* Everything the container wrote before it exited goes to the log before
 * the exit file appears: whoever reads the exit file may read the log. */
static void
drain_outputs (struct run_state *run)
{
  struct monitor *monitor = run->monitor;

  for (int i = 0; i < MONITOR_N_STREAMS; i++)
    {
      for (int reads = 0; monitor->output_fd[i] >= 0 && reads < DRAIN_READS_MAX; reads++)
        if (!read_output (run, (enum monitor_stream) i))
          break;
      if (monitor->output_fd[i] >= 0)
        close_stream (monitor, (enum monitor_stream) i);
    }
}

int
monitor_run (struct monitor *monitor, struct monitor_exit *exit, struct husk_error **err)
{
  cleanup_free struct run_state *run = xcalloc (1, sizeof *run); /* holds the read buffer */

  run->monitor = monitor;
  run->in.source_fd = monitor->stdin_target_fd >= 0 ? monitor->opts->stdin_fd : -1;
  check_exited (run);
  while (!run->exited)
    if (poll_once (run, err) < 0)
      return -1;
  drain_outputs (run);
  stop_stdin (run);
  monitor_exit_from_wait_status (run->wait_status, &run->finished_at, exit);
  if (monitor->oom_events_path)
    exit->oom_killed = monitor_oom_kills (monitor->oom_events_path) > monitor->oom_kills_at_start;
  return 0;
}
