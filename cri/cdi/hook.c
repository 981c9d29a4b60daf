/* husk's CDI injection hooks.  They run as createContainer hooks, in the
 * container's mount namespace before pivot_root, so the CDI bind mounts
 * are visible under the rootfs and the rootfs is still writable.  The
 * rootfs belongs to the image: every path in it is resolved as the
 * container would see it (openat2 RESOLVE_IN_ROOT), so a symlink such as
 * /etc -> /host-dir writes to <rootfs>/host-dir, never to the host. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cri/cdi/hook.h"
#include "husk/in_root.h"
#include "husk/cleanup.h"
#include "husk/util.h"

/* What of ldconfig's output an error quotes. */
#define LDCONFIG_OUTPUT_MAX 4096

#define LDSO_CONF "etc/ld.so.conf"
#define LDSO_CONF_DIR "/etc/ld.so.conf.d"
#define HUSK_LDSO_CONF "00-husk-cdi.conf"

static const char *const host_ldconfigs[] = { "/sbin/ldconfig", "/usr/sbin/ldconfig" };

/* ---- the rootfs --------------------------------------------------------- */

int
cdi_hook_rootfs_from_state (const char *state, size_t len, char **rootfs, struct husk_error **err)
{
  json_error_t jerr;
  json_t *state_json = json_loadb (state, len, 0, &jerr);
  json_t *config = NULL;
  cleanup_free char *config_path = NULL;
  const char *bundle, *root_path;
  int ret = -1;

  if (state_json == NULL)
    return husk_error_make (err, 0, "the OCI state on stdin: %s", jerr.text);
  bundle = json_string_value (json_object_get (state_json, "bundle"));
  if (bundle == NULL || bundle[0] != '/')
    {
      husk_error_make (err, 0, "the OCI state on stdin: no absolute `bundle`");
      goto out;
    }
  config_path = xasprintf ("%s/config.json", bundle);
  config = json_load_file (config_path, 0, &jerr);
  if (config == NULL)
    {
      husk_error_make (err, 0, "`%s`: %s", config_path, jerr.text);
      goto out;
    }
  root_path = json_string_value (json_object_get (json_object_get (config, "root"), "path"));
  if (root_path == NULL || *root_path == '\0')
    {
      husk_error_make (err, 0, "`%s`: no root.path", config_path);
      goto out;
    }
  *rootfs = root_path[0] == '/' ? xstrdup (root_path) : xasprintf ("%s/%s", bundle, root_path);
  ret = 0;
out:
  json_decref (config);
  json_decref (state_json);
  return ret;
}

