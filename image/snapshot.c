/* Layer snapshots (one unpacked directory per chain ID, made once and
 * renamed into place) and the overlayfs mounts that turn a stack of them into
 * a container's root filesystem. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/idmap.h"
#include "husk/util.h"
#include "image/snapshot.h"
#include "image/unpack.h"

#define LAYERS_FILE "layers" /* ROOT/containers/<id>/layers: what the rootfs uses */
#define SHORT_LINKS_DIR "l"  /* ROOT/snapshots/l: short names for deep stacks */
#define SHORT_LINK_LEN 12

static const char *const layer_media_types[] = {
  "application/vnd.oci.image.layer.v1.tar",
  "application/vnd.oci.image.layer.v1.tar+gzip",
  "application/vnd.oci.image.layer.v1.tar+zstd",
  "application/vnd.oci.image.layer.nondistributable.v1.tar",
  "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
  "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
  "application/vnd.docker.image.rootfs.diff.tar",
  "application/vnd.docker.image.rootfs.diff.tar.gzip",
  "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
};

bool
snapshot_layer_media_type_supported (const char *type)
{
  for (size_t i = 0; i < sizeof layer_media_types / sizeof layer_media_types[0]; i++)
    if (strcmp (type, layer_media_types[i]) == 0)
      return true;
  return false;
}

void
snapshot_chain_id (const char *parent_chain_id, const char *diff_id, char out[DIGEST_STR_SIZE])
{
  cleanup_free char *text = NULL;

  if (parent_chain_id == NULL)
    {
      snprintf (out, DIGEST_STR_SIZE, "%s", diff_id);
      return;
    }
  text = xasprintf ("%s %s", parent_chain_id, diff_id);
  digest_of_buffer (text, strlen (text), out);
}

void
snapshot_chain_ids (char *const *diff_ids, size_t n, char (*out)[DIGEST_STR_SIZE])
{
  for (size_t i = 0; i < n; i++)
    snapshot_chain_id (i ? out[i - 1] : NULL, diff_ids[i], out[i]);
}

char *
snapshot_fs_path (const char *root, const char *chain_id)
{
  return xasprintf ("%s/snapshots/%s/fs", root, digest_hex (chain_id));
}

bool
snapshot_exists (const char *root, const char *chain_id)
{
  cleanup_free char *path = NULL;
  struct stat st;

  if (!digest_is_valid (chain_id))
    return false;
  path = snapshot_fs_path (root, chain_id);
  return stat (path, &st) == 0 && S_ISDIR (st.st_mode);
}

static int
write_snapshot_info (const char *dir, const struct snapshot_layer *layer, const char *chain_id,
                     const char *parent, const struct unpack_stats *stats, struct husk_error **err)
{
  cleanup_free char *path = xasprintf ("%s/info.json", dir);
  cleanup_free char *text = NULL;
  json_t *info
      = json_pack ("{s:s, s:s, s:s?, s:s, s:I, s:I, s:I}", "chain_id", chain_id, "diff_id", layer->diff_id,
                   "parent", parent, "digest", layer->digest, "size", (json_int_t) stats->uncompressed_bytes,
                   "entries", (json_int_t) stats->entries, "created", (json_int_t) time (NULL));

  if (info == NULL)
    abort ();
  text = json_dumps (info, JSON_INDENT (2));
  json_decref (info);
  return husk_write_file_atomic (path, text, strlen (text), 0644, err);
}

