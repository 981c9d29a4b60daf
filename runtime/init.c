/* The container's init process: everything between clone and execve that
 * happens inside the new namespaces.  The order follows the runtime spec's
 * lifecycle; each step is one call, and a failure goes back to the parent
 * as one line (sync_child_fail). */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <net/if.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/lsm/apparmor.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/criu.h"
#include "runtime/hooks.h"
#include "runtime/init.h"
#include "runtime/rootfs.h"
#include "runtime/sync.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#define KEYCTL_JOIN_SESSION_KEYRING 1

static const int ns_clone_flag[SPEC_NS_COUNT] = {
  [SPEC_NS_PID] = CLONE_NEWPID,       [SPEC_NS_NETWORK] = CLONE_NEWNET,
  [SPEC_NS_MOUNT] = CLONE_NEWNS,      [SPEC_NS_IPC] = CLONE_NEWIPC,
  [SPEC_NS_UTS] = CLONE_NEWUTS,       [SPEC_NS_USER] = CLONE_NEWUSER,
  [SPEC_NS_CGROUP] = CLONE_NEWCGROUP, [SPEC_NS_TIME] = 0x80 /* CLONE_NEWTIME */,
};

/* The hex mask after FIELD ("SigIgn:") in a /proc/PID/status text. */
static bool
status_mask (const char *text, const char *field, uint64_t *mask)
{
  const char *at = strstr (text, field);
  char *end;

  if (at == NULL)
    return false;
  errno = 0;
  *mask = strtoull (at + strlen (field), &end, 16);
  return errno == 0 && end != at + strlen (field) && *end == '\n';
}

/* The signals whose disposition is not the default (a bit per signal,
 * SIGHUP the lowest): SigIgn | SigCgt of our own status on a real procfs,
 * or all of them where that cannot be read.  No allocation: this runs in
 * a vfork child too. */
