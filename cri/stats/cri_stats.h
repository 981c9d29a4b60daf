/* The parts of the stats RPCs that need no store and no gRPC: a husk
 * cgroup sample turned into CRI CpuUsage/MemoryUsage/SwapUsage, the CPU
 * rate from two samples, /proc/net/dev parsing and the disk usage of a
 * writable layer.  Unit-tested in test/unit/test_cri_stats.c. */
#ifndef HUSK_CRI_CRI_STATS_H
#define HUSK_CRI_CRI_STATS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cri/proto/api.pb-c.h"
#include "husk/cgroup_stats.h"
#include "husk/error.h"

/* Every block a reply is built from, freed together once it is packed:
 * the messages borrow strings and maps from the records they describe. */
struct cri_arena
{
  void **blocks;
  size_t n, cap;
  char *chunk; /* the blocks' latest chunk, LEFT bytes of it unused */
  size_t left;
};

/* SIZE zeroed bytes owned by ARENA. */
void *cri_arena_alloc (struct cri_arena *arena, size_t size);
/* BLOCK (malloc'd) is ARENA's from now on; returns it. */
void *cri_arena_adopt (struct cri_arena *arena, void *block);
void cri_arena_clear (struct cri_arena *arena);

/* The calling thread (the samplers that keep what the list RPCs answer
 * from) yields to the RPCs' threads and to the probes when the CPUs are
 * busy: its nice value becomes CRI_STATS_BACKGROUND_NICE, when lower. */
#define CRI_STATS_BACKGROUND_NICE 10
void cri_stats_background_thread (void);

Runtime__V1__UInt64Value *cri_stats_u64 (struct cri_arena *arena, uint64_t value);

/* CpuUsage of S (NULL without cpu.stat); NANO_CORES, when not NULL, is
 * the rate since the previous sample. */
Runtime__V1__CpuUsage *cri_stats_cpu (struct cri_arena *arena, const struct husk_cgroup_stats *s,
                                      const uint64_t *nano_cores);
/* MemoryUsage of S, NULL without the memory controller.  available_bytes
 * only when there is a limit: limit - working set, 0 above it. */
Runtime__V1__MemoryUsage *cri_stats_memory (struct cri_arena *arena, const struct husk_cgroup_stats *s);
/* Without any memory controller: S's memory from its processes, the sum
 * of the resident set (PROC/PID/statm) of the N PIDS, as usage, working
 * set and rss, no limit.  Processes that are gone count nothing. */
void cri_stats_memory_from_pids (struct husk_cgroup_stats *s, const char *proc, const pid_t *pids, size_t n);

/* SwapUsage of S, NULL without the memory controller (the caller knows
 * whether the kernel has swap accounting). */
Runtime__V1__SwapUsage *cri_stats_swap (struct cri_arena *arena, const struct husk_cgroup_stats *s);

/* Adds S into SUM (a pod as the sum of its containers): counters add up,
 * a limit stays only while every part has one, has_* is any part's. */
void cri_stats_add (struct husk_cgroup_stats *sum, const struct husk_cgroup_stats *s);

/* ------------------------------------------------------------ cpu rate */

/* The last CPU sample per container or pod, to give usage_nano_cores. */
struct cri_cpu_sample
{
  char kind; /* 'c' container, 'p' pod */
  char *id;
  uint64_t usage_ns, timestamp_ns;
};

struct cri_cpu_cache
{
  pthread_mutex_t lock;
  struct cri_cpu_sample *samples;
  size_t n;
  size_t max; /* beyond it the oldest sample goes */
};

#define CRI_CPU_CACHE_INIT(max_samples)                                                                      \
  {                                                                                                          \
    PTHREAD_MUTEX_INITIALIZER, NULL, 0, max_samples                                                          \
  }

/* (CUR_USAGE - PREV_USAGE) per second of (CUR_TS - PREV_TS), all in ns;
 * false when the interval is not positive or the counter went back. */
bool cri_stats_nano_cores (uint64_t prev_usage_ns, uint64_t prev_ts_ns, uint64_t cur_usage_ns,
                           uint64_t cur_ts_ns, uint64_t *nano_cores);

/* Records the sample of KIND/ID and, when an older one was there, puts
 * the rate since it in *NANO_CORES and returns true.  A sample not newer
 * than the recorded one leaves the record alone. */
bool cri_cpu_cache_rate (struct cri_cpu_cache *cache, char kind, const char *id, uint64_t usage_ns,
                         uint64_t timestamp_ns, uint64_t *nano_cores);
/* Drops the samples of KIND whose id is not among the N LIVE_IDS. */
void cri_cpu_cache_prune (struct cri_cpu_cache *cache, char kind, char *const *live_ids, size_t n);
void cri_cpu_cache_clear (struct cri_cpu_cache *cache);

/* ------------------------------------------------------------- network */

struct cri_net_dev
{
  char name[32];
  uint64_t rx_bytes, rx_errors, tx_bytes, tx_errors;
};

/* Parses the text of /proc/net/dev.  *DEVS (malloc'd) gets one entry per
 * interface; a line that is not "name: 16 counters" is EINVAL naming it. */
int cri_stats_parse_net_dev (const char *text, struct cri_net_dev **devs, size_t *n, struct husk_error **err);

/* NetworkUsage of a pod: eth0 as default_interface, every other
 * interface but lo in interfaces (lo never leaves the pod). */
Runtime__V1__NetworkUsage *cri_stats_network (struct cri_arena *arena, const struct cri_net_dev *devs,
                                              size_t n, int64_t timestamp);

/* ------------------------------------------------------- writable layer */

struct cri_dir_usage
{
  uint64_t bytes;  /* allocated blocks, as du counts them; a hard link once */
  uint64_t inodes; /* every entry, the directory itself included */
};

/* Walks DIR without following symlinks or crossing mounts.  Entries that
 * vanish during the walk are skipped; a missing DIR is an error. */
int cri_stats_dir_usage (const char *dir, struct cri_dir_usage *out, struct husk_error **err);

#endif
