/* husk checkpoint and husk restore: a running container's process tree
 * dumped by CRIU into an image directory, and a new container made from a
 * bundle and such an image.  Each keeps a job struct of what it made so
 * far, so one undo path removes it on failure: a failed checkpoint leaves
 * no image files and the container running; a failed restore leaves no
 * container. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/container.h"
#include "runtime/criu.h"
#include "runtime/init.h"

static char *
absolute_path (const char *path)
{
  char cwd[PATH_MAX];

  if (path[0] == '/' || getcwd (cwd, sizeof cwd) == NULL)
    return xstrdup (path);
  return xasprintf ("%s/%s", cwd, path);
}

static bool
dir_is_empty (const char *path)
{
  cleanup_dir DIR *dir = opendir (path);
  struct dirent *entry;

  if (dir == NULL)
    return false;
  while ((entry = readdir (dir)) != NULL)
    if (strcmp (entry->d_name, ".") != 0 && strcmp (entry->d_name, "..") != 0)
      return false;
  return true;
}

/* Makes PATH, or takes an existing empty directory; *MADE says which. */
static int
prepare_output_dir (const char *what, const char *path, bool *made, struct husk_error **err)
{
  struct stat st;

  if (mkdir (path, 0700) == 0)
    {
      *made = true;
      return 0;
    }
  if (errno != EEXIST)
    return husk_error_make (err, errno, "create %s `%s`", what, path);
  if (stat (path, &st) < 0 || !S_ISDIR (st.st_mode))
    return husk_error_kind (err, EINVAL, "%s `%s` exists and is not a directory", what, path);
  if (!dir_is_empty (path))
    return husk_error_kind (err, EEXIST, "%s `%s` is not empty", what, path);
  *made = false;
  return 0;
}

/* The names in PATH, sorted (NULL-terminated; *N gets the count). */
static char **
dir_names (const char *path, size_t *n)
{
  cleanup_dir DIR *dir = opendir (path);
  char **names = xcalloc (1, sizeof *names);
  struct dirent *entry;

  *n = 0;
  while (dir && (entry = readdir (dir)) != NULL)
    if (strcmp (entry->d_name, ".") != 0 && strcmp (entry->d_name, "..") != 0)
      {
        names = husk_strv_append (names, entry->d_name);
        (*n)++;
      }
  /* husk_strv_sorted_copy copies the pointers: sort them in place. */
  {
    cleanup_free char **sorted = husk_strv_sorted_copy (names, *n);
    memcpy (names, sorted, *n * sizeof *names);
  }
  return names;
}

/* A work directory the caller gave and that exists already: podman passes
 * its userdata directory (config.json, its attach socket...), as it does to
 * runc.  We take it as it is and remember what was there, so that undo
 * removes only what appeared since: criu's files, never the caller's. */
static int
prepare_work_dir (const char *path, bool *made, char ***before, size_t *n_before, struct husk_error **err)
{
  struct stat st;

  if (mkdir (path, 0700) == 0)
    {
      *made = true;
      return 0;
    }
  if (errno != EEXIST)
    return husk_error_make (err, errno, "create work directory `%s`", path);
  if (stat (path, &st) < 0 || !S_ISDIR (st.st_mode))
    return husk_error_kind (err, EINVAL, "work directory `%s` exists and is not a directory", path);
  *made = false;
  *before = dir_names (path, n_before);
  return 0;
}

/* Removes from PATH what is not in BEFORE (sorted, N names), but KEEP. */
static void
undo_work_dir (const char *path, char **before, size_t n, const char *keep)
{
  size_t n_now;
  cleanup_strv char **now = dir_names (path, &n_now);

  for (size_t i = 0; i < n_now; i++)
    {
      cleanup_free char *entry = NULL;
      struct husk_error *ignored = NULL;

      if (husk_sorted_strv_contains (before, n, now[i]) || (keep && strcmp (now[i], keep) == 0))
        continue;
      entry = xasprintf ("%s/%s", path, now[i]);
      if (husk_rm_rf (entry, &ignored) < 0)
        husk_error_free (&ignored);
    }
}

