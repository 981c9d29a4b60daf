/* husk list and husk ps. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cli/cli.h"

static int
parse_format (const char *command, int argc, char **argv, bool *json, bool *quiet, struct husk_error **err)
{
  static const struct option options[] = {
    { "format", required_argument, NULL, 'f' },
    { "quiet", no_argument, NULL, 'q' },
    { NULL, 0, NULL, 0 },
  };
  int c;

  opterr = 0;
  while ((c = getopt_long_only (argc, argv, "+:f:q", options, NULL)) != -1)
    switch (c)
      {
      case 'f':
        if (strcmp (optarg, "json") != 0 && strcmp (optarg, "table") != 0)
          return cli_usage_error (command, err, "--format `%s`: must be table or json", optarg);
        *json = strcmp (optarg, "json") == 0;
        break;
      case 'q':
        if (quiet == NULL)
          return cli_usage_error (command, err, "unknown option `%s`", argv[optind - 1]);
        *quiet = true;
        break;
      default:
        return cli_bad_option (command, c, argv, err);
      }
  return 0;
}

static void
print_entry (const struct container_state *state, enum container_status status, bool json, json_t *array)
{
  if (json)
    {
      /* runc's fields, in its order. */
      json_array_append_new (
          array, json_pack ("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:s}", "ociVersion", STATE_OCI_VERSION, "id",
                            state->id, "pid", (json_int_t) (status == STATUS_STOPPED ? 0 : state->pid),
                            "status", container_status_name (status), "bundle",
                            state->bundle ? state->bundle : "", "rootfs", state->rootfs ? state->rootfs : "",
                            "created", state->created ? state->created : "", "owner", "root"));
      return;
    }
  printf ("%-20s %-8d %-10s %-40s %-32s %s\n", state->id, status == STATUS_STOPPED ? 0 : (int) state->pid,
          container_status_name (status), state->bundle ? state->bundle : "",
          state->created ? state->created : "", "root");
}

int
cli_list (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  cleanup_dir DIR *dir = NULL;
  bool json = false, quiet = false;
  json_t *array;
  struct dirent *de;

  if (parse_format ("list", argc, argv, &json, &quiet, err) < 0)
    return -1;
  if (optind < argc)
    return cli_usage_error ("list", err, "unexpected argument `%s`", argv[optind]);
  dir = opendir (g->ctx.root);
  if (dir == NULL && errno != ENOENT)
    return husk_error_make (err, errno, "list `%s`", g->ctx.root);
  /* only now: the errors above would leak it */
  array = json_array ();
  if (!json && !quiet)
    printf ("%-20s %-8s %-10s %-40s %-32s %s\n", "ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER");
  while (dir && (de = readdir (dir)) != NULL)
    {
      struct container_state *state = NULL;
      struct husk_error *ignored = NULL;

      if (de->d_name[0] == '.' || state_load (g->ctx.root, de->d_name, &state, &ignored) < 0)
        {
          husk_error_free (&ignored);
          continue;
        }
      if (quiet)
        printf ("%s\n", state->id);
      else
        print_entry (state, state_status (state), json, array);
      state_free (state);
    }
  if (json)
    {
      char *text = json_dumps (array, JSON_COMPACT);
      printf ("%s\n", text);
      free (text);
    }
  json_decref (array);
  return 0;
}

static bool
pid_in (pid_t pid, const pid_t *pids, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (pids[i] == pid)
      return true;
  return false;
}

/* Starts ps(1) with ARGV (no shell: the user's arguments stay arguments)
 * and returns a stream of its stdout. */
static FILE *
start_ps (char **ps_argv, pid_t *pid, struct husk_error **err)
{
  int pipe_fds[2];
  FILE *out;

  if (pipe2 (pipe_fds, O_CLOEXEC) < 0)
    return husk_error_make (err, errno, "ps: pipe"), NULL;
  fflush (NULL);
  *pid = fork ();
  if (*pid < 0)
    {
      husk_error_make (err, errno, "ps: fork");
      close (pipe_fds[0]);
      close (pipe_fds[1]);
      return NULL;
    }
  if (*pid == 0)
    {
      dup2 (pipe_fds[1], STDOUT_FILENO);
      execvp (ps_argv[0], ps_argv);
      fprintf (stderr, "husk: ps: exec `%s`: %s\n", ps_argv[0], strerror (errno));
      _exit (127);
    }
  close (pipe_fds[1]);
  out = fdopen (pipe_fds[0], "r");
  if (out == NULL)
    close (pipe_fds[0]);
  return out;
}

/* Keeps the header and the lines whose PID column is one of PIDS. */
static int
filter_ps (FILE *ps, const pid_t *pids, size_t n, struct husk_error **err)
{
  char line[4096];
  int pid_column = -1;

  while (fgets (line, sizeof line, ps))
    {
      char copy[4096], *tok, *save = NULL;
      int col = 0;

      strcpy (copy, line);
      if (pid_column < 0)
        {
          for (tok = strtok_r (copy, " \t\n", &save); tok; tok = strtok_r (NULL, " \t\n", &save), col++)
            if (strcmp (tok, "PID") == 0)
              pid_column = col;
          if (pid_column < 0)
            return husk_error_make (err, 0, "ps: its output has no PID column (add -o pid)");
          fputs (line, stdout);
          continue;
        }
      for (tok = strtok_r (copy, " \t\n", &save); tok && col < pid_column;
           tok = strtok_r (NULL, " \t\n", &save))
        col++;
      if (tok && pid_in ((pid_t) atoi (tok), pids, n))
        fputs (line, stdout);
    }
  return 0;
}

/* As runc: run ps(1) with the given args (default -ef) and keep the header
 * plus the lines of the container's pids.  Returns ps's exit status. */
static int
ps_table (const pid_t *pids, size_t n, int argc, char **argv, struct husk_error **err)
{
  cleanup_free char **ps_argv = xcalloc ((size_t) argc + 2, sizeof *ps_argv);
  FILE *ps;
  pid_t pid;
  int status = 0, ret;

  ps_argv[0] = (char *) "ps";
  for (int i = 0; i < argc; i++)
    ps_argv[i + 1] = argv[i];
  if (argc == 0)
    ps_argv[1] = (char *) "-ef";
  ps = start_ps (ps_argv, &pid, err);
  if (ps == NULL)
    return -1;
  ret = filter_ps (ps, pids, n, err);
  fclose (ps);
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (ret < 0)
    return -1;
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    return 0;
  if (WIFSIGNALED (status))
    return husk_error_make (err, 0, "ps: killed by signal %d", WTERMSIG (status));
  fprintf (stderr, "husk: ps: exited with status %d\n", WEXITSTATUS (status));
  return WEXITSTATUS (status);
}

int
cli_ps (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  cleanup_free pid_t *pids = NULL;
  bool json = false;
  size_t n = 0;
  const char *id;

  if (parse_format ("ps", argc, argv, &json, NULL, err) < 0)
    return -1;
  if (optind >= argc)
    return cli_usage_error ("ps", err, "missing container id");
  id = argv[optind];
  if (container_pids (&g->ctx, id, &pids, &n, err) < 0)
    return -1;
  if (json)
    {
      printf ("[");
      for (size_t i = 0; i < n; i++)
        printf ("%s%d", i ? "," : "", (int) pids[i]);
      printf ("]\n");
      return 0;
    }
  return ps_table (pids, n, argc - optind - 1, argv + optind + 1, err);
}
