/* Unit tests for the content store: verified ingest, concurrent writers of
 * one blob, a full disk (a tiny tmpfs), size caps, corruption, stale ingest
 * cleanup, GC and the GC lock. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/store.h"

struct fixture
{
  char *root;
  struct store *store;
};

static int
setup (void **state)
{
  struct fixture *f = calloc (1, sizeof *f);
  char tmpl[] = "/tmp/husk-test-store-XXXXXX";

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
  cleanup_free char *tiny = xasprintf ("%s/tiny", f->root);

  umount2 (tiny, MNT_DETACH);
  husk_rm_rf (f->root, NULL);
  store_free (f->store);
  free (f->root);
  free (f);
  return 0;
}

static size_t
count_dir (const char *path)
{
  cleanup_dir DIR *dir = opendir (path);
  struct dirent *de;
  size_t n = 0;

  while (dir && (de = readdir (dir)) != NULL)
    n += de->d_name[0] != '.';
  return n;
}

static size_t
ingest_files (struct fixture *f)
{
  cleanup_free char *path = xasprintf ("%s/ingest", f->root);
  return count_dir (path);
}

static void
test_ingest_commit (void **state)
{
  struct fixture *f = *state;
  static const char content[] = "{\"schemaVersion\":2}";
  char digest[DIGEST_STR_SIZE];
  struct store_ingest *ingest = NULL;
  struct husk_error *err = NULL;
  cleanup_free char *path = NULL, *read_back = NULL;
  int64_t size = 0;
  size_t len = 0;

  digest_of_buffer (content, strlen (content), digest);
  assert_int_equal (store_ingest_begin (f->store, digest, (int64_t) strlen (content), &ingest, &err), 0);
  assert_int_equal (ingest_files (f), 1);
  assert_int_equal (store_ingest_write (ingest, content, 5, &err), 0);
  assert_int_equal (store_ingest_write (ingest, content + 5, strlen (content) - 5, &err), 0);
  assert_false (store_has_blob (f->store, digest, NULL)); /* nothing visible before commit */
  if (store_ingest_commit (ingest, NULL, &err) < 0)
    fail_msg ("commit: %s", err->msg);
  assert_true (store_has_blob (f->store, digest, &size));
  assert_int_equal (size, strlen (content));
  assert_int_equal (ingest_files (f), 0);
  path = store_blob_path (f->store, digest);
  assert_non_null (strstr (path, "/blobs/sha256/"));
  assert_int_equal (store_read_blob (f->store, digest, 1024, &read_back, &len, &err), 0);
  assert_string_equal (read_back, content);
  assert_null (store_blob_path (f->store, "sha256:nothex"));
}

static void
test_ingest_rejects_bad_content (void **state)
{
  struct fixture *f = *state;
  const char *claimed = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
  char digest[DIGEST_STR_SIZE];
  struct store_ingest *ingest = NULL;
  struct husk_error *err = NULL;

  assert_int_equal (store_ingest_begin (f->store, claimed, -1, &ingest, &err), 0);
  assert_int_equal (store_ingest_write (ingest, "abc", 3, &err), 0);
  assert_int_equal (store_ingest_commit (ingest, NULL, &err), -1);
  assert_non_null (strstr (err->msg, "content has digest sha256:ba7816bf"));
  husk_error_free (&err);
  assert_false (store_has_blob (f->store, claimed, NULL));
  assert_int_equal (ingest_files (f), 0);

  /* Short: fewer bytes than the descriptor says. */
  digest_of_buffer ("abc", 3, digest);
  assert_int_equal (store_ingest_begin (f->store, digest, 10, &ingest, &err), 0);
  assert_int_equal (store_ingest_write (ingest, "abc", 3, &err), 0);
  assert_int_equal (store_ingest_commit (ingest, NULL, &err), -1);
  assert_non_null (strstr (err->msg, "got 3 bytes, its descriptor says 10"));
  husk_error_free (&err);

  /* Long: refused as soon as it overflows. */
  assert_int_equal (store_ingest_begin (f->store, digest, 2, &ingest, &err), 0);
  assert_int_equal (store_ingest_write (ingest, "abc", 3, &err), -1);
  assert_non_null (strstr (err->msg, "more than the 2 bytes its descriptor declares"));
  husk_error_free (&err);
  store_ingest_abort (ingest);
  assert_int_equal (ingest_files (f), 0);
  assert_false (store_has_blob (f->store, digest, NULL));

  assert_int_equal (store_ingest_begin (f->store, "md5:abc", -1, &ingest, &err), -1);
  husk_error_free (&err);
}

