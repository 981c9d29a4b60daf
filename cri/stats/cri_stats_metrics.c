/* cAdvisor-named metrics from husk's stats samples (cri_stats_metrics.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cri/stats/cri_stats_metrics.h"
#include "husk/util.h"

#define C RUNTIME__V1__METRIC_TYPE__COUNTER
#define G RUNTIME__V1__METRIC_TYPE__GAUGE

/* The metric table: name, its own label keys (after id, name, image),
 * type, help. */
static const struct
{
  const char *name, *extra_keys[2];
  Runtime__V1__MetricType type;
  const char *help;
} table[] = {
  { "container_cpu_usage_seconds_total", { "cpu" }, C, "Cumulative cpu time consumed in seconds." },
  { "container_cpu_user_seconds_total", { NULL }, C, "Cumulative user cpu time consumed in seconds." },
  { "container_cpu_system_seconds_total", { NULL }, C, "Cumulative system cpu time consumed in seconds." },
  { "container_cpu_cfs_periods_total", { NULL }, C, "Number of elapsed enforcement period intervals." },
  { "container_cpu_cfs_throttled_periods_total", { NULL }, C, "Number of throttled period intervals." },
  { "container_cpu_cfs_throttled_seconds_total",
    { NULL },
    C,
    "Total time duration the container has been throttled." },
  { "container_memory_usage_bytes",
    { NULL },
    G,
    "Current memory usage in bytes, including all memory regardless of when it was accessed." },
  { "container_memory_working_set_bytes", { NULL }, G, "Current working set in bytes." },
  { "container_memory_rss", { NULL }, G, "Size of RSS in bytes." },
  { "container_memory_cache", { NULL }, G, "Number of bytes of page cache memory." },
  { "container_memory_kernel_usage", { NULL }, G, "Size of kernel memory allocated in bytes." },
  { "container_memory_swap", { NULL }, G, "Container swap usage in bytes." },
  { "container_memory_max_usage_bytes", { NULL }, G, "Maximum memory usage recorded in bytes." },
  { "container_memory_failcnt", { NULL }, C, "Number of memory usage hits limits." },
  { "container_memory_failures_total",
    { "failure_type", "scope" },
    C,
    "Cumulative count of memory allocation failures." },
  { "container_spec_memory_limit_bytes", { NULL }, G, "Memory limit for the container." },
  { "container_oom_events_total", { NULL }, C, "Count of out of memory events observed for the container." },
  { "container_processes", { NULL }, G, "Number of processes running inside the container." },
  { "container_fs_reads_bytes_total", { "device" }, C, "Cumulative count of bytes read." },
  { "container_fs_writes_bytes_total", { "device" }, C, "Cumulative count of bytes written." },
  { "container_fs_reads_total", { "device" }, C, "Cumulative count of reads completed." },
  { "container_fs_writes_total", { "device" }, C, "Cumulative count of writes completed." },
  { "container_fs_usage_bytes",
    { "device" },
    G,
    "Number of bytes that are consumed by the container on this filesystem." },
  { "container_fs_inodes_total",
    { "device" },
    G,
    "Number of inodes used by the container on this filesystem." },
  { "container_network_receive_bytes_total", { "interface" }, C, "Cumulative count of bytes received." },
  { "container_network_receive_errors_total",
    { "interface" },
    C,
    "Cumulative count of errors encountered while receiving." },
  { "container_network_transmit_bytes_total", { "interface" }, C, "Cumulative count of bytes transmitted." },
  { "container_network_transmit_errors_total",
    { "interface" },
    C,
    "Cumulative count of errors encountered while transmitting." },
};
#define N_TABLE (sizeof table / sizeof table[0])

static const char *const base_keys[] = { "id", "name", "image" };

void
cri_metric_descriptors (struct cri_arena *arena, Runtime__V1__MetricDescriptor ***out, size_t *n)
{
  Runtime__V1__MetricDescriptor **list = cri_arena_alloc (arena, (N_TABLE + 1) * sizeof *list);

  for (size_t i = 0; i < N_TABLE; i++)
    {
      Runtime__V1__MetricDescriptor *d = cri_arena_alloc (arena, sizeof *d);

      runtime__v1__metric_descriptor__init (d);
      d->name = (char *) table[i].name;
      d->help = (char *) table[i].help;
      d->label_keys = cri_arena_alloc (arena, 5 * sizeof *d->label_keys);
      for (size_t k = 0; k < 3; k++)
        d->label_keys[d->n_label_keys++] = (char *) base_keys[k];
      for (size_t k = 0; k < 2 && table[i].extra_keys[k]; k++)
        d->label_keys[d->n_label_keys++] = (char *) table[i].extra_keys[k];
      list[i] = d;
    }
  *out = list;
  *n = N_TABLE;
}

static size_t
table_index (const char *name)
{
  for (size_t i = 0; i < N_TABLE; i++)
    if (strcmp (table[i].name, name) == 0)
      return i;
  abort (); /* a name not in the table is a bug here */
}

/* Adds NAME = VALUE with BASE and up to two extra label values. */
static void
add (struct cri_arena *arena, struct cri_metric_list *list, const char *name, const char *const base[3],
     const char *extra1, const char *extra2, uint64_t value)
{
  size_t i = table_index (name);
  Runtime__V1__Metric *m = cri_arena_alloc (arena, sizeof *m);

  runtime__v1__metric__init (m);
  m->name = (char *) table[i].name;
  m->metric_type = table[i].type;
  m->label_values = cri_arena_alloc (arena, 5 * sizeof *m->label_values);
  for (size_t k = 0; k < 3; k++)
    m->label_values[m->n_label_values++] = (char *) (base[k] ? base[k] : "");
  if (extra1)
    m->label_values[m->n_label_values++] = (char *) extra1;
  if (extra2)
    m->label_values[m->n_label_values++] = (char *) extra2;
  m->value = cri_stats_u64 (arena, value);
  if (list->n == list->cap)
    {
      list->cap = list->cap ? list->cap * 2 : 32;
      list->items = xrealloc (list->items, list->cap * sizeof *list->items);
    }
  list->items[list->n++] = m;
}

