/* Disk usage of the containers' writable layers, kept by a thread of its
 * own: each directory asked about is walked again every PERIOD seconds (as
 * containerd refreshes its snapshots' usage), so that a stats RPC reads a
 * number instead of walking a tree.  A directory is walked in the caller
 * only the first time it is asked about; one that is gone is forgotten. */
#ifndef HUSK_CRI_LAYER_USAGE_H
#define HUSK_CRI_LAYER_USAGE_H

#include <stdint.h>

#include "cri/stats/cri_stats.h"
#include "husk/error.h"

struct layer_usage;

/* Starts the refreshing thread. */
int layer_usage_new (unsigned period_s, struct layer_usage **out, struct husk_error **err);
/* Stops the thread and frees the cache; NULL is fine. */
void layer_usage_free (struct layer_usage *cache);

/* The latest reading of DIR and when it was taken (unix ns).  Missing DIR:
 * errnum ENOENT (and DIR is forgotten). */
int layer_usage_get (struct layer_usage *cache, const char *dir, struct cri_dir_usage *out, int64_t *taken_ns,
                     struct husk_error **err);
/* DIRS (N) walked by the thread now, not where first asked about: a
 * layer_usage_get of one before its walk is done waits for it (huskd's
 * start primes every container's upper dir). */
void layer_usage_prime (struct layer_usage *cache, char *const *dirs, size_t n);
/* Every directory walked again now, before the next period (for tests). */
void layer_usage_refresh (struct layer_usage *cache);

#endif
