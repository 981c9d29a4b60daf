/* husk: an OCI runtime with runc's command line.  Global options come first
 * (`husk --root DIR --log FILE create ...`), then a command from the table. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "husk/util.h"
#include "runtime/cli/cli.h"

static const struct cli_command commands[] = {
  { "create", cli_create,
    "create [--bundle DIR] [--console-socket PATH] [--pid-file PATH] [--no-pivot] "
    "[--no-new-keyring] [--preserve-fds N] ID",
    "create a container, stopped before its process" },
  { "start", cli_start, "start ID", "run the process of a created container" },
  { "run", cli_run, "run [create options] [--detach] ID", "create and start a container" },
  { "state", cli_state, "state ID", "print the OCI state of a container" },
  { "kill", cli_kill, "kill [--all] ID [SIGNAL]", "send a signal (default SIGTERM) to a container" },
  { "delete", cli_delete, "delete [--force] ID", "delete a container and everything it created" },
  { "list", cli_list, "list [--format table|json] [--quiet]", "list containers" },
  { "exec", cli_exec, "exec [--process FILE | options] ID [COMMAND [ARG...]]",
    "run a process in a container" },
  { "ps", cli_ps, "ps [--format table|json] ID [PS ARGS...]", "show the processes of a container" },
  { "spec", cli_spec, "spec [--bundle DIR] [--rootless]", "write a default config.json" },
  { "features", cli_features, "features", "print the runtime's features (JSON)" },
  { "update", cli_update,
    "update [--resources FILE|-] [--memory N] [--memory-swap N] [--memory-reservation N] [--cpu-quota N] "
    "[--cpu-period N] [--cpu-share N] [--cpu-weight N] [--cpu-burst N] [--cpuset-cpus LIST] [--cpuset-mems "
    "LIST] "
    "[--pids-limit N] [--blkio-weight N] ID",
    "change the resource limits of a running container" },
  { "pause", cli_pause, "pause ID", "freeze every process of a container" },
  { "resume", cli_resume, "resume ID", "thaw a paused container" },
  { "events", cli_events, "events [--stats] [--interval DURATION] ID",
    "print resource usage (one sample with --stats) and OOM events" },
  { "image", cli_image, "image [--root DIR] pull|ls|inspect|rm|import|export ...",
    "manage images (debug CLI)" },
  { "container", cli_container, "container [--root DIR] run|ls|exec|logs|stop|rm ...",
    "run images directly, no daemon (debug CLI)" },
  { "cdi-hook", cli_cdi_hook, "cdi-hook update-ldcache|create-symlinks|chmod [options]",
    "CDI createContainer hooks (state JSON on stdin)" },
  { "cdi", cli_cdi, "cdi generate nvidia|list ...", "write a CDI spec for NVIDIA GPUs, list CDI devices" },
  { "completion", cli_completion, "completion bash",
    "print a bash completion script (source <(husk completion bash))" },
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const struct cli_command *
find_command (const char *name)
{
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (strcmp (commands[i].name, name) == 0)
      return &commands[i];
  return NULL;
}

static void
print_help (FILE *out)
{
  fprintf (out, "usage: husk [global options] COMMAND [options] [ID]\n\n"
                "husk is an OCI container runtime with runc's command line.\n\n"
                "Global options:\n"
                "  --root DIR            state directory (default " HUSK_DEFAULT_ROOT ")\n"
                "  --log FILE            write log and error lines to FILE\n"
                "  --log-format FORMAT   text (default) or json\n"
                "  --debug               log debug messages\n"
                "  --systemd-cgroup      cgroupsPath is in systemd form slice:prefix:name\n"
                "  --help, --version\n\nCommands:\n");
  for (size_t i = 0; i < N_COMMANDS; i++)
    fprintf (out, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

int
cli_usage_error (const char *command, struct husk_error **err, const char *fmt, ...)
{
  const struct cli_command *cmd = find_command (command);
  char msg[512];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  return husk_error_make (err, 0, "%s: %s (usage: husk %s)", command, msg, cmd ? cmd->usage : command);
}

bool
cli_wants_help (int argc, char **argv, const char *command)
{
  const struct cli_command *cmd = find_command (command);

  for (int i = 1; i < argc; i++)
    {
      if (strcmp (argv[i], "--") == 0)
        break;
      if (strcmp (argv[i], "--help") == 0 || strcmp (argv[i], "-h") == 0 || strcmp (argv[i], "-help") == 0)
        {
          printf ("usage: husk %s\n\n%s\n", cmd ? cmd->usage : command, cmd ? cmd->summary : "");
          return true;
        }
      if (argv[i][0] != '-')
        break; /* exec's COMMAND may take -h itself */
    }
  return false;
}

int
cli_bad_option (const char *command, int c, char **argv, struct husk_error **err)
{
  if (c == ':')
    return cli_usage_error (command, err, "option `%s` needs a value", argv[optind - 1]);
  return cli_usage_error (command, err, "unknown option `%s`", argv[optind - 1]);
}

int
cli_one_id (const char *command, int argc, char **argv, const char **id, struct husk_error **err)
{
  if (optind >= argc)
    return cli_usage_error (command, err, "missing container id");
  if (optind + 1 != argc)
    return cli_usage_error (command, err, "unexpected argument `%s`", argv[optind + 1]);
  *id = argv[optind];
  return 0;
}

