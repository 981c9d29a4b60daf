/* Unit tests for huskd's metrics: the Prometheus text format (escaping,
 * samples, histograms), the registry's buckets and rendering, the
 * endpoint's request routing and its clients that vanish or idle, protobuf-c messages as JSON (verbose
 * ContainerStatus "config"), and the cAdvisor-named CRI metrics made from
 * a cgroup sample and /proc/net/dev.  Needs no root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

/* Built with -I$(BUILD)/gen -Ulinux (fields named `linux`). */
#include "cri/proto/api.pb-c.h"

#include "cri/cri_json.h"
#include "cri/cri_stats_metrics.h"
#include "cri/metrics.h"
#include "cri/metrics_http.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define MIB (1024ull * 1024)

/* ------------------------------------------------------------------ */
/* text format                                                          */

static void
test_family_escapes_help (void **state)
{
  struct prom_buf b = { 0 };

  prom_family (&b, "x_total", "counter", "a \\ b\nc \"q\"");
  assert_string_equal (b.data, "# HELP x_total a \\\\ b\\nc \"q\"\n# TYPE x_total counter\n");
  prom_buf_clear (&b);
}

static void
test_sample_labels_escaped (void **state)
{
  struct prom_buf b = { 0 };
  const char *labels[] = { "path", "C:\\x", "msg", "say \"hi\"\nbye", NULL };

  prom_sample_u64 (&b, "m", labels, 18446744073709551615ull);
  assert_string_equal (b.data, "m{path=\"C:\\\\x\",msg=\"say \\\"hi\\\"\\nbye\"} 18446744073709551615\n");
  prom_buf_clear (&b);
  prom_sample_u64 (&b, "plain", NULL, 0);
  prom_sample_double (&b, "ratio", NULL, 0.25);
  assert_string_equal (b.data, "plain 0\nratio 0.25\n");
  prom_buf_clear (&b);
}

static void
test_histogram_cumulative (void **state)
{
  struct prom_buf b = { 0 };
  uint64_t counts[METRICS_N_BUCKETS + 1] = { 0 };
  const char *labels[] = { "m", "V", NULL };

  counts[0] = 2;                 /* <= 100 us */
  counts[3] = 1;                 /* <= 1 ms */
  counts[METRICS_N_BUCKETS] = 4; /* past 120 s */
  prom_histogram (&b, "h", labels, counts, 1000.5);
  assert_non_null (strstr (b.data, "h_bucket{m=\"V\",le=\"0.0001\"} 2\n"));
  assert_non_null (strstr (b.data, "h_bucket{m=\"V\",le=\"0.0005\"} 2\n"));
  assert_non_null (strstr (b.data, "h_bucket{m=\"V\",le=\"0.001\"} 3\n"));
  assert_non_null (strstr (b.data, "h_bucket{m=\"V\",le=\"120\"} 3\n"));
  assert_non_null (strstr (b.data, "h_bucket{m=\"V\",le=\"+Inf\"} 7\n"));
  assert_non_null (strstr (b.data, "h_sum{m=\"V\"} 1000.5\n"));
  assert_non_null (strstr (b.data, "h_count{m=\"V\"} 7\n"));
  prom_buf_clear (&b);
}

static void
test_bucket_bounds (void **state)
{
  assert_int_equal (metrics_bucket_of (0), 0);
  assert_int_equal (metrics_bucket_of (100000), 0); /* exactly 100 us: le is inclusive */
  assert_int_equal (metrics_bucket_of (100001), 1);
  assert_int_equal (metrics_bucket_of (1000000000), 12); /* 1 s */
  assert_int_equal (metrics_bucket_of (121000000000ull), METRICS_N_BUCKETS);
  assert_string_equal (metrics_code_name (GRPC_STATUS_OK), "OK");
  assert_string_equal (metrics_code_name (GRPC_STATUS_NOT_FOUND), "NotFound");
  assert_string_equal (metrics_code_name (GRPC_STATUS_UNAUTHENTICATED), "Unauthenticated");
  assert_string_equal (metrics_code_name (99), "Unknown");
}

