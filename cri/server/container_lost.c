/* A lost husk-monitor (see container_lost.h).  Processes are known by pid
 * and /proc start time, so a pid reused by another process is never taken
 * for the monitor or the init; pidfds tell the moment they exit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cri/server/container_lost.h"
#include "cri/container/container_store.h"
#include "cri/container/events.h"
#include "cri/config/runtime_exec.h"
#include "cri/server/service.h"
#include "husk/cleanup.h"
#include "husk/spawn.h"
#include "husk/util.h"
#include "runtime/state.h"

#define MONITOR_KEY "monitor:"
#define INIT_KEY "init:"
#define WAIT_KEY "wait:"
/* waitid's idtype for a pidfd (Linux 5.4; glibc names it from 2.36). */
#define LOST_P_PIDFD 3

/* ------------------------------------------------------------------ */
/* processes                                                            */

/* What /proc/<pid>/stat says: field 3 (state), 22 (starttime) and, since
 * Linux 3.5, 52 (a zombie's exit status, as waitpid reports it). */
struct proc_stat
{
  char state;
  unsigned long long start;
  bool has_exit_status;
  int exit_status;
};

static bool
proc_stat_read (pid_t pid, struct proc_stat *out)
{
  cleanup_free char *path = xasprintf ("/proc/%d/stat", (int) pid);
  cleanup_free char *text = NULL;
  char *field, *save = NULL;
  int n = 3;

  memset (out, 0, sizeof *out);
  if (pid <= 0 || husk_read_file (path, &text, NULL, NULL) < 0)
    return false;
  /* The command name (field 2) may hold spaces and parentheses. */
  field = strrchr (text, ')');
  if (field == NULL)
    return false;
  for (field = strtok_r (field + 1, " \n", &save); field; field = strtok_r (NULL, " \n", &save), n++)
    if (n == 3)
      out->state = field[0];
    else if (n == 22)
      out->start = strtoull (field, NULL, 10);
    else if (n == 52)
      {
        out->has_exit_status = true;
        out->exit_status = atoi (field);
      }
  return out->start != 0;
}

static bool
is_dead_state (char state)
{
  return state == 'Z' || state == 'X';
}

unsigned long long
cri_proc_start (pid_t pid)
{
  struct proc_stat st;

  return proc_stat_read (pid, &st) ? st.start : 0;
}

int64_t
cri_proc_start_ns (unsigned long long start)
{
  cleanup_free char *text = NULL;
  const char *btime;
  long ticks = sysconf (_SC_CLK_TCK);

  if (start == 0 || ticks <= 0 || husk_read_file ("/proc/stat", &text, NULL, NULL) < 0
      || (btime = strstr (text, "\nbtime ")) == NULL)
    return 0;
  return (strtoll (btime + 7, NULL, 10) * 1000000000LL)
         + (int64_t) (start * 1000000000ULL / (unsigned long) ticks);
}

bool
cri_is_monitor_of (pid_t pid, const char *id, char **log_path)
{
  cleanup_free char *path = xasprintf ("/proc/%d/cmdline", (int) pid);
  cleanup_free char *cmdline = NULL;
  const char *names_id = NULL, *log = NULL, *slash;
  size_t len = 0;

  if (husk_read_file (path, &cmdline, &len, NULL) < 0 || len == 0 || cmdline[len - 1] != '\0')
    return false;
  slash = strrchr (cmdline, '/');
  if (strcmp (slash ? slash + 1 : cmdline, "husk-monitor") != 0)
    return false;
  for (size_t i = 0; i < len; i += strlen (cmdline + i) + 1)
    {
      size_t next = i + strlen (cmdline + i) + 1;
      if (next >= len)
        break;
      if (strcmp (cmdline + i, "--id") == 0 && strcmp (cmdline + next, id) == 0)
        names_id = cmdline + next;
      else if (strcmp (cmdline + i, "--log-path") == 0)
        log = cmdline + next;
    }
  if (names_id && log_path)
    *log_path = log ? xstrdup (log) : NULL;
  return names_id != NULL;
}

pid_t
cri_find_monitor (const char *id, char **log_path)
{
  cleanup_dir DIR *proc = opendir ("/proc");
  struct dirent *de;
  struct proc_stat st;

  if (log_path)
    *log_path = NULL;
  while (proc && (de = readdir (proc)) != NULL)
    {
      pid_t pid = (pid_t) atoi (de->d_name);
      if (pid > 1 && cri_is_monitor_of (pid, id, log_path) && proc_stat_read (pid, &st)
          && !is_dead_state (st.state))
        return pid;
      if (log_path)
        free (steal_pointer (log_path));
    }
  return 0;
}