static void
test_ingest_fd_and_abort (void **state)
{
  struct fixture *f = *state;
  char digest[DIGEST_STR_SIZE];
  struct store_ingest *ingest = NULL;
  struct husk_error *err = NULL;

  digest_of_buffer ("raw bytes", 9, digest);
  /* A writer that uses the fd directly: commit hashes the file. */
  assert_int_equal (store_ingest_begin (f->store, digest, 9, &ingest, &err), 0);
  assert_int_equal (pwrite (store_ingest_fd (ingest), "raw bytes", 9, 0), 9);
  assert_int_equal (store_ingest_commit (ingest, NULL, &err), 0);
  assert_true (store_has_blob (f->store, digest, NULL));
  /* The same blob again (a second pull): succeeds, still one file. */
  assert_int_equal (store_ingest_begin (f->store, digest, 9, &ingest, &err), 0);
  assert_int_equal (pwrite (store_ingest_fd (ingest), "raw bytes", 9, 0), 9);
  assert_int_equal (store_ingest_commit (ingest, digest, &err), 0);
  assert_int_equal (ingest_files (f), 0);
  /* Abort removes the ingest file. */
  assert_int_equal (store_ingest_begin (f->store, digest, 9, &ingest, &err), 0);
  assert_int_equal (ingest_files (f), 1);
  store_ingest_abort (ingest);
  assert_int_equal (ingest_files (f), 0);
}

/* A batched commit verifies like the plain one; the caller syncs once. */
static void
test_ingest_commit_batched (void **state)
{
  struct fixture *f = *state;
  char digest[DIGEST_STR_SIZE], other[DIGEST_STR_SIZE];
  struct store_ingest *ingest = NULL;
  struct husk_error *err = NULL;
  char *content = NULL;
  size_t len = 0;

  digest_of_buffer ("batched", 7, digest);
  digest_of_buffer ("other", 5, other);
  assert_int_equal (store_ingest_begin (f->store, digest, 7, &ingest, &err), 0);
  assert_int_equal (pwrite (store_ingest_fd (ingest), "batched", 7, 0), 7);
  assert_int_equal (store_ingest_commit_batched (ingest, digest, &err), 0);
  assert_int_equal (store_sync_blobs (f->store, &err), 0);
  assert_int_equal (store_read_blob (f->store, digest, 64, &content, &len, &err), 0);
  assert_int_equal (len, 7);
  assert_memory_equal (content, "batched", 7);
  free (content);
  /* Wrong bytes under a digest: refused, nothing left behind. */
  assert_int_equal (store_ingest_begin (f->store, other, 7, &ingest, &err), 0);
  assert_int_equal (pwrite (store_ingest_fd (ingest), "batched", 7, 0), 7);
  assert_int_equal (store_ingest_commit_batched (ingest, NULL, &err), -1);
  assert_non_null (strstr (err->msg, "content has digest"));
  husk_error_free (&err);
  assert_false (store_has_blob (f->store, other, NULL));
  assert_int_equal (ingest_files (f), 0);
}

/* Two processes write the same 4 MiB blob at once: both succeed, one blob. */
static void
test_concurrent_ingest (void **state)
{
  struct fixture *f = *state;
  size_t size = 4 << 20;
  cleanup_free char *data = xmalloc (size);
  cleanup_free char *blobs = xasprintf ("%s/blobs/sha256", f->root);
  char digest[DIGEST_STR_SIZE];
  pid_t pids[2];

  for (size_t i = 0; i < size; i++)
    data[i] = (char) (i * 7 + (i >> 12));
  digest_of_buffer (data, size, digest);
  for (int p = 0; p < 2; p++)
    {
      pids[p] = fork ();
      assert_true (pids[p] >= 0);
      if (pids[p] == 0)
        {
          struct store_ingest *ingest = NULL;
          if (store_ingest_begin (f->store, digest, (int64_t) size, &ingest, NULL) < 0)
            _exit (1);
          for (size_t off = 0; off < size; off += 64 * 1024)
            if (store_ingest_write (ingest, data + off, 64 * 1024, NULL) < 0)
              _exit (2);
          _exit (store_ingest_commit (ingest, NULL, NULL) == 0 ? 0 : 3);
        }
    }
  for (int p = 0; p < 2; p++)
    {
      int status = 0;
      assert_int_equal (waitpid (pids[p], &status, 0), pids[p]);
      assert_true (WIFEXITED (status));
      assert_int_equal (WEXITSTATUS (status), 0);
    }
  assert_int_equal (count_dir (blobs), 1);
  assert_int_equal (ingest_files (f), 0);
  assert_true (store_has_blob (f->store, digest, NULL));
}

/* A 256 KiB tmpfs stands in for a full disk. */
static void
test_disk_full (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *tiny = xasprintf ("%s/tiny", f->root);
  cleanup_free char *ingest_dir = xasprintf ("%s/tiny/ingest", f->root);
  cleanup_free char *data = xcalloc (1, 1 << 20);
  struct store *store = NULL;
  struct store_ingest *ingest = NULL;
  struct husk_error *err = NULL;
  char digest[DIGEST_STR_SIZE];
  int rc = 0;

  assert_int_equal (mkdir (tiny, 0700), 0);
  assert_int_equal (mount ("tmpfs", tiny, "tmpfs", 0, "size=256k"), 0);
  assert_int_equal (store_open (tiny, &store, &err), 0);
  digest_of_buffer (data, 1 << 20, digest);
  assert_int_equal (store_ingest_begin (store, digest, 1 << 20, &ingest, &err), 0);
  for (size_t off = 0; rc == 0 && off < (1 << 20); off += 64 * 1024)
    rc = store_ingest_write (ingest, data + off, 64 * 1024, &err);
  assert_int_equal (rc, -1);
  assert_non_null (strstr (err->msg, "No space left on device"));
  assert_non_null (strstr (err->msg, digest));
  husk_error_free (&err);
  assert_int_equal (count_dir (ingest_dir), 0); /* freed at once, before the abort */
  assert_int_equal (store_ingest_commit (ingest, NULL, &err), -1);
  husk_error_free (&err);
  assert_false (store_has_blob (store, digest, NULL));
  store_free (store);
  assert_int_equal (umount2 (tiny, 0), 0);
}

