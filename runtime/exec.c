/* `husk exec`: a new process in a running container.  The parent joins the
 * container's pid (and time) namespace, which only applies to children;
 * the forked child joins the rest through the init's pidfd, enters the
 * container's cgroup and then takes the same last steps as the init. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/lsm/apparmor.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/container.h"
#include "runtime/init.h"
#include "runtime/security.h"
#include "runtime/sync.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

static const struct
{
  const char *name;
  int flag;
} ns_files[] = {
  { "user", CLONE_NEWUSER }, { "mnt", CLONE_NEWNS },    { "net", CLONE_NEWNET },
  { "ipc", CLONE_NEWIPC },   { "uts", CLONE_NEWUTS },   { "cgroup", CLONE_NEWCGROUP },
  { "pid", CLONE_NEWPID },   { "time", CLONE_NEWTIME },
};

/* The namespaces in which the init differs from us (joining our own user
 * namespace is an error, so equal ones are left out). */
static int
differing_namespaces (pid_t pid)
{
  int flags = 0;

  for (size_t i = 0; i < sizeof ns_files / sizeof ns_files[0]; i++)
    {
      char theirs[64], ours[64];
      struct stat a, b;

      snprintf (theirs, sizeof theirs, "/proc/%d/ns/%s", (int) pid, ns_files[i].name);
      snprintf (ours, sizeof ours, "/proc/self/ns/%s", ns_files[i].name);
      if (stat (theirs, &a) < 0 || stat (ours, &b) < 0)
        continue;
      if (a.st_ino != b.st_ino || a.st_dev != b.st_dev)
        flags |= ns_files[i].flag;
    }
  return flags;
}

static void
exec_child (int pidfd, int ns_flags, const struct container_state *state, const struct exec_options *opts,
            const struct seccomp_program *seccomp, int sync_fd, int console_fd)
{
  struct husk_error *err = NULL;
  cleanup_free char *executable = NULL;
  const struct spec_process *process = opts->process;

  init_reset_signals ();
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  /* Single-threaded here: the v1 hierarchies through `tasks` (no global
   * lock, see cgroup_enter_v1_self), the unified one through cgroup.procs. */
  if (state->cgroup_path && access (state->cgroup_path, F_OK) == 0
      && (cgroup_enter_v1_self (state->cgroup_path, &err) < 0
          || cgroup_enter_unified (state->cgroup_path, 0, &err) < 0))
    sync_child_fail (sync_fd, err);
  if (setns (pidfd, ns_flags & ~(CLONE_NEWPID | CLONE_NEWTIME)) < 0)
    {
      husk_error_make (&err, errno, "join the namespaces of container `%s`", state->id);
      sync_child_fail (sync_fd, err);
    }
  if ((ns_flags & CLONE_NEWUSER) && (setresgid (0, 0, 0) < 0 || setresuid (0, 0, 0) < 0))
    {
      husk_error_make (&err, errno, "become root in the user namespace of container `%s`", state->id);
      sync_child_fail (sync_fd, err);
    }
  /* The same check as create's, for the same one-line answer. */
  if (security_check_caps (process, &err) < 0)
    sync_child_fail (sync_fd, err);
  if (process->terminal && terminal_setup_child (console_fd, process, &err) < 0)
    sync_child_fail (sync_fd, err);
  if (init_enter_cwd (process, &err) < 0)
    sync_child_fail (sync_fd, err);
  if (init_find_executable (process, &executable, &err) < 0 || security_apply_rlimits (process, &err) < 0
      || security_raise_oom_score_adj (process, &err) < 0
      || apparmor_exec_profile (process->apparmor_profile, &err) < 0)
    sync_child_fail (sync_fd, err);
  init_cloexec_from (3 + opts->preserve_fds);
  prctl (PR_SET_PDEATHSIG, 0);
  init_exec_process (process, executable, seccomp, &err);
  sync_child_fail (sync_fd, err);
}

static int
enter_parent_namespaces (int pidfd, int ns_flags, struct husk_error **err)
{
  int flags = ns_flags & (CLONE_NEWPID | CLONE_NEWTIME);

  if (flags && setns (pidfd, flags) < 0)
    return husk_error_make (err, errno, "join the pid namespace of the container");
  return 0;
}

