/* huskd's Prometheus metrics: every handler wrapped to count its calls
 * by status and time them, PullImage's bytes, the pods and containers
 * counted when scraped, and the endpoint on cfg->metrics_address. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cri/container/container_store.h"
#include "cri/stats/metrics.h"
#include "cri/stats/metrics_http.h"
#include "cri/pod/sandbox.h"
#include "cri/server/service.h"
#include "husk/cleanup.h"
#include "husk/util.h"

/* What a wrapped method's user pointer is. */
struct cri_meter
{
  struct cri_service *svc;
  rpc_handler handler;
  size_t index;
};

static uint64_t
monotonic_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* A unary handler (or a batched stream's) has the call's status when it
 * returns; one that forgot gets INTERNAL from the rpc layer. */
static void
metered (struct rpc_call *call, const void *req, size_t len, void *user)
{
  struct cri_meter *meter = user;
  uint64_t start = monotonic_ns ();
  grpc_status_code code;

  meter->handler (call, req, len, meter->svc);
  if (!rpc_call_status (call, &code))
    code = GRPC_STATUS_INTERNAL;
  metrics_rpc_observe (meter->svc->metrics, meter->index, code, monotonic_ns () - start);
}

void
cri_metrics_wrap (struct cri_service *svc, struct rpc_method *methods, size_t n)
{
  for (size_t i = 0; i < n && i < svc->metrics->n_rpcs; i++)
    {
      /* A stream of events lives as long as its client: not a latency. */
      if ((methods[i].flags & RPC_SERVER_STREAMING) && !(methods[i].flags & RPC_BATCHED_STREAM))
        continue;
      svc->meters[i] = (struct cri_meter){ .svc = svc, .handler = methods[i].handler, .index = i };
      methods[i].handler = metered;
      methods[i].user = &svc->meters[i];
    }
}

void
cri_metrics_pull (struct cri_service *svc, bool ok, uint64_t bytes)
{
  atomic_fetch_add (ok ? &svc->metrics->pulls_ok : &svc->metrics->pulls_failed, 1);
  atomic_fetch_add (&svc->metrics->pull_bytes, bytes);
}

/* husk_pods{state} and husk_containers{state}, as the stores have them now. */
static void
collect_objects (struct prom_buf *b, void *user)
{
  struct cri_service *svc = user;
  struct sandbox **pods = NULL;
  struct cri_container **containers = NULL;
  struct husk_error *err = NULL;
  size_t n_pods = 0, n_containers = 0;
  uint64_t pod_states[2] = { 0 }, container_states[3] = { 0 };
  static const char *const pod_names[] = { "ready", "notready" };
  static const char *const container_names[] = { "created", "running", "exited" };

  if (sandbox_list (svc->sandboxes, &pods, &n_pods, &err) == 0)
    {
      for (size_t i = 0; i < n_pods; i++)
        pod_states[pods[i]->state == SANDBOX_READY ? 0 : 1]++;
      prom_family (b, "husk_pods", "gauge", "Pod sandboxes by state.");
      for (size_t i = 0; i < 2; i++)
        prom_sample_u64 (b, "husk_pods", (const char *[]){ "state", pod_names[i], NULL }, pod_states[i]);
    }
  husk_error_free (&err);
  if (container_list (svc->containers, &containers, &n_containers, &err) == 0)
    {
      for (size_t i = 0; i < n_containers; i++)
        container_states[containers[i]->state]++;
      prom_family (b, "husk_containers", "gauge", "Containers by state.");
      for (size_t i = 0; i < 3; i++)
        prom_sample_u64 (b, "husk_containers", (const char *[]){ "state", container_names[i], NULL },
                         container_states[i]);
    }
  husk_error_free (&err);
  sandboxes_free (pods, n_pods);
  cri_containers_free (containers, n_containers);
}

static void
render (struct prom_buf *b, void *user)
{
  struct cri_service *svc = user;

  metrics_render (svc->metrics, b);
}

int
cri_metrics_start (struct cri_service *svc, const struct rpc_method *methods, size_t n,
                   struct husk_error **err)
{
  const char **paths = xcalloc (n + 1, sizeof *paths);
  bool *streaming = xcalloc (n + 1, sizeof *streaming);

  for (size_t i = 0; i < n; i++)
    {
      paths[i] = methods[i].path;
      streaming[i] = methods[i].flags & RPC_SERVER_STREAMING;
    }
  svc->metrics = metrics_new (paths, streaming, n);
  svc->meters = xcalloc (n + 1, sizeof *svc->meters);
  svc->metrics->collect = collect_objects;
  svc->metrics->collect_user = svc;
  free (paths);
  free (streaming);
  if (svc->cfg->metrics_address == NULL || svc->cfg->metrics_address[0] == '\0')
    return 0;
  if (metrics_http_start (svc->cfg->metrics_address, render, svc, &svc->metrics_http, err) < 0)
    return -1;
  husk_log (HUSK_LOG_INFO, "metrics on http://%s/metrics", metrics_http_address (svc->metrics_http));
  return 0;
}

void
cri_metrics_stop (struct cri_service *svc)
{
  metrics_http_stop (steal_pointer (&svc->metrics_http));
  metrics_free (steal_pointer (&svc->metrics));
  free (steal_pointer (&svc->meters));
}
