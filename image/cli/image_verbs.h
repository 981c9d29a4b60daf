/* The `husk image` verbs that live in their own files, and the table row
 * each verb is (image_cli.c). */
#ifndef HUSK_IMAGE_CLI_VERBS_H
#define HUSK_IMAGE_CLI_VERBS_H

#include "husk/cli_opts.h"
#include "image/cli/image_cli.h"

#define MAX_OPTS 8 /* options one verb may have */

struct image_verb;
/* VALUES[i]: the value of the verb's option i ("" for a flag, NULL when
 * not given); ARGV: the ARGC operands. */
typedef int (*image_verb_fn) (struct image_cli_env *env, const struct image_verb *verb, const char **values,
                              int argc, char **argv, struct husk_error **err);

struct image_verb
{
  struct cli_verb spec;
  image_verb_fn run;
  const char *alias;
  int min_args, max_args; /* operands; max -1: any number */
};

/* image_ls.c */
extern const struct cli_opt image_ls_opts[];
int image_cli_ls (struct image_cli_env *env, const struct image_verb *verb, const char **values, int argc,
                  char **argv, struct husk_error **err);

/* image_login.c */
extern const struct cli_opt image_login_opts[];
extern const struct cli_opt image_logout_opts[];
int image_cli_login (struct image_cli_env *env, const struct image_verb *verb, const char **values, int argc,
                     char **argv, struct husk_error **err);
int image_cli_logout (struct image_cli_env *env, const struct image_verb *verb, const char **values, int argc,
                      char **argv, struct husk_error **err);

#endif
