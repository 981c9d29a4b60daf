/* The run phase: one poll loop, no threads.  Container output goes to the
 * CRI log as it comes, and a copy to each attach client; --stdin-fd and
 * what attach clients send are copied into the container's stdin,
 * signals arrive on a signalfd (SIGCHLD: reap; SIGUSR1: reopen the log;
 * SIGTERM/SIGINT: passed on to the container's init). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "cri/monitor/monitor.h"

#define READ_CHUNK ATTACH_DATA_MAX
/* After init exited: what is left in a pipe is at most its capacity, but a
 * process outside a PID namespace may still be writing.  Bounded. */
#define DRAIN_READS_MAX 64
/* Stdin waiting for the container to read it: past this, the monitor
 * stops reading its sources (--stdin-fd, attach clients) until it drains. */
#define STDIN_QUEUE_MAX (1024 * 1024)

/* What goes to the container's stdin, from --stdin-fd and attach clients,
 * in the order it came. */
struct stdin_queue
{
  int source_fd; /* --stdin-fd */
  char *buf;
  size_t len, off;
  bool close_when_empty; /* EOF: close the stdin once the rest is in */
};

struct run_state
{
  struct monitor *monitor;
  struct stdin_queue in;
  char read_buf[1 + READ_CHUNK]; /* + 1: room for an attach message's type */
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
  struct monitor *monitor = run->monitor;

  if (!run->exited
      && monitor_reap (monitor->wait_pid > 0 ? monitor->wait_pid : monitor->container_pid, &run->wait_status))
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
        /* Under --start-and-wait the pid is the whole sandbox's. */
        if (monitor->wait_pid <= 0)
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
      attach_broadcast (&monitor->attach, stream == MONITOR_STDOUT ? ATTACH_OUT_STDOUT : ATTACH_OUT_STDERR,
                        run->read_buf, (size_t) n);
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
  free (run->in.buf);
  run->in.buf = NULL;
  run->in.len = run->in.off = 0;
  run->in.close_when_empty = false;
}

static bool
stdin_open (const struct run_state *run)
{
  return run->monitor->stdin_target_fd >= 0 && !run->in.close_when_empty;
}

static bool
stdin_has_room (const struct run_state *run)
{
  return run->in.len - run->in.off < STDIN_QUEUE_MAX;
}

static void
queue_stdin (struct run_state *run, const char *data, size_t len)
{
  struct stdin_queue *in = &run->in;

  if (!stdin_open (run) || len == 0)
    return;
  /* What was written goes once it is the larger part: the buffer stays
   * near STDIN_QUEUE_MAX however long stdin keeps coming. */
  if (in->off > 0 && in->off >= in->len - in->off)
    {
      memmove (in->buf, in->buf + in->off, in->len - in->off);
      in->len -= in->off;
      in->off = 0;
    }
  in->buf = xrealloc (in->buf, in->len + len);
  memcpy (in->buf + in->len, data, len);
  in->len += len;
}

/* EOF for the container: a pipe closes once the queue is written; a
 * terminal gets ^D, the way a person at it ends input. */
static void
end_stdin (struct run_state *run)
{
  if (run->monitor->opts->terminal)
    queue_stdin (run, "\x04", 1);
  else if (run->monitor->stdin_target_fd >= 0)
    run->in.close_when_empty = true;
  if (run->in.close_when_empty && run->in.off == run->in.len)
    stop_stdin (run);
}

static void
read_stdin (struct run_state *run)
{
  ssize_t n = read (run->in.source_fd, run->read_buf, sizeof run->read_buf);

  if (n > 0)
    queue_stdin (run, run->read_buf, (size_t) n);
  else if (n == 0 || (errno != EAGAIN && errno != EINTR))
    {
      /* StdinOnce: the container sees EOF when its one writer is done. */
      husk_closep (&run->in.source_fd);
      if (run->monitor->stdin_target_fd >= 0)
        run->in.close_when_empty = true;
      if (run->in.off == run->in.len)
        stop_stdin (run);
    }
}

static void
write_stdin (struct run_state *run)
{
  struct stdin_queue *in = &run->in;
  ssize_t n = write (run->monitor->stdin_target_fd, in->buf + in->off, in->len - in->off);

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return;
  if (n < 0)
    {
      /* The container closed its stdin: nothing more can go in. */
      stop_stdin (run);
      return;
    }
  in->off += (size_t) n;
  if (in->off == in->len)
    {
      in->len = in->off = 0;
      if (in->close_when_empty)
        stop_stdin (run);
    }
}

/* The terminal's size: on the pty master, which we hold as stdout (and as
 * stdin's target once stdout hit EOF, if stdin is still open). */
static void
resize_terminal (struct run_state *run, unsigned rows, unsigned cols)
{
  struct monitor *monitor = run->monitor;
  int master = monitor->output_fd[MONITOR_STDOUT] >= 0 ? monitor->output_fd[MONITOR_STDOUT]
                                                       : monitor->stdin_target_fd;
  struct winsize size = { .ws_row = (unsigned short) rows, .ws_col = (unsigned short) cols };

  if (monitor->opts->terminal && master >= 0 && ioctl (master, TIOCSWINSZ, &size) < 0)
    husk_warn ("resize the terminal to %ux%u: %s", rows, cols, strerror (errno));
}

