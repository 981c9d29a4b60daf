/* The stats RPCs' cache of cgroups (cgroup_cache.c): each running
 * container's and pod's cgroup directory found once, with a reader that
 * keeps its files open, and each pod's net/dev descriptor; dropped when a
 * container or pod goes (cri_stats_forget_*) or at a list RPC's prune.
 * Thread-safe.  KIND: 'c' a container, 'p' a pod, 'n' a pod's net/dev. */
#ifndef HUSK_CRI_STATS_CGROUP_CACHE_H
#define HUSK_CRI_STATS_CGROUP_CACHE_H

#include <stddef.h>

#include "husk/cgroup_stats.h"

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
/* Pod ID's net/dev descriptor, lent out until net_fd_return; -1: none. */
int net_fd_lend (const char *id);
void net_fd_return (const char *id, int fd);

/* The container's cgroup as the stats RPCs found it, and the files they
 * keep open in it, forgotten (it is being deleted). */
void cri_stats_forget_container (const char *id);
/* The same for a pod that stops: its cgroup and its network namespace's
 * counters, kept open by the stats RPCs. */
void cri_stats_forget_pod (const char *id);

#endif
