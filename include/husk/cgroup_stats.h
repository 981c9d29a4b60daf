/* One sample of a container cgroup's usage (cgroup v2, or v1 mapped onto
 * the same fields): memory, cpu, pids, io, huge pages and OOM counts, as
 * `husk events --stats` prints it and as huskd reports ContainerStats and
 * PodSandboxStats.  Implemented in libhusk-runtime (runtime/cgroup/cgroup_stats.c). */
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

/* The files a sample reads.  USAGE (always read): memory usage, limit,
 * swap and memory.stat (anon, file, inactive_file, faults, working set),
 * cpu usage (v2 cpu.stat's user and system too), pids.current: what the
 * CRI stats RPCs report, 5 to 7 files per cgroup.  DETAIL: the rest
 * (peak, kernel memory, memory events, v1 user/system time, throttling,
 * weight, quota, pids limit, io, huge pages), 27 files on a v1 host.  A
 * field left out stays 0 (limits too); one read is the same either way. */
#define HUSK_CGROUP_STATS_USAGE 0x1u
#define HUSK_CGROUP_STATS_DETAIL 0x2u
#define HUSK_CGROUP_STATS_ALL (HUSK_CGROUP_STATS_USAGE | HUSK_CGROUP_STATS_DETAIL)

/* husk_cgroup_stats_read of the FIELDS files only. */
int husk_cgroup_stats_read_fields (const char *path, unsigned fields, struct husk_cgroup_stats *out,
                                   struct husk_error **err);

/* A reader of one cgroup for repeated samples: each controller's directory
 * is located once, and with KEEP_OPEN every file it reads stays open and
 * is read again from offset 0 (cgroupfs regenerates it), one pread a file
 * instead of open, read and close.  Each open file pins the cgroup's
 * kernel object until the reader is freed: free it when the cgroup goes
 * (a sample of a removed cgroup fails with ENOENT). */
struct husk_cgroup_reader;

struct husk_cgroup_reader *husk_cgroup_reader_new (const char *path, unsigned fields, bool keep_open);
/* Every controller's files in DIR itself, as the v1 (V1) or the v2
 * hierarchy names them: the readers on plain files, for tests. */
struct husk_cgroup_reader *husk_cgroup_reader_new_flat (const char *dir, bool v1, unsigned fields,
                                                        bool keep_open);
/* As husk_cgroup_stats_read: a missing directory is an error (ENOENT). */
int husk_cgroup_reader_sample (struct husk_cgroup_reader *reader, struct husk_cgroup_stats *out,
                               struct husk_error **err);
/* The descriptors the reader holds open. */
size_t husk_cgroup_reader_open_files (const struct husk_cgroup_reader *reader);
/* NULL is fine. */
void husk_cgroup_reader_free (struct husk_cgroup_reader *reader);

/* The same for the container ID of the OCI runtime state under STATE_ROOT
 * (husk's --root, /run/husk/runtime by default). */
int husk_container_stats (const char *state_root, const char *id, struct husk_cgroup_stats *out,
                          struct husk_error **err);

void husk_cgroup_stats_clear (struct husk_cgroup_stats *stats);

/* {"type":"stats","id":ID,"data":{...}} on one line (newly allocated):
 * the document `husk events --stats` prints.  Limits of "max" are null. */
char *husk_cgroup_stats_json (const struct husk_cgroup_stats *stats, const char *id);

#endif
