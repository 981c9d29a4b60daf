/* Unit tests for layer snapshots and container rootfs mounts: chain IDs
 * against a computed vector, unpack-once (also under concurrency), the
 * overlay view of whiteouts and opaque dirs, read-only views, stacks too deep
 * for one page of mount options, removal and GC.  Needs root and overlayfs. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/snapshot.h"
#include "image/store.h"

#define MEDIA_TAR "application/vnd.oci.image.layer.v1.tar"

struct tar_entry
{
  const char *path;
  mode_t type;
  const char *content;
};

struct layer
{
  char digest[DIGEST_STR_SIZE];
  char diff_id[DIGEST_STR_SIZE];
};

struct fixture
{
  char *root;
  struct store *store;
};

static int
setup (void **state)
{
  struct fixture *f = calloc (1, sizeof *f);
  char tmpl[] = "/tmp/husk-test-snapshot-XXXXXX";

  if (f == NULL || mkdtemp (tmpl) == NULL)
    return -1;
  f->root = xstrdup (tmpl);
  if (store_open (f->root, &f->store, NULL) < 0)
    return -1;
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *containers = xasprintf ("%s/containers", f->root);
  cleanup_dir DIR *dir = opendir (containers);
  struct dirent *de;

  /* Unmount whatever a failed test left before removing the tree. */
  while (dir && (de = readdir (dir)) != NULL)
    if (de->d_name[0] != '.')
      snapshot_remove_container (f->root, de->d_name, NULL);
  husk_rm_rf (f->root, NULL);
  store_free (f->store);
  free (f->root);
  free (f);
  return 0;
}

/* Writes a plain tar layer, stores it, and returns its digest and diffID
 * (the same for an uncompressed layer). */
static void
make_layer (struct fixture *f, const struct tar_entry *entries, size_t n, struct layer *out)
{
  cleanup_free char *path = xasprintf ("%s/layer.tar", f->root);
  cleanup_close int fd = -1;
  struct archive *a = archive_write_new ();
  struct husk_error *err = NULL;

  archive_write_set_format_pax_restricted (a);
  assert_int_equal (archive_write_open_filename (a, path), ARCHIVE_OK);
  for (size_t i = 0; i < n; i++)
    {
      struct archive_entry *entry = archive_entry_new ();
      size_t size = entries[i].content ? strlen (entries[i].content) : 0;
      archive_entry_set_pathname (entry, entries[i].path);
      archive_entry_set_filetype (entry, entries[i].type);
      archive_entry_set_perm (entry, entries[i].type == AE_IFDIR ? 0755 : 0644);
      archive_entry_set_size (entry, (la_int64_t) size);
      archive_entry_set_mtime (entry, 1700000000, 0);
      assert_int_equal (archive_write_header (a, entry), ARCHIVE_OK);
      if (size)
        assert_int_equal (archive_write_data (a, entries[i].content, size), (la_ssize_t) size);
      archive_entry_free (entry);
    }
  assert_int_equal (archive_write_close (a), ARCHIVE_OK);
  archive_write_free (a);
  assert_int_equal (digest_of_file (path, out->digest, NULL, NULL), 0);
  memcpy (out->diff_id, out->digest, DIGEST_STR_SIZE);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (store_put_file (f->store, out->digest, -1, fd, &err) < 0)
    fail_msg ("store layer: %s", err->msg);
  unlink (path);
}

static void
prepare (struct fixture *f, const struct layer *layers, size_t n, char (*chain_ids)[DIGEST_STR_SIZE],
         unsigned *unpacked)
{
  struct snapshot_layer *descs = calloc (n, sizeof *descs);
  char **diff_ids = calloc (n + 1, sizeof *diff_ids);
  struct husk_error *err = NULL;

  for (size_t i = 0; i < n; i++)
    {
      descs[i] = (struct snapshot_layer){ layers[i].digest, MEDIA_TAR, layers[i].diff_id };
      diff_ids[i] = (char *) layers[i].diff_id;
    }
  if (snapshot_prepare_layers (f->store, descs, n, unpacked, &err) < 0)
    fail_msg ("prepare: %s", err->msg);
  snapshot_chain_ids (diff_ids, n, chain_ids);
  free (descs);
  free (diff_ids);
}

