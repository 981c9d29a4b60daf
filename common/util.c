/* File, directory, string and time helpers shared by every component
 * (allocation is in alloc.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"

int
husk_read_fd (int fd, char **out, size_t *len, const char *what, struct husk_error **err)
{
  size_t cap = 4096, used = 0;
  cleanup_free char *buf = xmalloc (cap);

  for (;;)
    {
      ssize_t n;

      if (used + 1 >= cap)
        {
          cap *= 2;
          buf = xrealloc (buf, cap);
        }
      n = read (fd, buf + used, cap - used - 1);
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          return husk_error_make (err, errno, "read `%s`", what);
        }
      if (n == 0)
        break;
      used += (size_t) n;
    }
  buf[used] = '\0';
  if (len)
    *len = used;
  *out = steal_pointer (&buf);
  return 0;
}

int
husk_reread_fd (int fd, char **out, size_t *len, const char *what, struct husk_error **err)
{
  size_t cap = 4096, used = 0;
  cleanup_free char *buf = xmalloc (cap);

  for (;;)
    {
      ssize_t n = pread (fd, buf + used, cap - used - 1, (off_t) used);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return husk_error_make (err, errno, "read `%s`", what);
      used += (size_t) n;
      if (used < cap - 1)
        break;
      buf = xrealloc (buf, cap *= 2);
    }
  buf[used] = '\0';
  if (len)
    *len = used;
  *out = steal_pointer (&buf);
  return 0;
}

int
husk_read_file (const char *path, char **out, size_t *len, struct husk_error **err)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    return husk_error_make (err, errno, "open `%s`", path);
  return husk_read_fd (fd, out, len, path, err);
}

static int
write_and_rename (const char *path, const void *data, size_t len, mode_t mode, bool durable,
                  struct husk_error **err)
{
  /* Per thread, not per process: two threads of huskd may save the same
   * record at once, and each must rename a whole file of its own. */
  cleanup_free char *tmp = xasprintf ("%s.tmp.%d.%d", path, (int) getpid (), (int) gettid ());
  cleanup_close int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

  if (fd < 0)
    return husk_error_make (err, errno, "create `%s`", tmp);
  if (husk_write_all (fd, data, len) < 0 || (durable && fsync (fd) < 0))
    {
      int saved = errno;
      unlink (tmp);
      return husk_error_make (err, saved, "write `%s`", tmp);
    }
  if (rename (tmp, path) < 0)
    {
      int saved = errno;
      unlink (tmp);
      return husk_error_make (err, saved, "rename `%s` to `%s`", tmp, path);
    }
  return 0;
}

int
husk_write_file_prepare (const char *path, const void *data, size_t len, mode_t mode, char **tmp_out,
                         struct husk_error **err)
{
  cleanup_free char *tmp = xasprintf ("%s.tmp.%d.%d", path, (int) getpid (), (int) gettid ());
  cleanup_close int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

  if (fd < 0)
    return husk_error_make (err, errno, "create `%s`", tmp);
  if (husk_write_all (fd, data, len) < 0 || fsync (fd) < 0)
    {
      int saved = errno;
      unlink (tmp);
      return husk_error_make (err, saved, "write `%s`", tmp);
    }
  *tmp_out = steal_pointer (&tmp);
  return 0;
}

int
husk_write_file_commit (char **tmp, const char *path, struct husk_error **err)
{
  int ret = 0;

  if (rename (*tmp, path) < 0)
    {
      int saved = errno;
      unlink (*tmp);
      ret = husk_error_make (err, saved, "rename `%s` to `%s`", *tmp, path);
    }
  free (*tmp);
  *tmp = NULL;
  return ret;
}

void
husk_write_file_discard (char **tmp)
{
  if (*tmp)
    unlink (*tmp);
  free (*tmp);
  *tmp = NULL;
}

int
husk_write_file_atomic (const char *path, const void *data, size_t len, mode_t mode, struct husk_error **err)
{
  return write_and_rename (path, data, len, mode, true, err);
}

int
husk_write_file_replace (const char *path, const void *data, size_t len, mode_t mode, struct husk_error **err)
{
  return write_and_rename (path, data, len, mode, false, err);
}

static bool
all_digits (const char *s, size_t len)
{
  if (len == 0)
    return false;
  for (size_t i = 0; i < len; i++)
    if (s[i] < '0' || s[i] > '9')
      return false;
  return true;
}

/* The writer's pid when NAME is one of write_and_rename's temp files
 * (NAME.tmp.PID.TID), else 0. */
