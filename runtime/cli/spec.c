/* husk spec and husk features. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cli/cli.h"

int
cli_spec (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = {
    { "bundle", required_argument, NULL, 'b' },
    { "rootless", no_argument, NULL, 'r' },
    { NULL, 0, NULL, 0 },
  };
  const char *bundle = ".";
  bool rootless = false;
  cleanup_free char *path = NULL;
  cleanup_free char *text = NULL;
  cleanup_close int fd = -1;
  int c;

  opterr = 0;
  while ((c = getopt_long_only (argc, argv, "+:b:", options, NULL)) != -1)
    switch (c)
      {
      case 'b':
        bundle = optarg;
        break;
      case 'r':
        rootless = true;
        break;
      default:
        return cli_bad_option ("spec", c, argv, err);
      }
  if (optind < argc)
    return cli_usage_error ("spec", err, "unexpected argument `%s`", argv[optind]);
  path = xasprintf ("%s/config.json", bundle);
  fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return husk_error_make (err, errno, "create `%s`", path);
  text = spec_default_json (rootless);
  if (husk_write_all (fd, text, strlen (text)) < 0 || husk_write_all (fd, "\n", 1) < 0)
    return husk_error_make (err, errno, "write `%s`", path);
  return 0;
}

int
cli_features (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  cleanup_free char *text = NULL;

  if (argc > 1)
    return cli_usage_error ("features", err, "unexpected argument `%s`", argv[1]);
  text = spec_features_json ();
  printf ("%s\n", text);
  return 0;
}