static bool
mounted (const char *path)
{
  cleanup_free char *info = NULL;
  cleanup_free char *needle = xasprintf (" %s ", path);

  assert_int_equal (husk_read_file ("/proc/self/mountinfo", &info, NULL, NULL), 0);
  return strstr (info, needle) != NULL;
}

static size_t
count_entries (const char *path, const char *prefix)
{
  cleanup_dir DIR *dir = opendir (path);
  struct dirent *de;
  size_t n = 0;

  while (dir && (de = readdir (dir)) != NULL)
    if (de->d_name[0] != '.' && husk_str_has_prefix (de->d_name, prefix))
      n++;
  return n;
}

static char **
chain_strv (char (*chain_ids)[DIGEST_STR_SIZE], size_t n)
{
  char **v = calloc (n + 1, sizeof *v);
  for (size_t i = 0; i < n; i++)
    v[i] = chain_ids[i];
  return v;
}

static void
test_chain_id_vector (void **state)
{
  /* Expected values computed with python3 hashlib and checked with
   * `printf '%s' "$c0 $d1" | sha256sum`. */
  char *diff_ids[] = {
    "sha256:4fbec69b941195fd56f8212a5000e304129451d82efca94ff0e0fb2d5355472e",
    "sha256:77ea7eee3d80b1a38f83906dd3048e2689457eb90e18a7d12f839c5ae37106a2",
    "sha256:95cf1a2e1698fe3ca1fcc3f653119146b271d0b62e487ec264441e886a11bd06",
  };
  char chain_ids[3][DIGEST_STR_SIZE];

  snapshot_chain_ids (diff_ids, 3, chain_ids);
  assert_string_equal (chain_ids[0], diff_ids[0]);
  assert_string_equal (chain_ids[1],
                       "sha256:ef232af0eb422cdfd7917631657cd8ed2bfd5b9461b37c427aa0d3e0a19adf79");
  assert_string_equal (chain_ids[2],
                       "sha256:7ad3896338947cc04ee0b35b50d400ff32538d63f42f85ec87feac78bf71a54d");
}

static void
test_prepare_once (void **state)
{
  struct fixture *f = *state;
  static const struct tar_entry base[] = { { "etc/", AE_IFDIR, NULL }, { "etc/os", AE_IFREG, "husk" } };
  static const struct tar_entry top[] = { { "etc/top", AE_IFREG, "top" } };
  struct layer layers[2];
  char chain_ids[2][DIGEST_STR_SIZE];
  cleanup_free char *snapshots = xasprintf ("%s/snapshots", f->root);
  cleanup_free char *fs = NULL, *info = NULL, *os = NULL;
  unsigned unpacked = 99;
  struct stat st;

  make_layer (f, base, 2, &layers[0]);
  make_layer (f, top, 1, &layers[1]);
  prepare (f, layers, 2, chain_ids, &unpacked);
  assert_int_equal (unpacked, 2);
  prepare (f, layers, 2, chain_ids, &unpacked);
  assert_int_equal (unpacked, 0);
  fs = snapshot_fs_path (f->root, chain_ids[0]);
  os = xasprintf ("%s/etc/os", fs);
  assert_int_equal (stat (os, &st), 0);
  info = xasprintf ("%s/snapshots/%s/info.json", f->root, digest_hex (chain_ids[1]));
  assert_int_equal (stat (info, &st), 0);
  assert_true (snapshot_exists (f->root, chain_ids[1]));
  assert_int_equal (count_entries (snapshots, "tmp-"), 0);
  assert_int_equal (count_entries (snapshots, ""), 2);
}

