/* The stats RPCs of runtime.v1: ContainerStats, ListContainerStats,
 * PodSandboxStats and ListPodSandboxStats.  Numbers come from the cgroup
 * files that exist, v2 or v1 (a missing controller leaves its message out;
 * memory without one comes from the processes), the writable layer's
 * upper dir and the pod's network namespace. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <jansson.h>

#include "cri/container/container_store.h"
#include "cri/container/containers.h"
#include "cri/stats/cgroup_cache.h"
#include "cri/stats/cri_stats.h"
#include "cri/stats/cri_stats_metrics.h"
#include "cri/stats/layer_usage.h"
#include "cri/config/runtime_exec.h"
#include "cri/pod/sandbox.h"
#include "cri/server/container_info.h"
#include "cri/server/service.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/state.h"

/* Far more containers and pods than a node runs; the oldest sample goes
 * beyond it, and the list RPCs drop the samples of removed ones. */
#define CPU_SAMPLES_MAX 4096

static struct cri_cpu_cache cpu_samples = CRI_CPU_CACHE_INIT (CPU_SAMPLES_MAX);

/* ------------------------------------------------------------------ */
/* a container's cgroup                                                 */

/* One usage sample of PATH through the KIND/ID entry's reader. */
static int
sample_cgroup (char kind, const char *id, const char *path, struct husk_cgroup_stats *out,
               struct husk_error **err)
{
  struct husk_cgroup_reader *reader = reader_lend (kind, id, path);
  int ret = husk_cgroup_reader_sample (reader, out, err);

  reader_return (kind, id, reader);
  return ret;
}

/* The cgroup directory of a running container, NULL when it has none. */
static char *
container_cgroup (struct cri_service *svc, const struct cri_container *c)
{
  const struct huskd_runtime *rt;
  struct container_state *state = NULL;
  struct husk_error *ignored = NULL;
  char *path = NULL;

  if (c->state != CRI_CONTAINER_RUNNING)
    return NULL;
  if ((path = cached_cgroup ('c', c->id)) != NULL)
    return path;
  rt = cri_runtime_for (svc->cfg, c->runtime_handler, &ignored);
  if (rt && state_load (rt->root, c->id, &state, &ignored) == 0 && state->cgroup_path)
    path = xstrdup (state->cgroup_path);
  husk_error_free (&ignored);
  state_free (state);
  if (path == NULL)
    path = cri_bundle_cgroup (svc, c->id);
  if (path && !cgroup_exists (path))
    free (steal_pointer (&path));
  if (path)
    cache_cgroup ('c', c->id, path);
  return path;
}

/* One reading of a container's cgroup. */
struct container_sample
{
  char *cgroup; /* NULL: not running or no cgroup */
  bool sampled;
  bool has_swap; /* the kernel accounts swap here */
  struct husk_cgroup_stats cg;
  /* A kept sample (cached_sample) comes with its own CPU rate. */
  bool kept, has_rate;
  uint64_t nano_cores;
};

/* How a stats RPC samples a cgroup: every counter (the metrics RPC); the
 * stats RPCs' fields, read now (ContainerStats, PodSandboxStats: one
 * container or pod); or those from the sampler, at most two of its periods
 * old (the list RPCs: hundreds of cgroups, read off their path). */
enum sample_how
{
  SAMPLE_FULL,
  SAMPLE_NOW,
  SAMPLE_KEPT,
};

/* How old a kept sample a list RPC takes: 0 (none, read now) while no
 * sampler runs (cgroup_cache.h). */
static int64_t
kept_max_age_ns (void)
{
  return 2 * cri_stats_sampler_period_ns ();
}

/* A cgroup's kept sample into OUT. */
static int
sample_kept (char kind, const char *id, const char *path, struct husk_cgroup_stats *out, bool *has_rate,
             uint64_t *nano_cores, struct husk_error **err)
{
  struct cri_kept_sample kept;

  if (cached_sample (kind, id, path, kept_max_age_ns (), &kept, err) < 0)
    return -1;
  *out = kept.stats;
  *has_rate = kept.has_rate;
  *nano_cores = kept.nano_cores;
  return 0;
}

/* SAMPLE_NOW and SAMPLE_KEPT through the container's reader. */
static void
sample_container (struct cri_service *svc, const struct cri_container *c, enum sample_how how,
                  struct container_sample *out)
{
  struct husk_error *err = NULL;
  int ret;

  memset (out, 0, sizeof *out);
  out->cgroup = container_cgroup (svc, c);
  if (out->cgroup == NULL)
    return;
  if (how == SAMPLE_FULL)
    ret = husk_cgroup_stats_read (out->cgroup, &out->cg, &err);
  else if (how == SAMPLE_NOW)
    ret = sample_cgroup ('c', c->id, out->cgroup, &out->cg, &err);
  else
    ret = sample_kept ('c', c->id, out->cgroup, &out->cg, &out->has_rate, &out->nano_cores, &err);
  if (ret < 0)
    {
      /* It exited between the lookup and the read. */
      forget_cgroup ('c', c->id);
      husk_error_free (&err);
      return;
    }
  out->sampled = true;
  out->kept = how == SAMPLE_KEPT;
  out->has_swap = out->cg.has_memory && out->cg.has_swap;
  /* CRI wants memory always: without a memory controller, what the
   * container's processes hold (a kept sample has it already). */
  if (!out->cg.has_memory && !out->kept)
    {
      cleanup_free pid_t *pids = NULL;
      size_t n = 0;

      if (cgroup_pids (out->cgroup, &pids, &n, &err) < 0)
        husk_error_free (&err);
      cri_stats_memory_from_pids (&out->cg, "/proc", pids, n);
    }
}

