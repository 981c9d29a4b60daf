/* Unit tests for layer unpack: every file type and its metadata, whiteouts,
 * the diffID over gzip/zstd/plain layers, and the malicious layers that try
 * to write outside the target.  Layers are built here with libarchive. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/unpack.h"

enum layer_filter
{
  FILTER_NONE,
  FILTER_GZIP,
  FILTER_ZSTD,
};

struct tar_entry
{
  const char *path;
  mode_t type; /* AE_IF*; 0 with hardlink set */
  mode_t perm;
  const char *content;  /* regular file data */
  size_t size;          /* of content; 0: strlen */
  const char *link;     /* symlink target */
  const char *hardlink; /* hardlink target */
  unsigned uid, gid;
  dev_t rdev;
  const char *xattr_name, *xattr_value;
  size_t xattr_size; /* of xattr_value; 0: strlen */
};

#define MTIME 1700000000

struct fixture
{
  char *base;     /* mkdtemp */
  char *target;   /* base/a/layer: "../../x" lands in base */
  char *sentinel; /* base/sentinel: must stay untouched */
  char *tar;      /* base/layer.tar */
};

static void
add_tar_entry (struct archive *a, const struct tar_entry *e)
{
  struct archive_entry *entry = archive_entry_new ();
  size_t size = e->size ? e->size : e->content ? strlen (e->content) : 0;

  archive_entry_set_pathname (entry, e->path);
  archive_entry_set_filetype (entry, e->hardlink ? AE_IFREG : e->type);
  archive_entry_set_perm (entry, e->perm ? e->perm : 0644);
  archive_entry_set_uid (entry, e->uid);
  archive_entry_set_gid (entry, e->gid);
  archive_entry_set_mtime (entry, MTIME, 500);
  if (e->hardlink)
    archive_entry_set_hardlink (entry, e->hardlink);
  if (e->link)
    archive_entry_set_symlink (entry, e->link);
  if (e->rdev)
    archive_entry_set_rdev (entry, e->rdev);
  if (e->xattr_name)
    archive_entry_xattr_add_entry (entry, e->xattr_name, e->xattr_value,
                                   e->xattr_size ? e->xattr_size : strlen (e->xattr_value));
  archive_entry_set_size (entry, e->hardlink ? 0 : (la_int64_t) size);
  assert_int_equal (archive_write_header (a, entry), ARCHIVE_OK);
  if (size)
    assert_int_equal (archive_write_data (a, e->content, size), (la_ssize_t) size);
  archive_entry_free (entry);
}

static void
write_tar (const char *path, const struct tar_entry *entries, size_t n)
{
  struct archive *a = archive_write_new ();

  archive_write_set_format_pax_restricted (a);
  assert_int_equal (archive_write_open_filename (a, path), ARCHIVE_OK);
  for (size_t i = 0; i < n; i++)
    add_tar_entry (a, &entries[i]);
  assert_int_equal (archive_write_close (a), ARCHIVE_OK);
  archive_write_free (a);
}

/* Compresses SRC into DST as a single stream (libarchive's raw format). */
static void
compress_file (const char *src, const char *dst, enum layer_filter filter)
{
  cleanup_free char *data = NULL;
  size_t len = 0;
  struct archive *a = archive_write_new ();
  struct archive_entry *entry = archive_entry_new ();

  assert_int_equal (husk_read_file (src, &data, &len, NULL), 0);
  archive_write_set_format_raw (a);
  if (filter == FILTER_GZIP)
    assert_int_equal (archive_write_add_filter_gzip (a), ARCHIVE_OK);
  else if (filter == FILTER_ZSTD)
    assert_int_equal (archive_write_add_filter_zstd (a), ARCHIVE_OK);
  assert_int_equal (archive_write_open_filename (a, dst), ARCHIVE_OK);
  archive_entry_set_filetype (entry, AE_IFREG);
  archive_entry_set_size (entry, (la_int64_t) len);
  assert_int_equal (archive_write_header (a, entry), ARCHIVE_OK);
  assert_int_equal (archive_write_data (a, data, len), (la_ssize_t) len);
  assert_int_equal (archive_write_close (a), ARCHIVE_OK);
  archive_entry_free (entry);
  archive_write_free (a);
}

