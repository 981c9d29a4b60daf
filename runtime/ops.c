/* start, run, kill, delete and ps on an existing container. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/container.h"
#include "runtime/create.h"
#include "runtime/hooks.h"
#include "runtime/init.h"

static void
state_cleanup (struct container_state **state)
{
  state_free (*state);
  *state = NULL;
}
#define cleanup_state __attribute__ ((cleanup (state_cleanup)))

static void
spec_cleanup (struct spec **spec)
{
  spec_free (*spec);
  *spec = NULL;
}
#define cleanup_spec __attribute__ ((cleanup (spec_cleanup)))

int
container_load_spec (const struct runtime_ctx *ctx, const char *id, struct spec **out,
                     struct husk_error **err)
{
  cleanup_state struct container_state *state = NULL;
  cleanup_free char *path = NULL;
  cleanup_free char *text = NULL;
  size_t len = 0;

  if (state_load (ctx->root, id, &state, err) < 0)
    return -1;
  path = state_config_path (state->state_dir);
  if (husk_read_file (path, &text, &len, err) < 0)
    return -1;
  return spec_parse (text, len, path, state->bundle, out, err);
}

/* Hooks that run after create (poststart, poststop) read the config saved
 * at create time; a container without such hooks skips the parse. */
static int
run_saved_hooks (const struct container_state *state, enum spec_hook_kind kind, enum container_status status,
                 struct husk_error **err)
{
  cleanup_free char *path = state_config_path (state->state_dir);
  cleanup_free char *text = NULL;
  cleanup_free char *json = NULL;
  cleanup_spec struct spec *spec = NULL;
  size_t len = 0;

  if (husk_read_file (path, &text, &len, err) < 0)
    return -1;
  if (strstr (text, "\"hooks\"") == NULL)
    return 0;
  if (spec_parse (text, len, path, state->bundle, &spec, err) < 0)
    return -1;
  if (spec->hooks.count[kind] == 0)
    return 0;
  json = state_oci_json (state, status, false);
  return hooks_run (&spec->hooks, kind, json, err);
}

/* Writes the byte the init waits for on the exec fifo, then waits until the
 * init has run its startContainer hooks and called execve: the init holds
 * the fifo open close-on-exec, so our reading end sees POLLHUP exactly when
 * it has exec'd (or died).  poststart hooks then run after the process
 * started, as the runtime spec orders them. */
