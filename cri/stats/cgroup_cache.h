/* The stats RPCs' cache of cgroups (cgroup_cache.c): each running
 * container's and pod's cgroup directory found once, with a reader that
 * keeps its files open, and each pod's net/dev descriptor; dropped when a
 * container or pod goes (cri_stats_forget_*) or at a list RPC's prune.
 * Thread-safe.  KIND: 'c' a container, 'p' a pod, 'n' a pod's net/dev. */
#ifndef HUSK_CRI_STATS_CGROUP_CACHE_H
#define HUSK_CRI_STATS_CGROUP_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "husk/cgroup_stats.h"
#include "husk/error.h"

/* KIND/ID's cgroup path (malloc'd), NULL when not cached; caching one. */
char *cached_cgroup (char kind, const char *id);
void cache_cgroup (char kind, const char *id, const char *path);
/* The KIND entries of KEEP stay, the others of KIND go. */
void prune_cgroups (char kind, char *const *keep, size_t n_keep);
/* KIND/ID's entry goes (its cgroup went). */
void forget_cgroup (char kind, const char *id);
/* KIND/ID's reader of PATH, lent out until reader_return. */
struct husk_cgroup_reader *reader_lend (char kind, const char *id, const char *path);
void reader_return (char kind, const char *id, struct husk_cgroup_reader *reader);
/* Pod ID's net/dev descriptor, lent out until net_fd_return; -1: none.
 * Returned, FD goes back into the pod's entry, or into a new one when
 * OPENED (it was just opened, not lent) and within the budget of
 * descriptors; else it is closed. */
int net_fd_lend (const char *id);
void net_fd_return (const char *id, int fd, bool opened);

struct cri_net_dev;

/* For ListPodSandboxStats: pod ID's interfaces as last read through its
 * kept descriptor, into *DEVS (malloc'd, *N of them) with the time they
 * were read (*TAKEN_NS, CLOCK_REALTIME), when at most MAX_AGE_NS old;
 * false when there is none that fresh (read it now, then keep it).  Marks
 * the entry as asked about: the sampler rereads its descriptor for a
 * minute, as it does the cgroups'. */
bool net_kept_sample (const char *id, int64_t max_age_ns, struct cri_net_dev **devs, size_t *n,
                      int64_t *taken_ns);
/* DEVS (N, read at TAKEN_NS realtime by a list RPC) kept for pod ID, when
 * its descriptor has an entry; marks it as asked about. */
void net_keep_sample (const char *id, const struct cri_net_dev *devs, size_t n, int64_t taken_ns);

/* A kept sample: STATS (usage fields; no io, no huge pages) and the CPU
 * rate since the sample kept before it, when there was one. */
struct cri_kept_sample
{
  struct husk_cgroup_stats stats;
  bool has_rate;
  uint64_t nano_cores;
};

/* For the list RPCs: KIND/ID's ('c' or 'p', cached with cache_cgroup)
 * sample of PATH, the kept one when it is at most MAX_AGE_NS old, else
 * one taken now (and kept, when its entry is).  Marks the entry as asked
 * about: the sampler keeps sampling it for a minute.  Fails (ENOENT)
 * when the cgroup is gone. */
int cached_sample (char kind, const char *id, const char *path, int64_t max_age_ns,
                   struct cri_kept_sample *out, struct husk_error **err);

/* The sampler: a thread that, every half PERIOD_MS (0: 1000), samples
 * again what the list RPCs asked about in the last minute and was sampled
 * more than a period ago (cgroups, and pods' net/dev through the kept
 * descriptors), so that a list reads kept samples instead of hundreds of
 * cgroup files and network namespaces.  Idempotent; stop joins it. */
int cri_stats_sampler_start (unsigned period_ms, struct husk_error **err);
void cri_stats_sampler_stop (void);
/* Its period while it runs, else 0. */
int64_t cri_stats_sampler_period_ns (void);

/* The container's cgroup as the stats RPCs found it, and the files they
 * keep open in it, forgotten (it is being deleted). */
void cri_stats_forget_container (const char *id);
/* The same for a pod that stops: its cgroup and its network namespace's
 * counters, kept open by the stats RPCs. */
void cri_stats_forget_pod (const char *id);

#endif