static pid_t
tmp_file_writer (const char *name)
{
  const char *tid_dot = strrchr (name, '.');
  const char *pid_dot;
  long long pid;

  if (tid_dot == NULL || tid_dot == name || !all_digits (tid_dot + 1, strlen (tid_dot + 1)))
    return 0;
  for (pid_dot = tid_dot - 1; pid_dot > name && *pid_dot != '.'; pid_dot--)
    ;
  if (*pid_dot != '.' || !all_digits (pid_dot + 1, (size_t) (tid_dot - pid_dot - 1)) || pid_dot - name < 5
      || strncmp (pid_dot - 4, ".tmp", 4) != 0)
    return 0;
  pid = strtoll (pid_dot + 1, NULL, 10);
  return pid > 0 && pid <= INT_MAX ? (pid_t) pid : 0;
}

static bool
process_exists (pid_t pid)
{
  return kill (pid, 0) == 0 || errno == EPERM;
}

static void
remove_stale_in (const char *path, dev_t dev, int levels, char ***removed)
{
  cleanup_dir DIR *dir = opendir (path);
  struct dirent *de;

  while (dir != NULL && (de = readdir (dir)) != NULL)
    {
      cleanup_free char *child = NULL;
      pid_t writer = tmp_file_writer (de->d_name);
      bool maybe_dir = de->d_type == DT_DIR || de->d_type == DT_UNKNOWN;
      struct stat st;

      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0
          || (writer == 0 && (levels == 0 || !maybe_dir)))
        continue;
      child = xasprintf ("%s/%s", path, de->d_name);
      if (lstat (child, &st) < 0)
        continue;
      if (S_ISREG (st.st_mode) && writer > 0 && !process_exists (writer) && unlink (child) == 0)
        *removed = husk_strv_append (*removed, child);
      else if (S_ISDIR (st.st_mode) && levels > 0 && st.st_dev == dev)
        remove_stale_in (child, dev, levels - 1, removed);
    }
}

int
husk_remove_stale_tmp (const char *dir, int levels, char ***removed, struct husk_error **err)
{
  struct stat st;

  *removed = xcalloc (1, sizeof **removed);
  if (stat (dir, &st) < 0)
    return errno == ENOENT ? 0 : husk_error_make (err, errno, "stat `%s`", dir);
  remove_stale_in (dir, st.st_dev, levels, removed);
  return 0;
}

int
husk_write_file (const char *path, const char *data, size_t len, struct husk_error **err)
{
  cleanup_close int fd = open (path, O_WRONLY | O_CLOEXEC);

  if (fd < 0)
    return husk_error_make (err, errno, "open `%s`", path);
  if (husk_write_all (fd, data, len) < 0)
    return husk_error_make (err, errno, "write `%s`", path);
  return 0;
}

int
husk_mkdir_p (const char *path, mode_t mode, struct husk_error **err)
{
  cleanup_free char *copy = NULL;

  /* Most often only the last level is missing. */
  if (mkdir (path, mode) == 0 || errno == EEXIST)
    return 0;
  if (errno != ENOENT)
    return husk_error_make (err, errno, "mkdir `%s`", path);
  copy = xstrdup (path);
  for (char *p = copy + 1; *p; p++)
    {
      if (*p != '/')
        continue;
      *p = '\0';
      if (mkdir (copy, mode) < 0 && errno != EEXIST)
        return husk_error_make (err, errno, "mkdir `%s`", copy);
      *p = '/';
    }
  if (mkdir (copy, mode) < 0 && errno != EEXIST)
    return husk_error_make (err, errno, "mkdir `%s`", copy);
  return 0;
}