static int
setup (void **state)
{
  struct fixture *f = calloc (1, sizeof *f);
  char tmpl[] = "/tmp/husk-test-unpack-XXXXXX";

  if (f == NULL || mkdtemp (tmpl) == NULL)
    return -1;
  f->base = xstrdup (tmpl);
  f->target = xasprintf ("%s/a/layer", tmpl);
  f->sentinel = xasprintf ("%s/sentinel", tmpl);
  f->tar = xasprintf ("%s/layer.tar", tmpl);
  if (husk_mkdir_p (f->target, 0755, NULL) < 0 || mkdir (f->sentinel, 0755) < 0)
    return -1;
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *f = *state;

  husk_rm_rf (f->base, NULL);
  free (f->base);
  free (f->target);
  free (f->sentinel);
  free (f->tar);
  free (f);
  return 0;
}

static char *
in_target (struct fixture *f, const char *rel)
{
  return xasprintf ("%s/%s", f->target, rel);
}

static void
assert_xattr (const char *path, const char *name, const char *want)
{
  char value[256];
  ssize_t n = lgetxattr (path, name, value, sizeof value - 1);

  if (n < 0)
    fail_msg ("getxattr %s on %s: %s", name, path, strerror (errno));
  value[n] = '\0';
  assert_string_equal (value, want);
}

static const struct tar_entry all_types[] = {
  { .path = "./", .type = AE_IFDIR, .perm = 0755 },
  { .path = "etc/", .type = AE_IFDIR, .perm = 0750, .uid = 1000, .gid = 1001 },
  { .path = "etc/hello", .type = AE_IFREG, .content = "hello, layer\n", .uid = 1000, .gid = 1000 },
  { .path = "etc/link", .type = AE_IFLNK, .link = "hello", .perm = 0777 },
  { .path = "etc/hard", .hardlink = "etc/hello" },
  { .path = "usr/bin/su", .type = AE_IFREG, .perm = 04755, .content = "#!", .uid = 1000, .gid = 1000 },
  { .path = "usr/bin/ping",
    .type = AE_IFREG,
    .perm = 0755,
    .content = "p",
    .xattr_name = "security.capability",
    /* vfs_cap_data v2, CAP_NET_RAW permitted */
    .xattr_value = "\x01\x00\x00\x02\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
    .xattr_size = 20 },
  { .path = "usr/share/doc",
    .type = AE_IFREG,
    .content = "d",
    .xattr_name = "user.husk",
    .xattr_value = "yes" },
  { .path = "usr/share/t",
    .type = AE_IFREG,
    .content = "t",
    .xattr_name = "trusted.husk",
    .xattr_value = "t1" },
  { .path = "usr/share/forged",
    .type = AE_IFREG,
    .content = "f",
    .xattr_name = "trusted.overlay.redirect",
    .xattr_value = "/etc" },
  { .path = "dev/null", .type = AE_IFCHR, .perm = 0666, .rdev = 0x0103 },
  { .path = "dev/loop0", .type = AE_IFBLK, .perm = 0660, .rdev = 0x0700 },
  { .path = "run/fifo", .type = AE_IFIFO, .perm = 0620 },
};

