/* The container's cgroup v2 directory: found on the unified hierarchy,
 * created before clone, removed on delete.  Resource limits arrive with the
 * cgroup manager; until then a requested limit whose controller is missing
 * is a clear error, never a silent no-op. */
#ifndef HUSK_RUNTIME_CGROUP_H
#define HUSK_RUNTIME_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "husk/error.h"
#include "runtime/spec.h"

/* Mount point of the unified (v2) hierarchy: /sys/fs/cgroup, or
 * /sys/fs/cgroup/unified on hybrid hosts; NULL if there is none. */
const char *cgroup_unified_mount (void);

/* Maps linux.cgroupsPath to an absolute directory in the cgroup fs:
 * "/a/b" -> MOUNT/a/b; "a/b" -> under the runtime's own cgroup;
 * "slice:prefix:name" (systemd form) -> MOUNT/slice/prefix-name.scope;
 * NULL -> MOUNT/husk/ID. */
int cgroup_resolve (const char *cgroups_path, const char *id, bool systemd, char **out,
                    struct husk_error **err);

/* Creates the directory (and parents); returns an O_DIRECTORY fd for
 * clone3(CLONE_INTO_CGROUP).  Errors name the path. */
int cgroup_create (const char *path, struct husk_error **err);

/* Refuses limits that cannot be applied yet (names the controller). */
int cgroup_check_resources (const struct spec *spec, const char *path, struct husk_error **err);

int cgroup_enter (const char *path, pid_t pid, struct husk_error **err);
/* Every pid in the cgroup (cgroup.procs). */
int cgroup_pids (const char *path, pid_t **pids, size_t *n, struct husk_error **err);
/* Signals every process; SIGKILL uses cgroup.kill where the kernel has it. */
int cgroup_kill_all (const char *path, int sig, struct husk_error **err);
/* rmdir, waiting briefly for exiting processes; a missing dir is fine. */
int cgroup_destroy (const char *path, struct husk_error **err);

#endif
