/* huskd's metrics registry and the Prometheus text format (metrics.h). */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cri/stats/metrics.h"
#include "husk/cleanup.h"
#include "husk/util.h"

const double metrics_buckets[METRICS_N_BUCKETS] = {
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120,
};

/* ------------------------------------------------------------------ */
/* text                                                                 */

static void
buf_reserve (struct prom_buf *b, size_t more)
{
  if (b->len + more + 1 <= b->cap)
    return;
  b->cap = (b->len + more + 1) * 2;
  b->data = xrealloc (b->data, b->cap);
}

static void
buf_add (struct prom_buf *b, const char *text, size_t len)
{
  buf_reserve (b, len);
  memcpy (b->data + b->len, text, len);
  b->len += len;
  b->data[b->len] = '\0';
}

static void __attribute__ ((format (printf, 2, 3))) buf_printf (struct prom_buf *b, const char *fmt, ...)
{
  va_list ap;
  int n;

  va_start (ap, fmt);
  n = vsnprintf (NULL, 0, fmt, ap);
  va_end (ap);
  buf_reserve (b, (size_t) n);
  va_start (ap, fmt);
  vsnprintf (b->data + b->len, (size_t) n + 1, fmt, ap);
  va_end (ap);
  b->len += (size_t) n;
}

void
prom_buf_clear (struct prom_buf *b)
{
  free (b->data);
  memset (b, 0, sizeof *b);
}

/* Backslash and newline always; the double quote inside label values. */
static void
buf_escaped (struct prom_buf *b, const char *text, bool quote)
{
  for (const char *c = text; *c; c++)
    {
      if (*c == '\\')
        buf_add (b, "\\\\", 2);
      else if (*c == '\n')
        buf_add (b, "\\n", 2);
      else if (*c == '"' && quote)
        buf_add (b, "\\\"", 2);
      else
        buf_add (b, c, 1);
    }
}

void
prom_family (struct prom_buf *b, const char *name, const char *type, const char *help)
{
  buf_printf (b, "# HELP %s ", name);
  buf_escaped (b, help, false);
  buf_printf (b, "\n# TYPE %s %s\n", name, type);
}

static void
sample_head (struct prom_buf *b, const char *name, const char *const *labels, const char *le)
{
  bool first = true;

  buf_add (b, name, strlen (name));
  if ((labels == NULL || labels[0] == NULL) && le == NULL)
    {
      buf_add (b, " ", 1);
      return;
    }
  buf_add (b, "{", 1);
  for (size_t i = 0; labels && labels[i] && labels[i + 1]; i += 2)
    {
      buf_printf (b, "%s%s=\"", first ? "" : ",", labels[i]);
      buf_escaped (b, labels[i + 1], true);
      buf_add (b, "\"", 1);
      first = false;
    }
  if (le)
    buf_printf (b, "%sle=\"%s\"", first ? "" : ",", le);
  buf_add (b, "} ", 2);
}

void
prom_sample_u64 (struct prom_buf *b, const char *name, const char *const *labels, uint64_t value)
{
  sample_head (b, name, labels, NULL);
  buf_printf (b, "%llu\n", (unsigned long long) value);
}

static void
buf_double (struct prom_buf *b, double value)
{
  if (isinf (value))
    buf_add (b, value > 0 ? "+Inf" : "-Inf", 4);
  else if (isnan (value))
    buf_add (b, "NaN", 3);
  else
    buf_printf (b, "%.15g", value);
}

void
prom_sample_double (struct prom_buf *b, const char *name, const char *const *labels, double value)
{
  sample_head (b, name, labels, NULL);
  buf_double (b, value);
  buf_add (b, "\n", 1);
}

void
prom_histogram (struct prom_buf *b, const char *name, const char *const *labels,
                const uint64_t counts[METRICS_N_BUCKETS + 1], double sum_s)
{
  cleanup_free char *bucket = xasprintf ("%s_bucket", name);
  cleanup_free char *sum = xasprintf ("%s_sum", name);
  cleanup_free char *count = xasprintf ("%s_count", name);
  uint64_t cumulative = 0;
  char le[32];

  for (size_t i = 0; i <= METRICS_N_BUCKETS; i++)
    {
      cumulative += counts[i];
      if (i < METRICS_N_BUCKETS)
        snprintf (le, sizeof le, "%g", metrics_buckets[i]);
      else
        strcpy (le, "+Inf");
      sample_head (b, bucket, labels, le);
      buf_printf (b, "%llu\n", (unsigned long long) cumulative);
    }
  prom_sample_double (b, sum, labels, sum_s);
  prom_sample_u64 (b, count, labels, cumulative);
}

