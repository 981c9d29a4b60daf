/* The event hub of cri/container/events.h.  A subscriber belongs to its call (freed
 * when the call is released); the hub's list only points at it, and
 * whoever takes it off the list ends its stream, so each stream is ended
 * exactly once whether its client went, a send failed or huskd stops. */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "cri/container/events.h"
#include "cri/config/runtime_exec.h"
#include "husk/cleanup.h"
#include "husk/util.h"

/* How often a waiter looks again on its own: rarely with a watcher (only
 * a lost event needs it), as often as the old poll without one. */
#define RECHECK_WATCHED_MS 250
#define RECHECK_UNWATCHED_MS 20

struct subscriber
{
  struct cri_events *hub;
  struct rpc_call *call;
  struct subscriber *next;
  int send_errno; /* why it was dropped */
  bool listed;    /* on hub->subscribers */
  bool gone;      /* the client went before it was listed */
};

struct container_flags
{
  char *id;
  unsigned flags;
};

/* A process the watcher waits for.  Its pidfd is closed by the watcher
 * thread only (or at free), so a number it polls is never reused under it. */
struct pid_watch
{
  int pidfd;
  char *key;
  cri_events_pid_fn on_exit;
  void *user;
};

struct cri_events
{
  pthread_mutex_t lock; /* subscribers and closed */
  struct subscriber *subscribers;
  size_t n_subscribers;
  bool closed;

  pthread_mutex_t order_lock; /* and the flags table */
  struct container_flags *table;
  size_t n_table;

  pthread_mutex_t wait_lock;
  pthread_cond_t exit_seen; /* CLOCK_MONOTONIC */
  char *watch_dir;
  int inotify_fd, stop_fd;
  pthread_t watcher;
  bool watching;
  cri_events_file_fn on_file;
  void *on_file_user;

  pthread_mutex_t pid_lock; /* the pid watches; innermost lock */
  struct pid_watch *pids;
  size_t n_pids;
  int wake_fd; /* a pid watch was added: poll again with it */
};

struct cri_events *
cri_events_new (void)
{
  struct cri_events *hub = xcalloc (1, sizeof *hub);
  pthread_condattr_t attr;

  pthread_mutex_init (&hub->lock, NULL);
  pthread_mutex_init (&hub->order_lock, NULL);
  pthread_mutex_init (&hub->wait_lock, NULL);
  pthread_mutex_init (&hub->pid_lock, NULL);
  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (&hub->exit_seen, &attr);
  pthread_condattr_destroy (&attr);
  hub->inotify_fd = hub->stop_fd = hub->wake_fd = -1;
  return hub;
}

/* ------------------------------------------------------------------ */
/* subscribers                                                          */

/* Takes SUB off the list; true if it was on it (the caller ends it). */
static bool
unlist_locked (struct cri_events *hub, struct subscriber *sub)
{
  for (struct subscriber **link = &hub->subscribers; *link; link = &(*link)->next)
    if (*link == sub)
      {
        *link = sub->next;
        sub->listed = false;
        hub->n_subscribers--;
        return true;
      }
  return false;
}

/* On a completion-queue thread: the client went, its deadline passed or
 * the server is shutting down. */
static void
on_cancel (struct rpc_call *call, void *user)
{
  struct subscriber *sub = user;
  struct cri_events *hub = sub->hub;
  bool mine;

  pthread_mutex_lock (&hub->lock);
  mine = unlist_locked (hub, sub);
  if (!mine)
    sub->gone = true;
  pthread_mutex_unlock (&hub->lock);
  if (mine)
    rpc_stream_finish (call, GRPC_STATUS_CANCELLED, "GetContainerEvents: cancelled");
}

void
cri_events_subscribe (struct cri_events *hub, struct rpc_call *call)
{
  struct subscriber *sub = xcalloc (1, sizeof *sub);
  bool refused;

  sub->hub = hub;
  sub->call = call;
  /* First, so that no other thread can end the call before the callback
   * is set; a cancel that happened already runs it now and marks SUB gone. */
  rpc_call_on_cancel (call, on_cancel, sub, free);
  pthread_mutex_lock (&hub->lock);
  refused = hub->closed || sub->gone;
  if (!refused)
    {
      sub->next = hub->subscribers;
      sub->listed = true;
      hub->subscribers = sub;
      hub->n_subscribers++;
    }
  pthread_mutex_unlock (&hub->lock);
  if (refused)
    rpc_stream_finish (call, hub->closed ? GRPC_STATUS_UNAVAILABLE : GRPC_STATUS_CANCELLED,
                       "GetContainerEvents: huskd is stopping");
}

