/* Content store: digest-addressed blobs, written through ingest files that
 * are verified, fsynced and renamed into place, so concurrent writers of the
 * same blob are safe and a crash never leaves a half-written blob. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/store.h"

struct store
{
  char *root;
  char *blobs_dir;  /* ROOT/blobs/sha256 */
  char *ingest_dir; /* ROOT/ingest */
};

struct store_ingest
{
  struct store *store;
  int fd;
  char *tmp_path;
  char digest[DIGEST_STR_SIZE];
  int64_t expected_size;
  uint64_t written;
  struct digest_ctx *hash; /* NULL once the writer took the fd */
  bool failed;             /* a write failed; the file is already gone */
};

int
store_open (const char *root, struct store **out, struct husk_error **err)
{
  cleanup_free char *blobs_dir = xasprintf ("%s/blobs/sha256", root);
  cleanup_free char *ingest_dir = xasprintf ("%s/ingest", root);
  struct store *store;

  if (husk_mkdir_p (blobs_dir, 0700, err) < 0 || husk_mkdir_p (ingest_dir, 0700, err) < 0)
    return husk_error_wrap (err, "open content store `%s`", root);
  store = xcalloc (1, sizeof *store);
  store->root = xstrdup (root);
  store->blobs_dir = steal_pointer (&blobs_dir);
  store->ingest_dir = steal_pointer (&ingest_dir);
  *out = store;
  return 0;
}

void
store_free (struct store *store)
{
  if (store == NULL)
    return;
  free (store->root);
  free (store->blobs_dir);
  free (store->ingest_dir);
  free (store);
}

const char *
store_root (const struct store *store)
{
  return store->root;
}

char *
store_blob_path (const struct store *store, const char *digest)
{
  if (!digest_is_valid (digest))
    return NULL;
  return xasprintf ("%s/%s", store->blobs_dir, digest_hex (digest));
}

bool
store_has_blob (const struct store *store, const char *digest, int64_t *size)
{
  cleanup_free char *path = store_blob_path (store, digest);
  struct stat st;

  if (path == NULL || stat (path, &st) < 0 || !S_ISREG (st.st_mode))
    return false;
  if (size)
    *size = st.st_size;
  return true;
}

static void
random_hex (char *out, size_t nbytes)
{
  static const char hexdigits[] = "0123456789abcdef";
  unsigned char raw[16];

  if (nbytes > sizeof raw || getrandom (raw, nbytes, 0) != (ssize_t) nbytes)
    abort ();
  for (size_t i = 0; i < nbytes; i++)
    {
      out[2 * i] = hexdigits[raw[i] >> 4];
      out[2 * i + 1] = hexdigits[raw[i] & 0xf];
    }
  out[2 * nbytes] = '\0';
}

int
store_ingest_begin (struct store *store, const char *expected_digest, int64_t expected_size,
                    struct store_ingest **out, struct husk_error **err)
{
  struct store_ingest *ingest;
  char suffix[17];

