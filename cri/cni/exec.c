/* Running one CNI plugin: spawn and execve (no shell) with the config on
 * stdin, stdout and stderr collected through pipes, a deadline after which
 * its process group is killed.  huskd calls this from many threads, so
 * everything the child needs is built before the spawn and the child only
 * makes async-signal-safe calls until execve (husk/spawn.h: it shares
 * huskd's memory until then). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cri/cni/internal.h"
#include "husk/cleanup.h"
#include "husk/spawn.h"
#include "husk/util.h"

/* What a plugin may print: results are small, logs are kept for errors. */
#define MAX_STDOUT (4 << 20)
#define MAX_STDERR (64 << 10)
/* Without a pidfd the exit is checked on this tick. */
#define NO_PIDFD_TICK_MS 10

enum pipe_end
{
  PIPE_STDIN,
  PIPE_STDOUT,
  PIPE_STDERR,
  PIPE_EXEC_ERROR, /* the child's errno when execve failed; EOF when it worked */
  PIPE_COUNT,
};

/* Both ends of each pipe; the child's ends are never fds 0-2, so its dup2
 * onto stdio cannot clobber one it still needs. */
struct plugin_pipes
{
  int parent[PIPE_COUNT], child[PIPE_COUNT];
};

static void
pipes_close (struct plugin_pipes *pipes)
{
  for (int i = 0; i < PIPE_COUNT; i++)
    {
      husk_closep (&pipes->parent[i]);
      husk_closep (&pipes->child[i]);
    }
}

static int
fd_above_stdio (int fd)
{
  int moved;

  if (fd > 2)
    return fd;
  moved = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  close (fd);
  return moved;
}

static int
pipe_open (struct plugin_pipes *pipes, enum pipe_end end)
{
  bool child_reads = end == PIPE_STDIN;
  int fds[2];

  if (pipe2 (fds, O_CLOEXEC) < 0)
    return -1;
  pipes->child[end] = fd_above_stdio (fds[child_reads ? 0 : 1]);
  pipes->parent[end] = fd_above_stdio (fds[child_reads ? 1 : 0]);
  if (pipes->child[end] < 0 || pipes->parent[end] < 0)
    return -1;
  return fcntl (pipes->parent[end], F_SETFL, O_NONBLOCK);
}

static int
pipes_open (struct plugin_pipes *pipes, struct husk_error **err)
{
  for (int i = 0; i < PIPE_COUNT; i++)
    pipes->parent[i] = pipes->child[i] = -1;
  for (int i = 0; i < PIPE_COUNT; i++)
    if (pipe_open (pipes, (enum pipe_end) i) < 0)
      {
        pipes_close (pipes);
        return husk_error_make (err, errno, "set up the pipes of a CNI plugin");
      }
  return 0;
}

static void
reset_signals (const sigset_t *mask)
{
  struct sigaction default_action = { .sa_handler = SIG_DFL };

  sigemptyset (&default_action.sa_mask);
  for (int sig = 1; sig < NSIG; sig++)
    sigaction (sig, &default_action, NULL);
  sigprocmask (SIG_SETMASK, mask, NULL);
}