static void
test_prepare_errors (void **state)
{
  struct fixture *f = *state;
  static const struct tar_entry files[] = { { "f", AE_IFREG, "x" } };
  cleanup_free char *snapshots = xasprintf ("%s/snapshots", f->root);
  struct layer layer;
  struct husk_error *err = NULL;
  const char *wrong = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
  const char *absent = "sha256:3333333333333333333333333333333333333333333333333333333333333333";
  struct snapshot_layer bad_diff = { NULL, MEDIA_TAR, wrong };
  struct snapshot_layer missing = { absent, MEDIA_TAR, wrong };
  struct snapshot_layer encrypted = { NULL, "application/vnd.oci.image.layer.v1.tar+gzip+encrypted", NULL };

  make_layer (f, files, 1, &layer);
  bad_diff.digest = layer.digest;
  assert_int_equal (snapshot_prepare_layers (f->store, &bad_diff, 1, NULL, &err), -1);
  assert_non_null (strstr (err->msg, "but the image config says diff_id sha256:2222"));
  husk_error_free (&err);
  assert_int_equal (count_entries (snapshots, ""), 0); /* neither a snapshot nor a tmp dir */

  assert_int_equal (snapshot_prepare_layers (f->store, &missing, 1, NULL, &err), -1);
  assert_non_null (strstr (err->msg, "blob is not in the content store"));
  husk_error_free (&err);

  encrypted.digest = layer.digest;
  encrypted.diff_id = layer.diff_id;
  assert_int_equal (snapshot_prepare_layers (f->store, &encrypted, 1, NULL, &err), -1);
  assert_non_null (strstr (err->msg, "is not supported"));
  husk_error_free (&err);
}

/* Two processes unpack the same chain at once: both succeed, one copy stays. */
static void
test_prepare_concurrent (void **state)
{
  struct fixture *f = *state;
  struct tar_entry files[64];
  char names[64][16];
  cleanup_free char *snapshots = xasprintf ("%s/snapshots", f->root);
  struct layer layer;
  struct snapshot_layer desc;
  pid_t pids[2];

  for (size_t i = 0; i < 64; i++)
    {
      snprintf (names[i], sizeof names[i], "f%zu", i);
      files[i] = (struct tar_entry){ names[i], AE_IFREG, "content" };
    }
  make_layer (f, files, 64, &layer);
  desc = (struct snapshot_layer){ layer.digest, MEDIA_TAR, layer.diff_id };
  for (int i = 0; i < 2; i++)
    {
      pids[i] = fork ();
      assert_true (pids[i] >= 0);
      if (pids[i] == 0)
        _exit (snapshot_prepare_layers (f->store, &desc, 1, NULL, NULL) == 0 ? 0 : 1);
    }
  for (int i = 0; i < 2; i++)
    {
      int status;
      assert_int_equal (waitpid (pids[i], &status, 0), pids[i]);
      assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    }
  assert_int_equal (count_entries (snapshots, ""), 1);
  assert_true (snapshot_exists (f->root, layer.diff_id));
}

/* Layers of their own files, each named after its index. */
static void
make_numbered_layers (struct fixture *f, struct layer *layers, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      char name[32], content[32];
      struct tar_entry entries[] = { { "dir/", AE_IFDIR, NULL }, { name, AE_IFREG, content } };
      snprintf (name, sizeof name, "dir/layer%zu", i);
      snprintf (content, sizeof content, "content of layer %zu", i);
      make_layer (f, entries, 2, &layers[i]);
    }
}

static void
assert_snapshot_parent (struct fixture *f, const char *chain_id, const char *parent)
{
  cleanup_free char *path = xasprintf ("%s/snapshots/%s/info.json", f->root, digest_hex (chain_id));
  json_t *info = json_load_file (path, 0, NULL);
  json_t *have = json_object_get (info, "parent");

  assert_non_null (info);
  if (parent)
    assert_string_equal (json_string_value (have), parent);
  else
    assert_true (json_is_null (have));
  assert_string_equal (json_string_value (json_object_get (info, "chain_id")), chain_id);
  json_decref (info);
}

/* More layers than CPUs, unpacked in parallel: each snapshot holds its own
 * layer and records the right parent; the ones already there are skipped. */
static void
test_prepare_many (void **state)
{
  struct fixture *f = *state;
  enum
  {
    N = 12
  };
  struct layer layers[N];
  char chain_ids[N][DIGEST_STR_SIZE];
  cleanup_free char *snapshots = xasprintf ("%s/snapshots", f->root);
  unsigned unpacked = 99;

  make_numbered_layers (f, layers, N);
  prepare (f, layers, 4, chain_ids, &unpacked);
  assert_int_equal (unpacked, 4);
  prepare (f, layers, N, chain_ids, &unpacked);
  assert_int_equal (unpacked, N - 4);
  for (size_t i = 0; i < N; i++)
    {
      cleanup_free char *fs = snapshot_fs_path (f->root, chain_ids[i]);
      cleanup_free char *dir = xasprintf ("%s/dir", fs);
      cleanup_free char *file = xasprintf ("%s/layer%zu", dir, i);
      cleanup_free char *want = xasprintf ("content of layer %zu", i);
      cleanup_free char *have = NULL;

      assert_int_equal (husk_read_file (file, &have, NULL, NULL), 0);
      assert_string_equal (have, want);
      assert_int_equal (count_entries (dir, "layer"), 1);
      assert_snapshot_parent (f, chain_ids[i], i ? chain_ids[i - 1] : NULL);
    }
  assert_int_equal (count_entries (snapshots, "tmp-"), 0);
  assert_int_equal (count_entries (snapshots, ""), N);
}

