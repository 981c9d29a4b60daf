/* The store-free half of huskd's stats RPCs (cri/stats/cri_stats.h): CRI
 * messages from cgroup samples, CPU rates, /proc/net/dev and the disk
 * usage walk of a container's writable layer. */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <search.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cri/stats/cri_stats.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define NSEC_PER_SEC 1000000000ull

void *
cri_arena_adopt (struct cri_arena *arena, void *block)
{
  if (arena->n == arena->cap)
    arena->blocks
        = xrealloc (arena->blocks, (arena->cap = arena->cap ? arena->cap * 2 : 32) * sizeof (void *));
  arena->blocks[arena->n++] = block;
  return block;
}

void
cri_stats_background_thread (void)
{
  id_t tid = (id_t) gettid ();
  int nice;

  errno = 0;
  nice = getpriority (PRIO_PROCESS, tid);
  if (errno == 0 && nice < CRI_STATS_BACKGROUND_NICE)
    setpriority (PRIO_PROCESS, tid, CRI_STATS_BACKGROUND_NICE);
}

/* A list's reply is thousands of small messages: they are carved from
 * chunks of this size (a larger block gets one of its own). */
#define ARENA_CHUNK 16384

void *
cri_arena_alloc (struct cri_arena *arena, size_t size)
{
  const size_t align = _Alignof(max_align_t);
  void *block;

  size = (size ? size + align - 1 : align) & ~(align - 1);
  if (size > ARENA_CHUNK / 4)
    return cri_arena_adopt (arena, xcalloc (1, size));
  if (size > arena->left)
    {
      arena->chunk = cri_arena_adopt (arena, xcalloc (1, ARENA_CHUNK));
      arena->left = ARENA_CHUNK;
    }
  block = arena->chunk + (ARENA_CHUNK - arena->left);
  arena->left -= size;
  return block;
}

void
cri_arena_clear (struct cri_arena *arena)
{
  for (size_t i = 0; i < arena->n; i++)
    free (arena->blocks[i]);
  free (arena->blocks);
  memset (arena, 0, sizeof *arena);
}

Runtime__V1__UInt64Value *
cri_stats_u64 (struct cri_arena *arena, uint64_t value)
{
  Runtime__V1__UInt64Value *v = cri_arena_alloc (arena, sizeof *v);

  runtime__v1__uint64_value__init (v);
  v->value = value;
  return v;
}

/* ------------------------------------------------------------------ */
/* cgroup sample -> CRI                                                 */

Runtime__V1__CpuUsage *
cri_stats_cpu (struct cri_arena *arena, const struct husk_cgroup_stats *s, const uint64_t *nano_cores)
{
  Runtime__V1__CpuUsage *cpu;

  if (!s->has_cpu)
    return NULL;
  cpu = cri_arena_alloc (arena, sizeof *cpu);
  runtime__v1__cpu_usage__init (cpu);
  cpu->timestamp = (int64_t) s->timestamp_ns;
  cpu->usage_core_nano_seconds = cri_stats_u64 (arena, s->cpu.usage_usec * 1000);
  if (nano_cores)
    cpu->usage_nano_cores = cri_stats_u64 (arena, *nano_cores);
  return cpu;
}

Runtime__V1__MemoryUsage *
cri_stats_memory (struct cri_arena *arena, const struct husk_cgroup_stats *s)
{
  Runtime__V1__MemoryUsage *mem;
  uint64_t limit = s->memory.limit, working_set = s->memory.working_set;

  if (!s->has_memory)
    return NULL;
  mem = cri_arena_alloc (arena, sizeof *mem);
  runtime__v1__memory_usage__init (mem);
  mem->timestamp = (int64_t) s->timestamp_ns;
  mem->working_set_bytes = cri_stats_u64 (arena, working_set);
  if (limit != HUSK_CGROUP_UNLIMITED)
    mem->available_bytes = cri_stats_u64 (arena, limit > working_set ? limit - working_set : 0);
  mem->usage_bytes = cri_stats_u64 (arena, s->memory.usage);
  mem->rss_bytes = cri_stats_u64 (arena, s->memory.anon);
  mem->page_faults = cri_stats_u64 (arena, s->memory.page_faults);
  mem->major_page_faults = cri_stats_u64 (arena, s->memory.major_page_faults);
  return mem;
}