static void
sample_clear (struct container_sample *sample)
{
  free (sample->cgroup);
  husk_cgroup_stats_clear (&sample->cg);
}

/* ------------------------------------------------------------------ */
/* ContainerStats messages                                              */

static Runtime__V1__ContainerAttributes *
container_attributes (struct cri_arena *arena, const struct cri_container *c)
{
  Runtime__V1__ContainerAttributes *attrs = cri_arena_alloc (arena, sizeof *attrs);

  runtime__v1__container_attributes__init (attrs);
  attrs->id = c->id;
  attrs->metadata = c->config->metadata;
  attrs->n_labels = c->config->n_labels;
  attrs->labels = (Runtime__V1__ContainerAttributes__LabelsEntry **) c->config->labels;
  attrs->n_annotations = c->config->n_annotations;
  attrs->annotations = (Runtime__V1__ContainerAttributes__AnnotationsEntry **) c->config->annotations;
  return attrs;
}

/* The snapshot's upper dir (image/snapshot.h); none for a read-only rootfs.
 * Its usage as last measured (cri/stats/layer_usage.h), timestamped then. */
static Runtime__V1__FilesystemUsage *
writable_layer (struct cri_arena *arena, struct cri_service *svc, const struct cri_container *c)
{
  cleanup_free char *dir = container_store_dir (svc->containers, c->id);
  char *upper = cri_arena_adopt (arena, xasprintf ("%s/upper", dir));
  Runtime__V1__FilesystemIdentifier *fs_id;
  Runtime__V1__FilesystemUsage *fs;
  struct cri_dir_usage usage;
  struct husk_error *err = NULL;
  int64_t taken_ns = 0;

  if (layer_usage_get (svc->layers, upper, &usage, &taken_ns, &err) < 0)
    {
      if (err->errnum != ENOENT)
        husk_warn ("container %s: %s", c->id, err->msg);
      husk_error_free (&err);
      return NULL;
    }
  fs_id = cri_arena_alloc (arena, sizeof *fs_id);
  runtime__v1__filesystem_identifier__init (fs_id);
  fs_id->mountpoint = upper;
  fs = cri_arena_alloc (arena, sizeof *fs);
  runtime__v1__filesystem_usage__init (fs);
  fs->timestamp = taken_ns;
  fs->fs_id = fs_id;
  fs->used_bytes = cri_stats_u64 (arena, usage.bytes);
  fs->inodes_used = cri_stats_u64 (arena, usage.inodes);
  return fs;
}

/* CpuUsage with the rate since the previous sample of KIND/ID, if any. */
static Runtime__V1__CpuUsage *
cpu_with_rate (struct cri_arena *arena, const struct husk_cgroup_stats *s, char kind, const char *id)
{
  uint64_t nano_cores = 0;
  bool has_rate;

  if (!s->has_cpu)
    return NULL;
  has_rate
      = cri_cpu_cache_rate (&cpu_samples, kind, id, s->cpu.usage_usec * 1000, s->timestamp_ns, &nano_cores);
  return cri_stats_cpu (arena, s, has_rate ? &nano_cores : NULL);
}

static Runtime__V1__ContainerStats *
container_stats (struct cri_arena *arena, struct cri_service *svc, const struct cri_container *c,
                 const struct container_sample *sample)
{
  Runtime__V1__ContainerStats *stats = cri_arena_alloc (arena, sizeof *stats);

  runtime__v1__container_stats__init (stats);
  stats->attributes = container_attributes (arena, c);
  stats->writable_layer = writable_layer (arena, svc, c);
  if (!sample->sampled)
    return stats;
  if (sample->kept)
    stats->cpu = sample->cg.has_cpu
                     ? cri_stats_cpu (arena, &sample->cg, sample->has_rate ? &sample->nano_cores : NULL)
                     : NULL;
  else
    stats->cpu = cpu_with_rate (arena, &sample->cg, 'c', c->id);
  stats->memory = cri_stats_memory (arena, &sample->cg);
  if (sample->has_swap)
    stats->swap = cri_stats_swap (arena, &sample->cg);
  return stats;
}

static Runtime__V1__ContainerStats *
container_stats_now (struct cri_arena *arena, struct cri_service *svc, const struct cri_container *c,
                     enum sample_how how)
{
  struct container_sample sample;
  Runtime__V1__ContainerStats *stats;

  sample_container (svc, c, how, &sample);
  stats = container_stats (arena, svc, c, &sample);
  sample_clear (&sample);
  return stats;
}

static void
prune_samples (char kind, char *const *ids, size_t n)
{
  cri_cpu_cache_prune (&cpu_samples, kind, ids, n);
}

static void
prune_container_samples (struct cri_container *const *list, size_t n)
{
  cleanup_free char **ids = xcalloc (n + 1, sizeof *ids);

  size_t n_running = 0;

  for (size_t i = 0; i < n; i++)
    ids[i] = list[i]->id;
  prune_samples ('c', ids, n);
  for (size_t i = 0; i < n; i++)
    if (list[i]->state == CRI_CONTAINER_RUNNING)
      ids[n_running++] = list[i]->id;
  prune_cgroups ('c', ids, n_running);
}

/* ------------------------------------------------------------------ */
/* ContainerStats, ListContainerStats                                   */

