/* husk container cp: files and directories between a container's rootfs
 * and the host.  The rootfs belongs to the image and to whatever runs in
 * it: a container path is resolved as the container sees it (openat2
 * RESOLVE_IN_ROOT, cri/cdi/hook.c), and below that every step is one
 * openat of one name with O_NOFOLLOW, so no symlink leads out of the
 * rootfs.  A symlink is copied as a symlink; a file's setuid and setgid
 * bits are dropped; a FIFO or device is skipped with a warning. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "husk/in_root.h"
#include "cri/cli/cli.h"
#include "cri/container/containers.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define CP_USAGE                                                                                             \
  "usage: husk container cp CONTAINER:SRC_PATH DEST_PATH\n"                                                  \
  "       husk container cp SRC_PATH CONTAINER:DEST_PATH\n"                                                  \
  "  -h, --help  this text\n"                                                                                \
  "Copies a file or a directory (recursively).  A container path is resolved inside its\n"                   \
  "root filesystem: symlinks there never lead out of it.\n"

static int
copy_data (int src_fd, int dst_fd, const char *what, struct husk_error **err)
{
  char buf[65536];
  ssize_t n;

  while ((n = read (src_fd, buf, sizeof buf)) != 0)
    {
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return husk_error_make (err, errno, "container cp: read `%s`", what);
      for (ssize_t done = 0; done < n;)
        {
          ssize_t w = write (dst_fd, buf + done, (size_t) (n - done));
          if (w < 0 && errno == EINTR)
            continue;
          if (w < 0)
            return husk_error_make (err, errno, "container cp: write `%s`", what);
          done += w;
        }
    }
  return 0;
}

static int copy_entry (int src_dir, const char *src_name, int dst_dir, const char *dst_name, const char *what,
                       struct husk_error **err);

static int
copy_file (int src_dir, const char *src_name, int dst_dir, const char *dst_name, const char *what,
           struct husk_error **err)
{
  /* O_NONBLOCK: a FIFO put here after the stat does not hang us. */
  cleanup_close int src = openat (src_dir, src_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  cleanup_close int dst = -1;
  struct stat st;

  if (src < 0 || fstat (src, &st) < 0)
    return husk_error_make (err, errno, "container cp: open `%s`", what);
  if (!S_ISREG (st.st_mode))
    return husk_error_make (err, 0, "container cp: `%s` changed while being copied", what);
  fcntl (src, F_SETFL, 0);
  dst = openat (dst_dir, dst_name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, st.st_mode & 0777);
  if (dst < 0)
    return husk_error_make (err, errno, "container cp: create `%s`", dst_name);
  if (copy_data (src, dst, what, err) < 0)
    return -1;
  if (fchmod (dst, st.st_mode & 0777) < 0)
    return husk_error_make (err, errno, "container cp: chmod `%s`", dst_name);
  return 0;
}

static int
copy_dir (int src_dir, const char *src_name, int dst_dir, const char *dst_name, const char *what,
          struct husk_error **err)
{
  cleanup_close int src = openat (src_dir, src_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  cleanup_close int dst = -1;
  cleanup_dir DIR *dir = NULL;
  struct stat st;
  struct dirent *de;

  if (src < 0 || fstat (src, &st) < 0)
    return husk_error_make (err, errno, "container cp: open directory `%s`", what);
  if (mkdirat (dst_dir, dst_name, 0700) < 0 && errno != EEXIST)
    return husk_error_make (err, errno, "container cp: mkdir `%s`", dst_name);
  dst = openat (dst_dir, dst_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dst < 0)
    return husk_error_make (err, errno, "container cp: open directory `%s`", dst_name);
  dir = fdopendir (dup (src));
  if (dir == NULL)
    return husk_error_make (err, errno, "container cp: read directory `%s`", what);
  while ((de = readdir (dir)) != NULL)
    {
      cleanup_free char *sub = NULL;
      if (strcmp (de->d_name, ".") == 0 || strcmp (de->d_name, "..") == 0)
        continue;
      sub = xasprintf ("%s/%s", what, de->d_name);
      if (copy_entry (src, de->d_name, dst, de->d_name, sub, err) < 0)
        return -1;
    }
  if (fchmod (dst, st.st_mode & 0777) < 0)
    return husk_error_make (err, errno, "container cp: chmod `%s`", dst_name);
  return 0;
}

static int
copy_entry (int src_dir, const char *src_name, int dst_dir, const char *dst_name, const char *what,
            struct husk_error **err)
{
  char target[PATH_MAX];
  struct stat st;
  ssize_t len;

