/* Reads a cgroup v2 directory's usage into struct husk_cgroup_stats and
 * prints it as JSON (include/husk/cgroup_stats.h).  Flat "key value"
 * files are read through one table per file, so adding a counter is one
 * line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "husk/cgroup_stats.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup.h"
#include "runtime/state.h"

/* "max" -> HUSK_CGROUP_UNLIMITED. */
static uint64_t
parse_value (const char *text)
{
  if (strncmp (text, "max", 3) == 0)
    return HUSK_CGROUP_UNLIMITED;
  return strtoull (text, NULL, 10);
}

/* A single-value file; false if absent. */
static bool
read_value (const char *path, const char *file, uint64_t *out)
{
  cleanup_free char *content = cgroup_read_file (path, file);

  if (content == NULL)
    return false;
  *out = parse_value (content);
  return true;
}

struct key_field
{
  const char *key;
  size_t offset; /* of a uint64_t in struct husk_cgroup_stats */
};

#define STAT(key, member)                                                                                    \
  {                                                                                                          \
    key, offsetof (struct husk_cgroup_stats, member)                                                         \
  }

static const struct key_field memory_stat_keys[] = {
  STAT ("anon", memory.anon),
  STAT ("file", memory.file),
  STAT ("kernel", memory.kernel),
  STAT ("sock", memory.sock),
  STAT ("shmem", memory.shmem),
  STAT ("active_file", memory.active_file),
  STAT ("inactive_file", memory.inactive_file),
  STAT ("pgfault", memory.page_faults),
  STAT ("pgmajfault", memory.major_page_faults),
};

static const struct key_field memory_events_keys[] = {
  STAT ("low", memory.events_low), STAT ("high", memory.events_high),         STAT ("max", memory.events_max),
  STAT ("oom", memory.events_oom), STAT ("oom_kill", memory.events_oom_kill),
};

static const struct key_field cpu_stat_keys[] = {
  STAT ("usage_usec", cpu.usage_usec),     STAT ("user_usec", cpu.user_usec),
  STAT ("system_usec", cpu.system_usec),   STAT ("nr_periods", cpu.nr_periods),
  STAT ("nr_throttled", cpu.nr_throttled), STAT ("throttled_usec", cpu.throttled_usec),
};

/* Fills the fields of KEYS from a "key value" per line file. */
static bool
read_keyed (const char *path, const char *file, const struct key_field *keys, size_t n_keys,
            struct husk_cgroup_stats *out)
{
  cleanup_free char *content = cgroup_read_file (path, file);
  char *line, *save = NULL;

