/* A pod's PodSandboxStatus, as the PodSandboxStatus RPC replies with it and
 * as the container events carry it (service_sandbox.c, service_container.c):
 * the message and what it points into, built from a sandbox record.  Under
 * the handlers, so neither calls the other for it. */
#include <stdlib.h>
#include <string.h>

#include "cri/server/pod_status.h"
#include "cri/server/service.h"
#include "husk/util.h"

void
cri_map_free (void *entries)
{
  void **list = entries;

  if (list)
    free (list[0]);
  free (list);
}

void
cri_pod_status_view_init (struct status_view *view, const struct sandbox *sb)
{
  const Runtime__V1__PodSandboxConfig *config = sb->config;
  const Runtime__V1__LinuxSandboxSecurityContext *sec
      = config->linux ? config->linux->security_context : NULL;
  size_t n_ips = husk_strv_len (sb->ips);

  memset (view, 0, sizeof *view);
  runtime__v1__pod_sandbox_status__init (&view->status);
  runtime__v1__pod_sandbox_network_status__init (&view->network);
  runtime__v1__linux_pod_sandbox_status__init (&view->linux_status);
  runtime__v1__namespace__init (&view->namespaces);
  runtime__v1__namespace_option__init (&view->options);
  if (sec && sec->namespace_options)
    {
      view->options.network = sec->namespace_options->network;
      view->options.pid = sec->namespace_options->pid;
      view->options.ipc = sec->namespace_options->ipc;
      view->options.target_id = sec->namespace_options->target_id;
    }
  view->status.id = sb->id;
  view->status.metadata = config->metadata;
  view->status.state = sb->state == SANDBOX_READY ? RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY
                                                  : RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_NOTREADY;
  view->status.created_at = sb->created_at;
  view->ip_storage = xcalloc (n_ips + 1, sizeof *view->ip_storage);
  view->additional_ips = xcalloc (n_ips + 1, sizeof *view->additional_ips);
  for (size_t i = 1; i < n_ips; i++)
    {
      runtime__v1__pod_ip__init (&view->ip_storage[i]);
      view->ip_storage[i].ip = sb->ips[i];
      view->additional_ips[i - 1] = &view->ip_storage[i];
    }
  view->network.ip = n_ips ? sb->ips[0] : "";
  view->network.n_additional_ips = n_ips ? n_ips - 1 : 0;
  view->network.additional_ips = view->additional_ips;
  view->status.network = &view->network;
  view->namespaces.options = &view->options;
  view->linux_status.namespaces = &view->namespaces;
  view->status.linux = &view->linux_status;
  view->status.runtime_handler = sb->runtime_handler;
  COPY_MAP (Runtime__V1__PodSandboxStatus__LabelsEntry, RUNTIME__V1__POD_SANDBOX_STATUS__LABELS_ENTRY__INIT,
            config->labels, config->n_labels, view->status.labels);
  view->status.n_labels = config->n_labels;
  COPY_MAP (Runtime__V1__PodSandboxStatus__AnnotationsEntry,
            RUNTIME__V1__POD_SANDBOX_STATUS__ANNOTATIONS_ENTRY__INIT, config->annotations,
            config->n_annotations, view->status.annotations);
  view->status.n_annotations = config->n_annotations;
}

void
cri_pod_status_view_clear (struct status_view *view)
{
  free (view->ip_storage);
  free (view->additional_ips);
  cri_map_free (view->status.labels);
  cri_map_free (view->status.annotations);
}

/* For the events of the pod's containers (service_container.c): the same
 * view, on the heap.  STATUS is the view's first member. */
Runtime__V1__PodSandboxStatus *
cri_pod_status_new (const struct sandbox *sb)
{
  struct status_view *view = xmalloc (sizeof *view);

  cri_pod_status_view_init (view, sb);
  return &view->status;
}

void
cri_pod_status_free (Runtime__V1__PodSandboxStatus *status)
{
  struct status_view *view = (struct status_view *) status;

  if (view == NULL)
    return;
  cri_pod_status_view_clear (view);
  free (view);
}
