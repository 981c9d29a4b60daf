/* The exit file: how the container's init ended, in the form huskd turns
 * into ContainerStatus (exit code, reason OOMKilled, finished time). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "cri/monitor/exit.h"
#include "cri/monitor/log.h"
#include "runtime/cgroup/cgroup.h"

void
monitor_exit_from_wait_status (int wait_status, const struct timespec *finished_at, struct monitor_exit *exit)
{
  exit->signal = WIFSIGNALED (wait_status) ? WTERMSIG (wait_status) : 0;
  exit->exit_code = exit->signal ? 128 + exit->signal : WEXITSTATUS (wait_status);
  exit->oom_killed = false;
  exit->finished_at = *finished_at;
}

char *
monitor_exit_json (const struct monitor_exit *exit)
{
  char finished_at[LOG_TIMESTAMP_LEN + 1];
  json_t *doc;
  char *text;

  log_format_timestamp (&exit->finished_at, finished_at);
  doc = json_pack ("{s:i, s:i, s:b, s:s}", "exit_code", exit->exit_code, "signal", exit->signal, "oom_killed",
                   exit->oom_killed, "finished_at", finished_at);
  text = json_dumps (doc, JSON_COMPACT);
  json_decref (doc);
  if (text == NULL)
    abort (); /* only out of memory */
  return text;
}

int
monitor_exit_write (const char *exit_dir, const char *id, const struct monitor_exit *exit,
                    struct husk_error **err)
{
  cleanup_free char *path = xasprintf ("%s/%s", exit_dir, id);
  cleanup_free char *json = monitor_exit_json (exit);
  cleanup_free char *line = xasprintf ("%s\n", json);

  if (husk_write_file_replace (path, line, strlen (line), 0644, err) < 0)
    return husk_error_wrap (err, "write exit file");
  return 0;
}

char *
monitor_reopen_answer_path (const char *exit_dir, const char *id)
{
  return xasprintf ("%s/%s.reopen", exit_dir, id);
}

int
monitor_reopen_answer_write (const char *exit_dir, const char *id, long long began_ns,
                             const struct husk_error *failure, struct husk_error **err)
{
  cleanup_free char *path = monitor_reopen_answer_path (exit_dir, id);
  json_t *doc = json_pack ("{s:I}", "monotonic_ns", (json_int_t) began_ns);
  cleanup_free char *text = NULL;

  if (failure)
    {
      json_t *message = json_string (failure->msg);

      /* JSON holds UTF-8 only: a path that is not keeps its error's kind. */
      if (message == NULL)
        message = json_sprintf ("open the log file: %s", strerror (failure->errnum));
      json_object_set_new (doc, "errno", json_integer (failure->errnum));
      json_object_set_new (doc, "error", message);
    }
  text = json_dumps (doc, JSON_COMPACT);
  json_decref (doc);
  if (text == NULL)
    abort (); /* only out of memory */
  if (husk_write_file_replace (path, text, strlen (text), 0644, err) < 0)
    return husk_error_wrap (err, "answer the log reopen");
  return 0;
}

/* MOUNT/CGROUP/FILE when it can be read. */
static char *
readable_in (const char *mount, const char *cgroup, const char *file)
{
  char *path;

  if (mount == NULL)
    return NULL;
  path = xasprintf ("%s%s/%s", mount, cgroup, file);
  if (access (path, R_OK) == 0)
    return path;
  free (path);
  return NULL;
}

/* "N:a,memory,b:/path": true if the line's controllers list memory. */
static bool
v1_memory_line (const char *line, const char **cgroup)
{
  const char *controllers = strchr (line, ':');
  const char *end = controllers ? strchr (controllers + 1, ':') : NULL;

  if (end == NULL)
    return false;
  for (const char *p = controllers + 1; p < end; p += strcspn (p, ",:") + 1)
    if (strncmp (p, "memory", 6) == 0 && (p[6] == ',' || p[6] == ':'))
      {
        *cgroup = end + 1;
        return true;
      }
  return false;
}

char *
monitor_oom_events_path (pid_t pid)
{
  cleanup_free char *proc_path = xasprintf ("/proc/%d/cgroup", (int) pid);
  cleanup_free char *content = NULL;
  char *line, *save = NULL, *found = NULL;
  const char *cgroup;

  if (husk_read_file (proc_path, &content, NULL, NULL) < 0)
    return NULL;
  /* v2's memory.events where the unified hierarchy has memory, else the
   * v1 memory controller's memory.oom_control: both count "oom_kill N". */
  for (line = strtok_r (content, "\n", &save); line && found == NULL; line = strtok_r (NULL, "\n", &save))
    if (husk_str_has_prefix (line, "0::"))
      found = readable_in (cgroup_unified_mount (), line + 3, "memory.events");
    else if (v1_memory_line (line, &cgroup))
      found = readable_in (cgroup_v1_mount ("memory"), cgroup, "memory.oom_control");
  return found;
}

unsigned long long
monitor_oom_kills (const char *events_path)
{
  cleanup_free char *content = NULL;
  const char *field;

  if (events_path == NULL || husk_read_file (events_path, &content, NULL, NULL) < 0)
    return 0;
  for (field = content; (field = strstr (field, "oom_kill ")) != NULL; field++)
    if (field == content || field[-1] == '\n')
      return strtoull (field + strlen ("oom_kill "), NULL, 10);
  return 0;
}
