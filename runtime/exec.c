/* `husk exec`: a new process in a running container.  The parent joins the
 * container's pid (and time) namespace, which only applies to children;
 * the forked child joins the rest through the init's pidfd, enters the
 * container's cgroup and then takes the same last steps as the init. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
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
#include <time.h>
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

/* A failure of the exec child: over the sync socket to `husk exec`, or,
 * forked by a caller that only reads our output (SYNC_FD -1: huskd's
 * ExecSync), on stderr as `husk exec` itself would report it, exit 1. */
__attribute__ ((noreturn)) static void
exec_child_fail (int sync_fd, struct husk_error *err)
{
  const char *msg = err && err->msg ? err->msg : "exec failed";

  if (sync_fd >= 0)
    sync_child_fail (sync_fd, err);
  (void) !write (2, "husk: ", 6);
  (void) !write (2, msg, strlen (msg));
  (void) !write (2, "\n", 1);
  husk_error_free (&err);
  _exit (1);
}

/* How long a process that shares its spawner's memory (vfork, see
 * container_exec_plan_spawn) may take from the spawn to its execve: the
 * spawner waits meanwhile, so a cwd or executable on a hung filesystem
 * must not hold it for longer.  The setup takes about a millisecond. */
#define SHARED_SETUP_MAX_MS 2000

/* A POSIX timer that SIGKILLs this process after MS unless it execs
 * first (execve deletes the process's timers).  Raw syscalls: nothing of
 * glibc's that could allocate or take a lock. */
static void
arm_setup_deadline (long ms)
{
  struct sigevent sev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGKILL };
  struct itimerspec when = { .it_value = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L } };
  int timer;

  if (syscall (SYS_timer_create, CLOCK_MONOTONIC, &sev, &timer) < 0
      || syscall (SYS_timer_settime, timer, 0, &when, NULL) < 0)
    _exit (127);
}

/* SHARED: the child of vfork, on its spawner's memory until execve, so
 * whatever it allocates and does not free stays in the spawner's heap:
 * the executable's path lives on the stack and an error is freed before
 * _exit (the functions called free their own temporaries). */
