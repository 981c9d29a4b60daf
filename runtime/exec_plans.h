/* Exec plans kept warm per container (exec_plans.c): what huskd's
 * ExecSync, or `husk exec-helper` for it, forks a container's process from.
 * Safe from any thread. */
#ifndef HUSK_RUNTIME_EXEC_PLANS_H
#define HUSK_RUNTIME_EXEC_PLANS_H

#include <stdbool.h>
#include <sys/types.h>

#include "husk/error.h"

struct exec_plan_ref;

/* The current plan of container ID under the runtime root ROOT, loaded if
 * need be, referenced until exec_plans_release. */
struct exec_plan_ref *exec_plans_get (const char *root, const char *id, struct husk_error **err);
void exec_plans_release (struct exec_plan_ref *e);
/* False where only `husk exec` can join (a time namespace). */
bool exec_plans_spawnable (const struct exec_plan_ref *e);

/* Forks ARGS in the container with STDIO as fds 0-2 (container_exec_plan_spawn)
 * and writes its pid to PID_FILE (when not NULL), as `husk exec
 * --pid-file`; the caller reaps it. */
pid_t exec_plans_spawn (const struct exec_plan_ref *e, char *const *args, const int stdio[3],
                        const char *pid_file, struct husk_error **err);

#endif
