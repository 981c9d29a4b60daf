/* The criu command lines of checkpoint and restore, and running criu.
 * Bind mounts are external to the image (criu cannot dump another mount
 * namespace's files): dumped as mnt[DEST]:DEST, restored from the spec's
 * source; a joined network namespace is external too, handed back as an
 * inherited fd. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/criu.h"

static const char *const cgroups_modes[] = { "soft", "full", "strict", "ignore", NULL };

bool
criu_valid_cgroups_mode (const char *mode)
{
  return husk_strv_contains ((char *const *) cgroups_modes, mode);
}

char *
criu_find (struct husk_error **err)
{
  static const char *const extra_dirs[] = { "/usr/sbin", "/sbin", "/usr/local/sbin" };
  const char *env = getenv ("HUSK_CRIU");
  const char *path = getenv ("PATH");

  if (env && *env)
    {
      if (access (env, X_OK) < 0)
        {
          husk_error_make (err, errno, "HUSK_CRIU=`%s`: not an executable criu", env);
          return NULL;
        }
      return xstrdup (env);
    }
  for (const char *p = path ? path : ""; *p;)
    {
      size_t len = strcspn (p, ":");
      cleanup_free char *candidate = xasprintf ("%.*s/criu", (int) len, p);
      if (len > 0 && access (candidate, X_OK) == 0)
        return steal_pointer (&candidate);
      p += len + (p[len] == ':');
    }
  for (size_t i = 0; i < sizeof extra_dirs / sizeof extra_dirs[0]; i++)
    {
      cleanup_free char *candidate = xasprintf ("%s/criu", extra_dirs[i]);
      if (access (candidate, X_OK) == 0)
        return steal_pointer (&candidate);
    }
  husk_error_kind (err, ENOENT,
                   "checkpoint/restore needs CRIU: no `criu` in PATH, /usr/sbin or /sbin (install the criu "
                   "package, or set HUSK_CRIU to its path)");
  return NULL;
}

static bool
is_bind (const struct spec_mount *mnt)
{
  return mnt->bind || (mnt->flags & MS_BIND) || (mnt->type && strcmp (mnt->type, "bind") == 0);
}

/* The options both directions share. */
static char **
common_args (char **argv, const struct criu_options *opts, const char *root, const char *log_name)
{
  argv = husk_strv_append (argv, "--images-dir");
  argv = husk_strv_append (argv, opts->image_path);
  argv = husk_strv_append (argv, "--work-dir");
  argv = husk_strv_append (argv, opts->work_path ? opts->work_path : opts->image_path);
  argv = husk_strv_append (argv, "--log-file");
  argv = husk_strv_append (argv, log_name);
  argv = husk_strv_append (argv, "-v4");
  argv = husk_strv_append (argv, "--root");
  argv = husk_strv_append (argv, root);
  {
    cleanup_free char *mode
        = xasprintf ("--manage-cgroups=%s", opts->manage_cgroups_mode ? opts->manage_cgroups_mode : "ignore");
    argv = husk_strv_append (argv, mode);
  }
  if (opts->tcp_established)
    argv = husk_strv_append (argv, "--tcp-established");
  if (opts->file_locks)
    argv = husk_strv_append (argv, "--file-locks");
  if (opts->ext_unix_sk)
    argv = husk_strv_append (argv, "--ext-unix-sk");
  if (opts->shell_job)
    argv = husk_strv_append (argv, "--shell-job");
  return argv;
}

static char **
append_external (char **argv, const char *fmt, const char *a, const char *b)
{
  cleanup_free char *value = xasprintf (fmt, a, b);

  argv = husk_strv_append (argv, "--external");
  return husk_strv_append (argv, value);
}

char **
criu_dump_argv (const char *criu, const struct spec *spec, pid_t pid, const char *root,
                unsigned long long netns_ino, const struct criu_options *opts)
{
  char **argv = husk_strv_append (NULL, criu);
  char pid_text[32];

  argv = husk_strv_append (argv, "dump");
  snprintf (pid_text, sizeof pid_text, "%d", (int) pid);
  argv = husk_strv_append (argv, "--tree");
  argv = husk_strv_append (argv, pid_text);
  argv = common_args (argv, opts, root, CRIU_DUMP_LOG);
  if (opts->leave_running)
    argv = husk_strv_append (argv, "--leave-running");
  for (size_t i = 0; i < spec->n_mounts; i++)
    if (is_bind (&spec->mounts[i]))
      argv = append_external (argv, "mnt[%s]:%s", spec->mounts[i].destination, spec->mounts[i].destination);
  if (netns_ino)
    {
      char ino_text[32];
      snprintf (ino_text, sizeof ino_text, "%llu", netns_ino);
      argv = append_external (argv, "net[%s]:%s", ino_text, CRIU_NETNS_KEY);
    }
  return argv;
}

