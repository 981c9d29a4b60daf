/* What each configured runtime handler can do on this host, found when
 * huskd starts: its `features` (husk's own extensions, such as exec's
 * --console-size, are announced there) and a trial `create` of a tiny
 * container, so that a handler that cannot run here (crun 1.8.1 on a
 * hybrid cgroup host) is named with its reason, not discovered by a
 * failed container. */
#ifndef HUSK_CRI_RUNTIME_PROBE_H
#define HUSK_CRI_RUNTIME_PROBE_H

#include <stdbool.h>

#include "cri/config/config.h"
#include "husk/error.h"

/* Probes every runtime of CFG (under CFG->state/probe, removed after),
 * filling their console_size and unusable fields and logging the result:
 * one warning line per handler that cannot run. */
void cri_runtime_probe_all (struct huskd_config *cfg);

/* The same in a thread of its own, so that huskd serves meanwhile; _wait
 * blocks until it is done (at once when none was started), _join at exit. */
void cri_runtime_probe_start (struct huskd_config *cfg);
void cri_runtime_probe_wait (void);
bool cri_runtime_probe_done (void);
void cri_runtime_probe_join (void);

/* After cri_runtime_probe_wait: 0, or EAGAIN (FAILED_PRECONDITION) naming RT and why it cannot run here;
 * WHAT is the RPC ("CreateContainer"). */
int cri_runtime_usable (const struct huskd_runtime *rt, const char *what, struct husk_error **err);

#endif