size_t
cri_events_subscribers (struct cri_events *hub)
{
  size_t n;

  if (hub == NULL)
    return 0;
  pthread_mutex_lock (&hub->lock);
  n = hub->n_subscribers;
  pthread_mutex_unlock (&hub->lock);
  return n;
}

void
cri_events_publish (struct cri_events *hub, const void *bytes, size_t len)
{
  struct subscriber *dropped = NULL, *next;

  if (hub == NULL)
    return;
  pthread_mutex_lock (&hub->lock);
  for (struct subscriber *sub = hub->subscribers; sub; sub = next)
    {
      next = sub->next;
      if (rpc_stream_send (sub->call, bytes, len) == 0)
        continue;
      sub->send_errno = errno;
      unlist_locked (hub, sub);
      sub->next = dropped;
      dropped = sub;
    }
  pthread_mutex_unlock (&hub->lock);
  /* Ended outside the lock: ending may release the call, which frees SUB. */
  for (struct subscriber *sub = dropped; sub; sub = next)
    {
      next = sub->next;
      if (sub->send_errno == ENOBUFS)
        rpc_stream_finish (sub->call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                           "GetContainerEvents: the client does not read its events");
      else if (sub->send_errno != EALREADY)
        rpc_stream_finish (sub->call, GRPC_STATUS_CANCELLED, NULL);
    }
}

/* Ends every stream: huskd is going. */
static void
close_subscribers (struct cri_events *hub)
{
  struct subscriber *list, *next;

  pthread_mutex_lock (&hub->lock);
  hub->closed = true;
  list = hub->subscribers;
  for (struct subscriber *sub = list; sub; sub = sub->next)
    sub->listed = false;
  hub->subscribers = NULL;
  hub->n_subscribers = 0;
  pthread_mutex_unlock (&hub->lock);
  for (struct subscriber *sub = list; sub; sub = next)
    {
      next = sub->next;
      rpc_stream_finish (sub->call, GRPC_STATUS_OK, NULL);
    }
}

/* ------------------------------------------------------------------ */
/* order lock and per-container flags                                   */

void
cri_events_lock (struct cri_events *hub)
{
  if (hub)
    pthread_mutex_lock (&hub->order_lock);
}

void
cri_events_unlock (struct cri_events *hub)
{
  if (hub)
    pthread_mutex_unlock (&hub->order_lock);
}

static struct container_flags *
flags_entry (struct cri_events *hub, const char *id)
{
  for (size_t i = 0; i < hub->n_table; i++)
    if (strcmp (hub->table[i].id, id) == 0)
      return &hub->table[i];
  return NULL;
}

unsigned
cri_events_flags (struct cri_events *hub, const char *id)
{
  struct container_flags *entry = hub ? flags_entry (hub, id) : NULL;

  return entry ? entry->flags : 0;
}

void
cri_events_set_flags (struct cri_events *hub, const char *id, unsigned flags)
{
  struct container_flags *entry;

  if (hub == NULL)
    return;
  entry = flags_entry (hub, id);
  if (entry && flags == 0)
    {
      free (entry->id);
      *entry = hub->table[--hub->n_table];
    }
  else if (entry)
    entry->flags = flags;
  else if (flags)
    {
      hub->table = xrealloc (hub->table, (hub->n_table + 1) * sizeof *hub->table);
      hub->table[hub->n_table++] = (struct container_flags){ xstrdup (id), flags };
    }
}

/* ------------------------------------------------------------------ */
/* the exit watcher                                                     */

static void
wake_waiters (struct cri_events *hub)
{
  pthread_mutex_lock (&hub->wait_lock);
  pthread_cond_broadcast (&hub->exit_seen);
  pthread_mutex_unlock (&hub->wait_lock);
}

/* The kernel dropped events: every file present may be new. */
static void
rescan (struct cri_events *hub)
{
  cleanup_dir DIR *dir = opendir (hub->watch_dir);
  struct dirent *de;

  while (dir && (de = readdir (dir)) != NULL)
    if (de->d_name[0] != '.')
      hub->on_file (de->d_name, hub->on_file_user);
}

/* One read of the inotify fd: the names renamed in, in order. */
static void
handle_events (struct cri_events *hub)
{
  char buf[16 * (sizeof (struct inotify_event) + 256)]
      __attribute__ ((aligned (__alignof__(struct inotify_event))));
  ssize_t len = read (hub->inotify_fd, buf, sizeof buf);
  bool overflow = false;
  cleanup_strv char **names = NULL;

  if (len <= 0)
    return;
  for (char *p = buf; p < buf + len;)
    {
      const struct inotify_event *ev = (const struct inotify_event *) p;
      if (ev->mask & IN_Q_OVERFLOW)
        overflow = true;
      else if ((ev->mask & IN_MOVED_TO) && ev->len > 0)
        names = husk_strv_append (names, ev->name);
      p += sizeof *ev + ev->len;
    }
  wake_waiters (hub);
  for (size_t i = 0; names && names[i]; i++)
    hub->on_file (names[i], hub->on_file_user);
  if (overflow)
    rescan (hub);
}

