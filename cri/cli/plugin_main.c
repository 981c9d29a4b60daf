/* husk-image.so's entry point: the `image`, `container` and `cdi` verb
 * groups (`cdi-hook` is husk-hook.so's: cri/cli/hook_plugin_main.c). */
#include <string.h>

#include "cri/cli/cli.h"
#include "husk/plugin.h"
#include "image/cli/image_cli.h"

int
husk_plugin_main (const char *group, int argc, char **argv, const char *runtime_root)
{
  struct husk_error *err = NULL;
  int ret;

  husk_log_set_prog ("husk");
  if (strcmp (group, "image") == 0)
    ret = image_cli_main (argc, argv, &err);
  else if (strcmp (group, "container") == 0)
    ret = container_cli_main (argc, argv, runtime_root, &err);
  else if (strcmp (group, "cdi") == 0)
    ret = cdi_cli_main (argc, argv, &err);
  else
    ret = husk_error_make (&err, 0, "unknown verb group `%s`", group);
  if (ret < 0)
    {
      husk_error_report (&err, "husk");
      return 1;
    }
  return ret;
}