static void
test_registry_render (void **state)
{
  const char *paths[] = { "/runtime.v1.RuntimeService/Version", "/runtime.v1.ImageService/PullImage",
                          "/runtime.v1.RuntimeService/GetContainerEvents" };
  bool streaming[] = { false, false, true };
  struct metrics *m = metrics_new (paths, streaming, 3);
  struct prom_buf b = { 0 };

  metrics_rpc_observe (m, 0, GRPC_STATUS_OK, 50000);
  metrics_rpc_observe (m, 0, GRPC_STATUS_OK, 2000000);
  metrics_rpc_observe (m, 0, GRPC_STATUS_INVALID_ARGUMENT, 10);
  metrics_rpc_observe (m, 7, GRPC_STATUS_OK, 10); /* no such method: ignored */
  atomic_fetch_add (&m->pull_bytes, 12345);
  atomic_fetch_add (&m->pulls_failed, 1);
  metrics_render (m, &b);
  assert_non_null (strstr (b.data, "grpc_server_handled_total{grpc_type=\"unary\",grpc_service=\"runtime.v1."
                                   "RuntimeService\",grpc_method=\"Version\",grpc_code=\"OK\"} 2\n"));
  assert_non_null (strstr (b.data, "grpc_method=\"Version\",grpc_code=\"InvalidArgument\"} 1\n"));
  assert_non_null (strstr (b.data,
                           "grpc_server_handling_seconds_count{grpc_type=\"unary\",grpc_service=\"runtime."
                           "v1.RuntimeService\",grpc_method=\"Version\"} 3\n"));
  assert_non_null (strstr (b.data, "grpc_method=\"Version\",le=\"0.0001\"} 2\n"));
  /* Methods never called have no samples. */
  assert_null (strstr (b.data, "grpc_method=\"PullImage\""));
  assert_null (strstr (b.data, "grpc_method=\"GetContainerEvents\""));
  assert_non_null (strstr (b.data, "husk_image_pull_bytes_total 12345\n"));
  assert_non_null (strstr (b.data, "husk_image_pulls_total{result=\"failure\"} 1\n"));
  assert_non_null (strstr (b.data, "husk_build_info{version=\"" HUSK_VERSION "\"} 1\n"));
  assert_non_null (strstr (b.data, "# TYPE process_resident_memory_bytes gauge\n"));
  prom_buf_clear (&b);
  metrics_free (m);
}

