/* OCI hooks: each hook is forked and exec'd with the container state on its
 * stdin, waited for with a pidfd so a timeout needs no busy loop, and
 * judged by its exit status.  Its stdout and stderr both go to our stderr so
 * the runtime's stdout stays clean for the JSON it prints. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/hooks.h"

/* What one run of a hook needs, prepared before fork so the child only
 * calls async-signal-safe functions. */
struct hook_run
{
  const struct spec_hook *hook;
  char *const *argv;
  char *const *envp;
  int stdin_read, exec_error_write;
};

static void
make_fd_stdio (int fd, int target)
{
  if (fd == target)
    fcntl (fd, F_SETFD, 0);
  else
    dup2 (fd, target);
}

static void
reset_signals (void)
{
  struct sigaction default_action = { .sa_handler = SIG_DFL };
  sigset_t none;

  sigemptyset (&default_action.sa_mask);
  for (int sig = 1; sig < NSIG; sig++)
    sigaction (sig, &default_action, NULL);
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
}

/* Every fd but stdio is closed by exec, the exec-error pipe included, so
 * the parent reads EOF on it exactly when exec succeeded. */
static void
mark_other_fds_cloexec (void)
{
  struct rlimit limit;

  if (syscall (SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
    return;
  if (getrlimit (RLIMIT_NOFILE, &limit) < 0 || limit.rlim_cur > 65536)
    limit.rlim_cur = 65536;
  for (int fd = 3; fd < (int) limit.rlim_cur; fd++)
    fcntl (fd, F_SETFD, FD_CLOEXEC);
}

static __attribute__ ((noreturn)) void
hook_child (const struct hook_run *run)
{
  int exec_errno;

  /* Its own process group, so a timeout kills what the hook started too. */
  setpgid (0, 0);
  make_fd_stdio (run->stdin_read, 0);
  dup2 (2, 1);
  reset_signals ();
  mark_other_fds_cloexec ();
  execve (run->hook->path, run->argv, run->envp);
  exec_errno = errno;
  if (write (run->exec_error_write, &exec_errno, sizeof exec_errno) < 0)
    _exit (126);
  _exit (127);
}

/* Writes as much of the state as the pipe takes without blocking; returns
 * true once nothing more is to be written (all done, or the hook closed its
 * stdin, which is its right). */
static bool
feed_stdin (int fd, const char *state, size_t len, size_t *written)
{
  while (*written < len)
    {
      ssize_t n = write (fd, state + *written, len - *written);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        return false;
      if (n < 0)
        return true;
      *written += (size_t) n;
    }
  return true;
}

/* A hook that exits before reading everything turns our write into EPIPE;
 * SIGPIPE is blocked in this thread meanwhile, and one it raised is taken
 * back so it never reaches the process. */
struct sigpipe_guard
{
  sigset_t saved_mask;
  bool was_pending;
};

static void
sigpipe_block (struct sigpipe_guard *guard)
{
  sigset_t sigpipe, pending;

  sigemptyset (&sigpipe);
  sigaddset (&sigpipe, SIGPIPE);
  pthread_sigmask (SIG_BLOCK, &sigpipe, &guard->saved_mask);
  sigpending (&pending);
  guard->was_pending = sigismember (&pending, SIGPIPE);
}

static void
sigpipe_restore (struct sigpipe_guard *guard)
{
  sigset_t sigpipe, pending;
  struct timespec no_wait = { 0, 0 };

  sigemptyset (&sigpipe);
  sigaddset (&sigpipe, SIGPIPE);
  sigpending (&pending);
  if (!guard->was_pending && sigismember (&pending, SIGPIPE))
    while (sigtimedwait (&sigpipe, NULL, &no_wait) < 0 && errno == EINTR)
      ;
  pthread_sigmask (SIG_SETMASK, &guard->saved_mask, NULL);
}

/* Without a pidfd (kernels before 5.3, valgrind) the exit is checked for
 * on this tick instead. */
#define NO_PIDFD_TICK_MS 10

struct hook_wait
{
  pid_t pid;
  int pidfd;       /* -1: none, poll on the tick */
  int stdin_write; /* -1 once everything is written */
  const char *state;
  size_t state_len, written;
  int timeout; /* seconds, 0 = none */
  bool reaped;
  int status;
};

static bool
reaped_without_pidfd (struct hook_wait *wait)
{
  if (wait->pidfd < 0 && waitpid (wait->pid, &wait->status, WNOHANG) == wait->pid)
    wait->reaped = true;
  return wait->reaped;
}

/* Waits until the hook exits, feeding its stdin meanwhile.  Returns 0 when
 * it exited, 1 when the timeout passed first, -1 on a poll error. */
static int
wait_for_exit (struct hook_wait *wait)
{
  struct timespec deadline;

  clock_gettime (CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += wait->timeout;
  for (;;)
    {
      struct pollfd fds[2]
          = { { .fd = wait->pidfd, .events = POLLIN }, { .fd = wait->stdin_write, .events = POLLOUT } };
      int timeout_ms = wait->timeout > 0 ? husk_ms_until (&deadline) : -1;
      int n;

      if (wait->stdin_write >= 0
          && feed_stdin (wait->stdin_write, wait->state, wait->state_len, &wait->written))
        husk_closep (&wait->stdin_write);
      fds[1].fd = wait->stdin_write;
      if (reaped_without_pidfd (wait))
        return 0;
      if (wait->pidfd < 0 && (timeout_ms < 0 || timeout_ms > NO_PIDFD_TICK_MS))
        timeout_ms = NO_PIDFD_TICK_MS;
      n = poll (fds, 2, timeout_ms);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return -1;
      if (fds[0].revents)
        return 0;
      if (n == 0 && wait->timeout > 0 && husk_ms_until (&deadline) == 0)
        return 1;
    }
}

static int
describe_status (int status, int exec_errno, struct husk_error **err)
{
  if (exec_errno != 0)
    return husk_error_make (err, exec_errno, "exec");
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    return 0;
  if (WIFEXITED (status))
    return husk_error_make (err, 0, "exited with status %d", WEXITSTATUS (status));
  if (WIFSIGNALED (status))
    return husk_error_make (err, 0, "killed by signal %d", WTERMSIG (status));
  return husk_error_make (err, 0, "ended with wait status 0x%x", status);
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

static void
kill_hook (pid_t pid)
{
  if (kill (-pid, SIGKILL) < 0)
    kill (pid, SIGKILL);
}

/* Parent side: feed, wait, reap, judge. */
static int
supervise_hook (pid_t pid, int stdin_write, int exec_error_read, const struct hook_run *run,
                const char *state, struct husk_error **err)
{
  cleanup_close int pidfd = (int) syscall (SYS_pidfd_open, pid, 0);
  struct hook_wait wait = { .pid = pid,
                            .pidfd = pidfd,
                            .stdin_write = stdin_write,
                            .state = state,
                            .state_len = strlen (state),
                            .timeout = run->hook->timeout };
  struct sigpipe_guard guard;
  int waited, wait_errno;

  sigpipe_block (&guard);
  waited = wait_for_exit (&wait);
  wait_errno = errno;
  sigpipe_restore (&guard);
  husk_closep (&wait.stdin_write);
  if (waited != 0)
    kill_hook (pid);
  while (!wait.reaped && waitpid (pid, &wait.status, 0) < 0 && errno == EINTR)
    ;
  if (waited == 1)
    return husk_error_make (err, 0, "timed out after %ds", run->hook->timeout);
  if (waited < 0)
    return husk_error_make (err, wait_errno, "wait");
  return describe_status (wait.status, read_exec_errno (exec_error_read), err);
}

static int
run_one_hook (const struct spec_hook *hook, const char *state, struct husk_error **err)
{
  char *const default_argv[] = { hook->path, NULL };
  char *const empty_env[] = { NULL };
  struct hook_run run = {
    .hook = hook,
    .argv = hook->args && hook->args[0] ? hook->args : default_argv,
    .envp = hook->env ? hook->env : empty_env,
  };
  cleanup_close int stdin_read = -1, stdin_write = -1;
  cleanup_close int exec_error_read = -1, exec_error_write = -1;
  int stdin_pipe[2], exec_error_pipe[2];
  pid_t pid;

  if (pipe2 (stdin_pipe, O_CLOEXEC) < 0)
    return husk_error_make (err, errno, "pipe");
  stdin_read = stdin_pipe[0];
  stdin_write = stdin_pipe[1];
  if (pipe2 (exec_error_pipe, O_CLOEXEC) < 0)
    return husk_error_make (err, errno, "pipe");
  exec_error_read = exec_error_pipe[0];
  exec_error_write = exec_error_pipe[1];
  if (fcntl (stdin_write, F_SETFL, O_NONBLOCK) < 0)
    return husk_error_make (err, errno, "set the hook's stdin pipe non-blocking");
  run.stdin_read = stdin_read;
  run.exec_error_write = exec_error_write;

  pid = fork ();
  if (pid < 0)
    return husk_error_make (err, errno, "fork");
  if (pid == 0)
    hook_child (&run);
  /* Also here, so kill (-pid) works even before the child ran. */
  setpgid (pid, pid);
  husk_closep (&stdin_read);
  husk_closep (&exec_error_write);
  return supervise_hook (pid, steal_fd (&stdin_write), exec_error_read, &run, state, err);
}

int
hooks_run (const struct spec_hooks *hooks, enum spec_hook_kind kind, const char *state_json,
           struct husk_error **err)
{
  /* The runtime spec: after the process started, a failing hook is only
   * a warning, so the hooks after it still run. */
  bool keep_going = kind == SPEC_HOOK_POSTSTART || kind == SPEC_HOOK_POSTSTOP;
  cleanup_free char *failures = NULL;

  if (hooks == NULL || (unsigned) kind >= SPEC_HOOK_KIND_COUNT)
    return 0;
  for (size_t i = 0; i < hooks->count[kind]; i++)
    {
      const struct spec_hook *hook = &hooks->list[kind][i];
      struct husk_error *hook_err = NULL;
      char *joined;

      if (run_one_hook (hook, state_json ? state_json : "", &hook_err) == 0)
        continue;
      husk_error_wrap (&hook_err, "%s hook #%zu (`%s`)", spec_hook_kind_name (kind), i, hook->path);
      if (!keep_going)
        {
          if (err)
            *err = hook_err;
          else
            husk_error_free (&hook_err);
          return -1;
        }
      joined = failures ? xasprintf ("%s; %s", failures, hook_err->msg) : xstrdup (hook_err->msg);
      free (failures);
      failures = joined;
      husk_error_free (&hook_err);
    }
  if (failures)
    return husk_error_make (err, 0, "%s", failures);
  return 0;
}
