/* A pod's namespaces without a process to hold them: a forked child
 * unshares them and bind-mounts /proc/self/ns/X onto pin files (as
 * `ip netns add` does), and the pause process huskd starts only for pods
 * that share a pid namespace.  The children run async-signal-safe calls
 * only, since huskd is multi-threaded; every string is built before fork. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>

#include "cri/config/runtime_exec.h"
#include "cri/pod/sandbox_internal.h"
#include "husk/cleanup.h"
#include "husk/spawn.h"
#include "husk/util.h"
#include "runtime/lsm/apparmor.h"

#ifndef NSFS_MAGIC
#define NSFS_MAGIC 0x6e736673
#endif

/* The steps of the pinning child, named in errors. */
enum pin_step
{
  PIN_UNSHARE,
  PIN_MOUNT_NET,
  PIN_MOUNT_IPC,
  PIN_MOUNT_UTS,
  PIN_HOSTNAME,
  PIN_LOOPBACK,
  PIN_USERNS,
  PIN_BECOME_ROOT,
  PIN_SYSCTL, /* + index of the sysctl */
};

static const char *const pin_step_names[] = {
  "unshare the pod namespaces", "pin the network namespace",
  "pin the ipc namespace",      "pin the uts namespace",
  "set the hostname",           "bring up lo",
  "unshare the user namespace", "become root in the user namespace",
};

/* What the child of a pod with a user namespace says when it waits for
 * huskd: to write its id maps, then to pin its namespaces. */
enum
{
  PIN_WAIT_MAPS = -2,
  PIN_WAIT_PINS = -3,
};

struct child_report
{
  int step;
  int errnum;
};

/* The children here never exec, so O_CLOEXEC does not close what they
 * inherit: huskd.lock above all, which a child still alive when huskd is
 * killed would hold, and the restarted huskd would find "in use".  They
 * keep only KEEP_FD (and stdio). */
static void
close_inherited_fds (int keep_fd)
{
  if (keep_fd > 3)
    close_range (3, (unsigned) keep_fd - 1, 0);
  close_range ((unsigned) keep_fd + 1, ~0U, 0);
}

static void
close_inherited_fds_but2 (int fd_a, int fd_b)
{
  int low = fd_a < fd_b ? fd_a : fd_b, high = fd_a < fd_b ? fd_b : fd_a;

  if (low > 3)
    close_range (3, (unsigned) low - 1, 0);
  if (high > low + 1)
    close_range ((unsigned) low + 1, (unsigned) high - 1, 0);
  close_range ((unsigned) high + 1, ~0U, 0);
}

HUSK_SPAWN_CHILD static void
child_fail (int fd, int step)
{
  struct child_report report = { step, errno };

  (void) !write (fd, &report, sizeof report);
  _exit (1);
}

static int
loopback_up (void)
{
  struct ifreq ifr;
  int fd = socket (AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

  if (fd < 0)
    return -1;
  memset (&ifr, 0, sizeof ifr);
  strcpy (ifr.ifr_name, "lo");
  if (ioctl (fd, SIOCGIFFLAGS, &ifr) < 0)
    return close (fd), -1;
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl (fd, SIOCSIFFLAGS, &ifr) < 0)
    return close (fd), -1;
  return close (fd);
}

static int
write_sysctl (const struct sandbox_sysctl *sysctl)
{
  int fd = open (sysctl->path, O_WRONLY | O_CLOEXEC);
  ssize_t len = (ssize_t) strlen (sysctl->value);

  if (fd < 0)
    return -1;
  if (write (fd, sysctl->value, (size_t) len) != len)
    return close (fd), -1;
  return close (fd);
}

/* Tells huskd it waits (STEP), and waits for its byte on GO_FD. */
HUSK_SPAWN_CHILD static void
wait_for_huskd (int report_fd, int go_fd, int step)
{
  struct child_report report = { step, 0 };
  char byte;

  if (write (report_fd, &report, sizeof report) != sizeof report || read (go_fd, &byte, 1) != 1)
    _exit (1);
}

