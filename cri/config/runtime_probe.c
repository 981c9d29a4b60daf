/* Probing the runtime handlers when huskd starts (see runtime_probe.h):
 * `RUNTIME features`, then a trial create and delete of a container made
 * from the same default spec huskd's bundles start from, with husk-pause
 * as its process (it never runs: create stops before the exec). */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cri/config/probe_sweep.h"
#include "cri/config/runtime_exec.h"
#include "cri/config/runtime_probe.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/spec/spec.h"

#define PROBE_TIMEOUT_MS 10000
#define REASON_MAX 300

/* The runtime's features annotation that says `exec --console-size` works. */
#define CONSOLE_SIZE_ANNOTATION "io.husk.exec.consoleSize"

static void
probe_features (struct huskd_runtime *rt)
{
  const char *argv[] = { rt->path, "features", NULL };
  struct cri_child_run run
      = { .argv = (char *const *) argv, .timeout_ms = PROBE_TIMEOUT_MS, .output_max = 1 << 20 };
  struct husk_error *err = NULL;
  json_t *doc = NULL, *value;

  if (cri_child_run (&run, &err) < 0)
    {
      husk_error_free (&err);
      return;
    }
  if (!run.timed_out && WIFEXITED (run.wait_status) && WEXITSTATUS (run.wait_status) == 0 && run.out[0].data)
    doc = json_loads (run.out[0].data, 0, NULL);
  value = json_object_get (json_object_get (doc, "annotations"), CONSOLE_SIZE_ANNOTATION);
  rt->console_size = json_is_string (value) && strcmp (json_string_value (value), "true") == 0;
  json_decref (doc);
  cri_child_run_clear (&run);
}

/* A bundle under DIR: rootfs/husk-pause and config.json. */
static int
write_trial_bundle (const char *dir, const char *cgroup, struct husk_error **err)
{
  cleanup_free char *pause = cri_helper_path ("husk-pause");
  cleanup_free char *rootfs = xasprintf ("%s/rootfs", dir);
  cleanup_free char *target = xasprintf ("%s/husk-pause", rootfs);
  cleanup_free char *config_path = xasprintf ("%s/config.json", dir);
  cleanup_free char *binary = NULL, *default_json = spec_default_json (false), *text = NULL;
  size_t len = 0;
  json_t *config;
  int ret;

  if (husk_mkdir_p (rootfs, 0755, err) < 0 || husk_read_file (pause, &binary, &len, err) < 0
      || husk_write_file_replace (target, binary, len, 0755, err) < 0)
    return -1;
  config = json_loads (default_json, 0, NULL);
  if (config == NULL)
    return husk_error_make (err, 0, "the default spec does not parse");
  json_object_set_new (config, "root", json_pack ("{s:s, s:b}", "path", "rootfs", "readonly", 1));
  json_object_set_new (json_object_get (config, "process"), "args", json_pack ("[s]", "/husk-pause"));
  json_object_set_new (json_object_get (config, "process"), "terminal", json_false ());
  json_object_set_new (json_object_get (config, "linux"), "cgroupsPath", json_string (cgroup));
  text = json_dumps (config, JSON_COMPACT);
  json_decref (config);
  ret = husk_write_file_replace (config_path, text, strlen (text), 0644, err);
  return ret;
}

/* Runs ARGV with stdout to /dev/null and stderr to ERR_PATH (a file, not a
 * pipe: the created container's init inherits it and lives on until the
 * delete).  The wait status, or -1 when it did not end in time; one that
 * cannot start says why in ERR_PATH and counts as exit 127, as a shell's. */
static int
run_to_file (char *const *argv, const char *err_path)
{
  struct cri_child_run run = { .argv = argv, .timeout_ms = PROBE_TIMEOUT_MS, .err_path = err_path };
  struct husk_error *err = NULL;

  if (cri_child_run (&run, &err) < 0)
    {
      cleanup_free char *line = xasprintf ("%s\n", err->msg);

      husk_error_free (&err);
      husk_write_file_replace (err_path, line, strlen (line), 0600, NULL);
      return 127 << 8;
    }
  return run.timed_out ? -1 : run.wait_status;
}

/* The runtime's last non-empty stderr line, shortened. */
static char *
last_line (const char *path)
{
  cleanup_free char *text = NULL;
  char *end, *start;

  if (husk_read_file (path, &text, NULL, NULL) < 0)
    return xstrdup ("(no stderr)");
  end = text + strlen (text);
  while (end > text && (end[-1] == '\n' || end[-1] == ' '))
    *--end = '\0';
  start = strrchr (text, '\n');
  start = start ? start + 1 : text;
  if (*start == '\0')
    return xstrdup ("(no stderr)");
  return xasprintf ("%.*s", REASON_MAX, start);
}

static char *
probe_list (const struct huskd_runtime *rt, const char *err_path)
{
  cleanup_free const char **list = cri_runtime_argv (rt, (const char *[]){ "list", NULL }, 0);
  int status = run_to_file ((char *const *) list, err_path);
  cleanup_free char *line = NULL;

  if (status == 0)
    return NULL;
  if (access (rt->path, X_OK) < 0)
    return xasprintf ("%s: %s", rt->path, strerror (errno));
  line = last_line (err_path);
  return status < 0 ? xasprintf ("a trial `list` did not end in %d s", PROBE_TIMEOUT_MS / 1000)
                    : xasprintf ("a trial `list` failed: %s", line);
}