void
cri_container_stats (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__ContainerStatsRequest *req
      = cri_unpack (call, &runtime__v1__container_stats_request__descriptor, req_bytes, len);
  Runtime__V1__ContainerStatsResponse resp = RUNTIME__V1__CONTAINER_STATS_RESPONSE__INIT;
  struct cri_arena arena = { 0 };
  struct cri_container *c = NULL;
  struct husk_error *err = NULL;

  if (req == NULL)
    return;
  if (!cri_nonempty (req->container_id))
    rpc_fail (call, GRPC_STATUS_INVALID_ARGUMENT, "container_id: required");
  else if (container_lookup (svc->containers, req->container_id, &c, &err) < 0)
    cri_fail (call, &err);
  else
    {
      resp.stats = container_stats_now (&arena, svc, c, SAMPLE_NOW);
      cri_reply (call, &resp.base);
    }
  cri_arena_clear (&arena);
  cri_container_free (c);
  runtime__v1__container_stats_request__free_unpacked (req, NULL);
}

/* As containerd: a filter id that names one container by a unique prefix
 * stands for its full id; any other is compared as given. */
static char *
full_container_id (struct cri_service *svc, const char *id)
{
  struct cri_container *c = NULL;
  struct husk_error *ignored = NULL;
  char *full;

  if (!cri_nonempty (id))
    return NULL;
  if (container_lookup (svc->containers, id, &c, &ignored) < 0)
    {
      husk_error_free (&ignored);
      return xstrdup (id);
    }
  full = xstrdup (c->id);
  cri_container_free (c);
  return full;
}

static char *
full_sandbox_id (struct cri_service *svc, const char *id)
{
  struct sandbox *sb = NULL;
  struct husk_error *ignored = NULL;
  char *full;

  if (!cri_nonempty (id))
    return NULL;
  if (sandbox_lookup (svc->sandboxes, id, &sb, &ignored) < 0)
    {
      husk_error_free (&ignored);
      return xstrdup (id);
    }
  full = xstrdup (sb->id);
  sandbox_free (sb);
  return full;
}

struct container_filter
{
  char *id, *pod_id; /* NULL: any */
  struct cri_string_entry *const *selector;
  size_t n_selector;
};

static bool
container_matches (const struct cri_container *c, const struct container_filter *f)
{
  if (f->id && strcmp (c->id, f->id) != 0)
    return false;
  if (f->pod_id && strcmp (c->sandbox_id, f->pod_id) != 0)
    return false;
  return cri_labels_match ((struct cri_string_entry *const *) c->config->labels, c->config->n_labels,
                           f->selector, f->n_selector);
}

void
cri_list_container_stats (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__ListContainerStatsRequest *req
      = cri_unpack (call, &runtime__v1__list_container_stats_request__descriptor, req_bytes, len);
  Runtime__V1__ListContainerStatsResponse resp = RUNTIME__V1__LIST_CONTAINER_STATS_RESPONSE__INIT;
  const Runtime__V1__ContainerStatsFilter *rf = req ? req->filter : NULL;
  struct container_filter filter = { 0 };
  struct cri_arena arena = { 0 };
  struct cri_container **list = NULL;
  struct husk_error *err = NULL;
  size_t n = 0;

  if (req == NULL)
    return;
  if (rf)
    filter = (struct container_filter){ .id = full_container_id (svc, rf->id),
                                        .pod_id = full_sandbox_id (svc, rf->pod_sandbox_id),
                                        .selector = (struct cri_string_entry *const *) rf->label_selector,
                                        .n_selector = rf->n_label_selector };
  if (container_list_attributes (svc->containers, &list, &n, &err) < 0)
    cri_fail (call, &err);
  else
    {
      resp.stats = cri_arena_alloc (&arena, (n + 1) * sizeof *resp.stats);
      for (size_t i = 0; i < n; i++)
        if (container_matches (list[i], &filter))
          resp.stats[resp.n_stats++] = container_stats_now (&arena, svc, list[i], SAMPLE_KEPT);
      cri_reply (call, &resp.base);
      prune_container_samples (list, n);
    }
  free (filter.id);
  free (filter.pod_id);
  cri_arena_clear (&arena);
  cri_containers_free (list, n);
  runtime__v1__list_container_stats_request__free_unpacked (req, NULL);
}

/* ------------------------------------------------------------------ */
/* a pod's cgroup, network and processes                                */

/* The cgroup of linux.cgroup_parent, when it exists (found once per pod,
 * kept beside the containers' until the pod is no longer ready).  A
 * systemd slice is the directory its scopes would be created in. */
static char *
pod_cgroup (const struct sandbox *sb)
{
  struct husk_error *ignored = NULL;
  char *path = NULL;

  if (!cri_nonempty (sb->cgroup_parent))
    return NULL;
  if ((path = cached_cgroup ('p', sb->id)) != NULL)
    return path;
  if (husk_str_has_suffix (sb->cgroup_parent, ".slice"))
    {
      const char *slash = strrchr (sb->cgroup_parent, '/');
      cleanup_free char *probe = xasprintf ("%s:husk:probe", slash ? slash + 1 : sb->cgroup_parent);
      if (cgroup_resolve (probe, sb->id, true, &path, &ignored) == 0)
        *strrchr (path, '/') = '\0';
    }
  else
    cgroup_resolve (sb->cgroup_parent, sb->id, false, &path, &ignored);
  husk_error_free (&ignored);
  if (path && !cgroup_exists (path))
    free (steal_pointer (&path));
  if (path)
    cache_cgroup ('p', sb->id, path);
  return path;
}

/* setns() changes only the calling thread: a thread of its own enters
 * the pods' network namespaces in turn, reads each one's net/dev and
 * ends (one thread for all of a list, not one per pod). */
