/* The container event hub's side under the handlers: the statuses an
 * event carries (also ContainerStatus's), the events the container and pod
 * handlers announce, and the watcher of exit files that announces the rest.
 * Handlers call down into it, never into each other for it. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cri/container/container_store.h"
#include "cri/container/containers.h"
#include "cri/container/events.h"
#include "cri/config/runtime_exec.h"
#include "cri/pod/sandbox.h"
#include "cri/server/container_lost.h"
#include "cri/server/service.h"
#include "husk/cleanup.h"
#include "husk/util.h"

Runtime__V1__ContainerState
cri_container_state_value (enum cri_container_state state)
{
  switch (state)
    {
    case CRI_CONTAINER_CREATED:
      return RUNTIME__V1__CONTAINER_STATE__CONTAINER_CREATED;
    case CRI_CONTAINER_RUNNING:
      return RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING;
    case CRI_CONTAINER_EXITED:
      return RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED;
    }
  return RUNTIME__V1__CONTAINER_STATE__CONTAINER_UNKNOWN;
}

/* The status of C pointing into it, into IMAGE and into its
 * ContainerConfig: the map entries of ContainerConfig and of the status
 * have the same fields and numbers, so they pack to the same bytes.
 * ContainerStatus replies with it, events carry it. */

void
cri_container_status_of (const struct cri_container *c, Runtime__V1__ContainerStatus *status,
                         struct cri_status_parts *parts)
{
  Runtime__V1__ImageSpec *image = &parts->image;

  runtime__v1__container_status__init (status);
  runtime__v1__image_spec__init (image);
  runtime__v1__container_resources__init (&parts->resources);
  image->image = c->image;
  /* What the container runs with now, updates included. */
  if (c->config->linux && c->config->linux->resources)
    {
      parts->resources.linux = c->config->linux->resources;
      status->resources = &parts->resources;
    }
  status->id = c->id;
  status->metadata = c->config->metadata;
  status->state = cri_container_state_value (c->state);
  status->created_at = c->created_at;
  status->started_at = c->started_at;
  status->finished_at = c->finished_at;
  status->exit_code = c->exit_code;
  status->image = image;
  status->image_ref = c->image_ref;
  status->image_id = c->image_id;
  status->reason = c->reason ?: "";
  status->message = c->message ?: "";
  status->n_labels = c->config->n_labels;
  status->labels = (Runtime__V1__ContainerStatus__LabelsEntry **) c->config->labels;
  status->n_annotations = c->config->n_annotations;
  status->annotations = (Runtime__V1__ContainerStatus__AnnotationsEntry **) c->config->annotations;
  status->n_mounts = c->config->n_mounts;
  status->mounts = c->config->mounts;
  status->log_path = c->log_path ?: "";
}

/* What the hub remembers per container, under its order lock. */
enum event_flag
{
  /* StartContainer runs: an exit seen now is sent after STARTED. */
  EV_STARTING = 1 << 0,
  /* STOPPED was sent, or the exit happened before this huskd started:
   * exits while huskd was down are not announced (nobody was subscribed;
   * a client that reconnects relists, as kubelet does). */
  EV_STOPPED = 1 << 1,
};

static bool
is_container_id (const char *name)
{
  return strlen (name) == 64 && strspn (name, "0123456789abcdef") == 64;
}

/* The statuses of the containers of C's pod, pointing into LIST. */
struct pod_statuses
{
  struct cri_container **list;
  size_t n_list, n;
  Runtime__V1__ContainerStatus *statuses, **ptrs;
  struct cri_status_parts *parts;
};

static void
pod_statuses_init (struct cri_service *svc, const char *sandbox_id, struct pod_statuses *out)
{
  struct husk_error *ignored = NULL;

  memset (out, 0, sizeof *out);
  if (container_list (svc->containers, &out->list, &out->n_list, &ignored) < 0)
    husk_error_free (&ignored);
  out->statuses = xcalloc (out->n_list + 1, sizeof *out->statuses);
  out->parts = xcalloc (out->n_list + 1, sizeof *out->parts);
  out->ptrs = xcalloc (out->n_list + 1, sizeof *out->ptrs);
  for (size_t i = 0; i < out->n_list; i++)
    if (strcmp (out->list[i]->sandbox_id, sandbox_id) == 0)
      {
        cri_container_status_of (out->list[i], &out->statuses[out->n], &out->parts[out->n]);
        out->ptrs[out->n] = &out->statuses[out->n];
        out->n++;
      }
}

static void
pod_statuses_clear (struct pod_statuses *statuses)
{
  free (statuses->statuses);
  free (statuses->parts);
  free (statuses->ptrs);
  cri_containers_free (statuses->list, statuses->n_list);
}

/* Sends TYPE for C with its pod's status and the statuses of the pod's
 * containers as they are now (a deleted one is no longer among them). */
static void
publish_for (struct cri_service *svc, Runtime__V1__ContainerEventType type, const char *id,
             const char *sandbox_id)
{
  Runtime__V1__ContainerEventResponse event = RUNTIME__V1__CONTAINER_EVENT_RESPONSE__INIT;
  struct husk_error *ignored = NULL;
  struct pod_statuses statuses;
  struct sandbox *sb = NULL;
  cleanup_free uint8_t *bytes = NULL;
  size_t size;

  if (cri_events_subscribers (svc->events) == 0)
    return;
  event.container_id = (char *) id;
  event.container_event_type = type;
  event.created_at = cri_now_ns ();
  if (sandbox_lookup (svc->sandboxes, sandbox_id, &sb, &ignored) == 0)
    event.pod_sandbox_status = cri_pod_status_new (sb);
  husk_error_free (&ignored);
  pod_statuses_init (svc, sandbox_id, &statuses);
  event.n_containers_statuses = statuses.n;
  event.containers_statuses = statuses.ptrs;
  size = protobuf_c_message_get_packed_size (&event.base);
  bytes = xmalloc (size ? size : 1);
  protobuf_c_message_pack (&event.base, bytes);
  cri_events_publish (svc->events, bytes, size);
  pod_statuses_clear (&statuses);
  cri_pod_status_free (event.pod_sandbox_status);
  sandbox_free (sb);
}

