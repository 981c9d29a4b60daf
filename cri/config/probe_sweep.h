/* Before huskd's start-up probe: removes what an earlier huskd killed
 * during its own probe left (see probe_sweep.c). */
#ifndef HUSK_CRI_PROBE_SWEEP_H
#define HUSK_CRI_PROBE_SWEEP_H

#include "cri/config/config.h"

/* Trial containers are husk-probe-PID, their cgroups
 * /husk-probe-PID-HANDLER in every hierarchy. */
#define CRI_PROBE_PREFIX "husk-probe-"

/* RT's own dir under the probe dir. */
static inline const char *
cri_probe_dir_name (const struct huskd_runtime *rt)
{
  return rt->name[0] ? rt->name : "default";
}

/* Under PROBE_DIR (STATE/probe): SIGKILLs the runtime commands that name
 * it, `delete --force`s each handler's trial containers with that
 * handler's binary and flags, removes the probe cgroups of every huskd
 * that is gone (killing what they hold) in every hierarchy, then
 * PROBE_DIR itself.  Logs one line when it found anything. */
void cri_probe_sweep (const struct huskd_config *cfg, const char *probe_dir);

#endif
