/* One sample of a container cgroup's usage (cgroup v2, or v1 mapped onto
 * the same fields): memory, cpu, pids, io, huge pages and OOM counts, as
 * `husk events --stats` prints it and as huskd reports ContainerStats and
 * PodSandboxStats.  Implemented in libhusk-runtime (runtime/cgroup_stats.c). */
#ifndef HUSK_CGROUP_STATS_H
#define HUSK_CGROUP_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "husk/error.h"

/* A limit of "max" (none). */
#define HUSK_CGROUP_UNLIMITED UINT64_MAX

struct husk_cgroup_io_stat
{
  uint32_t major, minor;
  uint64_t read_bytes, write_bytes, read_ios, write_ios, discard_bytes, discard_ios;
};

struct husk_cgroup_hugetlb_stat
{
  char page_size[16]; /* "2MB" */
  uint64_t usage, limit, max_events;
};

struct husk_cgroup_stats
{
  uint64_t timestamp_ns; /* CLOCK_REALTIME when the sample was taken */

  bool has_memory; /* the memory controller is enabled */
  bool has_swap;   /* the kernel accounts swap (v2 memory.swap.*, v1 memsw) */
  struct
  {
    uint64_t usage, limit, peak; /* peak: 0 where the kernel has no memory.peak */
    uint64_t swap_usage, swap_limit;
    uint64_t anon, file, kernel, sock, shmem, active_file, inactive_file;
    uint64_t page_faults, major_page_faults;
    /* usage minus inactive file pages: what kubelet evicts on */
    uint64_t working_set;
    /* memory.events; v1: failcnt is events_max, oom_control's oom_kill
     * both events_oom and events_oom_kill */
    uint64_t events_low, events_high, events_max, events_oom, events_oom_kill;
  } memory;

  bool has_cpu; /* cpu.stat exists in every cgroup; throttling needs the cpu controller */
  struct
  {
    uint64_t usage_usec, user_usec, system_usec;
    uint64_t nr_periods, nr_throttled, throttled_usec;
    uint64_t weight;     /* cpu.weight, 0 if absent */
    uint64_t quota_usec; /* cpu.max, HUSK_CGROUP_UNLIMITED for max */
    uint64_t period_usec;
  } cpu;

  bool has_pids;
  struct
  {
    uint64_t current, limit;
  } pids;

  struct husk_cgroup_io_stat *io; /* one per device in io.stat */
  size_t n_io;

  struct husk_cgroup_hugetlb_stat *hugetlb;
  size_t n_hugetlb;
};

/* Reads one sample from the cgroup directory PATH.  A missing controller
 * leaves its part out (has_* false); a missing directory is an error. */
int husk_cgroup_stats_read (const char *path, struct husk_cgroup_stats *out, struct husk_error **err);

/* The same for the container ID of the OCI runtime state under STATE_ROOT
 * (husk's --root, /run/husk/runtime by default). */
int husk_container_stats (const char *state_root, const char *id, struct husk_cgroup_stats *out,
                          struct husk_error **err);

void husk_cgroup_stats_clear (struct husk_cgroup_stats *stats);

/* {"type":"stats","id":ID,"data":{...}} on one line (newly allocated):
 * the document `husk events --stats` prints.  Limits of "max" are null. */
char *husk_cgroup_stats_json (const struct husk_cgroup_stats *stats, const char *id);

#endif
