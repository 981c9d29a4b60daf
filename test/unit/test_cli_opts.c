/* Unit tests for the verb option tables (husk/cli_opts.h): values, flags,
 * short clusters, operands, --help, and the one-line errors for a missing
 * value, an unknown option and an abbreviation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "husk/cli_opts.h"
#include "husk/util.h"

enum
{
  OPT_PLATFORM,
  OPT_QUIET,
  OPT_NAME,
  OPT_ALL,
  N_OPTS,
};
static const struct cli_opt opts[] = {
  [OPT_PLATFORM] = { "platform", 0, "OS/ARCH", "pick a platform" },
  [OPT_QUIET] = { "quiet", 'q', NULL, "no progress" },
  [OPT_NAME] = { "name", 'n', "NAME", "a name" },
  [OPT_ALL] = { "all", 'a', NULL, "everything" },
  { NULL, 0, NULL, NULL },
};
static const struct cli_verb verb = { "image pull", "REF", "pull an image", opts };

/* Parses the NULL-terminated WORDS (argv[0] is the verb). */
static int
parse (const char **values, struct husk_error **err, ...)
{
  char *argv[16];
  int argc = 0;
  va_list ap;

  va_start (ap, err);
  argv[argc++] = (char *) "pull";
  for (const char *w; (w = va_arg (ap, const char *)) != NULL;)
    argv[argc++] = (char *) w;
  va_end (ap);
  argv[argc] = NULL;
  for (int i = 0; i < N_OPTS; i++)
    values[i] = NULL;
  return cli_parse_all (&verb, argc, argv, values, err);
}

static void
test_values_and_flags (void **state)
{
  const char *values[N_OPTS];
  struct husk_error *err = NULL;

  (void) state;
  assert_int_equal (4, parse (values, &err, "--platform", "linux/arm64", "-q", "REF", NULL));
  assert_string_equal ("linux/arm64", values[OPT_PLATFORM]);
  assert_string_equal ("", values[OPT_QUIET]);
  assert_null (values[OPT_NAME]);
  assert_int_equal (3, parse (values, &err, "--platform=linux/s390x", "-qa", "REF", "--quiet", NULL));
  assert_string_equal ("linux/s390x", values[OPT_PLATFORM]);
  assert_non_null (values[OPT_ALL]);
  assert_int_equal (2, parse (values, &err, "-nfoo", "REF", NULL));
  assert_string_equal ("foo", values[OPT_NAME]);
  /* "--" ends the options */
  assert_int_equal (2, parse (values, &err, "--", "--quiet", NULL));
  assert_null (values[OPT_QUIET]);
  assert_null (err);
}

static void
expect_error (const char *expected, int ret, struct husk_error **err)
{
  assert_int_equal (CLI_OPTS_ERROR, ret);
  assert_non_null (*err);
  assert_string_equal (expected, (*err)->msg);
  assert_null (strchr ((*err)->msg, '\n'));
  husk_error_free (err);
}

static void
test_errors (void **state)
{
  const char *values[N_OPTS];
  struct husk_error *err = NULL;

  (void) state;
  expect_error ("image pull: option `--platform` needs a value (OS/ARCH; see husk image pull --help)",
                parse (values, &err, "--platform", NULL), &err);
  expect_error ("image pull: option `-n` needs a value (NAME; see husk image pull --help)",
                parse (values, &err, "-q", "-n", NULL), &err);
  expect_error ("image pull: unknown option `--bogus` (see husk image pull --help)",
                parse (values, &err, "--bogus", "REF", NULL), &err);
  expect_error ("image pull: unknown option `--bogus` (see husk image pull --help)",
                parse (values, &err, "--bogus=1", "REF", NULL), &err);
  expect_error ("image pull: unknown option `-z` (see husk image pull --help)",
                parse (values, &err, "-qz", "REF", NULL), &err);
  /* a flag given a value */
  expect_error ("image pull: option `--quiet` takes no value (see husk image pull --help)",
                parse (values, &err, "--quiet=yes", "REF", NULL), &err);
  expect_error ("image pull: option `--help` takes no value (see husk image pull --help)",
                parse (values, &err, "--help=1", NULL), &err);
  /* getopt would take these prefixes; podman does not, and neither do we */
  expect_error ("image pull: unknown option `--plat` (see husk image pull --help)",
                parse (values, &err, "--plat", "x", "REF", NULL), &err);
  expect_error ("image pull: unknown option `--plat` (see husk image pull --help)",
                parse (values, &err, "--plat=x", "REF", NULL), &err);
  expect_error ("image pull: unknown option `--he` (see husk image pull --help)",
                parse (values, &err, "--he", NULL), &err);
}

static void
test_help (void **state)
{
  const char *values[N_OPTS];
  struct husk_error *err = NULL;
  char *text = NULL;
  size_t len = 0;
  FILE *saved = stdout;

  (void) state;
  stdout = open_memstream (&text, &len);
  assert_int_equal (CLI_OPTS_HELP, parse (values, &err, "-q", "--help", NULL));
  assert_int_equal (CLI_OPTS_HELP, parse (values, &err, "-h", NULL));
  fclose (stdout);
  stdout = saved;
  assert_non_null (strstr (text, "Usage: husk image pull [options] REF\n"));
  assert_non_null (strstr (text, "\n      --platform OS/ARCH"));
  assert_non_null (strstr (text, "\n  -q, --quiet "));
  assert_non_null (strstr (text, "\n  -n, --name NAME "));
  assert_non_null (strstr (text, "\n  -h, --help "));
  assert_null (err);
  free (text);
}

/* A verb whose own -h is not help keeps --help. */
static void
test_own_h (void **state)
{
  static const struct cli_opt own[] = { { "human", 'h', NULL, "sizes for people" }, { NULL, 0, NULL, NULL } };
  static const struct cli_verb v = { "x", "", "x", own };
  char *argv[] = { (char *) "x", (char *) "-h", NULL };
  char *help_argv[] = { (char *) "x", (char *) "--help", NULL };
  const char *values[1] = { NULL };
  struct husk_error *err = NULL;
  FILE *saved = stdout;

  (void) state;
  assert_int_equal (2, cli_parse_all (&v, 2, argv, values, &err));
  assert_string_equal ("", values[0]);
  stdout = fopen ("/dev/null", "w");
  assert_int_equal (CLI_OPTS_HELP, cli_parse_all (&v, 2, help_argv, values, &err));
  fclose (stdout);
  stdout = saved;
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_values_and_flags),
    cmocka_unit_test (test_errors),
    cmocka_unit_test (test_help),
    cmocka_unit_test (test_own_h),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