void
cri_stats_memory_from_pids (struct husk_cgroup_stats *s, const char *proc, const pid_t *pids, size_t n)
{
  uint64_t page = (uint64_t) sysconf (_SC_PAGESIZE), resident_bytes = 0;

  for (size_t i = 0; i < n; i++)
    {
      cleanup_free char *path = xasprintf ("%s/%d/statm", proc, (int) pids[i]);
      cleanup_free char *statm = NULL;
      unsigned long long size, resident;

      if (husk_read_file (path, &statm, NULL, NULL) == 0
          && sscanf (statm, "%llu %llu", &size, &resident) == 2)
        resident_bytes += resident * page;
    }
  s->has_memory = true;
  s->memory.usage = s->memory.working_set = s->memory.anon = resident_bytes;
  s->memory.limit = s->memory.swap_limit = HUSK_CGROUP_UNLIMITED;
}

Runtime__V1__SwapUsage *
cri_stats_swap (struct cri_arena *arena, const struct husk_cgroup_stats *s)
{
  Runtime__V1__SwapUsage *swap;
  uint64_t limit = s->memory.swap_limit, usage = s->memory.swap_usage;

  if (!s->has_memory)
    return NULL;
  swap = cri_arena_alloc (arena, sizeof *swap);
  runtime__v1__swap_usage__init (swap);
  swap->timestamp = (int64_t) s->timestamp_ns;
  swap->swap_usage_bytes = cri_stats_u64 (arena, usage);
  if (limit != HUSK_CGROUP_UNLIMITED)
    swap->swap_available_bytes = cri_stats_u64 (arena, limit > usage ? limit - usage : 0);
  return swap;
}

static uint64_t
add_limit (uint64_t a, uint64_t b)
{
  if (a == HUSK_CGROUP_UNLIMITED || b == HUSK_CGROUP_UNLIMITED || a + b < a)
    return HUSK_CGROUP_UNLIMITED;
  return a + b;
}

static void
add_memory (struct husk_cgroup_stats *sum, const struct husk_cgroup_stats *s)
{
  /* The first part with memory starts the sum from its own limits. */
  if (!sum->has_memory)
    sum->memory.limit = sum->memory.swap_limit = 0;
  sum->has_memory = true;
  sum->memory.usage += s->memory.usage;
  sum->memory.limit = add_limit (sum->memory.limit, s->memory.limit);
  sum->memory.swap_usage += s->memory.swap_usage;
  sum->memory.swap_limit = add_limit (sum->memory.swap_limit, s->memory.swap_limit);
  sum->memory.working_set += s->memory.working_set;
  sum->memory.anon += s->memory.anon;
  sum->memory.file += s->memory.file;
  sum->memory.inactive_file += s->memory.inactive_file;
  sum->memory.page_faults += s->memory.page_faults;
  sum->memory.major_page_faults += s->memory.major_page_faults;
}

void
cri_stats_add (struct husk_cgroup_stats *sum, const struct husk_cgroup_stats *s)
{
  if (s->timestamp_ns > sum->timestamp_ns)
    sum->timestamp_ns = s->timestamp_ns;
  if (s->has_cpu)
    {
      sum->has_cpu = true;
      sum->cpu.usage_usec += s->cpu.usage_usec;
      sum->cpu.user_usec += s->cpu.user_usec;
      sum->cpu.system_usec += s->cpu.system_usec;
    }
  if (s->has_memory)
    add_memory (sum, s);
  if (s->has_pids)
    {
      sum->has_pids = true;
      sum->pids.current += s->pids.current;
    }
}

/* ------------------------------------------------------------------ */
/* cpu rate                                                             */

bool
cri_stats_nano_cores (uint64_t prev_usage_ns, uint64_t prev_ts_ns, uint64_t cur_usage_ns, uint64_t cur_ts_ns,
                      uint64_t *nano_cores)
{
  if (cur_ts_ns <= prev_ts_ns || cur_usage_ns < prev_usage_ns)
    return false;
  /* 128 bits: a few seconds of CPU times 1e9 overflows 64. */
  *nano_cores = (uint64_t) ((unsigned __int128) (cur_usage_ns - prev_usage_ns) * NSEC_PER_SEC
                            / (cur_ts_ns - prev_ts_ns));
  return true;
}