struct netns_reads
{
  size_t n;
  const char **pins; /* NULL: nothing to read for that pod */
  int *fds;          /* the pod's net/dev opened before, or -1; what is open after */
  bool *opened;      /* fds[i] opened here, not lent by the cache */
  char **texts;
  int64_t *taken_ns; /* when texts[i] was read (CLOCK_REALTIME) */
  struct husk_error **errs;
};

static void *
read_net_devs_in (void *arg)
{
  struct netns_reads *job = arg;

  for (size_t i = 0; i < job->n; i++)
    {
      cleanup_close int fd = -1;

      if (job->pins[i] == NULL || job->fds[i] >= 0)
        continue;
      if ((fd = open (job->pins[i], O_RDONLY | O_CLOEXEC)) < 0)
        husk_error_make (&job->errs[i], errno, "open network namespace `%s`", job->pins[i]);
      else if (setns (fd, CLONE_NEWNET) < 0)
        husk_error_make (&job->errs[i], errno, "enter network namespace `%s`", job->pins[i]);
      else if ((job->fds[i] = open ("/proc/thread-self/net/dev", O_RDONLY | O_CLOEXEC)) < 0)
        husk_error_make (&job->errs[i], errno, "open `/proc/thread-self/net/dev` in network namespace `%s`",
                         job->pins[i]);
      else
        job->opened[i] = true;
    }
  return NULL;
}

/* Whether the network of SB is there to read: not host network, ready. */
static bool
has_own_network (const struct sandbox *sb)
{
  return sb->netns_path != NULL && !sb->network_down && sb->state == SANDBOX_READY;
}

static void
net_reads_init (struct netns_reads *job, size_t n)
{
  job->n = n;
  job->pins = xcalloc (n + 1, sizeof *job->pins);
  job->texts = xcalloc (n + 1, sizeof *job->texts);
  job->errs = xcalloc (n + 1, sizeof *job->errs);
  job->fds = xcalloc (n + 1, sizeof *job->fds);
  job->opened = xcalloc (n + 1, sizeof *job->opened);
  job->taken_ns = xcalloc (n + 1, sizeof *job->taken_ns);
  for (size_t i = 0; i < n; i++)
    job->fds[i] = -1;
}

/* Reads what JOB->pins name: each pod's net/dev as kept open (IDS[i]'s,
 * IDS NULL: none kept), else opened in its namespace by one thread that
 * enters them in turn (only when some pod needs it). */
static void
net_reads_run (struct netns_reads *job, char *const *ids)
{
  pthread_t thread;
  bool enter = false;
  int ret = 0;

  for (size_t i = 0; i < job->n; i++)
    if (job->pins[i])
      {
        job->fds[i] = ids ? net_fd_lend (ids[i]) : -1;
        enter = enter || job->fds[i] < 0;
      }
  if (enter && (ret = pthread_create (&thread, NULL, read_net_devs_in, job)) != 0)
    {
      for (size_t i = 0; i < job->n; i++)
        if (job->pins[i] && job->fds[i] < 0)
          husk_error_make (&job->errs[i], ret, "start a thread to read the pods' network");
    }
  else if (enter)
    pthread_join (thread, NULL);
  for (size_t i = 0; i < job->n; i++)
    {
      if (job->fds[i] < 0)
        continue;
      job->taken_ns[i] = cri_now_ns ();
      if (husk_reread_fd (job->fds[i], &job->texts[i], NULL, "/proc/thread-self/net/dev", &job->errs[i]) < 0)
        {
          husk_error_wrap (&job->errs[i], "network namespace `%s`", job->pins[i]);
          close (job->fds[i]);
        }
      else if (ids)
        net_fd_return (ids[i], job->fds[i], job->opened[i]);
      else
        close (job->fds[i]);
      job->fds[i] = -1;
    }
}

static void
net_reads_clear (struct netns_reads *job)
{
  for (size_t i = 0; i < job->n; i++)
    {
      free (job->texts[i]);
      husk_error_free (&job->errs[i]);
    }
  free (job->pins);
  free (job->texts);
  free (job->errs);
  free (job->fds);
  free (job->opened);
  free (job->taken_ns);
}

/* A pod's interfaces for its NetworkUsage, read at TAKEN_NS (realtime);
 * READ false: ERR says why not (none: host network, not ready). */
struct pod_net
{
  bool read;
  struct cri_net_dev *devs;
  size_t n;
  int64_t taken_ns;
  struct husk_error *err;
};

/* OUT from what JOB read for its pod I, parsed (its error taken). */
static void
pod_net_parse (struct netns_reads *job, size_t i, struct pod_net *out)
{
  memset (out, 0, sizeof *out);
  if (job->pins[i] == NULL)
    return;
  if (job->errs[i])
    out->err = steal_pointer (&job->errs[i]);
  else if (job->texts[i] == NULL)
    husk_error_make (&out->err, EIO, "network namespace `%s`: no statistics read", job->pins[i]);
  else if (cri_stats_parse_net_dev (job->texts[i], &out->devs, &out->n, &out->err) == 0)
    out->read = true;
  out->taken_ns = job->taken_ns[i];
}

static void
pod_net_clear (struct pod_net *net)
{
  free (net->devs);
  husk_error_free (&net->err);
}

/* The interfaces of SB alone; false when it has none to read (host
 * network, not ready) or the read failed (warned about). */
