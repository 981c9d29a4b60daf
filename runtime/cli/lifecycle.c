/* husk start, state, kill and delete. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cli/cli.h"

/* Commands whose only options are boolean flags. */
static int
parse_flags (const char *command, int argc, char **argv, const struct option *options, const char *shorts,
             bool *flag, struct husk_error **err)
{
  int c;

  opterr = 0;
  while ((c = getopt_long_only (argc, argv, shorts, options, NULL)) != -1)
    {
      if (c == '?' || c == ':')
        return cli_bad_option (command, c, argv, err);
      *flag = true;
    }
  return 0;
}

int
cli_start (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  static const struct option none[] = { { NULL, 0, NULL, 0 } };
  const char *id;
  bool unused = false;

  if (parse_flags ("start", argc, argv, none, "+:", &unused, err) < 0
      || cli_one_id ("start", argc, argv, &id, err) < 0)
    return -1;
  return container_start (&g->ctx, id, err) < 0 ? -1 : 0;
}

int
cli_state (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  static const struct option none[] = { { NULL, 0, NULL, 0 } };
  struct container_state *state = NULL;
  const char *id;
  bool unused = false;
  char *json;

  if (parse_flags ("state", argc, argv, none, "+:", &unused, err) < 0
      || cli_one_id ("state", argc, argv, &id, err) < 0)
    return -1;
  if (state_load (g->ctx.root, id, &state, err) < 0)
    return -1;
  json = state_oci_json (state, state_status (state), true);
  printf ("%s\n", json);
  free (json);
  state_free (state);
  return 0;
}

int
cli_kill (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = { { "all", no_argument, NULL, 'a' }, { NULL, 0, NULL, 0 } };
  bool all = false;
  int sig = SIGTERM;

  if (parse_flags ("kill", argc, argv, options, "+:a", &all, err) < 0)
    return -1;
  if (optind >= argc)
    return cli_usage_error ("kill", err, "missing container id");
  if (optind + 2 < argc)
    return cli_usage_error ("kill", err, "unexpected argument `%s`", argv[optind + 2]);
  if (optind + 1 < argc && container_parse_signal (argv[optind + 1], &sig, err) < 0)
    return -1;
  return container_kill (&g->ctx, argv[optind], sig, all, err) < 0 ? -1 : 0;
}

int
cli_delete (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = { { "force", no_argument, NULL, 'f' }, { NULL, 0, NULL, 0 } };
  bool force = false;
  const char *id;

  if (parse_flags ("delete", argc, argv, options, "+:f", &force, err) < 0
      || cli_one_id ("delete", argc, argv, &id, err) < 0)
    return -1;
  /* runc: forcing the delete of what is not there is no error. */
  if (force && state_validate_id (id, NULL) == 0)
    {
      cleanup_free char *dir = state_dir_path (g->ctx.root, id);
      if (access (dir, F_OK) < 0 && errno == ENOENT)
        return 0;
    }
  return container_delete (&g->ctx, id, force, err) < 0 ? -1 : 0;
}