static int
rm_rf_at (int parent_fd, const char *name, dev_t dev, struct husk_error **err)
{
  struct stat st;
  cleanup_close int fd = -1;
  cleanup_dir DIR *dir = NULL;
  struct dirent *de;

  if (fstatat (parent_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : husk_error_make (err, errno, "stat `%s`", name);
  if (!S_ISDIR (st.st_mode))
    {
      if (unlinkat (parent_fd, name, 0) < 0 && errno != ENOENT)
        return husk_error_make (err, errno, "unlink `%s`", name);
      return 0;
    }
  if (st.st_dev != dev)
    return husk_error_make (err, EBUSY, "remove `%s`: a mount point", name);
  fd = openat (parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return husk_error_make (err, errno, "open `%s`", name);
  dir = fdopendir (fd);
  if (dir == NULL)
    return husk_error_make (err, errno, "opendir `%s`", name);
  fd = -1; /* owned by dir now */
  while ((de = readdir (dir)) != NULL)
    {
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      if (rm_rf_at (dirfd (dir), de->d_name, dev, err) < 0)
        return husk_error_wrap (err, "remove `%s`", name);
    }
  if (unlinkat (parent_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    return husk_error_make (err, errno, "rmdir `%s`", name);
  return 0;
}

int
husk_rm_rf (const char *path, struct husk_error **err)
{
  struct stat st;

  if (lstat (path, &st) < 0)
    return errno == ENOENT ? 0 : husk_error_make (err, errno, "stat `%s`", path);
  return rm_rf_at (AT_FDCWD, path, st.st_dev, err);
}

int
husk_rm_rf_at (int parent_fd, const char *name, struct husk_error **err)
{
  struct stat st;

  if (fstat (parent_fd, &st) < 0)
    return husk_error_make (err, errno, "stat the directory of `%s`", name);
  return rm_rf_at (parent_fd, name, st.st_dev, err);
}

bool
husk_str_has_prefix (const char *s, const char *prefix)
{
  return strncmp (s, prefix, strlen (prefix)) == 0;
}

bool
husk_str_has_suffix (const char *s, const char *suffix)
{
  size_t ls = strlen (s), lx = strlen (suffix);
  return ls >= lx && strcmp (s + ls - lx, suffix) == 0;
}

long
husk_status_ns_pid (const char *status)
{
  const char *line = strstr (status, "\nNSpid:");
  long last = 0;

  for (char *p = line ? (char *) line + strlen ("\nNSpid:") : NULL, *end; p && *p != '\n' && *p; p = end)
    {
      long v = strtol (p, &end, 10);
      if (end == p)
        break;
      last = v;
    }
  return last;
}

int
husk_parse_int64 (const char *s, long long min, long long max, long long *out)
{
  char *end = NULL;
  long long v;

  if (s == NULL || *s == '\0')
    return -1;
  errno = 0;
  v = strtoll (s, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max)
    return -1;
  *out = v;
  return 0;
}

static int
compare_strings (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

char **
husk_strv_sorted_copy (char *const *v, size_t n)
{
  char **sorted = xcalloc (n + 1, sizeof *sorted);

  if (n > 0)
    {
      memcpy (sorted, v, n * sizeof *sorted);
      qsort (sorted, n, sizeof *sorted, compare_strings);
    }
  return sorted;
}

bool
husk_sorted_strv_contains (char *const *sorted, size_t n, const char *s)
{
  return bsearch (&s, sorted, n, sizeof *sorted, compare_strings) != NULL;
}

bool
husk_strv_contains (char *const *v, const char *s)
{
  for (size_t i = 0; v && v[i]; i++)
    if (strcmp (v[i], s) == 0)
      return true;
  return false;
}

size_t
husk_strv_len (char *const *v)
{
  size_t n = 0;
  while (v && v[n])
    n++;
  return n;
}

char **
husk_strv_append (char **v, const char *s)
{
  size_t n = husk_strv_len (v);

  v = xrealloc (v, (n + 2) * sizeof (char *));
  v[n] = xstrdup (s);
  v[n + 1] = NULL;
  return v;
}

int64_t
husk_clock_ns (clockid_t clock)
{
  struct timespec ts;

  clock_gettime (clock, &ts);
  return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int
husk_ms_until (const struct timespec *deadline)
{
  struct timespec now;
  long long ms;

  clock_gettime (CLOCK_MONOTONIC, &now);
  ms = (deadline->tv_sec - now.tv_sec) * 1000LL + (deadline->tv_nsec - now.tv_nsec) / 1000000;
  return ms < 0 ? 0 : (int) ms;
}

const char *
husk_getopt_bad_option (char **argv, char buf[3])
{
  if (optopt > 0 && optopt < 128 && optopt != '-' && optopt > ' ')
    {
      buf[0] = '-';
      buf[1] = (char) optopt;
      buf[2] = '\0';
      return buf;
    }
  return argv[optind - 1];
}

char **
husk_cgroup_mounts (bool named_v1_only)
{
  cleanup_file FILE *f = fopen ("/proc/self/mountinfo", "re");
  cleanup_free char *line = NULL;
  size_t size = 0;
  char **mounts = xcalloc (1, sizeof *mounts);

  while (f && getline (&line, &size, f) > 0)
    {
      char mount[4096], fstype[64], options[1024];
      const char *tail = strstr (line, " - ");

      if (tail == NULL || sscanf (line, "%*s %*s %*s %*s %4095s", mount) != 1
          || sscanf (tail + 3, "%63s %*s %1023s", fstype, options) != 2)
        continue;
      if (named_v1_only ? strcmp (fstype, "cgroup") == 0 && strstr (options, "name=") != NULL
                        : strcmp (fstype, "cgroup") == 0 || strcmp (fstype, "cgroup2") == 0)
        mounts = husk_strv_append (mounts, mount);
    }
  return mounts;
}
