/* Building the checkpoint archive with libarchive: a walk of a directory
 * written as a tar, the rootfs diff leaving overlay whiteouts out. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "cri/checkpoint_archive.h"
#include "husk/cleanup.h"
#include "husk/in_root.h"
#include "husk/util.h"

char *
checkpoint_time_text (int64_t ns)
{
  time_t secs = (time_t) (ns / 1000000000);
  struct tm tm;
  char date[64];

  gmtime_r (&secs, &tm);
  strftime (date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  return xasprintf ("%s.%09lldZ", date, (long long) (ns % 1000000000));
}

static json_t *
string_or_empty (const char *s)
{
  return json_string (s ? s : "");
}

char *
checkpoint_config_dump (const struct checkpoint_meta *meta)
{
  cleanup_free char *created = checkpoint_time_text (meta->created_ns);
  cleanup_free char *checkpointed = checkpoint_time_text (meta->checkpointed_ns);
  json_t *doc = json_object ();
  char *text;

  json_object_set_new (doc, "id", string_or_empty (meta->id));
  json_object_set_new (doc, "name", string_or_empty (meta->name));
  json_object_set_new (doc, "rootfsImage", string_or_empty (meta->image));
  json_object_set_new (doc, "rootfsImageRef", string_or_empty (meta->image_ref));
  json_object_set_new (doc, "rootfsImageName", string_or_empty (meta->image_name));
  json_object_set_new (doc, "runtime", string_or_empty (meta->runtime));
  json_object_set_new (doc, "createdTime", json_string (created));
  json_object_set_new (doc, "checkpointedTime", json_string (checkpointed));
  text = json_dumps (doc, JSON_INDENT (2) | JSON_PRESERVE_ORDER);
  json_decref (doc);
  return text;
}

int
checkpoint_config_parse (const char *text, const char *file_name, char **id, char **name, char **image_name,
                         struct husk_error **err)
{
  json_error_t jerr;
  json_t *doc = json_loads (text, 0, &jerr);
  const char *fields[] = { "id", "name", "rootfsImageName" };
  char **out[] = { id, name, image_name };

  if (doc == NULL || !json_is_object (doc))
    {
      json_decref (doc);
      return husk_error_kind (err, EINVAL, "%s: not a JSON object%s%s", file_name, doc ? "" : ": ",
                              doc ? "" : jerr.text);
    }
  for (size_t i = 0; i < 3; i++)
    {
      const char *value = json_string_value (json_object_get (doc, fields[i]));
      if (value == NULL || *value == '\0')
        {
          /* Nothing half-filled goes back to the caller. */
          for (size_t j = 0; j < i; j++)
            {
              free (*out[j]);
              *out[j] = NULL;
            }
          json_decref (doc);
          return husk_error_kind (err, EINVAL, "%s: `%s`: a non-empty string is required", file_name,
                                  fields[i]);
        }
      *out[i] = xstrdup (value);
    }
  json_decref (doc);
  return 0;
}

/* A 0:0 character device: overlayfs's mark of a deleted file. */
static bool
is_whiteout (struct archive_entry *entry)
{
  return archive_entry_filetype (entry) == AE_IFCHR && archive_entry_rdev (entry) == makedev (0, 0);
}

static int
copy_data (struct archive *disk, struct archive *out, const char *path, struct husk_error **err)
{
  char buf[65536];
  la_ssize_t n;

  while ((n = archive_read_data (disk, buf, sizeof buf)) > 0)
    if (archive_write_data (out, buf, (size_t) n) != n)
      return husk_error_make (err, 0, "write `%s` into the archive: %s", path, archive_error_string (out));
  if (n < 0)
    return husk_error_make (err, 0, "read `%s`: %s", path, archive_error_string (disk));
  return 0;
}

/* Walks DIR into the open writer OUT; whiteouts go to DELETED when it is
 * not NULL. */