static void
publish_event (struct cri_service *svc, Runtime__V1__ContainerEventType type, const struct cri_container *c)
{
  publish_for (svc, type, c->id, c->sandbox_id);
}

void
cri_pod_event (struct cri_service *svc, Runtime__V1__ContainerEventType type, const char *sandbox_id)
{
  if (svc->events == NULL)
    return;
  cri_events_lock (svc->events);
  publish_for (svc, type, sandbox_id, sandbox_id);
  cri_events_unlock (svc->events);
}

void
cri_note_created (struct cri_service *svc, const struct cri_container *c)
{
  cri_events_lock (svc->events);
  publish_event (svc, RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_CREATED_EVENT, c);
  cri_events_unlock (svc->events);
}

void
cri_note_starting (struct cri_service *svc, const char *id)
{
  cri_events_lock (svc->events);
  cri_events_set_flags (svc->events, id, cri_events_flags (svc->events, id) | EV_STARTING);
  cri_events_unlock (svc->events);
}

/* Called with the order lock held, C folded and exited. */
static void
stopped_once_locked (struct cri_service *svc, const struct cri_container *c)
{
  unsigned flags = cri_events_flags (svc->events, c->id);

  if (flags & (EV_STOPPED | EV_STARTING))
    return;
  cri_events_set_flags (svc->events, c->id, flags | EV_STOPPED);
  publish_event (svc, RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STOPPED_EVENT, c);
}

/* STARTED when the runtime started it; then STOPPED if it has exited
 * already (or the start failed and the record says exited). */
void
cri_note_started (struct cri_service *svc, const char *id, bool started)
{
  struct husk_error *ignored = NULL;
  struct cri_container *c = NULL;

  cri_events_lock (svc->events);
  cri_events_set_flags (svc->events, id, cri_events_flags (svc->events, id) & ~EV_STARTING);
  if (container_lookup (svc->containers, id, &c, &ignored) < 0)
    husk_error_free (&ignored);
  else
    {
      if (started)
        publish_event (svc, RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_STARTED_EVENT, c);
      if (c->state == CRI_CONTAINER_EXITED)
        stopped_once_locked (svc, c);
    }
  cri_events_unlock (svc->events);
  cri_container_free (c);
}

/* The exit file of ID appeared (the watcher, StopContainer, RemoveContainer:
 * whoever is first sends STOPPED).  The lookup folds it into the record. */
void
cri_note_exit (struct cri_service *svc, const char *id)
{
  struct husk_error *ignored = NULL;
  struct cri_container *c = NULL;

  cri_events_lock (svc->events);
  /* Starting: note_started folds it, after StartContainer's own write of
   * the record (two writers of one record would race). */
  if (!(cri_events_flags (svc->events, id) & EV_STARTING))
    {
      if (container_lookup (svc->containers, id, &c, &ignored) < 0)
        husk_error_free (&ignored);
      else if (c->state == CRI_CONTAINER_EXITED)
        stopped_once_locked (svc, c);
    }
  cri_events_unlock (svc->events);
  cri_container_free (c);
}

/* C's record is gone: a late exit event finds nothing to announce. */
void
cri_note_deleted (struct cri_service *svc, const struct cri_container *c)
{
  cri_events_lock (svc->events);
  publish_event (svc, RUNTIME__V1__CONTAINER_EVENT_TYPE__CONTAINER_DELETED_EVENT, c);
  cri_events_set_flags (svc->events, c->id, 0);
  cri_events_unlock (svc->events);
}

static void
on_exit_file (const char *name, void *user)
{
  if (is_container_id (name))
    cri_note_exit (user, name);
}

/* Every running container's monitor, as huskd starts: those that died
 * while it was down are found now. */
static void
watch_monitors (struct cri_service *svc)
{
  struct cri_container **list = NULL;
  struct husk_error *ignored = NULL;
  size_t n = 0;

  if (container_list (svc->containers, &list, &n, &ignored) < 0)
    {
      husk_warn ("watch the monitors: %s", ignored->msg);
      husk_error_free (&ignored);
    }
  for (size_t i = 0; i < n; i++)
    cri_watch_monitor (svc, list[i]);
  cri_containers_free (list, n);
}

int
cri_container_events_start (struct cri_service *svc, struct husk_error **err)
{
  const char *exit_dir = svc->containers->exit_dir;
  cleanup_dir DIR *dir = NULL;
  struct dirent *de;

  svc->events = cri_events_new ();
  /* Watching first: an exit from now on is either seen here or reported. */
  if (cri_events_watch (svc->events, exit_dir, on_exit_file, svc, err) < 0)
    return husk_error_wrap (err, "container exits");
  if ((dir = opendir (exit_dir)) == NULL)
    return husk_error_make (err, errno, "list `%s`", exit_dir);
  cri_events_lock (svc->events);
  while ((de = readdir (dir)) != NULL)
    if (is_container_id (de->d_name))
      cri_events_set_flags (svc->events, de->d_name, EV_STOPPED);
  cri_events_unlock (svc->events);
  watch_monitors (svc);
  return 0;
}

void
cri_container_events_stop (struct cri_service *svc)
{
  cri_events_free (svc->events);
  svc->events = NULL;
}