static void
serve_attach_client (struct run_state *run, size_t index)
{
  struct attach_server *server = &run->monitor->attach;
  ssize_t n = attach_receive (server, index, run->read_buf, sizeof run->read_buf);
  struct attach_request req;

  if (n <= 0)
    return;
  if (attach_decode_request (run->read_buf, (size_t) n, &req) < 0)
    {
      husk_warn ("attach client sent a message of type %d, length %zd: dropped", run->read_buf[0], n);
      attach_drop_client (server, index);
      return;
    }
  if (req.type == ATTACH_IN_STDIN)
    queue_stdin (run, req.data, req.len);
  else if (req.type == ATTACH_IN_CLOSE_STDIN)
    end_stdin (run);
  else
    resize_terminal (run, req.rows, req.cols);
}

enum
{
  POLL_SIGNALS,
  POLL_STDOUT,
  POLL_STDERR,
  POLL_STDIN_SOURCE,
  POLL_STDIN_TARGET,
  POLL_ATTACH_LISTEN,
  POLL_CLIENTS, /* then one per attach client */
};

static void
handle_clients (struct run_state *run, const struct pollfd *fds, size_t n_clients)
{
  struct attach_server *server = &run->monitor->attach;

  /* From the end: serving one may drop it, moving the last into its place. */
  for (size_t i = n_clients; i-- > 0;)
    {
      if ((fds[i].revents & POLLOUT) && i < server->n_clients && server->clients[i].fd == fds[i].fd)
        attach_flush (server, i);
      if ((fds[i].revents & ~POLLOUT) && i < server->n_clients && server->clients[i].fd == fds[i].fd)
        serve_attach_client (run, i);
    }
}

static int
poll_once (struct run_state *run, struct husk_error **err)
{
  struct monitor *monitor = run->monitor;
  struct attach_server *server = &monitor->attach;
  bool stdin_pending = run->in.off < run->in.len;
  bool stdin_room = stdin_has_room (run);
  /* Drops the clients that stalled too long first: what is left may hold
   * the output back, for at most TIMEOUT_MS more. */
  int timeout_ms = attach_expire (server);
  bool held = attach_backpressure (server);
  size_t n_clients = server->n_clients;
  cleanup_free struct pollfd *fds = xcalloc (POLL_CLIENTS + n_clients, sizeof *fds);

  fds[POLL_SIGNALS] = (struct pollfd){ .fd = monitor->signal_fd, .events = POLLIN };
  fds[POLL_STDOUT]
      = (struct pollfd){ .fd = held ? -1 : monitor->output_fd[MONITOR_STDOUT], .events = POLLIN };
  fds[POLL_STDERR]
      = (struct pollfd){ .fd = held ? -1 : monitor->output_fd[MONITOR_STDERR], .events = POLLIN };
  fds[POLL_STDIN_SOURCE] = (struct pollfd){ .fd = stdin_room ? run->in.source_fd : -1, .events = POLLIN };
  fds[POLL_STDIN_TARGET]
      = (struct pollfd){ .fd = stdin_pending ? monitor->stdin_target_fd : -1, .events = POLLOUT };
  fds[POLL_ATTACH_LISTEN] = (struct pollfd){ .fd = server->listen_fd, .events = POLLIN };
  /* A full queue holds clients back (their sends wait), never the rest. */
  for (size_t i = 0; i < n_clients; i++)
    {
      short events = (short) ((stdin_room ? POLLIN : 0) | (attach_client_waiting (server, i) ? POLLOUT : 0));
      fds[POLL_CLIENTS + i] = (struct pollfd){ .fd = events ? server->clients[i].fd : -1, .events = events };
    }

  if (poll (fds, POLL_CLIENTS + n_clients, timeout_ms) < 0)
    return errno == EINTR ? 0 : husk_error_make (err, errno, "poll the container's stdio");
  for (int i = 0; i < MONITOR_N_STREAMS; i++)
    if (fds[POLL_STDOUT + i].revents)
      read_output (run, (enum monitor_stream) i);
  handle_clients (run, fds + POLL_CLIENTS, n_clients);
  if (fds[POLL_STDIN_SOURCE].revents)
    read_stdin (run);
  if (fds[POLL_STDIN_TARGET].revents)
    write_stdin (run);
  if (fds[POLL_ATTACH_LISTEN].revents)
    attach_accept (server);
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
  if (monitor->wait_pid > 0)
    run->wait_status = monitor_runtime_wait_status (monitor, run->wait_status);
  monitor_exit_from_wait_status (run->wait_status, &run->finished_at, exit);
  if (monitor->oom_events_path)
    exit->oom_killed = monitor_oom_kills (monitor->oom_events_path) > monitor->oom_kills_at_start;
  /* The kernel's OOM killer took the sandbox: `wait` had no status to
   * give, and the container died of that SIGKILL.  A status it gave (a
   * container that outlived a kill of some other process of the sandbox)
   * stays. */
  if (exit->oom_killed && monitor->wait_pid > 0 && monitor->wait_unknown)
    {
      exit->signal = SIGKILL;
      exit->exit_code = 128 + SIGKILL;
    }
  return 0;
}