const char *
metrics_code_name (grpc_status_code code)
{
  static const char *const names[METRICS_N_CODES] = {
    "OK",       "Canceled",        "Unknown",          "InvalidArgument",   "DeadlineExceeded",
    "NotFound", "AlreadyExists",   "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
    "Aborted",  "OutOfRange",      "Unimplemented",    "Internal",          "Unavailable",
    "DataLoss", "Unauthenticated",
  };

  return code >= 0 && code < METRICS_N_CODES ? names[code] : "Unknown";
}

/* ------------------------------------------------------------------ */
/* registry                                                             */

struct metrics *
metrics_new (const char *const *paths, const bool *streaming, size_t n)
{
  struct metrics *m = xcalloc (1, sizeof *m);

  m->rpcs = xcalloc (n + 1, sizeof *m->rpcs);
  m->n_rpcs = n;
  for (size_t i = 0; i < n; i++)
    {
      const char *path = paths[i][0] == '/' ? paths[i] + 1 : paths[i];
      const char *slash = strrchr (path, '/');

      m->rpcs[i].service = slash ? xasprintf ("%.*s", (int) (slash - path), path) : xstrdup ("");
      m->rpcs[i].method = xstrdup (slash ? slash + 1 : path);
      m->rpcs[i].streaming = streaming && streaming[i];
    }
  return m;
}

void
metrics_free (struct metrics *m)
{
  if (m == NULL)
    return;
  for (size_t i = 0; i < m->n_rpcs; i++)
    {
      free (m->rpcs[i].service);
      free (m->rpcs[i].method);
    }
  free (m->rpcs);
  free (m);
}

size_t
metrics_bucket_of (uint64_t duration_ns)
{
  double seconds = (double) duration_ns / 1e9;
  size_t i = 0;

  while (i < METRICS_N_BUCKETS && seconds > metrics_buckets[i])
    i++;
  return i;
}

void
metrics_rpc_observe (struct metrics *m, size_t index, grpc_status_code code, uint64_t duration_ns)
{
  struct metrics_rpc *rpc;

  if (index >= m->n_rpcs)
    return;
  rpc = &m->rpcs[index];
  atomic_fetch_add (&rpc->by_code[code >= 0 && code < METRICS_N_CODES ? code : GRPC_STATUS_UNKNOWN], 1);
  atomic_fetch_add (&rpc->buckets[metrics_bucket_of (duration_ns)], 1);
  atomic_fetch_add (&rpc->sum_ns, duration_ns);
}

static void
render_rpcs (struct metrics *m, struct prom_buf *b)
{
  prom_family (b, "grpc_server_handled_total", "counter",
               "Total number of RPCs completed on the server, regardless of success or failure.");
  for (size_t i = 0; i < m->n_rpcs; i++)
    for (int code = 0; code < METRICS_N_CODES; code++)
      {
        uint64_t n = atomic_load (&m->rpcs[i].by_code[code]);
        const char *labels[] = { "grpc_type",
                                 m->rpcs[i].streaming ? "server_stream" : "unary",
                                 "grpc_service",
                                 m->rpcs[i].service,
                                 "grpc_method",
                                 m->rpcs[i].method,
                                 "grpc_code",
                                 metrics_code_name (code),
                                 NULL };
        if (n)
          prom_sample_u64 (b, "grpc_server_handled_total", labels, n);
      }
  prom_family (
      b, "grpc_server_handling_seconds", "histogram",
      "Histogram of response latency (seconds) of gRPC that had been application-level handled by the "
      "server.");
  for (size_t i = 0; i < m->n_rpcs; i++)
    {
      uint64_t counts[METRICS_N_BUCKETS + 1], total = 0;
      const char *labels[] = { "grpc_type",
                               m->rpcs[i].streaming ? "server_stream" : "unary",
                               "grpc_service",
                               m->rpcs[i].service,
                               "grpc_method",
                               m->rpcs[i].method,
                               NULL };

      for (size_t j = 0; j <= METRICS_N_BUCKETS; j++)
        total += counts[j] = atomic_load (&m->rpcs[i].buckets[j]);
      if (total)
        prom_histogram (b, "grpc_server_handling_seconds", labels, counts,
                        (double) atomic_load (&m->rpcs[i].sum_ns) / 1e9);
    }
}

