/* husk exec: the process comes from --process FILE, or from the container's
 * own process with args, env, cwd, user and capabilities overridden. */
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cli/cli.h"
#include "runtime/exec_helper.h"

enum
{
  OPT_PROCESS = 'p',
  OPT_TTY = 't',
  OPT_DETACH = 'd',
  OPT_ENV = 'e',
  OPT_USER = 'u',
  OPT_CAP = 'c',
  OPT_GIDS = 'g',
  OPT_CWD = 1000,
  OPT_PID_FILE,
  OPT_CONSOLE_SOCKET,
  OPT_NO_NEW_PRIVS,
  OPT_CONSOLE_SIZE,
  OPT_PRESERVE_FDS,
  OPT_APPARMOR,
  OPT_IGNORED_ARG,
};

struct exec_cli
{
  const char *process_file;
  bool tty, detach, no_new_privs;
  unsigned console_rows, console_cols;
  const char *cwd, *user;
  const char *apparmor; /* --apparmor: the process's profile */
  char **env;           /* added K=V */
  char **caps;
  char **gids;
  struct exec_options opts;
};

static int
parse_exec_options (int argc, char **argv, struct exec_cli *cli, struct husk_error **err)
{
  static const struct option options[] = {
    { "process", required_argument, NULL, OPT_PROCESS },
    { "tty", no_argument, NULL, OPT_TTY },
    { "detach", no_argument, NULL, OPT_DETACH },
    { "env", required_argument, NULL, OPT_ENV },
    { "cwd", required_argument, NULL, OPT_CWD },
    { "user", required_argument, NULL, OPT_USER },
    { "cap", required_argument, NULL, OPT_CAP },
    { "additional-gids", required_argument, NULL, OPT_GIDS },
    { "pid-file", required_argument, NULL, OPT_PID_FILE },
    { "console-socket", required_argument, NULL, OPT_CONSOLE_SOCKET },
    { "console-size", required_argument, NULL, OPT_CONSOLE_SIZE },
    { "no-new-privs", no_argument, NULL, OPT_NO_NEW_PRIVS },
    { "preserve-fds", required_argument, NULL, OPT_PRESERVE_FDS },
    { "process-label", required_argument, NULL, OPT_IGNORED_ARG },
    { "apparmor", required_argument, NULL, OPT_APPARMOR },
    { NULL, 0, NULL, 0 },
  };
  long long n;
  int c;

  opterr = 0;
  while ((c = getopt_long_only (argc, argv, "+:p:tde:u:c:g:", options, NULL)) != -1)
    switch (c)
      {
      case OPT_PROCESS:
        cli->process_file = optarg;
        break;
      case OPT_TTY:
        cli->tty = true;
        break;
      case OPT_DETACH:
        cli->opts.detach = true;
        break;
      case OPT_ENV:
        if (strchr (optarg, '=') == NULL)
          return cli_usage_error ("exec", err, "--env `%s`: expected KEY=VALUE", optarg);
        cli->env = husk_strv_append (cli->env, optarg);
        break;
      case OPT_CWD:
        cli->cwd = optarg;
        break;
      case OPT_USER:
        cli->user = optarg;
        break;
      case OPT_CAP:
        cli->caps = husk_strv_append (cli->caps, optarg);
        break;
      case OPT_GIDS:
        cli->gids = husk_strv_append (cli->gids, optarg);
        break;
      case OPT_PID_FILE:
        cli->opts.pid_file = optarg;
        break;
      case OPT_CONSOLE_SOCKET:
        cli->opts.console_socket = optarg;
        break;
      case OPT_NO_NEW_PRIVS:
        cli->no_new_privs = true;
        break;
      case OPT_CONSOLE_SIZE:
        {
          char tail;
          if (sscanf (optarg, "%ux%u%c", &cli->console_rows, &cli->console_cols, &tail) != 2
              || cli->console_rows == 0 || cli->console_cols == 0 || cli->console_rows > UINT16_MAX
              || cli->console_cols > UINT16_MAX)
            return cli_usage_error ("exec", err, "--console-size `%s`: expected ROWSxCOLS (1-65535 each)",
                                    optarg);
        }
        break;
      case OPT_PRESERVE_FDS:
        if (husk_parse_int64 (optarg, 0, 65536, &n) < 0)
          return cli_usage_error ("exec", err, "--preserve-fds `%s`: not a number of fds", optarg);
        cli->opts.preserve_fds = (int) n;
        break;
      case OPT_APPARMOR:
        cli->apparmor = optarg;
        break;
      case OPT_IGNORED_ARG:
        break;
      default:
        return cli_bad_option ("exec", c, argv, err);
      }
  return 0;
}

static int
apply_user (struct spec_process *process, const char *user, struct husk_error **err)
{
  long long uid, gid;
  cleanup_free char *copy = xstrdup (user);
  char *colon = strchr (copy, ':');

  if (colon)
    *colon++ = '\0';
  if (husk_parse_int64 (copy, 0, UINT32_MAX - 1, &uid) < 0
      || (colon && husk_parse_int64 (colon, 0, UINT32_MAX - 1, &gid) < 0))
    return cli_usage_error ("exec", err, "--user `%s`: expected UID[:GID] (numbers)", user);
  process->user.uid = (uid_t) uid;
  if (colon)
    process->user.gid = (gid_t) gid;
  return 0;
}

