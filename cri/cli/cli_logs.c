/* husk container logs: a detached container's output from the CRI log
 * husk-monitor writes (`<RFC3339Nano> <stdout|stderr> <F|P> <text>`),
 * each stream back to its own fd, with podman's --follow, --tail,
 * --since and --timestamps. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cri/cli/cli.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define LOGS_USAGE                                                                                           \
  "usage: husk container logs [-f] [--tail N] [--since TIME] [-t] CONTAINER\n"                               \
  "  -f, --follow        keep printing what the container writes until it exits\n"                           \
  "      --tail N        only the last N lines\n"                                                            \
  "      --since TIME    only lines written since TIME: RFC 3339 (2024-01-02T15:04:05Z),\n"                  \
  "                      unix seconds, or a duration before now (10s, 5m, 2h, 1h30m)\n"                      \
  "  -t, --timestamps    each line with its time\n"                                                          \
  "  -h, --help          this text\n"

static long long
now_ns (void)
{
  struct timespec now;

  clock_gettime (CLOCK_REALTIME, &now);
  return now.tv_sec * 1000000000LL + now.tv_nsec;
}

struct logs_opts
{
  bool follow, timestamps;
  long long tail; /* -1: all */
  long long since_ns;
};

static void
emit (const struct containers_log_record *rec, const struct logs_opts *opts, bool *line_start)
{
  FILE *out = rec->is_stderr ? stderr : stdout;

  if (opts->timestamps && *line_start)
    fprintf (out, "%.*s ", (int) strcspn (rec->stamp, " "), rec->stamp);
  fwrite (rec->text, 1, rec->len, out);
  if (rec->full)
    fputc ('\n', out);
  *line_start = rec->full;
  fflush (out);
}

/* Prints the complete lines of TEXT[0..LEN) that pass --since, skipping
 * the first SKIP full lines (--tail); returns the bytes consumed. */
static size_t
print_records (const char *text, size_t len, const struct logs_opts *opts, long long skip, bool *line_start)
{
  size_t pos = 0;

  while (pos < len)
    {
      const char *nl = memchr (text + pos, '\n', len - pos);
      struct containers_log_record rec;

      if (nl == NULL)
        break;
      if (containers_log_parse_record (text + pos, (size_t) (nl - text - pos), &rec)
          && rec.ns >= opts->since_ns)
        {
          if (skip <= 0)
            emit (&rec, opts, line_start);
          else if (rec.full)
            skip--;
        }
      pos = (size_t) (nl - text) + 1;
    }
  return pos;
}

/* The full lines that pass --since: what --tail counts. */
static long long
count_lines (const char *text, size_t len, const struct logs_opts *opts)
{
  long long n = 0;
  size_t pos = 0;

  while (pos < len)
    {
      const char *nl = memchr (text + pos, '\n', len - pos);
      struct containers_log_record rec;

      if (nl == NULL)
        break;
      if (containers_log_parse_record (text + pos, (size_t) (nl - text - pos), &rec) && rec.full
          && rec.ns >= opts->since_ns)
        n++;
      pos = (size_t) (nl - text) + 1;
    }
  return n;
}

/* Rounds of 200 ms a stopped container's exit file may take to appear. */
#define EXIT_FILE_ROUNDS 50

/* Whether the monitor of stopped container ID is done: it writes the
 * exit file only once all the output is in the log. */
static bool
monitor_done (const struct container_cli_env *env, const char *id)
{
  struct container_record *rec = NULL;
  struct husk_error *ignored = NULL;
  bool done;
  int code;

  if (containers_lookup (&env->containers, id, &rec, &ignored) < 0)
    {
      husk_error_free (&ignored);
      return true; /* removed (--rm): nothing more will come */
    }
  done = !rec->detached || containers_exit_code (&env->containers, rec, &code, NULL);
  container_record_free (rec);
  return done;
}

/* Reads what the monitor appends from OFFSET on (the file is opened once
 * and read incrementally) until the container no longer runs and its
 * monitor wrote the exit file (or 10 s passed without one), then once
 * more for what the monitor drained after its init exited. */