  if (digest_validate (expected_digest, "ingest blob", err) < 0)
    return -1;
  random_hex (suffix, 8);
  ingest = xcalloc (1, sizeof *ingest);
  ingest->store = store;
  ingest->tmp_path = xasprintf ("%s/%s.%s", store->ingest_dir, digest_hex (expected_digest), suffix);
  ingest->fd = open (ingest->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (ingest->fd < 0)
    {
      husk_error_make (err, errno, "create ingest file `%s`", ingest->tmp_path);
      free (ingest->tmp_path);
      free (ingest);
      return -1;
    }
  memcpy (ingest->digest, expected_digest, DIGEST_STR_SIZE);
  ingest->expected_size = expected_size;
  ingest->hash = digest_ctx_new ();
  *out = ingest;
  return 0;
}

int
store_ingest_fd (struct store_ingest *ingest)
{
  /* Bytes may now bypass our hash: commit must rehash the file. */
  digest_ctx_free (ingest->hash);
  ingest->hash = NULL;
  return ingest->fd;
}

uint64_t
store_ingest_written (const struct store_ingest *ingest)
{
  return ingest->written;
}

/* Frees the disk space at once: a full disk is the usual reason a write
 * fails, and the caller may not abort until much later. */
static int
ingest_fail (struct store_ingest *ingest, int errnum, struct husk_error **err, const char *what)
{
  if (!ingest->failed)
    unlink (ingest->tmp_path);
  ingest->failed = true;
  return husk_error_make (err, errnum, "%s blob %s", what, ingest->digest);
}

int
store_ingest_write (struct store_ingest *ingest, const void *buf, size_t len, struct husk_error **err)
{
  if (ingest->failed)
    return husk_error_make (err, EIO, "write blob %s: an earlier write failed", ingest->digest);
  if (ingest->expected_size >= 0 && ingest->written + len > (uint64_t) ingest->expected_size)
    {
      ingest_fail (ingest, 0, err, "write");
      return husk_error_wrap (err, "more than the %lld bytes its descriptor declares",
                              (long long) ingest->expected_size);
    }
  if (husk_write_all (ingest->fd, buf, len) < 0)
    return ingest_fail (ingest, errno, err, "write");
  if (ingest->hash)
    digest_ctx_update (ingest->hash, buf, len);
  ingest->written += len;
  return 0;
}

static void
ingest_free (struct store_ingest *ingest)
{
  if (ingest->fd >= 0)
    close (ingest->fd);
  digest_ctx_free (ingest->hash);
  free (ingest->tmp_path);
  free (ingest);
}

void
store_ingest_abort (struct store_ingest *ingest)
{
  if (ingest == NULL)
    return;
  if (!ingest->failed)
    unlink (ingest->tmp_path);
  ingest_free (ingest);
}

static int
ingest_actual_digest (struct store_ingest *ingest, const char *computed_digest, char actual[DIGEST_STR_SIZE],
                      struct husk_error **err)
{
  if (computed_digest)
    {
      if (digest_validate (computed_digest, "computed digest", err) < 0)
        return -1;
      memcpy (actual, computed_digest, DIGEST_STR_SIZE);
      return 0;
    }
  if (ingest->hash)
    {
      digest_ctx_finish (ingest->hash, actual);
      ingest->hash = NULL;
      return 0;
    }
  return digest_of_file (ingest->tmp_path, actual, NULL, err);
}

static int
ingest_verify (struct store_ingest *ingest, const char *computed_digest, struct husk_error **err)
{
  char actual[DIGEST_STR_SIZE];
  struct stat st;

  if (fstat (ingest->fd, &st) < 0)
    return husk_error_make (err, errno, "stat `%s`", ingest->tmp_path);
  if (ingest->expected_size >= 0 && st.st_size != ingest->expected_size)
    return husk_error_make (err, 0, "blob %s: got %lld bytes, its descriptor says %lld", ingest->digest,
                            (long long) st.st_size, (long long) ingest->expected_size);
  if (ingest_actual_digest (ingest, computed_digest, actual, err) < 0)
    return -1;
  if (strcmp (actual, ingest->digest) != 0)
    return husk_error_make (err, 0, "blob %s: content has digest %s (%lld bytes)", ingest->digest, actual,
                            (long long) st.st_size);
  return 0;
}

static void
fsync_dir (const char *path)
{
  cleanup_close int fd = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd >= 0)
    (void) fsync (fd);
}

static int
ingest_publish (struct store_ingest *ingest, bool sync_dir, struct husk_error **err)
{
  cleanup_free char *blob_path = store_blob_path (ingest->store, ingest->digest);

  if (fsync (ingest->fd) < 0)
    return husk_error_make (err, errno, "write blob %s", ingest->digest);
  (void) fchmod (ingest->fd, 0444);
  if (renameat2 (AT_FDCWD, ingest->tmp_path, AT_FDCWD, blob_path, RENAME_NOREPLACE) < 0)
    {
      if (errno == EEXIST)
        {
          /* Someone else stored the same content first. */
          unlink (ingest->tmp_path);
          return 0;
        }
      if (errno != EINVAL || rename (ingest->tmp_path, blob_path) < 0)
        return husk_error_make (err, errno, "rename `%s` to `%s`", ingest->tmp_path, blob_path);
    }
  if (sync_dir)
    fsync_dir (ingest->store->blobs_dir);
  return 0;
}

static int
ingest_commit (struct store_ingest *ingest, const char *computed_digest, bool sync_dir,
               struct husk_error **err)
{
  int ret;

  if (ingest->failed)
    {
      ingest_free (ingest);
      return husk_error_make (err, EIO, "commit blob: an earlier write failed");
    }
  ret = ingest_verify (ingest, computed_digest, err);
  if (ret == 0)
    ret = ingest_publish (ingest, sync_dir, err);
  if (ret < 0)
    {
      store_ingest_abort (ingest);
      return -1;
    }
  ingest_free (ingest);
  return 0;
}

int
store_ingest_commit (struct store_ingest *ingest, const char *computed_digest, struct husk_error **err)
{
  return ingest_commit (ingest, computed_digest, true, err);
}

int
store_ingest_commit_batched (struct store_ingest *ingest, const char *computed_digest,
                             struct husk_error **err)
{
  return ingest_commit (ingest, computed_digest, false, err);
}