static int
apply_overrides (struct spec_process *process, struct exec_cli *cli, char **args, struct husk_error **err)
{
  husk_strvfreep (&process->args);
  for (char **a = args; *a; a++)
    process->args = husk_strv_append (process->args, *a);
  for (char **e = cli->env; e && *e; e++)
    process->env = husk_strv_append (process->env, *e);
  if (cli->cwd)
    {
      free (process->cwd);
      process->cwd = xstrdup (cli->cwd);
    }
  if (cli->user && apply_user (process, cli->user, err) < 0)
    return -1;
  for (char **g = cli->gids; g && *g; g++)
    {
      long long gid;
      if (husk_parse_int64 (*g, 0, UINT32_MAX - 1, &gid) < 0)
        return cli_usage_error ("exec", err, "--additional-gids `%s`: not a gid", *g);
      process->user.additional_gids
          = xrealloc (process->user.additional_gids, (process->user.n_additional_gids + 1) * sizeof (gid_t));
      process->user.additional_gids[process->user.n_additional_gids++] = (gid_t) gid;
    }
  for (char **c = cli->caps; c && *c; c++)
    {
      int cap = spec_capability_from_name (*c);
      if (cap < 0)
        return cli_usage_error ("exec", err, "--cap `%s`: unknown capability", *c);
      process->has_capabilities = true;
      process->caps.bounding |= 1ULL << cap;
      process->caps.effective |= 1ULL << cap;
      process->caps.permitted |= 1ULL << cap;
      process->caps.ambient |= 1ULL << cap;
    }
  if (cli->apparmor)
    {
      free (process->apparmor_profile);
      process->apparmor_profile = xstrdup (cli->apparmor);
    }
  process->terminal = cli->tty;
  if (cli->console_rows)
    {
      process->console_height = cli->console_rows;
      process->console_width = cli->console_cols;
    }
  process->no_new_privileges = process->no_new_privileges || cli->no_new_privs;
  return 0;
}

static int
load_process_file (const char *path, struct spec_process *process, struct husk_error **err)
{
  cleanup_free char *text = NULL;
  size_t len = 0;

  if (husk_read_file (path, &text, &len, err) < 0)
    return husk_error_wrap (err, "--process");
  return spec_parse_process (text, len, path, process, err);
}

static int
build_and_exec (struct cli_globals *g, const char *id, struct exec_cli *cli, char **args,
                struct husk_error **err)
{
  struct spec *spec = NULL;
  struct spec_process file_process = { 0 };
  int exit_code = 0, ret = -1;

  if (cli->process_file)
    {
      if (load_process_file (cli->process_file, &file_process, err) == 0)
        {
          cli->opts.process = &file_process;
          ret = container_exec (&g->ctx, id, &cli->opts, &exit_code, err);
        }
      spec_process_clear (&file_process);
      return ret < 0 ? -1 : exit_code;
    }
  if (*args == NULL)
    return cli_usage_error ("exec", err, "missing command (or --process FILE)");
  if (container_load_spec (&g->ctx, id, &spec, err) < 0)
    return -1;
  if (apply_overrides (&spec->process, cli, args, err) == 0)
    {
      cli->opts.process = &spec->process;
      ret = container_exec (&g->ctx, id, &cli->opts, &exit_code, err);
    }
  spec_free (spec);
  return ret < 0 ? -1 : exit_code;
}

int
cli_exec (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  struct exec_cli cli = { 0 };
  int ret;

  if (parse_exec_options (argc, argv, &cli, err) < 0)
    ret = -1;
  else if (optind >= argc)
    ret = cli_usage_error ("exec", err, "missing container id");
  else
    ret = build_and_exec (g, argv[optind], &cli, argv + optind + 1, err);
  husk_strvfreep (&cli.env);
  husk_strvfreep (&cli.caps);
  husk_strvfreep (&cli.gids);
  return ret;
}

/* `husk exec-helper`: huskd's exec helper (runtime/exec_helper.h), its
 * control socket on fd 3.  Run by huskd only. */
int
cli_exec_helper (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  struct stat st;
  int type = 0;
  socklen_t len = sizeof type;

  if (argc > 1)
    return cli_usage_error ("exec-helper", err, "takes no arguments");
  if (fstat (3, &st) < 0 || !S_ISSOCK (st.st_mode) || getsockopt (3, SOL_SOCKET, SO_TYPE, &type, &len) < 0
      || type != SOCK_SEQPACKET)
    return husk_error_make (err, 0,
                            "exec-helper: fd 3 is not a SOCK_SEQPACKET socket (huskd starts this command)");
  fcntl (3, F_SETFD, FD_CLOEXEC);
  prctl (PR_SET_NAME, "huskd-exec");
  container_exec_plan_vfork ();
  return exec_helper_serve (3, err) < 0 ? -1 : 0;
}
