/* Container records under --root/<id>/ and the status derived from them. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/state.h"

#define STATE_FILE "state.json"
#define MAX_ID_LEN 1024

const char *
container_status_name (enum container_status status)
{
  static const char *const names[] = {
    [STATUS_CREATING] = "creating", [STATUS_CREATED] = "created", [STATUS_RUNNING] = "running",
    [STATUS_PAUSED] = "paused",     [STATUS_STOPPED] = "stopped",
  };
  return names[status];
}

int
state_validate_id (const char *id, struct husk_error **err)
{
  size_t len = id ? strlen (id) : 0;

  if (len == 0)
    return husk_error_make (err, 0, "container id must not be empty");
  if (len > MAX_ID_LEN)
    return husk_error_make (err, 0, "container id is longer than %d characters", MAX_ID_LEN);
  if (strcmp (id, ".") == 0 || strcmp (id, "..") == 0 || strchr (id, '/'))
    return husk_error_make (err, 0, "invalid container id `%s`: must not be `.`, `..` or contain `/`", id);
  for (const char *c = id; *c; c++)
    if ((unsigned char) *c < 0x20 || *c == 0x7f)
      return husk_error_make (err, 0, "invalid container id: contains a control character");
  return 0;
}

void
state_init_new (struct container_state *state, const char *root, const char *id, const char *bundle,
                const char *rootfs, bool systemd_cgroup, char **annotations)
{
  state->id = (char *) id;
  state->state_dir = state_dir_path (root, id);
  state->bundle = xstrdup (bundle);
  state->rootfs = xstrdup (rootfs);
  state->created = state_now_rfc3339 ();
  state->owner = getuid ();
  state->systemd_cgroup = systemd_cgroup;
  state->annotations = annotations;
}

char *
state_dir_path (const char *root, const char *id)
{
  return xasprintf ("%s/%s", root, id);
}

char *
state_fifo_path (const char *state_dir)
{
  return xasprintf ("%s/exec.fifo", state_dir);
}

char *
state_config_path (const char *state_dir)
{
  return xasprintf ("%s/config.json", state_dir);
}

static json_t *
annotations_to_json (char **annotations)
{
  json_t *obj = json_object ();

  for (size_t i = 0; annotations && annotations[i] && annotations[i + 1]; i += 2)
    json_object_set_new (obj, annotations[i], json_string (annotations[i + 1]));
  return obj;
}

static char **
annotations_from_json (json_t *obj)
{
  size_t n = json_is_object (obj) ? json_object_size (obj) : 0, i = 0;
  char **out = xcalloc (2 * n + 1, sizeof (char *));
  const char *key;
  json_t *value;

  if (n == 0)
    return out;
  json_object_foreach (obj, key, value)
  {
    if (!json_is_string (value))
      continue;
    out[i++] = xstrdup (key);
    out[i++] = xstrdup (json_string_value (value));
  }
  return out;
}

static json_t *
json_string_or_null (const char *s)
{
  return s ? json_string (s) : json_null ();
}

int
state_write (const struct container_state *state, struct husk_error **err)
{
  cleanup_free char *path = xasprintf ("%s/%s", state->state_dir, STATE_FILE);
  cleanup_free char *text = NULL;
  json_t *doc = json_pack ("{s:s, s:I, s:I, s:o, s:o, s:o, s:o, s:I, s:b, s:b, s:o}", "id", state->id, "pid",
                           (json_int_t) state->pid, "pid_start", (json_int_t) state->pid_start, "bundle",
                           json_string_or_null (state->bundle), "rootfs", json_string_or_null (state->rootfs),
                           "cgroup_path", json_string_or_null (state->cgroup_path), "created",
                           json_string_or_null (state->created), "owner", (json_int_t) state->owner,
                           "creating", state->creating, "systemd_cgroup", state->systemd_cgroup,
                           "annotations", annotations_to_json (state->annotations));

  if (doc == NULL)
    return husk_error_make (err, 0, "encode state of `%s`", state->id);
  text = json_dumps (doc, JSON_COMPACT);
  json_decref (doc);
  return husk_write_file_replace (path, text, strlen (text), 0600, err);
}

static char *
dup_member (json_t *doc, const char *key)
{
  json_t *v = json_object_get (doc, key);
  return json_is_string (v) ? xstrdup (json_string_value (v)) : NULL;
}

int
state_load (const char *root, const char *id, struct container_state **out, struct husk_error **err)
{
  cleanup_free char *dir = NULL;
  cleanup_free char *path = NULL;
  struct container_state *state;
  json_error_t jerr;
  json_t *doc;

  if (state_validate_id (id, err) < 0)
    return -1;
  dir = state_dir_path (root, id);
  path = xasprintf ("%s/%s", dir, STATE_FILE);
  doc = json_load_file (path, 0, &jerr);
  if (doc == NULL)
    {
      if (access (dir, F_OK) < 0)
        return husk_error_make (err, 0, "container `%s` does not exist", id);
      if (access (path, F_OK) < 0)
        return husk_error_make (err, 0, "container `%s` is being created", id);
      return husk_error_make (err, 0, "%s: line %d column %d: %s", path, jerr.line, jerr.column, jerr.text);
    }
  state = xcalloc (1, sizeof *state);
  state->id = xstrdup (id);
  state->state_dir = steal_pointer (&dir);
  state->pid = (pid_t) json_integer_value (json_object_get (doc, "pid"));
  state->pid_start = (unsigned long long) json_integer_value (json_object_get (doc, "pid_start"));
  state->bundle = dup_member (doc, "bundle");
  state->rootfs = dup_member (doc, "rootfs");
  state->cgroup_path = dup_member (doc, "cgroup_path");
  state->created = dup_member (doc, "created");
  state->owner = (uid_t) json_integer_value (json_object_get (doc, "owner"));
  state->creating = json_is_true (json_object_get (doc, "creating"));
  state->systemd_cgroup = json_is_true (json_object_get (doc, "systemd_cgroup"));
  state->annotations = annotations_from_json (json_object_get (doc, "annotations"));
  json_decref (doc);
  *out = state;
  return 0;
}

void
state_free (struct container_state *state)
{
  if (state == NULL)
    return;
  free (state->id);
  free (state->state_dir);
  free (state->bundle);
  free (state->rootfs);
  free (state->cgroup_path);
  free (state->created);
  husk_strvfreep (&state->annotations);
  free (state);
}

/* Fields 3 (state) and 22 (starttime) of /proc/<pid>/stat; the command name
 * in field 2 may contain spaces and parentheses, so parse after the last ')'. */