bool
cri_monitor_alive (const struct cri_container *c)
{
  struct proc_stat st;

  if (c->monitor_pid <= 0 || !proc_stat_read (c->monitor_pid, &st) || is_dead_state (st.state))
    return false;
  return c->monitor_start ? st.start == c->monitor_start : cri_is_monitor_of (c->monitor_pid, c->id, NULL);
}

/* ------------------------------------------------------------------ */
/* the exit file huskd writes for a lost monitor                        */

/* Linux 6.15's PIDFD_GET_INFO (its first 64 bytes), for the exit status
 * of a process that is not our child, once it has been reaped. */
struct lost_pidfd_info
{
  uint64_t mask, cgroupid;
  uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
  int32_t exit_code;
};
#define LOST_PIDFD_GET_INFO _IOWR (0xFF, 11, struct lost_pidfd_info)
#define LOST_PIDFD_INFO_EXIT (1ULL << 3)

/* How the init behind PIDFD ended, as waitpid reports it: from /proc
 * while it is a zombie (the same process: its start time), else from the
 * pidfd once it has been reaped (Linux 6.15; before the reap that answer
 * can be a bare 0, so it is not asked while /proc still has it). */
static bool
init_exit_status (const struct cri_container *c, int pidfd, int *wait_status)
{
  struct lost_pidfd_info info = { .mask = LOST_PIDFD_INFO_EXIT };
  struct proc_stat st;
  bool present = c->pid_start && proc_stat_read (c->pid, &st) && st.start == c->pid_start;

  if (present && st.state == 'Z' && st.has_exit_status)
    {
      *wait_status = st.exit_status;
      return true;
    }
  if (!present && pidfd >= 0 && ioctl (pidfd, LOST_PIDFD_GET_INFO, &info) == 0
      && (info.mask & LOST_PIDFD_INFO_EXIT))
    {
      *wait_status = info.exit_code;
      return true;
    }
  return false;
}

/* The exit file of C as its monitor would have written it, plus a reason
 * and a message; never over one that is there (RENAME_NOREPLACE: the
 * monitor's own, or another thread's stand-in). */
static void
write_lost_exit (struct cri_service *svc, const struct cri_container *c, bool known, int wait_status,
                 const char *follower)
{
  int sig = known && WIFSIGNALED (wait_status) ? WTERMSIG (wait_status) : 0;
  int code = !known ? 255 : sig ? 128 + sig : WEXITSTATUS (wait_status);
  cleanup_free char *path = container_store_exit_path (svc->containers, c->id);
  cleanup_free char *tmp = xasprintf ("%s/.lost-%s.%d", svc->containers->exit_dir, c->id, (int) gettid ());
  cleanup_free char *finished_at = state_now_rfc3339 ();
  cleanup_free char *message
      = follower ? xasprintf ("husk-monitor (pid %d) was lost; huskd followed the container with `%s`%s",
                              (int) c->monitor_pid, follower, known ? "" : ", which gave no exit status")
        : known  ? xasprintf ("husk-monitor (pid %d) was lost; huskd saw the container's init (pid %d) exit",
                              (int) c->monitor_pid, (int) c->pid)
                 : xasprintf ("husk-monitor (pid %d) was lost and the container's init (pid %d) is gone: its"
                               " exit status is unknown",
                              (int) c->monitor_pid, (int) c->pid);
  json_t *doc
      = json_pack ("{s:i, s:i, s:b, s:s, s:s, s:s}", "exit_code", code, "signal", sig, "oom_killed", 0,
                   "finished_at", finished_at, "reason", CRI_REASON_MONITOR_LOST, "message", message);
  cleanup_free char *text = json_dumps (doc, JSON_COMPACT);
  struct husk_error *err = NULL;

  json_decref (doc);
  if (husk_write_file_replace (tmp, text, strlen (text), 0644, &err) < 0)
    {
      husk_warn ("container %s: write the exit file of a lost monitor: %s", c->id, err->msg);
      husk_error_free (&err);
      return;
    }
  if (renameat2 (AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) < 0)
    {
      if (errno != EEXIST)
        husk_warn ("container %s: rename `%s` to `%s`: %s", c->id, tmp, path, strerror (errno));
      unlink (tmp);
      return;
    }
  husk_warn ("container %s: %s; recorded as exit code %d, reason " CRI_REASON_MONITOR_LOST, c->id, message,
             code);
}

static bool
has_exit_file (struct cri_service *svc, const char *id)
{
  cleanup_free char *path = container_store_exit_path (svc->containers, id);

  return access (path, F_OK) == 0;
}

/* ------------------------------------------------------------------ */
/* watching                                                             */

