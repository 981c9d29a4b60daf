/* Reads a container cgroup's usage into struct husk_cgroup_stats, each
 * controller from the hierarchy that holds it (v2 files, or v1's: the
 * same structure either way), and prints it as JSON
 * (include/husk/cgroup_stats.h).  Flat "key value" files are read through
 * one table per file, so adding a counter is one line. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "husk/cgroup_stats.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"

/* "max", and v1's page-rounded LONG_MAX or -1 -> HUSK_CGROUP_UNLIMITED. */
static uint64_t
parse_value (const char *text)
{
  uint64_t value;

  if (strncmp (text, "max", 3) == 0 || text[0] == '-')
    return HUSK_CGROUP_UNLIMITED;
  value = strtoull (text, NULL, 10);
  return value >= ((uint64_t) INT64_MAX & ~(uint64_t) 0xfff) ? HUSK_CGROUP_UNLIMITED : value;
}

/* The controllers, each with the reader of its v2 and its v1 files;
 * DETAIL_ONLY ones are skipped unless HUSK_CGROUP_STATS_DETAIL is asked
 * for. */
enum
{
  CTL_MEMORY,
  CTL_CPUACCT,
  CTL_CPU,
  CTL_PIDS,
  CTL_IO,
  CTL_HUGETLB,
  N_CTL,
};

/* A file a keeping reader opened: fd -1 when it was not there (a cgroup's
 * set of files stays what it was at its creation). */
struct open_file
{
  size_t ctl;
  char *name;
  int fd;
};

struct husk_cgroup_reader
{
  char *path;
  unsigned fields;
  bool keep_open;
  char *dirs[N_CTL];
  enum cgroup_version versions[N_CTL];
  struct open_file *files;
  size_t n_files, n_open;
  size_t n_read; /* files read in the sample under way */
};

/* One controller's directory, as the readers below see it. */
struct src
{
  struct husk_cgroup_reader *r;
  size_t ctl;
  const char *dir;
};

#define DETAIL(src) (((src)->r->fields & HUSK_CGROUP_STATS_DETAIL) != 0)

/* NAME in S's directory: opened and closed again, or, for a keeping
 * reader, opened once and read again from offset 0 on every sample. */
static char *
src_read (const struct src *s, const char *name)
{
  struct husk_cgroup_reader *r = s->r;
  struct open_file *f = NULL;
  struct husk_error *ignored = NULL;
  char *content;

  if (!r->keep_open)
    content = cgroup_read_file (s->dir, name);
  else
    {
      for (size_t i = 0; i < r->n_files && f == NULL; i++)
        if (r->files[i].ctl == s->ctl && strcmp (r->files[i].name, name) == 0)
          f = &r->files[i];
      if (f == NULL)
        {
          cleanup_free char *path = xasprintf ("%s/%s", s->dir, name);
          int fd = open (path, O_RDONLY | O_CLOEXEC);

          /* Absent is remembered; any other failure (EMFILE) is retried. */
          if (fd < 0 && errno != ENOENT)
            return NULL;
          r->files = xrealloc (r->files, (r->n_files + 1) * sizeof *r->files);
          f = &r->files[r->n_files++];
          *f = (struct open_file){ .ctl = s->ctl, .name = xstrdup (name), .fd = fd };
          r->n_open += fd >= 0;
        }
      content = NULL;
      if (f->fd >= 0 && husk_reread_fd (f->fd, &content, NULL, name, &ignored) < 0)
        husk_error_free (&ignored);
    }
  if (content)
    r->n_read++;
  return content;
}

