/* A container's cgroup by the container's id (container_cgroup.c): the
 * operations that need its state first.  husk_container_stats, the same
 * for stats, is declared in husk/cgroup_stats.h. */
#ifndef HUSK_RUNTIME_CONTAINER_CGROUP_H
#define HUSK_RUNTIME_CONTAINER_CGROUP_H

#include "husk/error.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/container.h"

/* Container operations on a container's cgroup (state looked up in
 * CTX->root): pause needs a running or created container, resume a paused
 * one.  A missing container is `container "ID" does not exist`. */
int cgroup_container_pause (const struct runtime_ctx *ctx, const char *id, struct husk_error **err);
int cgroup_container_resume (const struct runtime_ctx *ctx, const char *id, struct husk_error **err);
/* The cgroup path of an existing, not stopped container (newly allocated);
 * WHAT names the operation in errors ("update"). */
int cgroup_container_path (const struct runtime_ctx *ctx, const char *id, const char *what, char **path,
                           struct husk_error **err);

/* `husk update`: writes RES into an existing container's cgroup. */
int cgroup_container_update (const struct runtime_ctx *ctx, const char *id,
                             const struct cgroup_resources *res, struct husk_error **err);

#endif
