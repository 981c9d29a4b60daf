/* `husk container VERB` and the plugin's entry point. */
#ifndef HUSK_CRI_CLI_H
#define HUSK_CRI_CLI_H

#include "cri/containers.h"
#include "husk/error.h"
#include "image/cli/image_cli.h"

struct container_cli_env
{
  struct image_cli_env image;
  struct containers_ctx containers;
};

int container_cli_main (int argc, char **argv, const char *runtime_root, struct husk_error **err);
/* husk cdi generate|list (cdi_cli.c). */
int cdi_cli_main (int argc, char **argv, struct husk_error **err);

int container_cli_exec (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err);
/* husk cdi-hook VERB ... (cdi_hook_cli.c) */
int cdi_hook_cli_main (int argc, char **argv, struct husk_error **err);

#endif
