/* getopt_long for every `husk container` verb, so that each answers
 * --help with its options and says the same thing for a missing value or
 * an unknown option. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cri/cli/cli.h"
#include "husk/util.h"

/* The option as the user typed it: `--memory` (without `=VALUE`), `-e`. */
static const char *
option_text (char **argv, char buf[64])
{
  const char *typed = argv[optind - 1];

  if (strncmp (typed, "--", 2) == 0)
    {
      snprintf (buf, 64, "%.*s", (int) strcspn (typed, "="), typed);
      return buf;
    }
  if (optopt > ' ' && optopt < 127)
    {
      snprintf (buf, 64, "-%c", optopt);
      return buf;
    }
  return typed;
}

int
cli_getopt (const struct cli_verb *verb, int argc, char **argv, struct husk_error **err)
{
  char shortopts[64];
  char buf[64];
  int c;

  snprintf (shortopts, sizeof shortopts, "+:h%s", verb->shortopts);
  opterr = 0;
  c = getopt_long (argc, argv, shortopts, verb->longopts, NULL);
  if (c == 'h')
    {
      fputs (verb->usage, stdout);
      return CLI_HELP;
    }
  if (c == ':')
    {
      husk_error_make (err, 0, "container %s: option `%s` needs a value (see husk container %s --help)",
                       verb->name, option_text (argv, buf), verb->name);
      return CLI_ERROR;
    }
  if (c == '?')
    {
      husk_error_make (err, 0, "container %s: unknown option `%s` (see husk container %s --help)", verb->name,
                       option_text (argv, buf), verb->name);
      return CLI_ERROR;
    }
  return c;
}