static void
exec_child (int pidfd, int ns_flags, const struct container_state *state, const struct exec_options *opts,
            const struct seccomp_program *seccomp, int sync_fd, int console_fd, bool shared)
{
  struct husk_error *err = NULL;
  char *found = NULL;
  char executable[PATH_MAX];
  const struct spec_process *process = opts->process;

  if (shared)
    arm_setup_deadline (SHARED_SETUP_MAX_MS);
  init_reset_signals ();
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  /* Single-threaded here: the v1 hierarchies through `tasks` (no global
   * lock, see cgroup_enter_v1_self), the unified one through cgroup.procs. */
  if (state->cgroup_path && access (state->cgroup_path, F_OK) == 0
      && (cgroup_enter_v1_self (state->cgroup_path, &err) < 0
          || cgroup_enter_unified (state->cgroup_path, 0, &err) < 0))
    exec_child_fail (sync_fd, err);
  if (setns (pidfd, ns_flags & ~(CLONE_NEWPID | CLONE_NEWTIME)) < 0)
    {
      husk_error_make (&err, errno, "join the namespaces of container `%s`", state->id);
      exec_child_fail (sync_fd, err);
    }
  if ((ns_flags & CLONE_NEWUSER) && (setresgid (0, 0, 0) < 0 || setresuid (0, 0, 0) < 0))
    {
      husk_error_make (&err, errno, "become root in the user namespace of container `%s`", state->id);
      exec_child_fail (sync_fd, err);
    }
  /* The same check as create's, for the same one-line answer. */
  if (security_check_caps (process, &err) < 0)
    exec_child_fail (sync_fd, err);
  if (process->terminal && terminal_setup_child (console_fd, process, &err) < 0)
    exec_child_fail (sync_fd, err);
  if (init_enter_cwd (process, &err) < 0 || init_find_executable (process, &found, &err) < 0)
    exec_child_fail (sync_fd, err);
  if (strlen (found) >= sizeof executable)
    husk_error_make (&err, ENAMETOOLONG, "exec `%s`", process->args[0]);
  else
    strcpy (executable, found);
  free (found);
  if (err || security_apply_rlimits (process, &err) < 0 || security_raise_oom_score_adj (process, &err) < 0
      || apparmor_exec_profile (process->apparmor_profile, &err) < 0)
    exec_child_fail (sync_fd, err);
  init_cloexec_from (3 + opts->preserve_fds);
  prctl (PR_SET_PDEATHSIG, 0);
  init_exec_process (process, executable, seccomp, &err);
  exec_child_fail (sync_fd, err);
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
      exec_child (pidfd, ns_flags, state, opts, seccomp, pair[1], child_console, false);
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

/* ------------------------------------------------------------------ */
/* Exec plans: exec from a long-lived, multithreaded caller             */

struct exec_plan
{
  struct container_state *state;
  struct spec *spec; /* its process has the AppArmor default of exec applied */
  struct seccomp_program seccomp;
  int ns_flags;
  struct stat state_st; /* state.json as loaded: another one means reload */
};

int
container_exec_plan_load (const struct runtime_ctx *ctx, const char *id, struct exec_plan **out,
                          struct husk_error **err)
{
  struct exec_plan *plan = xcalloc (1, sizeof *plan);
  cleanup_free char *state_file = NULL;
  enum container_status status;

  if (state_load (ctx->root, id, &plan->state, err) < 0)
    goto fail;
  status = state_status (plan->state);
  if (status != STATUS_RUNNING && status != STATUS_CREATED)
    {
      husk_error_make (err, 0, "cannot exec in container `%s`: it is %s", id, container_status_name (status));
      goto fail;
    }
  state_file = xasprintf ("%s/state.json", plan->state->state_dir);
  if (stat (state_file, &plan->state_st) < 0)
    {
      husk_error_make (err, errno, "stat %s", state_file);
      goto fail;
    }
  if (container_load_spec (ctx, id, &plan->spec, err) < 0
      || exec_apparmor_profile (plan->spec, &plan->spec->process, err) < 0
      || (plan->spec->has_seccomp && seccomp_compile (&plan->spec->seccomp, &plan->seccomp, err) < 0))
    goto fail;
  plan->ns_flags = differing_namespaces (plan->state->pid);
  *out = plan;
  return 0;
fail:
  container_exec_plan_free (plan);
  return -1;
}

bool
container_exec_plan_current (const struct exec_plan *plan)
{
  cleanup_free char *state_file = xasprintf ("%s/state.json", plan->state->state_dir);
  struct stat st;

  return state_init_alive (plan->state) && stat (state_file, &st) == 0 && st.st_ino == plan->state_st.st_ino
         && st.st_dev == plan->state_st.st_dev && st.st_mtim.tv_sec == plan->state_st.st_mtim.tv_sec
         && st.st_mtim.tv_nsec == plan->state_st.st_mtim.tv_nsec;
}

bool
container_exec_plan_spawnable (const struct exec_plan *plan)
{
  /* Joining a time namespace needs a single-threaded caller (EUSERS). */
  return !(plan->ns_flags & CLONE_NEWTIME);
}

void
container_exec_plan_free (struct exec_plan *plan)
{
  if (plan == NULL)
    return;
  seccomp_program_clear (&plan->seccomp);
  spec_free (plan->spec);
  state_free (plan->state);
  free (plan);
}

/* The process is born in the container's pid namespace and runs our code
 * until execve: non-dumpable from its first instruction, as `husk exec`'s
 * child (runc CVE-2016-9962).  fork copies the flag of the whole process,
 * so it is off while any spawn forks and restored after the last. */
static pthread_mutex_t dumpable_lock = PTHREAD_MUTEX_INITIALIZER;
static int dumpable_holds;
static int dumpable_before;

static void
hold_undumpable (bool hold)
{
  pthread_mutex_lock (&dumpable_lock);
  if (hold && dumpable_holds++ == 0)
    {
      dumpable_before = prctl (PR_GET_DUMPABLE);
      prctl (PR_SET_DUMPABLE, 0);
    }
  else if (!hold && --dumpable_holds == 0 && dumpable_before > 0)
    prctl (PR_SET_DUMPABLE, dumpable_before);
  pthread_mutex_unlock (&dumpable_lock);
}

/* Our own pid namespace, to return the calling thread to after the fork. */
static int own_pidns_fd = -1;
static pthread_once_t own_pidns_once = PTHREAD_ONCE_INIT;

static void
open_own_pidns (void)
{
  own_pidns_fd = open ("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
}

/* Set by a single-threaded spawner (`husk exec-helper`): spawns share its
 * memory until their execve (container_exec_plan_spawn). */
static bool spawn_by_vfork;

void
container_exec_plan_vfork (void)
{
  spawn_by_vfork = true;
}

__attribute__ ((noreturn)) static void
spawn_child (const struct exec_plan *plan, int pidfd, const struct spec_process *process, const int stdio[3],
             bool shared)
{
  const struct exec_options opts = { .process = (struct spec_process *) process };

  setpgid (0, 0);
  for (int i = 0; i < 3; i++)
    if (stdio[i] == i ? fcntl (i, F_SETFD, 0) < 0 : dup2 (stdio[i], i) < 0)
      _exit (127);
  exec_child (pidfd, plan->ns_flags, plan->state, &opts, &plan->seccomp, -1, -1, shared);
  _exit (1);
}

/* Whether this spawn may share our memory until its execve (vfork): a
 * fork copies the page tables of all the plans kept, marks every page
 * copy-on-write and tears the copy down at execve, several milliseconds
 * of CPU per probe on these machines against ~0.2 with vfork.  Not for a
 * multithreaded caller (the other threads would run beside a child on
 * the same heap), nor a user namespace (setns refuses a shared mm), nor a
 * frozen container (its v1 freezer holds the child, even against SIGKILL,
 * and us with it), nor under ASan (its bookkeeping of our stack). */
static bool
spawn_shares_memory (const struct exec_plan *plan)
{
#if defined(__SANITIZE_ADDRESS__)
  (void) plan;
  return false;
#else
  return spawn_by_vfork && !(plan->ns_flags & CLONE_NEWUSER) && !cgroup_is_frozen (plan->state->cgroup_path);
#endif
}

/* The child never returns from here (a vfork child must not leave the
 * frame that called vfork): it execs or exits in spawn_child. */
__attribute__ ((noinline)) static pid_t
vfork_child (const struct exec_plan *plan, int pidfd, const struct spec_process *process, const int stdio[3])
{
  pid_t pid = vfork ();

  if (pid == 0)
    spawn_child (plan, pidfd, process, stdio, true);
  return pid;
}

pid_t
container_exec_plan_spawn (const struct exec_plan *plan, char *const *args, const int stdio[3],
                           struct husk_error **err)
{
  cleanup_close int pidfd = (int) syscall (SYS_pidfd_open, plan->state->pid, 0);
  struct spec_process process = plan->spec->process;
  bool pidns = plan->ns_flags & CLONE_NEWPID;
  bool shared;
  pid_t pid;

  if (pidfd < 0 || !state_init_alive (plan->state))
    return husk_error_make (err, 0, "container `%s` is not running", plan->state->id);
  if (!container_exec_plan_spawnable (plan))
    return husk_error_make (err, ENOTSUP, "exec in container `%s`: its time namespace needs `husk exec`",
                            plan->state->id);
  process.args = (char **) args;
  process.terminal = false;
  shared = spawn_shares_memory (plan);
  pthread_once (&own_pidns_once, open_own_pidns);
  if (pidns && own_pidns_fd < 0)
    return husk_error_make (err, errno, "open /proc/self/ns/pid");
  /* Only this thread's children are born there (setns of a pid namespace
   * is per thread); it comes back right after the fork. */
  if (pidns && setns (pidfd, CLONE_NEWPID) < 0)
    return husk_error_make (err, errno, "join the pid namespace of container `%s`", plan->state->id);
  hold_undumpable (true);
  /* vfork: we wait until the child has exec'd or exited, at most
   * SHARED_SETUP_MAX_MS (its timer). */
  pid = shared ? vfork_child (plan, pidfd, &process, stdio) : fork ();
  if (pid == 0)
    spawn_child (plan, pidfd, &process, stdio, false);
  {
    int fork_errno = errno;
    hold_undumpable (false);
    /* Cannot fail (our own namespace is always ours to enter); if it did,
     * this thread's later children would be born in the container. */
    if (pidns && setns (own_pidns_fd, CLONE_NEWPID) < 0)
      abort ();
    if (pid < 0)
      return husk_error_make (err, fork_errno, "fork for exec in container `%s`", plan->state->id);
  }
  return pid;
}