  if (content == NULL)
    return false;
  for (line = strtok_r (content, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      char *space = strchr (line, ' ');
      if (space == NULL)
        continue;
      *space = '\0';
      for (size_t i = 0; i < n_keys; i++)
        if (strcmp (line, keys[i].key) == 0)
          *(uint64_t *) ((char *) out + keys[i].offset) = parse_value (space + 1);
    }
  return true;
}

static void
read_memory (const char *path, struct husk_cgroup_stats *out)
{
  out->has_memory = read_value (path, "memory.current", &out->memory.usage);
  if (!out->has_memory)
    return;
  out->memory.limit = HUSK_CGROUP_UNLIMITED;
  out->memory.swap_limit = HUSK_CGROUP_UNLIMITED;
  read_value (path, "memory.max", &out->memory.limit);
  read_value (path, "memory.peak", &out->memory.peak);
  read_value (path, "memory.swap.current", &out->memory.swap_usage);
  read_value (path, "memory.swap.max", &out->memory.swap_limit);
  read_keyed (path, "memory.stat", memory_stat_keys, sizeof memory_stat_keys / sizeof memory_stat_keys[0],
              out);
  read_keyed (path, "memory.events", memory_events_keys,
              sizeof memory_events_keys / sizeof memory_events_keys[0], out);
  out->memory.working_set
      = out->memory.usage > out->memory.inactive_file ? out->memory.usage - out->memory.inactive_file : 0;
}

static void
read_cpu (const char *path, struct husk_cgroup_stats *out)
{
  cleanup_free char *max = NULL;
  char quota[32];
  unsigned long long period;

  out->has_cpu
      = read_keyed (path, "cpu.stat", cpu_stat_keys, sizeof cpu_stat_keys / sizeof cpu_stat_keys[0], out);
  read_value (path, "cpu.weight", &out->cpu.weight);
  out->cpu.quota_usec = HUSK_CGROUP_UNLIMITED;
  max = cgroup_read_file (path, "cpu.max");
  if (max && sscanf (max, "%31s %llu", quota, &period) == 2)
    {
      out->cpu.quota_usec = parse_value (quota);
      out->cpu.period_usec = period;
    }
}

static void
read_pids (const char *path, struct husk_cgroup_stats *out)
{
  out->has_pids = read_value (path, "pids.current", &out->pids.current);
  out->pids.limit = HUSK_CGROUP_UNLIMITED;
  read_value (path, "pids.max", &out->pids.limit);
}

/* io.stat: "MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N". */
static void
read_io (const char *path, struct husk_cgroup_stats *out)
{
  cleanup_free char *content = cgroup_read_file (path, "io.stat");
  char *line, *save = NULL;
  size_t lines = 0;

  if (content == NULL)
    return;
  for (const char *p = content; *p; p++)
    lines += *p == '\n';
  out->io = xcalloc (lines + 1, sizeof *out->io);
  for (line = strtok_r (content, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      struct husk_cgroup_io_stat *io = &out->io[out->n_io];
      unsigned major, minor;
      int used = 0;
      char *field, *field_save = NULL;

      if (sscanf (line, "%u:%u%n", &major, &minor, &used) != 2)
        continue;
      io->major = major;
      io->minor = minor;
      for (field = strtok_r (line + used, " ", &field_save); field; field = strtok_r (NULL, " ", &field_save))
        {
          unsigned long long value = strtoull (strchr (field, '=') ? strchr (field, '=') + 1 : "0", NULL, 10);
          uint64_t *slots[] = { &io->read_bytes, &io->write_bytes,   &io->read_ios,
                                &io->write_ios,  &io->discard_bytes, &io->discard_ios };
          static const char *const names[] = { "rbytes=", "wbytes=", "rios=", "wios=", "dbytes=", "dios=" };
          for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (husk_str_has_prefix (field, names[i]))
              *slots[i] = value;
        }
      out->n_io++;
    }
}

static void
read_hugetlb (const char *path, struct husk_cgroup_stats *out)
{
  cleanup_dir DIR *dir = opendir (path);
  struct dirent *entry;
  size_t cap = 0;

  while (dir && (entry = readdir (dir)) != NULL)
    {
      const char *name = entry->d_name;
      size_t len = strlen (name);
      struct husk_cgroup_hugetlb_stat *hp;
      cleanup_free char *events = NULL;
      cleanup_free char *limit_file = NULL;

      if (!husk_str_has_prefix (name, "hugetlb.") || !husk_str_has_suffix (name, ".current")
          || husk_str_has_suffix (name, ".rsvd.current") || len - 16 >= sizeof hp->page_size)
        continue;
      if (out->n_hugetlb == cap)
        out->hugetlb = xrealloc (out->hugetlb, (cap = cap ? cap * 2 : 4) * sizeof *out->hugetlb);
      hp = &out->hugetlb[out->n_hugetlb++];
      memset (hp, 0, sizeof *hp);
      memcpy (hp->page_size, name + 8, len - 16);
      read_value (path, name, &hp->usage);
      limit_file = xasprintf ("hugetlb.%s.max", hp->page_size);
      hp->limit = HUSK_CGROUP_UNLIMITED;
      read_value (path, limit_file, &hp->limit);
      free (limit_file);
      limit_file = xasprintf ("hugetlb.%s.events", hp->page_size);
      events = cgroup_read_file (path, limit_file);
      if (events && husk_str_has_prefix (events, "max "))
        hp->max_events = parse_value (events + 4);
    }
}

int
husk_cgroup_stats_read (const char *path, struct husk_cgroup_stats *out, struct husk_error **err)
{
  struct timespec now;

  memset (out, 0, sizeof *out);
  if (access (path, F_OK) < 0)
    return husk_error_make (err, errno, "read stats of cgroup `%s`", path);
  clock_gettime (CLOCK_REALTIME, &now);
  out->timestamp_ns = (uint64_t) now.tv_sec * 1000000000ull + (uint64_t) now.tv_nsec;
  read_memory (path, out);
  read_cpu (path, out);
  read_pids (path, out);
  read_io (path, out);
  read_hugetlb (path, out);
  return 0;
}

int
husk_container_stats (const char *state_root, const char *id, struct husk_cgroup_stats *out,
                      struct husk_error **err)
{
  struct container_state *state = NULL;
  int ret;

  memset (out, 0, sizeof *out);
  if (state_load (state_root, id, &state, err) < 0)
    return -1;
  if (state->cgroup_path == NULL)
    ret = husk_error_make (err, 0, "stats of container `%s`: it has no cgroup", id);
  else if ((ret = husk_cgroup_stats_read (state->cgroup_path, out, err)) < 0)
    husk_error_wrap (err, "stats of container `%s`", id);
  state_free (state);
  return ret;
}

void
husk_cgroup_stats_clear (struct husk_cgroup_stats *stats)
{
  free (stats->io);
  free (stats->hugetlb);
  memset (stats, 0, sizeof *stats);
}

/* Unlimited has no JSON integer: it is null. */
static json_t *
json_u64 (uint64_t value)
{
  return value > (uint64_t) INT64_MAX ? json_null () : json_integer ((json_int_t) value);
}

static json_t *
memory_json (const struct husk_cgroup_stats *s)
{
  return json_pack (
      "{s:{s:o, s:o, s:o}, s:{s:o, s:o}, s:o, s:{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}, "
      "s:{s:o, s:o, s:o, s:o, s:o}, s:o}",
      "usage", "usage", json_u64 (s->memory.usage), "limit", json_u64 (s->memory.limit), "max",
      json_u64 (s->memory.peak), "swap", "usage", json_u64 (s->memory.swap_usage), "limit",
      json_u64 (s->memory.swap_limit), "workingSet", json_u64 (s->memory.working_set), "raw", "anon",
      json_u64 (s->memory.anon), "file", json_u64 (s->memory.file), "kernel", json_u64 (s->memory.kernel),
      "sock", json_u64 (s->memory.sock), "shmem", json_u64 (s->memory.shmem), "active_file",
      json_u64 (s->memory.active_file), "inactive_file", json_u64 (s->memory.inactive_file), "pgfault",
      json_u64 (s->memory.page_faults), "pgmajfault", json_u64 (s->memory.major_page_faults), "events", "low",
      json_u64 (s->memory.events_low), "high", json_u64 (s->memory.events_high), "max",
      json_u64 (s->memory.events_max), "oom", json_u64 (s->memory.events_oom), "oom_kill",
      json_u64 (s->memory.events_oom_kill), "oomKill", json_u64 (s->memory.events_oom_kill));
}

static json_t *
cpu_json (const struct husk_cgroup_stats *s)
{
  return json_pack ("{s:{s:o, s:o, s:o}, s:{s:o, s:o, s:o}, s:o, s:o, s:o}", "usage", "total",
                    json_u64 (s->cpu.usage_usec * 1000), "user", json_u64 (s->cpu.user_usec * 1000), "kernel",
                    json_u64 (s->cpu.system_usec * 1000), "throttling", "periods",
                    json_u64 (s->cpu.nr_periods), "throttledPeriods", json_u64 (s->cpu.nr_throttled),
                    "throttledTime", json_u64 (s->cpu.throttled_usec * 1000), "weight",
                    json_u64 (s->cpu.weight), "quota", json_u64 (s->cpu.quota_usec), "period",
                    json_u64 (s->cpu.period_usec));
}

static json_t *
io_json (const struct husk_cgroup_stats *s)
{
  json_t *devices = json_array ();

  for (size_t i = 0; i < s->n_io; i++)
    {
      const struct husk_cgroup_io_stat *io = &s->io[i];
      json_array_append_new (
          devices, json_pack ("{s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o}", "major", (json_int_t) io->major,
                              "minor", (json_int_t) io->minor, "rbytes", json_u64 (io->read_bytes), "wbytes",
                              json_u64 (io->write_bytes), "rios", json_u64 (io->read_ios), "wios",
                              json_u64 (io->write_ios), "dbytes", json_u64 (io->discard_bytes), "dios",
                              json_u64 (io->discard_ios)));
    }
  return json_pack ("{s:o}", "devices", devices);
}

static json_t *
hugetlb_json (const struct husk_cgroup_stats *s)
{
  json_t *sizes = json_object ();

  for (size_t i = 0; i < s->n_hugetlb; i++)
    json_object_set_new (sizes, s->hugetlb[i].page_size,
                         json_pack ("{s:o, s:o, s:o}", "usage", json_u64 (s->hugetlb[i].usage), "limit",
                                    json_u64 (s->hugetlb[i].limit), "failcnt",
                                    json_u64 (s->hugetlb[i].max_events)));
  return sizes;
}

char *
husk_cgroup_stats_json (const struct husk_cgroup_stats *stats, const char *id)
{
  json_t *data = json_object ();
  json_t *doc;
  char *text;

  json_object_set_new (data, "timestamp", json_u64 (stats->timestamp_ns));
  if (stats->has_cpu)
    json_object_set_new (data, "cpu", cpu_json (stats));
  if (stats->has_memory)
    json_object_set_new (data, "memory", memory_json (stats));
  if (stats->has_pids)
    json_object_set_new (data, "pids",
                         json_pack ("{s:o, s:o}", "current", json_u64 (stats->pids.current), "limit",
                                    json_u64 (stats->pids.limit)));
  json_object_set_new (data, "io", io_json (stats));
  json_object_set_new (data, "hugetlb", hugetlb_json (stats));
  doc = json_pack ("{s:s, s:s, s:o}", "type", "stats", "id", id ? id : "", "data", data);
  text = json_dumps (doc, JSON_COMPACT);
  json_decref (doc);
  return text;
}
