/* image_pull: registry → content store → snapshots → image record. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/pull.h"
#include "image/snapshot.h"

struct pull_job
{
  struct store *store;
  struct registry_client *client;
  struct reference *ref;
  const struct pull_options *opts;
  struct registry_manifest *manifest;
  struct registry_manifest *index;
  struct image_manifest parsed;
  char *config;
  size_t config_len;
  char **diff_ids;
  bool wrote; /* got as far as writing blobs (and snapshots) */
};

static void
report_layer (const struct pull_job *job, enum pull_phase phase, size_t index, uint64_t done, uint64_t total,
              bool existed)
{
  struct pull_progress p = {
    .phase = phase,
    .index = index,
    .n_layers = job->parsed.n_layers,
    .done = done,
    .total = total,
    .digest = index < job->parsed.n_layers ? job->parsed.layers[index].digest : NULL,
    .existed = existed,
  };
  if (job->opts && job->opts->progress)
    job->opts->progress (&p, job->opts->progress_user);
}

static void
report (const struct pull_job *job, enum pull_phase phase, size_t index, uint64_t done, uint64_t total)
{
  report_layer (job, phase, index, done, total, false);
}

/* Blobs to fetch: config (slot 0) and every layer the store lacks. */
struct fetch_set
{
  struct registry_blob_request *requests;
  struct store_ingest **ingests;
  size_t *layer_of; /* request -> layer index, or SIZE_MAX for the config */
  size_t n;
};

static void
fetch_set_clear (struct fetch_set *set)
{
  for (size_t i = 0; i < set->n; i++)
    store_ingest_abort (set->ingests[i]);
  free (set->requests);
  free (set->ingests);
  free (set->layer_of);
  memset (set, 0, sizeof *set);
}

static int
fetch_set_add (struct pull_job *job, struct fetch_set *set, const struct image_descriptor *desc, size_t layer,
               struct husk_error **err)
{
  struct store_ingest *ingest = NULL;

  if (store_has_blob (job->store, desc->digest, NULL))
    return 0;
  if (store_ingest_begin (job->store, desc->digest, desc->size, &ingest, err) < 0)
    return -1;
  set->requests = xrealloc (set->requests, (set->n + 1) * sizeof *set->requests);
  set->ingests = xrealloc (set->ingests, (set->n + 1) * sizeof *set->ingests);
  set->layer_of = xrealloc (set->layer_of, (set->n + 1) * sizeof *set->layer_of);
  set->requests[set->n] = (struct registry_blob_request){ .digest = desc->digest,
                                                          .size = (uint64_t) desc->size,
                                                          .out_fd = store_ingest_fd (ingest) };
  set->ingests[set->n] = ingest;
  set->layer_of[set->n] = layer;
  set->n++;
  return 0;
}

struct progress_bridge
{
  const struct pull_job *job;
  const struct fetch_set *set;
};

static void
on_blob_progress (size_t index, uint64_t done, uint64_t total, void *user)
{
  const struct progress_bridge *bridge = user;
  size_t layer = bridge->set->layer_of[index];

  if (layer != SIZE_MAX)
    report (bridge->job, PULL_DOWNLOADING, layer, done, total);
}

static int
fetch_blobs (struct pull_job *job, struct husk_error **err)
{
  struct fetch_set set = { 0 };
  struct progress_bridge bridge = { job, &set };
  int ret = -1;

  if (fetch_set_add (job, &set, &job->parsed.config, SIZE_MAX, err) < 0)
    goto done;
  for (size_t i = 0; i < job->parsed.n_layers; i++)
    {
      if (!snapshot_layer_media_type_supported (job->parsed.layers[i].media_type))
        {
          husk_error_make (err, 0, "layer %zu (%s): media type `%s` is not supported", i,
                           job->parsed.layers[i].digest, job->parsed.layers[i].media_type);
          goto done;
        }
      if (fetch_set_add (job, &set, &job->parsed.layers[i], i, err) < 0)
        goto done;
      if (set.n > 0 && set.layer_of[set.n - 1] == i)
        report (job, PULL_LAYER_QUEUED, i, 0, (uint64_t) job->parsed.layers[i].size);
      else
        report_layer (job, PULL_LAYER_DONE, i, (uint64_t) job->parsed.layers[i].size,
                      (uint64_t) job->parsed.layers[i].size, true);
    }
  if (set.n
      && registry_fetch_blobs (job->client, job->ref, set.requests, set.n, on_blob_progress, &bridge, err)
             < 0)
    goto done;
  for (size_t i = 0; i < set.n; i++)
    {
      struct store_ingest *ingest = steal_pointer (&set.ingests[i]);
      /* registry_fetch_blobs verified the digest while streaming. */
      if (store_ingest_commit_batched (ingest, set.requests[i].digest, err) < 0)
        goto done;
      if (set.layer_of[i] != SIZE_MAX)
        report (job, PULL_LAYER_DONE, set.layer_of[i], set.requests[i].size, set.requests[i].size);
    }
  /* One directory sync for the whole image instead of one per blob, before
   * any snapshot or record refers to them.  Also when this pull fetched
   * nothing: the blobs it found may be a concurrent pull's, not yet synced. */
  if (store_sync_blobs (job->store, err) < 0)
    goto done;
  ret = 0;
done:
  fetch_set_clear (&set);
  return ret;
}

