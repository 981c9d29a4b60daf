/* husk container start|restart|attach|kill|wait|stop|rm|prune: a
 * container's life after run, as podman's verbs of the same names. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cri/container/attach.h"
#include "cri/cli/cli.h"
#include "cri/container/containers.h"
#include "husk/cleanup.h"
#include "husk/unix_socket.h"
#include "husk/util.h"
#include "runtime/container.h"

static const struct option help_only[] = { { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };

/* Parses a verb with no options but --help; returns optind, or CLI_HELP
 * or CLI_ERROR. */
static int
parse_plain (const struct cli_verb *verb, int argc, char **argv, struct husk_error **err)
{
  int c;

  optind = 1;
  while ((c = cli_getopt (verb, argc, argv, err)) >= 0)
    ;
  if (c != -1)
    return c;
  if (optind >= argc)
    return husk_error_make (err, 0,
                            "container %s: expected at least one container (see husk container %s --help)",
                            verb->name, verb->name);
  return optind;
}

/* Writes all of DATA to FD; false when FD is gone. */
static bool
write_all (int fd, const char *data, size_t len)
{
  while (len > 0)
    {
      ssize_t n = write (fd, data, len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return false;
      data += n;
      len -= (size_t) n;
    }
  return true;
}

/* How long a stopped container's exit code may take to appear: the
 * monitor writes its exit file a moment after the process ends. */
#define EXIT_FILE_WAIT_POLLS 100 /* of 100 ms */

/* The exit code of container ID once it is no longer running. */
static int
wait_exit_code (const struct container_cli_env *env, const char *id, int *code, struct husk_error **err)
{
  for (int stopped_polls = 0;; poll (NULL, 0, 100))
    {
      struct container_record *rec = NULL;
      bool running, known;

      if (containers_lookup (&env->containers, id, &rec, err) < 0)
        return -1;
      running = containers_running (&env->containers, rec->id);
      known = !running && containers_exit_code (&env->containers, rec, code, NULL);
      container_record_free (rec);
      if (known)
        return 0;
      /* A monitor killed before it wrote the exit file leaves none. */
      if (!running && ++stopped_polls >= EXIT_FILE_WAIT_POLLS)
        return husk_error_make (
            err, 0, "container %s: stopped, but its exit code was never recorded (monitor gone?)", id);
    }
}

/* Copies the container's output from the attach socket FD to our stdout
 * and stderr until it exits; returns its exit code. */
static int
attach_stream (const struct container_cli_env *env, const char *id, int fd, struct husk_error **err)
{
  cleanup_free char *buf = xmalloc (ATTACH_DATA_MAX + 1);
  ssize_t n;

  while ((n = cri_attach_receive (fd, buf, ATTACH_DATA_MAX + 1)) > 0)
    {
      if (buf[0] == ATTACH_OUT_EXIT)
        {
          char code[16] = { 0 };
          long long value;

          memcpy (code, buf + 1, (size_t) n - 1 < sizeof code - 1 ? (size_t) n - 1 : sizeof code - 1);
          close (fd);
          if (husk_parse_int64 (code, 0, 255, &value) < 0)
            return husk_error_make (err, 0, "attach %.12s: the monitor sent exit code `%s`", id, code);
          return (int) value;
        }
      if (!write_all (buf[0] == ATTACH_OUT_STDERR ? 2 : 1, buf + 1, (size_t) n - 1))
        break;
    }
  close (fd);
  /* The monitor dropped us (a reader too slow) or went away: say so, then
   * wait for the container as `wait` does. */
  fprintf (stderr, "husk: attach %.12s: the monitor closed the connection before the container exited%s\n",
           id, n < 0 ? " (read error)" : "");
  {
    int code = 0;
    if (wait_exit_code (env, id, &code, err) < 0)
      return -1;
    return code;
  }
}

#define START_USAGE                                                                                          \
  "usage: husk container start [-a] CONTAINER...\n"                                                          \
  "  -a, --attach  stay with the container: its output (from its log) here, its exit code ours\n"            \
  "  -h, --help    this text\n"                                                                              \
  "It starts again under husk-monitor (as run -d does), with its network made anew.\n"

static int
verb_start (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[]
      = { { "attach", no_argument, NULL, 'a' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
  static const struct cli_verb verb = { "start", START_USAGE, "a", options };
  bool attach = false;
  int c;

  optind = 1;
  while ((c = cli_getopt (&verb, argc, argv, err)) >= 0)
    attach = true;
  if (c != -1)
    return c == CLI_HELP ? 0 : -1;
  if (optind >= argc)
    return husk_error_make (err, 0, "container start: expected at least one container");
  if (attach && optind + 1 != argc)
    return husk_error_make (err, 0, "container start: --attach takes one container, not %d", argc - optind);
  for (; optind < argc; optind++)
    {
      struct container_record *rec = NULL;
      cleanup_free char *log = NULL;
      struct stat st;
      int ret, code = 0;

      if (containers_lookup (&env->containers, argv[optind], &rec, err) < 0)
        return -1;
      /* -a: its output from the log the monitor writes, where none of it
       * is lost (the attach socket serves a client only once the monitor
       * has accepted it), from where the log ends now. */
      log = containers_log_path (&env->containers, rec->id);
      if (stat (log, &st) < 0)
        st.st_size = 0;
      ret = containers_start_again (&env->containers, rec->id, err);
      if (ret == 0 && attach && (ret = container_cli_follow_log (env, rec->id, st.st_size, err)) == 0
          && (ret = wait_exit_code (env, rec->id, &code, err)) == 0)
        ret = code;
      else if (ret == 0 && !attach)
        printf ("%s\n", argv[optind]);
      container_record_free (rec);
      if (ret < 0 || attach)
        return ret;
    }
  return 0;
}

#define ATTACH_USAGE                                                                                         \
  "usage: husk container attach CONTAINER\n"                                                                 \
  "  -h, --help  this text\n"                                                                                \
  "The output of a running container (started with run -d or start) until it exits;\n"                       \
  "the exit status is the container's.  Its stdin is not forwarded; Ctrl-C leaves it running.\n"

static int
verb_attach (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  static const struct cli_verb verb = { "attach", ATTACH_USAGE, "", help_only };
  struct container_record *rec = NULL;
  cleanup_free char *path = NULL;
  int first = parse_plain (&verb, argc, argv, err), fd, ret = -1;

  if (first < 0)
    return first == CLI_HELP ? 0 : -1;
  if (first + 1 != argc)
    return husk_error_make (err, 0, "container attach: expected one container");
  if (containers_lookup (&env->containers, argv[first], &rec, err) < 0)
    return -1;
  if (!containers_running (&env->containers, rec->id) || !rec->detached)
    ret = husk_error_make (err, 0,
                           "container attach: %s is not running: you can only attach to running containers",
                           argv[first]);
  else
    {
      path = containers_attach_path (&env->containers, rec->id);
      fd = husk_unix_connect (path, SOCK_SEQPACKET, err);
      if (fd < 0)
        husk_error_wrap (err, "container attach %s (started by an older husk, without an attach socket?)",
                         argv[first]);
      else
        ret = attach_stream (env, rec->id, fd, err);
    }
  container_record_free (rec);
  return ret;
}

#define KILL_USAGE                                                                                           \
  "usage: husk container kill [-s SIGNAL] CONTAINER...\n"                                                    \
  "  -s, --signal SIGNAL  the signal, by name (KILL, SIGHUP) or number (default KILL)\n"                     \
  "  -h, --help           this text\n"

static int
verb_kill (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = { { "signal", required_argument, NULL, 's' },
                                           { "help", no_argument, NULL, 'h' },
                                           { NULL, 0, NULL, 0 } };
  static const struct cli_verb verb = { "kill", KILL_USAGE, "s:", options };
  struct runtime_ctx rt = { .root = env->containers.runtime_root };
  int sig = SIGKILL, c;

  optind = 1;
  while ((c = cli_getopt (&verb, argc, argv, err)) >= 0)
    if (container_parse_signal (optarg, &sig, err) < 0)
      return husk_error_wrap (err, "container kill: --signal `%s`", optarg);
  if (c != -1)
    return c == CLI_HELP ? 0 : -1;
  if (optind >= argc)
    return husk_error_make (err, 0, "container kill: expected at least one container");
  for (; optind < argc; optind++)
    {
      struct container_record *rec = NULL;
      int ret = 0;

      if (containers_lookup (&env->containers, argv[optind], &rec, err) < 0)
        return -1;
      if (!containers_running (&env->containers, rec->id))
        ret = husk_error_make (err, 0, "container kill: %s is not running: can only kill running containers",
                               argv[optind]);
      else
        ret = container_kill (&rt, rec->id, sig, false, err);
      container_record_free (rec);
      if (ret < 0)
        return -1;
      printf ("%s\n", argv[optind]);
    }
  return 0;
}

#define WAIT_USAGE                                                                                           \
  "usage: husk container wait CONTAINER...\n"                                                                \
  "  -h, --help  this text\n"                                                                                \
  "Waits until each container exits and prints its exit code.\n"

static int
verb_wait (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  static const struct cli_verb verb = { "wait", WAIT_USAGE, "", help_only };
  int first = parse_plain (&verb, argc, argv, err);

  if (first < 0)
    return first == CLI_HELP ? 0 : -1;
  for (int i = first; i < argc; i++)
    {
      int code = 0;

      if (wait_exit_code (env, argv[i], &code, err) < 0)
        return -1;
      printf ("%d\n", code);
      fflush (stdout);
    }
  return 0;
}

/* podman's line when the stop signal was not enough. */
static int
stop_one (const struct container_cli_env *env, const struct container_record *rec, int timeout,
          struct husk_error **err)
{
  bool killed = false;
  int ret = containers_stop (&env->containers, rec->id, timeout, &killed, err);

  if (killed)
    fprintf (stderr,
             "husk: warning: StopSignal %s failed to stop container %s in %d seconds, resorting to SIGKILL\n",
             rec->stop_signal ? rec->stop_signal : "SIGTERM", rec->name, timeout);
  return ret;
}

#define STOP_USAGE                                                                                           \
  "usage: husk container stop [-t SECONDS] CONTAINER...\n"                                                   \
  "  -t, --time SECONDS  wait this long after the stop signal before SIGKILL (default 10)\n"                 \
  "  -h, --help          this text\n"
#define RESTART_USAGE                                                                                        \
  "usage: husk container restart [-t SECONDS] CONTAINER...\n"                                                \
  "  -t, --time SECONDS  stop: wait this long after the stop signal before SIGKILL (default 10)\n"           \
  "  -h, --help          this text\n"

static int
verb_stop_restart (const struct container_cli_env *env, bool restart, int argc, char **argv,
                   struct husk_error **err)
{
  static const struct option options[] = { { "time", required_argument, NULL, 't' },
                                           { "help", no_argument, NULL, 'h' },
                                           { NULL, 0, NULL, 0 } };
  static const struct cli_verb stop_verb = { "stop", STOP_USAGE, "t:", options };
  static const struct cli_verb restart_verb = { "restart", RESTART_USAGE, "t:", options };
  const struct cli_verb *verb = restart ? &restart_verb : &stop_verb;
  int timeout = 10, c;
  long long n;

  optind = 1;
  while ((c = cli_getopt (verb, argc, argv, err)) >= 0)
    if (husk_parse_int64 (optarg, 0, 3600, &n) == 0)
      timeout = (int) n;
    else
      return husk_error_make (err, 0, "container %s: -t `%s`: expected seconds (0-3600)", verb->name, optarg);
  if (c != -1)
    return c == CLI_HELP ? 0 : -1;
  if (optind >= argc)
    return husk_error_make (err, 0, "container %s: expected at least one container", verb->name);
  for (; optind < argc; optind++)
    {
      struct container_record *rec = NULL;
      int ret;

      if (containers_lookup (&env->containers, argv[optind], &rec, err) < 0)
        return -1;
      ret = stop_one (env, rec, timeout, err);
      if (ret == 0 && restart)
        ret = containers_start_again (&env->containers, rec->id, err);
      container_record_free (rec);
      if (ret < 0)
        return -1;
      printf ("%s\n", argv[optind]);
    }
  return 0;
}

#define RM_USAGE                                                                                             \
  "usage: husk container rm [-f] [-a] CONTAINER...\n"                                                        \
  "  -f, --force  stop (SIGKILL) a running container first\n"                                                \
  "  -a, --all    every container\n"                                                                         \
  "  -h, --help   this text\n"

/* The ids of every container (ALL) or of the not running ones. */
static char **
container_ids (const struct container_cli_env *env, bool all, struct husk_error **err)
{
  struct container_record **recs = NULL;
  char **ids = xcalloc (1, sizeof (char *));
  size_t n = 0;

  if (containers_list (&env->containers, &recs, &n, err) < 0)
    {
      free (ids);
      return NULL;
    }
  for (size_t i = 0; i < n; i++)
    if (all || !containers_running (&env->containers, recs[i]->id))
      ids = husk_strv_append (ids, recs[i]->id);
  container_records_free (recs, n);
  return ids;
}

static int
remove_each (const struct container_cli_env *env, char **names, bool force, struct husk_error **err)
{
  for (; *names; names++)
    {
      struct container_record *rec = NULL;
      int ret;

      if (containers_lookup (&env->containers, *names, &rec, err) < 0)
        return -1;
      ret = containers_remove (&env->containers, rec->id, force, err);
      container_record_free (rec);
      if (ret < 0)
        return -1;
      printf ("%s\n", *names);
    }
  return 0;
}

static int
verb_rm (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = { { "force", no_argument, NULL, 'f' },
                                           { "all", no_argument, NULL, 'a' },
                                           { "help", no_argument, NULL, 'h' },
                                           { NULL, 0, NULL, 0 } };
  static const struct cli_verb verb = { "rm", RM_USAGE, "fa", options };
  bool force = false, all = false;
  cleanup_strv char **ids = NULL;
  int c;

  optind = 1;
  while ((c = cli_getopt (&verb, argc, argv, err)) >= 0)
    if (c == 'f')
      force = true;
    else
      all = true;
  if (c != -1)
    return c == CLI_HELP ? 0 : -1;
  if (all && optind < argc)
    return husk_error_make (err, 0, "container rm: --all and a container `%s` both given", argv[optind]);
  if (!all && optind >= argc)
    return husk_error_make (err, 0, "container rm: expected at least one container (or --all)");
  if (!all)
    return remove_each (env, argv + optind, force, err);
  ids = container_ids (env, true, err);
  return ids ? remove_each (env, ids, force, err) : -1;
}

#define PRUNE_USAGE                                                                                          \
  "usage: husk container prune [-f]\n"                                                                       \
  "  -f, --force  accepted for podman's command line (husk does not ask)\n"                                  \
  "  -h, --help   this text\n"                                                                               \
  "Removes every container that is not running, and prints their ids.\n"

static int
verb_prune (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[]
      = { { "force", no_argument, NULL, 'f' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
  static const struct cli_verb verb = { "prune", PRUNE_USAGE, "f", options };
  cleanup_strv char **ids = NULL;
  int c;

  optind = 1;
  while ((c = cli_getopt (&verb, argc, argv, err)) >= 0)
    ;
  if (c != -1)
    return c == CLI_HELP ? 0 : -1;
  if (optind < argc)
    return husk_error_make (err, 0, "container prune: unexpected argument `%s`", argv[optind]);
  ids = container_ids (env, false, err);
  return ids ? remove_each (env, ids, false, err) : -1;
}

int
container_cli_life (const struct container_cli_env *env, const char *verb, int argc, char **argv,
                    struct husk_error **err)
{
  if (strcmp (verb, "start") == 0)
    return verb_start (env, argc, argv, err);
  if (strcmp (verb, "restart") == 0)
    return verb_stop_restart (env, true, argc, argv, err);
  if (strcmp (verb, "stop") == 0)
    return verb_stop_restart (env, false, argc, argv, err);
  if (strcmp (verb, "attach") == 0)
    return verb_attach (env, argc, argv, err);
  if (strcmp (verb, "kill") == 0)
    return verb_kill (env, argc, argv, err);
  if (strcmp (verb, "wait") == 0)
    return verb_wait (env, argc, argv, err);
  if (strcmp (verb, "rm") == 0)
    return verb_rm (env, argc, argv, err);
  if (strcmp (verb, "prune") == 0)
    return verb_prune (env, argc, argv, err);
  return CLI_UNKNOWN_VERB;
}