/* Every fd above stdio closes at exec, the exec-error pipe included. */
static void
mark_fds_cloexec (void)
{
  if (syscall (SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
    return;
  for (int fd = 3; fd < 65536; fd++)
    fcntl (fd, F_SETFD, FD_CLOEXEC);
}

/* What the child needs, all made before the spawn. */
struct plugin_start
{
  const struct cni_exec *exec;
  const struct plugin_pipes *pipes;
  sigset_t empty_mask;
  pid_t parent;
};

HUSK_SPAWN_CHILD static int
plugin_child (void *arg)
{
  const struct plugin_start *start = arg;
  const struct cni_exec *exec = start->exec;
  const struct plugin_pipes *pipes = start->pipes;
  char *const default_argv[] = { (char *) exec->path, NULL };
  char *const *argv = exec->argv ? exec->argv : default_argv;
  int exec_errno;

  /* Its own process group, so a timeout also kills what it started; and
   * it dies with huskd: after a crash huskd's restart runs DEL, which an
   * ADD still running would race. */
  setpgid (0, 0);
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  if (getppid () != start->parent)
    _exit (126);
  if (dup2 (pipes->child[PIPE_STDIN], 0) < 0 || dup2 (pipes->child[PIPE_STDOUT], 1) < 0
      || dup2 (pipes->child[PIPE_STDERR], 2) < 0)
    _exit (126);
  reset_signals (&start->empty_mask);
  mark_fds_cloexec ();
  execve (exec->path, argv, exec->envp);
  exec_errno = errno;
  if (write (pipes->child[PIPE_EXEC_ERROR], &exec_errno, sizeof exec_errno) < 0)
    _exit (126);
  _exit (127);
}

/* husk_spawn blocks every signal until the child has reset the handlers,
 * so none of huskd's handlers runs in the child. */
static pid_t
spawn_plugin (const struct cni_exec *exec, const struct plugin_pipes *pipes)
{
  struct plugin_start start = { .exec = exec, .pipes = pipes, .parent = getpid () };

  sigemptyset (&start.empty_mask);
  return husk_spawn (plugin_child, &start);
}

/* ---------------------------------------------------------------- parent */

struct capture
{
  char *buf;
  size_t len, max;
  bool eof;
};

static void
capture_init (struct capture *capture, size_t max)
{
  capture->buf = xmalloc (4096);
  capture->buf[0] = '\0';
  capture->len = 0;
  capture->max = max;
  capture->eof = false;
}

/* Reads what FD has now; bytes past the limit are read and dropped so the
 * plugin never blocks on a full pipe. */
static void
capture_read (int fd, struct capture *capture)
{
  char chunk[16384];

  while (!capture->eof)
    {
      ssize_t n = read (fd, chunk, sizeof chunk);
      size_t keep;

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return; /* EAGAIN, or an error that poll reports again */
      if (n == 0)
        capture->eof = true;
      keep = capture->len + (size_t) n > capture->max ? capture->max - capture->len : (size_t) n;
      capture->buf = xrealloc (capture->buf, capture->len + keep + 1);
      memcpy (capture->buf + capture->len, chunk, keep);
      capture->len += keep;
      capture->buf[capture->len] = '\0';
    }
}

struct supervision
{
  const struct cni_exec *exec;
  pid_t pid;
  int pidfd; /* -1: poll on the tick */
  int stdin_fd, stdout_fd, stderr_fd;
  size_t written;
  struct capture out, errout;
  bool reaped;
  int status;
  int reap_errno; /* ECHILD: someone else reaped it (SIGCHLD ignored?) */
};

static void
feed_stdin (struct supervision *sup)
{
  while (sup->written < sup->exec->input_len)
    {
      ssize_t n = write (sup->stdin_fd, sup->exec->input + sup->written, sup->exec->input_len - sup->written);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        return;
      if (n < 0)
        break; /* the plugin closed its stdin: its right */
      sup->written += (size_t) n;
    }
  husk_closep (&sup->stdin_fd);
}

static void
reap (struct supervision *sup, int options)
{
  while (!sup->reaped)
    {
      pid_t waited = waitpid (sup->pid, &sup->status, options);

      if (waited < 0 && errno == EINTR)
        continue;
      if (waited < 0)
        sup->reap_errno = errno;
      sup->reaped = waited != 0;
      return;
    }
}

static bool
has_exited (struct supervision *sup, bool pidfd_ready)
{
  if (sup->pidfd >= 0)
    return pidfd_ready;
  reap (sup, WNOHANG);
  return sup->reaped;
}

/* Feeds stdin and reads stdout/stderr until the plugin exits; what it
 * wrote before exiting is in the pipes then, and a child of its own that
 * still holds them is not waited for.  0: exited, 1: timed out, -1: poll
 * failed. */
static int
supervise (struct supervision *sup)
{
  struct timespec deadline;

  clock_gettime (CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += sup->exec->timeout_s;
  for (;;)
    {
      struct pollfd fds[] = {
        { .fd = sup->pidfd, .events = POLLIN },
        { .fd = sup->stdin_fd, .events = POLLOUT },
        { .fd = sup->out.eof ? -1 : sup->stdout_fd, .events = POLLIN },
        { .fd = sup->errout.eof ? -1 : sup->stderr_fd, .events = POLLIN },
      };
      int timeout_ms = husk_ms_until (&deadline);
      int n;

      if (sup->pidfd < 0 && timeout_ms > NO_PIDFD_TICK_MS)
        timeout_ms = NO_PIDFD_TICK_MS;
      n = poll (fds, sizeof fds / sizeof fds[0], timeout_ms);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return -1;
      if (fds[1].revents)
        feed_stdin (sup);
      capture_read (sup->stdout_fd, &sup->out);
      capture_read (sup->stderr_fd, &sup->errout);
      if (has_exited (sup, fds[0].revents != 0))
        return 0;
      if (husk_ms_until (&deadline) == 0)
        return 1;
    }
}

/* A plugin that exits before reading all its stdin turns our write into
 * EPIPE: SIGPIPE stays blocked in this thread meanwhile, and one raised
 * then is taken back so it never reaches the process. */
static int
supervise_without_sigpipe (struct supervision *sup)
{
  sigset_t sigpipe, saved, pending;
  struct timespec no_wait = { 0, 0 };
  bool was_pending;
  int ret, saved_errno;

  sigemptyset (&sigpipe);
  sigaddset (&sigpipe, SIGPIPE);
  pthread_sigmask (SIG_BLOCK, &sigpipe, &saved);
  sigpending (&pending);
  was_pending = sigismember (&pending, SIGPIPE);
  ret = supervise (sup);
  saved_errno = errno;
  sigpending (&pending);
  if (!was_pending && sigismember (&pending, SIGPIPE))
    while (sigtimedwait (&sigpipe, NULL, &no_wait) < 0 && errno == EINTR)
      ;
  pthread_sigmask (SIG_SETMASK, &saved, NULL);
  errno = saved_errno;
  return ret;
}

static int
read_exec_errno (int fd)
{
  int exec_errno = 0;
  ssize_t n;

  do
    n = read (fd, &exec_errno, sizeof exec_errno);
  while (n < 0 && errno == EINTR);
  return n == (ssize_t) sizeof exec_errno ? exec_errno : 0;
}

void
cni_exec_output_clear (struct cni_exec_output *output)
{
  free (output->out);
  free (output->errout);
  memset (output, 0, sizeof *output);
}

static int
finish (struct supervision *sup, int supervised, int exec_error_fd, struct cni_exec_output *output,
        struct husk_error **err)
{
  int wait_errno = errno, exec_errno;

  if (supervised != 0)
    {
      if (kill (-sup->pid, SIGKILL) < 0)
        kill (sup->pid, SIGKILL);
    }
  reap (sup, 0);
  exec_errno = read_exec_errno (exec_error_fd);
  output->out = sup->out.buf;
  output->out_len = sup->out.len;
  output->errout = sup->errout.buf;
  output->err_len = sup->errout.len;
  output->status = sup->status;
  if (supervised == 1)
    return husk_error_make (err, 0, "timed out after %ds", sup->exec->timeout_s);
  if (supervised < 0)
    return husk_error_make (err, wait_errno, "wait for `%s`", sup->exec->path);
  if (sup->reap_errno != 0)
    return husk_error_make (err, sup->reap_errno, "get the exit status of `%s`", sup->exec->path);
  if (exec_errno != 0)
    return husk_error_make (err, exec_errno, "exec `%s`", sup->exec->path);
  return 0;
}

int
cni_exec_run (const struct cni_exec *exec, struct cni_exec_output *output, struct husk_error **err)
{
  struct plugin_pipes pipes;
  struct supervision sup = { .exec = exec };
  cleanup_close int pidfd = -1;
  int supervised, ret;

  memset (output, 0, sizeof *output);
  if (pipes_open (&pipes, err) < 0)
    return -1;
  sup.pid = spawn_plugin (exec, &pipes);
  if (sup.pid < 0)
    {
      pipes_close (&pipes);
      return husk_error_make (err, errno, "spawn `%s`", exec->path);
    }
  /* Also here, so kill (-pid) works even before the child ran. */
  setpgid (sup.pid, sup.pid);
  for (int i = 0; i < PIPE_COUNT; i++)
    husk_closep (&pipes.child[i]);
  pidfd = (int) syscall (SYS_pidfd_open, sup.pid, 0);
  sup.pidfd = pidfd;
  sup.stdin_fd = steal_fd (&pipes.parent[PIPE_STDIN]);
  sup.stdout_fd = pipes.parent[PIPE_STDOUT];
  sup.stderr_fd = pipes.parent[PIPE_STDERR];
  capture_init (&sup.out, MAX_STDOUT);
  capture_init (&sup.errout, MAX_STDERR);
  if (exec->input_len == 0)
    husk_closep (&sup.stdin_fd);
  supervised = supervise_without_sigpipe (&sup);
  husk_closep (&sup.stdin_fd);
  ret = finish (&sup, supervised, pipes.parent[PIPE_EXEC_ERROR], output, err);
  pipes_close (&pipes);
  return ret;
}
