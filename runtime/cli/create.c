/* husk create and husk run: they share their options. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "husk/cleanup.h"

#include "husk/util.h"
#include "runtime/cli/cli.h"

enum
{
  OPT_BUNDLE = 'b',
  OPT_DETACH = 'd',
  OPT_CONSOLE_SOCKET = 1000,
  OPT_PID_FILE,
  OPT_NO_PIVOT,
  OPT_NO_NEW_KEYRING,
  OPT_PRESERVE_FDS,
  OPT_NO_SUBREAPER,
  OPT_KEEP,
};

static int
parse_create_options (const char *command, bool allow_detach, int argc, char **argv,
                      struct create_options *opts, bool *detach, struct husk_error **err)
{
  static const struct option options[] = {
    { "bundle", required_argument, NULL, OPT_BUNDLE },
    { "console-socket", required_argument, NULL, OPT_CONSOLE_SOCKET },
    { "pid-file", required_argument, NULL, OPT_PID_FILE },
    { "no-pivot", no_argument, NULL, OPT_NO_PIVOT },
    { "no-new-keyring", no_argument, NULL, OPT_NO_NEW_KEYRING },
    { "preserve-fds", required_argument, NULL, OPT_PRESERVE_FDS },
    { "detach", no_argument, NULL, OPT_DETACH },
    { "no-subreaper", no_argument, NULL, OPT_NO_SUBREAPER },
    { "keep", no_argument, NULL, OPT_KEEP },
    { NULL, 0, NULL, 0 },
  };
  long long n;
  int c;

  opterr = 0;
  while ((c = getopt_long_only (argc, argv, "+:b:d", options, NULL)) != -1)
    switch (c)
      {
      case OPT_BUNDLE:
        opts->bundle = optarg;
        break;
      case OPT_CONSOLE_SOCKET:
        opts->console_socket = optarg;
        break;
      case OPT_PID_FILE:
        opts->pid_file = optarg;
        break;
      case OPT_NO_PIVOT:
        opts->no_pivot = true;
        break;
      case OPT_NO_NEW_KEYRING:
        opts->no_new_keyring = true;
        break;
      case OPT_PRESERVE_FDS:
        if (husk_parse_int64 (optarg, 0, 65536, &n) < 0)
          return cli_usage_error (command, err, "--preserve-fds `%s`: not a number of fds", optarg);
        opts->preserve_fds = (int) n;
        break;
      case OPT_DETACH:
        if (!allow_detach)
          return cli_usage_error (command, err, "unknown option `%s`", argv[optind - 1]);
        *detach = true;
        break;
      case OPT_NO_SUBREAPER:
      case OPT_KEEP:
        break;
      default:
        return cli_bad_option (command, c, argv, err);
      }
  return 0;
}

int
cli_create (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  struct create_options opts = { 0 };
  const char *id;
  bool detach = false;

  if (parse_create_options ("create", false, argc, argv, &opts, &detach, err) < 0
      || cli_one_id ("create", argc, argv, &id, err) < 0)
    return -1;
  if (container_create (&g->ctx, id, &opts, err) < 0)
    return -1;
  return 0;
}

/* `husk run busybox`: the OCI runtime's run wants a bundle, not an image;
 * point at the debug CLI when there is no config.json to run. */
static int
hint_image (const struct create_options *opts, const char *id, struct husk_error **err)
{
  cleanup_free char *config = xasprintf ("%s/config.json", opts->bundle ? opts->bundle : ".");
  cleanup_free char *msg = NULL;

  if (access (config, F_OK) == 0 || *err == NULL)
    return -1;
  msg = xstrdup ((*err)->msg);
  return husk_error_make (err, 0, "%s (no bundle: to run the image `%s`, use `husk container run %s`)", msg,
                          id, id);
}

int
cli_run (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  struct create_options opts = { 0 };
  const char *id;
  bool detach = false;
  int exit_code = 0;

  if (parse_create_options ("run", true, argc, argv, &opts, &detach, err) < 0
      || cli_one_id ("run", argc, argv, &id, err) < 0)
    return -1;
  if (container_run (&g->ctx, id, &opts, detach, &exit_code, err) < 0)
    return hint_image (&opts, id, err);
  return exit_code;
}