enum
{
  FD_INOTIFY,
  FD_STOP,
  FD_WAKE,
  FD_FIRST_PID,
};

/* The fds to poll: the fixed ones, then every pidfd; *N gets the count. */
static struct pollfd *
poll_set (struct cri_events *hub, size_t *n)
{
  struct pollfd *fds;

  pthread_mutex_lock (&hub->pid_lock);
  *n = FD_FIRST_PID + hub->n_pids;
  fds = xcalloc (*n, sizeof *fds);
  fds[FD_INOTIFY].fd = hub->inotify_fd;
  fds[FD_STOP].fd = hub->stop_fd;
  fds[FD_WAKE].fd = hub->wake_fd;
  for (size_t i = 0; i < hub->n_pids; i++)
    fds[FD_FIRST_PID + i].fd = hub->pids[i].pidfd;
  for (size_t i = 0; i < *n; i++)
    fds[i].events = POLLIN;
  pthread_mutex_unlock (&hub->pid_lock);
  return fds;
}

/* PIDFD's process exited: its watch is taken off the list, its callback
 * called (outside the lock), and then its pidfd closed. */
static void
pid_exited (struct cri_events *hub, int pidfd)
{
  struct pid_watch found = { .pidfd = -1 };

  pthread_mutex_lock (&hub->pid_lock);
  for (size_t i = 0; i < hub->n_pids; i++)
    if (hub->pids[i].pidfd == pidfd)
      {
        found = hub->pids[i];
        hub->pids[i] = hub->pids[--hub->n_pids];
        break;
      }
  pthread_mutex_unlock (&hub->pid_lock);
  if (found.pidfd < 0)
    return;
  found.on_exit (found.key, found.pidfd, found.user);
  close (found.pidfd);
  free (found.key);
}

static void *
watch_thread (void *arg)
{
  struct cri_events *hub = arg;

  for (;;)
    {
      size_t n;
      cleanup_free struct pollfd *fds = poll_set (hub, &n);
      uint64_t count;

      if (poll (fds, n, -1) < 0 && errno != EINTR)
        {
          husk_warn ("watch `%s`: poll: %s", hub->watch_dir, strerror (errno));
          break;
        }
      if (fds[FD_STOP].revents)
        break;
      if (fds[FD_WAKE].revents && read (hub->wake_fd, &count, sizeof count) < 0)
        husk_debug ("watch `%s`: read the wake fd: %s", hub->watch_dir, strerror (errno));
      if (fds[FD_INOTIFY].revents)
        handle_events (hub);
      for (size_t i = FD_FIRST_PID; i < n; i++)
        if (fds[i].revents)
          pid_exited (hub, fds[i].fd);
    }
  return NULL;
}

int
cri_events_watch_pid (struct cri_events *hub, int pidfd, const char *key, cri_events_pid_fn on_exit,
                      void *user, struct husk_error **err)
{
  uint64_t one = 1;
  bool known = false;

  if (hub == NULL || !hub->watching)
    {
      close (pidfd);
      return husk_error_kind (err, ENOTCONN, "watch %s: the exit watcher is not running", key);
    }
  pthread_mutex_lock (&hub->pid_lock);
  for (size_t i = 0; i < hub->n_pids && !known; i++)
    known = strcmp (hub->pids[i].key, key) == 0;
  if (!known)
    {
      hub->pids = xrealloc (hub->pids, (hub->n_pids + 1) * sizeof *hub->pids);
      hub->pids[hub->n_pids++] = (struct pid_watch){ pidfd, xstrdup (key), on_exit, user };
    }
  pthread_mutex_unlock (&hub->pid_lock);
  if (known)
    close (pidfd);
  else if (write (hub->wake_fd, &one, sizeof one) < 0)
    husk_debug ("watch %s: wake the watcher: %s", key, strerror (errno));
  return known ? 0 : 1;
}

bool
cri_events_watching_pid (struct cri_events *hub, const char *key)
{
  bool known = false;

  if (hub == NULL)
    return false;
  pthread_mutex_lock (&hub->pid_lock);
  for (size_t i = 0; i < hub->n_pids && !known; i++)
    known = strcmp (hub->pids[i].key, key) == 0;
  pthread_mutex_unlock (&hub->pid_lock);
  return known;
}