/* Unpacks into TMP_DIR/fs and records what it is. */
static int
fill_snapshot (struct store *store, const char *tmp_dir, const struct snapshot_layer *layer,
               const char *chain_id, const char *parent, uint64_t max_bytes,
               atomic_uint_least64_t *total_bytes, struct husk_error **err)
{
  cleanup_free char *blob = store_blob_path (store, layer->digest);
  cleanup_free char *fs = xasprintf ("%s/fs", tmp_dir);
  struct unpack_options opts = { .layer_digest = layer->digest,
                                 .expected_diff_id = layer->diff_id,
                                 .max_bytes = max_bytes,
                                 .total_bytes = total_bytes };
  struct unpack_stats stats;
  struct timespec t0, t1;

  if (mkdir (fs, 0755) < 0)
    return husk_error_make (err, errno, "mkdir `%s`", fs);
  clock_gettime (CLOCK_MONOTONIC, &t0);
  if (unpack_layer (blob, fs, &opts, &stats, err) < 0)
    return -1;
  clock_gettime (CLOCK_MONOTONIC, &t1);
  husk_debug ("unpacked layer %s: %llu entries, %llu bytes in %.3f s", layer->digest,
              (unsigned long long) stats.entries, (unsigned long long) stats.uncompressed_bytes,
              (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9);
  return write_snapshot_info (tmp_dir, layer, chain_id, parent, &stats, err);
}

static int
check_layer (const struct store *store, const struct snapshot_layer *layer, struct husk_error **err)
{
  if (digest_validate (layer->digest, "layer digest", err) < 0
      || digest_validate (layer->diff_id, "diff_id", err) < 0)
    return -1;
  if (layer->media_type && !snapshot_layer_media_type_supported (layer->media_type))
    return husk_error_make (err, 0, "layer %s: media type `%s` is not supported", layer->digest,
                            layer->media_type);
  if (!store_has_blob (store, layer->digest, NULL))
    return husk_error_make (err, 0, "layer %s: blob is not in the content store", layer->digest);
  return 0;
}

/* A missing layer: checked and given its ROOT/snapshots/tmp-* dir by the
 * caller, unpacked there by one of the workers, then renamed into place. */
struct pending
{
  const struct snapshot_layer *layer;
  const char *chain_id;
  const char *parent; /* the chain below; NULL for the bottom layer */
  char *tmp_dir;
  char *final_dir;
  bool failed;
  struct husk_error *err; /* why it failed */
};

/* The missing layers, bottom first, claimed in order by the workers. */
struct unpack_queue
{
  struct store *store;
  const char *snapshots_dir;
  struct pending *items;
  size_t n;
  atomic_size_t next;
  atomic_bool failed;    /* once set, no worker claims another layer */
  atomic_size_t working; /* workers that have not run out of layers */
  uint64_t max_bytes;    /* decompressed bytes, all layers together */
  atomic_uint_least64_t total_bytes;
};

static void
pending_drop (struct pending *p, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      husk_rm_rf (p[i].tmp_dir, NULL);
      free (p[i].tmp_dir);
      free (p[i].final_dir);
      husk_error_free (&p[i].err);
    }
}

static int
pending_init (struct store *store, const struct snapshot_layer *layer, const char *chain_id,
              const char *parent, struct pending *out, struct husk_error **err)
{
  const char *root = store_root (store);
  char *tmp_dir = NULL;

  if (check_layer (store, layer, err) < 0)
    return -1;
  tmp_dir = xasprintf ("%s/snapshots/tmp-XXXXXX", root);
  if (mkdtemp (tmp_dir) == NULL)
    {
      husk_error_make (err, errno, "create `%s`", tmp_dir);
      free (tmp_dir);
      return -1;
    }
  *out = (struct pending){ .layer = layer,
                           .chain_id = chain_id,
                           .parent = parent,
                           .tmp_dir = tmp_dir,
                           .final_dir = xasprintf ("%s/snapshots/%s", root, digest_hex (chain_id)) };
  return 0;
}

/* Starts writing back what the workers wrote so far while the others
 * still unpack, so that the syncfs before the renames has less to wait
 * for.  Errors are for that syncfs to report. */
static void
sync_early (const char *snapshots_dir)
{
  cleanup_close int dir_fd = open (snapshots_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (dir_fd >= 0)
    (void) syncfs (dir_fd);
}

static void *
unpack_worker (void *arg)
{
  struct unpack_queue *queue = arg;

  while (!atomic_load (&queue->failed))
    {
      size_t i = atomic_fetch_add (&queue->next, 1);
      struct pending *p = i < queue->n ? &queue->items[i] : NULL;

      if (p == NULL)
        break;
      if (fill_snapshot (queue->store, p->tmp_dir, p->layer, p->chain_id, p->parent, queue->max_bytes,
                         &queue->total_bytes, &p->err)
          < 0)
        {
          p->failed = true;
          atomic_store (&queue->failed, true);
        }
    }
  /* The last one out leaves the sync to publish_pending. */
  if (atomic_fetch_sub (&queue->working, 1) > 1 && !atomic_load (&queue->failed))
    sync_early (queue->snapshots_dir);
  return NULL;
}

static size_t
unpack_worker_count (size_t n_layers)
{
  long cpus = sysconf (_SC_NPROCESSORS_ONLN);
  size_t n = cpus > 1 ? (size_t) cpus : 1;

  return n < n_layers ? n : n_layers;
}

/* The calling thread is one of the workers, so a thread that cannot be
 * started only leaves its share to the others.  The threads block every
 * signal: signals keep going where they went before. */
static void
run_unpack_workers (struct unpack_queue *queue)
{
  size_t n_threads = unpack_worker_count (queue->n) - 1;
  cleanup_free pthread_t *threads = xcalloc (n_threads, sizeof *threads);
  sigset_t all, saved;
  size_t started = 0;

  queue->working = n_threads + 1;
  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, &saved);
  while (started < n_threads && pthread_create (&threads[started], NULL, unpack_worker, queue) == 0)
    started++;
  pthread_sigmask (SIG_SETMASK, &saved, NULL);
  queue->working -= n_threads - started;
  unpack_worker (queue);
  for (size_t i = 0; i < started; i++)
    pthread_join (threads[i], NULL);
}

