/* Exec plans of husk containers kept warm (exec_plans.c): what huskd's
 * ExecSync, or its exec helper, forks a container's process from. */
#ifndef HUSK_CRI_EXEC_PLANS_H
#define HUSK_CRI_EXEC_PLANS_H

#include <stdbool.h>
#include <sys/types.h>

#include "husk/error.h"

struct plan_entry;

/* The current plan of container ID under the runtime root ROOT, loaded if
 * need be, referenced until cri_exec_plan_release. */
struct plan_entry *cri_exec_plan_get (const char *root, const char *id, struct husk_error **err);
void cri_exec_plan_release (struct plan_entry *e);
/* False where only `husk exec` can join (a time namespace). */
bool cri_exec_plan_spawnable (const struct plan_entry *e);

/* Forks ARGS in the container with STDIO as fds 0-2 (container_exec_plan_spawn)
 * and writes its pid to PID_FILE (when not NULL), as `husk exec
 * --pid-file`; the caller reaps it. */
pid_t cri_exec_plan_spawn (const struct plan_entry *e, char *const *args, const int stdio[3],
                           const char *pid_file, struct husk_error **err);

#endif