static int
walk_into (const char *dir, struct archive *out, json_t *deleted, struct husk_error **err)
{
  struct archive *disk = archive_read_disk_new ();
  struct archive_entry *entry = archive_entry_new ();
  size_t prefix = strlen (dir);
  int ret = 0, r;

  archive_read_disk_set_standard_lookup (disk);
  archive_read_disk_set_behavior (disk, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS);
  if (archive_read_disk_open (disk, dir) != ARCHIVE_OK)
    ret = husk_error_make (err, 0, "read `%s`: %s", dir, archive_error_string (disk));
  while (ret == 0 && (r = archive_read_next_header2 (disk, entry)) != ARCHIVE_EOF)
    {
      const char *path = archive_entry_pathname (entry);
      if (r < ARCHIVE_WARN)
        {
          ret = husk_error_make (err, 0, "read `%s`: %s", dir, archive_error_string (disk));
          break;
        }
      archive_read_disk_descend (disk);
      if (strlen (path) <= prefix + 1)
        continue; /* DIR itself */
      archive_entry_set_pathname (entry, path + prefix + 1);
      if (deleted && is_whiteout (entry))
        {
          json_array_append_new (deleted, json_string (path + prefix + 1));
          continue;
        }
      if (archive_write_header (out, entry) != ARCHIVE_OK)
        ret = husk_error_make (err, 0, "write `%s` into the archive: %s", path, archive_error_string (out));
      else if (archive_entry_size (entry) > 0 && archive_entry_filetype (entry) == AE_IFREG)
        ret = copy_data (disk, out, path, err);
    }
  archive_entry_free (entry);
  archive_read_close (disk);
  archive_read_free (disk);
  return ret;
}

static int
write_tar (const char *dir, const char *out_path, json_t *deleted, struct husk_error **err)
{
  struct archive *out = archive_write_new ();
  int ret = 0;

  archive_write_set_format_pax_restricted (out);
  if (archive_write_open_filename (out, out_path) != ARCHIVE_OK)
    ret = husk_error_make (err, 0, "create `%s`: %s", out_path, archive_error_string (out));
  else if (dir && walk_into (dir, out, deleted, err) < 0)
    ret = -1;
  if (archive_write_close (out) != ARCHIVE_OK && ret == 0)
    ret = husk_error_make (err, 0, "finish `%s`: %s", out_path, archive_error_string (out));
  archive_write_free (out);
  if (ret < 0)
    unlink (out_path);
  return ret;
}

int
checkpoint_tar_dir (const char *dir, const char *out, struct husk_error **err)
{
  return write_tar (dir, out, NULL, err);
}

int
checkpoint_rootfs_diff (const char *upper, const char *out_tar, char **deleted_json, struct husk_error **err)
{
  json_t *deleted = json_array ();
  int ret = write_tar (access (upper, F_OK) == 0 ? upper : NULL, out_tar, deleted, err);

  *deleted_json = ret == 0 ? json_dumps (deleted, JSON_COMPACT) : NULL;
  json_decref (deleted);
  return ret;
}

void
checkpoint_archive_info_clear (struct checkpoint_archive_info *info)
{
  free (info->id);
  free (info->name);
  free (info->image_name);
  memset (info, 0, sizeof *info);
}

/* config.dump's text from the current entry of A (at most 1 MiB). */
static char *
read_entry_text (struct archive *a, struct archive_entry *entry)
{
  la_int64_t size = archive_entry_size (entry);
  char *text;
  la_ssize_t n;

  if (size < 0 || size > (1 << 20))
    return NULL;
  text = xmalloc ((size_t) size + 1);
  n = archive_read_data (a, text, (size_t) size);
  if (n != size)
    {
      free (text);
      return NULL;
    }
  text[size] = '\0';
  return text;
}

static void
note_entry (struct checkpoint_archive_info *info, const char *name)
{
  if (husk_str_has_prefix (name, "./"))
    name += 2;
  if (strcmp (name, CHECKPOINT_SPEC_DUMP) == 0)
    info->has_spec = true;
  else if (strcmp (name, CHECKPOINT_ROOTFS_DIFF) == 0)
    info->has_rootfs_diff = true;
  else if (strcmp (name, CHECKPOINT_DIR "/inventory.img") == 0)
    info->has_images = true;
}

