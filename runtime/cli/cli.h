/* The husk command line: global options and one handler per command. */
#ifndef HUSK_CLI_H
#define HUSK_CLI_H

#include <stdbool.h>

#include "husk/cli_opts.h"
#include "husk/error.h"
#include "runtime/container.h"

struct cli_globals
{
  struct runtime_ctx ctx;
  const char *log_file;
  bool log_json;
  bool debug;
};

typedef int (*cli_handler) (struct cli_globals *g, int argc, char **argv, struct husk_error **err);

struct cli_command
{
  const char *name;
  cli_handler handler;
  const char *usage;   /* "create [options] ID" */
  const char *summary; /* one line */
  /* For --help (husk/cli_opts.h): the operands, and the options the
   * command's parser takes; args NULL: print the usage line only. */
  const char *args;
  const struct cli_opt *opts;
};

/* Each returns the process exit code on success, -1 with *err set. */
int cli_create (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_run (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_start (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_state (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_kill (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_delete (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_list (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_exec (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_exec_helper (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_ps (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_spec (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_features (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
/* cgroup_cmds.c */
int cli_update (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_pause (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_resume (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_events (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
/* The debug verbs, served by husk-image and husk-hook (see husk/plugin.h);
 * they return only on failure. */
int cli_image (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_container (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_cdi_hook (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_cdi (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
/* checkpoint.c */
int cli_checkpoint (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
int cli_restore (struct cli_globals *g, int argc, char **argv, struct husk_error **err);
/* completion.c */
int cli_completion (struct cli_globals *g, int argc, char **argv, struct husk_error **err);

/* usage.c: the command main() runs, whose usage line the errors below
 * quote. */
void cli_set_command (const struct cli_command *cmd);
/* Prints "usage: husk USAGE" for the command named argv[0]. */
int cli_usage_error (const char *command, struct husk_error **err, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
/* The error for what getopt returned C (':' or '?') for: "option `--x`
 * needs a value" or "unknown option `--x`", with the command's usage. */
int cli_bad_option (const char *command, int c, char **argv, struct husk_error **err);
/* True when argv holds -h/--help; prints the command's help. */
bool cli_wants_help (int argc, char **argv, const char *command);
/* Exactly one positional ID after options, or an error. */
int cli_one_id (const char *command, int argc, char **argv, const char **id, struct husk_error **err);

#endif