int
store_sync_blobs (struct store *store, struct husk_error **err)
{
  cleanup_close int fd = open (store->blobs_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (fd < 0 || fsync (fd) < 0)
    return husk_error_make (err, errno, "sync `%s`", store->blobs_dir);
  return 0;
}

int
store_put_blob (struct store *store, const char *digest, const void *data, size_t len,
                struct husk_error **err)
{
  struct store_ingest *ingest = NULL;

  if (store_has_blob (store, digest, NULL))
    {
      char actual[DIGEST_STR_SIZE];
      digest_of_buffer (data, len, actual);
      if (strcmp (actual, digest) != 0)
        return husk_error_make (err, 0, "blob %s: content has digest %s", digest, actual);
      return 0;
    }
  if (store_ingest_begin (store, digest, (int64_t) len, &ingest, err) < 0)
    return -1;
  if (store_ingest_write (ingest, data, len, err) < 0)
    {
      store_ingest_abort (ingest);
      return -1;
    }
  return store_ingest_commit (ingest, NULL, err);
}

int
store_put_file (struct store *store, const char *digest, int64_t expected_size, int src_fd,
                struct husk_error **err)
{
  struct store_ingest *ingest = NULL;
  char buf[128 * 1024];

  if (store_ingest_begin (store, digest, expected_size, &ingest, err) < 0)
    return -1;
  for (;;)
    {
      ssize_t n = read (src_fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          store_ingest_abort (ingest);
          return husk_error_make (err, errno, "read source of blob %s", digest);
        }
      if (n == 0)
        break;
      if (store_ingest_write (ingest, buf, (size_t) n, err) < 0)
        {
          store_ingest_abort (ingest);
          return -1;
        }
    }
  return store_ingest_commit (ingest, NULL, err);
}

int
store_read_blob (const struct store *store, const char *digest, size_t max_size, char **out, size_t *len,
                 struct husk_error **err)
{
  cleanup_free char *path = store_blob_path (store, digest);
  cleanup_free char *content = NULL;
  cleanup_close int fd = -1;
  char actual[DIGEST_STR_SIZE];
  size_t content_len = 0;
  struct stat st;

  if (path == NULL)
    return digest_validate (digest, "read blob", err);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return husk_error_make (err, errno, "read blob %s", digest);
  if (fstat (fd, &st) < 0)
    return husk_error_make (err, errno, "stat blob %s", digest);
  if ((uint64_t) st.st_size > max_size)
    return husk_error_make (err, 0, "blob %s: %lld bytes, more than the %zu allowed here", digest,
                            (long long) st.st_size, max_size);
  if (husk_read_fd (fd, &content, &content_len, path, err) < 0)
    return -1;
  digest_of_buffer (content, content_len, actual);
  if (strcmp (actual, digest) != 0)
    return husk_error_make (err, 0, "blob %s is corrupt on disk: its content has digest %s", digest, actual);
  *out = steal_pointer (&content);
  if (len)
    *len = content_len;
  return 0;
}

int
store_cleanup_ingest (struct store *store, unsigned max_age_seconds, unsigned *removed,
                      struct husk_error **err)
{
  cleanup_dir DIR *dir = opendir (store->ingest_dir);
  time_t cutoff = time (NULL) - (time_t) max_age_seconds;
  unsigned count = 0;
  struct dirent *de;

  if (dir == NULL)
    return husk_error_make (err, errno, "open `%s`", store->ingest_dir);
  while ((de = readdir (dir)) != NULL)
    {
      struct stat st;

      if (de->d_name[0] == '.')
        continue;
      if (fstatat (dirfd (dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_mtime > cutoff)
        continue;
      if (unlinkat (dirfd (dir), de->d_name, 0) == 0)
        count++;
    }
  if (removed)
    *removed = count;
  return 0;
}

int
store_gc_lock (const char *root, bool exclusive, bool wait, struct husk_error **err)
{
  cleanup_free char *path = xasprintf ("%s/gc.lock", root);
  cleanup_close int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  int op = (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB);

  if (fd < 0)
    return husk_error_make (err, errno, "open `%s`", path);
  while (flock (fd, op) < 0)
    {
      if (errno == EINTR)
        continue;
      return husk_error_make (err, errno, "lock `%s`", path);
    }
  return steal_fd (&fd);
}

static int
compare_strings (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

int
store_gc (struct store *store, char *const *keep, unsigned *removed, struct husk_error **err)
{
  size_t n_keep = husk_strv_len (keep);
  cleanup_free char **sorted = xcalloc (n_keep + 1, sizeof *sorted);
  cleanup_dir DIR *dir = opendir (store->blobs_dir);
  unsigned count = 0;
  struct dirent *de;

  if (dir == NULL)
    return husk_error_make (err, errno, "open `%s`", store->blobs_dir);
  if (n_keep > 0) /* keep is NULL when no image is left */
    memcpy (sorted, keep, n_keep * sizeof *sorted);
  qsort (sorted, n_keep, sizeof *sorted, compare_strings);
  while ((de = readdir (dir)) != NULL)
    {
      char digest[7 + sizeof de->d_name];
      const char *key = digest;

      snprintf (digest, sizeof digest, "sha256:%s", de->d_name);
      if (!digest_is_valid (digest) || bsearch (&key, sorted, n_keep, sizeof *sorted, compare_strings))
        continue;
      if (unlinkat (dirfd (dir), de->d_name, 0) < 0 && errno != ENOENT)
        return husk_error_make (err, errno, "remove blob %s", digest);
      count++;
    }
  if (removed)
    *removed = count;
  return 0;
}