static void
check_all_types (struct fixture *f)
{
  cleanup_free char *hello = in_target (f, "etc/hello");
  cleanup_free char *etc = in_target (f, "etc");
  cleanup_free char *link = in_target (f, "etc/link");
  cleanup_free char *hard = in_target (f, "etc/hard");
  cleanup_free char *su = in_target (f, "usr/bin/su");
  cleanup_free char *ping = in_target (f, "usr/bin/ping");
  cleanup_free char *doc = in_target (f, "usr/share/doc");
  cleanup_free char *trusted = in_target (f, "usr/share/t");
  cleanup_free char *forged = in_target (f, "usr/share/forged");
  cleanup_free char *null = in_target (f, "dev/null");
  cleanup_free char *loop = in_target (f, "dev/loop0");
  cleanup_free char *fifo = in_target (f, "run/fifo");
  cleanup_free char *content = NULL;
  char target[64] = { 0 };
  struct stat st, st2;

  assert_int_equal (husk_read_file (hello, &content, NULL, NULL), 0);
  assert_string_equal (content, "hello, layer\n");
  assert_int_equal (lstat (hello, &st), 0);
  assert_int_equal (st.st_uid, 1000);
  assert_int_equal (st.st_mode & 07777, 0644);
  assert_int_equal (st.st_mtim.tv_sec, MTIME);
  assert_int_equal (st.st_nlink, 2);
  assert_int_equal (lstat (hard, &st2), 0);
  assert_int_equal (st.st_ino, st2.st_ino);
  assert_int_equal (lstat (etc, &st), 0);
  assert_true (S_ISDIR (st.st_mode));
  assert_int_equal (st.st_mode & 07777, 0750);
  assert_int_equal (st.st_gid, 1001);
  assert_int_equal (st.st_mtim.tv_sec, MTIME); /* set after its entries */
  assert_int_equal (readlink (link, target, sizeof target - 1), 5);
  assert_string_equal (target, "hello");
  assert_int_equal (lstat (su, &st), 0);
  assert_int_equal (st.st_mode & 07777, 04755); /* survives the chown */
  assert_int_equal (st.st_uid, 1000);
  assert_true (lgetxattr (ping, "security.capability", NULL, 0) > 0);
  assert_xattr (doc, "user.husk", "yes");
  assert_xattr (trusted, "trusted.husk", "t1");
  assert_true (lgetxattr (forged, "trusted.overlay.redirect", NULL, 0) < 0);
  assert_int_equal (lstat (null, &st), 0);
  assert_true (S_ISCHR (st.st_mode));
  assert_int_equal (st.st_rdev, makedev (1, 3));
  assert_int_equal (st.st_mode & 07777, 0666);
  assert_int_equal (lstat (loop, &st), 0);
  assert_true (S_ISBLK (st.st_mode));
  assert_int_equal (st.st_rdev, makedev (7, 0));
  assert_int_equal (lstat (fifo, &st), 0);
  assert_true (S_ISFIFO (st.st_mode));
  assert_int_equal (st.st_mode & 07777, 0620);
}

static void
unpack_with_filter (struct fixture *f, enum layer_filter filter)
{
  cleanup_free char *blob = xasprintf ("%s/layer.blob", f->base);
  struct husk_error *err = NULL;
  struct unpack_stats stats;
  char diff_id[DIGEST_STR_SIZE];
  struct unpack_options opts = { .layer_digest = "sha256:test" };
  size_t tar_size = 0;

  write_tar (f->tar, all_types, sizeof all_types / sizeof all_types[0]);
  assert_int_equal (digest_of_file (f->tar, diff_id, &tar_size, NULL), 0);
  compress_file (f->tar, blob, filter);
  opts.expected_diff_id = diff_id;
  if (unpack_layer (blob, f->target, &opts, &stats, &err) < 0)
    fail_msg ("unpack: %s", err->msg);
  assert_string_equal (stats.diff_id, diff_id);
  assert_int_equal (stats.uncompressed_bytes, tar_size);
  assert_int_equal (stats.entries, sizeof all_types / sizeof all_types[0]);
  check_all_types (f);
}

static void
test_all_types_plain (void **state)
{
  unpack_with_filter (*state, FILTER_NONE);
}

static void
test_all_types_gzip (void **state)
{
  unpack_with_filter (*state, FILTER_GZIP);
}

static void
test_all_types_zstd (void **state)
{
  unpack_with_filter (*state, FILTER_ZSTD);
}