static char *
probe_trial (const struct huskd_runtime *rt, const char *dir)
{
  cleanup_free char *bundle = xasprintf ("%s/bundle", dir);
  cleanup_free char *root = xasprintf ("%s/root", dir);
  cleanup_free char *id = xasprintf (CRI_PROBE_PREFIX "%d", (int) getpid ());
  cleanup_free char *cgroup = xasprintf ("/" CRI_PROBE_PREFIX "%d-%s", (int) getpid (), rt->name);
  cleanup_free char *err_path = xasprintf ("%s/stderr", dir);
  cleanup_free char *delete_err = xasprintf ("%s/delete.stderr", dir);
  struct huskd_runtime trial_rt = *rt;
  cleanup_free const char **create = NULL, **delete = NULL;
  struct husk_error *err = NULL;
  char *reason = NULL;
  int status;

  trial_rt.root = root;
  /* A handler that owns the pod would start a whole sandbox for a trial:
   * `list` shows that the binary runs and takes the configured flags. */
  if (rt->owns_pod)
    return probe_list (&trial_rt, err_path);
  create = cri_runtime_argv (&trial_rt, (const char *[]){ "create", "--bundle", bundle, id, NULL }, 0);
  delete = cri_runtime_argv (&trial_rt, (const char *[]){ "delete", "--force", id, NULL }, 0);

  if (write_trial_bundle (bundle, cgroup, &err) < 0)
    {
      /* Our side failed, not the runtime's: say so, but do not hold it
       * against the handler. */
      husk_warn ("runtime handler `%s`: cannot prepare the trial bundle: %s", rt->name, err->msg);
      husk_error_free (&err);
      return NULL;
    }
  status = run_to_file ((char *const *) create, err_path);
  if (status != 0)
    {
      cleanup_free char *line = last_line (err_path);
      reason = status < 0 ? xasprintf ("a trial `create` did not end in %d s", PROBE_TIMEOUT_MS / 1000)
                          : xasprintf ("a trial `create` failed: %s", line);
    }
  run_to_file ((char *const *) delete, delete_err);
  return reason;
}

static void
probe_one (struct huskd_runtime *rt, const char *probe_dir)
{
  cleanup_free char *dir = xasprintf ("%s/%s", probe_dir, cri_probe_dir_name (rt));
  struct husk_error *err = NULL;

  probe_features (rt);
  if (husk_mkdir_p (dir, 0700, &err) < 0)
    {
      husk_warn ("runtime handler `%s`: cannot probe it: %s", rt->name, err->msg);
      husk_error_free (&err);
      return;
    }
  rt->unusable = probe_trial (rt, dir);
  if (rt->unusable)
    husk_warn ("runtime handler `%s` (%s) cannot run containers on this host: %s; CreateContainer and "
               "RunPodSandbox for it fail with this reason",
               rt->name, rt->path, rt->unusable);
  else
    husk_log (HUSK_LOG_INFO, "runtime handler `%s` (%s): a trial container was created and deleted%s",
              rt->name, rt->path, rt->console_size ? "; exec --console-size supported" : "");
}

void
cri_runtime_probe_all (struct huskd_config *cfg)
{
  cleanup_free char *probe_dir = xasprintf ("%s/probe", cfg->state);
  struct husk_error *err = NULL;

  cri_probe_sweep (cfg, probe_dir);
  for (size_t i = 0; i < cfg->n_runtimes; i++)
    probe_one (&cfg->runtimes[i], probe_dir);
  if (husk_rm_rf (probe_dir, &err) < 0)
    {
      husk_warn ("remove %s: %s", probe_dir, err->msg);
      husk_error_free (&err);
    }
}

/* The probe runs once per huskd, beside the start-up recovery and the
 * first RPCs: a runc trial takes half a second on a busy node, and huskd
 * restarts should not wait for it.  What reads its results waits for it. */
static struct
{
  pthread_mutex_t lock;
  pthread_cond_t done_cond;
  bool started, done;
  pthread_t thread;
} probe = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, 0 };

static void *
probe_thread_main (void *cfg)
{
  cri_runtime_probe_all (cfg);
  pthread_mutex_lock (&probe.lock);
  probe.done = true;
  pthread_cond_broadcast (&probe.done_cond);
  pthread_mutex_unlock (&probe.lock);
  return NULL;
}

void
cri_runtime_probe_start (struct huskd_config *cfg)
{
  pthread_mutex_lock (&probe.lock);
  probe.started = pthread_create (&probe.thread, NULL, probe_thread_main, cfg) == 0;
  pthread_mutex_unlock (&probe.lock);
  if (!probe.started)
    cri_runtime_probe_all (cfg);
}

void
cri_runtime_probe_wait (void)
{
  pthread_mutex_lock (&probe.lock);
  while (probe.started && !probe.done)
    pthread_cond_wait (&probe.done_cond, &probe.lock);
  pthread_mutex_unlock (&probe.lock);
}

bool
cri_runtime_probe_done (void)
{
  bool done;

  pthread_mutex_lock (&probe.lock);
  done = !probe.started || probe.done;
  pthread_mutex_unlock (&probe.lock);
  return done;
}

void
cri_runtime_probe_join (void)
{
  if (probe.started)
    pthread_join (probe.thread, NULL);
  probe.started = false;
}

int
cri_runtime_usable (const struct huskd_runtime *rt, const char *what, struct husk_error **err)
{
  cri_runtime_probe_wait ();
  if (rt == NULL || rt->unusable == NULL)
    return 0;
  return husk_error_kind (err, EAGAIN, "%s: runtime handler `%s` cannot run containers on this host: %s",
                          what, rt->name, rt->unusable);
}