static struct cri_cpu_sample *
find_sample (struct cri_cpu_cache *cache, char kind, const char *id)
{
  for (size_t i = 0; i < cache->n; i++)
    if (cache->samples[i].kind == kind && strcmp (cache->samples[i].id, id) == 0)
      return &cache->samples[i];
  return NULL;
}

static void
drop_sample (struct cri_cpu_cache *cache, size_t i)
{
  free (cache->samples[i].id);
  cache->samples[i] = cache->samples[--cache->n];
}

static struct cri_cpu_sample *
new_sample (struct cri_cpu_cache *cache, char kind, const char *id)
{
  if (cache->n > 0 && cache->n >= cache->max)
    {
      size_t oldest = 0;
      for (size_t i = 1; i < cache->n; i++)
        if (cache->samples[i].timestamp_ns < cache->samples[oldest].timestamp_ns)
          oldest = i;
      drop_sample (cache, oldest);
    }
  cache->samples = xrealloc (cache->samples, (cache->n + 1) * sizeof *cache->samples);
  cache->samples[cache->n] = (struct cri_cpu_sample){ .kind = kind, .id = xstrdup (id) };
  return &cache->samples[cache->n++];
}

bool
cri_cpu_cache_rate (struct cri_cpu_cache *cache, char kind, const char *id, uint64_t usage_ns,
                    uint64_t timestamp_ns, uint64_t *nano_cores)
{
  struct cri_cpu_sample *prev;
  bool has_rate = false;

  pthread_mutex_lock (&cache->lock);
  prev = find_sample (cache, kind, id);
  if (prev == NULL)
    prev = new_sample (cache, kind, id);
  else if (timestamp_ns <= prev->timestamp_ns)
    prev = NULL;
  else
    has_rate = cri_stats_nano_cores (prev->usage_ns, prev->timestamp_ns, usage_ns, timestamp_ns, nano_cores);
  if (prev)
    {
      prev->usage_ns = usage_ns;
      prev->timestamp_ns = timestamp_ns;
    }
  pthread_mutex_unlock (&cache->lock);
  return has_rate;
}

/* LIVE_IDS sorted first: a list RPC prunes hundreds of samples. */
void
cri_cpu_cache_prune (struct cri_cpu_cache *cache, char kind, char *const *live_ids, size_t n)
{
  char **sorted = husk_strv_sorted_copy (live_ids, n);

  pthread_mutex_lock (&cache->lock);
  for (size_t i = cache->n; i > 0; i--)
    if (cache->samples[i - 1].kind == kind
        && !husk_sorted_strv_contains (sorted, n, cache->samples[i - 1].id))
      drop_sample (cache, i - 1);
  pthread_mutex_unlock (&cache->lock);
  free (sorted);
}

void
cri_cpu_cache_clear (struct cri_cpu_cache *cache)
{
  pthread_mutex_lock (&cache->lock);
  while (cache->n > 0)
    drop_sample (cache, cache->n - 1);
  free (cache->samples);
  cache->samples = NULL;
  pthread_mutex_unlock (&cache->lock);
}

/* ------------------------------------------------------------------ */
/* /proc/net/dev                                                        */

/* "  eth0: rx_bytes packets errs drop fifo frame compressed multicast
 *  tx_bytes packets errs drop fifo colls carrier compressed" */
static int
parse_net_dev_line (char *line, struct cri_net_dev *dev, struct husk_error **err)
{
  char *colon = strchr (line, ':');
  char *name = line;
  uint64_t v[16];

  if (colon == NULL)
    return husk_error_kind (err, EINVAL, "/proc/net/dev line `%s`: no interface name", line);
  *colon = '\0';
  while (*name == ' ')
    name++;
  if (*name == '\0' || strlen (name) >= sizeof dev->name)
    return husk_error_kind (err, EINVAL, "/proc/net/dev: bad interface name `%s`", name);
  if (sscanf (colon + 1,
              "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
              " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64,
              &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &v[12],
              &v[13], &v[14], &v[15])
      != 16)
    return husk_error_kind (err, EINVAL, "/proc/net/dev: interface `%s`: expected 16 counters", name);
  memset (dev, 0, sizeof *dev);
  strcpy (dev->name, name);
  dev->rx_bytes = v[0];
  dev->rx_errors = v[2];
  dev->tx_bytes = v[8];
  dev->tx_errors = v[10];
  return 0;
}

