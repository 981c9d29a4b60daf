/* What a command says when it was used wrong: the error with its usage
 * line, for getopt's refusals and a missing or extra id.  The usage line
 * comes from the command main() is running (cli_set_command), so the
 * commands never call back into main.c's table. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "husk/error.h"
#include "runtime/cli/cli.h"

static const struct cli_command *current;

void
cli_set_command (const struct cli_command *cmd)
{
  current = cmd;
}

int
cli_usage_error (const char *command, struct husk_error **err, const char *fmt, ...)
{
  const struct cli_command *cmd = current && strcmp (current->name, command) == 0 ? current : NULL;
  char msg[512];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  return husk_error_make (err, 0, "%s: %s (usage: husk %s)", command, msg, cmd ? cmd->usage : command);
}

int
cli_bad_option (const char *command, int c, char **argv, struct husk_error **err)
{
  if (c == ':')
    return cli_usage_error (command, err, "option `%s` needs a value", argv[optind - 1]);
  return cli_usage_error (command, err, "unknown option `%s`", argv[optind - 1]);
}

int
cli_one_id (const char *command, int argc, char **argv, const char **id, struct husk_error **err)
{
  if (optind >= argc)
    return cli_usage_error (command, err, "missing container id");
  if (optind + 1 != argc)
    return cli_usage_error (command, err, "unexpected argument `%s`", argv[optind + 1]);
  *id = argv[optind];
  return 0;
}
