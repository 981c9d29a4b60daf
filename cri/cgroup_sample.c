/* CRI's cgroup sample (see cgroup_sample.h): memory, cpu usage and pids,
 * v2 files or v1's, each controller from the hierarchy that holds it. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cri/cgroup_sample.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup.h"

/* "max", and v1's page-rounded LONG_MAX or -1: no limit (as the runtime
 * reads them). */
static uint64_t
parse_value (const char *text)
{
  uint64_t value;

  if (strncmp (text, "max", 3) == 0 || text[0] == '-')
    return HUSK_CGROUP_UNLIMITED;
  value = strtoull (text, NULL, 10);
  return value >= ((uint64_t) INT64_MAX & ~(uint64_t) 0xfff) ? HUSK_CGROUP_UNLIMITED : value;
}

static bool
read_value (const char *dir, const char *file, uint64_t *out)
{
  cleanup_free char *content = cgroup_read_file (dir, file);

  if (content == NULL)
    return false;
  *out = parse_value (content);
  return true;
}

struct stat_key
{
  const char *key;
  uint64_t *field;
};

/* The fields of KEYS from a "key value" per line file. */
static bool
read_keyed (const char *dir, const char *file, const struct stat_key *keys, size_t n_keys)
{
  cleanup_free char *content = cgroup_read_file (dir, file);
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
          *keys[i].field = parse_value (space + 1);
    }
  return true;
}

static void
working_set (struct husk_cgroup_stats *out)
{
  out->memory.working_set
      = out->memory.usage > out->memory.inactive_file ? out->memory.usage - out->memory.inactive_file : 0;
}

static void
memory_v2 (const char *dir, struct husk_cgroup_stats *out)
{
  const struct stat_key keys[] = {
    { "anon", &out->memory.anon },
    { "file", &out->memory.file },
    { "inactive_file", &out->memory.inactive_file },
    { "pgfault", &out->memory.page_faults },
    { "pgmajfault", &out->memory.major_page_faults },
  };

  if (!(out->has_memory = read_value (dir, "memory.current", &out->memory.usage)))
    return;
  out->memory.limit = out->memory.swap_limit = HUSK_CGROUP_UNLIMITED;
  read_value (dir, "memory.max", &out->memory.limit);
  out->has_swap = read_value (dir, "memory.swap.current", &out->memory.swap_usage);
  read_value (dir, "memory.swap.max", &out->memory.swap_limit);
  read_keyed (dir, "memory.stat", keys, sizeof keys / sizeof keys[0]);
  working_set (out);
}

static void
memory_v1 (const char *dir, struct husk_cgroup_stats *out)
{
  const struct stat_key keys[] = {
    { "total_rss", &out->memory.anon },
    { "total_cache", &out->memory.file },
    { "total_inactive_file", &out->memory.inactive_file },
    { "total_pgfault", &out->memory.page_faults },
    { "total_pgmajfault", &out->memory.major_page_faults },
  };
  uint64_t memsw_usage = 0, memsw_limit = HUSK_CGROUP_UNLIMITED;

  if (!(out->has_memory = read_value (dir, "memory.usage_in_bytes", &out->memory.usage)))
    return;
  out->memory.limit = out->memory.swap_limit = HUSK_CGROUP_UNLIMITED;
  read_value (dir, "memory.limit_in_bytes", &out->memory.limit);
  /* memsw is memory plus swap: the swap alone, as v2 reports it. */
  out->has_swap = read_value (dir, "memory.memsw.usage_in_bytes", &memsw_usage);
  if (out->has_swap)
    out->memory.swap_usage = memsw_usage > out->memory.usage ? memsw_usage - out->memory.usage : 0;
  if (read_value (dir, "memory.memsw.limit_in_bytes", &memsw_limit) && memsw_limit != HUSK_CGROUP_UNLIMITED
      && out->memory.limit != HUSK_CGROUP_UNLIMITED)
    out->memory.swap_limit = memsw_limit > out->memory.limit ? memsw_limit - out->memory.limit : 0;
  read_keyed (dir, "memory.stat", keys, sizeof keys / sizeof keys[0]);
  working_set (out);
}

static void
cpu_v2 (const char *dir, struct husk_cgroup_stats *out)
{
  const struct stat_key keys[] = {
    { "usage_usec", &out->cpu.usage_usec },
    { "user_usec", &out->cpu.user_usec },
    { "system_usec", &out->cpu.system_usec },
  };

  out->has_cpu = read_keyed (dir, "cpu.stat", keys, sizeof keys / sizeof keys[0]);
}

/* cpuacct.usage in ns (user and system time are not CRI's). */
static void
cpu_v1 (const char *dir, struct husk_cgroup_stats *out)
{
  uint64_t usage_ns = 0;

  if ((out->has_cpu = read_value (dir, "cpuacct.usage", &usage_ns)))
    out->cpu.usage_usec = usage_ns / 1000;
}

static void
pids_any (const char *dir, struct husk_cgroup_stats *out)
{
  out->has_pids = read_value (dir, "pids.current", &out->pids.current);
  out->pids.limit = HUSK_CGROUP_UNLIMITED;
}

typedef void (*sample_reader) (const char *dir, struct husk_cgroup_stats *out);

/* The controllers as the runtime locates them (cpu usage comes with
 * cpuacct on v1, with every v2 cgroup's cpu.stat). */
static const struct
{
  const char *controller;
  sample_reader v2, v1;
} readers[] = {
  { "memory", memory_v2, memory_v1 },
  { "cpuacct", cpu_v2, cpu_v1 },
  { "pids", pids_any, pids_any },
};

int
cri_cgroup_sample (const char *path, struct husk_cgroup_stats *out, struct husk_error **err)
{
  struct timespec now;

  memset (out, 0, sizeof *out);
  if (!cgroup_exists (path))
    return husk_error_make (err, ENOENT, "read stats of cgroup `%s`", path);
  clock_gettime (CLOCK_REALTIME, &now);
  out->timestamp_ns = (uint64_t) now.tv_sec * 1000000000ull + (uint64_t) now.tv_nsec;
  for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++)
    {
      cleanup_free char *dir = NULL;
      enum cgroup_version version = cgroup_locate (path, readers[i].controller, &dir);

      if (version == CGROUP_V1)
        readers[i].v1 (dir, out);
      else if (version == CGROUP_V2)
        readers[i].v2 (dir, out);
    }
  return 0;
}