static bool
pod_net_devs (const struct sandbox *sb, struct cri_net_dev **devs, size_t *n)
{
  struct netns_reads job;
  struct pod_net net;

  *devs = NULL;
  *n = 0;
  if (!has_own_network (sb))
    return false;
  net_reads_init (&job, 1);
  job.pins[0] = sb->netns_path;
  net_reads_run (&job, (char *const[]){ sb->id });
  pod_net_parse (&job, 0, &net);
  if (net.read)
    {
      *devs = steal_pointer (&net.devs);
      *n = net.n;
    }
  else
    husk_warn ("pod %s: %s", sb->id, net.err->msg);
  pod_net_clear (&net);
  net_reads_clear (&job);
  return *devs != NULL;
}

/* NetworkUsage of SB from NET (its interfaces, timestamped when they were
 * read) or, when they could not be read, NULL and a warning. */
static Runtime__V1__NetworkUsage *
pod_network (struct cri_arena *arena, const struct sandbox *sb, const struct pod_net *net)
{
  if (!has_own_network (sb))
    return NULL;
  if (net->read)
    return cri_stats_network (arena, net->devs, net->n, net->taken_ns);
  husk_warn ("pod %s: %s", sb->id, net->err ? net->err->msg : "no network statistics");
  return NULL;
}

static uint64_t
count_pids (const char *cgroup)
{
  cleanup_free pid_t *pids = NULL;
  struct husk_error *ignored = NULL;
  size_t n = 0;

  if (cgroup_pids (cgroup, &pids, &n, &ignored) < 0)
    husk_error_free (&ignored);
  return n;
}

static Runtime__V1__ProcessUsage *
pod_process (struct cri_arena *arena, const struct husk_cgroup_stats *pod_cg,
             const struct container_sample *samples, size_t n)
{
  Runtime__V1__ProcessUsage *process = cri_arena_alloc (arena, sizeof *process);
  uint64_t count = 0;

  runtime__v1__process_usage__init (process);
  process->timestamp = cri_now_ns ();
  /* pids.current, as containerd reports it; cgroup.procs (of every
   * hierarchy) only without the pids controller. */
  if (pod_cg && pod_cg->has_pids)
    count = pod_cg->pids.current;
  else
    for (size_t i = 0; i < n; i++)
      if (samples[i].sampled && samples[i].cg.has_pids)
        count += samples[i].cg.pids.current;
      else if (samples[i].cgroup)
        count += count_pids (samples[i].cgroup);
  process->process_count = cri_stats_u64 (arena, count);
  return process;
}

/* ------------------------------------------------------------------ */
/* PodSandboxStats messages                                             */

static Runtime__V1__PodSandboxAttributes *
pod_attributes (struct cri_arena *arena, const struct sandbox *sb)
{
  Runtime__V1__PodSandboxAttributes *attrs = cri_arena_alloc (arena, sizeof *attrs);
  const Runtime__V1__PodSandboxConfig *config = sb->config;

  runtime__v1__pod_sandbox_attributes__init (attrs);
  attrs->id = sb->id;
  if (config == NULL)
    return attrs;
  attrs->metadata = config->metadata;
  attrs->n_labels = config->n_labels;
  attrs->labels = (Runtime__V1__PodSandboxAttributes__LabelsEntry **) config->labels;
  attrs->n_annotations = config->n_annotations;
  attrs->annotations = (Runtime__V1__PodSandboxAttributes__AnnotationsEntry **) config->annotations;
  return attrs;
}

/* The containers of a list, grouped by pod (in list order within one). */
struct by_pod
{
  struct cri_container *const *all;
  size_t *order; /* indexes into ALL, by sandbox id, then index */
  size_t n;
};

static int
compare_pod_of (const void *a, const void *b, void *arg)
{
  struct cri_container *const *all = arg;
  size_t i = *(const size_t *) a, j = *(const size_t *) b;
  int by_id = strcmp (all[i]->sandbox_id, all[j]->sandbox_id);

  return by_id ? by_id : (i > j) - (i < j);
}

static void
by_pod_init (struct by_pod *index, struct cri_container *const *all, size_t n)
{
  index->all = all;
  index->n = n;
  index->order = xcalloc (n + 1, sizeof *index->order);
  for (size_t i = 0; i < n; i++)
    index->order[i] = i;
  qsort_r (index->order, n, sizeof *index->order, compare_pod_of, (void *) all);
}

/* Where POD's containers begin in INDEX->order, and how many (*N). */
static size_t
by_pod_find (const struct by_pod *index, const char *pod, size_t *n)
{
  size_t lo = 0, hi = index->n;

  while (lo < hi)
    {
      size_t mid = lo + (hi - lo) / 2;
      if (strcmp (index->all[index->order[mid]]->sandbox_id, pod) < 0)
        lo = mid + 1;
      else
        hi = mid;
    }
  for (*n = 0; lo + *n < index->n && strcmp (index->all[index->order[lo + *n]]->sandbox_id, pod) == 0; (*n)++)
    ;
  return lo;
}

/* The pod's containers: their stats into LINUX, their samples summed. */
static struct container_sample *
pod_containers (struct cri_arena *arena, struct cri_service *svc, const struct sandbox *sb,
                const struct by_pod *index, enum sample_how how,
                Runtime__V1__LinuxPodSandboxStats *linux_stats, struct husk_cgroup_stats *sum)
{
  size_t n_mine, first = by_pod_find (index, sb->id, &n_mine);
  struct container_sample *samples = xcalloc (n_mine + 1, sizeof *samples);

  linux_stats->containers = cri_arena_alloc (arena, (n_mine + 1) * sizeof *linux_stats->containers);
  for (size_t k = 0; k < n_mine; k++)
    {
      struct cri_container *const *all = index->all;
      size_t i = index->order[first + k];
      struct container_sample *sample = &samples[linux_stats->n_containers];
      sample_container (svc, all[i], how, sample);
      linux_stats->containers[linux_stats->n_containers++] = container_stats (arena, svc, all[i], sample);
      if (sample->sampled)
        cri_stats_add (sum, &sample->cg);
    }
  return samples;
}