int
checkpoint_archive_read (const char *path, struct checkpoint_archive_info *info, struct husk_error **err)
{
  struct archive *a = archive_read_new ();
  struct archive_entry *entry;
  cleanup_free char *config = NULL;
  int ret = 0, r;

  memset (info, 0, sizeof *info);
  archive_read_support_format_tar (a);
  archive_read_support_filter_all (a);
  if (archive_read_open_filename (a, path, 65536) != ARCHIVE_OK)
    ret = husk_error_kind (err, EINVAL, "checkpoint archive `%s`: %s", path, archive_error_string (a));
  while (ret == 0 && (r = archive_read_next_header (a, &entry)) != ARCHIVE_EOF)
    {
      const char *name = archive_entry_pathname (entry);
      if (r < ARCHIVE_WARN)
        {
          ret = husk_error_kind (err, EINVAL, "checkpoint archive `%s`: not a tar: %s", path,
                                 archive_error_string (a));
          break;
        }
      note_entry (info, name);
      if (config == NULL
          && (strcmp (name, CHECKPOINT_CONFIG_DUMP) == 0 || strcmp (name, "./config.dump") == 0)
          && (config = read_entry_text (a, entry)) == NULL)
        ret = husk_error_kind (err, EINVAL, "checkpoint archive `%s`: config.dump: unreadable or over 1 MiB",
                               path);
    }
  archive_read_free (a);
  if (ret == 0 && config == NULL)
    ret = husk_error_kind (err, EINVAL, "checkpoint archive `%s`: no config.dump: not a container checkpoint",
                           path);
  if (ret == 0 && (!info->has_spec || !info->has_images))
    ret = husk_error_kind (err, EINVAL, "checkpoint archive `%s`: no %s", path,
                           !info->has_spec ? "spec.dump" : "checkpoint/inventory.img (CRIU's images)");
  if (ret == 0)
    {
      cleanup_free char *what = xasprintf ("checkpoint archive `%s`: config.dump", path);
      ret = checkpoint_config_parse (config, what, &info->id, &info->name, &info->image_name, err);
    }
  if (ret < 0)
    checkpoint_archive_info_clear (info);
  return ret;
}

/* A relative path none of whose components is "..". */
static bool
safe_relative (const char *rel)
{
  if (rel[0] == '/')
    return false;
  for (const char *p = rel; *p;)
    {
      size_t len = strcspn (p, "/");
      if (len == 2 && p[0] == '.' && p[1] == '.')
        return false;
      p += len + (p[len] == '/');
    }
  return true;
}

/* The outer archive may hold only regular files and directories: a
 * symlink (or hard link) named rootfs-diff.tar or deleted.files would make
 * the restore read a host file as the container's.  (The caller names the
 * archive.) */
static int
check_top_level_member (struct archive_entry *entry, struct husk_error **err)
{
  mode_t type = archive_entry_filetype (entry);

  if (archive_entry_hardlink (entry) != NULL)
    return husk_error_kind (err, EINVAL,
                            "member `%s`: a hard link; only regular files and directories may be",
                            archive_entry_pathname (entry));
  if (type != AE_IFREG && type != AE_IFDIR)
    return husk_error_kind (err, EINVAL, "member `%s`: a %s; only regular files and directories may be",
                            archive_entry_pathname (entry),
                            type == AE_IFLNK    ? "symlink"
                            : type == AE_IFCHR  ? "character device"
                            : type == AE_IFBLK  ? "block device"
                            : type == AE_IFIFO  ? "fifo"
                            : type == AE_IFSOCK ? "socket"
                                                : "non-regular file");
  return 0;
}

static int
extract_entry (struct archive *a, struct archive *disk, struct archive_entry *entry, const char *path,
               const char *dest, struct husk_error **err)
{
  cleanup_free char *target = xasprintf ("%s/%s", dest, archive_entry_pathname (entry));
  const void *buf;
  size_t size;
  la_int64_t offset;
  int r;

  archive_entry_set_pathname (entry, target);
  if (archive_entry_hardlink (entry))
    {
      cleanup_free char *link = xasprintf ("%s/%s", dest, archive_entry_hardlink (entry));
      archive_entry_set_hardlink (entry, link);
    }
  /* libarchive's own refusals (through a symlink, `..`) carry no errno:
   * then the archive is what is wrong. */
  if (archive_write_header (disk, entry) < ARCHIVE_WARN)
    return archive_errno (disk) > 0
               ? husk_error_make (err, archive_errno (disk), "extract `%s`", target)
               : husk_error_kind (err, EINVAL, "extract `%s`: %s", target, archive_error_string (disk));
  while ((r = archive_read_data_block (a, &buf, &size, &offset)) == ARCHIVE_OK)
    if (archive_write_data_block (disk, buf, size, offset) < ARCHIVE_WARN)
      return husk_error_make (err, 0, "extract `%s`: %s", target, archive_error_string (disk));
  if (r < ARCHIVE_WARN)
    return husk_error_kind (err, EINVAL, "`%s`: %s", path, archive_error_string (a));
  if (archive_write_finish_entry (disk) < ARCHIVE_WARN)
    return husk_error_make (err, 0, "extract `%s`: %s", target, archive_error_string (disk));
  return 0;
}