/* The container ID as it is now, if it runs and has no exit file yet. */
static struct cri_container *
running (struct cri_service *svc, const char *id)
{
  struct cri_container *c = NULL;
  struct husk_error *ignored = NULL;

  if (container_lookup (svc->containers, id, &c, &ignored) < 0)
    husk_error_free (&ignored);
  else if (c->state != CRI_CONTAINER_RUNNING || has_exit_file (svc, id))
    cri_container_free (steal_pointer (&c));
  return c;
}

static void
on_init_exit (const char *key, int pidfd, void *user)
{
  struct cri_service *svc = user;
  struct cri_container *c = running (svc, key + strlen (INIT_KEY));
  int wait_status = 0;
  bool known;

  if (c)
    {
      known = init_exit_status (c, pidfd, &wait_status);
      write_lost_exit (svc, c, known, wait_status, NULL);
    }
  cri_container_free (c);
}

/* Whether the runtime still has C's init (a record without the init's
 * start time, written before huskd kept it). */
static bool
runtime_has_init (struct cri_service *svc, const struct cri_container *c)
{
  const struct huskd_runtime *rt = huskd_config_runtime (svc->cfg, c->runtime_handler);
  cleanup_free char *status = NULL;
  struct husk_error *ignored = NULL;
  pid_t pid = 0;

  if (rt == NULL || cri_runtime_state (rt, c->id, &status, &pid, &ignored) < 0)
    {
      husk_error_free (&ignored);
      return false;
    }
  return strcmp (status, "stopped") != 0 && pid == c->pid;
}

/* A pidfd of C's init, -1 when it has exited (a zombie counts as alive
 * here: its pidfd reports the exit at once, with its status). */
static int
open_init (struct cri_service *svc, const struct cri_container *c)
{
  int pidfd = c->pid > 0 ? pidfd_open (c->pid, 0) : -1;
  struct proc_stat st;
  bool same;

  if (pidfd < 0)
    return -1;
  /* Opened first, checked after: a process alive now with the start time
   * the record holds was already that pid when the pidfd was opened. */
  if (c->pid_start)
    same = proc_stat_read (c->pid, &st) && st.start == c->pid_start;
  else
    same = runtime_has_init (svc, c);
  if (!same)
    {
      close (pidfd);
      return -1;
    }
  return pidfd;
}

/* A handler that owns the pod (runsc): C's pid is its sandbox's, which
 * outlives C, so huskd runs `RUNTIME wait ID` in the lost monitor's
 * place, its output into STATE/exits/.wait-ID, and writes the exit file
 * from it when it ends. */
struct wait_spawn
{
  char *const *argv;
  int out_fd, null_fd;
  sigset_t mask;
};

HUSK_SPAWN_CHILD static int
wait_child (void *arg)
{
  struct wait_spawn *w = arg;

  if (dup2 (w->null_fd, 0) < 0 || dup2 (w->out_fd, 1) < 0 || dup2 (w->null_fd, 2) < 0)
    _exit (127);
  setsid ();
  husk_spawn_child_signals (&w->mask);
  execv (w->argv[0], w->argv);
  _exit (127);
}

static char *
wait_output_path (struct cri_service *svc, const char *id)
{
  return xasprintf ("%s/.wait-%s", svc->containers->exit_dir, id);
}

/* `wait`'s {"id","exitStatus"}: a shell's exit code (128 + N for signal
 * N), as the monitor takes it. */
static bool
wait_output_status (const char *path, int *wait_status)
{
  json_t *doc = json_load_file (path, JSON_DISABLE_EOF_CHECK, NULL);
  json_t *status = json_object_get (doc, "exitStatus");
  bool known
      = json_is_integer (status) && json_integer_value (status) >= 0 && json_integer_value (status) <= 255;

  if (known)
    *wait_status = W_EXITCODE ((int) json_integer_value (status), 0);
  json_decref (doc);
  return known;
}

static void
on_wait_exit (const char *key, int pidfd, void *user)
{
  struct cri_service *svc = user;
  const char *id = key + strlen (WAIT_KEY);
  struct cri_container *c = running (svc, id);
  cleanup_free char *path = wait_output_path (svc, id);
  siginfo_t info;
  int wait_status = 0;

  /* Ours to reap: huskd's own child. */
  waitid ((idtype_t) LOST_P_PIDFD, (id_t) pidfd, &info, WEXITED);
  if (c)
    {
      const struct huskd_runtime *rt = huskd_config_runtime (svc->cfg, c->runtime_handler);
      cleanup_free char *follower = xasprintf ("%s wait", rt ? rt->path : "runtime");
      bool known = wait_output_status (path, &wait_status);

      write_lost_exit (svc, c, known, wait_status, follower);
    }
  unlink (path);
  cri_container_free (c);
}

