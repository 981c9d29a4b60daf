/* The CRI's own metrics RPCs (ListMetricDescriptors, ListPodSandboxMetrics)
 * from the samples the stats RPCs read: a cgroup sample of a container,
 * its writable layer, a pod's network counters, turned into cAdvisor's
 * metric names (kubelet serves them on /metrics/cadvisor as they come).
 * Every metric has the labels id, name, image (the container's, or the
 * pod's with an empty image), then its own (cpu, interface, device,
 * failure_type and scope).  Values are whole numbers (the CRI's
 * UInt64Value): the *_seconds_total counters are whole seconds.
 * Unit-tested in test/unit/test_cri_metrics.c. */
#ifndef HUSK_CRI_CRI_STATS_METRICS_H
#define HUSK_CRI_CRI_STATS_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "cri/stats/cri_stats.h"

/* Every metric husk reports: *OUT (arena memory) gets N descriptors. */
void cri_metric_descriptors (struct cri_arena *arena, Runtime__V1__MetricDescriptor ***out, size_t *n);

/* A list of metrics being built. */
struct cri_metric_list
{
  Runtime__V1__Metric **items;
  size_t n, cap;
};

/* The metrics of one container sample S (the controllers it has), with
 * BASE = { id, name, image }.  Arena memory; LIST's array too once
 * cri_metric_list_finish has run. */
void cri_metrics_of_cgroup (struct cri_arena *arena, struct cri_metric_list *list, const char *const base[3],
                            const struct husk_cgroup_stats *s);
/* container_fs_usage_bytes and container_fs_inodes_total of the writable
 * layer at DEVICE (its upper dir). */
void cri_metrics_of_layer (struct cri_arena *arena, struct cri_metric_list *list, const char *const base[3],
                           const char *device, const struct cri_dir_usage *usage);
/* container_network_* of each interface but lo. */
void cri_metrics_of_network (struct cri_arena *arena, struct cri_metric_list *list, const char *const base[3],
                             const struct cri_net_dev *devs, size_t n);
/* Hands LIST's array to ARENA. */
void cri_metric_list_finish (struct cri_arena *arena, struct cri_metric_list *list);

#endif
