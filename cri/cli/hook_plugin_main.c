/* husk-hook's verbs: the `cdi-hook` group alone.  It links cri/cdi/hook.c,
 * the common library and jansson only, so a hook that runs at every
 * container create loads a handful of libraries instead of husk-image's
 * ~47 (see husk/plugin.h). */
#include <string.h>

#include "cri/cli/cli.h"
#include "husk/plugin.h"

int
husk_plugin_main (const char *group, int argc, char **argv, const char *runtime_root, char **self_argv)
{
  struct husk_error *err = NULL;
  int ret;

  (void) runtime_root;
  (void) self_argv;
  husk_log_set_prog ("husk");
  if (strcmp (group, "cdi-hook") == 0)
    ret = cdi_hook_cli_main (argc, argv, &err);
  else
    ret = husk_error_make (&err, 0, "unknown verb group `%s`", group);
  if (ret < 0)
    {
      husk_error_report (&err, "husk");
      return 1;
    }
  return ret;
}
