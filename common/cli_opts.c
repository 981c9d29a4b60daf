/* Option tables → getopt_long, help text and one-line errors. */
#include <stdlib.h>
#include <string.h>

#include "husk/cleanup.h"
#include "husk/cli_opts.h"
#include "husk/util.h"

#define LONG_ONLY_BASE 256
#define HELP_VAL 255 /* --help, apart from a verb's own -h */

static size_t
count_opts (const struct cli_verb *verb)
{
  size_t n = 0;

  while (verb->opts && verb->opts[n].name)
    n++;
  return n;
}

static bool
verb_has_short (const struct cli_verb *verb, int c)
{
  for (size_t i = 0; verb->opts && verb->opts[i].name; i++)
    if (verb->opts[i].short_name == c)
      return true;
  return false;
}

void
cli_parser_init (struct cli_parser *p, const struct cli_verb *verb, int argc, char **argv)
{
  size_t n = count_opts (verb);
  char *s;

  *p = (struct cli_parser){ .verb = verb, .argc = argc, .argv = argv, .optind = 1 };
  /* the table, then --help, then the terminator */
  p->longopts = xcalloc (n + 2, sizeof *p->longopts);
  /* "+:" then up to two characters per option, then "h" */
  p->shortopts = s = xcalloc (2 * n + 4, 1);
  *s++ = '+';
  *s++ = ':';
  for (size_t i = 0; i < n; i++)
    {
      const struct cli_opt *o = &verb->opts[i];
      p->longopts[i] = (struct option){ o->name, o->arg ? required_argument : no_argument, NULL,
                                        LONG_ONLY_BASE + (int) i };
      if (o->short_name)
        {
          *s++ = (char) o->short_name;
          if (o->arg)
            *s++ = ':';
        }
    }
  p->longopts[n] = (struct option){ "help", no_argument, NULL, HELP_VAL };
  if (!verb_has_short (verb, 'h'))
    *s++ = 'h';
}

void
cli_parser_clear (struct cli_parser *p)
{
  free (p->longopts);
  free (p->shortopts);
  p->longopts = NULL;
  p->shortopts = NULL;
}

static int
index_of_short (const struct cli_verb *verb, int c)
{
  for (size_t i = 0; verb->opts && verb->opts[i].name; i++)
    if (verb->opts[i].short_name == c)
      return (int) i;
  return -1;
}

/* How the user spelled the option getopt stopped at. */
static char *
offending_option (const struct cli_parser *p, int code)
{
  const char *word = p->argv[optind - 1];

  if (code == HELP_VAL)
    return xstrdup ("--help");
  if (code >= LONG_ONLY_BASE)
    return xasprintf ("--%s", p->verb->opts[code - LONG_ONLY_BASE].name);
  if (code > 0 && code < HELP_VAL && !(word[0] == '-' && word[1] == '-'))
    return xasprintf ("-%c", code);
  /* a long option: the word itself up to any "=" (optind may have moved
   * past it, or stay on it inside a cluster of short options) */
  if (optind > p->argc || word == NULL)
    return xstrdup ("?");
  return strndup (word, strcspn (word, "="));
}

static int
option_error (struct cli_parser *p, int kind, struct husk_error **err)
{
  int code = optopt;
  char *spelled = offending_option (p, code);
  const char *help_name = NULL;

  if (code >= LONG_ONLY_BASE)
    help_name = p->verb->opts[code - LONG_ONLY_BASE].arg;
  else if (code > 0 && index_of_short (p->verb, code) >= 0)
    help_name = p->verb->opts[index_of_short (p->verb, code)].arg;
  if (kind == ':')
    husk_error_make (err, 0, "%s: option `%s` needs a value (%s; see husk %s --help)", p->verb->path, spelled,
                     help_name ? help_name : "a value", p->verb->path);
  else if (code >= HELP_VAL)
    husk_error_make (err, 0, "%s: option `%s` takes no value (see husk %s --help)", p->verb->path, spelled,
                     p->verb->path);
  else
    husk_error_make (err, 0, "%s: unknown option `%s` (see husk %s --help)", p->verb->path, spelled,
                     p->verb->path);
  free (spelled);
  return CLI_OPTS_ERROR;
}

/* getopt_long takes "--plat" for "--platform"; podman does not, and a
 * prefix that stops being unique breaks scripts: whole names only. */
static bool
abbreviated (const struct cli_parser *p, int code)
{
  const char *name = code == HELP_VAL ? "help" : p->verb->opts[code - LONG_ONLY_BASE].name;
  const char *word = p->value && p->value == p->argv[optind - 1] ? p->argv[optind - 2] : p->argv[optind - 1];

  if (word[0] != '-' || word[1] != '-')
    return false; /* a short option */
  return strcspn (word + 2, "=") != strlen (name) || strncmp (word + 2, name, strlen (name)) != 0;
}

int
cli_parser_next (struct cli_parser *p, struct husk_error **err)
{
  int c;

  optind = p->optind;
  opterr = 0;
  optopt = 0;
  c = getopt_long (p->argc, p->argv, p->shortopts, p->longopts, NULL);
  p->optind = optind;
  p->value = optarg;
  if (c == -1)
    return CLI_OPTS_END;
  if (c == '?' || c == ':')
    return option_error (p, c, err);
  if (c >= HELP_VAL && abbreviated (p, c))
    {
      const char *word
          = p->value && p->value == p->argv[optind - 1] ? p->argv[optind - 2] : p->argv[optind - 1];
      cleanup_free char *spelled = strndup (word, strcspn (word, "="));
      husk_error_make (err, 0, "%s: unknown option `%s` (see husk %s --help)", p->verb->path, spelled,
                       p->verb->path);
      return CLI_OPTS_ERROR;
    }
  if (c >= LONG_ONLY_BASE)
    return c - LONG_ONLY_BASE;
  if (c == HELP_VAL || (c == 'h' && !verb_has_short (p->verb, 'h')))
    {
      cli_verb_print_help (p->verb, stdout);
      return CLI_OPTS_HELP;
    }
  return index_of_short (p->verb, c);
}

int
cli_parse_all (const struct cli_verb *verb, int argc, char **argv, const char **values,
               struct husk_error **err)
{
  struct cli_parser p;
  int c;

  cli_parser_init (&p, verb, argc, argv);
  while ((c = cli_parser_next (&p, err)) >= 0)
    values[c] = p.value ? p.value : "";
  cli_parser_clear (&p);
  return c == CLI_OPTS_END ? p.optind : c;
}

void
cli_verb_print_help (const struct cli_verb *verb, FILE *out)
{
  bool own_h = verb_has_short (verb, 'h');

  fprintf (out, "Usage: husk %s%s%s%s\n\n%s\n\nOptions:\n", verb->path, count_opts (verb) ? " [options]" : "",
           verb->args && *verb->args ? " " : "", verb->args ? verb->args : "", verb->summary);
  for (size_t i = 0; verb->opts && verb->opts[i].name; i++)
    {
      const struct cli_opt *o = &verb->opts[i];
      char left[64];

      if (o->short_name)
        snprintf (left, sizeof left, "-%c, --%s%s%s", o->short_name, o->name, o->arg ? " " : "",
                  o->arg ? o->arg : "");
      else
        snprintf (left, sizeof left, "    --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
      fprintf (out, "  %-34s %s\n", left, o->help);
    }
  fprintf (out, "  %-34s %s\n", own_h ? "    --help" : "-h, --help", "print this help");
}
