/* husk: an OCI runtime with runc's command line.  Global options come first
 * (`husk --root DIR --log FILE create ...`), then a command from the table. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "husk/asan_options.h"
#include "husk/cli_opts.h"
#include "husk/util.h"
#include "runtime/cli/cli.h"

/* The options each command's parser (create.c, exec.c, ...) takes, for
 * --help, the completion and the man pages; test_image_cli checks that
 * every option listed here is one its parser knows. */
#define CREATE_OPTS                                                                                          \
  { "bundle", 'b', "DIR", "the bundle holding config.json (default: the current directory)" },               \
      { "console-socket", 0, "PATH", "send the pty master of a terminal container to this unix socket" },    \
      { "pid-file", 0, "PATH", "write the container's pid (on the host) to PATH" },                          \
      { "no-pivot", 0, NULL, "move the root with MS_MOVE instead of pivot_root (a ramdisk root)" },          \
      { "no-new-keyring", 0, NULL, "keep the caller's session keyring" },                                    \
  {                                                                                                          \
    "preserve-fds", 0, "N", "pass N more file descriptors, from fd 3, to the process"                        \
  }
static const struct cli_opt create_opts[] = { CREATE_OPTS, { NULL, 0, NULL, NULL } };
static const struct cli_opt run_opts[] = {
  CREATE_OPTS,
  { "detach", 'd', NULL, "return once the process started, not when it exits" },
  { NULL, 0, NULL, NULL },
};
static const struct cli_opt kill_opts[] = {
  { "all", 'a', NULL, "signal every process of the container, not only its init" },
  { NULL, 0, NULL, NULL },
};
static const struct cli_opt delete_opts[] = {
  { "force", 'f', NULL, "kill a running container first (SIGKILL)" },
  { NULL, 0, NULL, NULL },
};
static const struct cli_opt list_opts[] = {
  { "format", 'f', "table|json", "the output format (default table)" },
  { "quiet", 'q', NULL, "print only the container ids" },
  { NULL, 0, NULL, NULL },
};
static const struct cli_opt ps_opts[] = {
  { "format", 'f', "table|json", "table: ps(1) output (with PS ARGS); json: the pids" },
  { NULL, 0, NULL, NULL },
};
static const struct cli_opt exec_opts[] = {
  { "process", 'p', "FILE", "the process (an OCI process JSON) instead of COMMAND and options" },
  { "tty", 't', NULL, "give the process a terminal" },
  { "detach", 'd', NULL, "return once the process started" },
  { "env", 'e', "KEY=VALUE", "set an environment variable (repeatable)" },
  { "cwd", 0, "DIR", "the working directory in the container" },
  { "user", 'u', "UID[:GID]", "the user to run as" },
  { "cap", 'c', "CAP", "add a capability (repeatable)" },
  { "additional-gids", 'g', "GID", "add a supplementary group (repeatable)" },
  { "pid-file", 0, "PATH", "write the process's pid to PATH" },
  { "console-socket", 0, "PATH", "send the pty master to this unix socket (with --tty)" },
  { "console-size", 0, "ROWSxCOLS", "the terminal's size from the start (with --tty; a husk extension)" },
  { "no-new-privs", 0, NULL, "set no_new_privs for the process" },
  { "preserve-fds", 0, "N", "pass N more file descriptors, from fd 3, to the process" },
  { "apparmor", 0, "PROFILE", "the process's AppArmor profile (default: the container's)" },
  { NULL, 0, NULL, NULL },
};
static const struct cli_opt spec_opts[] = {
  { "bundle", 'b', "DIR", "write config.json in DIR (default: the current directory)" },
  { "rootless", 0, NULL, "a spec for a rootless container (user namespace)" },
  { NULL, 0, NULL, NULL },
};
static const struct cli_opt update_opts[] = {
  { "resources", 'r', "FILE|-", "the OCI linux.resources JSON to apply (- for stdin)" },
  { "memory", 0, "N", "memory limit in bytes (k, m, g suffixes)" },
  { "memory-swap", 0, "N", "memory plus swap limit in bytes" },
  { "memory-reservation", 0, "N", "memory soft limit in bytes" },
  { "cpu-quota", 0, "N", "CPU time in microseconds per period" },
  { "cpu-period", 0, "N", "the CFS period in microseconds" },
  { "cpu-share", 0, "N", "CPU shares (relative weight, cgroup v1)" },
  { "cpu-weight", 0, "N", "CPU weight 1-10000 (cgroup v2)" },
  { "cpu-burst", 0, "N", "CPU burst in microseconds" },
  { "cpuset-cpus", 0, "LIST", "the CPUs to run on (0-3,5)" },
  { "cpuset-mems", 0, "LIST", "the memory nodes to use" },
  { "pids-limit", 0, "N", "the most processes" },
  { "blkio-weight", 0, "N", "block IO weight 10-1000" },
  { NULL, 0, NULL, NULL },
};
static const struct cli_opt events_opts[] = {
  { "stats", 0, NULL, "print one resource usage sample and exit" },
  { "interval", 0, "DURATION", "seconds between samples (default 5s)" },
  { NULL, 0, NULL, NULL },
};