/* Puts a directory back as prepare_output_dir found it. */
static void
undo_output_dir (const char *path, bool made)
{
  struct husk_error *ignored = NULL;

  if (husk_rm_rf (path, &ignored) < 0)
    husk_error_free (&ignored);
  if (!made)
    mkdir (path, 0700);
}

/* ------------------------------------------------------------ checkpoint */

struct checkpoint_job
{
  const struct runtime_ctx *ctx;
  const char *id;
  struct criu_options opts; /* with absolute paths */
  char *image_dir, *work_dir;
  bool image_made, work_made, work_separate;
  bool image_prepared, work_prepared; /* ours to empty again on failure */
  char **work_before;                 /* what a work dir we did not make held (sorted) */
  size_t n_work_before;
  struct container_state *state;
  struct spec *spec;
};

/* The init's stdio as runc records it, for restore's --inherit-fd. */
static int
write_descriptors (struct checkpoint_job *job, struct husk_error **err)
{
  cleanup_free char *path = xasprintf ("%s/%s", job->image_dir, CRIU_DESCRIPTORS_FILE);
  cleanup_free char *text = NULL;
  json_t *list = json_array ();

  for (int fd = 0; fd < 3; fd++)
    {
      char link[64], target[PATH_MAX];
      ssize_t n;

      snprintf (link, sizeof link, "/proc/%d/fd/%d", (int) job->state->pid, fd);
      n = readlink (link, target, sizeof target - 1);
      target[n < 0 ? 0 : n] = '\0';
      json_array_append_new (list, json_string (n < 0 ? "/dev/null" : target));
    }
  text = json_dumps (list, JSON_COMPACT);
  json_decref (list);
  return husk_write_file_replace (path, text, strlen (text), 0600, err);
}

static unsigned long long
netns_inode (const struct spec *spec)
{
  const struct spec_namespace *ns = &spec->namespaces[SPEC_NS_NETWORK];
  struct stat st;

  if (!ns->present || ns->path == NULL || stat (ns->path, &st) < 0)
    return 0;
  return (unsigned long long) st.st_ino;
}

/* criu's log of a failed dump outlives the image dir: it moves to the
 * state dir, which the still running container keeps. */
static void
keep_failed_log (struct checkpoint_job *job, struct husk_error **err)
{
  cleanup_free char *log = xasprintf ("%s/%s", job->work_dir, CRIU_DUMP_LOG);
  cleanup_free char *kept = xasprintf ("%s/criu-%s", job->state->state_dir, CRIU_DUMP_LOG);
  char *at;

  /* A work dir of the caller's keeps it: only ours go. */
  if ((job->work_separate && !job->work_made) || rename (log, kept) < 0 || *err == NULL)
    return;
  at = strstr ((*err)->msg, log);
  if (at)
    {
      char *msg = xasprintf ("%.*s%s%s", (int) (at - (*err)->msg), (*err)->msg, kept, at + strlen (log));
      free ((*err)->msg);
      (*err)->msg = msg;
    }
}

static int
checkpoint_dump (struct checkpoint_job *job, const char *criu, struct husk_error **err)
{
  cleanup_strv char **argv = NULL;
  cleanup_free char *log = xasprintf ("%s/%s", job->work_dir, CRIU_DUMP_LOG);

  argv = criu_dump_argv (criu, job->spec, job->state->pid, job->state->rootfs, netns_inode (job->spec),
                         &job->opts);
  if (criu_run (argv, NULL, "dump", log, err) < 0)
    {
      keep_failed_log (job, err);
      return -1;
    }
  return 0;
}