static int
follow_with_wait (struct cri_service *svc, const struct huskd_runtime *rt, const struct cri_container *c,
                  struct husk_error **err)
{
  cleanup_free char *key = xasprintf (WAIT_KEY "%s", c->id);
  cleanup_free char *path = wait_output_path (svc, c->id);
  cleanup_free const char **argv = cri_runtime_argv (rt, (const char *[]){ "wait", c->id, NULL }, 0);
  /* No O_TRUNC: a follower of another thread (or of a huskd before a
   * restart) may have written the status already; each writes the same
   * line from offset 0, and the reader stops after the first JSON value. */
  cleanup_close int out_fd = open (path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  cleanup_close int null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC);
  struct wait_spawn w = { .argv = (char *const *) argv, .out_fd = out_fd, .null_fd = null_fd };
  pid_t pid;
  int pidfd, watched;

  if (cri_events_watching_pid (svc->events, key))
    return 0;
  if (out_fd < 0 || null_fd < 0)
    return husk_error_make (err, errno, "open `%s`", out_fd < 0 ? path : "/dev/null");
  sigemptyset (&w.mask);
  pid = husk_spawn (wait_child, &w);
  if (pid < 0)
    return husk_error_make (err, errno, "start `%s wait %s`", rt->path, c->id);
  pidfd = pidfd_open (pid, 0);
  if (pidfd < 0)
    {
      kill (pid, SIGKILL);
      waitpid (pid, NULL, 0);
      return husk_error_make (err, errno, "pidfd_open of `%s wait` (pid %d)", rt->path, (int) pid);
    }
  watched = cri_events_watch_pid (svc->events, pidfd, key, on_wait_exit, svc, err);
  /* 0: another thread's follower came first; this one is not needed. */
  if (watched <= 0)
    {
      kill (pid, SIGKILL);
      waitpid (pid, NULL, 0);
      return watched;
    }
  husk_warn ("container %s: husk-monitor (pid %d) is gone without an exit file; huskd follows it with `%s "
             "wait` (pid %d)",
             c->id, (int) c->monitor_pid, rt->path, (int) pid);
  return 0;
}

void
cri_monitor_lost (struct cri_service *svc, const struct cri_container *c)
{
  cleanup_free char *key = xasprintf (INIT_KEY "%s", c->id);
  struct husk_error *err = NULL;
  int pidfd;

  const struct huskd_runtime *rt = huskd_config_runtime (svc->cfg, c->runtime_handler);

  if (c->state != CRI_CONTAINER_RUNNING || has_exit_file (svc, c->id)
      || cri_events_watching_pid (svc->events, key))
    return;
  if (rt && rt->owns_pod)
    {
      if (follow_with_wait (svc, rt, c, &err) < 0)
        {
          husk_warn ("container %s: %s", c->id, err->msg);
          husk_error_free (&err);
          write_lost_exit (svc, c, false, 0, NULL);
        }
      return;
    }
  pidfd = open_init (svc, c);
  if (pidfd < 0)
    {
      write_lost_exit (svc, c, false, 0, NULL);
      return;
    }
  switch (cri_events_watch_pid (svc->events, pidfd, key, on_init_exit, svc, &err))
    {
    case 1:
      husk_warn ("container %s: husk-monitor (pid %d) is gone without an exit file; huskd watches the init"
                 " (pid %d) in its place",
                 c->id, (int) c->monitor_pid, (int) c->pid);
      break;
    case -1:
      husk_warn ("container %s: %s", c->id, err->msg);
      husk_error_free (&err);
      break;
    }
}

static void
on_monitor_exit (const char *key, int pidfd, void *user)
{
  struct cri_service *svc = user;
  struct cri_container *c = running (svc, key + strlen (MONITOR_KEY));

  (void) pidfd;
  /* An ordinary exit renamed the exit file into place before the monitor
   * exited: the lookup folded it and C no longer runs. */
  if (c)
    cri_monitor_lost (svc, c);
  cri_container_free (c);
}

void
cri_watch_monitor (struct cri_service *svc, const struct cri_container *c)
{
  cleanup_free char *key = xasprintf (MONITOR_KEY "%s", c->id);
  struct husk_error *err = NULL;
  int pidfd;

  if (svc->events == NULL || c->state != CRI_CONTAINER_RUNNING || cri_events_watching_pid (svc->events, key))
    return;
  pidfd = c->monitor_pid > 0 ? pidfd_open (c->monitor_pid, 0) : -1;
  /* Checked after the open, as for the init. */
  if (pidfd < 0 || !cri_monitor_alive (c))
    {
      if (pidfd >= 0)
        close (pidfd);
      cri_monitor_lost (svc, c);
      return;
    }
  if (cri_events_watch_pid (svc->events, pidfd, key, on_monitor_exit, svc, &err) < 0)
    {
      husk_warn ("container %s: %s", c->id, err->msg);
      husk_error_free (&err);
    }
}