/* The CPU of a pod from kept samples: its cgroup's rate, else the sum of
 * its containers' rates when each sampled one has one. */
static Runtime__V1__CpuUsage *
pod_kept_cpu (struct cri_arena *arena, const struct husk_cgroup_stats *usage, bool pod_rate,
              uint64_t pod_nano_cores, bool has_pod_cg, const struct container_sample *samples, size_t n)
{
  uint64_t nano_cores = pod_nano_cores;
  bool has_rate = has_pod_cg ? pod_rate : n > 0;

  if (!usage->has_cpu)
    return NULL;
  if (!has_pod_cg)
    for (size_t i = 0; i < n; i++)
      if (samples[i].sampled)
        {
          has_rate = has_rate && samples[i].has_rate;
          nano_cores += samples[i].nano_cores;
        }
  return cri_stats_cpu (arena, usage, has_rate ? &nano_cores : NULL);
}

/* NET: the pod's interfaces, read now or kept.  HOW: SAMPLE_NOW or
 * SAMPLE_KEPT. */
static Runtime__V1__PodSandboxStats *
pod_stats (struct cri_arena *arena, struct cri_service *svc, const struct sandbox *sb,
           const struct by_pod *index, enum sample_how how, const struct pod_net *net)
{
  Runtime__V1__PodSandboxStats *stats = cri_arena_alloc (arena, sizeof *stats);
  Runtime__V1__LinuxPodSandboxStats *linux_stats = cri_arena_alloc (arena, sizeof *linux_stats);
  struct husk_cgroup_stats sum = { 0 }, pod_cg = { 0 };
  cleanup_free char *cgroup = pod_cgroup (sb);
  struct husk_error *ignored = NULL;
  struct container_sample *samples;
  bool has_pod_cg = false, pod_rate = false;
  uint64_t pod_nano_cores = 0;
  const struct husk_cgroup_stats *usage = &sum;
  int ret = -1;

  runtime__v1__pod_sandbox_stats__init (stats);
  runtime__v1__linux_pod_sandbox_stats__init (linux_stats);
  stats->attributes = pod_attributes (arena, sb);
  stats->linux = linux_stats;
  samples = pod_containers (arena, svc, sb, index, how, linux_stats, &sum);
  if (cgroup && how == SAMPLE_KEPT)
    ret = sample_kept ('p', sb->id, cgroup, &pod_cg, &pod_rate, &pod_nano_cores, &ignored);
  else if (cgroup)
    ret = sample_cgroup ('p', sb->id, cgroup, &pod_cg, &ignored);
  if (ret == 0)
    {
      usage = &pod_cg;
      has_pod_cg = true;
    }
  else if (cgroup)
    forget_cgroup ('p', sb->id);
  husk_error_free (&ignored);
  if (how == SAMPLE_KEPT)
    linux_stats->cpu = pod_kept_cpu (arena, usage, pod_rate, pod_nano_cores, has_pod_cg, samples,
                                     linux_stats->n_containers);
  else
    linux_stats->cpu = cpu_with_rate (arena, usage, 'p', sb->id);
  linux_stats->memory = cri_stats_memory (arena, usage);
  linux_stats->network = pod_network (arena, sb, net);
  if (sb->state == SANDBOX_READY)
    linux_stats->process
        = pod_process (arena, has_pod_cg ? &pod_cg : NULL, samples, linux_stats->n_containers);
  for (size_t i = 0; i < linux_stats->n_containers; i++)
    sample_clear (&samples[i]);
  free (samples);
  husk_cgroup_stats_clear (&pod_cg);
  return stats;
}

/* ------------------------------------------------------------------ */
/* PodSandboxStats, ListPodSandboxStats                                 */

void
cri_pod_sandbox_stats (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__PodSandboxStatsRequest *req
      = cri_unpack (call, &runtime__v1__pod_sandbox_stats_request__descriptor, req_bytes, len);
  Runtime__V1__PodSandboxStatsResponse resp = RUNTIME__V1__POD_SANDBOX_STATS_RESPONSE__INIT;
  struct cri_arena arena = { 0 };
  struct cri_container **all = NULL;
  struct sandbox *sb = NULL;
  struct husk_error *err = NULL;
  size_t n_all = 0;

  if (req == NULL)
    return;
  if (!cri_nonempty (req->pod_sandbox_id))
    rpc_fail (call, GRPC_STATUS_INVALID_ARGUMENT, "pod_sandbox_id: required");
  else if (sandbox_lookup (svc->sandboxes, req->pod_sandbox_id, &sb, &err) < 0
           || container_list_attributes (svc->containers, &all, &n_all, &err) < 0)
    cri_fail (call, &err);
  else
    {
      struct netns_reads job;
      struct pod_net net;
      struct by_pod index;

      net_reads_init (&job, 1);
      job.pins[0] = has_own_network (sb) ? sb->netns_path : NULL;
      net_reads_run (&job, (char *const[]){ sb->id });
      pod_net_parse (&job, 0, &net);
      by_pod_init (&index, all, n_all);
      resp.stats = pod_stats (&arena, svc, sb, &index, SAMPLE_NOW, &net);
      free (index.order);
      pod_net_clear (&net);
      net_reads_clear (&job);
      cri_reply (call, &resp.base);
    }
  cri_arena_clear (&arena);
  cri_containers_free (all, n_all);
  sandbox_free (sb);
  runtime__v1__pod_sandbox_stats_request__free_unpacked (req, NULL);
}