static uint64_t
non_default_signals (void)
{
  char text[4096];
  size_t len = 0;
  ssize_t n;
  uint64_t ignored, caught;
  struct statfs fs;
  int fd = open ("/proc/self/status", O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    return ~0ULL;
  if (fstatfs (fd, &fs) < 0 || fs.f_type != PROC_SUPER_MAGIC)
    {
      close (fd);
      return ~0ULL;
    }
  while (len < sizeof text - 1)
    {
      n = read (fd, text + len, sizeof text - 1 - len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      len += (size_t) n;
    }
  close (fd);
  text[len] = '\0';
  /* Ours: its NSpid names us in our own pid namespace. */
  if (husk_status_ns_pid (text) != (long) getpid () || !status_mask (text, "\nSigIgn:\t", &ignored)
      || !status_mask (text, "\nSigCgt:\t", &caught))
    return ~0ULL;
  return ignored | caught;
}

void
init_reset_signals (void)
{
  /* The raw syscalls: glibc's wrappers refuse signals 32 and 33 (it keeps
   * them for itself), yet an ignored 32/33 inherited from whoever started
   * us would survive execve into the container.  Only the signals that
   * are not at their default: a syscall each cost ~0.2 ms for all 62 on
   * this host, in the path of every create and exec. */
  struct
  {
    void *handler;
    unsigned long flags;
    void *restorer;
    uint64_t mask;
  } dfl = { .handler = SIG_DFL };
  uint64_t none = 0;
  uint64_t to_reset = non_default_signals ();

  for (int sig = 1; sig < NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP && (sig > 64 || (to_reset & (1ULL << (sig - 1)))))
      syscall (SYS_rt_sigaction, sig, &dfl, NULL, sizeof dfl.mask);
  syscall (SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof none);
}

void
init_cloexec_from (int first)
{
  if (syscall (SYS_close_range, (unsigned) first, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
    return;
  for (int fd = first; fd < 65536; fd++)
    {
      int flags = fcntl (fd, F_GETFD);
      if (flags >= 0)
        fcntl (fd, F_SETFD, flags | FD_CLOEXEC);
    }
}

/* Joins the namespaces given by path.  The pid and time namespaces were
 * joined by the parent (they only apply to children); the mount namespace
 * goes last, since after it the host's paths are gone. */
static int
join_namespaces (const struct spec *spec, bool user_joined, const int *ns_fds, struct husk_error **err)
{
  static const enum spec_ns_type order[]
      = { SPEC_NS_USER, SPEC_NS_IPC, SPEC_NS_UTS, SPEC_NS_NETWORK, SPEC_NS_CGROUP, SPEC_NS_MOUNT };

  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
    {
      const struct spec_namespace *ns = &spec->namespaces[order[i]];

      if (!ns->present || ns->path == NULL || (order[i] == SPEC_NS_USER && user_joined))
        continue;
      if (ns_fds[order[i]] < 0)
        return husk_error_make (err, EBADF, "open %s namespace `%s`", spec_ns_name (order[i]), ns->path);
      if (setns (ns_fds[order[i]], ns_clone_flag[order[i]]) < 0)
        return husk_error_make (err, errno, "join %s namespace `%s`", spec_ns_name (order[i]), ns->path);
    }
  return 0;
}

static int
become_root_in_userns (struct husk_error **err)
{
  if (setresgid (0, 0, 0) < 0)
    return husk_error_make (err, errno, "setresgid(0) in the new user namespace (is gid 0 mapped?)");
  if (setresuid (0, 0, 0) < 0)
    return husk_error_make (err, errno, "setresuid(0) in the new user namespace (is uid 0 mapped?)");
  return 0;
}

static int
set_names (const struct spec *spec, struct husk_error **err)
{
  if (spec->hostname && sethostname (spec->hostname, strlen (spec->hostname)) < 0)
    return husk_error_make (err, errno, "sethostname `%s`", spec->hostname);
  if (spec->domainname && setdomainname (spec->domainname, strlen (spec->domainname)) < 0)
    return husk_error_make (err, errno, "setdomainname `%s`", spec->domainname);
  return 0;
}

static bool
has_hooks (const struct spec *spec, enum spec_hook_kind kind)
{
  return spec->hooks.count[kind] > 0;
}

/* prestart and createRuntime run in the parent (runtime namespace, host
 * pid); createContainer runs here, in the container's mount namespace,
 * before pivot_root, with the rootfs still writable. */
static int
run_create_hooks (const struct init_config *cfg, const char *state_json, struct husk_error **err)
{
  const struct spec *spec = cfg->spec;

  if (has_hooks (spec, SPEC_HOOK_PRESTART) || has_hooks (spec, SPEC_HOOK_CREATE_RUNTIME))
    {
      if (sync_send (cfg->sync_fd, SYNC_CHILD_RUN_RUNTIME_HOOKS, NULL, 0, err) < 0)
        return -1;
      if (sync_expect (cfg->sync_fd, SYNC_PARENT_HOOKS_DONE, NULL, err) < 0)
        return -1;
    }
  return hooks_run (&spec->hooks, SPEC_HOOK_CREATE_CONTAINER, state_json, err);
}

/* chdir to process.cwd after pivot_root, and make sure it really is inside
 * the container: a cwd reached through a leaked fd would show up as
 * "(unreachable)" (runc CVE-2024-21626). */
int
init_enter_cwd (const struct spec_process *process, struct husk_error **err)
{
  char cwd[PATH_MAX];

  if (chdir (process->cwd) < 0)
    return husk_error_make (err, errno, "process.cwd `%s`", process->cwd);
  /* glibc's getcwd fails with ENOENT for an unreachable directory (the
   * kernel's "(unreachable)" prefix). */
  if (getcwd (cwd, sizeof cwd) == NULL)
    return errno == ENOENT
               ? husk_error_make (err, 0, "process.cwd `%s`: resolves outside the container", process->cwd)
               : husk_error_make (err, errno, "process.cwd `%s`: resolve", process->cwd);
  if (cwd[0] != '/')
    return husk_error_make (err, 0, "process.cwd `%s`: resolves outside the container", process->cwd);
  return 0;
}

/* Blocks until `husk start` writes to the exec fifo. */
static int
wait_for_start (int fifo_fd, struct husk_error **err)
{
  char byte;
  ssize_t n;

  do
    n = read (fifo_fd, &byte, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1)
    return husk_error_make (err, n < 0 ? errno : 0, "waiting for start on the exec fifo");
  /* The fd stays open until execve closes it: that is how start knows the
   * process runs (see release_init in ops.c). */
  return 0;
}

/* A network namespace of the container's own starts with lo down; runc
 * and crun bring it up, and programs expect 127.0.0.1 to answer. */
static int
loopback_up (struct husk_error **err)
{
  struct ifreq ifr = { .ifr_name = "lo" };
  cleanup_close int fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

  if (fd < 0 || ioctl (fd, SIOCGIFFLAGS, &ifr) < 0)
    return husk_error_make (err, errno, "bring up lo in the new network namespace");
  if (ifr.ifr_flags & IFF_UP)
    return 0;
  ifr.ifr_flags |= IFF_UP;
  if (ioctl (fd, SIOCSIFFLAGS, &ifr) < 0)
    return husk_error_make (err, errno, "bring up lo in the new network namespace");
  return 0;
}

static int
setup_before_pivot (const struct init_config *cfg, const char *state_json, struct husk_error **err)
{
  const struct spec *spec = cfg->spec;

  /* First, while /sys/fs/cgroup is still the host's and our creds are. */
  if (cfg->join_cgroup_v1 && cgroup_enter_v1_self (cfg->cgroup_path, err) < 0)
    return -1;
  if (join_namespaces (spec, cfg->joined_user_ns, cfg->ns_fds, err) < 0)
    return -1;
  if (cfg->new_user_ns && become_root_in_userns (err) < 0)
    return -1;
  if (cfg->new_cgroup_ns && unshare (CLONE_NEWCGROUP) < 0)
    return husk_error_make (err, errno, "unshare the cgroup namespace");
  /* Here, in the user namespace the process will run in: a new one gives
   * every capability back, the host's keeps the host's limits. */
  if (spec->has_process && security_check_caps (&spec->process, err) < 0)
    return -1;
  if (cfg->new_net_ns && loopback_up (err) < 0)
    return -1;
  if (!cfg->opts->no_new_keyring)
    syscall (SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL); /* best effort, as runc */
  if (set_names (spec, err) < 0)
    return -1;
  if (spec->has_process && security_apply_oom_score_adj (&spec->process, err) < 0)
    return -1;
  if (rootfs_prepare (spec, cfg->cgroup_path, err) < 0)
    return -1;
  if (security_apply_sysctls (spec, err) < 0)
    return -1;
  return run_create_hooks (cfg, state_json, err);
}

void
container_init (const struct init_config *cfg)
{
  const struct spec *spec = cfg->spec;
  struct husk_error *err = NULL;
  cleanup_free char *state_json = NULL;
  cleanup_free char *executable = NULL;

  init_reset_signals ();
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  /* Not dumpable: other processes in the container cannot ptrace us or
   * open our /proc entries while we still run husk's code.  In a new user
   * namespace that would also lock us out of our own /proc files. */
  if (!cfg->new_user_ns && !cfg->joined_user_ns)
    prctl (PR_SET_DUMPABLE, 0);

  if (!cfg->go_late && sync_expect (cfg->sync_fd, SYNC_PARENT_GO, &state_json, &err) < 0)
    _exit (1);
  if (setup_before_pivot (cfg, state_json, &err) < 0)
    sync_child_fail (cfg->sync_fd, err);
  if (rootfs_finalize (spec, cfg->opts->no_pivot, &err) < 0)
    sync_child_fail (cfg->sync_fd, err);
  if (spec->process.terminal && terminal_setup_child (cfg->console_fd, &spec->process, &err) < 0)
    sync_child_fail (cfg->sync_fd, err);
  /* As runc: the init leads a session of its own (with a terminal that
   * was done above), so nothing of it is outside the container and CRIU
   * can dump it. */
  if (!spec->process.terminal && setsid () < 0)
    {
      husk_error_make (&err, errno, "setsid");
      sync_child_fail (cfg->sync_fd, err);
    }
  if (!spec->process.terminal && criu_reopen_dev_null (&err) < 0)
    sync_child_fail (cfg->sync_fd, err);
  if (cfg->console_fd >= 0)
    close (cfg->console_fd);
  if (init_enter_cwd (&spec->process, &err) < 0
      || init_find_executable (&spec->process, &executable, &err) < 0)
    sync_child_fail (cfg->sync_fd, err);
  if (security_apply_rlimits (&spec->process, &err) < 0)
    sync_child_fail (cfg->sync_fd, err);
  /* The profile takes effect at execve; named here, before the ready
   * message, so that a profile the kernel does not have fails create (as
   * runc), and before seccomp, which could deny the write. */
  if (apparmor_exec_profile (spec->process.apparmor_profile, &err) < 0)
    sync_child_fail (cfg->sync_fd, err);

  /* Late: the parent has the init in its cgroups and its state written. */
  if (cfg->go_late && sync_expect (cfg->sync_fd, SYNC_PARENT_GO, &state_json, &err) < 0)
    _exit (1);
  init_cloexec_from (3 + cfg->opts->preserve_fds);
  prctl (PR_SET_PDEATHSIG, 0);
  if (sync_send (cfg->sync_fd, SYNC_CHILD_READY, NULL, 0, &err) < 0)
    _exit (1);
  close (cfg->sync_fd);

  /* From here on nobody waits for our messages: errors go to stderr. */
  if ((cfg->fifo_fd >= 0 && wait_for_start (cfg->fifo_fd, &err) < 0)
      || hooks_run (&spec->hooks, SPEC_HOOK_START_CONTAINER, state_json, &err) < 0)
    sync_child_fail (-1, err);
  init_exec_process (&spec->process, executable, cfg->seccomp, &err);
  sync_child_fail (-1, err);
}

int
init_find_executable (const struct spec_process *process, char **out, struct husk_error **err)
{
  const char *name = process->args[0];
  const char *path_env = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  cleanup_free char *search = NULL;
  char *dir, *save = NULL;

  if (strchr (name, '/'))
    {
      struct stat st;

      if (access (name, X_OK) < 0)
        return husk_error_make (err, errno, "exec `%s`", name);
      /* root passes access(X_OK) for a directory; execve would not. */
      if (stat (name, &st) == 0 && S_ISDIR (st.st_mode))
        return husk_error_make (err, EACCES, "exec `%s`", name);
      *out = xstrdup (name);
      return 0;
    }
  for (char **env = process->env; env && *env; env++)
    if (husk_str_has_prefix (*env, "PATH="))
      path_env = *env + 5;
  search = xstrdup (path_env);
  for (dir = strtok_r (search, ":", &save); dir; dir = strtok_r (NULL, ":", &save))
    {
      cleanup_free char *candidate = xasprintf ("%s/%s", *dir ? dir : ".", name);
      struct stat st;

      if (stat (candidate, &st) == 0 && S_ISREG (st.st_mode) && access (candidate, X_OK) == 0)
        {
          *out = steal_pointer (&candidate);
          return 0;
        }
    }
  return husk_error_make (err, 0, "exec `%s`: executable file not found in $PATH", name);
}

int
init_exec_process (const struct spec_process *process, const char *executable,
                   const struct seccomp_program *seccomp, struct husk_error **err)
{
  /* Without no_new_privs, loading a filter needs CAP_SYS_ADMIN, which the
   * user switch and the capability sets take away: load it first then. */
  bool load_early = seccomp && seccomp->len && !process->no_new_privileges;

  if (security_drop_bounding (process, err) < 0)
    return -1;
  if (load_early && seccomp_program_load (seccomp, err) < 0)
    return -1;
  if (security_apply_user (process, err) < 0 || security_apply_caps (process, err) < 0
      || security_apply_no_new_privs (process, err) < 0)
    return -1;
  if (seccomp && !load_early && seccomp_program_load (seccomp, err) < 0)
    return -1;
  execve (executable, process->args, process->env);
  return husk_error_make (err, errno, "exec `%s`", executable);
}
