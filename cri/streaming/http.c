/* The shared front door of huskd's HTTP servers (see http.h): the head
 * reader on one poll loop, replies without SIGPIPE, bounded workers. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cri/streaming/http.h"
#include "cri/streaming/http_head.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define ACCEPT_BATCH 64

struct pending
{
  int fd;
  int64_t deadline_ms;
  size_t len;
  char head[HTTP_HEAD_MAX + 1];
};

struct http_acceptor
{
  struct http_acceptor_options opts;
  int stop_fd;
  pthread_t thread;
  struct pending **pending; /* oldest first */
  size_t n_pending;
};

static int64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
http_send_all (int fd, const void *data, size_t len, int timeout_ms)
{
  const char *p = data;
  int64_t deadline = now_ms () + timeout_ms;

  while (len > 0)
    {
      ssize_t n = send (fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0)
        {
          p += n, len -= (size_t) n;
          continue;
        }
      if (n < 0 && errno == EINTR)
        continue;
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
        return -1;
      struct pollfd w = { .fd = fd, .events = POLLOUT };
      int64_t left = deadline - now_ms ();
      if (left <= 0 || poll (&w, 1, (int) left) == 0)
        return errno = ETIMEDOUT, -1;
    }
  return 0;
}

void
http_send_status (int fd, int code, const char *reason, const char *extra, const char *message)
{
  cleanup_free char *resp
      = xasprintf ("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
                   "%sConnection: close\r\n\r\n%s\n",
                   code, reason, strlen (message) + 1, extra ? extra : "", message);

  (void) http_send_all (fd, resp, strlen (resp), 0);
}

/* ------------------------------------------------------------------ */
/* Pending connections                                                  */

static void
drop_pending (struct http_acceptor *a, size_t i)
{
  close (a->pending[i]->fd);
  free (a->pending[i]);
  memmove (&a->pending[i], &a->pending[i + 1], (a->n_pending - i - 1) * sizeof *a->pending);
  a->n_pending--;
}

static void
add_pending (struct http_acceptor *a, int fd)
{
  struct pending *p = xmalloc (sizeof *p);

  /* Full: the oldest has had the longest to send its head. */
  if (a->n_pending == a->opts.max_pending)
    {
      husk_debug ("%s: %u connections without a request head: closing the oldest", a->opts.name,
                  a->opts.max_pending);
      drop_pending (a, 0);
    }
  p->fd = fd, p->len = 0, p->head[0] = '\0';
  p->deadline_ms = now_ms () + a->opts.head_timeout_ms;
  a->pending[a->n_pending++] = p;
}

/* Takes what P's client has sent, never past the end of its head (what
 * follows is the upgraded protocol's): 1 when the head is complete, 0
 * for more to come, -1 when the connection is done with. */
static int
read_pending (struct pending *p)
{
  size_t room = HTTP_HEAD_MAX - p->len, end, take;
  ssize_t n = recv (p->fd, p->head + p->len, room, MSG_PEEK | MSG_DONTWAIT);

  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
    return 0;
  if (n <= 0)
    return -1;
  end = http_head_end (p->head, p->len + (size_t) n);
  take = end ? end - p->len : (size_t) n;
  if (recv (p->fd, p->head + p->len, take, MSG_DONTWAIT) != (ssize_t) take)
    return -1;
  p->len += take;
  p->head[p->len] = '\0';
  if (end)
    return 1;
  if (p->len == HTTP_HEAD_MAX)
    {
      http_send_status (p->fd, 431, "Request Header Fields Too Large", NULL, "request head over 8192 bytes");
      return -1;
    }
  return 0;
}

static void
serve_pending (struct http_acceptor *a, size_t i)
{
  struct pending *p = a->pending[i];
  int rc = read_pending (p);

  if (rc < 0)
    drop_pending (a, i);
  else if (rc > 0)
    {
      a->pending[i] = NULL;
      memmove (&a->pending[i], &a->pending[i + 1], (a->n_pending - i - 1) * sizeof *a->pending);
      a->n_pending--;
      a->opts.on_head (a->opts.user, p->fd, p->head, p->len);
      free (p);
    }
}

static void
expire_pending (struct http_acceptor *a, int64_t now)
{
  for (size_t i = 0; i < a->n_pending;)
    if (a->pending[i]->deadline_ms <= now)
      {
        http_send_status (a->pending[i]->fd, 408, "Request Timeout", NULL,
                          a->pending[i]->len ? "the request head did not end in time" : "no request came");
        drop_pending (a, i);
      }
    else
      i++;
}

static void
accept_some (struct http_acceptor *a)
{
  for (int i = 0; i < ACCEPT_BATCH; i++)
    {
      int fd = accept4 (a->opts.listen_fd, NULL, NULL, SOCK_CLOEXEC);
      if (fd >= 0)
        add_pending (a, fd);
      else if (errno == EMFILE || errno == ENFILE)
        {
          /* Out of fds: a pending slot frees one, or a pause. */
          if (a->n_pending > 0)
            drop_pending (a, 0);
          else
            usleep (100000);
          return;
        }
      else if (errno != EINTR)
        return; /* EAGAIN: the listener is non-blocking */
    }
}