/* Two bad layers among good ones: the lower one's error is reported, and
 * nothing is published or left behind, not even the good layers. */
static void
test_prepare_many_errors (void **state)
{
  struct fixture *f = *state;
  enum
  {
    N = 8
  };
  struct layer layers[N];
  struct snapshot_layer descs[N];
  cleanup_free char *snapshots = xasprintf ("%s/snapshots", f->root);
  cleanup_free char *want = NULL;
  const char *wrong = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
  struct husk_error *err = NULL;
  unsigned unpacked = 99;

  make_numbered_layers (f, layers, N);
  for (size_t i = 0; i < N; i++)
    descs[i] = (struct snapshot_layer){ layers[i].digest, MEDIA_TAR, layers[i].diff_id };
  descs[3].diff_id = wrong;
  descs[6].diff_id = wrong;
  assert_int_equal (snapshot_prepare_layers (f->store, descs, N, &unpacked, &err), -1);
  want = xasprintf ("layer %s: uncompressed content is %s, but the image config says diff_id %s",
                    layers[3].digest, layers[3].diff_id, wrong);
  assert_string_equal (err->msg, want);
  husk_error_free (&err);
  assert_int_equal (unpacked, 99);
  assert_int_equal (count_entries (snapshots, ""), 0);

  /* A missing blob fails the set before anything is unpacked. */
  descs[3].diff_id = layers[3].diff_id;
  descs[6].diff_id = layers[6].diff_id;
  descs[5].digest = "sha256:3333333333333333333333333333333333333333333333333333333333333333";
  assert_int_equal (snapshot_prepare_layers (f->store, descs, N, NULL, &err), -1);
  assert_non_null (strstr (err->msg,
                           "sha256:3333333333333333333333333333333333333333333333333333333333333333: "
                           "blob is not in the content store"));
  husk_error_free (&err);
  assert_int_equal (count_entries (snapshots, ""), 0);
}

static void
test_overlay_whiteouts (void **state)
{
  struct fixture *f = *state;
  static const struct tar_entry lower[] = {
    { "a", AE_IFREG, "a" },        { "keep", AE_IFREG, "k" },     { "opq/", AE_IFDIR, NULL },
    { "opq/old1", AE_IFREG, "1" }, { "opq/old2", AE_IFREG, "2" },
  };
  static const struct tar_entry upper[] = {
    { ".wh.a", AE_IFREG, NULL },
    { "opq/", AE_IFDIR, NULL },
    { "opq/.wh..wh..opq", AE_IFREG, NULL },
    { "opq/new", AE_IFREG, "n" },
  };
  struct layer layers[2];
  char chain_ids[2][DIGEST_STR_SIZE];
  char **chain = NULL;
  cleanup_free char *rootfs = NULL, *a = NULL, *keep = NULL, *opq = NULL, *written = NULL, *in_upper = NULL;
  struct husk_error *err = NULL;
  struct stat st;

  make_layer (f, lower, 5, &layers[0]);
  make_layer (f, upper, 4, &layers[1]);
  prepare (f, layers, 2, chain_ids, NULL);
  chain = chain_strv (chain_ids, 2);
  if (snapshot_create_container (f->root, "c1", chain, 2, false, &rootfs, &err) < 0)
    fail_msg ("create: %s", err->msg);
  free (chain);
  assert_true (mounted (rootfs));
  a = xasprintf ("%s/a", rootfs);
  keep = xasprintf ("%s/keep", rootfs);
  opq = xasprintf ("%s/opq", rootfs);
  assert_int_equal (lstat (a, &st), -1);
  assert_int_equal (errno, ENOENT);
  assert_int_equal (lstat (keep, &st), 0);
  assert_int_equal (count_entries (opq, ""), 1);
  assert_int_equal (count_entries (opq, "new"), 1);
  written = xasprintf ("%s/written", rootfs);
  assert_int_equal (husk_write_file_atomic (written, "w", 1, 0644, NULL), 0);
  in_upper = xasprintf ("%s/containers/c1/upper/written", f->root);
  assert_int_equal (stat (in_upper, &st), 0);
}