static const struct cli_opt checkpoint_opts[] = {
  { "image-path", 0, "DIR", "write the CRIU image here (default: ./checkpoint; must be empty)" },
  { "work-path", 0, "DIR", "criu's logs and work files (default: the image directory)" },
  { "leave-running", 0, NULL, "keep the container running after the dump" },
  { "tcp-established", 0, NULL, "dump established TCP connections" },
  { "file-locks", 0, NULL, "dump file locks" },
  { "ext-unix-sk", 0, NULL, "allow unix sockets connected outside the container" },
  { "shell-job", 0, NULL, "the process is a shell job (its session/tty is outside)" },
  { "manage-cgroups-mode", 0, "soft|full|strict|ignore",
    "criu's cgroup mode (default ignore: husk places the cgroup)" },
  { NULL, 0, NULL, NULL },
};
static const struct cli_opt restore_opts[] = {
  { "image-path", 0, "DIR", "the CRIU image to restore (default: ./checkpoint)" },
  { "work-path", 0, "DIR", "criu's logs and work files (default: the image directory)" },
  { "bundle", 'b', "DIR", "the bundle holding config.json (default: the current directory)" },
  { "detach", 'd', NULL, "return once the container runs" },
  { "pid-file", 0, "PATH", "write the restored init's pid (on the host) to PATH" },
  { "console-socket", 0, "PATH", "not supported: a console is refused" },
  { "no-pivot", 0, NULL, "accepted for runc's command line; criu makes the root" },
  { "tcp-established", 0, NULL, "restore established TCP connections" },
  { "file-locks", 0, NULL, "restore file locks" },
  { "ext-unix-sk", 0, NULL, "allow unix sockets connected outside the container" },
  { "shell-job", 0, NULL, "the process is a shell job" },
  { "manage-cgroups-mode", 0, "soft|full|strict|ignore",
    "criu's cgroup mode (default ignore: husk places the cgroup)" },
  { NULL, 0, NULL, NULL },
};