/* As containerd: only ready pods are listed. */
static bool
pod_matches (const struct sandbox *sb, const char *id, const Runtime__V1__PodSandboxStatsFilter *filter)
{
  const Runtime__V1__PodSandboxConfig *config = sb->config;

  if (sb->state != SANDBOX_READY)
    return false;
  if (filter == NULL)
    return true;
  if (id && strcmp (sb->id, id) != 0)
    return false;
  return cri_labels_match (
      (struct cri_string_entry *const *) (config ? config->labels : NULL), config ? config->n_labels : 0,
      (struct cri_string_entry *const *) filter->label_selector, filter->n_label_selector);
}

static void
prune_pod_samples (struct sandbox *const *pods, size_t n)
{
  cleanup_free char **ids = xcalloc (n + 1, sizeof *ids);

  size_t n_ready = 0;

  for (size_t i = 0; i < n; i++)
    ids[i] = pods[i]->id;
  prune_samples ('p', ids, n);
  for (size_t i = 0; i < n; i++)
    if (pods[i]->state == SANDBOX_READY)
      ids[n_ready++] = pods[i]->id;
  prune_cgroups ('p', ids, n_ready);
  prune_cgroups ('n', ids, n_ready);
}

/* The interfaces of the listed pods (MATCH[i]) that have a network: as
 * the sampler keeps them (cgroup_cache.h), at most two of its periods
 * old; read now, and kept from then on, for a pod that has none. */
static struct pod_net *
list_pod_nets (struct sandbox *const *pods, size_t n_pods, const bool *match)
{
  struct pod_net *nets = xcalloc (n_pods + 1, sizeof *nets);
  cleanup_free char **ids = xcalloc (n_pods + 1, sizeof *ids);
  int64_t max_age_ns = kept_max_age_ns ();
  struct netns_reads job;
  bool any_now = false;

  net_reads_init (&job, n_pods);
  for (size_t i = 0; i < n_pods; i++)
    {
      ids[i] = pods[i]->id;
      if (!match[i] || !has_own_network (pods[i]))
        continue;
      if (max_age_ns > 0
          && net_kept_sample (ids[i], max_age_ns, &nets[i].devs, &nets[i].n, &nets[i].taken_ns))
        nets[i].read = true;
      else
        {
          job.pins[i] = pods[i]->netns_path;
          any_now = true;
        }
    }
  if (any_now)
    net_reads_run (&job, ids);
  for (size_t i = 0; i < n_pods; i++)
    if (job.pins[i])
      {
        pod_net_parse (&job, i, &nets[i]);
        if (nets[i].read)
          net_keep_sample (ids[i], nets[i].devs, nets[i].n, nets[i].taken_ns);
      }
  net_reads_clear (&job);
  return nets;
}

static void
reply_pod_list (struct rpc_call *call, struct cri_service *svc,
                const Runtime__V1__PodSandboxStatsFilter *filter, struct sandbox *const *pods, size_t n_pods,
                struct cri_container *const *all, size_t n_all)
{
  Runtime__V1__ListPodSandboxStatsResponse resp = RUNTIME__V1__LIST_POD_SANDBOX_STATS_RESPONSE__INIT;
  cleanup_free char *id = filter ? full_sandbox_id (svc, filter->id) : NULL;
  cleanup_free bool *match = xcalloc (n_pods + 1, sizeof *match);
  struct cri_arena arena = { 0 };
  struct pod_net *nets;
  struct by_pod index;

  for (size_t i = 0; i < n_pods; i++)
    match[i] = pod_matches (pods[i], id, filter);
  nets = list_pod_nets (pods, n_pods, match);
  by_pod_init (&index, all, n_all);
  resp.stats = cri_arena_alloc (&arena, (n_pods + 1) * sizeof *resp.stats);
  for (size_t i = 0; i < n_pods; i++)
    if (match[i])
      resp.stats[resp.n_stats++] = pod_stats (&arena, svc, pods[i], &index, SAMPLE_KEPT, &nets[i]);
  free (index.order);
  for (size_t i = 0; i < n_pods; i++)
    pod_net_clear (&nets[i]);
  free (nets);
  cri_reply (call, &resp.base);
  cri_arena_clear (&arena);
}

void
cri_list_pod_sandbox_stats (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__ListPodSandboxStatsRequest *req
      = cri_unpack (call, &runtime__v1__list_pod_sandbox_stats_request__descriptor, req_bytes, len);
  struct sandbox **pods = NULL;
  struct cri_container **all = NULL;
  struct husk_error *err = NULL;
  size_t n_pods = 0, n_all = 0;

  if (req == NULL)
    return;
  if (sandbox_list_attributes (svc->sandboxes, &pods, &n_pods, &err) < 0
      || container_list_attributes (svc->containers, &all, &n_all, &err) < 0)
    cri_fail (call, &err);
  else
    {
      reply_pod_list (call, svc, req->filter, pods, n_pods, all, n_all);
      prune_pod_samples (pods, n_pods);
      prune_container_samples (all, n_all);
    }
  cri_containers_free (all, n_all);
  sandboxes_free (pods, n_pods);
  runtime__v1__list_pod_sandbox_stats_request__free_unpacked (req, NULL);
}