static int
checkpoint_steps (struct checkpoint_job *job, struct husk_error **err)
{
  cleanup_free char *criu = NULL;
  enum container_status status;

  if (state_load (job->ctx->root, job->id, &job->state, err) < 0)
    return -1;
  status = state_status (job->state);
  if (status != STATUS_RUNNING && status != STATUS_PAUSED)
    return husk_error_kind (err, EINVAL, "container `%s` is %s, not running", job->id,
                            container_status_name (status));
  if (job->spec->process.terminal)
    return husk_error_kind (
        err, ENOTSUP, "container `%s` has a terminal: checkpoint of a console is not supported", job->id);
  if ((criu = criu_find (err)) == NULL)
    return -1;
  if (prepare_output_dir ("image directory", job->image_dir, &job->image_made, err) < 0)
    return -1;
  job->image_prepared = true;
  if (job->work_separate)
    {
      if (prepare_work_dir (job->work_dir, &job->work_made, &job->work_before, &job->n_work_before, err) < 0)
        return -1;
      job->work_prepared = true;
    }
  if (write_descriptors (job, err) < 0 || checkpoint_dump (job, criu, err) < 0)
    return -1;
  return 0;
}

int
container_checkpoint (const struct runtime_ctx *ctx, const char *id, const struct criu_options *opts,
                      struct husk_error **err)
{
  struct checkpoint_job job = { .ctx = ctx, .id = id, .opts = *opts };
  struct husk_error *ignored = NULL;
  int ret;

  job.image_dir = absolute_path (opts->image_path ? opts->image_path : "checkpoint");
  job.work_dir = absolute_path (opts->work_path ? opts->work_path : job.image_dir);
  job.work_separate = strcmp (job.work_dir, job.image_dir) != 0;
  job.opts.image_path = job.image_dir;
  job.opts.work_path = job.work_dir;
  ret = container_load_spec (ctx, id, &job.spec, err);
  if (ret == 0)
    ret = checkpoint_steps (&job, err);
  if (ret < 0 && job.image_prepared)
    undo_output_dir (job.image_dir, job.image_made);
  if (ret < 0 && job.work_prepared && job.work_made)
    undo_output_dir (job.work_dir, true);
  /* criu's log stays where the caller looks for it, as with runc. */
  if (ret < 0 && job.work_prepared && !job.work_made)
    undo_work_dir (job.work_dir, job.work_before, job.n_work_before, CRIU_DUMP_LOG);
  husk_strvfreep (&job.work_before);
  if (ret < 0)
    husk_error_wrap (err, "checkpoint container `%s`", id);
  /* As runc: a container checkpointed without --leave-running is gone
   * (criu killed its tasks); its cgroup and state go too. */
  if (ret == 0 && !opts->leave_running && container_delete (ctx, id, true, &ignored) < 0)
    {
      husk_warn ("checkpoint container `%s`: delete after the dump: %s", id, ignored->msg);
      husk_error_free (&ignored);
    }
  state_free (job.state);
  spec_free (job.spec);
  free (job.image_dir);
  free (job.work_dir);
  return ret;
}

/* --------------------------------------------------------------- restore */

struct restore_job
{
  const struct runtime_ctx *ctx;
  const char *id;
  const struct create_options *opts;
  struct criu_options copts; /* with absolute paths */
  struct spec *spec;
  struct container_state state;
  bool state_dir_made;
  bool cgroup_made;
  char *criu_root; /* the rootfs bind-mounted here for criu's --root */
  bool criu_root_mounted;
  int netns_fd;
  char *stdio_keys[3];
};

static int
restore_check_image (struct restore_job *job, struct husk_error **err)
{
  cleanup_free char *inventory = xasprintf ("%s/inventory.img", job->copts.image_path);
  cleanup_free char *descriptors = xasprintf ("%s/%s", job->copts.image_path, CRIU_DESCRIPTORS_FILE);
  cleanup_free char *text = NULL;
  size_t len = 0;

  if (access (inventory, R_OK) < 0)
    return husk_error_kind (err, ENOENT, "image directory `%s` holds no checkpoint (no inventory.img)",
                            job->copts.image_path);
  if (access (descriptors, F_OK) < 0)
    return 0;
  if (husk_read_file (descriptors, &text, &len, err) < 0)
    return -1;
  return criu_parse_descriptors (text, descriptors, job->stdio_keys, err);
}

