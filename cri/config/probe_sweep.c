/* What a huskd killed during its start-up probe (runtime_probe.c) leaves
 * behind, swept before the next probe: its runtime commands still running,
 * its trial containers (a `runc init` waiting for a start that never
 * comes) and their cgroups /husk-probe-PID-HANDLER in every hierarchy. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cri/config/probe_sweep.h"
#include "cri/config/runtime_exec.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define SWEEP_TIMEOUT_MS 10000
/* How long the killed processes of a cgroup get to leave it. */
#define CGROUP_EMPTY_TRIES 100
#define CGROUP_EMPTY_PAUSE_NS (20 * 1000 * 1000)

/* Whether the NUL-separated ARGS (LEN bytes) hold a path under DIR. */
static bool
args_name_dir (const char *args, size_t len, const char *dir)
{
  size_t dir_len = strlen (dir);

  for (const char *arg = args; arg < args + len; arg += strlen (arg) + 1)
    if (strncmp (arg, dir, dir_len) == 0 && arg[dir_len] == '/')
      return true;
  return false;
}

static bool
is_pid_name (const char *name)
{
  if (*name == '\0')
    return false;
  for (; *name; name++)
    if (!isdigit ((unsigned char) *name))
      return false;
  return true;
}

/* SIGKILLs every process whose command line names a path under PROBE_DIR
 * (a trial's --root and --bundle are there): a dead huskd's runtime
 * command still running, with its process group (the probe gives each
 * its own).  Another huskd never uses this state dir at the same time. */
static unsigned
kill_probe_commands (const char *probe_dir)
{
  cleanup_dir DIR *proc = opendir ("/proc");
  struct dirent *entry;
  unsigned killed = 0;

  while (proc && (entry = readdir (proc)))
    {
      cleanup_free char *path = xasprintf ("/proc/%s/cmdline", entry->d_name);
      cleanup_free char *args = NULL;
      size_t len = 0;
      pid_t pid;

      if (!is_pid_name (entry->d_name) || (pid = (pid_t) atoi (entry->d_name)) == getpid ()
          || husk_read_file (path, &args, &len, NULL) < 0 || !args_name_dir (args, len, probe_dir))
        continue;
      if (getpgid (pid) == pid)
        kill (-pid, SIGKILL);
      kill (pid, SIGKILL);
      killed++;
    }
  return killed;
}

/* `RT --root ROOT delete --force ID` for each trial container in ROOT. */
static unsigned
delete_trials (const struct huskd_runtime *rt, const char *root)
{
  cleanup_dir DIR *dir = opendir (root);
  struct huskd_runtime trial_rt = *rt;
  struct dirent *entry;
  unsigned deleted = 0;

  trial_rt.root = (char *) root;
  while (dir && (entry = readdir (dir)))
    {
      cleanup_free const char **argv = NULL;
      struct cri_child_run run = { .timeout_ms = SWEEP_TIMEOUT_MS, .output_max = 4096 };
      struct husk_error *err = NULL;

      if (!husk_str_has_prefix (entry->d_name, CRI_PROBE_PREFIX))
        continue;
      argv = cri_runtime_argv (&trial_rt, (const char *[]){ "delete", "--force", entry->d_name, NULL }, 0);
      run.argv = (char *const *) argv;
      if (cri_child_run (&run, &err) < 0)
        husk_warn ("runtime handler `%s`: delete the stale trial `%s`: %s", rt->name, entry->d_name,
                   err->msg);
      husk_error_free (&err);
      cri_child_run_clear (&run);
      deleted++;
    }
  return deleted;
}

/* Whether the huskd that named the cgroup NAME (husk-probe-PID-HANDLER)
 * is gone: PID is this process (its probe has not begun), no process, or
 * not a huskd.  A live huskd's cgroup is its probe in progress; it
 * removes that itself. */
static bool
owner_gone (const char *name)
{
  cleanup_free char *comm_path = NULL, *comm = NULL;
  long long pid;
  char *end;

  pid = strtoll (name + strlen (CRI_PROBE_PREFIX), &end, 10);
  if (end == name + strlen (CRI_PROBE_PREFIX) || *end != '-' || pid <= 0 || pid > INT32_MAX)
    return false;
  if ((pid_t) pid == getpid () || (kill ((pid_t) pid, 0) < 0 && errno == ESRCH))
    return true;
  comm_path = xasprintf ("/proc/%lld/comm", pid);
  if (husk_read_file (comm_path, &comm, NULL, NULL) < 0)
    return true;
  return strcmp (comm, "huskd\n") != 0;
}