static int
read_proc_stat (pid_t pid, char *proc_state, unsigned long long *start)
{
  char path[64], buf[1024];
  cleanup_close int fd = -1;
  ssize_t n;
  char *p;

  snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  n = read (fd, buf, sizeof buf - 1);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  p = strrchr (buf, ')');
  if (p == NULL)
    return -1;
  p += 2;
  *proc_state = *p;
  /* skip fields 3..21 */
  for (int field = 3; field < 22 && p; field++)
    {
      p = strchr (p, ' ');
      if (p)
        p++;
    }
  if (p == NULL)
    return -1;
  *start = strtoull (p, NULL, 10);
  return 0;
}

unsigned long long
state_proc_start_time (pid_t pid)
{
  unsigned long long start = 0;
  char proc_state = 0;

  if (pid <= 0 || read_proc_stat (pid, &proc_state, &start) < 0)
    return 0;
  return start;
}

bool
state_init_alive (const struct container_state *state)
{
  unsigned long long start = 0;
  char proc_state = 0;

  if (state->pid <= 0 || read_proc_stat (state->pid, &proc_state, &start) < 0)
    return false;
  if (proc_state == 'Z' || proc_state == 'X')
    return false;
  return start == state->pid_start;
}

enum container_status
state_status (const struct container_state *state)
{
  cleanup_free char *fifo = NULL;

  if (!state_init_alive (state))
    return STATUS_STOPPED;
  if (state->creating)
    return STATUS_CREATING;
  fifo = state_fifo_path (state->state_dir);
  if (access (fifo, F_OK) == 0)
    return STATUS_CREATED;
  if (cgroup_is_frozen (state->cgroup_path))
    return STATUS_PAUSED;
  return STATUS_RUNNING;
}

char *
state_oci_json (const struct container_state *state, enum container_status status, bool pretty)
{
  json_t *doc = json_pack ("{s:s, s:s, s:s}", "ociVersion", STATE_OCI_VERSION, "id", state->id, "status",
                           container_status_name (status));
  char *text;

  if (status != STATUS_STOPPED)
    json_object_set_new (doc, "pid", json_integer (state->pid));
  else
    json_object_set_new (doc, "pid", json_integer (0));
  json_object_set_new (doc, "bundle", json_string_or_null (state->bundle));
  json_object_set_new (doc, "rootfs", json_string_or_null (state->rootfs));
  json_object_set_new (doc, "created", json_string_or_null (state->created));
  json_object_set_new (doc, "owner", json_string (""));
  json_object_set_new (doc, "annotations", annotations_to_json (state->annotations));
  text = json_dumps (doc, pretty ? JSON_INDENT (2) : JSON_COMPACT);
  json_decref (doc);
  return text;
}

char *
state_now_rfc3339 (void)
{
  struct timespec ts;
  struct tm tm;
  char stamp[64];

  clock_gettime (CLOCK_REALTIME, &ts);
  gmtime_r (&ts.tv_sec, &tm);
  strftime (stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  return xasprintf ("%s.%09ldZ", stamp, ts.tv_nsec);
}