/* In the pod's user namespace (then the namespaces made next are its) the
 * child cannot mount on the host: huskd pins them from /proc/PID/ns. */
HUSK_SPAWN_CHILD static void
pin_child (const struct sandbox_ns_setup *setup, int report_fd, int go_fd)
{
  int flags = (setup->net_pin ? CLONE_NEWNET : 0) | (setup->ipc_pin ? CLONE_NEWIPC : 0)
              | (setup->uts_pin ? CLONE_NEWUTS : 0);
  bool in_userns = setup->user_pin != NULL;

  close_inherited_fds_but2 (report_fd, go_fd);
  if (in_userns)
    {
      if (unshare (CLONE_NEWUSER) < 0)
        child_fail (report_fd, PIN_USERNS);
      wait_for_huskd (report_fd, go_fd, PIN_WAIT_MAPS);
      if (setresgid (0, 0, 0) < 0 || setresuid (0, 0, 0) < 0)
        child_fail (report_fd, PIN_BECOME_ROOT);
    }
  if (unshare (flags) < 0)
    child_fail (report_fd, PIN_UNSHARE);
  if (!in_userns && setup->net_pin && mount ("/proc/self/ns/net", setup->net_pin, NULL, MS_BIND, NULL) < 0)
    child_fail (report_fd, PIN_MOUNT_NET);
  if (!in_userns && setup->ipc_pin && mount ("/proc/self/ns/ipc", setup->ipc_pin, NULL, MS_BIND, NULL) < 0)
    child_fail (report_fd, PIN_MOUNT_IPC);
  if (!in_userns && setup->uts_pin && mount ("/proc/self/ns/uts", setup->uts_pin, NULL, MS_BIND, NULL) < 0)
    child_fail (report_fd, PIN_MOUNT_UTS);
  if (setup->uts_pin && setup->hostname && sethostname (setup->hostname, strlen (setup->hostname)) < 0)
    child_fail (report_fd, PIN_HOSTNAME);
  if (setup->net_pin && loopback_up () < 0)
    child_fail (report_fd, PIN_LOOPBACK);
  for (size_t i = 0; i < setup->n_sysctls; i++)
    if (write_sysctl (&setup->sysctls[i]) < 0)
      child_fail (report_fd, PIN_SYSCTL + (int) i);
  if (in_userns)
    wait_for_huskd (report_fd, go_fd, PIN_WAIT_PINS);
  _exit (0);
}

struct pin_start
{
  const struct sandbox_ns_setup *setup;
  int report_fd, go_fd;
};

HUSK_SPAWN_CHILD static int
pin_child_spawned (void *arg)
{
  const struct pin_start *start = arg;

  pin_child (start->setup, start->report_fd, start->go_fd);
  return 0;
}

/* Without a user namespace the child never waits for huskd, so it can
 * share huskd's memory until it exits (husk/spawn.h): no page tables
 * copied for a child that lives a millisecond.  One that unshares a user
 * namespace must not share memory (the kernel refuses) and waits for its
 * maps: a fork of its own. */
static pid_t
start_pin_child (const struct sandbox_ns_setup *setup, int report_fd, int go_fd)
{
  struct pin_start start = { setup, report_fd, go_fd };
  pid_t pid;

  if (setup->user_pin == NULL)
    return husk_spawn (pin_child_spawned, &start);
  pid = fork ();
  if (pid == 0)
    pin_child (setup, report_fd, go_fd);
  return pid;
}

