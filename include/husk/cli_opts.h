/* Command-line verbs described as data: one table per verb gives its
 * options, value names and help lines.  The same table drives parsing
 * (getopt_long underneath), `--help`, and through `--help` the bash
 * completion and the man pages (hack/gen-man.sh), so they cannot drift. */
#ifndef HUSK_CLI_OPTS_H
#define HUSK_CLI_OPTS_H

#include <getopt.h>
#include <stdio.h>

#include "husk/error.h"

struct cli_opt
{
  const char *name; /* long name without "--"; NULL ends a table */
  int short_name;   /* 0: none */
  const char *arg;  /* the value's name ("REF"); NULL: a flag */
  const char *help; /* one line */
};

struct cli_verb
{
  const char *path;    /* "image pull": what the user typed after `husk` */
  const char *args;    /* operands after the options: "REF" */
  const char *summary; /* one line */
  const struct cli_opt *opts;
};

enum
{
  CLI_OPTS_END = -1,   /* no more options: operands start at cli_parser.optind */
  CLI_OPTS_HELP = -2,  /* --help or -h: help was printed on stdout */
  CLI_OPTS_ERROR = -3, /* *err says what was wrong */
};

struct cli_parser
{
  const struct cli_verb *verb;
  int argc;
  char **argv;
  struct option *longopts;
  char *shortopts;
  int optind;        /* after CLI_OPTS_END: the first operand */
  const char *value; /* the current option's value, or NULL */
};

void cli_parser_init (struct cli_parser *p, const struct cli_verb *verb, int argc, char **argv);
/* The index of the next option in VERB->opts, or one of CLI_OPTS_*.  A
 * missing value and an unknown option are errors naming the option and
 * pointing at `husk PATH --help`.  Options end at the first operand. */
int cli_parser_next (struct cli_parser *p, struct husk_error **err);
void cli_parser_clear (struct cli_parser *p);

/* Parses all options at once: VALUES[i] gets the value of opts[i] (the
 * last one given), or "" for a given flag, NULL when absent.  Returns the
 * index of the first operand, or a CLI_OPTS_* code. */
int cli_parse_all (const struct cli_verb *verb, int argc, char **argv, const char **values,
                   struct husk_error **err);

/* "Usage: husk PATH [options] ARGS", the summary and the options, one per
 * line ("  -q, --quiet          print only ids").  hack/gen-man.sh and
 * `husk completion bash` read this layout. */
void cli_verb_print_help (const struct cli_verb *verb, FILE *out);

#endif