int
cri_events_watch (struct cri_events *hub, const char *dir, cri_events_file_fn on_file, void *user,
                  struct husk_error **err)
{
  cleanup_close int inotify_fd = inotify_init1 (IN_CLOEXEC | IN_NONBLOCK);
  cleanup_close int stop_fd = -1, wake_fd = -1;
  int ret;

  if (hub->watching)
    return husk_error_kind (err, EBUSY, "watch `%s`: already watching `%s`", dir, hub->watch_dir);
  if (inotify_fd < 0)
    return husk_error_make (err, errno, "watch `%s`: inotify_init1", dir);
  if (inotify_add_watch (inotify_fd, dir, IN_MOVED_TO | IN_ONLYDIR) < 0)
    return husk_error_make (err, errno, "watch `%s`", dir);
  if ((stop_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0
      || (wake_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
    return husk_error_make (err, errno, "watch `%s`: eventfd", dir);
  hub->watch_dir = xstrdup (dir);
  hub->on_file = on_file;
  hub->on_file_user = user;
  hub->inotify_fd = steal_fd (&inotify_fd);
  hub->stop_fd = steal_fd (&stop_fd);
  hub->wake_fd = steal_fd (&wake_fd);
  /* Set first: the thread may be asked to watch a pid at once. */
  hub->watching = true;
  ret = pthread_create (&hub->watcher, NULL, watch_thread, hub);
  if (ret != 0)
    {
      hub->watching = false;
      close (hub->inotify_fd);
      close (hub->stop_fd);
      close (hub->wake_fd);
      hub->inotify_fd = hub->stop_fd = hub->wake_fd = -1;
      return husk_error_make (err, ret, "watch `%s`: start the watcher thread", dir);
    }
  return 0;
}

static void
unwatch (struct cri_events *hub)
{
  uint64_t one = 1;

  if (!hub->watching)
    return;
  if (write (hub->stop_fd, &one, sizeof one) < 0)
    husk_warn ("stop the watcher of `%s`: %s", hub->watch_dir, strerror (errno));
  pthread_join (hub->watcher, NULL);
  close (hub->inotify_fd);
  close (hub->stop_fd);
  close (hub->wake_fd);
  hub->watching = false;
}

static void
deadline_in (struct timespec *ts, int64_t ms)
{
  clock_gettime (CLOCK_MONOTONIC, ts);
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (ms % 1000) * 1000000;
  if (ts->tv_nsec >= 1000000000)
    {
      ts->tv_sec++;
      ts->tv_nsec -= 1000000000;
    }
}

bool
cri_events_wait_file (struct cri_events *hub, const char *path, int64_t timeout_ms)
{
  int64_t deadline = cri_monotonic_ms () + (timeout_ms > 0 ? timeout_ms : 0);
  bool watched = hub && hub->watching;
  int64_t recheck = watched ? RECHECK_WATCHED_MS : RECHECK_UNWATCHED_MS;
  bool found;

  if (!watched)
    {
      while (!(found = access (path, F_OK) == 0) && cri_monotonic_ms () < deadline)
        poll (NULL, 0, (int) recheck);
      return found;
    }
  pthread_mutex_lock (&hub->wait_lock);
  /* Checked under the lock the watcher wakes under: a rename after the
   * check is announced after this thread waits. */
  while (!(found = access (path, F_OK) == 0))
    {
      int64_t left = deadline - cri_monotonic_ms ();
      struct timespec ts;

      if (left <= 0)
        break;
      deadline_in (&ts, left < recheck ? left : recheck);
      pthread_cond_timedwait (&hub->exit_seen, &hub->wait_lock, &ts);
    }
  pthread_mutex_unlock (&hub->wait_lock);
  return found;
}

void
cri_events_free (struct cri_events *hub)
{
  if (hub == NULL)
    return;
  unwatch (hub);
  close_subscribers (hub);
  for (size_t i = 0; i < hub->n_pids; i++)
    {
      close (hub->pids[i].pidfd);
      free (hub->pids[i].key);
    }
  free (hub->pids);
  pthread_mutex_destroy (&hub->pid_lock);
  for (size_t i = 0; i < hub->n_table; i++)
    free (hub->table[i].id);
  free (hub->table);
  free (hub->watch_dir);
  pthread_cond_destroy (&hub->exit_seen);
  pthread_mutex_destroy (&hub->wait_lock);
  pthread_mutex_destroy (&hub->order_lock);
  pthread_mutex_destroy (&hub->lock);
  free (hub);
}
