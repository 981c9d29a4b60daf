/* The front door both HTTP servers of huskd share (the streaming server
 * and the metrics endpoint): one thread accepts and reads every request
 * head with poll, so that clients that send nothing or drip cost a socket
 * and a buffer each, never a thread or a session:
 *
 *   accept ──► pending (at most max_pending; when full, the oldest goes)
 *          ──► its whole head within head_timeout_ms, or 408 and closed
 *          ──► on_head (on this thread: answer at once, or hand the
 *              connection to a worker of a bounded pool)
 *
 * Every write to a client is send(MSG_NOSIGNAL) with a deadline: a client
 * that vanishes or stops reading costs an error, never a signal or a
 * thread stuck for good. */
#ifndef HUSK_CRI_STREAMING_HTTP_H
#define HUSK_CRI_STREAMING_HTTP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "husk/error.h"

#define HTTP_HEAD_TIMEOUT_MS 5000 /* the whole request head, first byte to blank line */
#define HTTP_REPLY_TIMEOUT_MS 10000

/* Takes FD (blocking, close-on-exec) and HEAD (the request head,
 * NUL-terminated, LEN bytes, valid during the call). */
typedef void (*http_head_fn) (void *user, int fd, char *head, size_t len);

struct http_acceptor_options
{
  int listen_fd;           /* bound and listening; the acceptor closes it */
  unsigned max_pending;    /* connections still sending their head */
  int64_t head_timeout_ms; /* 0: HTTP_HEAD_TIMEOUT_MS */
  const char *name;        /* for log lines: "streaming", "metrics" */
  http_head_fn on_head;
  void *user;
};

struct http_acceptor;

int http_acceptor_start (const struct http_acceptor_options *opts, struct http_acceptor **out,
                         struct husk_error **err);
/* Stops the thread, closes the listener and every pending connection.
 * NULL is a no-op. */
void http_acceptor_stop (struct http_acceptor *a);

/* Sends LEN bytes of DATA within TIMEOUT_MS (0: only what fits now),
 * without SIGPIPE: 0, or -1 with errno (ETIMEDOUT when the client stopped
 * reading). */
int http_send_all (int fd, const void *data, size_t len, int timeout_ms);

/* A short plain-text answer (CODE REASON, MESSAGE and a newline as the
 * body, Connection: close), sent without waiting; EXTRA: more header
 * lines, each ending in "\r\n", or NULL. */
void http_send_status (int fd, int code, const char *reason, const char *extra, const char *message);

/* A bounded set of detached threads, one per connection handed over. */
struct http_workers
{
  pthread_mutex_t lock;
  pthread_cond_t idle;
  unsigned running, max;
};

void http_workers_init (struct http_workers *w, unsigned max);
/* Runs FN (ARG) on a new thread: 0, or -1 when MAX are running or no
 * thread could start (FN is not called then: ARG is still the caller's). */
int http_workers_spawn (struct http_workers *w, void (*fn) (void *), void *arg);
unsigned http_workers_running (struct http_workers *w);
/* Waits until none is running, then frees W's lock. */
void http_workers_drain (struct http_workers *w);

#endif