static void
test_http_route (void **state)
{
  bool body;

  assert_int_equal (metrics_http_route ("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &body), 200);
  assert_true (body);
  assert_int_equal (metrics_http_route ("HEAD /metrics HTTP/1.0\r\n\r\n", &body), 200);
  assert_false (body);
  assert_int_equal (metrics_http_route ("GET /metrics?name[]=up HTTP/1.1\r\n\r\n", &body), 200);
  assert_int_equal (metrics_http_route ("GET / HTTP/1.1\r\n\r\n", &body), 404);
  assert_int_equal (metrics_http_route ("GET /metricsx HTTP/1.1\r\n\r\n", &body), 404);
  assert_int_equal (metrics_http_route ("POST /metrics HTTP/1.1\r\n\r\n", &body), 405);
  assert_int_equal (metrics_http_route ("GET /metrics SPDY/3\r\n\r\n", &body), 400);
  assert_int_equal (metrics_http_route ("\r\n\r\n", &body), 400);
}

/* A body of 4 MiB, so that a scrape is still being sent when its client
 * has gone. */
static void
render_big (struct prom_buf *b, void *user)
{
  for (int i = 0; i < 65536; i++)
    {
      char n[8];
      const char *const labels[] = { "n", n, NULL };
      snprintf (n, sizeof n, "%05d", i);
      prom_sample_u64 (b, "husk_test_padding_with_a_long_name_to_fill_the_body", labels,
                       1234567890123456789ull);
    }
}

static int
connect_metrics (const char *address)
{
  unsigned port = 0;
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  sscanf (address, "127.0.0.1:%u", &port);
  addr.sin_port = htons ((uint16_t) port);
  assert_int_equal (connect (fd, (struct sockaddr *) &addr, sizeof addr), 0);
  return fd;
}

/* The status line of a scrape of ADDRESS, its body's size in *BODY. */
static void
scrape (const char *address, char *status, size_t cap, size_t *body)
{
  int fd = connect_metrics (address);
  cleanup_free char *all = xmalloc (8 << 20);
  size_t len = 0;
  ssize_t n;
  char *end;

  assert_int_equal (husk_write_all (fd, "GET /metrics HTTP/1.1\r\n\r\n", 25), 0);
  while ((n = read (fd, all + len, (8 << 20) - 1 - len)) > 0)
    len += (size_t) n;
  all[len] = '\0';
  close (fd);
  end = strstr (all, "\r\n");
  snprintf (status, cap, "%.*s", end ? (int) (end - all) : 0, all);
  end = strstr (all, "\r\n\r\n");
  *body = end ? len - (size_t) (end + 4 - all) : 0;
}

/* Clients that reset mid-answer cost the endpoint nothing (this process
 * does not block SIGPIPE, so a plain write would end it); clients that
 * hold connections open without a request do not hold up a scrape. */
static void
test_http_hostile_clients (void **state)
{
  struct metrics_http *srv = NULL;
  struct husk_error *err = NULL;
  struct linger hard = { .l_onoff = 1, .l_linger = 0 };
  int idle[100];
  char status[64];
  size_t body;

  assert_int_equal (metrics_http_start ("127.0.0.1:0", render_big, NULL, &srv, &err), 0);
  for (int i = 0; i < 20; i++)
    {
      int fd = connect_metrics (metrics_http_address (srv));
      const char *head = i % 2 ? "GET /metrics HTTP/1.1\r\n\r\n" : "GET /metrics HTTP/1.1\r\n";
      assert_int_equal (husk_write_all (fd, head, strlen (head)), 0);
      usleep (i % 2 ? 20000 : 0);
      setsockopt (fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
      close (fd);
    }
  for (int i = 0; i < 100; i++)
    idle[i] = connect_metrics (metrics_http_address (srv));
  /* The reset scrapes may still hold the 4 workers (a slow render under
   * ASan): 503 with Retry-After until they are done. */
  for (int tries = 0; tries < 100; tries++)
    {
      scrape (metrics_http_address (srv), status, sizeof status, &body);
      if (strcmp (status, "HTTP/1.1 503 Service Unavailable") != 0)
        break;
      usleep (100000);
    }
  assert_string_equal (status, "HTTP/1.1 200 OK");
  assert_true (body > 4000000);
  for (int i = 0; i < 100; i++)
    close (idle[i]);
  metrics_http_stop (srv);
}

/* ------------------------------------------------------------------ */
/* protobuf-c as JSON                                                   */

static void
test_message_json (void **state)
{
  Runtime__V1__ContainerConfig cfg = RUNTIME__V1__CONTAINER_CONFIG__INIT;
  Runtime__V1__ContainerMetadata meta = RUNTIME__V1__CONTAINER_METADATA__INIT;
  Runtime__V1__ContainerConfig__LabelsEntry l1 = RUNTIME__V1__CONTAINER_CONFIG__LABELS_ENTRY__INIT;
  Runtime__V1__ContainerConfig__LabelsEntry l2 = RUNTIME__V1__CONTAINER_CONFIG__LABELS_ENTRY__INIT;
  Runtime__V1__ContainerConfig__LabelsEntry *labels[] = { &l1, &l2 };
  Runtime__V1__LinuxContainerConfig linux_cfg = RUNTIME__V1__LINUX_CONTAINER_CONFIG__INIT;
  Runtime__V1__LinuxContainerResources res = RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT;
  char *command[] = { "sleep", "9" };
  json_t *doc;
  char *text;

  meta.name = "c";
  meta.attempt = 2;
  cfg.metadata = &meta;
  cfg.n_command = 2;
  cfg.command = command;
  l1.key = l2.key = "app";
  l1.value = "old";
  l2.value = "new";
  cfg.n_labels = 2;
  cfg.labels = labels;
  cfg.stdin = 1;
  res.memory_limit_in_bytes = 5000000000ll;
  linux_cfg.resources = &res;
  cfg.linux = &linux_cfg;
  doc = cri_message_json (&cfg.base);
  text = json_dumps (doc, JSON_COMPACT | JSON_SORT_KEYS);
  /* Zero values (working_dir "", tty false, cpu_shares 0, ...) are left out;
   * a map key given twice keeps the last value. */
  assert_string_equal (text,
                       "{\"command\":[\"sleep\",\"9\"],\"labels\":{\"app\":\"new\"},\"linux\":{\"resources\":"
                       "{\"memory_limit_in_bytes\":5000000000}},\"metadata\":{\"attempt\":2,\"name\":\"c\"},"
                       "\"stdin\":true}");
  free (text);
  json_decref (doc);
  doc = cri_message_json (NULL);
  assert_true (json_is_null (doc));
}

/* ------------------------------------------------------------------ */
/* CRI metrics                                                          */

static const Runtime__V1__Metric *
find (const struct cri_metric_list *list, const char *name, const char *extra)
{
  for (size_t i = 0; i < list->n; i++)
    if (strcmp (list->items[i]->name, name) == 0
        && (extra == NULL
            || (list->items[i]->n_label_values > 3 && strcmp (list->items[i]->label_values[3], extra) == 0)))
      return list->items[i];
  return NULL;
}

static void
test_descriptors (void **state)
{
  struct cri_arena arena = { 0 };
  Runtime__V1__MetricDescriptor **d;
  size_t n;

  cri_metric_descriptors (&arena, &d, &n);
  assert_true (n > 20);
  for (size_t i = 0; i < n; i++)
    {
      assert_true (d[i]->n_label_keys >= 3);
      assert_string_equal (d[i]->label_keys[0], "id");
      assert_string_equal (d[i]->label_keys[2], "image");
      assert_true (strlen (d[i]->help) > 0);
      for (size_t j = i + 1; j < n; j++)
        assert_string_not_equal (d[i]->name, d[j]->name);
      if (strcmp (d[i]->name, "container_memory_failures_total") == 0)
        {
          assert_int_equal (d[i]->n_label_keys, 5);
          assert_string_equal (d[i]->label_keys[3], "failure_type");
          assert_string_equal (d[i]->label_keys[4], "scope");
        }
    }
  cri_arena_clear (&arena);
}

static void
test_cgroup_metrics (void **state)
{
  struct cri_arena arena = { 0 };
  struct cri_metric_list list = { 0 };
  struct husk_cgroup_stats s = { .has_cpu = true, .has_memory = true, .has_pids = true };
  struct husk_cgroup_io_stat io = { .major = 8, .minor = 0, .read_bytes = 4096, .write_bytes = 8192 };
  const char *base[3] = { "cid", "web", "busybox" };
  const Runtime__V1__Metric *m;

  s.cpu.usage_usec = 2999999; /* 2.999999 s: whole seconds */
  s.cpu.user_usec = 1000000;
  s.memory.usage = 10 * MIB;
  s.memory.working_set = 8 * MIB;
  s.memory.limit = HUSK_CGROUP_UNLIMITED;
  s.memory.page_faults = 77;
  s.pids.current = 3;
  s.io = &io;
  s.n_io = 1;
  cri_metrics_of_cgroup (&arena, &list, base, &s);
  cri_metric_list_finish (&arena, &list);
  m = find (&list, "container_cpu_usage_seconds_total", "total");
  assert_non_null (m);
  assert_int_equal (m->value->value, 2);
  assert_int_equal (m->metric_type, RUNTIME__V1__METRIC_TYPE__COUNTER);
  assert_int_equal (m->n_label_values, 4);
  assert_string_equal (m->label_values[0], "cid");
  assert_string_equal (m->label_values[1], "web");
  assert_string_equal (m->label_values[2], "busybox");
  assert_null (find (&list, "container_cpu_cfs_periods_total", NULL)); /* no quota, no periods */
  m = find (&list, "container_memory_working_set_bytes", NULL);
  assert_int_equal (m->value->value, 8 * MIB);
  assert_int_equal (m->metric_type, RUNTIME__V1__METRIC_TYPE__GAUGE);
  assert_int_equal (find (&list, "container_spec_memory_limit_bytes", NULL)->value->value, 0);
  assert_int_equal (find (&list, "container_memory_failures_total", "pgfault")->value->value, 77);
  assert_null (find (&list, "container_memory_swap", NULL)); /* no swap accounting */
  assert_int_equal (find (&list, "container_processes", NULL)->value->value, 3);
  assert_int_equal (find (&list, "container_fs_writes_bytes_total", "8:0")->value->value, 8192);
  cri_arena_clear (&arena);
}

static void
test_cgroup_metrics_without_memory_controller (void **state)
{
  struct cri_arena arena = { 0 };
  struct cri_metric_list list = { 0 };
  struct husk_cgroup_stats s = { .has_cpu = false, .has_memory = false };
  const char *base[3] = { "cid", "web", "busybox" };

  s.memory.usage = s.memory.working_set = s.memory.anon = MIB; /* from the processes */
  cri_metrics_of_cgroup (&arena, &list, base, &s);
  cri_metric_list_finish (&arena, &list);
  assert_int_equal (list.n, 3);
  assert_non_null (find (&list, "container_memory_working_set_bytes", NULL));
  assert_null (find (&list, "container_memory_cache", NULL));
  assert_null (find (&list, "container_cpu_usage_seconds_total", NULL));
  cri_arena_clear (&arena);
}

static void
test_network_metrics (void **state)
{
  struct cri_arena arena = { 0 };
  struct cri_metric_list list = { 0 };
  struct cri_net_dev devs[] = { { "lo", 1, 0, 1, 0 }, { "eth0", 1000, 2, 500, 1 }, { "net1", 7, 0, 9, 0 } };
  const char *base[3] = { "pod", "p", "" };

  cri_metrics_of_network (&arena, &list, base, devs, 3);
  cri_metric_list_finish (&arena, &list);
  assert_int_equal (list.n, 8); /* 4 per interface, lo left out */
  assert_int_equal (find (&list, "container_network_receive_bytes_total", "eth0")->value->value, 1000);
  assert_int_equal (find (&list, "container_network_transmit_errors_total", "eth0")->value->value, 1);
  assert_int_equal (find (&list, "container_network_transmit_bytes_total", "net1")->value->value, 9);
  assert_null (find (&list, "container_network_receive_bytes_total", "lo"));
  cri_arena_clear (&arena);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_family_escapes_help),
    cmocka_unit_test (test_sample_labels_escaped),
    cmocka_unit_test (test_histogram_cumulative),
    cmocka_unit_test (test_bucket_bounds),
    cmocka_unit_test (test_registry_render),
    cmocka_unit_test (test_http_route),
    cmocka_unit_test (test_http_hostile_clients),
    cmocka_unit_test (test_message_json),
    cmocka_unit_test (test_descriptors),
    cmocka_unit_test (test_cgroup_metrics),
    cmocka_unit_test (test_cgroup_metrics_without_memory_controller),
    cmocka_unit_test (test_network_metrics),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