  if (fstatat (src_dir, src_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return husk_error_make (err, errno, "container cp: `%s`", what);
  if (S_ISREG (st.st_mode))
    return copy_file (src_dir, src_name, dst_dir, dst_name, what, err);
  if (S_ISDIR (st.st_mode))
    return copy_dir (src_dir, src_name, dst_dir, dst_name, what, err);
  if (S_ISLNK (st.st_mode))
    {
      len = readlinkat (src_dir, src_name, target, sizeof target - 1);
      if (len < 0)
        return husk_error_make (err, errno, "container cp: readlink `%s`", what);
      target[len] = '\0';
      if (symlinkat (target, dst_dir, dst_name) < 0)
        return husk_error_make (err, errno, "container cp: symlink `%s`", dst_name);
      return 0;
    }
  fprintf (stderr, "husk: warning: container cp: `%s` is not a file, directory or symlink: skipped\n", what);
  return 0;
}

/* The container's root filesystem, from its bundle's config.json. */
static int
open_rootfs (const struct container_cli_env *env, const char *name, struct husk_error **err)
{
  struct container_record *rec = NULL;
  cleanup_free char *bundle = NULL;
  cleanup_free char *config_path = NULL;
  const char *root;
  json_t *config;
  int fd;

  if (containers_lookup (&env->containers, name, &rec, err) < 0)
    return -1;
  bundle = containers_bundle_dir (env->containers.image_root, rec->id);
  container_record_free (rec);
  config_path = xasprintf ("%s/config.json", bundle);
  config = json_load_file (config_path, 0, NULL);
  root = json_string_value (json_object_get (json_object_get (config, "root"), "path"));
  if (root == NULL)
    {
      json_decref (config);
      return husk_error_make (err, 0, "container cp: %s: no root path in `%s`", name, config_path);
    }
  {
    cleanup_free char *path = root[0] == '/' ? xstrdup (root) : xasprintf ("%s/%s", bundle, root);
    fd = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  if (fd < 0)
    husk_error_make (err, errno, "container cp: %s: root filesystem `%s`", name, root);
  json_decref (config);
  return fd;
}

/* Splits PATH into its folder and last name (for "/" or "x/.": "."). */
static void
split_path (const char *path, char **dir, char **name)
{
  cleanup_free char *a = xstrdup (path), *b = xstrdup (path);
  char *base = basename (a);

  *dir = xstrdup (dirname (b));
  *name = xstrdup (strcmp (base, "/") == 0 ? "." : base);
}

/* Container SRC (in ROOT_FD) to host DST. */
static int
copy_out (int root_fd, const char *src, const char *dst, struct husk_error **err)
{
  cleanup_free char *src_dir = NULL, *src_name = NULL, *dst_dir = NULL, *dst_name = NULL;
  cleanup_close int from = -1, to = -1;
  struct stat st;

  split_path (src, &src_dir, &src_name);
  from = husk_open_in_root (root_fd, src_dir, O_RDONLY | O_DIRECTORY);
  if (from < 0)
    return husk_error_make (err, errno, "container cp: `%s` in the container: `%s`", src, src_dir);
  if (stat (dst, &st) == 0 && S_ISDIR (st.st_mode))
    {
      dst_dir = xstrdup (dst);
      dst_name = xstrdup (strcmp (src_name, ".") == 0 ? "rootfs" : src_name);
    }
  else
    split_path (dst, &dst_dir, &dst_name);
  to = open (dst_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (to < 0)
    return husk_error_make (err, errno, "container cp: `%s` on the host", dst_dir);
  return copy_entry (from, src_name, to, dst_name, src, err);
}

/* Host SRC to container DST (in ROOT_FD). */
static int
copy_in (int root_fd, const char *src, const char *dst, struct husk_error **err)
{
  cleanup_free char *src_dir = NULL, *src_name = NULL, *dst_dir = NULL, *dst_name = NULL;
  cleanup_close int from = -1, to = -1;

  split_path (src, &src_dir, &src_name);
  from = open (src_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (from < 0)
    return husk_error_make (err, errno, "container cp: `%s` on the host", src_dir);
  to = husk_open_in_root (root_fd, dst, O_RDONLY | O_DIRECTORY);
  if (to >= 0)
    dst_name = xstrdup (src_name);
  else
    {
      split_path (dst, &dst_dir, &dst_name);
      to = husk_open_in_root (root_fd, dst_dir, O_RDONLY | O_DIRECTORY);
      if (to < 0)
        return husk_error_make (err, errno, "container cp: `%s` in the container: `%s`", dst, dst_dir);
    }
  return copy_entry (from, src_name, to, dst_name, src, err);
}

/* CONTAINER:PATH -> the container's name (new) and *PATH; NULL when ARG
 * is a host path (one with a '/' before any ':', or none). */
static char *
container_part (const char *arg, const char **path)
{
  const char *colon = strchr (arg, ':');

  if (colon == NULL || colon == arg || memchr (arg, '/', (size_t) (colon - arg)))
    return NULL;
  *path = colon + 1;
  return xasprintf ("%.*s", (int) (colon - arg), arg);
}

int
container_cli_cp (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = { { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
  static const struct cli_verb verb = { "cp", CP_USAGE, "", options };
  cleanup_free char *src_ctr = NULL, *dst_ctr = NULL;
  const char *src_path = NULL, *dst_path = NULL;
  cleanup_close int root_fd = -1;
  int c;

  optind = 1;
  while ((c = cli_getopt (&verb, argc, argv, err)) >= 0)
    ;
  if (c != -1)
    return c == CLI_HELP ? 0 : -1;
  if (optind + 2 != argc)
    return husk_error_make (err, 0, "container cp: expected SRC and DEST, one of them CONTAINER:PATH");
  src_ctr = container_part (argv[optind], &src_path);
  dst_ctr = container_part (argv[optind + 1], &dst_path);
  if ((src_ctr == NULL) == (dst_ctr == NULL))
    return husk_error_make (err, 0, "container cp: `%s` `%s`: exactly one must be CONTAINER:PATH",
                            argv[optind], argv[optind + 1]);
  if ((src_ctr && src_path[0] == '\0') || (dst_ctr && dst_path[0] == '\0'))
    return husk_error_make (err, 0, "container cp: a container path must not be empty");
  root_fd = open_rootfs (env, src_ctr ? src_ctr : dst_ctr, err);
  if (root_fd < 0)
    return -1;
  if (src_ctr)
    return copy_out (root_fd, src_path, argv[optind + 1], err);
  return copy_in (root_fd, argv[optind], dst_path, err);
}
