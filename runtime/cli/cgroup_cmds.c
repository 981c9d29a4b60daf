/* husk update, pause, resume and events: the commands that work on a
 * running container's cgroup. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "husk/cgroup_stats.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/container_cgroup.h"
#include "runtime/cli/cli.h"

static int
no_options (const char *command, int argc, char **argv, const char **id, struct husk_error **err)
{
  static const struct option none[] = { { NULL, 0, NULL, 0 } };

  opterr = 0;
  if (getopt_long_only (argc, argv, "+:", none, NULL) != -1)
    return cli_usage_error (command, err, "unknown option `%s`", argv[optind - 1]);
  return cli_one_id (command, argc, argv, id, err);
}

int
cli_pause (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  const char *id;

  if (no_options ("pause", argc, argv, &id, err) < 0)
    return -1;
  return cgroup_container_pause (&g->ctx, id, err) < 0 ? -1 : 0;
}

int
cli_resume (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  const char *id;

  if (no_options ("resume", argc, argv, &id, err) < 0)
    return -1;
  return cgroup_container_resume (&g->ctx, id, err) < 0 ? -1 : 0;
}

/* ------------------------------------------------------------- update */

/* "-1", "1048576", "512k", "256M", "2g" (binary units, optional "b"). */
static int
parse_size (const char *option, const char *text, long long *out, struct husk_error **err)
{
  static const char units[] = "kmgt";
  char *end;
  long long value;

  errno = 0;
  value = strtoll (text, &end, 10);
  if (end == text || errno == ERANGE)
    return husk_error_make (err, 0, "update: --%s `%s`: not a number", option, text);
  if (*end && value >= 0)
    {
      const char *unit = strchr (units, (char) (*end | 0x20));
      if (unit == NULL || (end[1] && strcasecmp (end + 1, "b") != 0))
        return husk_error_make (err, 0, "update: --%s `%s`: unknown unit (use k, m, g or t)", option, text);
      for (const char *u = units; u <= unit; u++)
        {
          if (value > INT64_MAX / 1024)
            return husk_error_make (err, 0, "update: --%s `%s`: too large", option, text);
          value *= 1024;
        }
    }
  else if (*end)
    return husk_error_make (err, 0, "update: --%s `%s`: not a number", option, text);
  *out = value;
  return 0;
}

/* Where each numeric flag lands in the linux.resources document. */
struct update_flag
{
  const char *name;
  const char *section, *key;
  bool size; /* accepts units */
};

static const struct update_flag update_flags[] = {
  { "memory", "memory", "limit", true },
  { "memory-swap", "memory", "swap", true },
  { "memory-reservation", "memory", "reservation", true },
  { "cpu-quota", "cpu", "quota", false },
  { "cpu-period", "cpu", "period", false },
  { "cpu-share", "cpu", "shares", false },
  { "cpu-burst", "cpu", "burst", false },
  { "pids-limit", "pids", "limit", false },
  { "blkio-weight", "blockIO", "weight", false },
  { "cpuset-cpus", "cpu", "cpus", false },
  { "cpuset-mems", "cpu", "mems", false },
  { "cpu-weight", NULL, NULL, false },
};
#define N_UPDATE_FLAGS (sizeof update_flags / sizeof update_flags[0])

enum
{
  OPT_RESOURCES = 'r',
  OPT_FLAG_BASE = 1000,
};

static json_t *
section_of (json_t *doc, const char *name)
{
  json_t *section = json_object_get (doc, name);

  if (!json_is_object (section))
    {
      section = json_object ();
      json_object_set_new (doc, name, section);
    }
  return section;
}

static int
load_resources_file (const char *file, json_t **doc, struct husk_error **err)
{
  json_error_t jerr;

  *doc = strcmp (file, "-") == 0 ? json_loadf (stdin, 0, &jerr) : json_load_file (file, 0, &jerr);
  if (*doc == NULL)
    return husk_error_make (err, 0, "update: --resources `%s`: line %d column %d: %s", file, jerr.line,
                            jerr.column, jerr.text);
  if (!json_is_object (*doc))
    return husk_error_make (err, 0, "update: --resources `%s`: must hold a linux.resources object", file);
  return 0;
}

/* Applies one flag to the document (or to *CPU_WEIGHT, which has no
 * runtime-spec field). */
static int
apply_flag (json_t *doc, const struct update_flag *flag, const char *value, long long *cpu_weight,
            struct husk_error **err)
{
  long long number;

  if (strcmp (flag->name, "cpuset-cpus") == 0 || strcmp (flag->name, "cpuset-mems") == 0)
    {
      json_object_set_new (section_of (doc, flag->section), flag->key, json_string (value));
      return 0;
    }
  if (flag->size)
    {
      if (parse_size (flag->name, value, &number, err) < 0)
        return -1;
    }
  else if (husk_parse_int64 (value, INT64_MIN, INT64_MAX, &number) < 0)
    return husk_error_make (err, 0, "update: --%s `%s`: not a number", flag->name, value);
  if (flag->section == NULL)
    {
      if (number < 1 || number > 10000)
        return husk_error_make (err, 0, "update: --cpu-weight `%s`: must be between 1 and 10000", value);
      *cpu_weight = number;
      return 0;
    }
  json_object_set_new (section_of (doc, flag->section), flag->key, json_integer (number));
  return 0;
}

