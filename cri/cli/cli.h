/* `husk container VERB` and the plugin's entry point. */
#ifndef HUSK_CRI_CLI_H
#define HUSK_CRI_CLI_H

#include <getopt.h>
#include <sys/types.h>

#include "cri/container/containers.h"
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

/* A verb's options for cli_getopt: SHORTOPTS as getopt's (without the
 * leading "+:" and "h"), LONGOPTS ending with a zero entry and holding
 * { "help", no_argument, NULL, 'h' }. */
struct cli_verb
{
  const char *name;
  const char *usage;
  const char *shortopts;
  const struct option *longopts;
};

enum
{
  CLI_ERROR = -2, /* *ERR says what was wrong */
  CLI_HELP = -3,  /* the usage went to stdout: exit 0 */
  CLI_UNKNOWN_VERB = -4,
};

/* The next option's value (optarg set), -1 after the last, or CLI_ERROR
 * or CLI_HELP.  Set optind = 1 before the first call. */
int cli_getopt (const struct cli_verb *verb, int argc, char **argv, struct husk_error **err);

/* The output container ID's monitor logs from byte OFFSET of its log on,
 * to our stdout and stderr, until it exits (start -a). */
int container_cli_follow_log (const struct container_cli_env *env, const char *id, off_t offset,
                              struct husk_error **err);

/* The verbs of cli_logs.c, cli_info.c. */
int container_cli_logs (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err);
int container_cli_inspect (const struct container_cli_env *env, int argc, char **argv,
                           struct husk_error **err);
int container_cli_stats (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err);
int container_cli_top (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err);

/* container_ls.c: ls (ps) and port */
int container_cli_ls (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err);
int container_cli_port (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err);
/* container_cp.c */
int container_cli_cp (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err);
/* container_life.c: start, restart, attach, kill, wait, stop, rm, prune;
 * CLI_UNKNOWN_VERB when VERB is none of them. */
int container_cli_life (const struct container_cli_env *env, const char *verb, int argc, char **argv,
                        struct husk_error **err);

int container_cli_exec (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err);
/* husk cdi-hook VERB ... (cdi_hook_cli.c) */
int cdi_hook_cli_main (int argc, char **argv, struct husk_error **err);

#endif
