/* The content store: every blob husk keeps (manifests, configs, layers),
 * addressed by digest under ROOT/blobs/sha256/<hex>.  Writers stream into
 * ROOT/ingest/ and a blob only appears under blobs/ once its digest and size
 * were checked, so readers never see a half-written blob. */
#ifndef HUSK_IMAGE_STORE_H
#define HUSK_IMAGE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "husk/error.h"
#include "image/digest.h"

#define STORE_DEFAULT_ROOT "/var/lib/husk"
/* Ingest files untouched for this long are left over from a crash. */
#define STORE_INGEST_STALE_SECONDS (30 * 60)
/* Cap for blobs read whole into memory (manifests, indexes, configs). */
#define STORE_SMALL_BLOB_MAX (8 * 1024 * 1024)

struct store;
struct store_ingest;

/* Opens (creating if needed) the store under ROOT: ROOT/blobs/sha256 and
 * ROOT/ingest. */
int store_open (const char *root, struct store **out, struct husk_error **err);
void store_free (struct store *store);
const char *store_root (const struct store *store);

/* Starts writing the blob EXPECTED_DIGEST (required: the store only holds
 * content it can verify).  EXPECTED_SIZE is the descriptor's size, or -1 when
 * unknown.  The ingest file is ROOT/ingest/<hex>.<random>, created O_EXCL.
 * Write with store_ingest_write (which hashes as it goes), or write to
 * store_ingest_fd yourself (then commit rehashes the file, unless you pass a
 * digest you computed while streaming). */
int store_ingest_begin (struct store *store, const char *expected_digest, int64_t expected_size,
                        struct store_ingest **out, struct husk_error **err);
int store_ingest_fd (struct store_ingest *ingest);
/* Appends LEN bytes.  Fails (and says so) on ENOSPC or when more bytes
 * arrive than the expected size; the ingest stays open for abort. */
int store_ingest_write (struct store_ingest *ingest, const void *buf, size_t len, struct husk_error **err);
/* Bytes written so far. */
uint64_t store_ingest_written (const struct store_ingest *ingest);
/* Verifies size and digest (COMPUTED_DIGEST, the streaming hash, or a hash
 * of the file), fsyncs and renames the file into blobs/.  When the blob is
 * already there (a concurrent pull won) the ingest file is dropped and this
 * succeeds.  Always consumes INGEST: on failure the ingest file is removed. */
int store_ingest_commit (struct store_ingest *ingest, const char *computed_digest, struct husk_error **err);
/* The same, but the rename is not yet durable: the caller commits a batch
 * and then calls store_sync_blobs once, before anything records the blobs
 * (an image record, a snapshot).  The blob's content is fsynced before its
 * rename, as always, so a crash may lose the name but never leaves a blob
 * under its digest with other bytes. */
int store_ingest_commit_batched (struct store_ingest *ingest, const char *computed_digest,
                                 struct husk_error **err);
/* Makes the renames of batched commits (this process's and others') durable. */
int store_sync_blobs (struct store *store, struct husk_error **err);
/* Removes the ingest file and frees INGEST (NULL is fine). */
void store_ingest_abort (struct store_ingest *ingest);

/* Writes a whole buffer as blob DIGEST (verifying it). */
int store_put_blob (struct store *store, const char *digest, const void *data, size_t len,
                    struct husk_error **err);
/* Copies the file at PATH into the store as blob DIGEST (verifying it). */
int store_put_file (struct store *store, const char *digest, int64_t expected_size, int src_fd,
                    struct husk_error **err);

/* ROOT/blobs/sha256/<hex> (malloc'd), or NULL when DIGEST is not valid. */
char *store_blob_path (const struct store *store, const char *digest);
/* True when the blob is present; *SIZE (may be NULL) gets its size. */
bool store_has_blob (const struct store *store, const char *digest, int64_t *size);
/* Reads a whole blob of at most MAX_SIZE bytes (NUL-terminated) and checks
 * it still matches its digest. */
int store_read_blob (const struct store *store, const char *digest, size_t max_size, char **out, size_t *len,
                     struct husk_error **err);

/* Removes ingest files not written to for MAX_AGE_SECONDS (left by a crash).
 * Meant for startup; *REMOVED (may be NULL) counts them. */
int store_cleanup_ingest (struct store *store, unsigned max_age_seconds, unsigned *removed,
                          struct husk_error **err);

/* The GC lock (ROOT/gc.lock, ROOT being store_root()).  Everything that writes blobs or snapshots an
 * image record does not reference yet (a pull, an import, an unpack, a
 * container mount) holds it shared; garbage collection holds it exclusive.
 * Returns the lock fd (close it to release), or -1.  With WAIT false and the
 * lock busy, fails with errnum EWOULDBLOCK. */
int store_gc_lock (const char *root, bool exclusive, bool wait, struct husk_error **err);

/* Removes every blob whose digest is not in KEEP (NULL-terminated).  The
 * caller holds the GC lock exclusive.  *REMOVED (may be NULL) counts them. */
int store_gc (struct store *store, char *const *keep, unsigned *removed, struct husk_error **err);

#endif