enum
{
  OPT_ROOT = 1000,
  OPT_LOG,
  OPT_LOG_FORMAT,
  OPT_LOG_LEVEL,
  OPT_DEBUG,
  OPT_SYSTEMD_CGROUP,
  OPT_ROOTLESS,
  OPT_CRIU,
  OPT_HELP,
  OPT_VERSION,
};

static int
parse_globals (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = {
    { "root", required_argument, NULL, OPT_ROOT },
    { "log", required_argument, NULL, OPT_LOG },
    { "log-format", required_argument, NULL, OPT_LOG_FORMAT },
    { "log-level", required_argument, NULL, OPT_LOG_LEVEL },
    { "debug", no_argument, NULL, OPT_DEBUG },
    { "systemd-cgroup", no_argument, NULL, OPT_SYSTEMD_CGROUP },
    { "rootless", required_argument, NULL, OPT_ROOTLESS },
    { "criu", required_argument, NULL, OPT_CRIU },
    { "help", no_argument, NULL, OPT_HELP },
    { "version", no_argument, NULL, OPT_VERSION },
    { NULL, 0, NULL, 0 },
  };
  int c;

  opterr = 0;
  while ((c = getopt_long_only (argc, argv, "+:hv", options, NULL)) != -1)
    switch (c)
      {
      case OPT_ROOT:
        g->ctx.root = optarg;
        break;
      case OPT_LOG:
        g->log_file = optarg;
        break;
      case OPT_LOG_FORMAT:
        if (strcmp (optarg, "json") != 0 && strcmp (optarg, "text") != 0)
          return husk_error_make (err, 0, "--log-format `%s`: must be text or json", optarg);
        g->log_json = strcmp (optarg, "json") == 0;
        break;
      case OPT_LOG_LEVEL:
        g->debug = g->debug || strcmp (optarg, "debug") == 0;
        break;
      case OPT_DEBUG:
        g->debug = true;
        break;
      case OPT_SYSTEMD_CGROUP:
        g->ctx.systemd_cgroup = true;
        break;
      case OPT_ROOTLESS:
      case OPT_CRIU:
        break; /* accepted for runc compatibility */
      case 'h':
      case OPT_HELP:
        print_help (stdout);
        exit (0);
      case 'v':
      case OPT_VERSION:
        printf ("husk version %s\nspec: 1.2.0\n", HUSK_VERSION);
        exit (0);
      case ':':
        return husk_error_make (err, 0, "global option `%s` needs a value (see husk --help)",
                                argv[optind - 1]);
      default:
        return husk_error_make (err, 0, "unknown global option `%s` (see husk --help)", argv[optind - 1]);
      }
  return 0;
}

static int
open_log (const struct cli_globals *g, struct husk_error **err)
{
  int fd;

  if (g->debug)
    husk_log_set_level (HUSK_LOG_DEBUG);
  if (g->log_file == NULL)
    {
      husk_log_set_file (2, g->log_json);
      return 0;
    }
  fd = open (g->log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    return husk_error_make (err, errno, "--log `%s`", g->log_file);
  husk_log_set_file (fd, g->log_json);
  return 0;
}

/* Commands that start processes inside a container run from a sealed copy
 * of the binary (see cloned_binary.c). */
static bool
needs_cloned_binary (const char *name)
{
  return strcmp (name, "create") == 0 || strcmp (name, "run") == 0 || strcmp (name, "exec") == 0
         || strcmp (name, "container") == 0;
}

#ifdef __SANITIZE_ADDRESS__
/* `make sanitize`: LeakSanitizer's exit-time scan stops the world through
 * /proc/self, which a process that joined a container's namespaces (exec,
 * the init before its execve) does not see as its own: it spins forever.
 * The runtime's short-lived processes run without it; its library code is
 * leak-checked by the unit tests.  ASAN_OPTIONS still overrides this. */
const char *__asan_default_options (void);
const char *
__asan_default_options (void)
{
  return "detect_leaks=0";
}
#endif

int
main (int argc, char **argv)
{
  struct cli_globals g = { .ctx = { .root = HUSK_DEFAULT_ROOT } };
  struct husk_error *err = NULL;
  const struct cli_command *cmd;
  int ret;

  husk_log_set_prog ("husk");
  if (parse_globals (&g, argc, argv, &err) < 0 || open_log (&g, &err) < 0)
    goto fail;
  if (optind >= argc)
    {
      print_help (stderr);
      return 1;
    }
  cmd = find_command (argv[optind]);
  if (cmd == NULL)
    {
      husk_error_make (&err, 0, "unknown command `%s` (see husk --help)", argv[optind]);
      goto fail;
    }
  if (needs_cloned_binary (cmd->name))
    {
      /* After the re-exec /proc/self/exe is a memfd: remember where the
       * plugin is while the real path is still known. */
      cli_remember_plugin_dir ();
      if (container_ensure_cloned_binary (argv, &err) < 0)
        goto fail;
    }
  argc -= optind;
  argv += optind;
  optind = 0; /* reset getopt for the command */
  if (cmd->handler != cli_image && cmd->handler != cli_container && cmd->handler != cli_cdi
      && cmd->handler != cli_cdi_hook && cli_wants_help (argc, argv, cmd->name))
    return 0;
  ret = cmd->handler (&g, argc, argv, &err);
  if (ret >= 0)
    return ret;
fail:
  husk_error_report (&err, "husk");
  return 1;
}