static void
test_whiteouts (void **state)
{
  struct fixture *f = *state;
  static const struct tar_entry entries[] = {
    { .path = "dir/", .type = AE_IFDIR, .perm = 0755 },
    { .path = "dir/.wh.gone", .type = AE_IFREG },
    { .path = "opq/", .type = AE_IFDIR, .perm = 0755 },
    { .path = "opq/.wh..wh..opq", .type = AE_IFREG },
    { .path = "opq/new", .type = AE_IFREG, .content = "n" },
    { .path = ".wh..wh.plnk/", .type = AE_IFDIR, .perm = 0755 },
  };
  cleanup_free char *gone = in_target (f, "dir/gone");
  cleanup_free char *marker = in_target (f, "dir/.wh.gone");
  cleanup_free char *opq = in_target (f, "opq");
  cleanup_free char *opq_marker = in_target (f, "opq/.wh..wh..opq");
  cleanup_free char *opq_new = in_target (f, "opq/new");
  cleanup_free char *plnk = in_target (f, ".wh..wh.plnk");
  struct husk_error *err = NULL;
  struct stat st;

  write_tar (f->tar, entries, sizeof entries / sizeof entries[0]);
  if (unpack_layer (f->tar, f->target, NULL, NULL, &err) < 0)
    fail_msg ("unpack: %s", err->msg);
  assert_int_equal (lstat (gone, &st), 0);
  assert_true (S_ISCHR (st.st_mode));
  assert_int_equal (st.st_rdev, makedev (0, 0));
  assert_int_equal (lstat (marker, &st), -1);
  assert_int_equal (lstat (opq_marker, &st), -1);
  assert_int_equal (lstat (plnk, &st), -1);
  assert_int_equal (lstat (opq_new, &st), 0);
  assert_xattr (opq, "trusted.overlay.opaque", "y");
}

static void
test_replace_entries (void **state)
{
  struct fixture *f = *state;
  static const struct tar_entry entries[] = {
    { .path = "a", .type = AE_IFREG, .content = "file first" },
    { .path = "a/", .type = AE_IFDIR, .perm = 0700 },
    { .path = "a/b", .type = AE_IFREG, .content = "b" },
    { .path = "c/d", .type = AE_IFREG, .content = "d" },
    { .path = "c", .type = AE_IFLNK, .link = "a" },
    { .path = "e", .type = AE_IFREG, .content = "old" },
    { .path = "e", .type = AE_IFREG, .content = "new" },
  };
  cleanup_free char *b = in_target (f, "a/b");
  cleanup_free char *c = in_target (f, "c");
  cleanup_free char *e = in_target (f, "e");
  cleanup_free char *content = NULL;
  struct husk_error *err = NULL;
  struct stat st;

  write_tar (f->tar, entries, sizeof entries / sizeof entries[0]);
  if (unpack_layer (f->tar, f->target, NULL, NULL, &err) < 0)
    fail_msg ("unpack: %s", err->msg);
  assert_int_equal (lstat (b, &st), 0);
  assert_int_equal (lstat (c, &st), 0);
  assert_true (S_ISLNK (st.st_mode));
  assert_int_equal (husk_read_file (e, &content, NULL, NULL), 0);
  assert_string_equal (content, "new");
}

/* A parent symlink that resolves inside the layer is followed there. */
static void
test_symlink_parent_inside (void **state)
{
  struct fixture *f = *state;
  static const struct tar_entry entries[] = {
    { .path = "inside/", .type = AE_IFDIR, .perm = 0755 },
    { .path = "link", .type = AE_IFLNK, .link = "/inside" },
    { .path = "up", .type = AE_IFLNK, .link = "../../../inside" },
    { .path = "link/ok", .type = AE_IFREG, .content = "ok" },
    { .path = "up/ok2", .type = AE_IFREG, .content = "ok" },
  };
  cleanup_free char *ok = in_target (f, "inside/ok");
  cleanup_free char *ok2 = in_target (f, "inside/ok2");
  struct husk_error *err = NULL;
  struct stat st;

  write_tar (f->tar, entries, sizeof entries / sizeof entries[0]);
  if (unpack_layer (f->tar, f->target, NULL, NULL, &err) < 0)
    fail_msg ("unpack: %s", err->msg);
  assert_int_equal (lstat (ok, &st), 0);
  assert_true (S_ISREG (st.st_mode));
  assert_int_equal (lstat (ok2, &st), 0);
}

static void
assert_sentinel_untouched (struct fixture *f)
{
  cleanup_dir DIR *dir = opendir (f->sentinel);
  cleanup_free char *escaped = xasprintf ("%s/x", f->base);
  cleanup_free char *victim = xasprintf ("%s/victim", f->sentinel);
  struct dirent *de;
  struct stat st;

  assert_non_null (dir);
  while ((de = readdir (dir)) != NULL)
    if (strcmp (de->d_name, ".") && strcmp (de->d_name, "..") && strcmp (de->d_name, "victim"))
      fail_msg ("%s appeared in the sentinel dir", de->d_name);
  assert_int_equal (lstat (escaped, &st), -1);
  if (lstat (victim, &st) == 0)
    assert_int_equal (st.st_nlink, 1);
}