static void
test_remove_leaves_nothing (void **state)
{
  struct fixture *f = *state;
  static const struct tar_entry files[] = { { "f", AE_IFREG, "x" } };
  struct layer layer;
  char chain_ids[1][DIGEST_STR_SIZE];
  char *chain[] = { chain_ids[0], NULL };
  cleanup_free char *rootfs = NULL, *again = NULL;
  cleanup_free char *dir = xasprintf ("%s/containers/gone", f->root);
  struct husk_error *err = NULL;
  struct stat st;

  make_layer (f, files, 1, &layer);
  prepare (f, &layer, 1, chain_ids, NULL);
  if (snapshot_create_container (f->root, "gone", chain, 1, false, &rootfs, &err) < 0)
    fail_msg ("create: %s", err->msg);
  /* Idempotent: a second create returns the same mounted rootfs. */
  if (snapshot_create_container (f->root, "gone", chain, 1, false, &again, &err) < 0)
    fail_msg ("create again: %s", err->msg);
  assert_string_equal (rootfs, again);
  assert_int_equal (snapshot_create_container (f->root, "gone", chain, 1, true, &again, &err), -1);
  assert_non_null (strstr (err->msg, "already has a rootfs of other layers"));
  husk_error_free (&err);
  assert_true (mounted (rootfs));
  if (snapshot_remove_container (f->root, "gone", &err) < 0)
    fail_msg ("remove: %s", err->msg);
  assert_false (mounted (rootfs));
  assert_int_equal (lstat (dir, &st), -1);
  assert_int_equal (snapshot_remove_container (f->root, "gone", &err), 0);
  assert_int_equal (snapshot_create_container (f->root, "../x", chain, 1, false, &again, &err), -1);
  husk_error_free (&err);
}

static void
assert_read_only (const char *rootfs)
{
  cleanup_free char *path = xasprintf ("%s/new", rootfs);
  int fd = open (path, O_WRONLY | O_CREAT, 0644);

  assert_int_equal (fd, -1);
  assert_int_equal (errno, EROFS);
}

static void
test_readonly_views (void **state)
{
  struct fixture *f = *state;
  static const struct tar_entry one[] = { { "one", AE_IFREG, "1" } };
  static const struct tar_entry two[] = { { "two", AE_IFREG, "2" } };
  struct layer layers[2];
  char chain_ids[2][DIGEST_STR_SIZE];
  char *chain[] = { chain_ids[0], chain_ids[1], NULL };
  cleanup_free char *single = NULL, *stacked = NULL, *upper = NULL, *one_path = NULL;
  struct husk_error *err = NULL;
  struct stat st;

  make_layer (f, one, 1, &layers[0]);
  make_layer (f, two, 1, &layers[1]);
  prepare (f, layers, 2, chain_ids, NULL);
  if (snapshot_create_container (f->root, "ro1", chain, 1, true, &single, &err) < 0)
    fail_msg ("create ro1: %s", err->msg);
  if (snapshot_create_container (f->root, "ro2", chain, 2, true, &stacked, &err) < 0)
    fail_msg ("create ro2: %s", err->msg);
  assert_true (mounted (single));
  assert_true (mounted (stacked));
  one_path = xasprintf ("%s/one", stacked);
  assert_int_equal (stat (one_path, &st), 0);
  assert_read_only (single);
  assert_read_only (stacked);
  upper = xasprintf ("%s/containers/ro2/upper", f->root);
  assert_int_equal (stat (upper, &st), -1);
  assert_int_equal (snapshot_remove_container (f->root, "ro1", &err), 0);
  assert_int_equal (snapshot_remove_container (f->root, "ro2", &err), 0);
  assert_false (mounted (single));
  assert_false (mounted (stacked));
}