/* The error of the lowest failed layer: every layer below it was claimed
 * earlier and ran to its end, so it is the error an unpack in order
 * would have met first. */
static int
first_failure (struct pending *p, size_t n, struct husk_error **err)
{
  for (size_t i = 0; i < n; i++)
    if (p[i].failed)
      {
        if (err)
          {
            husk_error_free (err);
            *err = steal_pointer (&p[i].err);
          }
        return -1;
      }
  return 0;
}

/* One syncfs for all the new layers, then the renames that make them
 * visible: a crash never leaves a snapshot whose files are not on disk.
 * DIR_FD was opened before the unpacks began, as syncfs reports only the
 * writeback errors that happened since its fd was opened. */
static int
publish_pending (const char *snapshots_dir, int dir_fd, struct pending *p, size_t n, struct husk_error **err)
{
  if (syncfs (dir_fd) < 0)
    return husk_error_make (err, errno, "sync `%s`", snapshots_dir);
  for (size_t i = 0; i < n; i++)
    {
      if (renameat2 (AT_FDCWD, p[i].tmp_dir, AT_FDCWD, p[i].final_dir, RENAME_NOREPLACE) == 0)
        continue;
      /* A concurrent unpack of the same chain won: its copy serves, and
       * ours goes with the other leftovers. */
      if (errno != EEXIST && errno != ENOTEMPTY)
        return husk_error_make (err, errno, "rename `%s` to `%s`", p[i].tmp_dir, p[i].final_dir);
    }
  (void) fsync (dir_fd);
  return 0;
}

/* Checks each missing layer and gives it a tmp dir, bottom first, before
 * any unpack starts: a blob that is not there fails the set at once. */
static int
collect_missing (struct unpack_queue *queue, const struct snapshot_layer *layers, size_t n,
                 char (*chain_ids)[DIGEST_STR_SIZE], struct husk_error **err)
{
  const char *root = store_root (queue->store);

  for (size_t i = 0; i < n; i++)
    {
      const char *parent = i ? chain_ids[i - 1] : NULL;

      if (snapshot_exists (root, chain_ids[i]))
        continue;
      if (pending_init (queue->store, &layers[i], chain_ids[i], parent, &queue->items[queue->n], err) < 0)
        return -1;
      queue->n++;
    }
  return 0;
}

