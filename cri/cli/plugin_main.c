/* husk-image's verbs: the `image`, `container` and `cdi` groups
 * (`cdi-hook` is husk-hook's: cri/cli/hook_plugin_main.c). */
#include <errno.h>
#include <string.h>

#include "cri/cli/cli.h"
#include "cri/cli/cli_fmt.h"
#include "cri/container/containers.h"
#include "husk/plugin.h"
#include "husk/util.h"
#include "image/cli/image_cli.h"
#include "runtime/container.h"

/* `husk image rm` asks the containers made from an image (image/ knows
 * none). */
static char **
image_users (const char *root, const char *image_id, struct husk_error **err)
{
  struct containers_ctx ctx = { .image_root = root };
  struct container_record **recs = NULL;
  char **ids = xcalloc (1, sizeof (char *));
  size_t n = 0;

  if (containers_list (&ctx, &recs, &n, err) < 0)
    {
      free (ids);
      return NULL;
    }
  for (size_t i = 0; i < n; i++)
    if (recs[i]->image_id && strcmp (recs[i]->image_id, image_id) == 0)
      ids = husk_strv_append (ids, recs[i]->id);
  container_records_free (recs, n);
  return ids;
}

static const char *plugin_runtime_root;

static int
remove_image_user (const char *root, const char *container_id, struct husk_error **err)
{
  struct containers_ctx ctx = { .image_root = root, .runtime_root = plugin_runtime_root };

  return containers_remove (&ctx, container_id, true, err);
}

static const struct image_cli_users users = { image_users, remove_image_user };

/* podman rmi's: 1 no such image, 2 in use by a container. */
static int
image_exit_code (const struct husk_error *err)
{
  if (err && err->errnum == EBUSY)
    return 2;
  if (err && err->errnum == ENOENT)
    return 1;
  return CLI_EXIT_ERROR;
}

int
husk_plugin_main (const char *group, int argc, char **argv, const char *runtime_root, char **self_argv)
{
  struct husk_error *err = NULL;
  int ret, code;

  husk_log_set_prog ("husk");
  plugin_runtime_root = runtime_root;
  if (strcmp (group, "container") == 0 && container_ensure_cloned_binary (self_argv, &err) < 0)
    ret = -1;
  else if (strcmp (group, "image") == 0)
    ret = image_cli_main (argc, argv, &users, &err);
  else if (strcmp (group, "container") == 0)
    ret = container_cli_main (argc, argv, runtime_root, &err);
  else if (strcmp (group, "cdi") == 0)
    ret = cdi_cli_main (argc, argv, &err);
  else
    ret = husk_error_make (&err, 0, "unknown verb group `%s`", group);
  if (ret >= 0)
    return ret;
  /* cdi keeps its 1 (a tool's failure, not a container's). */
  if (strcmp (group, "cdi") == 0)
    code = 1;
  else
    code = strcmp (group, "image") == 0 ? image_exit_code (err) : cli_exit_code (err);
  husk_error_report (&err, "husk");
  return code;
}