char **
criu_restore_argv (const char *criu, const struct spec *spec, const char *root, const char *pidfile,
                   int netns_fd, char *const stdio_keys[3], const struct criu_options *opts)
{
  char **argv = husk_strv_append (NULL, criu);

  argv = husk_strv_append (argv, "restore");
  argv = common_args (argv, opts, root, CRIU_RESTORE_LOG);
  argv = husk_strv_append (argv, "--restore-detached");
  argv = husk_strv_append (argv, "--restore-sibling");
  argv = husk_strv_append (argv, "--pidfile");
  argv = husk_strv_append (argv, pidfile);
  for (size_t i = 0; i < spec->n_mounts; i++)
    if (is_bind (&spec->mounts[i]))
      argv = append_external (argv, "mnt[%s]:%s", spec->mounts[i].destination,
                              spec->mounts[i].source ? spec->mounts[i].source : spec->mounts[i].destination);
  if (netns_fd >= 0)
    {
      cleanup_free char *value = xasprintf ("fd[%d]:%s", netns_fd, CRIU_NETNS_KEY);
      argv = husk_strv_append (argv, "--inherit-fd");
      argv = husk_strv_append (argv, value);
    }
  for (int i = 0; i < 3; i++)
    if (stdio_keys && stdio_keys[i])
      {
        cleanup_free char *value = xasprintf ("fd[%d]:%s", i, stdio_keys[i]);
        argv = husk_strv_append (argv, "--inherit-fd");
        argv = husk_strv_append (argv, value);
      }
  return argv;
}

char *
criu_log_first_error (const char *log_text)
{
  for (const char *line = log_text; line && *line;)
    {
      size_t len = strcspn (line, "\n");
      const char *hit = memmem (line, len, "Error (", 7);
      if (hit)
        return xasprintf ("%.*s", (int) (len - (size_t) (hit - line)), hit);
      line += len + (line[len] == '\n');
    }
  return NULL;
}

int
criu_parse_descriptors (const char *text, const char *file_name, char *keys[3], struct husk_error **err)
{
  json_error_t jerr;
  json_t *list = json_loads (text, 0, &jerr);

  keys[0] = keys[1] = keys[2] = NULL;
  if (list == NULL || !json_is_array (list))
    {
      json_decref (list);
      return husk_error_make (err, 0, "%s: not a JSON array of the init's stdio (%s)", file_name,
                              list ? "not an array" : jerr.text);
    }
  for (size_t i = 0; i < 3 && i < json_array_size (list); i++)
    {
      const char *desc = json_string_value (json_array_get (list, i));
      if (desc == NULL)
        {
          json_decref (list);
          free (keys[0]), free (keys[1]), free (keys[2]);
          keys[0] = keys[1] = keys[2] = NULL;
          return husk_error_make (err, 0, "%s: [%zu]: not a string", file_name, i);
        }
      if (husk_str_has_prefix (desc, "pipe:"))
        keys[i] = xstrdup (desc);
    }
  json_decref (list);
  return 0;
}

/* The exit status of a child as words. */
static char *
describe_status (int status)
{
  if (WIFEXITED (status))
    return xasprintf ("exit status %d", WEXITSTATUS (status));
  if (WIFSIGNALED (status))
    return xasprintf ("killed by signal %d", WTERMSIG (status));
  return xasprintf ("status %d", status);
}

int
criu_run (char **argv, const char *cgroup_path, const char *action, const char *log_path,
          struct husk_error **err)
{
  cleanup_free char *how = NULL;
  cleanup_free char *log_text = NULL;
  cleanup_free char *first = NULL;
  size_t len = 0;
  int status = 0;
  pid_t pid;

  fflush (NULL);
  pid = fork ();
  if (pid < 0)
    return husk_error_make (err, errno, "fork for criu %s", action);
  if (pid == 0)
    {
      struct husk_error *child_err = NULL;
      /* Restored tasks are forked by criu: they start in its cgroup. */
      if (cgroup_path && cgroup_enter (cgroup_path, getpid (), &child_err) < 0)
        {
          fprintf (stderr, "husk: criu %s: %s\n", action, child_err->msg);
          _exit (126);
        }
      execv (argv[0], argv);
      fprintf (stderr, "husk: exec `%s`: %s\n", argv[0], strerror (errno));
      _exit (127);
    }
  while (waitpid (pid, &status, 0) < 0)
    if (errno != EINTR)
      return husk_error_make (err, errno, "wait for criu %s", action);
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    return 0;
  how = describe_status (status);
  if (husk_read_file (log_path, &log_text, &len, NULL) == 0)
    first = criu_log_first_error (log_text);
  return husk_error_make (err, 0, "criu %s failed (%s): %s (full log: %s)", action, how,
                          first ? first : "its log has no error line", log_path);
}

int
criu_reopen_dev_null (struct husk_error **err)
{
  int null_fd = -1;

  for (int fd = 0; fd < 3; fd++)
    {
      struct stat st, ours;
      if (fstat (fd, &st) < 0 || !S_ISCHR (st.st_mode) || st.st_rdev != makedev (1, 3))
        continue;
      if (null_fd < 0 && (null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
        return husk_error_make (err, errno, "reopen /dev/null in the container");
      /* Already the container's own node: nothing to do. */
      if (fstat (null_fd, &ours) == 0 && ours.st_dev == st.st_dev && ours.st_ino == st.st_ino)
        continue;
      if (dup3 (null_fd, fd, 0) < 0)
        {
          close (null_fd);
          return husk_error_make (err, errno, "reopen /dev/null in the container onto fd %d", fd);
        }
    }
  if (null_fd >= 0)
    close (null_fd);
  return 0;
}