static void
expect_rejected (struct fixture *f, const struct tar_entry *entries, size_t n, const char *message)
{
  struct husk_error *err = NULL;
  cleanup_free char *victim = xasprintf ("%s/victim", f->sentinel);

  assert_int_equal (husk_write_file_atomic (victim, "host", 4, 0644, NULL), 0);
  write_tar (f->tar, entries, n);
  struct unpack_options opts = { .layer_digest = "sha256:abc" };
  assert_int_equal (unpack_layer (f->tar, f->target, &opts, NULL, &err), -1);
  assert_non_null (err);
  if (strstr (err->msg, message) == NULL)
    fail_msg ("error `%s` does not contain `%s`", err->msg, message);
  husk_error_free (&err);
  assert_sentinel_untouched (f);
}

static void
test_reject_traversal (void **state)
{
  const struct tar_entry entries[] = {
    { .path = "ok", .type = AE_IFREG, .content = "ok" },
    { .path = "../../x", .type = AE_IFREG, .content = "pwned" },
  };
  const struct tar_entry sneaky[] = {
    { .path = "a/../../../sentinel/x", .type = AE_IFREG, .content = "pwned" },
  };

  expect_rejected (*state, entries, 2, "layer sha256:abc: entry \"../../x\": path escapes the layer");
  expect_rejected (*state, sneaky, 1, "entry \"a/../../../sentinel/x\": path escapes the layer");
}

static void
test_reject_absolute (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *abs = xasprintf ("%s/x", f->sentinel);
  cleanup_free char *msg = xasprintf ("entry \"%s\": path escapes the layer", abs);
  const struct tar_entry entries[] = {
    { .path = abs, .type = AE_IFREG, .content = "pwned" },
  };

  expect_rejected (f, entries, 1, msg);
}

static void
test_reject_symlink_escape (void **state)
{
  struct fixture *f = *state;
  const struct tar_entry absolute[] = {
    { .path = "link", .type = AE_IFLNK, .link = f->sentinel },
    { .path = "link/pwned", .type = AE_IFREG, .content = "pwned" },
  };
  const struct tar_entry relative[] = {
    { .path = "up", .type = AE_IFLNK, .link = "../../sentinel" },
    { .path = "up/pwned", .type = AE_IFREG, .content = "pwned" },
  };
  const struct tar_entry deep[] = {
    { .path = "d/", .type = AE_IFDIR, .perm = 0755 },
    { .path = "d/l", .type = AE_IFLNK, .link = "/tmp" },
    { .path = "d/l/x/y", .type = AE_IFREG, .content = "pwned" },
  };

  expect_rejected (f, absolute, 2,
                   "entry \"link/pwned\": parent \"link\" is a symlink that does not resolve to a directory "
                   "inside the layer");
  expect_rejected (f, relative, 2, "entry \"up/pwned\": parent \"up\" is a symlink");
  expect_rejected (f, deep, 3, "entry \"d/l/x/y\": parent \"d/l\" is a symlink");
}

static void
test_reject_hardlink_escape (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *abs_victim = xasprintf ("%s/victim", f->sentinel);
  const struct tar_entry relative[] = {
    { .path = "evil", .hardlink = "../../sentinel/victim" },
  };
  const struct tar_entry absolute[] = {
    { .path = "evil", .hardlink = abs_victim },
  };
  const struct tar_entry missing[] = {
    { .path = "evil", .hardlink = "not/here" },
  };
  const struct tar_entry via_symlink[] = {
    { .path = "s", .type = AE_IFLNK, .link = f->sentinel },
    { .path = "evil", .hardlink = "s/victim" },
  };

  expect_rejected (f, relative, 1, "entry \"../../sentinel/victim\": path escapes the layer");
  expect_rejected (f, absolute, 1, "path escapes the layer");
  expect_rejected (f, missing, 1, "entry \"evil\": hardlink to \"not/here\", which is not in the layer");
  expect_rejected (f, via_symlink, 2, "entry \"evil\": hardlink to \"s/victim\", which is not in the layer");
}