static void
add_cpu (struct cri_arena *arena, struct cri_metric_list *list, const char *const base[3],
         const struct husk_cgroup_stats *s)
{
  add (arena, list, "container_cpu_usage_seconds_total", base, "total", NULL, s->cpu.usage_usec / 1000000);
  add (arena, list, "container_cpu_user_seconds_total", base, NULL, NULL, s->cpu.user_usec / 1000000);
  add (arena, list, "container_cpu_system_seconds_total", base, NULL, NULL, s->cpu.system_usec / 1000000);
  if (s->cpu.nr_periods == 0)
    return; /* no quota: no CFS periods to count */
  add (arena, list, "container_cpu_cfs_periods_total", base, NULL, NULL, s->cpu.nr_periods);
  add (arena, list, "container_cpu_cfs_throttled_periods_total", base, NULL, NULL, s->cpu.nr_throttled);
  add (arena, list, "container_cpu_cfs_throttled_seconds_total", base, NULL, NULL,
       s->cpu.throttled_usec / 1000000);
}

static void
add_memory (struct cri_arena *arena, struct cri_metric_list *list, const char *const base[3],
            const struct husk_cgroup_stats *s)
{
  add (arena, list, "container_memory_usage_bytes", base, NULL, NULL, s->memory.usage);
  add (arena, list, "container_memory_working_set_bytes", base, NULL, NULL, s->memory.working_set);
  add (arena, list, "container_memory_rss", base, NULL, NULL, s->memory.anon);
  if (!s->has_memory)
    return; /* only what the processes hold: no cgroup counters */
  add (arena, list, "container_memory_cache", base, NULL, NULL, s->memory.file);
  add (arena, list, "container_memory_kernel_usage", base, NULL, NULL, s->memory.kernel);
  if (s->has_swap)
    add (arena, list, "container_memory_swap", base, NULL, NULL, s->memory.swap_usage);
  if (s->memory.peak)
    add (arena, list, "container_memory_max_usage_bytes", base, NULL, NULL, s->memory.peak);
  add (arena, list, "container_memory_failcnt", base, NULL, NULL, s->memory.events_max);
  add (arena, list, "container_memory_failures_total", base, "pgfault", "container", s->memory.page_faults);
  add (arena, list, "container_memory_failures_total", base, "pgmajfault", "container",
       s->memory.major_page_faults);
  /* cAdvisor's 0 for "no limit". */
  add (arena, list, "container_spec_memory_limit_bytes", base, NULL, NULL,
       s->memory.limit == HUSK_CGROUP_UNLIMITED ? 0 : s->memory.limit);
  add (arena, list, "container_oom_events_total", base, NULL, NULL, s->memory.events_oom_kill);
}

static void
add_io (struct cri_arena *arena, struct cri_metric_list *list, const char *const base[3],
        const struct husk_cgroup_stats *s)
{
  for (size_t i = 0; i < s->n_io; i++)
    {
      const struct husk_cgroup_io_stat *io = &s->io[i];
      char *device = cri_arena_adopt (arena, xasprintf ("%u:%u", io->major, io->minor));

      add (arena, list, "container_fs_reads_bytes_total", base, device, NULL, io->read_bytes);
      add (arena, list, "container_fs_writes_bytes_total", base, device, NULL, io->write_bytes);
      add (arena, list, "container_fs_reads_total", base, device, NULL, io->read_ios);
      add (arena, list, "container_fs_writes_total", base, device, NULL, io->write_ios);
    }
}

void
cri_metrics_of_cgroup (struct cri_arena *arena, struct cri_metric_list *list, const char *const base[3],
                       const struct husk_cgroup_stats *s)
{
  if (s->has_cpu)
    add_cpu (arena, list, base, s);
  add_memory (arena, list, base, s);
  if (s->has_pids)
    add (arena, list, "container_processes", base, NULL, NULL, s->pids.current);
  add_io (arena, list, base, s);
}

void
cri_metrics_of_layer (struct cri_arena *arena, struct cri_metric_list *list, const char *const base[3],
                      const char *device, const struct cri_dir_usage *usage)
{
  add (arena, list, "container_fs_usage_bytes", base, device, NULL, usage->bytes);
  add (arena, list, "container_fs_inodes_total", base, device, NULL, usage->inodes);
}

void
cri_metrics_of_network (struct cri_arena *arena, struct cri_metric_list *list, const char *const base[3],
                        const struct cri_net_dev *devs, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      const char *name;

      if (strcmp (devs[i].name, "lo") == 0)
        continue;
      name = cri_arena_adopt (arena, xstrdup (devs[i].name));
      add (arena, list, "container_network_receive_bytes_total", base, name, NULL, devs[i].rx_bytes);
      add (arena, list, "container_network_receive_errors_total", base, name, NULL, devs[i].rx_errors);
      add (arena, list, "container_network_transmit_bytes_total", base, name, NULL, devs[i].tx_bytes);
      add (arena, list, "container_network_transmit_errors_total", base, name, NULL, devs[i].tx_errors);
    }
}

void
cri_metric_list_finish (struct cri_arena *arena, struct cri_metric_list *list)
{
  if (list->items)
    cri_arena_adopt (arena, list->items);
}