int
checkpoint_extract (const char *path, const char *dest, bool top_level, struct husk_error **err)
{
  struct archive *a = archive_read_new ();
  struct archive *disk = archive_write_disk_new ();
  struct archive_entry *entry;
  int ret = 0, r;

  archive_read_support_format_tar (a);
  /* Entry paths are checked here (they get DEST prepended, which the
   * library's own absolute-path check would refuse); the library refuses
   * to write through a symlink already on disk, one made by an earlier
   * entry or one the image put in the rootfs. */
  archive_write_disk_set_options (disk, ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT
                                            | ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM
                                            | ARCHIVE_EXTRACT_TIME);
  if (archive_read_open_filename (a, path, 65536) != ARCHIVE_OK)
    ret = husk_error_kind (err, EINVAL, "`%s`: %s", path, archive_error_string (a));
  while (ret == 0 && (r = archive_read_next_header (a, &entry)) != ARCHIVE_EOF)
    {
      if (r < ARCHIVE_WARN)
        {
          ret = husk_error_kind (err, EINVAL, "`%s`: %s", path, archive_error_string (a));
          break;
        }
      if (!safe_relative (archive_entry_pathname (entry))
          || (archive_entry_hardlink (entry) && !safe_relative (archive_entry_hardlink (entry))))
        ret = husk_error_kind (err, EINVAL, "`%s`: entry `%s`: an absolute path or `..`", path,
                               archive_entry_pathname (entry));
      else if (top_level && check_top_level_member (entry, err) < 0)
        ret = -1;
      else
        ret = extract_entry (a, disk, entry, path, dest, err);
    }
  archive_read_free (a);
  archive_write_free (disk);
  return ret;
}

/* Removes REL (deleted.files' entry I) inside ROOT_FD: its parent is
 * resolved as the container would see it, its last component is never
 * followed.  A path that is not there is nothing to remove. */
static int
remove_in_root (int root_fd, const char *rel, size_t i, struct husk_error **err)
{
  const char *slash = strrchr (rel, '/');
  cleanup_free char *parent = slash ? xasprintf ("%.*s", (int) (slash - rel), rel) : xstrdup (".");
  const char *name = slash ? slash + 1 : rel;
  cleanup_close int dir_fd = -1;

  if (*name == '\0' || strcmp (name, ".") == 0)
    return husk_error_kind (err, EINVAL, "deleted.files: [%zu] `%s`: names no file", i, rel);
  dir_fd = husk_open_in_root (root_fd, parent, O_PATH | O_DIRECTORY);
  if (dir_fd < 0 && (errno == ENOENT || errno == ENOTDIR))
    return 0;
  if (dir_fd < 0)
    return husk_error_make (err, errno, "deleted.files: [%zu] `%s`", i, rel);
  if (husk_rm_rf_at (dir_fd, name, err) < 0)
    return husk_error_wrap (err, "deleted.files: [%zu] `%s`", i, rel);
  return 0;
}

int
checkpoint_apply_deleted (const char *rootfs, const char *deleted_json, struct husk_error **err)
{
  json_t *list = json_loads (deleted_json, 0, NULL);
  cleanup_close int root_fd = -1;
  size_t i;
  json_t *item;
  int ret = 0;

  if (!json_is_array (list))
    ret = husk_error_kind (err, EINVAL, "deleted.files: not a JSON list");
  else if ((root_fd = open (rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
    ret = husk_error_make (err, errno, "rootfs `%s`", rootfs);
  json_array_foreach (list, i, item)
  {
    const char *rel = json_string_value (item);
    if (ret < 0)
      break;
    if (rel == NULL || !safe_relative (rel))
      {
        ret = husk_error_kind (err, EINVAL, "deleted.files: [%zu]: not a relative path without `..`", i);
        break;
      }
    ret = remove_in_root (root_fd, rel, i, err);
  }
  json_decref (list);
  return ret;
}
