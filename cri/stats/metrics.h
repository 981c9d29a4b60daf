/* huskd's Prometheus metrics: counters the service bumps (RPCs by method
 * and status with their latency, image pulls and the bytes they
 * downloaded), gauges read when scraped (pods, containers, the process),
 * and the text exposition format 0.0.4 they are served in by
 * metrics_http.h.  The counters are atomics: any thread may bump them
 * while another renders.
 *
 *   grpc_server_handled_total{grpc_type,grpc_service,grpc_method,grpc_code}
 *   grpc_server_handling_seconds{grpc_type,grpc_service,grpc_method} (histogram)
 *   husk_image_pulls_total{result}, husk_image_pull_bytes_total
 *   husk_pods{state}, husk_containers{state}   (by the service's collector)
 *   husk_build_info{version}, process_*          */
#ifndef HUSK_CRI_METRICS_H
#define HUSK_CRI_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/status.h>

/* ------------------------------------------------------------ exposition */

/* A growing text buffer. */
struct prom_buf
{
  char *data;
  size_t len, cap;
};

void prom_buf_clear (struct prom_buf *b);

/* "# HELP NAME HELP" (backslash and newline escaped) and "# TYPE NAME TYPE". */
void prom_family (struct prom_buf *b, const char *name, const char *type, const char *help);
/* One sample: NAME{k1="v1",...} VALUE.  LABELS is a NULL-terminated list
 * of key, value pairs (NULL: none); values are escaped (\\, \", \n). */
void prom_sample_u64 (struct prom_buf *b, const char *name, const char *const *labels, uint64_t value);
void prom_sample_double (struct prom_buf *b, const char *name, const char *const *labels, double value);

#define METRICS_N_BUCKETS 18
/* The histogram's upper bounds in seconds (then +Inf): from 100 µs, where
 * most of huskd's calls end, to the 2 minutes a pull may take. */
extern const double metrics_buckets[METRICS_N_BUCKETS];

/* A histogram NAME with LABELS (as above, without "le"): NAME_bucket per
 * bound of metrics_buckets and +Inf (COUNTS: per bucket, not cumulative,
 * the last one past every bound), NAME_sum (SUM_S) and NAME_count. */
void prom_histogram (struct prom_buf *b, const char *name, const char *const *labels,
                     const uint64_t counts[METRICS_N_BUCKETS + 1], double sum_s);

/* "OK", "NotFound", ... as gRPC's Go code names them. */
const char *metrics_code_name (grpc_status_code code);

/* ------------------------------------------------------------ registry */

#define METRICS_N_CODES 17

struct metrics_rpc
{
  char *service; /* "runtime.v1.RuntimeService" */
  char *method;  /* "Version" */
  bool streaming;
  atomic_uint_fast64_t by_code[METRICS_N_CODES];
  atomic_uint_fast64_t buckets[METRICS_N_BUCKETS + 1];
  atomic_uint_fast64_t sum_ns;
};

/* Adds the families the owner reads when scraped. */
typedef void (*metrics_collect_fn) (struct prom_buf *b, void *user);

struct metrics
{
  struct metrics_rpc *rpcs;
  size_t n_rpcs;
  atomic_uint_fast64_t pulls_ok, pulls_failed, pull_bytes;
  metrics_collect_fn collect;
  void *collect_user;
};

/* PATHS: the N gRPC method paths ("/package.Service/Method"), STREAMING
 * marks the server-streaming ones (may be NULL). */
struct metrics *metrics_new (const char *const *paths, const bool *streaming, size_t n);
void metrics_free (struct metrics *m);

/* Call INDEX (into the paths given to metrics_new) ended with CODE after
 * DURATION_NS. */
void metrics_rpc_observe (struct metrics *m, size_t index, grpc_status_code code, uint64_t duration_ns);

/* The whole exposition into B (appended). */
void metrics_render (struct metrics *m, struct prom_buf *b);

/* The bucket DURATION_NS falls in (METRICS_N_BUCKETS: past every bound). */
size_t metrics_bucket_of (uint64_t duration_ns);

#endif