static int
parse_update (int argc, char **argv, json_t **doc, long long *cpu_weight, struct husk_error **err)
{
  struct option options[N_UPDATE_FLAGS + 2];
  const char *values[N_UPDATE_FLAGS] = { 0 };
  const char *file = NULL;
  int c;

  options[0] = (struct option){ "resources", required_argument, NULL, OPT_RESOURCES };
  for (size_t i = 0; i < N_UPDATE_FLAGS; i++)
    options[i + 1]
        = (struct option){ update_flags[i].name, required_argument, NULL, OPT_FLAG_BASE + (int) i };
  options[N_UPDATE_FLAGS + 1] = (struct option){ NULL, 0, NULL, 0 };
  opterr = 0;
  while ((c = getopt_long_only (argc, argv, "+:r:", options, NULL)) != -1)
    if (c == OPT_RESOURCES)
      file = optarg;
    else if (c >= OPT_FLAG_BASE)
      values[c - OPT_FLAG_BASE] = optarg;
    else
      return cli_bad_option ("update", c, argv, err);
  if (file && load_resources_file (file, doc, err) < 0)
    return -1;
  if (*doc == NULL)
    *doc = json_object ();
  /* Flags win over the file, as in runc. */
  for (size_t i = 0; i < N_UPDATE_FLAGS; i++)
    if (values[i] && apply_flag (*doc, &update_flags[i], values[i], cpu_weight, err) < 0)
      return -1;
  return 0;
}

int
cli_update (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  json_t *doc = NULL;
  struct cgroup_resources res;
  long long cpu_weight = 0;
  const char *id;
  int ret;

  if (parse_update (argc, argv, &doc, &cpu_weight, err) < 0
      || cli_one_id ("update", argc, argv, &id, err) < 0)
    {
      json_decref (doc);
      return -1;
    }
  ret = cgroup_resources_parse (doc, "linux.resources", &res, err);
  json_decref (doc);
  if (ret < 0)
    return husk_error_wrap (err, "update container `%s`", id);
  if (cpu_weight)
    res.cpu.weight = (struct cgroup_value){ true, cpu_weight };
  if (!cgroup_resources_has_limits (&res) && !res.has_devices)
    {
      cgroup_resources_clear (&res);
      return cli_usage_error ("update", err, "nothing to update (give --resources or a limit)");
    }
  ret = cgroup_container_update (&g->ctx, id, &res, err);
  cgroup_resources_clear (&res);
  return ret < 0 ? -1 : 0;
}

/* ------------------------------------------------------------- events */

static int
print_stats (const char *root, const char *id, uint64_t *oom_kills, struct husk_error **err)
{
  struct husk_cgroup_stats stats;
  char *json;

  if (husk_container_stats (root, id, &stats, err) < 0)
    return -1;
  json = husk_cgroup_stats_json (&stats, id);
  printf ("%s\n", json);
  fflush (stdout);
  if (oom_kills)
    *oom_kills = stats.memory.events_oom_kill;
  free (json);
  husk_cgroup_stats_clear (&stats);
  return 0;
}

/* "5s", "500ms", "2" (seconds). */
static int
parse_interval (const char *text, int *ms, struct husk_error **err)
{
  char *end;
  double value = strtod (text, &end);

  if (end == text || value <= 0)
    return husk_error_make (err, 0, "events: --interval `%s`: not a positive duration", text);
  if (strcmp (end, "ms") == 0)
    *ms = (int) value;
  else if (*end == '\0' || strcmp (end, "s") == 0)
    *ms = (int) (value * 1000);
  else if (strcmp (end, "m") == 0)
    *ms = (int) (value * 60000);
  else
    return husk_error_make (err, 0, "events: --interval `%s`: unknown unit (ms, s or m)", text);
  *ms = *ms > 0 ? *ms : 1;
  return 0;
}

/* Streams a stats sample every INTERVAL_MS and an "oom" event whenever
 * memory.events counts a new OOM kill, until the container stops. */
static int
stream_events (const struct cli_globals *g, const char *id, int interval_ms, struct husk_error **err)
{
  uint64_t kills = 0, seen = 0;
  int since_stats = 0;

  if (print_stats (g->ctx.root, id, &seen, err) < 0)
    return -1;
  for (;;)
    {
      struct husk_cgroup_stats stats;
      struct container_state *state = NULL;
      bool stopped;

      poll (NULL, 0, 100);
      since_stats += 100;
      if (state_load (g->ctx.root, id, &state, err) < 0)
        return -1;
      stopped = state_status (state) == STATUS_STOPPED;
      /* Read the cgroup itself: an OOM kill stops the container, and its
       * last count must still be seen. */
      if (state->cgroup_path && husk_cgroup_stats_read (state->cgroup_path, &stats, NULL) == 0)
        {
          kills = stats.memory.events_oom_kill;
          husk_cgroup_stats_clear (&stats);
        }
      state_free (state);
      for (; seen < kills; seen++)
        printf ("{\"type\":\"oom\",\"id\":\"%s\"}\n", id);
      fflush (stdout);
      if (stopped)
        return 0;
      if (since_stats >= interval_ms)
        {
          since_stats = 0;
          if (print_stats (g->ctx.root, id, NULL, err) < 0)
            return -1;
        }
    }
}

int
cli_events (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = {
    { "stats", no_argument, NULL, 's' },
    { "interval", required_argument, NULL, 'i' },
    { NULL, 0, NULL, 0 },
  };
  bool once = false;
  int interval_ms = 5000, c;
  const char *id;

  opterr = 0;
  while ((c = getopt_long_only (argc, argv, "+:", options, NULL)) != -1)
    if (c == 's')
      once = true;
    else if (c == 'i')
      {
        if (parse_interval (optarg, &interval_ms, err) < 0)
          return -1;
      }
    else
      return cli_bad_option ("events", c, argv, err);
  if (cli_one_id ("events", argc, argv, &id, err) < 0)
    return -1;
  if (once)
    return print_stats (g->ctx.root, id, NULL, err) < 0 ? -1 : 0;
  return stream_events (g, id, interval_ms, err) < 0 ? -1 : 0;
}
