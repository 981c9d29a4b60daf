/* The part of a cgroup's usage the CRI stats RPCs report (cpu usage,
 * memory, swap, pids), read from the fewest files: 5 to 7 per cgroup where
 * husk_cgroup_stats_read (include/husk/cgroup_stats.h), which also reads
 * io, huge pages, throttling and memory events for `husk events --stats`
 * and the metrics RPC, opens 27 on a v1 host.  The fields it fills are
 * filled the same way; the others stay 0. */
#ifndef HUSK_CRI_CGROUP_SAMPLE_H
#define HUSK_CRI_CGROUP_SAMPLE_H

#include "husk/cgroup_stats.h"
#include "husk/error.h"

/* A missing cgroup directory is an error (errnum ENOENT). */
int cri_cgroup_sample (const char *path, struct husk_cgroup_stats *out, struct husk_error **err);

#endif
