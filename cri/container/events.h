/* huskd's event hub for GetContainerEvents: the open streams, one
 * publisher that sends each packed event to all of them, a small table of
 * per-container flags that lets the container RPCs send each container's
 * events once and in order, and the one thread that watches the exit
 * directory (waking whoever waits for an exit file) and the processes it
 * is given (monitors, and inits whose monitor was lost). */
#ifndef HUSK_CRI_EVENTS_H
#define HUSK_CRI_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cri/rpc/server.h"
#include "husk/error.h"

struct cri_events;

struct cri_events *cri_events_new (void);
/* Stops the watcher, ends every open stream with OK and frees the hub.
 * NULL is a no-op. */
void cri_events_free (struct cri_events *hub);

/* Keeps the streaming CALL until the client goes away, a send on it fails
 * or the hub is freed; returns at once (callable on a completion-queue
 * thread). */
void cri_events_subscribe (struct cri_events *hub, struct rpc_call *call);
/* How many streams are open. */
size_t cri_events_subscribers (struct cri_events *hub);
/* Queues BYTES on every open stream.  A stream whose client has gone or
 * whose queue is full is dropped and ended (the latter with
 * RESOURCE_EXHAUSTED: a client that does not read loses its stream, not
 * the others their events). */
void cri_events_publish (struct cri_events *hub, const void *bytes, size_t len);

/* The order lock: held while deciding on, building and publishing one
 * container's event, so that each container's events leave in the order of
 * its transitions.  It is the innermost lock of the container RPCs but for
 * the sandbox store's and the hub's own. */
void cri_events_lock (struct cri_events *hub);
void cri_events_unlock (struct cri_events *hub);
/* Flags kept per container id (meaning is the caller's), under the order
 * lock.  Setting 0 forgets the id. */
unsigned cri_events_flags (struct cri_events *hub, const char *id);
void cri_events_set_flags (struct cri_events *hub, const char *id, unsigned flags);

/* Watches DIR for files renamed into it (the monitor writes exit files to a
 * temp name, then renames them): for each, wakes every waiter, then calls
 * ON_FILE (NAME, USER) on the watcher thread.  One watch per hub. */
typedef void (*cri_events_file_fn) (const char *name, void *user);
int cri_events_watch (struct cri_events *hub, const char *dir, cri_events_file_fn on_file, void *user,
                      struct husk_error **err);
/* Hands PIDFD to the watcher thread: once its process has exited it calls
 * ON_EXIT (KEY, PIDFD, USER) there, then closes PIDFD.  KEY names the
 * watch: a second watch of one KEY closes its PIDFD and returns 0 (1 when
 * added).  Without a running watcher PIDFD is closed and it fails. */
typedef void (*cri_events_pid_fn) (const char *key, int pidfd, void *user);
int cri_events_watch_pid (struct cri_events *hub, int pidfd, const char *key, cri_events_pid_fn on_exit,
                          void *user, struct husk_error **err);
/* Whether a watch of KEY is waiting. */
bool cri_events_watching_pid (struct cri_events *hub, const char *key);

/* Until PATH exists or TIMEOUT_MS has passed; true if it exists.  Woken by
 * the watcher; re-checks now and then in case an event was lost (and
 * polls when HUB is NULL or watches nothing). */
bool cri_events_wait_file (struct cri_events *hub, const char *path, int64_t timeout_ms);

#endif
