/* husk checkpoint and husk restore: runc's options. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "husk/util.h"
#include "runtime/cli/cli.h"
#include "runtime/criu.h"

enum
{
  OPT_IMAGE_PATH = 1000,
  OPT_WORK_PATH,
  OPT_LEAVE_RUNNING,
  OPT_TCP_ESTABLISHED,
  OPT_FILE_LOCKS,
  OPT_EXT_UNIX_SK,
  OPT_SHELL_JOB,
  OPT_MANAGE_CGROUPS_MODE,
  OPT_BUNDLE,
  OPT_DETACH,
  OPT_PID_FILE,
  OPT_CONSOLE_SOCKET,
  OPT_NO_PIVOT,
};

#define CRIU_LONG_OPTIONS                                                                                    \
  { "image-path", required_argument, NULL, OPT_IMAGE_PATH },                                                 \
      { "work-path", required_argument, NULL, OPT_WORK_PATH },                                               \
      { "tcp-established", no_argument, NULL, OPT_TCP_ESTABLISHED },                                         \
      { "file-locks", no_argument, NULL, OPT_FILE_LOCKS },                                                   \
      { "ext-unix-sk", no_argument, NULL, OPT_EXT_UNIX_SK },                                                 \
      { "shell-job", no_argument, NULL, OPT_SHELL_JOB },                                                     \
  {                                                                                                          \
    "manage-cgroups-mode", required_argument, NULL, OPT_MANAGE_CGROUPS_MODE                                  \
  }

/* The options both commands share; 1 if C was one of them. */
static int
criu_option (const char *command, int c, struct criu_options *opts, struct husk_error **err)
{
  switch (c)
    {
    case OPT_IMAGE_PATH:
      opts->image_path = optarg;
      return 1;
    case OPT_WORK_PATH:
      opts->work_path = optarg;
      return 1;
    case OPT_TCP_ESTABLISHED:
      opts->tcp_established = true;
      return 1;
    case OPT_FILE_LOCKS:
      opts->file_locks = true;
      return 1;
    case OPT_EXT_UNIX_SK:
      opts->ext_unix_sk = true;
      return 1;
    case OPT_SHELL_JOB:
      opts->shell_job = true;
      return 1;
    case OPT_MANAGE_CGROUPS_MODE:
      if (!criu_valid_cgroups_mode (optarg))
        return cli_usage_error (command, err, "--manage-cgroups-mode `%s`: one of soft, full, strict, ignore",
                                optarg);
      opts->manage_cgroups_mode = optarg;
      return 1;
    }
  return 0;
}

int
cli_checkpoint (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = {
    CRIU_LONG_OPTIONS,
    { "leave-running", no_argument, NULL, OPT_LEAVE_RUNNING },
    { NULL, 0, NULL, 0 },
  };
  struct criu_options opts = { 0 };
  const char *id;
  int c, r;

  opterr = 0;
  while ((c = getopt_long_only (argc, argv, "+:", options, NULL)) != -1)
    {
      if ((r = criu_option ("checkpoint", c, &opts, err)) != 0)
        {
          if (r < 0)
            return -1;
          continue;
        }
      if (c != OPT_LEAVE_RUNNING)
        return cli_bad_option ("checkpoint", c, argv, err);
      opts.leave_running = true;
    }
  if (cli_one_id ("checkpoint", argc, argv, &id, err) < 0)
    return -1;
  return container_checkpoint (&g->ctx, id, &opts, err) < 0 ? -1 : 0;
}

int
cli_restore (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = {
    CRIU_LONG_OPTIONS,
    { "bundle", required_argument, NULL, OPT_BUNDLE },
    { "detach", no_argument, NULL, OPT_DETACH },
    { "pid-file", required_argument, NULL, OPT_PID_FILE },
    { "console-socket", required_argument, NULL, OPT_CONSOLE_SOCKET },
    { "no-pivot", no_argument, NULL, OPT_NO_PIVOT },
    { NULL, 0, NULL, 0 },
  };
  struct criu_options opts = { 0 };
  struct create_options create = { 0 };
  bool detach = false;
  int exit_code = 0;
  const char *id;
  int c, r;

  opterr = 0;
  while ((c = getopt_long_only (argc, argv, "+:b:d", options, NULL)) != -1)
    {
      if ((r = criu_option ("restore", c, &opts, err)) != 0)
        {
          if (r < 0)
            return -1;
          continue;
        }
      switch (c)
        {
        case 'b':
        case OPT_BUNDLE:
          create.bundle = optarg;
          break;
        case 'd':
        case OPT_DETACH:
          detach = true;
          break;
        case OPT_PID_FILE:
          create.pid_file = optarg;
          break;
        case OPT_CONSOLE_SOCKET:
          create.console_socket = optarg;
          break;
        case OPT_NO_PIVOT: /* criu makes the root: nothing to pivot */
          break;
        default:
          return cli_bad_option ("restore", c, argv, err);
        }
    }
  if (cli_one_id ("restore", argc, argv, &id, err) < 0)
    return -1;
  if (container_restore (&g->ctx, id, &create, &opts, detach, &exit_code, err) < 0)
    return -1;
  return exit_code;
}
