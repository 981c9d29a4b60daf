/* User and group lookup inside an image's rootfs: a line parser for the
 * passwd(5) and group(5) formats and the rules docker applies to a User
 * string. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/passwd.h"
#include "image/unpack.h"

#define ID_MAX 4294967294LL /* (uid_t) -1 means "no change" to the kernel */

/* One line split on ':', empty fields kept. */
struct fields
{
  char *field[8];
  size_t n;
};

static void
split_fields (char *line, struct fields *out)
{
  out->n = 0;
  for (char *p = line; out->n < sizeof out->field / sizeof out->field[0];)
    {
      out->field[out->n++] = p;
      p = strchr (p, ':');
      if (p == NULL)
        break;
      *p++ = '\0';
    }
}

/* Reads ETC_NAME ("etc/passwd") inside the rootfs; a missing file is empty.
 * O_NONBLOCK so that a FIFO planted there cannot hang us. */
static int
read_rootfs_file (int rootfs_fd, const char *etc_name, char **out, struct husk_error **err)
{
  cleanup_close int fd = unpack_openat_in_root (rootfs_fd, etc_name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  struct stat st;

  if (fd < 0 && errno == ENOENT)
    {
      *out = xstrdup ("");
      return 0;
    }
  if (fd < 0 || fstat (fd, &st) < 0)
    return husk_error_make (err, errno, "open /%s in the rootfs", etc_name);
  if (!S_ISREG (st.st_mode) || st.st_size > PASSWD_FILE_MAX)
    return husk_error_make (err, 0, "/%s in the rootfs is not a regular file of at most %d bytes", etc_name,
                            PASSWD_FILE_MAX);
  return husk_read_fd (fd, out, NULL, etc_name, err);
}

static bool
parse_id (const char *s, long long *out)
{
  return s[0] >= '0' && s[0] <= '9' && husk_parse_int64 (s, 0, ID_MAX, out) == 0;
}

static bool
is_number (const char *s)
{
  return *s && strspn (s, "0123456789") == strlen (s);
}

/* Calls MATCH on each well-formed line with at least MIN_FIELDS fields
 * until it returns true. */
static bool
scan_lines (char *text, size_t min_fields, bool (*match) (struct fields *f, void *data), void *data)
{
  char *save = NULL;

  for (char *line = strtok_r (text, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      struct fields f;
      long long id;
      /* '+' and '-' are NIS compat entries, not users. */
      if (line[0] == '#' || line[0] == '+' || line[0] == '-')
        continue;
      split_fields (line, &f);
      if (f.n < min_fields || f.field[0][0] == '\0' || !parse_id (f.field[2], &id))
        continue;
      if (match (&f, data))
        return true;
    }
  return false;
}

struct user_query
{
  const char *name; /* match by name when set, else by uid */
  long long uid;
  struct passwd_user *out;
};

static bool
match_user (struct fields *f, void *data)
{
  struct user_query *q = data;
  long long uid, gid;

  parse_id (f->field[2], &uid);
  if (q->name ? strcmp (f->field[0], q->name) != 0 : uid != q->uid)
    return false;
  if (f->n < 4 || !parse_id (f->field[3], &gid))
    gid = 0;
  q->out->uid = (uid_t) uid;
  q->out->gid = (gid_t) gid;
  q->out->name = xstrdup (f->field[0]);
  if (f->n >= 6 && f->field[5][0] == '/')
    {
      free (q->out->home);
      q->out->home = xstrdup (f->field[5]);
    }
  return true;
}

struct group_query
{
  const char *name;
  long long gid;
};

static bool
match_group_name (struct fields *f, void *data)
{
  struct group_query *q = data;

  if (strcmp (f->field[0], q->name) != 0)
    return false;
  parse_id (f->field[2], &q->gid);
  return true;
}

static bool
member_of (char *members, const char *name)
{
  char *save = NULL;

  for (char *m = strtok_r (members, ",", &save); m; m = strtok_r (NULL, ",", &save))
    if (strcmp (m, name) == 0)
      return true;
  return false;
}

static bool
collect_groups (struct fields *f, void *data)
{
  struct passwd_user *user = data;
  long long gid;

  parse_id (f->field[2], &gid);
  if (f->n < 4 || (gid_t) gid == user->gid || !member_of (f->field[3], user->name))
    return false;
  for (size_t i = 0; i < user->n_additional_gids; i++)
    if (user->additional_gids[i] == (gid_t) gid)
      return false;
  user->additional_gids = xrealloc (user->additional_gids, (user->n_additional_gids + 1) * sizeof (gid_t));
  user->additional_gids[user->n_additional_gids++] = (gid_t) gid;
  return false; /* keep scanning */
}

static int
resolve_user (int rootfs_fd, const char *user, struct passwd_user *out, struct husk_error **err)
{
  cleanup_free char *passwd = NULL;
  struct user_query q = { .out = out };

  if (read_rootfs_file (rootfs_fd, "etc/passwd", &passwd, err) < 0)
    return -1;
  if (*user == '\0')
    user = "0";
  if (is_number (user))
    {
      if (!parse_id (user, &q.uid))
        return husk_error_make (err, 0, "user `%s`: uid out of range", user);
      out->uid = (uid_t) q.uid;
      scan_lines (passwd, 3, match_user, &q);
      return 0;
    }
  q.name = user;
  if (!scan_lines (passwd, 3, match_user, &q))
    return husk_error_make (err, 0, "user `%s` not found in the image's /etc/passwd", user);
  return 0;
}

static int
resolve_group (char *group_file, const char *group, struct passwd_user *out, struct husk_error **err)
{
  cleanup_free char *copy = xstrdup (group_file);
  struct group_query q = { .name = group };

  if (is_number (group))
    {
      if (!parse_id (group, &q.gid))
        return husk_error_make (err, 0, "group `%s`: gid out of range", group);
    }
  else if (!scan_lines (copy, 3, match_group_name, &q))
    return husk_error_make (err, 0, "group `%s` not found in the image's /etc/group", group);
  out->gid = (gid_t) q.gid;
  return 0;
}

int
passwd_resolve_at (int rootfs_fd, const char *user_spec, struct passwd_user *out, struct husk_error **err)
{
  cleanup_free char *spec = xstrdup (user_spec ? user_spec : "");
  cleanup_free char *group_file = NULL;
  char *group = strchr (spec, ':');

  memset (out, 0, sizeof *out);
  out->home = xstrdup ("/");
  if (group)
    *group++ = '\0';
  if (resolve_user (rootfs_fd, spec, out, err) < 0
      || read_rootfs_file (rootfs_fd, "etc/group", &group_file, err) < 0
      || (group && *group && resolve_group (group_file, group, out, err) < 0))
    {
      passwd_user_clear (out);
      return husk_error_wrap (err, "resolve user `%s`", user_spec ? user_spec : "");
    }
  if (out->name)
    scan_lines (group_file, 3, collect_groups, out);
  return 0;
}

int
passwd_resolve (const char *rootfs_dir, const char *user_spec, struct passwd_user *out,
                struct husk_error **err)
{
  cleanup_close int fd = open (rootfs_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0)
    return husk_error_make (err, errno, "open rootfs `%s`", rootfs_dir);
  return passwd_resolve_at (fd, user_spec, out, err);
}

void
passwd_user_clear (struct passwd_user *user)
{
  free (user->name);
  free (user->home);
  free (user->additional_gids);
  memset (user, 0, sizeof *user);
}