static const struct cli_command commands[] = {
  { "create", cli_create,
    "create [--bundle DIR] [--console-socket PATH] [--pid-file PATH] [--no-pivot] "
    "[--no-new-keyring] [--preserve-fds N] ID",
    "create a container, stopped before its process", "ID", create_opts },
  { "start", cli_start, "start ID", "run the process of a created container", "ID", NULL },
  { "run", cli_run, "run [create options] [--detach] ID", "create and start a container", "ID", run_opts },
  { "state", cli_state, "state ID", "print the OCI state of a container", "ID", NULL },
  { "kill", cli_kill, "kill [--all] ID [SIGNAL]", "send a signal (default SIGTERM) to a container",
    "ID [SIGNAL]", kill_opts },
  { "delete", cli_delete, "delete [--force] ID", "delete a container and everything it created", "ID",
    delete_opts },
  { "list", cli_list, "list [--format table|json] [--quiet]", "list containers", "", list_opts },
  { "exec", cli_exec, "exec [--process FILE | options] ID [COMMAND [ARG...]]", "run a process in a container",
    "ID [COMMAND [ARG...]]", exec_opts },
  { "exec-helper", cli_exec_helper, "exec-helper",
    "fork ExecSync's processes for huskd (started by huskd, control socket on fd 3)", "", NULL },
  { "ps", cli_ps, "ps [--format table|json] ID [PS ARGS...]", "show the processes of a container",
    "ID [PS ARGS...]", ps_opts },
  { "spec", cli_spec, "spec [--bundle DIR] [--rootless]", "write a default config.json", "", spec_opts },
  { "features", cli_features, "features", "print the runtime's features (JSON)", "", NULL },
  { "update", cli_update,
    "update [--resources FILE|-] [--memory N] [--memory-swap N] [--memory-reservation N] [--cpu-quota N] "
    "[--cpu-period N] [--cpu-share N] [--cpu-weight N] [--cpu-burst N] [--cpuset-cpus LIST] [--cpuset-mems "
    "LIST] "
    "[--pids-limit N] [--blkio-weight N] ID",
    "change the resource limits of a running container", "ID", update_opts },
  { "pause", cli_pause, "pause ID", "freeze every process of a container", "ID", NULL },
  { "resume", cli_resume, "resume ID", "thaw a paused container", "ID", NULL },
  { "events", cli_events, "events [--stats] [--interval DURATION] ID",
    "print resource usage (one sample with --stats) and OOM events", "ID", events_opts },
  { "checkpoint", cli_checkpoint,
    "checkpoint [--image-path DIR] [--work-path DIR] [--leave-running] [--tcp-established] [--file-locks] "
    "[--ext-unix-sk] [--shell-job] [--manage-cgroups-mode MODE] ID",
    "dump a running container with CRIU", "ID", checkpoint_opts },
  { "restore", cli_restore,
    "restore [--image-path DIR] [--bundle DIR] [--detach] [--pid-file PATH] [checkpoint options] ID",
    "make a container from a bundle and a CRIU image", "ID", restore_opts },
  { "image", cli_image, "image [--root DIR] pull|ls|inspect|rm|import|export ...",
    "manage images (debug CLI)", NULL, NULL },
  { "container", cli_container, "container [--root DIR] run|ls|exec|logs|start|stop|rm|cp ...",
    "run images directly, no daemon (debug CLI)", NULL, NULL },
  { "cdi-hook", cli_cdi_hook, "cdi-hook update-ldcache|create-symlinks|chmod [options]",
    "CDI createContainer hooks (state JSON on stdin)", NULL, NULL },
  { "cdi", cli_cdi, "cdi generate nvidia|list ...", "write a CDI spec for NVIDIA GPUs, list CDI devices",
    NULL, NULL },
  { "completion", cli_completion, "completion bash",
    "print a bash completion script (source <(husk completion bash))", NULL, NULL },
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

/* A command with an option table prints it as every verb does
 * (husk/cli_opts.h); the others their usage line. */
static void
print_command_help (const struct cli_command *cmd, const char *command)
{
  if (cmd && cmd->args)
    {
      char path[64];
      snprintf (path, sizeof path, "%s", cmd->name);
      struct cli_verb verb = { path, cmd->args, cmd->summary, cmd->opts };
      cli_verb_print_help (&verb, stdout);
      return;
    }
  printf ("usage: husk %s\n\n%s\n", cmd ? cmd->usage : command, cmd ? cmd->summary : "");
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
          print_command_help (cmd, command);
          return true;
        }
      if (argv[i][0] != '-')
        break; /* exec's COMMAND may take -h itself */
    }
  return false;
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
         || strcmp (name, "exec-helper") == 0;
}

int
main (int argc, char **argv)
{
  struct cli_globals g = { .ctx = { .root = HUSK_DEFAULT_ROOT } };
  struct husk_error *err = NULL;
  const struct cli_command *cmd;
  int ret;

  husk_log_set_prog ("husk");
  /* A caller that ignores SIGCHLD (some supervisors and scripts do) has
   * the kernel reap our children for us: run and exec would wait forever
   * for an exit status that never comes (crun hangs there; runc does not). */
  signal (SIGCHLD, SIG_DFL);
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
    if (container_ensure_cloned_binary (argv, &err) < 0)
      goto fail;
  argc -= optind;
  argv += optind;
  optind = 0; /* reset getopt for the command */
  cli_set_command (cmd);
  if (cmd->handler != cli_image && cmd->handler != cli_container && cmd->handler != cli_cdi
      && cmd->handler != cli_cdi_hook && cli_wants_help (argc, argv, cmd->name))
    return 0;
  ret = cmd->handler (&g, argc, argv, &err);
  if (ret >= 0)
    return ret;
  /* The debug CLI's own failures (its plugin not found) exit as podman's:
   * 125; the OCI runtime's commands as runc's: 1. */
  if (cmd->handler == cli_image || cmd->handler == cli_container)
    {
      husk_error_report (&err, "husk");
      return 125;
    }
fail:
  husk_error_report (&err, "husk");
  return 1;
}