static void
test_diff_id_mismatch (void **state)
{
  struct fixture *f = *state;
  static const struct tar_entry entries[] = {
    { .path = "f", .type = AE_IFREG, .content = "x" },
  };
  struct unpack_options opts = {
    .layer_digest = "sha256:1111111111111111111111111111111111111111111111111111111111111111",
    .expected_diff_id = "sha256:2222222222222222222222222222222222222222222222222222222222222222",
  };
  struct husk_error *err = NULL;

  write_tar (f->tar, entries, 1);
  assert_int_equal (unpack_layer (f->tar, f->target, &opts, NULL, &err), -1);
  assert_non_null (strstr (err->msg, "uncompressed content is sha256:"));
  assert_non_null (strstr (err->msg, "but the image config says diff_id sha256:2222"));
  husk_error_free (&err);
}

static void
test_corrupt_layer (void **state)
{
  struct fixture *f = *state;
  static const char garbage[] = "\x1f\x8b\x08\x00this is not gzip data at all, just bytes";
  struct husk_error *err = NULL;

  assert_int_equal (husk_write_file_atomic (f->tar, garbage, sizeof garbage - 1, 0644, NULL), 0);
  assert_int_equal (unpack_layer (f->tar, f->target, NULL, NULL, &err), -1);
  assert_non_null (strstr (err->msg, "layer `"));
  husk_error_free (&err);
}

/* A gzip layer of one file of SIZE zero bytes: a few KiB on disk. */
static char *
write_zero_bomb (struct fixture *f, const char *name, size_t size)
{
  char *blob = xasprintf ("%s/%s", f->base, name);
  cleanup_free char *zeros = xcalloc (1, size);
  struct tar_entry e = { .path = "bomb", .type = AE_IFREG, .perm = 0644, .content = zeros, .size = size };
  struct archive *a = archive_write_new ();

  archive_write_set_format_pax_restricted (a);
  archive_write_add_filter_gzip (a);
  assert_int_equal (archive_write_open_filename (a, blob), ARCHIVE_OK);
  add_tar_entry (a, &e);
  assert_int_equal (archive_write_close (a), ARCHIVE_OK);
  archive_write_free (a);
  return blob;
}

/* A small gzip that decompresses past the limit is refused while it is
 * being read, not after it filled the disk. */
static void
test_decompression_limit (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *blob = write_zero_bomb (f, "bomb.tgz", 16 << 20);
  struct unpack_options opts = { .max_bytes = 1 << 20 };
  struct husk_error *err = NULL;
  struct unpack_stats stats;
  struct stat st;

  assert_int_equal (stat (blob, &st), 0);
  assert_true (st.st_size < 256 * 1024);
  assert_int_equal (unpack_layer (blob, f->target, &opts, NULL, &err), -1);
  if (strstr (err->msg, "passes the limit of 1048576 bytes per image") == NULL)
    fail_msg ("unexpected: %s", err->msg);
  husk_error_free (&err);
  /* Control: under a limit it fits in, the same layer unpacks. */
  husk_rm_rf (f->target, NULL);
  assert_int_equal (husk_mkdir_p (f->target, 0755, NULL), 0);
  opts.max_bytes = 64 << 20;
  if (unpack_layer (blob, f->target, &opts, &stats, &err) < 0)
    fail_msg ("unpack under the limit: %s", err->msg);
  assert_true (stats.uncompressed_bytes > (16 << 20));
}

/* The limit is per image: layers unpacked with one counter share it. */
static void
test_decompression_limit_shared (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *blob = write_zero_bomb (f, "half.tgz", 600 << 10);
  cleanup_free char *second = xasprintf ("%s/second", f->base);
  atomic_uint_least64_t total = 0;
  struct unpack_options opts = { .max_bytes = 1 << 20, .total_bytes = &total };
  struct husk_error *err = NULL;

  if (unpack_layer (blob, f->target, &opts, NULL, &err) < 0)
    fail_msg ("first layer: %s", err->msg);
  assert_int_equal (mkdir (second, 0755), 0);
  assert_int_equal (unpack_layer (blob, second, &opts, NULL, &err), -1);
  assert_non_null (strstr (err->msg, "passes the limit"));
  husk_error_free (&err);
}