static int
release_init (const char *fifo, const char *id, struct husk_error **err)
{
  cleanup_close int wfd = open (fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  cleanup_close int rfd = -1;

  if (wfd < 0)
    return husk_error_make (err, errno, "start container `%s`: open exec fifo", id);
  rfd = open (fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (rfd < 0)
    return husk_error_make (err, errno, "start container `%s`: open exec fifo", id);
  if (write (wfd, "0", 1) != 1)
    return husk_error_make (err, errno, "start container `%s`: write exec fifo", id);
  close (steal_fd (&wfd));
  unlink (fifo);
  for (int spins = 0; spins < 200000; spins++)
    {
      struct pollfd pfd = { .fd = rfd, .events = POLLIN };
      struct timespec pause = { 0, 50 * 1000 };

      if (poll (&pfd, 1, 10000) <= 0 || (pfd.revents & (POLLHUP | POLLERR)))
        return 0;
      /* POLLIN alone: our byte is still unread; the init is about to. */
      nanosleep (&pause, NULL);
    }
  return 0;
}

int
container_start (const struct runtime_ctx *ctx, const char *id, struct husk_error **err)
{
  cleanup_state struct container_state *state = NULL;
  cleanup_free char *fifo = NULL;
  enum container_status status;

  if (state_load (ctx->root, id, &state, err) < 0)
    return -1;
  status = state_status (state);
  if (status != STATUS_CREATED)
    return husk_error_make (err, 0, "cannot start container `%s`: it is %s, not created", id,
                            container_status_name (status));
  fifo = state_fifo_path (state->state_dir);
  if (release_init (fifo, id, err) < 0)
    return -1;
  {
    /* The runtime spec: a failing poststart hook is a warning; the
     * container keeps running. */
    struct husk_error *hook_err = NULL;
    if (run_saved_hooks (state, SPEC_HOOK_POSTSTART, STATUS_RUNNING, &hook_err) < 0)
      {
        husk_warn ("%s", hook_err->msg);
        husk_error_free (&hook_err);
      }
  }
  return 0;
}

int
container_parse_signal (const char *name, int *sig, struct husk_error **err)
{
  long long number;
  const char *bare = husk_str_has_prefix (name, "SIG") ? name + 3 : name;

  if (husk_parse_int64 (name, 1, NSIG - 1, &number) == 0)
    {
      *sig = (int) number;
      return 0;
    }
  for (int s = 1; s < NSIG; s++)
    {
      const char *abbrev = sigabbrev_np (s);
      if (abbrev && strcasecmp (abbrev, bare) == 0)
        {
          *sig = s;
          return 0;
        }
    }
  if (strncasecmp (bare, "RTMIN+", 6) == 0
      && husk_parse_int64 (bare + 6, 0, SIGRTMAX - SIGRTMIN, &number) == 0)
    {
      *sig = SIGRTMIN + (int) number;
      return 0;
    }
  return husk_error_make (err, 0, "unknown signal `%s`", name);
}

/* A pidfd for the init, checked against its recorded start time so a
 * recycled pid is never signalled. */
static int
open_init (const struct container_state *state)
{
  int fd;

  if (!state_init_alive (state))
    return -1;
  fd = (int) syscall (SYS_pidfd_open, state->pid, 0);
  if (fd >= 0 && !state_init_alive (state))
    {
      close (fd);
      return -1;
    }
  return fd;
}

static int
signal_container (const struct container_state *state, int sig, bool all, struct husk_error **err)
{
  cleanup_close int pidfd = -1;

  if (all && state->cgroup_path && access (state->cgroup_path, F_OK) == 0)
    return cgroup_kill_all (state->cgroup_path, sig, err);
  pidfd = open_init (state);
  if (pidfd < 0)
    return husk_error_make (err, 0, "container `%s` is not running", state->id);
  if (syscall (SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0)
    return husk_error_make (err, errno, "kill container `%s`", state->id);
  return 0;
}

int
container_kill (const struct runtime_ctx *ctx, const char *id, int sig, bool all, struct husk_error **err)
{
  cleanup_state struct container_state *state = NULL;
  enum container_status status;

  if (state_load (ctx->root, id, &state, err) < 0)
    return -1;
  status = state_status (state);
  if (status == STATUS_STOPPED && !all)
    return husk_error_make (err, 0, "container `%s` is not running", id);
  if (status == STATUS_STOPPED)
    return 0;
  return signal_container (state, sig, all, err);
}

/* Waits up to TIMEOUT_MS for the init to go away (it may not be our child). */
static bool
wait_init_gone (const struct container_state *state, int timeout_ms)
{
  cleanup_close int pidfd = open_init (state);
  struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

  if (pidfd < 0)
    return true;
  if (poll (&pfd, 1, timeout_ms) <= 0)
    return false;
  /* Reap it if it is ours (run, tests); otherwise its parent does. */
  waitpid (state->pid, NULL, WNOHANG);
  return true;
}

int
container_delete (const struct runtime_ctx *ctx, const char *id, bool force, struct husk_error **err)
{
  cleanup_state struct container_state *state = NULL;
  enum container_status status;
  struct husk_error *ignored = NULL;

  if (state_load (ctx->root, id, &state, err) < 0)
    {
      /* A dir without state.json is a create that died half way. */
      if (force && state_validate_id (id, NULL) == 0)
        {
          cleanup_free char *dir = state_dir_path (ctx->root, id);
          if (access (dir, F_OK) == 0)
            {
              husk_error_free (err);
              return husk_rm_rf (dir, err);
            }
        }
      return -1;
    }
  status = state_status (state);
  if ((status == STATUS_RUNNING || status == STATUS_PAUSED) && !force)
    return husk_error_make (err, 0, "cannot delete container `%s`: it is %s (stop it first or use --force)",
                            id, container_status_name (status));
  if (status != STATUS_STOPPED)
    {
      if (signal_container (state, SIGKILL, true, &ignored) < 0)
        husk_error_free (&ignored);
      if (!wait_init_gone (state, 10000))
        return husk_error_make (err, 0, "delete container `%s`: init %d did not exit after SIGKILL", id,
                                (int) state->pid);
    }
  /* A cgroup the kernel lets go of holds no process: nothing to kill (a
   * `run` whose init has exited; 33 reads and probes of cgroup files
   * saved on a v1 host). */
  if (state->cgroup_path && !cgroup_remove_if_empty (state->cgroup_path))
    {
      if (cgroup_kill_all (state->cgroup_path, SIGKILL, &ignored) < 0)
        husk_error_free (&ignored);
      if (cgroup_destroy (state->cgroup_path, err) < 0)
        return -1;
    }
  if (run_saved_hooks (state, SPEC_HOOK_POSTSTOP, STATUS_STOPPED, &ignored) < 0)
    {
      /* The runtime spec: a poststop failure is logged, deletion goes on. */
      husk_warn ("%s", ignored->msg);
      husk_error_free (&ignored);
    }
  return husk_rm_rf (state->state_dir, err);
}

int
container_pids (const struct runtime_ctx *ctx, const char *id, pid_t **pids, size_t *n,
                struct husk_error **err)
{
  cleanup_state struct container_state *state = NULL;

  if (state_load (ctx->root, id, &state, err) < 0)
    return -1;
  if (state_status (state) == STATUS_STOPPED)
    {
      *pids = NULL;
      *n = 0;
      return 0;
    }
  if (state->cgroup_path && access (state->cgroup_path, F_OK) == 0)
    return cgroup_pids (state->cgroup_path, pids, n, err);
  *pids = xmalloc (sizeof (pid_t));
  (*pids)[0] = state->pid;
  *n = 1;
  return 0;
}

int
container_run (const struct runtime_ctx *ctx, const char *id, const struct create_options *opts, bool detach,
               int *exit_code, struct husk_error **err)
{
  struct create_result result = { .pid = -1, .console_fd = -1 };
  cleanup_close int console = -1;
  cleanup_close int master = -1;
  struct husk_error *ignored = NULL;
  int ret;

  if (!detach)
    foreground_block_signals ();
  if (create_container_job (ctx, id, opts, !detach, true, &result, err) < 0)
    return -1;
  console = result.console_fd;
  if (!result.started && container_start (ctx, id, err) < 0)
    {
      container_delete (ctx, id, true, &ignored);
      husk_error_free (&ignored);
      return -1;
    }
  if (detach)
    {
      *exit_code = 0;
      return 0;
    }
  if (console >= 0 && (master = terminal_receive (console, err)) < 0)
    {
      container_delete (ctx, id, true, &ignored);
      husk_error_free (&ignored);
      return -1;
    }
  ret = foreground_wait (result.pid, master, exit_code, err);
  if (container_delete (ctx, id, true, ret < 0 ? &ignored : err) < 0 && ret == 0)
    ret = -1;
  husk_error_free (&ignored);
  return ret;
}