static int
restore_make_state (struct restore_job *job, struct husk_error **err)
{
  cleanup_free char *config = NULL;
  cleanup_free char *text = json_dumps (job->spec->json, JSON_COMPACT);

  if (husk_mkdir_p (job->ctx->root, 0700, err) < 0)
    return husk_error_wrap (err, "state root");
  if (mkdir (job->state.state_dir, 0700) < 0)
    return errno == EEXIST ? husk_error_kind (err, EEXIST, "container `%s` already exists", job->id)
                           : husk_error_make (err, errno, "mkdir `%s`", job->state.state_dir);
  job->state_dir_made = true;
  config = state_config_path (job->state.state_dir);
  return husk_write_file_replace (config, text, strlen (text), 0600, err);
}

static int
restore_make_cgroup (struct restore_job *job, struct husk_error **err)
{
  int fd = -1;
  int ret = cgroup_setup_container (job->spec, job->id, job->ctx->systemd_cgroup, &job->state.cgroup_path,
                                    &fd, err);

  if (fd >= 0)
    {
      close (fd);
      job->cgroup_made = true;
    }
  return ret;
}

/* criu wants the root to be a mount point of its own. */
static int
restore_mount_root (struct restore_job *job, struct husk_error **err)
{
  job->criu_root = xasprintf ("%s/criu-root", job->state.state_dir);
  if (mkdir (job->criu_root, 0700) < 0)
    return husk_error_make (err, errno, "mkdir `%s`", job->criu_root);
  if (mount (job->spec->root_path, job->criu_root, NULL, MS_BIND | MS_REC, NULL) < 0)
    return husk_error_make (err, errno, "bind mount root `%s` on `%s`", job->spec->root_path, job->criu_root);
  job->criu_root_mounted = true;
  return 0;
}

static void
restore_unmount_root (struct restore_job *job)
{
  if (job->criu_root_mounted)
    umount2 (job->criu_root, MNT_DETACH);
  job->criu_root_mounted = false;
  if (job->criu_root)
    rmdir (job->criu_root);
}

static int
restore_open_netns (struct restore_job *job, struct husk_error **err)
{
  const struct spec_namespace *ns = &job->spec->namespaces[SPEC_NS_NETWORK];

  if (!ns->present || ns->path == NULL)
    return 0;
  /* Not close-on-exec: criu inherits it. */
  job->netns_fd = open (ns->path, O_RDONLY);
  if (job->netns_fd < 0)
    return husk_error_make (err, errno, "open network namespace `%s`", ns->path);
  return 0;
}

static int
restore_run_criu (struct restore_job *job, const char *criu, struct husk_error **err)
{
  cleanup_free char *pidfile = xasprintf ("%s/restore.pid", job->state.state_dir);
  cleanup_free char *log = xasprintf (
      "%s/%s", job->copts.work_path ? job->copts.work_path : job->copts.image_path, CRIU_RESTORE_LOG);
  cleanup_free char *pid_text = NULL;
  cleanup_strv char **argv = NULL;
  long long pid = 0;
  size_t len = 0;

  argv = criu_restore_argv (criu, job->spec, job->criu_root, pidfile, job->netns_fd, job->stdio_keys,
                            &job->copts);
  if (criu_run (argv, job->state.cgroup_path, "restore", log, err) < 0)
    return -1;
  if (husk_read_file (pidfile, &pid_text, &len, err) < 0)
    return -1;
  pid_text[strcspn (pid_text, "\n")] = '\0';
  if (husk_parse_int64 (pid_text, 1, INT_MAX, &pid) < 0)
    return husk_error_make (err, 0, "criu restore: pid file `%s` holds `%s`", pidfile, pid_text);
  unlink (pidfile);
  job->state.pid = (pid_t) pid;
  job->state.pid_start = state_proc_start_time (job->state.pid);
  return 0;
}

static int
restore_write_pid_file (const char *path, pid_t pid, struct husk_error **err)
{
  char buf[32];
  int n = snprintf (buf, sizeof buf, "%d", (int) pid);

  return path ? husk_write_file_replace (path, buf, (size_t) n, 0644, err) : 0;
}