static uint64_t
max_image_bytes (const struct pull_job *job)
{
  return job->opts && job->opts->max_image_bytes ? job->opts->max_image_bytes : SNAPSHOT_DEFAULT_MAX_BYTES;
}

/* Layers decompress to at least their compressed size: a manifest that
 * declares more than the limit is refused before a byte is fetched. */
static int
check_declared_sizes (const struct pull_job *job, struct husk_error **err)
{
  uint64_t max = max_image_bytes (job), total = 0;

  for (size_t i = 0; i < job->parsed.n_layers; i++)
    {
      int64_t size = job->parsed.layers[i].size;

      if (size < 0 || (uint64_t) size > max - total)
        return husk_error_make (err, EFBIG,
                                "layer %zu (%s): declared size %lld bytes passes the limit of %llu bytes "
                                "per image",
                                i, job->parsed.layers[i].digest, (long long) size, (unsigned long long) max);
      total += (uint64_t) size;
    }
  return 0;
}

static int
unpack_layers (struct pull_job *job, struct husk_error **err)
{
  cleanup_free struct snapshot_layer *layers = NULL;
  size_t n_diff = husk_strv_len (job->diff_ids);

  if (n_diff != job->parsed.n_layers)
    return husk_error_make (err, 0, "config %s lists %zu diff_ids for %zu layers", job->parsed.config.digest,
                            n_diff, job->parsed.n_layers);
  layers = xcalloc (job->parsed.n_layers, sizeof *layers);
  for (size_t i = 0; i < job->parsed.n_layers; i++)
    layers[i] = (struct snapshot_layer){ .digest = job->parsed.layers[i].digest,
                                         .media_type = job->parsed.layers[i].media_type,
                                         .diff_id = job->diff_ids[i] };
  report (job, PULL_UNPACKING, 0, 0, 0);
  return snapshot_prepare_layers_max (job->store, layers, job->parsed.n_layers, max_image_bytes (job), NULL,
                                      err);
}

static int
pull_steps (struct pull_job *job, const char *ref_text, struct image **out, struct husk_error **err)
{
  cleanup_free char *name = NULL;
  struct image_config config = { 0 };
  struct images_add_request req = { 0 };
  const char *platform = job->opts ? job->opts->platform : NULL;

  if (reference_parse (ref_text, &job->ref, err) < 0)
    return -1;
  if (registry_resolve (job->client, job->ref, platform, &job->manifest, &job->index, err) < 0)
    return -1;
  if (image_manifest_parse (job->manifest->data, job->manifest->size, &job->parsed, err) < 0)
    return -1;
  report (job, PULL_RESOLVED, 0, 0, 0);
  if (check_declared_sizes (job, err) < 0)
    return -1;
  job->wrote = true;
  if (fetch_blobs (job, err) < 0)
    return -1;
  if (store_read_blob (job->store, job->parsed.config.digest, STORE_SMALL_BLOB_MAX, &job->config,
                       &job->config_len, err)
          < 0
      || image_config_parse (job->config, job->config_len, &config, &job->diff_ids, err) < 0)
    return -1;
  image_config_clear (&config);
  if (unpack_layers (job, err) < 0)
    return -1;
  name = reference_string (job->ref);
  req = (struct images_add_request){ .name = name,
                                     .manifest_digest = job->manifest->digest,
                                     .manifest = job->manifest->data,
                                     .manifest_len = job->manifest->size,
                                     .config = job->config,
                                     .config_len = job->config_len,
                                     .index_digest = job->index ? job->index->digest : NULL };
  return images_add (job->store, &req, out, err);
}

/* A pull that failed after writing blobs or snapshots leaves them to no
 * image (on a full disk, the disk stays full): they are collected now, or
 * by the last pull to end when others hold the GC lock.  A GC one of those
 * wanted runs here too. */
static void
collect_garbage (const struct pull_job *job, bool failed)
{
  struct husk_error *gc_err = NULL;
  struct images_gc_stats stats;
  int ret = failed && job->wrote ? images_gc_soon (job->store, &stats, &gc_err)
                                 : images_gc_if_wanted (job->store, &stats, &gc_err);

  if (ret < 0)
    {
      husk_warn ("collect what pulls left: %s", gc_err->msg);
      husk_error_free (&gc_err);
    }
  else if (stats.blobs_removed || stats.snapshots_removed)
    husk_debug ("collected %u blobs and %u snapshots no image references", stats.blobs_removed,
                stats.snapshots_removed);
}

int
image_pull (struct store *store, struct registry_client *client, const char *ref_text,
            const struct pull_options *opts, struct image **out, struct husk_error **err)
{
  struct pull_job job = { .store = store, .client = client, .opts = opts };
  /* Shared: a concurrent GC must not collect blobs this pull wrote but no
   * image record references yet. */
  int lock = store_gc_lock (store_root (store), false, true, err);
  int ret;

  if (lock < 0)
    return husk_error_wrap (err, "pull %s", ref_text);
  ret = pull_steps (&job, ref_text, out, err);
  close (lock);
  collect_garbage (&job, ret < 0);
  if (ret < 0 && !(job.ref == NULL && err && *err && husk_str_has_prefix ((*err)->msg, "invalid reference")))
    /* Registry errors start with the reference already. */
    husk_error_wrap (err, "pull");
  reference_free (job.ref);
  registry_manifest_free (job.manifest);
  registry_manifest_free (job.index);
  image_manifest_clear (&job.parsed);
  free (job.config);
  husk_strvfreep (&job.diff_ids);
  return ret;
}