static int
make_pin_file (const char *pin, struct husk_error **err)
{
  int fd;

  if (pin == NULL)
    return 0;
  fd = open (pin, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
  if (fd < 0)
    return husk_error_make (err, errno, "create namespace pin `%s`", pin);
  close (fd);
  return 0;
}

static void
unpin_all (const struct sandbox_ns_setup *setup)
{
  const char *pins[] = { setup->net_pin, setup->ipc_pin, setup->uts_pin, setup->user_pin };

  for (size_t i = 0; i < 4; i++)
    if (pins[i])
      sandbox_ns_unpin (pins[i]);
}

static int
pin_failed (const struct sandbox_ns_setup *setup, const struct child_report *report, struct husk_error **err)
{
  unpin_all (setup);
  if (report->step >= PIN_SYSCTL)
    {
      const struct sandbox_sysctl *sysctl = &setup->sysctls[report->step - PIN_SYSCTL];
      husk_error_make (err, report->errnum, "write sysctl `%s` = `%s` in the pod", sysctl->path,
                       sysctl->value);
      /* A key the kernel does not have, or a value it refuses, is the caller's. */
      if (report->errnum == ENOENT || report->errnum == EINVAL)
        (*err)->errnum = EINVAL;
      return -1;
    }
  return husk_error_make (err, report->errnum, "%s", pin_step_names[report->step]);
}

static ssize_t
read_report (int fd, struct child_report *report)
{
  ssize_t got;

  do
    got = read (fd, report, sizeof *report);
  while (got < 0 && errno == EINTR);
  return got;
}

static int
pin_from_proc (pid_t pid, const char *name, const char *pin, struct husk_error **err)
{
  char source[64];

  if (pin == NULL)
    return 0;
  snprintf (source, sizeof source, "/proc/%d/ns/%s", (int) pid, name);
  if (mount (source, pin, NULL, MS_BIND, NULL) < 0)
    return husk_error_make (err, errno, "pin the pod's %s namespace on `%s`", name, pin);
  return 0;
}

/* The child waits twice: for its maps (kubelet's, in the parent user
 * namespace, where huskd is root), then for its pins.  Returns the
 * report that ended the talk in *REPORT, or -1 with *ERR. */
static int
drive_userns_child (const struct sandbox_ns_setup *setup, pid_t pid, int report_fd, int go_fd,
                    struct child_report *report, ssize_t *got, struct husk_error **err)
{
  const struct cri_userns *userns = setup->userns;

  *got = read_report (report_fd, report);
  if (*got != (ssize_t) sizeof *report || report->step != PIN_WAIT_MAPS)
    return 0;
  if (husk_id_map_write (pid, "uid_map", userns->uids, userns->n_uids, err) < 0
      || husk_id_map_write (pid, "gid_map", userns->gids, userns->n_gids, err) < 0
      || write (go_fd, "g", 1) != 1)
    return husk_error_wrap (err, "pod user namespace");
  *got = read_report (report_fd, report);
  if (*got != (ssize_t) sizeof *report || report->step != PIN_WAIT_PINS)
    return 0;
  if (pin_from_proc (pid, "user", setup->user_pin, err) < 0
      || pin_from_proc (pid, "net", setup->net_pin, err) < 0
      || pin_from_proc (pid, "ipc", setup->ipc_pin, err) < 0
      || pin_from_proc (pid, "uts", setup->uts_pin, err) < 0)
    return -1;
  if (write (go_fd, "g", 1) != 1)
    return husk_error_make (err, errno, "pod user namespace: release the namespace child");
  *got = read_report (report_fd, report);
  return 0;
}

int
sandbox_ns_pin (const struct sandbox_ns_setup *setup, struct husk_error **err)
{
  struct child_report report = { 0, 0 };
  int pipe_fds[2], go_fds[2], status = 0, ret = 0;
  ssize_t got = 0;
  pid_t pid;

  if (make_pin_file (setup->net_pin, err) < 0 || make_pin_file (setup->ipc_pin, err) < 0
      || make_pin_file (setup->uts_pin, err) < 0 || make_pin_file (setup->user_pin, err) < 0)
    return unpin_all (setup), -1;
  if (pipe2 (pipe_fds, O_CLOEXEC) < 0)
    return unpin_all (setup), husk_error_make (err, errno, "pipe");
  if (pipe2 (go_fds, O_CLOEXEC) < 0)
    {
      close (pipe_fds[0]);
      close (pipe_fds[1]);
      return unpin_all (setup), husk_error_make (err, errno, "pipe");
    }
  pid = start_pin_child (setup, pipe_fds[1], go_fds[0]);
  if (pid < 0)
    {
      close (pipe_fds[0]);
      close (pipe_fds[1]);
      close (go_fds[0]);
      close (go_fds[1]);
      return unpin_all (setup), husk_error_make (err, errno, "fork to create the pod namespaces");
    }
  close (pipe_fds[1]);
  close (go_fds[0]);
  if (setup->user_pin)
    ret = drive_userns_child (setup, pid, pipe_fds[0], go_fds[1], &report, &got, err);
  else
    got = read_report (pipe_fds[0], &report);
  close (go_fds[1]); /* a child still waiting on it exits */
  close (pipe_fds[0]);
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (ret < 0)
    return unpin_all (setup), -1;
  if (got == (ssize_t) sizeof report && report.step >= 0)
    return pin_failed (setup, &report, err);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    {
      unpin_all (setup);
      return husk_error_make (err, 0, "the namespace child died (status %d)", status);
    }
  return 0;
}

void
sandbox_ns_unpin (const char *pin)
{
  if (umount2 (pin, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
    husk_warn ("unmount namespace pin `%s`: %s", pin, strerror (errno));
  if (unlink (pin) < 0 && errno != ENOENT)
    husk_warn ("remove namespace pin `%s`: %s", pin, strerror (errno));
}

bool
sandbox_ns_pinned (const char *pin)
{
  struct statfs fs;

  return pin && statfs (pin, &fs) == 0 && fs.f_type == NSFS_MAGIC;
}

int
sandbox_ns_kill_members (const char *pin)
{
  cleanup_dir DIR *proc = NULL;
  struct dirent *de;
  struct stat pinned;
  int killed = 0;

  if (!sandbox_ns_pinned (pin) || stat (pin, &pinned) < 0 || (proc = opendir ("/proc")) == NULL)
    return 0;
  while ((de = readdir (proc)) != NULL)
    {
      char path[64];
      struct stat st;
      int pid = atoi (de->d_name);

      if (pid <= 1 || pid == getpid ())
        continue;
      snprintf (path, sizeof path, "/proc/%d/ns/net", pid);
      if (stat (path, &st) == 0 && st.st_dev == pinned.st_dev && st.st_ino == pinned.st_ino
          && kill (pid, SIGKILL) == 0)
        killed++;
    }
  return killed;
}

/* ---------------------------------------------------------------- shm */

/* 64 MiB, as Docker and containerd give a pod. */
#define SHM_OPTIONS "mode=1777,size=65536k"

int
sandbox_shm_mount (const char *path, const struct cri_userns *userns, struct husk_error **err)
{
  char options[128];

  /* In a pod of its own user namespace the tmpfs is its root's. */
  snprintf (options, sizeof options, SHM_OPTIONS ",uid=%u,gid=%u", (unsigned) cri_userns_root_uid (userns),
            (unsigned) cri_userns_root_gid (userns));
  if (mkdir (path, 0700) < 0 && errno != EEXIST)
    return husk_error_make (err, errno, "create `%s`", path);
  if (mount ("shm", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options) < 0)
    return husk_error_make (err, errno, "mount the pod's /dev/shm (tmpfs) on `%s`", path);
  return 0;
}

void
sandbox_shm_unmount (const char *path)
{
  if (umount2 (path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
    husk_warn ("unmount the pod's /dev/shm `%s`: %s", path, strerror (errno));
}

/* ---------------------------------------------------------------- pause */

/* What a failing pause launcher reports as its step. */
enum
{
  PAUSE_SETUP = 0, /* joining the pod, the pid namespace, fork */
  PAUSE_EXEC = 1,
  PAUSE_APPARMOR = 2, /* naming its profile for the execve */
};

static int
open_pin (const char *pin, int report_fd)
{
  int fd;

  if (pin == NULL)
    return -1;
  fd = open (pin, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    child_fail (report_fd, PAUSE_SETUP);
  return fd;
}

static void
join (int fd, int nstype, int report_fd)
{
  if (fd >= 0 && setns (fd, nstype) < 0)
    child_fail (report_fd, PAUSE_SETUP);
  if (fd >= 0)
    close (fd);
}

/* pid 1 of the pod: husk-pause, with nothing of huskd's open, under the
 * pod's AppArmor profile if it has one.  The id in its command line finds
 * it when the pod's record is lost.  A failure is a child_report on
 * EXEC_ERROR_FD. */
static void __attribute__ ((noreturn))
pause_exec (const char *pause_path, const char *sandbox_id, const char *apparmor_profile, int exec_error_fd)
{
  char *const argv[] = { "husk-pause", (char *) sandbox_id, NULL };
  sigset_t none;
  int ret;

  if (exec_error_fd > 3)
    close_range (3, (unsigned) exec_error_fd - 1, 0);
  close_range ((unsigned) exec_error_fd + 1, ~0U, 0);
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  if (apparmor_profile && (ret = apparmor_exec_profile_raw (apparmor_profile)) < 0)
    {
      errno = -ret;
      child_fail (exec_error_fd, PAUSE_APPARMOR);
    }
  execv (pause_path, argv);
  child_fail (exec_error_fd, PAUSE_EXEC);
  _exit (127);
}

/* The intermediate child: joins the pod, makes the pid namespace, forks
 * pid 1 into it, reports its pid once it has exec'd (or why it could not)
 * and exits so init adopts it. */
static void
pause_launcher (const char *pause_path, const char *sandbox_id, const struct sandbox_ns_setup *setup,
                int report_fd)
{
  struct child_report report = { -1, 0 }, exec_report;
  int exec_error[2];
  pid_t init_pid;

  int net_fd, ipc_fd, uts_fd;

  close_inherited_fds (report_fd);
  /* Opened while host root: the pins are in a directory only it may
   * search. */
  net_fd = open_pin (setup->net_pin, report_fd);
  ipc_fd = open_pin (setup->ipc_pin, report_fd);
  uts_fd = open_pin (setup->uts_pin, report_fd);
  /* First the user namespace: the pid namespace made below is then its,
   * and the pod's root may mount /proc for it. */
  join (open_pin (setup->user_pin, report_fd), CLONE_NEWUSER, report_fd);
  if (setup->user_pin && (setresgid (0, 0, 0) < 0 || setresuid (0, 0, 0) < 0))
    child_fail (report_fd, PAUSE_SETUP);
  join (net_fd, CLONE_NEWNET, report_fd);
  join (ipc_fd, CLONE_NEWIPC, report_fd);
  join (uts_fd, CLONE_NEWUTS, report_fd);
  if (setsid () < 0 || unshare (CLONE_NEWPID) < 0 || pipe2 (exec_error, O_CLOEXEC) < 0)
    child_fail (report_fd, PAUSE_SETUP);
  init_pid = fork ();
  if (init_pid < 0)
    child_fail (report_fd, PAUSE_SETUP);
  if (init_pid == 0)
    pause_exec (pause_path, sandbox_id, setup->apparmor_profile, exec_error[1]);
  close (exec_error[1]);
  /* EOF: execv worked and closed its end. */
  if (read (exec_error[0], &exec_report, sizeof exec_report) == sizeof exec_report)
    {
      errno = exec_report.errnum;
      child_fail (report_fd, exec_report.step);
    }
  report.errnum = init_pid;
  (void) !write (report_fd, &report, sizeof report);
  _exit (0);
}

int
sandbox_pause_start (const char *sandbox_id, const struct sandbox_ns_setup *setup, pid_t *pid,
                     unsigned long long *start_time, struct husk_error **err)
{
  cleanup_free char *pause_path = cri_helper_path ("husk-pause");
  struct child_report report = { 0, 0 };
  int pipe_fds[2];
  ssize_t got;
  pid_t launcher;

  if (pipe2 (pipe_fds, O_CLOEXEC) < 0)
    return husk_error_make (err, errno, "pipe");
  launcher = fork ();
  if (launcher < 0)
    {
      close (pipe_fds[0]);
      close (pipe_fds[1]);
      return husk_error_make (err, errno, "fork the pause process");
    }
  if (launcher == 0)
    {
      close (pipe_fds[0]);
      pause_launcher (pause_path, sandbox_id, setup, pipe_fds[1]);
    }
  close (pipe_fds[1]);
  do
    got = read (pipe_fds[0], &report, sizeof report);
  while (got < 0 && errno == EINTR);
  close (pipe_fds[0]);
  while (waitpid (launcher, NULL, 0) < 0 && errno == EINTR)
    ;
  if (got != (ssize_t) sizeof report)
    return husk_error_make (err, 0, "start the pause process: the launcher died");
  if (report.step == PAUSE_EXEC)
    return husk_error_make (err, report.errnum, "start the pause process: exec `%s`", pause_path);
  if (report.step == PAUSE_APPARMOR)
    return husk_error_make (err, report.errnum, "start the pause process: apply AppArmor profile `%s`",
                            setup->apparmor_profile);
  if (report.step != -1)
    return husk_error_make (err, report.errnum, "start the pause process");
  *pid = report.errnum;
  *start_time = sandbox_proc_start_time (*pid);
  if (*start_time == 0)
    return husk_error_make (err, 0, "the pause process (pid %d) died at once", *pid);
  return 0;
}

pid_t
sandbox_pause_find (const char *sandbox_id, unsigned long long *start_time)
{
  static const char name[] = "husk-pause"; /* argv[0] and its NUL, then the id */
  cleanup_dir DIR *proc = opendir ("/proc");
  struct dirent *de;

  while (proc != NULL && (de = readdir (proc)) != NULL)
    {
      cleanup_free char *path = NULL;
      cleanup_free char *cmdline = NULL;
      struct husk_error *err = NULL;
      int pid = atoi (de->d_name);
      size_t len = 0;

      if (pid <= 0)
        continue;
      path = xasprintf ("/proc/%d/cmdline", pid);
      if (husk_read_file (path, &cmdline, &len, &err) < 0)
        {
          husk_error_free (&err);
          continue;
        }
      if (len == sizeof name + strlen (sandbox_id) + 1 && memcmp (cmdline, name, sizeof name) == 0
          && strcmp (cmdline + sizeof name, sandbox_id) == 0
          && (*start_time = sandbox_proc_start_time (pid)) != 0)
        return pid;
    }
  *start_time = 0;
  return 0;
}

unsigned long long
sandbox_proc_start_time (pid_t pid)
{
  cleanup_free char *path = xasprintf ("/proc/%d/stat", pid);
  cleanup_free char *text = NULL;
  struct husk_error *err = NULL;
  unsigned long long start = 0;
  char state;
  char *p;

  if (husk_read_file (path, &text, NULL, &err) < 0)
    {
      husk_error_free (&err);
      return 0;
    }
  /* comm may hold spaces and parentheses: fields count from the last ')'. */
  p = strrchr (text, ')');
  if (p == NULL
      || sscanf (p + 1, " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu",
                 &state, &start)
             != 2)
    return 0;
  return state == 'Z' || state == 'X' ? 0 : start;
}

void
sandbox_pause_kill (pid_t pid, unsigned long long start_time)
{
  struct timespec tick = { 0, 10 * 1000 * 1000 };

  if (pid <= 0 || sandbox_proc_start_time (pid) != start_time)
    return;
  if (kill (pid, SIGKILL) < 0)
    return;
  /* Our own child only before the launcher exits; init reaps it. */
  for (int i = 0; i < 500 && sandbox_proc_start_time (pid) == start_time; i++)
    nanosleep (&tick, NULL);
}