static int
restore_steps (struct restore_job *job, struct husk_error **err)
{
  char bundle_abs[PATH_MAX];
  const char *bundle = job->opts->bundle ? job->opts->bundle : ".";
  cleanup_free char *criu = NULL;

  if (state_validate_id (job->id, err) < 0)
    return -1;
  if (realpath (bundle, bundle_abs) == NULL)
    return husk_error_make (err, errno, "bundle `%s`", bundle);
  if (spec_load (bundle_abs, &job->spec, err) < 0)
    return -1;
  if (job->spec->process.terminal)
    return husk_error_kind (err, ENOTSUP,
                            "config.json: process.terminal: restore of a console is not supported");
  if (restore_check_image (job, err) < 0 || (criu = criu_find (err)) == NULL)
    return -1;
  state_init_new (&job->state, job->ctx->root, job->id, bundle_abs, job->spec->root_path,
                  job->ctx->systemd_cgroup, job->spec->annotations);
  if (restore_make_state (job, err) < 0 || restore_make_cgroup (job, err) < 0
      || restore_mount_root (job, err) < 0 || restore_open_netns (job, err) < 0
      || restore_run_criu (job, criu, err) < 0)
    return -1;
  restore_unmount_root (job);
  if (state_write (&job->state, err) < 0)
    return -1;
  return restore_write_pid_file (job->opts->pid_file, job->state.pid, err);
}

static void
restore_undo (struct restore_job *job)
{
  struct husk_error *ignored = NULL;

  if (job->state.pid > 0)
    {
      kill (job->state.pid, SIGKILL);
      waitpid (job->state.pid, NULL, 0);
    }
  restore_unmount_root (job);
  if (job->cgroup_made)
    {
      if (cgroup_kill_all (job->state.cgroup_path, SIGKILL, &ignored) < 0)
        husk_error_free (&ignored);
      if (cgroup_destroy (job->state.cgroup_path, &ignored) < 0)
        husk_error_free (&ignored);
    }
  if (job->state_dir_made && husk_rm_rf (job->state.state_dir, &ignored) < 0)
    husk_error_free (&ignored);
}

static void
restore_clear (struct restore_job *job)
{
  if (job->netns_fd >= 0)
    close (job->netns_fd);
  for (int i = 0; i < 3; i++)
    free (job->stdio_keys[i]);
  free (job->criu_root);
  free (job->state.state_dir);
  free (job->state.bundle);
  free (job->state.rootfs);
  free (job->state.cgroup_path);
  free (job->state.created);
  free ((char *) job->copts.image_path);
  free ((char *) job->copts.work_path);
  spec_free (job->spec);
}

/* runc restore without --detach: waits for the restored init (criu's
 * sibling, so our child), then deletes the container. */
static int
restore_wait (const struct runtime_ctx *ctx, const char *id, pid_t pid, int *exit_code,
              struct husk_error **err)
{
  struct husk_error *ignored = NULL;
  int status = 0;

  while (waitpid (pid, &status, 0) < 0)
    if (errno != EINTR)
      return husk_error_make (err, errno, "wait for restored container `%s`", id);
  *exit_code = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
  if (container_delete (ctx, id, true, &ignored) < 0)
    {
      husk_warn ("%s", ignored->msg);
      husk_error_free (&ignored);
    }
  return 0;
}

int
container_restore (const struct runtime_ctx *ctx, const char *id, const struct create_options *opts,
                   const struct criu_options *copts, bool detach, int *exit_code, struct husk_error **err)
{
  struct restore_job job = { .ctx = ctx, .id = id, .opts = opts, .copts = *copts, .netns_fd = -1 };
  pid_t pid;
  int ret;

  job.copts.image_path = absolute_path (copts->image_path ? copts->image_path : "checkpoint");
  job.copts.work_path = copts->work_path ? absolute_path (copts->work_path) : NULL;
  ret = restore_steps (&job, err);
  if (ret < 0)
    {
      restore_undo (&job);
      husk_error_wrap (err, "restore container `%s`", id);
    }
  pid = job.state.pid;
  restore_clear (&job);
  *exit_code = 0;
  if (ret < 0 || detach)
    return ret;
  return restore_wait (ctx, id, pid, exit_code, err);
}
