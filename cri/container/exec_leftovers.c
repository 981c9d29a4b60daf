/* Exec pid files left by a huskd that died while its execs ran (see
 * exec_leftovers.h).  A pid is only killed while it still names the
 * exec's process: a recycled pid started after the file was written. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cri/container/exec_leftovers.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define ID12 12

static int64_t
clock_ns (clockid_t clock)
{
  struct timespec ts;

  clock_gettime (clock, &ts);
  return (int64_t) ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* When PID started, in unix nanoseconds rounded down to a clock tick (the
 * boot's moment from CLOCK_BOOTTIME, not /proc/stat's whole seconds); 0
 * when it is gone or a zombie. */
static int64_t
start_ns (pid_t pid)
{
  cleanup_free char *path = xasprintf ("/proc/%d/stat", (int) pid);
  cleanup_free char *text = NULL;
  unsigned long long ticks = 0;
  long hz = sysconf (_SC_CLK_TCK);
  char *field, *save = NULL;
  int n = 0;

  if (husk_read_file (path, &text, NULL, NULL) < 0 || (field = strrchr (text, ')')) == NULL || hz <= 0)
    return 0;
  /* After the comm: state (field 3) ... starttime (field 22). */
  for (field = strtok_r (field + 1, " ", &save); field; field = strtok_r (NULL, " ", &save), n++)
    {
      if (n == 0 && (field[0] == 'Z' || field[0] == 'X'))
        return 0;
      if (n == 19)
        {
          ticks = strtoull (field, NULL, 10);
          break;
        }
    }
  if (ticks == 0)
    return 0;
  return clock_ns (CLOCK_REALTIME) - clock_ns (CLOCK_BOOTTIME)
         + (int64_t) (ticks * (1000000000ULL / (unsigned long) hz));
}

bool
cri_exec_pid_is_ours (const char *path, pid_t pid, const char *id12)
{
  cleanup_free char *cgroup_path = xasprintf ("/proc/%d/cgroup", (int) pid);
  cleanup_free char *cgroups = NULL;
  struct stat st;
  int64_t started = start_ns (pid);

  if (started == 0 || stat (path, &st) < 0)
    return false;
  /* A clock tick of slack: a new file's mtime may come from the kernel's
   * coarse clock, up to a jiffy behind the moment it was written, and
   * `husk exec` writes it within a millisecond of the fork. */
  if (started > (int64_t) st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec
                    + 1000000000LL / sysconf (_SC_CLK_TCK))
    return false;
  return husk_read_file (cgroup_path, &cgroups, NULL, NULL) == 0 && strstr (cgroups, id12) != NULL;
}

/* exec-<12 hex or more>-...: the container's id (its first 12 hex digits)
 * into ID12. */
static bool
parse_name (const char *name, char id12[ID12 + 1])
{
  if (strncmp (name, "exec-", 5) != 0 || strspn (name + 5, "0123456789abcdef") < ID12)
    return false;
  memcpy (id12, name + 5, ID12);
  id12[ID12] = '\0';
  return true;
}

static bool
ends_with (const char *name, const char *suffix)
{
  size_t len = strlen (name), n = strlen (suffix);

  return len > n && strcmp (name + len - n, suffix) == 0;
}

/* Kills what the pid file PATH names, when it is still the exec's. */
static bool
kill_named (const char *path, const char *id12)
{
  cleanup_free char *text = NULL;
  long long pid;

  if (husk_read_file (path, &text, NULL, NULL) < 0)
    return false;
  text[strcspn (text, "\n")] = '\0';
  if (husk_parse_int64 (text, 2, INT32_MAX, &pid) < 0 || !cri_exec_pid_is_ours (path, (pid_t) pid, id12))
    return false;
  if (kill ((pid_t) pid, SIGKILL) < 0)
    return false;
  husk_warn ("exec process %lld of container %s (pid file %s) outlived its huskd: killed", pid, id12, path);
  return true;
}

/* The exec files in STATE_DIR of the container whose id starts with
 * ID_PREFIX (every container when NULL). */
static int
sweep (const char *state_dir, const char *id_prefix)
{
  cleanup_dir DIR *dir = opendir (state_dir);
  struct dirent *de;
  char id12[ID12 + 1];
  int killed = 0;

  while (dir && (de = readdir (dir)) != NULL)
    {
      cleanup_free char *path = NULL;

      if (!parse_name (de->d_name, id12) || (id_prefix && strncmp (id12, id_prefix, ID12) != 0)
          || !(ends_with (de->d_name, ".pid") || ends_with (de->d_name, ".sock")))
        continue;
      path = xasprintf ("%s/%s", state_dir, de->d_name);
      if (ends_with (de->d_name, ".pid") && kill_named (path, id12))
        killed++;
      if (unlink (path) < 0 && errno != ENOENT)
        husk_warn ("remove `%s`: %s", path, strerror (errno));
    }
  return killed;
}

int
cri_exec_leftovers_recover (const char *state_dir)
{
  return sweep (state_dir, NULL);
}

int
cri_exec_leftovers_remove (const char *state_dir, const char *id)
{
  return strlen (id) >= ID12 ? sweep (state_dir, id) : 0;
}