/* A single-value file; false if absent. */
static bool
read_value (const struct src *path, const char *file, uint64_t *out)
{
  cleanup_free char *content = src_read (path, file);

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

/* v1: memory.stat's hierarchical totals, cpu.stat in ns. */
static const struct key_field memory_v1_stat_keys[] = {
  STAT ("total_rss", memory.anon),
  STAT ("total_cache", memory.file),
  STAT ("total_shmem", memory.shmem),
  STAT ("total_active_file", memory.active_file),
  STAT ("total_inactive_file", memory.inactive_file),
  STAT ("total_pgfault", memory.page_faults),
  STAT ("total_pgmajfault", memory.major_page_faults),
};

static const struct key_field memory_v1_oom_keys[] = {
  STAT ("oom_kill", memory.events_oom_kill),
};

static const struct key_field cpu_v1_stat_keys[] = {
  STAT ("nr_periods", cpu.nr_periods),
  STAT ("nr_throttled", cpu.nr_throttled),
  STAT ("throttled_time", cpu.throttled_usec),
};

/* Fills the fields of KEYS from a "key value" per line file. */
static bool
read_keyed (const struct src *path, const char *file, const struct key_field *keys, size_t n_keys,
            struct husk_cgroup_stats *out)
{
  cleanup_free char *content = src_read (path, file);
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
read_memory_v2 (const struct src *path, struct husk_cgroup_stats *out)
{
  out->has_memory = read_value (path, "memory.current", &out->memory.usage);
  if (!out->has_memory)
    return;
  out->memory.limit = HUSK_CGROUP_UNLIMITED;
  out->memory.swap_limit = HUSK_CGROUP_UNLIMITED;
  read_value (path, "memory.max", &out->memory.limit);
  if (DETAIL (path))
    read_value (path, "memory.peak", &out->memory.peak);
  out->has_swap = read_value (path, "memory.swap.current", &out->memory.swap_usage);
  read_value (path, "memory.swap.max", &out->memory.swap_limit);
  read_keyed (path, "memory.stat", memory_stat_keys, sizeof memory_stat_keys / sizeof memory_stat_keys[0],
              out);
  if (DETAIL (path))
    read_keyed (path, "memory.events", memory_events_keys,
                sizeof memory_events_keys / sizeof memory_events_keys[0], out);
  out->memory.working_set
      = out->memory.usage > out->memory.inactive_file ? out->memory.usage - out->memory.inactive_file : 0;
}

static void
read_cpu_v2 (const struct src *path, struct husk_cgroup_stats *out)
{
  cleanup_free char *max = NULL;
  char quota[32];
  unsigned long long period;

  out->has_cpu
      = read_keyed (path, "cpu.stat", cpu_stat_keys, sizeof cpu_stat_keys / sizeof cpu_stat_keys[0], out);
  out->cpu.quota_usec = HUSK_CGROUP_UNLIMITED;
  if (!DETAIL (path))
    return;
  read_value (path, "cpu.weight", &out->cpu.weight);
  max = src_read (path, "cpu.max");
  if (max && sscanf (max, "%31s %llu", quota, &period) == 2)
    {
      out->cpu.quota_usec = parse_value (quota);
      out->cpu.period_usec = period;
    }
}

static void
read_pids (const struct src *path, struct husk_cgroup_stats *out)
{
  out->has_pids = read_value (path, "pids.current", &out->pids.current);
  out->pids.limit = HUSK_CGROUP_UNLIMITED;
  if (DETAIL (path))
    read_value (path, "pids.max", &out->pids.limit);
}

/* io.stat: "MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N". */
static void
read_io_v2 (const struct src *path, struct husk_cgroup_stats *out)
{
  cleanup_free char *content = src_read (path, "io.stat");
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
read_hugetlb_v2 (const struct src *path, struct husk_cgroup_stats *out)
{
  cleanup_dir DIR *dir = opendir (path->dir);
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
      events = src_read (path, limit_file);
      if (events && husk_str_has_prefix (events, "max "))
        hp->max_events = parse_value (events + 4);
    }
}

/* ------------------------------------------------------------------ v1 */

static void
read_memory_v1 (const struct src *dir, struct husk_cgroup_stats *out)
{
  uint64_t memsw_usage = 0, memsw_limit = HUSK_CGROUP_UNLIMITED;

  out->has_memory = read_value (dir, "memory.usage_in_bytes", &out->memory.usage);
  if (!out->has_memory)
    return;
  out->memory.limit = HUSK_CGROUP_UNLIMITED;
  out->memory.swap_limit = HUSK_CGROUP_UNLIMITED;
  read_value (dir, "memory.limit_in_bytes", &out->memory.limit);
  if (DETAIL (dir))
    {
      read_value (dir, "memory.max_usage_in_bytes", &out->memory.peak);
      read_value (dir, "memory.kmem.usage_in_bytes", &out->memory.kernel);
      read_value (dir, "memory.kmem.tcp.usage_in_bytes", &out->memory.sock);
    }
  /* memsw is memory plus swap: the swap alone, as v2 reports it. */
  out->has_swap = read_value (dir, "memory.memsw.usage_in_bytes", &memsw_usage);
  if (out->has_swap)
    out->memory.swap_usage = memsw_usage > out->memory.usage ? memsw_usage - out->memory.usage : 0;
  if (read_value (dir, "memory.memsw.limit_in_bytes", &memsw_limit) && memsw_limit != HUSK_CGROUP_UNLIMITED
      && out->memory.limit != HUSK_CGROUP_UNLIMITED)
    out->memory.swap_limit = memsw_limit > out->memory.limit ? memsw_limit - out->memory.limit : 0;
  read_keyed (dir, "memory.stat", memory_v1_stat_keys,
              sizeof memory_v1_stat_keys / sizeof memory_v1_stat_keys[0], out);
  if (DETAIL (dir))
    {
      /* failcnt: how often usage hit the limit, v2's "max" event. */
      read_value (dir, "memory.failcnt", &out->memory.events_max);
      read_keyed (dir, "memory.oom_control", memory_v1_oom_keys, 1, out);
      out->memory.events_oom = out->memory.events_oom_kill;
    }
  out->memory.working_set
      = out->memory.usage > out->memory.inactive_file ? out->memory.usage - out->memory.inactive_file : 0;
}

/* cpuacct.usage in ns; cpuacct.stat in clock ticks. */
static void
read_cpuacct_v1 (const struct src *dir, struct husk_cgroup_stats *out)
{
  cleanup_free char *stat = NULL;
  long ticks = sysconf (_SC_CLK_TCK);
  unsigned long long user = 0, system = 0;
  uint64_t usage_ns = 0;

  if (!read_value (dir, "cpuacct.usage", &usage_ns))
    return;
  out->has_cpu = true;
  out->cpu.usage_usec = usage_ns / 1000;
  if (DETAIL (dir))
    stat = src_read (dir, "cpuacct.stat");
  if (stat && sscanf (stat, "user %llu system %llu", &user, &system) == 2 && ticks > 0)
    {
      out->cpu.user_usec = user * (1000000 / (uint64_t) ticks);
      out->cpu.system_usec = system * (1000000 / (uint64_t) ticks);
    }
}

static void
read_cpu_v1 (const struct src *dir, struct husk_cgroup_stats *out)
{
  uint64_t shares = 0, quota = HUSK_CGROUP_UNLIMITED;

  read_keyed (dir, "cpu.stat", cpu_v1_stat_keys, sizeof cpu_v1_stat_keys / sizeof cpu_v1_stat_keys[0], out);
  out->cpu.throttled_usec /= 1000; /* throttled_time is in ns */
  /* shares onto weight, as v2 would have it */
  if (read_value (dir, "cpu.shares", &shares) && shares >= 2)
    out->cpu.weight = 1 + ((shares - 2) * 9999) / 262142;
  read_value (dir, "cpu.cfs_quota_us", &quota);
  out->cpu.quota_usec = quota;
  read_value (dir, "cpu.cfs_period_us", &out->cpu.period_usec);
}

/* blkio.throttle.io_service_bytes/io_serviced: "MAJ:MIN Read|Write|... N". */
static struct husk_cgroup_io_stat *
io_device (struct husk_cgroup_stats *out, unsigned major, unsigned minor, size_t *cap)
{
  for (size_t i = 0; i < out->n_io; i++)
    if (out->io[i].major == major && out->io[i].minor == minor)
      return &out->io[i];
  if (out->n_io == *cap)
    out->io = xrealloc (out->io, (*cap = *cap ? *cap * 2 : 4) * sizeof *out->io);
  memset (&out->io[out->n_io], 0, sizeof *out->io);
  out->io[out->n_io].major = major;
  out->io[out->n_io].minor = minor;
  return &out->io[out->n_io++];
}

static void
read_blkio_file (const struct src *dir, const char *file, bool bytes, struct husk_cgroup_stats *out,
                 size_t *cap)
{
  cleanup_free char *content = src_read (dir, file);
  char *line, *save = NULL;

  for (line = content ? strtok_r (content, "\n", &save) : NULL; line; line = strtok_r (NULL, "\n", &save))
    {
      unsigned major, minor;
      char op[16];
      unsigned long long value;
      struct husk_cgroup_io_stat *io;

      if (sscanf (line, "%u:%u %15s %llu", &major, &minor, op, &value) != 4)
        continue;
      io = io_device (out, major, minor, cap);
      if (strcmp (op, "Read") == 0)
        *(bytes ? &io->read_bytes : &io->read_ios) = value;
      else if (strcmp (op, "Write") == 0)
        *(bytes ? &io->write_bytes : &io->write_ios) = value;
      else if (strcmp (op, "Discard") == 0)
        *(bytes ? &io->discard_bytes : &io->discard_ios) = value;
    }
}

static void
read_blkio_v1 (const struct src *dir, struct husk_cgroup_stats *out)
{
  size_t cap = 0;

  read_blkio_file (dir, "blkio.throttle.io_service_bytes_recursive", true, out, &cap);
  read_blkio_file (dir, "blkio.throttle.io_serviced_recursive", false, out, &cap);
}

/* hugetlb.<size>.usage_in_bytes, .limit_in_bytes, .failcnt. */
static void
read_hugetlb_v1 (const struct src *dir, struct husk_cgroup_stats *out)
{
  cleanup_dir DIR *listing = opendir (dir->dir);
  static const char suffix[] = ".usage_in_bytes";
  struct dirent *entry;
  size_t cap = 0;

  while (listing && (entry = readdir (listing)) != NULL)
    {
      const char *name = entry->d_name;
      size_t len = strlen (name), size_len = len - strlen ("hugetlb.") - strlen (suffix);
      struct husk_cgroup_hugetlb_stat *hp;
      cleanup_free char *limit = NULL;
      cleanup_free char *failcnt = NULL;

      if (!husk_str_has_prefix (name, "hugetlb.") || !husk_str_has_suffix (name, suffix)
          || husk_str_has_prefix (name, "hugetlb.rsvd") || len <= strlen ("hugetlb.") + strlen (suffix)
          || size_len >= sizeof hp->page_size || memchr (name + 8, '.', size_len))
        continue;
      if (out->n_hugetlb == cap)
        out->hugetlb = xrealloc (out->hugetlb, (cap = cap ? cap * 2 : 4) * sizeof *out->hugetlb);
      hp = &out->hugetlb[out->n_hugetlb++];
      memset (hp, 0, sizeof *hp);
      memcpy (hp->page_size, name + 8, size_len);
      read_value (dir, name, &hp->usage);
      limit = xasprintf ("hugetlb.%s.limit_in_bytes", hp->page_size);
      hp->limit = HUSK_CGROUP_UNLIMITED;
      read_value (dir, limit, &hp->limit);
      failcnt = xasprintf ("hugetlb.%s.failcnt", hp->page_size);
      read_value (dir, failcnt, &hp->max_events);
    }
}

/* ------------------------------------------------------------- sample */

typedef void (*stats_reader) (const struct src *dir, struct husk_cgroup_stats *out);

static const struct
{
  const char *controller;
  stats_reader v2, v1;
  bool detail_only;
} readers[N_CTL] = {
  [CTL_MEMORY] = { "memory", read_memory_v2, read_memory_v1, false },
  [CTL_CPUACCT] = { "cpuacct", read_cpu_v2, read_cpuacct_v1, false },
  [CTL_CPU] = { "cpu", NULL, read_cpu_v1, true },
  [CTL_PIDS] = { "pids", read_pids, read_pids, false },
  [CTL_IO] = { "io", read_io_v2, read_blkio_v1, true },
  [CTL_HUGETLB] = { "hugetlb", read_hugetlb_v2, read_hugetlb_v1, true },
};

static struct husk_cgroup_reader *
reader_alloc (const char *path, unsigned fields, bool keep_open)
{
  struct husk_cgroup_reader *r = xcalloc (1, sizeof *r);

  r->path = xstrdup (path);
  r->fields = fields | HUSK_CGROUP_STATS_USAGE;
  r->keep_open = keep_open;
  return r;
}

struct husk_cgroup_reader *
husk_cgroup_reader_new (const char *path, unsigned fields, bool keep_open)
{
  struct husk_cgroup_reader *r = reader_alloc (path, fields, keep_open);

  for (size_t i = 0; i < N_CTL; i++)
    r->versions[i] = cgroup_locate (path, readers[i].controller, &r->dirs[i]);
  return r;
}

struct husk_cgroup_reader *
husk_cgroup_reader_new_flat (const char *dir, bool v1, unsigned fields, bool keep_open)
{
  struct husk_cgroup_reader *r = reader_alloc (dir, fields, keep_open);

  for (size_t i = 0; i < N_CTL; i++)
    {
      r->versions[i] = v1 ? CGROUP_V1 : CGROUP_V2;
      r->dirs[i] = xstrdup (dir);
    }
  return r;
}

size_t
husk_cgroup_reader_open_files (const struct husk_cgroup_reader *r)
{
  return r->n_open;
}

void
husk_cgroup_reader_free (struct husk_cgroup_reader *r)
{
  if (r == NULL)
    return;
  for (size_t i = 0; i < r->n_files; i++)
    {
      if (r->files[i].fd >= 0)
        close (r->files[i].fd);
      free (r->files[i].name);
    }
  free (r->files);
  for (size_t i = 0; i < N_CTL; i++)
    free (r->dirs[i]);
  free (r->path);
  free (r);
}

int
husk_cgroup_reader_sample (struct husk_cgroup_reader *r, struct husk_cgroup_stats *out,
                           struct husk_error **err)
{
  struct timespec now;

  memset (out, 0, sizeof *out);
  clock_gettime (CLOCK_REALTIME, &now);
  out->timestamp_ns = (uint64_t) now.tv_sec * 1000000000ull + (uint64_t) now.tv_nsec;
  r->n_read = 0;
  for (size_t i = 0; i < N_CTL; i++)
    {
      struct src s = { r, i, r->dirs[i] };
      stats_reader read = r->versions[i] == CGROUP_V1   ? readers[i].v1
                          : r->versions[i] == CGROUP_V2 ? readers[i].v2
                                                        : NULL;

      if (read && (!readers[i].detail_only || DETAIL (&s)))
        read (&s, out);
    }
  /* Nothing read: the directory is gone (a kept file of a removed cgroup
   * reads ENODEV), or it has none of these files. */
  if (r->n_read == 0 && !cgroup_exists (r->path))
    {
      husk_cgroup_stats_clear (out);
      return husk_error_make (err, ENOENT, "read stats of cgroup `%s`", r->path);
    }
  return 0;
}

int
husk_cgroup_stats_read_fields (const char *path, unsigned fields, struct husk_cgroup_stats *out,
                               struct husk_error **err)
{
  struct husk_cgroup_reader *r = husk_cgroup_reader_new (path, fields, false);
  int ret = husk_cgroup_reader_sample (r, out, err);

  husk_cgroup_reader_free (r);
  return ret;
}

int
husk_cgroup_stats_read (const char *path, struct husk_cgroup_stats *out, struct husk_error **err)
{
  return husk_cgroup_stats_read_fields (path, HUSK_CGROUP_STATS_ALL, out, err);
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