static void
test_read_blob_checks (void **state)
{
  struct fixture *f = *state;
  static const char content[] = "0123456789";
  char digest[DIGEST_STR_SIZE];
  cleanup_free char *path = NULL;
  char *out = NULL;
  struct husk_error *err = NULL;

  digest_of_buffer (content, 10, digest);
  assert_int_equal (store_put_blob (f->store, digest, content, 10, &err), 0);
  assert_int_equal (store_read_blob (f->store, digest, 9, &out, NULL, &err), -1);
  assert_non_null (strstr (err->msg, "10 bytes, more than the 9 allowed"));
  husk_error_free (&err);
  /* Corrupted on disk after it was stored. */
  path = store_blob_path (f->store, digest);
  assert_int_equal (husk_write_file (path, "X", 1, NULL), 0);
  assert_int_equal (store_read_blob (f->store, digest, 1024, &out, NULL, &err), -1);
  assert_non_null (strstr (err->msg, "is corrupt on disk"));
  husk_error_free (&err);
  assert_int_equal (store_put_blob (f->store, digest, "wrong", 5, &err), -1);
  husk_error_free (&err);
}

static void
test_cleanup_stale_ingest (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *stale = xasprintf ("%s/ingest/old.1234", f->root);
  cleanup_free char *fresh = xasprintf ("%s/ingest/new.5678", f->root);
  struct timespec old[2] = { { .tv_sec = 1000000000 }, { .tv_sec = 1000000000 } };
  unsigned removed = 0;

  assert_int_equal (husk_write_file_atomic (stale, "x", 1, 0600, NULL), 0);
  assert_int_equal (husk_write_file_atomic (fresh, "x", 1, 0600, NULL), 0);
  assert_int_equal (utimensat (AT_FDCWD, stale, old, 0), 0);
  assert_int_equal (store_cleanup_ingest (f->store, STORE_INGEST_STALE_SECONDS, &removed, NULL), 0);
  assert_int_equal (removed, 1);
  assert_int_equal (access (stale, F_OK), -1);
  assert_int_equal (access (fresh, F_OK), 0);
}

static void
test_gc_and_lock (void **state)
{
  struct fixture *f = *state;
  char a[DIGEST_STR_SIZE], b[DIGEST_STR_SIZE];
  char *keep[] = { a, NULL };
  struct husk_error *err = NULL;
  unsigned removed = 0;
  int shared, exclusive;

  digest_of_buffer ("a", 1, a);
  digest_of_buffer ("b", 1, b);
  assert_int_equal (store_put_blob (f->store, a, "a", 1, &err), 0);
  assert_int_equal (store_put_blob (f->store, b, "b", 1, &err), 0);
  /* A pull holds the lock shared: GC cannot take it without waiting. */
  shared = store_gc_lock (store_root (f->store), false, true, &err);
  assert_true (shared >= 0);
  assert_int_equal (store_gc_lock (store_root (f->store), true, false, &err), -1);
  assert_int_equal (err->errnum, EWOULDBLOCK);
  husk_error_free (&err);
  close (shared);
  exclusive = store_gc_lock (store_root (f->store), true, false, &err);
  assert_true (exclusive >= 0);
  assert_int_equal (store_gc (f->store, keep, &removed, &err), 0);
  close (exclusive);
  assert_int_equal (removed, 1);
  assert_true (store_has_blob (f->store, a, NULL));
  assert_false (store_has_blob (f->store, b, NULL));
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_ingest_commit, setup, teardown),
    cmocka_unit_test_setup_teardown (test_ingest_rejects_bad_content, setup, teardown),
    cmocka_unit_test_setup_teardown (test_ingest_fd_and_abort, setup, teardown),
    cmocka_unit_test_setup_teardown (test_ingest_commit_batched, setup, teardown),
    cmocka_unit_test_setup_teardown (test_concurrent_ingest, setup, teardown),
    cmocka_unit_test_setup_teardown (test_disk_full, setup, teardown),
    cmocka_unit_test_setup_teardown (test_read_blob_checks, setup, teardown),
    cmocka_unit_test_setup_teardown (test_cleanup_stale_ingest, setup, teardown),
    cmocka_unit_test_setup_teardown (test_gc_and_lock, setup, teardown),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