/* N layers, each adding one file; the container must see all of them. */
static void
check_deep_stack (struct fixture *f, size_t n, const char *id)
{
  struct layer *layers = calloc (n, sizeof *layers);
  char (*chain_ids)[DIGEST_STR_SIZE] = calloc (n, DIGEST_STR_SIZE);
  char **chain = NULL;
  cleanup_free char *rootfs = NULL;
  struct husk_error *err = NULL;

  for (size_t i = 0; i < n; i++)
    {
      char name[32];
      struct tar_entry entry = { name, AE_IFREG, "layer" };
      snprintf (name, sizeof name, "file%zu", i);
      make_layer (f, &entry, 1, &layers[i]);
    }
  prepare (f, layers, n, chain_ids, NULL);
  chain = chain_strv (chain_ids, n);
  if (snapshot_create_container (f->root, id, chain, n, false, &rootfs, &err) < 0)
    fail_msg ("create with %zu layers: %s", n, err->msg);
  assert_int_equal (count_entries (rootfs, "file"), n);
  assert_int_equal (snapshot_remove_container (f->root, id, &err), 0);
  assert_false (mounted (rootfs));
  free (chain);
  free (chain_ids);
  free (layers);
}

static void
test_deep_stacks (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *links = xasprintf ("%s/snapshots/l", f->root);
  struct husk_error *err = NULL;

  /* 45 layers of full paths are over a page; short links are used.  125
   * is about docker's limit on layers. */
  check_deep_stack (f, 45, "deep45");
  check_deep_stack (f, 125, "deep125");
  assert_int_equal (count_entries (links, ""), 125);
  /* GC takes the links with their snapshots. */
  assert_int_equal (snapshot_gc (f->root, NULL, NULL, &err), 0);
  assert_int_equal (count_entries (links, ""), 0);
}

static void
test_gc (void **state)
{
  struct fixture *f = *state;
  static const struct tar_entry a_files[] = { { "a", AE_IFREG, "a" } };
  static const struct tar_entry b_files[] = { { "b", AE_IFREG, "b" } };
  cleanup_free char *snapshots = xasprintf ("%s/snapshots", f->root);
  cleanup_free char *stale = xasprintf ("%s/snapshots/tmp-stale", f->root);
  cleanup_free char *rootfs = NULL;
  struct layer a, b;
  char a_chain[1][DIGEST_STR_SIZE], b_chain[1][DIGEST_STR_SIZE];
  char *keep[] = { a_chain[0], NULL };
  char *b_strv[] = { b_chain[0], NULL };
  struct husk_error *err = NULL;
  unsigned removed = 0;

  make_layer (f, a_files, 1, &a);
  make_layer (f, b_files, 1, &b);
  prepare (f, &a, 1, a_chain, NULL);
  prepare (f, &b, 1, b_chain, NULL);
  assert_int_equal (mkdir (stale, 0700), 0);
  if (snapshot_create_container (f->root, "uses-b", b_strv, 1, false, &rootfs, &err) < 0)
    fail_msg ("create: %s", err->msg);
  /* B is in no image any more, but a container still has it mounted. */
  assert_int_equal (snapshot_gc (f->root, keep, &removed, &err), 0);
  assert_int_equal (removed, 1); /* the tmp dir */
  assert_true (snapshot_exists (f->root, b_chain[0]));
  assert_int_equal (snapshot_remove_container (f->root, "uses-b", &err), 0);
  assert_int_equal (snapshot_gc (f->root, keep, &removed, &err), 0);
  assert_int_equal (removed, 1);
  assert_false (snapshot_exists (f->root, b_chain[0]));
  assert_true (snapshot_exists (f->root, a_chain[0]));
  assert_int_equal (count_entries (snapshots, ""), 1);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_chain_id_vector),
    cmocka_unit_test_setup_teardown (test_prepare_once, setup, teardown),
    cmocka_unit_test_setup_teardown (test_prepare_errors, setup, teardown),
    cmocka_unit_test_setup_teardown (test_prepare_concurrent, setup, teardown),
    cmocka_unit_test_setup_teardown (test_prepare_many, setup, teardown),
    cmocka_unit_test_setup_teardown (test_prepare_many_errors, setup, teardown),
    cmocka_unit_test_setup_teardown (test_overlay_whiteouts, setup, teardown),
    cmocka_unit_test_setup_teardown (test_remove_leaves_nothing, setup, teardown),
    cmocka_unit_test_setup_teardown (test_readonly_views, setup, teardown),
    cmocka_unit_test_setup_teardown (test_deep_stacks, setup, teardown),
    cmocka_unit_test_setup_teardown (test_gc, setup, teardown),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