static void
render_pulls (struct metrics *m, struct prom_buf *b)
{
  const char *ok[] = { "result", "success", NULL }, *failed[] = { "result", "failure", NULL };

  prom_family (b, "husk_image_pulls_total", "counter", "Image pulls (PullImage) by result.");
  prom_sample_u64 (b, "husk_image_pulls_total", ok, atomic_load (&m->pulls_ok));
  prom_sample_u64 (b, "husk_image_pulls_total", failed, atomic_load (&m->pulls_failed));
  prom_family (b, "husk_image_pull_bytes_total", "counter",
               "Bytes of image layers PullImage downloaded from registries.");
  prom_sample_u64 (b, "husk_image_pull_bytes_total", NULL, atomic_load (&m->pull_bytes));
}

/* The boot time in unix seconds (/proc/stat btime), 0 when unknown. */
static double
boot_time_s (void)
{
  cleanup_free char *text = NULL;
  struct husk_error *err = NULL;
  const char *line;
  unsigned long long btime = 0;

  if (husk_read_file ("/proc/stat", &text, NULL, &err) < 0)
    {
      husk_error_free (&err);
      return 0;
    }
  line = strstr (text, "\nbtime ");
  if (line)
    sscanf (line + 7, "%llu", &btime);
  return (double) btime;
}

/* process_* as Prometheus client libraries name them, from /proc/self. */
static void
render_process (struct prom_buf *b)
{
  cleanup_free char *stat = NULL;
  long ticks = sysconf (_SC_CLK_TCK), page = sysconf (_SC_PAGESIZE);
  unsigned long long utime = 0, stime = 0, start = 0, vsize = 0, rss = 0;
  struct husk_error *err = NULL;
  size_t fds = 0;
  DIR *dir;

  if (husk_read_file ("/proc/self/stat", &stat, NULL, &err) < 0)
    {
      husk_error_free (&err);
      return;
    }
  /* After the ")" ending comm: fields 3.. ; utime 14, stime 15, starttime 22, vsize 23, rss 24. */
  const char *p = strrchr (stat, ')');
  if (p == NULL
      || sscanf (
             p + 2,
             "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu %llu %llu",
             &utime, &stime, &start, &vsize, &rss)
             != 5)
    return;
  if ((dir = opendir ("/proc/self/fd")))
    {
      struct dirent *e;
      while ((e = readdir (dir)))
        fds += e->d_name[0] != '.';
      closedir (dir);
    }
  prom_family (b, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
  prom_sample_double (b, "process_cpu_seconds_total", NULL, (double) (utime + stime) / (double) ticks);
  prom_family (b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  prom_sample_u64 (b, "process_resident_memory_bytes", NULL, rss * (unsigned long long) page);
  prom_family (b, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
  prom_sample_u64 (b, "process_virtual_memory_bytes", NULL, vsize);
  prom_family (b, "process_open_fds", "gauge", "Number of open file descriptors.");
  prom_sample_u64 (b, "process_open_fds", NULL, fds > 0 ? fds - 1 : 0); /* less the one opendir holds */
  prom_family (b, "process_start_time_seconds", "gauge",
               "Start time of the process since unix epoch in seconds.");
  prom_sample_double (b, "process_start_time_seconds", NULL,
                      boot_time_s () + (double) start / (double) ticks);
}

void
metrics_render (struct metrics *m, struct prom_buf *b)
{
  const char *version[] = { "version", HUSK_VERSION, NULL };

  prom_family (b, "husk_build_info", "gauge", "huskd's version; always 1.");
  prom_sample_u64 (b, "husk_build_info", version, 1);
  render_rpcs (m, b);
  render_pulls (m, b);
  if (m->collect)
    m->collect (b, m->collect_user);
  render_process (b);
}