static int
follow (const struct container_cli_env *env, const char *id, const char *path, off_t offset,
        const struct logs_opts *opts, bool *line_start, struct husk_error **err)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  cleanup_free char *pending = NULL;
  size_t len = 0, size = 0;
  bool last_round = false;
  int stopped_rounds = 0;

  if (fd < 0)
    return errno == ENOENT ? 0 : husk_error_make (err, errno, "open `%s`", path);
  if (lseek (fd, offset, SEEK_SET) < 0)
    return husk_error_make (err, errno, "seek `%s`", path);
  for (;;)
    {
      bool running = containers_running (&env->containers, id);
      ssize_t got;

      do
        {
          if (size - len < 65537)
            pending = xrealloc (pending, size = 2 * size + 65537);
          got = read (fd, pending + len, size - len - 1);
          if (got > 0)
            len += (size_t) got;
        }
      while (got > 0 || (got < 0 && errno == EINTR));
      if (got < 0)
        return husk_error_make (err, errno, "read `%s`", path);
      pending[len] = '\0';
      {
        size_t used = print_records (pending, len, opts, 0, line_start);
        memmove (pending, pending + used, len - used);
        len -= used;
      }
      if (last_round)
        return 0;
      last_round = !running && (monitor_done (env, id) || ++stopped_rounds >= EXIT_FILE_ROUNDS);
      poll (NULL, 0, running ? 100 : 200);
    }
}

int
container_cli_follow_log (const struct container_cli_env *env, const char *id, off_t offset,
                          struct husk_error **err)
{
  cleanup_free char *path = containers_log_path (&env->containers, id);
  struct logs_opts opts = { .follow = true, .tail = -1 };
  bool line_start = true;

  return follow (env, id, path, offset, &opts, &line_start, err);
}

int
container_cli_logs (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = {
    { "follow", no_argument, NULL, 'f' },      { "tail", required_argument, NULL, 'n' },
    { "since", required_argument, NULL, 's' }, { "timestamps", no_argument, NULL, 't' },
    { "help", no_argument, NULL, 'h' },        { NULL, 0, NULL, 0 },
  };
  static const struct cli_verb verb = { "logs", LOGS_USAGE, "ft", options };
  struct logs_opts opts = { .tail = -1 };
  struct container_record *rec = NULL;
  cleanup_free char *path = NULL;
  cleanup_free char *text = NULL;
  bool line_start = true;
  size_t len = 0, used;
  long long skip = 0;
  int c;

  optind = 1;
  while ((c = cli_getopt (&verb, argc, argv, err)) >= 0)
    if (c == 'f')
      opts.follow = true;
    else if (c == 't')
      opts.timestamps = true;
    else if (c == 'n' && husk_parse_int64 (optarg, 0, INT64_MAX, &opts.tail) < 0)
      return husk_error_make (err, 0, "container logs: --tail `%s`: expected a number of lines", optarg);
    else if (c == 's' && containers_log_parse_since (optarg, now_ns (), &opts.since_ns, err) < 0)
      return -1;
  if (c != -1)
    return c == CLI_HELP ? 0 : -1;
  if (argc - optind != 1)
    return husk_error_make (err, 0,
                            "container logs: expected one container (see husk container logs --help)");
  if (containers_lookup (&env->containers, argv[optind], &rec, err) < 0)
    return -1;
  path = containers_log_path (&env->containers, rec->id);
  if (!rec->detached || access (path, F_OK) < 0)
    {
      /* A foreground container wrote to the terminal. */
      container_record_free (rec);
      return 0;
    }
  if (husk_read_file (path, &text, &len, err) < 0)
    return container_record_free (rec), -1;
  if (opts.tail >= 0)
    skip = count_lines (text, len, &opts) - opts.tail;
  used = print_records (text, len, &opts, skip, &line_start);
  if (opts.follow && follow (env, rec->id, path, (off_t) used, &opts, &line_start, err) < 0)
    return container_record_free (rec), -1;
  container_record_free (rec);
  return 0;
}