int
cdi_hook_open_root (const char *rootfs, struct husk_error **err)
{
  cleanup_close int fd = open (rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct stat root_st, host_st;

  if (fd < 0)
    return husk_error_make (err, errno, "rootfs `%s`", rootfs);
  if (fstat (fd, &root_st) < 0 || stat ("/", &host_st) < 0)
    return husk_error_make (err, errno, "rootfs `%s`: stat", rootfs);
  if (root_st.st_dev == host_st.st_dev && root_st.st_ino == host_st.st_ino)
    return husk_error_make (err, 0, "rootfs `%s` is the host's /", rootfs);
  return steal_fd (&fd);
}

/* ---- arguments ---------------------------------------------------------- */

int
cdi_hook_check_path (const char *what, const char *path, bool is_entry, struct husk_error **err)
{
  const char *p = path;

  if (path[0] != '/')
    return husk_error_kind (err, EINVAL, "%s `%s`: not an absolute container path", what, path);
  while (*p)
    {
      size_t n;
      p += strspn (p, "/");
      n = strcspn (p, "/");
      if (n == 2 && p[0] == '.' && p[1] == '.')
        return husk_error_kind (err, EINVAL, "%s `%s`: `..` would leave the container's root", what, path);
      p += n;
    }
  if (is_entry && path[strspn (path, "/.")] == '\0')
    return husk_error_kind (err, EINVAL, "%s `%s`: names the root itself", what, path);
  return 0;
}

int
cdi_hook_parse_link (const char *arg, char **target, char **link, struct husk_error **err)
{
  const char *sep = strstr (arg, "::");

  if (sep == NULL)
    return husk_error_kind (err, EINVAL, "--link `%s`: not TARGET::LINK", arg);
  if (strstr (sep + 2, "::") != NULL)
    return husk_error_kind (err, EINVAL, "--link `%s`: more than one `::`", arg);
  if (sep == arg)
    return husk_error_kind (err, EINVAL, "--link `%s`: empty TARGET", arg);
  if (sep[2] == '\0')
    return husk_error_kind (err, EINVAL, "--link `%s`: empty LINK", arg);
  if (cdi_hook_check_path ("--link", sep + 2, true, err) < 0)
    return -1;
  *target = xasprintf ("%.*s", (int) (sep - arg), arg);
  *link = xstrdup (sep + 2);
  return 0;
}

int
cdi_hook_parse_mode (const char *arg, mode_t *mode, struct husk_error **err)
{
  unsigned long value = 0;

  if (*arg == '\0' || strlen (arg) > 5 || arg[strspn (arg, "01234567")] != '\0')
    return husk_error_kind (err, EINVAL, "--mode `%s`: not an octal mode", arg);
  value = strtoul (arg, NULL, 8);
  if (value > 07777)
    return husk_error_kind (err, EINVAL, "--mode `%s`: more than 07777", arg);
  *mode = (mode_t) value;
  return 0;
}

/* ---- update-ldcache ----------------------------------------------------- */

static bool
folder_exists (int root_fd, const char *folder)
{
  cleanup_close int fd = husk_open_in_root (root_fd, folder, O_PATH | O_DIRECTORY);
  return fd >= 0;
}

static bool
has_line (const char *text, const char *line)
{
  size_t len = strlen (line);
  const char *p = text;

  while (*p)
    {
      const char *end = strchrnul (p, '\n');
      if ((size_t) (end - p) == len && strncmp (p, line, len) == 0)
        return true;
      p = *end ? end + 1 : end;
    }
  return false;
}

/* The folders our conf file names already (a second update-ldcache hook
 * adds to the first one's), then the new ones that exist in the rootfs. */
static char *
ldso_conf_text (int dir_fd, int root_fd, char *const *folders, size_t n_folders)
{
  cleanup_close int fd = openat (dir_fd, HUSK_LDSO_CONF, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  char *text = NULL;
  size_t len = 0;

  if (fd < 0 || husk_read_fd (fd, &text, &len, HUSK_LDSO_CONF, NULL) < 0)
    text = xstrdup ("");
  for (size_t i = 0; i < n_folders; i++)
    {
      char *grown;

      if (has_line (text, folders[i]) || !folder_exists (root_fd, folders[i]))
        continue;
      grown
          = xasprintf ("%s%s%s\n", text, (*text && text[strlen (text) - 1] != '\n') ? "\n" : "", folders[i]);
      free (text);
      text = grown;
    }
  return text;
}

/* Writes NAME in DIR_FD through a temp file and a rename, so a symlink
 * planted at NAME is replaced, not followed. */
static int
write_in_dir (int dir_fd, const char *name, const char *text, const char *shown, struct husk_error **err)
{
  cleanup_free char *tmp = xasprintf (".%s.tmp", name);
  cleanup_close int fd = -1;

  unlinkat (dir_fd, tmp, 0);
  fd = openat (dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return husk_error_make (err, errno, "create `%s`", shown);
  if (husk_write_all (fd, text, strlen (text)) < 0 || fchmod (fd, 0644) < 0)
    {
      int saved = errno;
      unlinkat (dir_fd, tmp, 0);
      return husk_error_make (err, saved, "write `%s`", shown);
    }
  if (renameat (dir_fd, tmp, dir_fd, name) < 0)
    {
      int saved = errno;
      unlinkat (dir_fd, tmp, 0);
      return husk_error_make (err, saved, "rename into `%s`", shown);
    }
  return 0;
}

/* A rootfs without /etc/ld.so.conf (distroless images) gets one that
 * includes the drop-in dir, as NVIDIA's hook does; an existing one is
 * left as it is. */
static int
ensure_ldso_conf (int root_fd, struct husk_error **err)
{
  static const char text[] = "include " LDSO_CONF_DIR "/*.conf\n";
  cleanup_free char *name = NULL;
  cleanup_close int etc_fd = husk_open_parent_in_root (root_fd, "/" LDSO_CONF, true, &name, err);
  cleanup_close int fd = -1;

  if (etc_fd < 0)
    return -1;
  fd = openat (etc_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return errno == EEXIST ? 0 : husk_error_make (err, errno, "create `/" LDSO_CONF "`");
  if (husk_write_all (fd, text, sizeof text - 1) < 0)
    return husk_error_make (err, errno, "write `/" LDSO_CONF "`");
  return 0;
}

static const char *
find_host_ldconfig (void)
{
  for (size_t i = 0; i < sizeof host_ldconfigs / sizeof host_ldconfigs[0]; i++)
    if (access (host_ldconfigs[i], X_OK) == 0)
      return host_ldconfigs[i];
  return NULL;
}

/* The last non-empty line of OUTPUT, for the error message. */
static const char *
last_line (char *output)
{
  char *end = output + strlen (output);
  char *start;

  while (end > output && (end[-1] == '\n' || end[-1] == ' '))
    *--end = '\0';
  start = strrchr (output, '\n');
  return start ? start + 1 : output;
}

/* Reads FD to its end, keeping its last bytes (at least SIZE / 2) in BUF:
 * the last line says what went wrong. */
static void
read_tail (int fd, char *buf, size_t size)
{
  size_t used = 0;

  for (;;)
    {
      ssize_t n;

      if (used == size - 1)
        {
          size_t keep = (size - 1) / 2;
          memmove (buf, buf + used - keep, keep);
          used = keep;
        }
      n = read (fd, buf + used, size - 1 - used);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      used += (size_t) n;
    }
  buf[used] = '\0';
}

/* Runs LDCONFIG -r ROOTFS with no environment; its output is kept for the
 * error message only (its warnings about plain files named like sonames
 * are noise in every container start). */
static int
run_ldconfig (const char *ldconfig, const char *rootfs, struct husk_error **err)
{
  char *const argv[]
      = { (char *) ldconfig, "-r", (char *) rootfs, "-f", "/etc/ld.so.conf", "-C", "/etc/ld.so.cache", NULL };
  char *const envp[] = { NULL };
  char output[LDCONFIG_OUTPUT_MAX];
  int pipe_fds[2], status;
  pid_t pid;

  if (pipe2 (pipe_fds, O_CLOEXEC) < 0)
    return husk_error_make (err, errno, "pipe");
  pid = fork ();
  if (pid < 0)
    {
      int saved = errno;
      close (pipe_fds[0]);
      close (pipe_fds[1]);
      return husk_error_make (err, saved, "fork");
    }
  if (pid == 0)
    {
      dup2 (pipe_fds[1], 1);
      dup2 (pipe_fds[1], 2);
      execve (ldconfig, argv, envp);
      dprintf (2, "exec: %s\n", strerror (errno));
      _exit (127);
    }
  close (pipe_fds[1]);
  read_tail (pipe_fds[0], output, sizeof output);
  close (pipe_fds[0]);
  while (waitpid (pid, &status, 0) < 0)
    if (errno != EINTR)
      return husk_error_make (err, errno, "wait for %s", ldconfig);
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    return 0;
  if (WIFEXITED (status))
    {
      const char *why = last_line (output);
      return husk_error_make (err, 0, "%s -r %s exited with status %d: %s", ldconfig, rootfs,
                              WEXITSTATUS (status), *why ? why : "(no output)");
    }
  return husk_error_make (err, 0, "%s -r %s killed by signal %d", ldconfig, rootfs, WTERMSIG (status));
}

int
cdi_hook_update_ldcache (const char *rootfs, int root_fd, char *const *folders, size_t n_folders,
                         const char *ldconfig, struct husk_error **err)
{
  cleanup_free char *name = NULL;
  cleanup_free char *text = NULL;
  cleanup_close int dir_fd = -1;

  if (ldconfig == NULL && (ldconfig = find_host_ldconfig ()) == NULL)
    return husk_error_make (err, 0,
                            "no ldconfig on the host (looked for /sbin/ldconfig and /usr/sbin/ldconfig)");
  if (ensure_ldso_conf (root_fd, err) < 0)
    return -1;
  dir_fd = husk_open_parent_in_root (root_fd, LDSO_CONF_DIR "/" HUSK_LDSO_CONF, true, &name, err);
  if (dir_fd < 0)
    return -1;
  text = ldso_conf_text (dir_fd, root_fd, folders, n_folders);
  if (*text && write_in_dir (dir_fd, name, text, LDSO_CONF_DIR "/" HUSK_LDSO_CONF, err) < 0)
    return -1;
  return run_ldconfig (ldconfig, rootfs, err);
}

/* ---- create-symlinks ---------------------------------------------------- */

static const char *
file_kind (mode_t mode)
{
  switch (mode & S_IFMT)
    {
    case S_IFDIR:
      return "a directory";
    case S_IFREG:
      return "a regular file";
    case S_IFLNK:
      return "a symlink";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    default:
      return "a special file";
    }
}

/* LINK exists: fine if it is a symlink to TARGET already. */
static int
check_existing_link (int dir_fd, const char *name, const char *target, const char *link,
                     struct husk_error **err)
{
  char current[PATH_MAX];
  struct stat st;
  ssize_t n;

  if (fstatat (dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return husk_error_make (err, errno, "`%s`", link);
  if (!S_ISLNK (st.st_mode))
    return husk_error_kind (err, EEXIST, "`%s` exists and is %s, not a link to `%s`", link,
                            file_kind (st.st_mode), target);
  n = readlinkat (dir_fd, name, current, sizeof current - 1);
  if (n < 0)
    return husk_error_make (err, errno, "read link `%s`", link);
  current[n] = '\0';
  if (strcmp (current, target) != 0)
    return husk_error_kind (err, EEXIST, "`%s` exists and links to `%s`, not `%s`", link, current, target);
  return 0;
}

int
cdi_hook_create_symlink (int root_fd, const char *target, const char *link, struct husk_error **err)
{
  cleanup_free char *name = NULL;
  cleanup_close int dir_fd = husk_open_parent_in_root (root_fd, link, true, &name, err);

  if (dir_fd < 0)
    return -1;
  if (symlinkat (target, dir_fd, name) == 0)
    return 0;
  if (errno != EEXIST)
    return husk_error_make (err, errno, "create link `%s` -> `%s`", link, target);
  return check_existing_link (dir_fd, name, target, link, err);
}

/* ---- chmod -------------------------------------------------------------- */

int
cdi_hook_chmod (int root_fd, const char *path, mode_t mode, bool *skipped, struct husk_error **err)
{
  cleanup_close int fd = husk_open_in_root (root_fd, path, O_PATH | O_NOFOLLOW);
  char fd_path[32];
  struct stat st;

  *skipped = false;
  if (fd < 0 && errno == ENOENT)
    {
      *skipped = true;
      return 0;
    }
  if (fd < 0)
    return husk_error_make (err, errno, "`%s`", path);
  if (fstat (fd, &st) < 0)
    return husk_error_make (err, errno, "stat `%s`", path);
  if (S_ISLNK (st.st_mode))
    return husk_error_kind (err, EINVAL, "`%s` is a symlink (not followed)", path);
  if ((st.st_mode & 07777) == mode)
    return 0;
  /* An O_PATH fd takes no fchmod; its /proc magic link names the exact
   * inode resolved above, so nothing can swap it for a symlink meanwhile. */
  snprintf (fd_path, sizeof fd_path, "/proc/self/fd/%d", fd);
  if (chmod (fd_path, mode) < 0)
    return husk_error_make (err, errno, "chmod %04o `%s`", (unsigned) mode, path);
  return 0;
}