static int
unpack_and_publish (struct unpack_queue *queue, struct husk_error **err)
{
  cleanup_close int dir_fd = open (queue->snapshots_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

  if (dir_fd < 0)
    return husk_error_make (err, errno, "sync `%s`", queue->snapshots_dir);
  run_unpack_workers (queue);
  if (first_failure (queue->items, queue->n, err) < 0)
    return -1;
  return publish_pending (queue->snapshots_dir, dir_fd, queue->items, queue->n, err);
}

/* Each layer unpacks into a directory of its own, so the missing ones are
 * unpacked in parallel, a worker per CPU. */
static int
unpack_missing (struct store *store, const struct snapshot_layer *layers, size_t n,
                char (*chain_ids)[DIGEST_STR_SIZE], uint64_t max_bytes, unsigned *unpacked,
                struct husk_error **err)
{
  cleanup_free char *snapshots_dir = xasprintf ("%s/snapshots", store_root (store));
  cleanup_free struct pending *pending = xcalloc (n + 1, sizeof *pending);
  struct unpack_queue queue = { .store = store,
                                .snapshots_dir = snapshots_dir,
                                .items = pending,
                                .max_bytes = max_bytes ? max_bytes : SNAPSHOT_DEFAULT_MAX_BYTES };
  int ret = collect_missing (&queue, layers, n, chain_ids, err);

  if (ret == 0 && queue.n > 0)
    ret = unpack_and_publish (&queue, err);
  if (ret == 0 && unpacked)
    *unpacked = (unsigned) queue.n;
  /* Renamed dirs are no longer at their tmp path; the rest goes. */
  pending_drop (pending, queue.n);
  return ret;
}

int
snapshot_prepare_layers (struct store *store, const struct snapshot_layer *layers, size_t n,
                         unsigned *unpacked, struct husk_error **err)
{
  return snapshot_prepare_layers_max (store, layers, n, 0, unpacked, err);
}

int
snapshot_prepare_layers_max (struct store *store, const struct snapshot_layer *layers, size_t n,
                             uint64_t max_bytes, unsigned *unpacked, struct husk_error **err)
{
  const char *root = store_root (store);
  cleanup_free char *snapshots_dir = xasprintf ("%s/snapshots", root);
  cleanup_free char (*chain_ids)[DIGEST_STR_SIZE] = xcalloc (n ? n : 1, DIGEST_STR_SIZE);
  cleanup_close int lock_fd = -1;

  for (size_t i = 0; i < n; i++)
    {
      if (digest_validate (layers[i].diff_id, "diff_id", err) < 0)
        return husk_error_wrap (err, "layer %zu", i);
      snapshot_chain_id (i ? chain_ids[i - 1] : NULL, layers[i].diff_id, chain_ids[i]);
    }
  if (husk_mkdir_p (snapshots_dir, 0700, err) < 0)
    return -1;
  lock_fd = store_gc_lock (root, false, true, err);
  if (lock_fd < 0)
    return -1;
  return unpack_missing (store, layers, n, chain_ids, max_bytes, unpacked, err);
}

/* Container rootfs. */

static int
validate_container_id (const char *id, struct husk_error **err)
{
  size_t len = id ? strlen (id) : 0;

  if (len == 0 || len > 128 || id[0] == '.'
      || strspn (id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789_.-")
             != len)
    return husk_error_make (err, 0, "container id `%s` is not valid (want 1-128 of [A-Za-z0-9_.-])",
                            id ? id : "");
  return 0;
}

static bool
is_mount_point (const char *path)
{
  cleanup_free char *parent = xasprintf ("%s/..", path);
  struct statx stx;
  struct stat st, parent_st;

  if (statx (AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) == 0
      && (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
    return (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
  return lstat (path, &st) == 0 && stat (parent, &parent_st) == 0 && st.st_dev != parent_st.st_dev;
}

static char *
layers_record (char *const *chain_ids, size_t n, bool readonly)
{
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);

  if (f == NULL)
    abort ();
  fprintf (f, "%s\n", readonly ? "ro" : "rw");
  for (size_t i = 0; i < n; i++)
    fprintf (f, "%s\n", chain_ids[i]);
  fclose (f);
  return text;
}

/* Remembers which snapshots the rootfs uses (so GC keeps them) and refuses
 * to reuse a container dir for a different stack. */
static int
record_layers (const char *dir, const char *id, char *const *chain_ids, size_t n, bool readonly,
               struct husk_error **err)
{
  cleanup_free char *path = xasprintf ("%s/%s", dir, LAYERS_FILE);
  cleanup_free char *want = layers_record (chain_ids, n, readonly);
  cleanup_free char *have = NULL;

  if (husk_read_file (path, &have, NULL, NULL) == 0)
    {
      if (strcmp (have, want) != 0)
        return husk_error_make (err, EEXIST, "container `%s` already has a rootfs of other layers", id);
      return 0;
    }
  return husk_write_file_atomic (path, want, strlen (want), 0644, err);
}

/* Lower dirs top first, either as full paths or as short links
 * (l/<first hex digits>) relative to ROOT/snapshots. */
static char *
overlay_options (const char *snapshots, char *const *chain_ids, size_t n, const char *upper, const char *work)
{
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);

  if (f == NULL)
    abort ();
  fputs ("lowerdir=", f);
  for (size_t i = n; i-- > 0;)
    {
      const char *hex = digest_hex (chain_ids[i]);
      if (snapshots)
        fprintf (f, "%s/%s/fs", snapshots, hex);
      else
        fprintf (f, SHORT_LINKS_DIR "/%.*s", SHORT_LINK_LEN, hex);
      fputs (i ? ":" : "", f);
    }
  if (upper)
    fprintf (f, ",upperdir=%s,workdir=%s,index=off", upper, work);
  fclose (f);
  return text;
}

/* ROOT/snapshots/l/<12 hex> -> ../<hex>/fs, made on first need. */
static int
ensure_short_link (const char *snapshots, const char *chain_id, struct husk_error **err)
{
  const char *hex = digest_hex (chain_id);
  cleanup_free char *link_path = xasprintf ("%s/" SHORT_LINKS_DIR "/%.*s", snapshots, SHORT_LINK_LEN, hex);
  cleanup_free char *target = xasprintf ("../%s/fs", hex);
  char have[PATH_MAX];
  ssize_t n;

  if (symlink (target, link_path) == 0)
    return 0;
  if (errno != EEXIST)
    return husk_error_make (err, errno, "symlink `%s`", link_path);
  n = readlink (link_path, have, sizeof have - 1);
  if (n < 0)
    return husk_error_make (err, errno, "readlink `%s`", link_path);
  have[n] = '\0';
  if (strcmp (have, target) != 0)
    return husk_error_make (err, EEXIST, "short link `%s` points to `%s`, not `%s`", link_path, have, target);
  return 0;
}

static void
mount_helper_child (int report_fd, const char *cwd, const char *options, const char *target,
                    unsigned long flags)
{
  int result = 0;

  if (chdir (cwd) < 0 || mount ("overlay", target, "overlay", flags, options) < 0)
    result = errno;
  (void) !write (report_fd, &result, sizeof result);
  _exit (0);
}

/* mount(2) with lower dirs relative to CWD, done in a child so that the
 * chdir cannot disturb the caller's other threads.  The child reports its
 * errno through a pipe: its exit status is not ours to trust (tools that
 * wrap processes rewrite it). */
static int
mount_overlay_from (const char *cwd, const char *options, const char *target, unsigned long flags,
                    struct husk_error **err)
{
  int pipe_fds[2], result = EIO;
  ssize_t n;
  pid_t pid;

  if (cwd == NULL)
    {
      if (mount ("overlay", target, "overlay", flags, options) < 0)
        return husk_error_make (err, errno, "mount overlay on `%s`", target);
      return 0;
    }
  if (pipe2 (pipe_fds, O_CLOEXEC) < 0)
    return husk_error_make (err, errno, "pipe");
  pid = fork ();
  if (pid == 0)
    mount_helper_child (pipe_fds[1], cwd, options, target, flags);
  close (pipe_fds[1]);
  if (pid < 0)
    {
      close (pipe_fds[0]);
      return husk_error_make (err, errno, "fork");
    }
  do
    n = read (pipe_fds[0], &result, sizeof result);
  while (n < 0 && errno == EINTR);
  close (pipe_fds[0]);
  while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
  if (n != sizeof result || result != 0)
    return husk_error_make (err, n == sizeof result ? result : EIO,
                            "mount overlay on `%s` (lower dirs relative to `%s`)", target, cwd);
  return 0;
}

static int
bind_readonly (const char *source, const char *target, struct husk_error **err)
{
  /* The type is ignored for binds; "none" rather than NULL keeps valgrind quiet. */
  if (mount (source, target, "none", MS_BIND, NULL) < 0)
    return husk_error_make (err, errno, "bind mount `%s` on `%s`", source, target);
  if (mount ("none", target, "none", MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) < 0)
    {
      int saved = errno;
      umount2 (target, MNT_DETACH);
      return husk_error_make (err, saved, "make `%s` read-only", target);
    }
  return 0;
}

static int
mount_short (const char *snapshots, char *const *chain_ids, size_t n, const char *upper, const char *work,
             const char *merged, unsigned long flags, struct husk_error **err)
{
  cleanup_free char *links = xasprintf ("%s/" SHORT_LINKS_DIR, snapshots);
  cleanup_free char *options = NULL;

  if (mkdir (links, 0700) < 0 && errno != EEXIST)
    return husk_error_make (err, errno, "mkdir `%s`", links);
  for (size_t i = 0; i < n; i++)
    if (ensure_short_link (snapshots, chain_ids[i], err) < 0)
      return -1;
  options = overlay_options (NULL, chain_ids, n, upper, work);
  if (strlen (options) >= (size_t) sysconf (_SC_PAGESIZE))
    return husk_error_make (err, E2BIG, "mount overlay on `%s`: %zu layers are too many for one mount",
                            merged, n);
  return mount_overlay_from (snapshots, options, merged, flags, err);
}

static void
close_fds (int *fds, size_t n)
{
  for (size_t i = 0; i < n; i++)
    husk_closep (&fds[i]);
}

/* The lower dirs as idmapped detached clones, named /proc/self/fd/N in the
 * options (the overlay holds them once mounted; the fds go). */
static int
mount_rootfs_idmapped (const char *snapshots, const char *dir, char *const *chain_ids, size_t n,
                       const struct snapshot_idmap *idmap, struct husk_error **err)
{
  cleanup_free int *fds = xcalloc (n + 1, sizeof *fds);
  cleanup_free char *upper = xasprintf ("%s/upper", dir), *work = xasprintf ("%s/work", dir);
  cleanup_free char *merged = xasprintf ("%s/merged", dir);
  cleanup_free char *options = NULL;
  size_t len = 0;
  FILE *f;
  int ret = 0;

  for (size_t i = 0; i < n; i++)
    fds[i] = -1;
  for (size_t i = 0; i < n && ret == 0; i++)
    {
      cleanup_free char *fs = xasprintf ("%s/%s/fs", snapshots, digest_hex (chain_ids[i]));
      fds[i] = husk_idmap_clone (fs, false, idmap->userns_fd, err);
      if (fds[i] < 0)
        ret = -1;
    }
  if (ret == 0 && (chown (upper, idmap->root_uid, idmap->root_gid) < 0))
    ret = husk_error_make (err, errno, "chown `%s` to the user namespace's root (%u:%u)", upper,
                           (unsigned) idmap->root_uid, (unsigned) idmap->root_gid);
  if (ret == 0)
    {
      f = open_memstream (&options, &len);
      if (f == NULL)
        abort ();
      fputs ("lowerdir=", f);
      for (size_t i = n; i-- > 0;)
        fprintf (f, "/proc/self/fd/%d%s", fds[i], i ? ":" : "");
      fprintf (f, ",upperdir=%s,workdir=%s,index=off", upper, work);
      fclose (f);
      if (strlen (options) >= (size_t) sysconf (_SC_PAGESIZE))
        ret = husk_error_make (
            err, E2BIG, "mount overlay on `%s`: %zu idmapped layers are too many for one mount", merged, n);
      else if (mount ("overlay", merged, "overlay", 0, options) < 0)
        ret = husk_error_make (err, errno, "mount overlay with idmapped layers on `%s` (%s)", merged,
                               husk_fs_type_name (snapshots));
    }
  close_fds (fds, n);
  return ret;
}

/* mount(2) takes one page of options: full paths when they fit, else
 * short links relative to ROOT/snapshots (about 15 bytes a layer). */
static int
mount_rootfs (const char *root, const char *dir, char *const *chain_ids, size_t n, bool readonly,
              const struct snapshot_idmap *idmap, struct husk_error **err)
{
  cleanup_free char *abs_dir = realpath (dir, NULL);
  cleanup_free char *abs_root = realpath (root, NULL);
  cleanup_free char *snapshots = NULL, *upper = NULL, *work = NULL, *merged = NULL, *options = NULL;
  unsigned long flags = readonly ? MS_RDONLY : 0;

  if (abs_dir == NULL || abs_root == NULL)
    return husk_error_make (err, errno, "resolve `%s`", dir);
  if (strpbrk (abs_dir, ",:") || strpbrk (abs_root, ",:"))
    return husk_error_make (err, 0, "`%s`: overlay paths cannot hold `,` or `:`", abs_dir);
  merged = xasprintf ("%s/merged", abs_dir);
  snapshots = xasprintf ("%s/snapshots", abs_root);
  if (idmap)
    return mount_rootfs_idmapped (snapshots, abs_dir, chain_ids, n, idmap, err);
  if (readonly && n == 1)
    {
      cleanup_free char *fs = snapshot_fs_path (abs_root, chain_ids[0]);
      return bind_readonly (fs, merged, err);
    }
  if (!readonly)
    {
      upper = xasprintf ("%s/upper", abs_dir);
      work = xasprintf ("%s/work", abs_dir);
    }
  options = overlay_options (snapshots, chain_ids, n, upper, work);
  if (strlen (options) < (size_t) sysconf (_SC_PAGESIZE))
    return mount_overlay_from (NULL, options, merged, flags, err);
  return mount_short (snapshots, chain_ids, n, upper, work, merged, flags, err);
}

static int
make_container_dirs (const char *dir, bool readonly, struct husk_error **err)
{
  static const struct
  {
    const char *name;
    mode_t mode;
    bool rw_only;
  } subdirs[] = { { "merged", 0755, false }, { "upper", 0755, true }, { "work", 0700, true } };

  if (husk_mkdir_p (dir, 0700, err) < 0)
    return -1;
  for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++)
    {
      cleanup_free char *path = xasprintf ("%s/%s", dir, subdirs[i].name);
      if ((readonly && subdirs[i].rw_only) || mkdir (path, subdirs[i].mode) == 0 || errno == EEXIST)
        continue;
      return husk_error_make (err, errno, "mkdir `%s`", path);
    }
  return 0;
}

/* The init of a container in a user namespace walks to its rootfs as root
 * of that namespace, which host-root-only directories stop: ROOT,
 * ROOT/containers and DIR get search permission for all (0711 at least, as
 * containerd keeps its root; no listing); a directory above ROOT without
 * it is an error naming it, not changed behind the operator's back. */
static int
make_searchable (const char *root, const char *dir, struct husk_error **err)
{
  cleanup_free char *abs_root = realpath (root, NULL);
  cleanup_free char *containers = NULL, *walk = NULL;
  const char *ours[3];
  struct stat st;

  if (abs_root == NULL)
    return husk_error_make (err, errno, "resolve `%s`", root);
  containers = xasprintf ("%s/containers", abs_root);
  ours[0] = abs_root;
  ours[1] = containers;
  ours[2] = dir;
  for (size_t i = 0; i < 3; i++)
    if (stat (ours[i], &st) < 0 || chmod (ours[i], (st.st_mode & 07777) | 0111) < 0)
      return husk_error_make (err, errno, "make `%s` searchable for a user-namespaced container", ours[i]);
  walk = xstrdup (abs_root);
  for (char *slash = strrchr (walk, '/'); slash && slash != walk; slash = strrchr (walk, '/'))
    {
      *slash = '\0';
      if (stat (walk, &st) == 0 && (st.st_mode & S_IXOTH) == 0)
        return husk_error_make (err, EACCES,
                                "`%s` (mode %04o) is not searchable by others: a user-namespaced container's "
                                "root cannot reach its rootfs under `%s`",
                                walk, (unsigned) (st.st_mode & 07777), abs_root);
    }
  return 0;
}

int
snapshot_create_container (const char *root, const char *container_id, char *const *chain_ids, size_t n,
                           bool readonly, char **rootfs_path, struct husk_error **err)
{
  return snapshot_create_container_idmapped (root, container_id, chain_ids, n, readonly, NULL, rootfs_path,
                                             err);
}

int
snapshot_create_container_idmapped (const char *root, const char *container_id, char *const *chain_ids,
                                    size_t n, bool readonly, const struct snapshot_idmap *idmap,
                                    char **rootfs_path, struct husk_error **err)
{
  cleanup_free char *dir = NULL, *merged = NULL;
  cleanup_close int lock_fd = -1;

  if (validate_container_id (container_id, err) < 0)
    return -1;
  if (n == 0)
    return husk_error_make (err, 0, "container `%s`: the image has no layers", container_id);
  if (idmap && readonly)
    return husk_error_make (err, EINVAL, "container `%s`: an idmapped rootfs is always writable",
                            container_id);
  dir = xasprintf ("%s/containers/%s", root, container_id);
  merged = xasprintf ("%s/merged", dir);
  lock_fd = store_gc_lock (root, false, true, err);
  if (lock_fd < 0)
    return -1;
  for (size_t i = 0; i < n; i++)
    if (!snapshot_exists (root, chain_ids[i]))
      return husk_error_make (err, 0, "container `%s`: layer snapshot %s is missing (image removed?)",
                              container_id, chain_ids[i] ? chain_ids[i] : "(null)");
  if (make_container_dirs (dir, readonly, err) < 0
      || record_layers (dir, container_id, chain_ids, n, readonly, err) < 0)
    return husk_error_wrap (err, "container `%s`", container_id);
  if (idmap && make_searchable (root, dir, err) < 0)
    return husk_error_wrap (err, "container `%s`", container_id);
  if (!is_mount_point (merged) && mount_rootfs (root, dir, chain_ids, n, readonly, idmap, err) < 0)
    return husk_error_wrap (err, "container `%s`", container_id);
  *rootfs_path = steal_pointer (&merged);
  return 0;
}

static int
unmount_all (const char *path, struct husk_error **err)
{
  /* Stacked mounts (a rootfs mounted twice) come off one at a time. */
  for (int i = 0; i < 16 && umount2 (path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0; i++)
    ;
  if (errno != EINVAL && errno != ENOENT)
    return husk_error_make (err, errno, "unmount `%s`", path);
  if (is_mount_point (path))
    return husk_error_make (err, EBUSY, "unmount `%s`: still mounted", path);
  return 0;
}

int
snapshot_remove_container (const char *root, const char *container_id, struct husk_error **err)
{
  static const char *const parts[] = { "upper", "work", "merged", LAYERS_FILE };
  cleanup_free char *dir = NULL, *merged = NULL;
  struct stat st;

  if (validate_container_id (container_id, err) < 0)
    return -1;
  dir = xasprintf ("%s/containers/%s", root, container_id);
  merged = xasprintf ("%s/merged", dir);
  if (lstat (dir, &st) < 0 && errno == ENOENT)
    return 0;
  if (unmount_all (merged, err) < 0)
    return husk_error_wrap (err, "remove container `%s` rootfs", container_id);
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    {
      cleanup_free char *path = xasprintf ("%s/%s", dir, parts[i]);
      if (husk_rm_rf (path, err) < 0)
        return husk_error_wrap (err, "remove container `%s` rootfs", container_id);
    }
  if (rmdir (dir) < 0 && errno != ENOTEMPTY && errno != EEXIST && errno != ENOENT)
    return husk_error_make (err, errno, "remove `%s`", dir);
  return 0;
}

/* GC. */

struct string_set
{
  char **items;
  size_t n, cap;
};

static void
string_set_add (struct string_set *set, const char *s)
{
  if (set->n == set->cap)
    {
      set->cap = set->cap ? 2 * set->cap : 32;
      set->items = xrealloc (set->items, set->cap * sizeof *set->items);
    }
  set->items[set->n++] = xstrdup (s);
}

static int
compare_strings (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

static bool
string_set_has (const struct string_set *set, const char *s)
{
  return set->n > 0 && bsearch (&s, set->items, set->n, sizeof *set->items, compare_strings) != NULL;
}

static void
string_set_clear (struct string_set *set)
{
  for (size_t i = 0; i < set->n; i++)
    free (set->items[i]);
  free (set->items);
}

static void
add_container_layers (const char *root, struct string_set *set)
{
  cleanup_free char *containers = xasprintf ("%s/containers", root);
  cleanup_dir DIR *dir = opendir (containers);
  struct dirent *de;

  while (dir && (de = readdir (dir)) != NULL)
    {
      cleanup_free char *path = xasprintf ("%s/%s/%s", containers, de->d_name, LAYERS_FILE);
      cleanup_free char *text = NULL;
      char *save = NULL;

      if (de->d_name[0] == '.' || husk_read_file (path, &text, NULL, NULL) < 0)
        continue;
      for (char *line = strtok_r (text, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
        if (digest_is_valid (line))
          string_set_add (set, line);
    }
}

static bool
snapshot_is_garbage (const struct string_set *keep, const char *name)
{
  char chain_id[7 + NAME_MAX + 1];

  if (husk_str_has_prefix (name, "tmp-"))
    return true; /* an unpack that died: none runs while GC holds its lock */
  snprintf (chain_id, sizeof chain_id, "sha256:%s", name);
  return digest_is_valid (chain_id) && !string_set_has (keep, chain_id);
}

/* Short links whose snapshot went. */
static void
gc_short_links (const char *snapshots)
{
  cleanup_free char *links = xasprintf ("%s/" SHORT_LINKS_DIR, snapshots);
  cleanup_dir DIR *dir = opendir (links);
  struct dirent *de;
  struct stat st;

  while (dir && (de = readdir (dir)) != NULL)
    if (de->d_name[0] != '.' && fstatat (dirfd (dir), de->d_name, &st, 0) < 0 && errno == ENOENT)
      unlinkat (dirfd (dir), de->d_name, 0);
}

int
snapshot_gc (const char *root, char *const *keep, unsigned *removed, struct husk_error **err)
{
  cleanup_free char *snapshots = xasprintf ("%s/snapshots", root);
  cleanup_dir DIR *dir = opendir (snapshots);
  struct string_set keep_set = { 0 };
  unsigned count = 0;
  struct dirent *de;
  int ret = 0;

  if (dir == NULL)
    return errno == ENOENT ? 0 : husk_error_make (err, errno, "open `%s`", snapshots);
  for (size_t i = 0; keep && keep[i]; i++)
    string_set_add (&keep_set, keep[i]);
  add_container_layers (root, &keep_set);
  if (keep_set.n > 0) /* no image and no container: items is NULL */
    qsort (keep_set.items, keep_set.n, sizeof *keep_set.items, compare_strings);
  while (ret == 0 && (de = readdir (dir)) != NULL)
    {
      cleanup_free char *path = NULL;
      if (de->d_name[0] == '.' || !snapshot_is_garbage (&keep_set, de->d_name))
        continue;
      path = xasprintf ("%s/%s", snapshots, de->d_name);
      ret = husk_rm_rf (path, err);
      count += ret == 0;
    }
  string_set_clear (&keep_set);
  gc_short_links (snapshots);
  if (removed)
    *removed = count;
  return ret;
}