static void *
acceptor_main (void *arg)
{
  struct http_acceptor *a = arg;
  cleanup_free struct pollfd *fds = xcalloc (a->opts.max_pending + 2, sizeof *fds);

  for (;;)
    {
      int64_t now = now_ms ();
      expire_pending (a, now);
      fds[0] = (struct pollfd){ .fd = a->stop_fd, .events = POLLIN };
      fds[1] = (struct pollfd){ .fd = a->opts.listen_fd, .events = POLLIN };
      for (size_t i = 0; i < a->n_pending; i++)
        fds[2 + i] = (struct pollfd){ .fd = a->pending[i]->fd, .events = POLLIN };
      /* The oldest is the first to run out of time. */
      int timeout = a->n_pending ? (int) (a->pending[0]->deadline_ms - now) : -1;
      if (poll (fds, 2 + a->n_pending, timeout < 0 && a->n_pending ? 0 : timeout) < 0)
        {
          if (errno == EINTR)
            continue;
          husk_warn ("%s: poll: %s", a->opts.name, strerror (errno));
          usleep (100000);
          continue;
        }
      if (fds[0].revents)
        return NULL;
      /* From the end: a connection leaving moves only those after it. */
      for (size_t i = a->n_pending; i-- > 0;)
        if (fds[2 + i].revents)
          serve_pending (a, i);
      if (fds[1].revents)
        accept_some (a);
    }
}

int
http_acceptor_start (const struct http_acceptor_options *opts, struct http_acceptor **out,
                     struct husk_error **err)
{
  struct http_acceptor *a = xcalloc (1, sizeof *a);
  int rc;

  a->opts = *opts;
  if (a->opts.head_timeout_ms <= 0)
    a->opts.head_timeout_ms = HTTP_HEAD_TIMEOUT_MS;
  if (a->opts.max_pending == 0)
    a->opts.max_pending = 1;
  a->pending = xcalloc (a->opts.max_pending, sizeof *a->pending);
  if (fcntl (opts->listen_fd, F_SETFL, fcntl (opts->listen_fd, F_GETFL) | O_NONBLOCK) < 0
      || (a->stop_fd = eventfd (0, EFD_CLOEXEC)) < 0)
    {
      husk_error_make (err, errno, "%s server: set up its listener", opts->name);
      free (a->pending);
      free (a);
      return -1;
    }
  if ((rc = pthread_create (&a->thread, NULL, acceptor_main, a)) != 0)
    {
      husk_error_make (err, rc, "%s server: start its thread", opts->name);
      close (a->stop_fd);
      free (a->pending);
      free (a);
      return -1;
    }
  *out = a;
  return 0;
}

void
http_acceptor_stop (struct http_acceptor *a)
{
  uint64_t one = 1;

  if (a == NULL)
    return;
  if (write (a->stop_fd, &one, sizeof one) < 0)
    husk_warn ("%s: cannot signal the stop: %s", a->opts.name, strerror (errno));
  pthread_join (a->thread, NULL);
  while (a->n_pending > 0)
    drop_pending (a, a->n_pending - 1);
  close (a->opts.listen_fd);
  close (a->stop_fd);
  free (a->pending);
  free (a);
}

/* ------------------------------------------------------------------ */
/* Workers                                                              */

struct worker_start
{
  struct http_workers *workers;
  void (*fn) (void *);
  void *arg;
};

static void
worker_finished (struct http_workers *w)
{
  pthread_mutex_lock (&w->lock);
  if (--w->running == 0)
    pthread_cond_broadcast (&w->idle);
  pthread_mutex_unlock (&w->lock);
}

static void *
worker_main (void *arg)
{
  struct worker_start start = *(struct worker_start *) arg;

  free (arg);
  start.fn (start.arg);
  worker_finished (start.workers);
  return NULL;
}

void
http_workers_init (struct http_workers *w, unsigned max)
{
  pthread_mutex_init (&w->lock, NULL);
  pthread_cond_init (&w->idle, NULL);
  w->running = 0, w->max = max;
}

int
http_workers_spawn (struct http_workers *w, void (*fn) (void *), void *arg)
{
  struct worker_start *start;
  pthread_attr_t attr;
  pthread_t thread;
  int rc;

  pthread_mutex_lock (&w->lock);
  if (w->running >= w->max)
    {
      pthread_mutex_unlock (&w->lock);
      return -1;
    }
  w->running++;
  pthread_mutex_unlock (&w->lock);
  start = xmalloc (sizeof *start);
  *start = (struct worker_start){ .workers = w, .fn = fn, .arg = arg };
  pthread_attr_init (&attr);
  pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize (&attr, 256 * 1024);
  rc = pthread_create (&thread, &attr, worker_main, start);
  pthread_attr_destroy (&attr);
  if (rc == 0)
    return 0;
  husk_warn ("no thread for a connection: %s", strerror (rc));
  free (start);
  worker_finished (w);
  return -1;
}

unsigned
http_workers_running (struct http_workers *w)
{
  unsigned n;

  pthread_mutex_lock (&w->lock);
  n = w->running;
  pthread_mutex_unlock (&w->lock);
  return n;
}

void
http_workers_drain (struct http_workers *w)
{
  pthread_mutex_lock (&w->lock);
  while (w->running > 0)
    pthread_cond_wait (&w->idle, &w->lock);
  pthread_mutex_unlock (&w->lock);
  pthread_cond_destroy (&w->idle);
  pthread_mutex_destroy (&w->lock);
}