/* Throughput of a gzip layer of many small and some large files; the size
 * is HUSK_UNPACK_BENCH_MB (default 8) so it stays quick under valgrind. */
static void
test_throughput (void **state)
{
  struct fixture *f = *state;
  const char *env = getenv ("HUSK_UNPACK_BENCH_MB");
  size_t total = (size_t) (env ? atoi (env) : 8) << 20, chunk = 256 * 1024, n_files = total / chunk;
  cleanup_free char *blob = xasprintf ("%s/layer.tgz", f->base);
  cleanup_free char *data = xmalloc (chunk);
  struct archive *a = archive_write_new ();
  struct husk_error *err = NULL;
  struct unpack_stats stats;
  struct timespec t0, t1;
  double seconds;
  uint32_t noise = 2463534242u;

  /* Text with a quarter random bytes: compresses about 2:1, like binaries. */
  for (size_t i = 0; i < chunk; i++)
    {
      noise ^= noise << 13, noise ^= noise >> 17, noise ^= noise << 5;
      data[i] = (noise & 3) ? "abcdefghij\n"[i % 11] : (char) (noise >> 24);
    }
  archive_write_set_format_pax_restricted (a);
  archive_write_add_filter_gzip (a);
  assert_int_equal (archive_write_open_filename (a, blob), ARCHIVE_OK);
  for (size_t i = 0; i < n_files * 4; i++)
    {
      char name[64];
      /* A quarter are large files, the rest 4 KiB. */
      struct tar_entry e = { .path = name, .type = AE_IFREG, .content = data, .size = i % 4 ? 4096 : chunk };
      snprintf (name, sizeof name, "d%zu/f%zu", i % 16, i);
      add_tar_entry (a, &e);
    }
  assert_int_equal (archive_write_close (a), ARCHIVE_OK);
  archive_write_free (a);
  clock_gettime (CLOCK_MONOTONIC, &t0);
  if (unpack_layer (blob, f->target, NULL, &stats, &err) < 0)
    fail_msg ("unpack: %s", err->msg);
  clock_gettime (CLOCK_MONOTONIC, &t1);
  seconds = (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9;
  print_message ("unpack: %llu entries, %.1f MiB tar (%.1f MiB gzip) in %.3f s: %.0f MiB/s uncompressed\n",
                 (unsigned long long) stats.entries, (double) stats.uncompressed_bytes / (1 << 20),
                 (double) stats.compressed_bytes / (1 << 20), seconds,
                 (double) stats.uncompressed_bytes / (1 << 20) / seconds);
  assert_int_equal (stats.entries, n_files * 4);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_decompression_limit, setup, teardown),
    cmocka_unit_test_setup_teardown (test_decompression_limit_shared, setup, teardown),
    cmocka_unit_test_setup_teardown (test_all_types_plain, setup, teardown),
    cmocka_unit_test_setup_teardown (test_all_types_gzip, setup, teardown),
    cmocka_unit_test_setup_teardown (test_all_types_zstd, setup, teardown),
    cmocka_unit_test_setup_teardown (test_whiteouts, setup, teardown),
    cmocka_unit_test_setup_teardown (test_replace_entries, setup, teardown),
    cmocka_unit_test_setup_teardown (test_symlink_parent_inside, setup, teardown),
    cmocka_unit_test_setup_teardown (test_reject_traversal, setup, teardown),
    cmocka_unit_test_setup_teardown (test_reject_absolute, setup, teardown),
    cmocka_unit_test_setup_teardown (test_reject_symlink_escape, setup, teardown),
    cmocka_unit_test_setup_teardown (test_reject_hardlink_escape, setup, teardown),
    cmocka_unit_test_setup_teardown (test_diff_id_mismatch, setup, teardown),
    cmocka_unit_test_setup_teardown (test_corrupt_layer, setup, teardown),
    cmocka_unit_test_setup_teardown (test_throughput, setup, teardown),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