/* SIGKILLs every process in the cgroup DIR and below; DIR's children are
 * rmdir'd on the way back up.  True when DIR held nothing more. */
static bool
kill_and_remove_below (const char *dir)
{
  cleanup_free char *procs_path = xasprintf ("%s/cgroup.procs", dir);
  cleanup_free char *procs = NULL;
  cleanup_dir DIR *d = opendir (dir);
  struct dirent *entry;
  bool empty = true;

  if (husk_read_file (procs_path, &procs, NULL, NULL) == 0)
    for (char *line = strtok (procs, "\n"); line; line = strtok (NULL, "\n"))
      {
        pid_t pid = (pid_t) atoi (line);

        empty = false;
        /* 0 is a process of another pid namespace: kill (0) would be ours. */
        if (pid > 0 && pid != getpid ())
          kill (pid, SIGKILL);
      }
  while (d && (entry = readdir (d)))
    {
      cleanup_free char *child = NULL;

      if (entry->d_type != DT_DIR || strcmp (entry->d_name, ".") == 0 || strcmp (entry->d_name, "..") == 0)
        continue;
      child = xasprintf ("%s/%s", dir, entry->d_name);
      if (!kill_and_remove_below (child) || (rmdir (child) < 0 && errno != ENOENT))
        empty = false;
    }
  return empty;
}

/* Kills what the stale cgroup DIR holds and removes it, giving the killed
 * processes a moment to leave it. */
static bool
remove_stale_cgroup (const char *dir)
{
  struct timespec pause = { 0, CGROUP_EMPTY_PAUSE_NS };

  for (int i = 0; i < CGROUP_EMPTY_TRIES; i++)
    {
      kill_and_remove_below (dir);
      if (rmdir (dir) == 0 || errno == ENOENT)
        return true;
      nanosleep (&pause, NULL);
    }
  husk_warn ("a stale probe cgroup stays: rmdir %s: %s", dir, strerror (errno));
  return false;
}

/* Every top-level husk-probe-PID-* cgroup of a gone huskd, in every
 * hierarchy (runtimes make the trial's cgroup in each). */
static unsigned
sweep_cgroups (void)
{
  cleanup_strv char **mounts = husk_cgroup_mounts (false);
  unsigned removed = 0;

  for (size_t i = 0; mounts[i]; i++)
    {
      cleanup_dir DIR *d = opendir (mounts[i]);
      struct dirent *entry;

      while (d && (entry = readdir (d)))
        {
          cleanup_free char *dir = NULL;

          if (entry->d_type != DT_DIR || !husk_str_has_prefix (entry->d_name, CRI_PROBE_PREFIX)
              || !owner_gone (entry->d_name))
            continue;
          dir = xasprintf ("%s/%s", mounts[i], entry->d_name);
          removed += remove_stale_cgroup (dir);
        }
    }
  return removed;
}

void
cri_probe_sweep (const struct huskd_config *cfg, const char *probe_dir)
{
  unsigned killed = kill_probe_commands (probe_dir), deleted = 0, removed;
  struct husk_error *err = NULL;

  for (size_t i = 0; i < cfg->n_runtimes; i++)
    {
      const struct huskd_runtime *rt = &cfg->runtimes[i];
      cleanup_free char *root = xasprintf ("%s/%s/root", probe_dir, cri_probe_dir_name (rt));

      if (!rt->owns_pod)
        deleted += delete_trials (rt, root);
    }
  removed = sweep_cgroups ();
  if (husk_rm_rf (probe_dir, &err) < 0)
    {
      husk_warn ("remove the stale probe dir %s: %s", probe_dir, err->msg);
      husk_error_free (&err);
    }
  if (killed + deleted + removed)
    husk_log (HUSK_LOG_INFO,
              "swept what a huskd killed during its runtime probe left: %u runtime commands killed, %u trial "
              "containers deleted, %u cgroups removed",
              killed, deleted, removed);
}
