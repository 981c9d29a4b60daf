/* The container operations that touch only a container's cgroup, found
 * through its state: pause, resume, `husk update`, stats.  They sit above
 * runtime/cgroup/, which knows cgroups and no container state. */
#include <stdlib.h>
#include <string.h>

#include "husk/cgroup_stats.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/container_cgroup.h"
#include "runtime/state.h"

/* The state of a container that must be live and have a cgroup. */
static int
load_live (const struct runtime_ctx *ctx, const char *id, const char *what, struct container_state **out,
           enum container_status *status, struct husk_error **err)
{
  struct container_state *state = NULL;

  if (state_load (ctx->root, id, &state, err) < 0)
    return -1;
  *status = state_status (state);
  if (*status == STATUS_STOPPED)
    {
      state_free (state);
      return husk_error_make (err, 0, "cannot %s: container `%s` is not running", what, id);
    }
  if (!cgroup_exists (state->cgroup_path))
    {
      state_free (state);
      return husk_error_make (err, 0, "cannot %s container `%s`: it has no cgroup", what, id);
    }
  *out = state;
  return 0;
}

static int
change_freeze (const struct runtime_ctx *ctx, const char *id, bool frozen, struct husk_error **err)
{
  const char *what = frozen ? "pause" : "resume";
  struct container_state *state = NULL;
  enum container_status status;
  int ret;

  if (load_live (ctx, id, what, &state, &status, err) < 0)
    return -1;
  if (frozen && status != STATUS_RUNNING && status != STATUS_CREATED)
    ret = husk_error_make (err, 0, "cannot pause container `%s`: it is %s", id,
                           container_status_name (status));
  else if (!frozen && status != STATUS_PAUSED)
    ret = husk_error_make (err, 0, "cannot resume container `%s`: it is %s, not paused", id,
                           container_status_name (status));
  else if ((ret = cgroup_freeze (state->cgroup_path, frozen, err)) < 0)
    husk_error_wrap (err, "%s container `%s`", what, id);
  state_free (state);
  return ret;
}

int
cgroup_container_pause (const struct runtime_ctx *ctx, const char *id, struct husk_error **err)
{
  return change_freeze (ctx, id, true, err);
}

int
cgroup_container_resume (const struct runtime_ctx *ctx, const char *id, struct husk_error **err)
{
  return change_freeze (ctx, id, false, err);
}

int
cgroup_container_path (const struct runtime_ctx *ctx, const char *id, const char *what, char **path,
                       struct husk_error **err)
{
  struct container_state *state = NULL;
  enum container_status status;

  if (load_live (ctx, id, what, &state, &status, err) < 0)
    return -1;
  *path = steal_pointer (&state->cgroup_path);
  state_free (state);
  return 0;
}

int
cgroup_container_update (const struct runtime_ctx *ctx, const char *id, const struct cgroup_resources *res,
                         struct husk_error **err)
{
  cleanup_free char *path = NULL;

  if (cgroup_container_path (ctx, id, "update", &path, err) < 0)
    return -1;
  if (cgroup_resources_write (path, res, err) < 0)
    return husk_error_wrap (err, "update container `%s`", id);
  return 0;
}

int
husk_container_stats (const char *state_root, const char *id, struct husk_cgroup_stats *out,
                      struct husk_error **err)
{
  struct container_state *state = NULL;
  int ret;

  memset (out, 0, sizeof *out);
  if (state_load (state_root, id, &state, err) < 0)
    return -1;
  if (state_status (state) == STATUS_STOPPED)
    ret = husk_error_make (err, 0, "stats: container `%s` is not running", id);
  else if (state->cgroup_path == NULL)
    ret = husk_error_make (err, 0, "stats of container `%s`: it has no cgroup", id);
  else if ((ret = husk_cgroup_stats_read (state->cgroup_path, out, err)) < 0)
    husk_error_wrap (err, "stats of container `%s`", id);
  state_free (state);
  return ret;
}
