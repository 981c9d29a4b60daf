/* ExecSync for the husk handler from huskd itself (exec_sync.c): the
 * container's exec plan kept warm, the process forked with what `husk
 * exec` applies.  runc, crun and any other handler keep `RUNTIME exec`. */
#ifndef HUSK_CRI_EXEC_SYNC_H
#define HUSK_CRI_EXEC_SYNC_H

#include <stdbool.h>
#include <stddef.h>

#include "cri/config/config.h"
#include "cri/config/runtime_exec.h"
#include "husk/error.h"

/* Runs CMD in container ID of RT as cri_child_run does (RUN's timeout,
 * output_max and pid_file, written once the process exists; its output
 * and wait status filled in).  0 done, -1 failed
 * to start (E2BIG naming the argument, a container that is not running),
 * 1 when this container needs `husk exec` (a time namespace). */
int cri_exec_sync_in_process (const struct huskd_runtime *rt, const char *id, const char *const *cmd,
                              size_t n_cmd, struct cri_child_run *run, struct husk_error **err);

#endif