static int
open_exec_console (const struct exec_options *opts, int *child_end, int *our_end, struct husk_error **err)
{
  int pair[2];

  *child_end = *our_end = -1;
  if (!opts->process->terminal)
    return 0;
  if (opts->console_socket)
    {
      *child_end = terminal_connect (opts->console_socket, err);
      return *child_end < 0 ? -1 : 0;
    }
  if (opts->detach)
    return husk_error_make (err, 0, "--tty with --detach needs --console-socket");
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
    return husk_error_make (err, errno, "socketpair for the terminal");
  *our_end = pair[0];
  *child_end = pair[1];
  return 0;
}

static int
spawn_exec (const struct container_state *state, const struct exec_options *opts,
            const struct seccomp_program *seccomp, int *exit_code, struct husk_error **err)
{
  cleanup_close int pidfd = (int) syscall (SYS_pidfd_open, state->pid, 0);
  cleanup_close int console = -1;
  cleanup_close int child_console = -1;
  cleanup_close int master = -1;
  int pair[2], ns_flags;
  pid_t pid;

  if (pidfd < 0 || !state_init_alive (state))
    return husk_error_make (err, 0, "container `%s` is not running", state->id);
  ns_flags = differing_namespaces (state->pid);
  if (open_exec_console (opts, &child_console, &console, err) < 0
      || enter_parent_namespaces (pidfd, ns_flags, err) < 0)
    return -1;
  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
    return husk_error_make (err, errno, "socketpair");
  if (!opts->detach)
    foreground_block_signals ();
  /* Not dumpable from its first instruction: the child is in the
   * container's pid namespace at once, and until execve it runs our code
   * with our fds and memory (runc CVE-2016-9962).  fork inherits this; the
   * execve of the container's program resets it. */
  if (prctl (PR_SET_DUMPABLE, 0) < 0)
    return husk_error_make (err, errno, "make the exec process non-dumpable");
  fflush (NULL);
  pid = fork ();
  if (pid < 0)
    return husk_error_make (err, errno, "fork");
  if (pid == 0)
    {
      close (pair[0]);
      exec_child (pidfd, ns_flags, state, opts, seccomp, pair[1], child_console);
    }
  close (pair[1]);
  /* EOF on the socket = execve succeeded (it was close-on-exec). */
  if (sync_expect (pair[0], SYNC_CHILD_READY, NULL, err) < 0 && strstr ((*err)->msg, "exited before") != NULL)
    husk_error_free (err);
  close (pair[0]);
  if (err && *err)
    {
      waitpid (pid, NULL, 0);
      return -1;
    }
  if (opts->pid_file)
    {
      char buf[32];
      int n = snprintf (buf, sizeof buf, "%d", (int) pid);
      if (husk_write_file_replace (opts->pid_file, buf, (size_t) n, 0644, err) < 0)
        return -1;
    }
  if (opts->detach)
    {
      *exit_code = 0;
      return 0;
    }
  if (console >= 0 && (master = terminal_receive (console, err)) < 0)
    return -1;
  return foreground_wait (pid, master, exit_code, err);
}

/* The exec'd process runs under its own apparmorProfile or else the
 * container's, so `husk exec` cannot step out of the confinement. */
static int
exec_apparmor_profile (const struct spec *spec, struct spec_process *process, struct husk_error **err)
{
  if ((process->apparmor_profile == NULL || *process->apparmor_profile == '\0')
      && spec->process.apparmor_profile != NULL)
    {
      free (process->apparmor_profile);
      process->apparmor_profile = xstrdup (spec->process.apparmor_profile);
    }
  return apparmor_check_profile (&process->apparmor_profile, "exec: process.apparmorProfile", err);
}

int
container_exec (const struct runtime_ctx *ctx, const char *id, const struct exec_options *opts,
                int *exit_code, struct husk_error **err)
{
  struct container_state *state = NULL;
  struct spec *spec = NULL;
  struct seccomp_program seccomp = { 0 };
  enum container_status status;
  int ret = -1;

  if (state_load (ctx->root, id, &state, err) < 0)
    return -1;
  status = state_status (state);
  if (status != STATUS_RUNNING && status != STATUS_CREATED)
    husk_error_make (err, 0, "cannot exec in container `%s`: it is %s", id, container_status_name (status));
  else if (container_load_spec (ctx, id, &spec, err) == 0
           && exec_apparmor_profile (spec, opts->process, err) == 0
           && (!spec->has_seccomp || seccomp_compile (&spec->seccomp, &seccomp, err) == 0))
    ret = spawn_exec (state, opts, &seccomp, exit_code, err);
  seccomp_program_clear (&seccomp);
  spec_free (spec);
  state_free (state);
  return ret;
}