int
cri_stats_parse_net_dev (const char *text, struct cri_net_dev **devs, size_t *n, struct husk_error **err)
{
  cleanup_free char *copy = xstrdup (text);
  cleanup_free struct cri_net_dev *list = NULL;
  size_t count = 0, line_no = 0;
  char *line, *save = NULL;

  for (line = strtok_r (copy, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      /* Two header lines name the columns. */
      if (++line_no <= 2)
        continue;
      list = xrealloc (list, (count + 1) * sizeof *list);
      if (parse_net_dev_line (line, &list[count], err) < 0)
        return -1;
      count++;
    }
  *devs = steal_pointer (&list);
  *n = count;
  return 0;
}

static Runtime__V1__NetworkInterfaceUsage *
interface_usage (struct cri_arena *arena, const struct cri_net_dev *dev)
{
  Runtime__V1__NetworkInterfaceUsage *usage = cri_arena_alloc (arena, sizeof *usage);
  char *name = cri_arena_alloc (arena, sizeof dev->name);

  runtime__v1__network_interface_usage__init (usage);
  memcpy (name, dev->name, sizeof dev->name);
  usage->name = name;
  usage->rx_bytes = cri_stats_u64 (arena, dev->rx_bytes);
  usage->rx_errors = cri_stats_u64 (arena, dev->rx_errors);
  usage->tx_bytes = cri_stats_u64 (arena, dev->tx_bytes);
  usage->tx_errors = cri_stats_u64 (arena, dev->tx_errors);
  return usage;
}

Runtime__V1__NetworkUsage *
cri_stats_network (struct cri_arena *arena, const struct cri_net_dev *devs, size_t n, int64_t timestamp)
{
  Runtime__V1__NetworkUsage *net = cri_arena_alloc (arena, sizeof *net);

  runtime__v1__network_usage__init (net);
  net->timestamp = timestamp;
  net->interfaces = cri_arena_alloc (arena, (n + 1) * sizeof *net->interfaces);
  for (size_t i = 0; i < n; i++)
    {
      if (strcmp (devs[i].name, "lo") == 0)
        continue;
      if (strcmp (devs[i].name, "eth0") == 0)
        net->default_interface = interface_usage (arena, &devs[i]);
      else
        net->interfaces[net->n_interfaces++] = interface_usage (arena, &devs[i]);
    }
  return net;
}

/* ------------------------------------------------------------------ */
/* writable layer                                                       */

/* nftw's callback takes no argument: the walk in progress on this thread. */
struct dir_walk
{
  struct cri_dir_usage usage;
  void *seen_links; /* tsearch tree of the (dev, ino) of files with several links */
};
static __thread struct dir_walk *current_walk;

struct file_key
{
  dev_t dev;
  ino_t ino;
};

static int
compare_file_keys (const void *a, const void *b)
{
  const struct file_key *x = a, *y = b;

  if (x->dev != y->dev)
    return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino)
    return x->ino < y->ino ? -1 : 1;
  return 0;
}

/* True the first time a file with several links is met. */
static bool
first_link (struct dir_walk *walk, const struct stat *st)
{
  struct file_key *key = xmalloc (sizeof *key);
  struct file_key **found;

  key->dev = st->st_dev;
  key->ino = st->st_ino;
  found = tsearch (key, &walk->seen_links, compare_file_keys);
  if (*found != key)
    {
      free (key);
      return false;
    }
  return true;
}

static int
count_entry (const char *path, const struct stat *st, int type, struct FTW *ftw)
{
  struct dir_walk *walk = current_walk;

  (void) path;
  (void) ftw;
  if (type == FTW_NS)
    return 0; /* gone since its directory was read */
  if (!S_ISDIR (st->st_mode) && st->st_nlink > 1 && !first_link (walk, st))
    return 0;
  walk->usage.inodes++;
  walk->usage.bytes += (uint64_t) st->st_blocks * 512;
  return 0;
}

int
cri_stats_dir_usage (const char *dir, struct cri_dir_usage *out, struct husk_error **err)
{
  struct dir_walk walk = { 0 };
  int ret;

  current_walk = &walk;
  ret = nftw (dir, count_entry, 32, FTW_PHYS | FTW_MOUNT);
  current_walk = NULL;
  tdestroy (walk.seen_links, free);
  if (ret < 0)
    return husk_error_make (err, errno, "disk usage of `%s`", dir);
  *out = walk.usage;
  return 0;
}