/* ------------------------------------------------------------------ */
/* ListMetricDescriptors, ListPodSandboxMetrics                         */

void
cri_list_metric_descriptors (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  Runtime__V1__ListMetricDescriptorsRequest *req
      = cri_unpack (call, &runtime__v1__list_metric_descriptors_request__descriptor, req_bytes, len);
  Runtime__V1__ListMetricDescriptorsResponse resp = RUNTIME__V1__LIST_METRIC_DESCRIPTORS_RESPONSE__INIT;
  struct cri_arena arena = { 0 };

  if (req == NULL)
    return;
  cri_metric_descriptors (&arena, &resp.descriptors, &resp.n_descriptors);
  cri_reply (call, &resp.base);
  cri_arena_clear (&arena);
  runtime__v1__list_metric_descriptors_request__free_unpacked (req, NULL);
}

/* A running container's metrics: its cgroup and its writable layer. */
static Runtime__V1__ContainerMetrics *
container_metrics (struct cri_arena *arena, struct cri_service *svc, const struct cri_container *c)
{
  Runtime__V1__ContainerMetrics *cm;
  struct cri_metric_list list = { 0 };
  struct container_sample sample;
  const char *base[3] = { c->id, c->config->metadata ? c->config->metadata->name : "", c->image };
  cleanup_free char *dir = container_store_dir (svc->containers, c->id);
  char *upper = cri_arena_adopt (arena, xasprintf ("%s/upper", dir));
  struct cri_dir_usage usage;
  struct husk_error *ignored = NULL;
  int64_t taken_ns = 0;

  sample_container (svc, c, SAMPLE_FULL, &sample);
  if (!sample.sampled)
    {
      sample_clear (&sample);
      return NULL;
    }
  cm = cri_arena_alloc (arena, sizeof *cm);
  runtime__v1__container_metrics__init (cm);
  cm->container_id = c->id;
  cri_metrics_of_cgroup (arena, &list, base, &sample.cg);
  if (layer_usage_get (svc->layers, upper, &usage, &taken_ns, &ignored) == 0)
    cri_metrics_of_layer (arena, &list, base, upper, &usage);
  husk_error_free (&ignored);
  cri_metric_list_finish (arena, &list);
  cm->metrics = list.items;
  cm->n_metrics = list.n;
  sample_clear (&sample);
  return cm;
}

static Runtime__V1__PodSandboxMetrics *
pod_metrics (struct cri_arena *arena, struct cri_service *svc, const struct sandbox *sb,
             struct cri_container *const *all, size_t n_all)
{
  Runtime__V1__PodSandboxMetrics *pm = cri_arena_alloc (arena, sizeof *pm);
  const Runtime__V1__PodSandboxMetadata *meta = sb->config ? sb->config->metadata : NULL;
  const char *base[3] = { sb->id, meta ? meta->name : "", "" };
  struct cri_metric_list list = { 0 };
  cleanup_free struct cri_net_dev *devs = NULL;
  size_t n_devs = 0;

  runtime__v1__pod_sandbox_metrics__init (pm);
  pm->pod_sandbox_id = sb->id;
  if (pod_net_devs (sb, &devs, &n_devs))
    cri_metrics_of_network (arena, &list, base, devs, n_devs);
  cri_metric_list_finish (arena, &list);
  pm->metrics = list.items;
  pm->n_metrics = list.n;
  pm->container_metrics = cri_arena_alloc (arena, (n_all + 1) * sizeof *pm->container_metrics);
  for (size_t i = 0; i < n_all; i++)
    {
      Runtime__V1__ContainerMetrics *cm;
      if (strcmp (all[i]->sandbox_id, sb->id) != 0 || all[i]->state != CRI_CONTAINER_RUNNING)
        continue;
      if ((cm = container_metrics (arena, svc, all[i])))
        pm->container_metrics[pm->n_container_metrics++] = cm;
    }
  return pm;
}

/* Ready pods only, as ListPodSandboxStats; also StreamPodSandboxMetrics,
 * whose reply has the same field 1. */
void
cri_list_pod_sandbox_metrics (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__ListPodSandboxMetricsRequest *req
      = cri_unpack (call, &runtime__v1__list_pod_sandbox_metrics_request__descriptor, req_bytes, len);
  Runtime__V1__ListPodSandboxMetricsResponse resp = RUNTIME__V1__LIST_POD_SANDBOX_METRICS_RESPONSE__INIT;
  struct cri_arena arena = { 0 };
  struct sandbox **pods = NULL;
  struct cri_container **all = NULL;
  struct husk_error *err = NULL;
  size_t n_pods = 0, n_all = 0;

  if (req == NULL)
    return;
  if (sandbox_list (svc->sandboxes, &pods, &n_pods, &err) < 0
      || container_list (svc->containers, &all, &n_all, &err) < 0)
    cri_fail (call, &err);
  else
    {
      resp.pod_metrics = cri_arena_alloc (&arena, (n_pods + 1) * sizeof *resp.pod_metrics);
      for (size_t i = 0; i < n_pods; i++)
        if (pods[i]->state == SANDBOX_READY)
          resp.pod_metrics[resp.n_pod_metrics++] = pod_metrics (&arena, svc, pods[i], all, n_all);
      cri_reply (call, &resp.base);
    }
  cri_arena_clear (&arena);
  cri_containers_free (all, n_all);
  sandboxes_free (pods, n_pods);
  runtime__v1__list_pod_sandbox_metrics_request__free_unpacked (req, NULL);
}
