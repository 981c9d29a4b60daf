/* One SPDY/3.1 connection after the Upgrade (see server.h for the flow):
 * a poll loop on the connection's thread moves bytes between SPDY streams
 * and pipes (exec, attach: the run callback works on their other ends, on
 * a thread of its own) or sockets (port forward).
 *
 * Flow control: husk sends WINDOW_UPDATE for what it has consumed, and
 * honours a stream's send window once the peer has shown it keeps one (a
 * WINDOW_UPDATE or SETTINGS); spdystream, the library of kubelet, kubectl
 * and crictl, sends neither and reads as fast as it can.  Memory stays
 * bounded anyway: the socket is not read while a pipe or target has more
 * than PENDING_MAX bytes waiting, and the pipes are not read while the
 * socket is not writable. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cri/streaming/session.h"
#include "cri/streaming/spdy.h"
#include "cri/streaming/ws.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define PENDING_MAX (1024 * 1024)
#define CHUNK 32768
#define WRITE_TIMEOUT_MS 30000
#define DRAIN_AFTER_EXIT_MS 2000
#define LINGER_MS 2000
#define MAX_STREAMS 512
#define MAX_PAIRS 128

enum stream_type
{
  ST_ERROR,
  ST_STDIN,
  ST_STDOUT,
  ST_STDERR,
  ST_RESIZE,
  ST_DATA, /* port forward */
  ST_COUNT,
};

static const char *const stream_type_names[ST_COUNT]
    = { "error", "stdin", "stdout", "stderr", "resize", "data" };
/* The WebSocket channel of each, and the v5 close signal's. */
static const uint8_t ws_channels[ST_COUNT] = { 3, 0, 1, 2, 4, 0xff };
#define WS_CLOSE_CHANNEL 0xff

struct stream
{
  uint32_t id;
  enum stream_type type;
  bool remote_closed; /* FIN or RST from the client */
  bool local_closed;  /* FIN or RST sent */
  int64_t send_window;
  struct pf_pair *pair;
};

struct pf_pair
{
  char *request_id;
  uint16_t port;
  struct stream *data, *error;
  int fd; /* the target; -1 before the connect and after the end */
  struct spdy_buf to_target;
  bool target_eof, shut_wr;
};

struct session
{
  const struct streaming_session_args *args;
  int fd;
  struct spdy_zlib *z;
  struct spdy_buf in, out;
  uint32_t last_id;
  struct stream *streams[MAX_STREAMS];
  size_t n_streams;
  bool peer_flow;
  int64_t initial_window;
  struct spdy_buf ws_message; /* a fragmented WebSocket message so far */
  bool broken, peer_gone;

  /* exec and attach */
  struct stream *by_type[ST_COUNT];
  int stdin_w, stdout_r, stderr_r, resize_w, cancel_w, done_fd;
  struct streaming_io io;
  struct spdy_buf stdin_pending, resize_text;
  bool started, running, finished;
  pthread_t runner;
  int exit_code;
  char *run_error;
  int64_t wait_deadline, drain_deadline;

  /* port forward */
  struct pf_pair *pairs[MAX_PAIRS];
  size_t n_pairs;
};

static int64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
close_fd (int *fd)
{
  if (*fd >= 0)
    close (*fd);
  *fd = -1;
}

/* ------------------------------------------------------------------ */
/* Sending                                                             */

/* Writes what is queued in s->out; a peer that takes nothing for
 * WRITE_TIMEOUT_MS is gone. */
static void
flush_out (struct session *s)
{
  size_t done = 0;

  while (!s->broken && done < s->out.len)
    {
      ssize_t n = send (s->fd, s->out.data + done, s->out.len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0)
        {
          done += (size_t) n;
          continue;
        }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        {
          struct pollfd p = { .fd = s->fd, .events = POLLOUT };
          if (poll (&p, 1, WRITE_TIMEOUT_MS) > 0)
            continue;
        }
      s->broken = true;
    }
  s->out.len = 0;
}

static void
send_fin (struct session *s, struct stream *st)
{
  if (st == NULL || st->local_closed)
    return;
  if (!s->args->websocket) /* WebSocket: the end of the session says it */
    spdy_put_data (&s->out, st->id, SPDY_FLAG_FIN, NULL, 0);
  st->local_closed = true;
}

static void
send_data (struct session *s, struct stream *st, const void *data, size_t len)
{
  if (st == NULL || st->local_closed || (st->remote_closed && st->type != ST_ERROR && st->type != ST_DATA))
    return;
  if (s->args->websocket) /* a WebSocket stream's id is its channel */
    ws_put_channel (&s->out, (uint8_t) st->id, data, len);
  else
    spdy_put_data (&s->out, st->id, 0, data, len);
  st->send_window -= (int64_t) len;
}

/* LEN bytes of stream ID consumed: the peer may send that much more. */
static void
ack (struct session *s, uint32_t id, size_t len)
{
  if (!s->args->websocket && len > 0)
    spdy_put_window_update (&s->out, id, (uint32_t) len);
}

/* Whether ST may be sent more now. */
static bool
can_send (const struct session *s, const struct stream *st)
{
  return st == NULL || !s->peer_flow || st->send_window > 0;
}

static size_t
send_budget (const struct session *s, const struct stream *st)
{
  if (st == NULL || !s->peer_flow || st->send_window >= CHUNK)
    return CHUNK;
  return st->send_window > 0 ? (size_t) st->send_window : 0;
}

/* ------------------------------------------------------------------ */
/* Streams                                                             */

static struct stream *
find_stream (struct session *s, uint32_t id)
{
  for (size_t i = 0; i < s->n_streams; i++)
    if (s->streams[i]->id == id)
      return s->streams[i];
  return NULL;
}

static void
drop_stream (struct session *s, struct stream *st)
{
  for (size_t i = 0; i < s->n_streams; i++)
    if (s->streams[i] == st)
      {
        s->streams[i] = s->streams[--s->n_streams];
        break;
      }
  for (int t = 0; t < ST_COUNT; t++)
    if (s->by_type[t] == st)
      s->by_type[t] = NULL;
  free (st);
}

static int
type_of (const char *name)
{
  for (int t = 0; name && t < ST_COUNT; t++)
    if (strcmp (name, stream_type_names[t]) == 0)
      return t;
  return -1;
}

/* ------------------------------------------------------------------ */
/* Exec and attach                                                     */

static void
append_text (struct spdy_buf *buf, const char *text)
{
  spdy_buf_append (buf, text, strlen (text));
}

char *
streaming_exit_status (enum streaming_protocol protocol, int exit_code, const char *message)
{
  struct spdy_buf json = { 0 };

  if (message == NULL && exit_code == 0)
    return xstrdup (protocol >= PROTO_V4 ? "{\"metadata\":{},\"status\":\"Success\"}" : "");
  if (protocol < PROTO_V4)
    return message ? xstrdup (message)
                   : xasprintf ("command terminated with non-zero exit code: %d", exit_code);
  if (message == NULL)
    return xasprintf (
        "{\"metadata\":{},\"status\":\"Failure\",\"message\":\"command terminated with non-zero exit "
        "code: %d\",\"reason\":\"NonZeroExitCode\",\"details\":{\"causes\":[{\"reason\":"
        "\"ExitCode\",\"message\":\"%d\"}]}}",
        exit_code, exit_code);
  append_text (&json, "{\"metadata\":{},\"status\":\"Failure\",\"message\":\"");
  for (const char *p = message; *p; p++)
    {
      char esc[8];
      if (*p == '"' || *p == '\\')
        snprintf (esc, sizeof esc, "\\%c", *p);
      else if ((unsigned char) *p < 0x20)
        snprintf (esc, sizeof esc, "\\u%04x", (unsigned char) *p);
      else
        snprintf (esc, sizeof esc, "%c", *p);
      append_text (&json, esc);
    }
  append_text (&json, "\",\"reason\":\"InternalError\",\"code\":500}");
  spdy_buf_append (&json, "", 1);
  return (char *) json.data;
}

static void *
runner_main (void *arg)
{
  struct session *s = arg;
  struct husk_error *err = NULL;
  uint64_t one = 1;

  s->exit_code = s->args->cb->run (s->args->cb->user, s->args->req->kind, s->args->req->data, &s->io, &err);
  if (s->exit_code < 0)
    {
      s->run_error = xstrdup (err ? err->msg : "the session failed");
      husk_error_free (&err);
    }
  if (write (s->done_fd, &one, sizeof one) < 0)
    abort (); /* an eventfd takes it */
  return NULL;
}

static int
make_pipe (int *read_end, int *write_end, bool nonblock_read, bool nonblock_write)
{
  int p[2];

  if (pipe2 (p, O_CLOEXEC) < 0)
    return -1;
  if (nonblock_read)
    fcntl (p[0], F_SETFL, O_NONBLOCK);
  if (nonblock_write)
    fcntl (p[1], F_SETFL, O_NONBLOCK);
  *read_end = p[0], *write_end = p[1];
  return 0;
}

static bool
streams_ready (const struct session *s)
{
  const struct streaming_request *req = s->args->req;

  return s->by_type[ST_ERROR] && (!req->want_stdin || s->by_type[ST_STDIN])
         && (!req->want_stdout || s->by_type[ST_STDOUT])
         && (!req->want_stderr || req->tty || s->by_type[ST_STDERR])
         && (!req->tty || s->args->protocol < PROTO_V3 || s->by_type[ST_RESIZE]);
}

static void
fail_session (struct session *s, const char *message)
{
  cleanup_free char *status = streaming_exit_status (s->args->protocol, 1, message);

  husk_log (HUSK_LOG_WARNING, "streaming: %s", message);
  if (s->by_type[ST_ERROR])
    {
      send_data (s, s->by_type[ST_ERROR], status, strlen (status));
      send_fin (s, s->by_type[ST_ERROR]);
    }
  if (s->args->websocket)
    ws_put_close (&s->out, 1000);
  s->finished = true;
}

static void
start_runner (struct session *s)
{
  bool tty = s->args->req->tty;

  s->started = true;
  s->io = (struct streaming_io){
    .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .resize_fd = -1, .tty = tty
  };
  if ((s->by_type[ST_STDIN] && make_pipe (&s->io.stdin_fd, &s->stdin_w, false, true) < 0)
      || (s->by_type[ST_STDOUT] && make_pipe (&s->stdout_r, &s->io.stdout_fd, true, false) < 0)
      || (s->by_type[ST_STDERR] && !tty && make_pipe (&s->stderr_r, &s->io.stderr_fd, true, false) < 0)
      || (tty && make_pipe (&s->io.resize_fd, &s->resize_w, false, true) < 0)
      || make_pipe (&s->io.cancel_fd, &s->cancel_w, false, false) < 0
      || (s->done_fd = eventfd (0, EFD_CLOEXEC)) < 0)
    return fail_session (s, "no pipes for the session (too many open files?)");
  if (pthread_create (&s->runner, NULL, runner_main, s) != 0)
    return fail_session (s, "no thread for the session");
  s->running = true;
}

static void
close_io (struct session *s)
{
  close_fd (&s->io.stdin_fd);
  close_fd (&s->io.stdout_fd);
  close_fd (&s->io.stderr_fd);
  close_fd (&s->io.resize_fd);
  close_fd (&s->io.cancel_fd);
}

/* The run callback returned: its side of the pipes closes, and what the
 * process wrote drains before the status goes. */
static void
reap_runner (struct session *s)
{
  pthread_join (s->runner, NULL);
  s->running = false;
  close_io (s);
  close_fd (&s->stdin_w);
  close_fd (&s->resize_w);
  s->drain_deadline = now_ms () + DRAIN_AFTER_EXIT_MS;
}

static void
finish_exec (struct session *s)
{
  cleanup_free char *status = streaming_exit_status (s->args->protocol, s->exit_code, s->run_error);

  send_fin (s, s->by_type[ST_STDOUT]);
  send_fin (s, s->by_type[ST_STDERR]);
  if (*status)
    send_data (s, s->by_type[ST_ERROR], status, strlen (status));
  send_fin (s, s->by_type[ST_ERROR]);
  if (s->args->websocket)
    ws_put_close (&s->out, 1000);
  s->finished = true;
}

/* Complete {"Width":W,"Height":H} objects of the resize stream. */
static void
take_resizes (struct session *s)
{
  char *end;

  if (!s->started)
    return; /* kept until the session has its resize pipe */
  spdy_buf_append (&s->resize_text, "", 1);
  s->resize_text.len--;
  while ((end = memchr (s->resize_text.data, '}', s->resize_text.len)) != NULL)
    {
      *end = '\0';
      const char *w = strstr ((char *) s->resize_text.data, "\"Width\""),
                 *h = strstr ((char *) s->resize_text.data, "\"Height\"");
      struct streaming_resize size = { 0 };
      if (w && h && s->resize_w >= 0)
        {
          size.width = (uint16_t) strtoul (strchr (w, ':') ? strchr (w, ':') + 1 : w, NULL, 10);
          size.height = (uint16_t) strtoul (strchr (h, ':') ? strchr (h, ':') + 1 : h, NULL, 10);
          if (write (s->resize_w, &size, sizeof size) < 0 && errno != EAGAIN)
            close_fd (&s->resize_w);
        }
      spdy_buf_consume (&s->resize_text, (size_t) (end - (char *) s->resize_text.data) + 1);
    }
  if (s->resize_text.len > 4096)
    s->resize_text.len = 0; /* not JSON objects */
}

static void
write_stdin (struct session *s)
{
  while (s->stdin_w >= 0 && s->stdin_pending.len > 0)
    {
      ssize_t n = write (s->stdin_w, s->stdin_pending.data, s->stdin_pending.len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        return;
      if (n <= 0)
        {
          close_fd (&s->stdin_w); /* the process closed its stdin */
          s->stdin_pending.len = 0;
          return;
        }
      spdy_buf_consume (&s->stdin_pending, (size_t) n);
      if (s->by_type[ST_STDIN])
        ack (s, s->by_type[ST_STDIN]->id, (size_t) n);
    }
  if (s->stdin_pending.len == 0 && s->by_type[ST_STDIN] && s->by_type[ST_STDIN]->remote_closed)
    close_fd (&s->stdin_w);
}

static void
exec_data (struct session *s, struct stream *st, const uint8_t *data, size_t len)
{
  if (st->type == ST_STDIN)
    {
      if (s->stdin_w >= 0 || !s->started)
        spdy_buf_append (&s->stdin_pending, data, len);
      else
        ack (s, st->id, len);
      write_stdin (s);
    }
  else if (st->type == ST_RESIZE)
    {
      spdy_buf_append (&s->resize_text, data, len);
      take_resizes (s);
      ack (s, st->id, len);
    }
  else
    ack (s, st->id, len);
}

/* Reads a pipe of the process into ST; EOF closes it. */
static void
pump_pipe (struct session *s, int *fd, struct stream *st)
{
  char buf[CHUNK];
  size_t budget = send_budget (s, st);
  ssize_t n;

  if (budget == 0)
    return;
  n = read (*fd, buf, budget);
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  if (n <= 0)
    {
      close_fd (fd);
      send_fin (s, st);
      return;
    }
  send_data (s, st, buf, (size_t) n);
}

/* ------------------------------------------------------------------ */
/* Port forward                                                        */

static void
free_pair (struct session *s, struct pf_pair *pair)
{
  for (size_t i = 0; i < s->n_pairs; i++)
    if (s->pairs[i] == pair)
      {
        s->pairs[i] = s->pairs[--s->n_pairs];
        break;
      }
  close_fd (&pair->fd);
  if (pair->data)
    drop_stream (s, pair->data);
  if (pair->error)
    drop_stream (s, pair->error);
  spdy_buf_clear (&pair->to_target);
  free (pair->request_id);
  free (pair);
}

static void
pair_error (struct session *s, struct pf_pair *pair, const char *message)
{
  cleanup_free char *text = xasprintf ("error forwarding port %u: %s", pair->port, message);

  husk_log (HUSK_LOG_INFO, "streaming: %s", text);
  send_data (s, pair->error, text, strlen (text));
  send_fin (s, pair->error);
  send_fin (s, pair->data);
  close_fd (&pair->fd);
  pair->target_eof = true;
}

static void
pair_connect (struct session *s, struct pf_pair *pair)
{
  struct husk_error *err = NULL;

  pair->fd = s->args->cb->connect_port (s->args->cb->user, s->args->req->data, pair->port, &err);
  if (pair->fd < 0)
    {
      pair_error (s, pair, err ? err->msg : "cannot connect");
      husk_error_free (&err);
      return;
    }
  fcntl (pair->fd, F_SETFL, O_NONBLOCK | fcntl (pair->fd, F_GETFL));
}

static struct pf_pair *
pair_for (struct session *s, const char *request_id, uint16_t port)
{
  for (size_t i = 0; i < s->n_pairs; i++)
    if (strcmp (s->pairs[i]->request_id, request_id) == 0)
      return s->pairs[i];
  if (s->n_pairs >= MAX_PAIRS)
    return NULL;
  struct pf_pair *pair = xcalloc (1, sizeof *pair);
  pair->request_id = xstrdup (request_id);
  pair->port = port;
  pair->fd = -1;
  s->pairs[s->n_pairs++] = pair;
  return pair;
}

/* A pair both of whose directions are over.  WebSocket v4 has no way for
 * the client to close a channel: there the target's end is the pair's. */
static void
maybe_free_pair (struct session *s, struct pf_pair *pair)
{
  if (pair->target_eof && pair->data && pair->data->local_closed
      && (pair->data->remote_closed || (s->args->websocket && pair->to_target.len == 0)))
    free_pair (s, pair);
}

static void
pair_write_target (struct session *s, struct pf_pair *pair)
{
  while (pair->fd >= 0 && pair->to_target.len > 0)
    {
      ssize_t n = send (pair->fd, pair->to_target.data, pair->to_target.len, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        return;
      if (n <= 0)
        return pair_error (s, pair, strerror (errno));
      spdy_buf_consume (&pair->to_target, (size_t) n);
      ack (s, pair->data->id, (size_t) n);
    }
  if (pair->fd >= 0 && pair->to_target.len == 0 && pair->data->remote_closed && !pair->shut_wr)
    {
      shutdown (pair->fd, SHUT_WR);
      pair->shut_wr = true;
    }
}

static void
pair_read_target (struct session *s, struct pf_pair *pair)
{
  char buf[CHUNK];
  size_t budget = send_budget (s, pair->data);
  ssize_t n;

  if (budget == 0)
    return;
  n = recv (pair->fd, buf, budget, 0);
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  if (n < 0)
    return pair_error (s, pair, strerror (errno));
  if (n == 0)
    {
      pair->target_eof = true;
      send_fin (s, pair->data);
      send_fin (s, pair->error);
      if (pair->shut_wr || pair->data->remote_closed)
        close_fd (&pair->fd);
      return;
    }
  send_data (s, pair->data, buf, (size_t) n);
}

static void
pf_new_stream (struct session *s, struct stream *st, const struct spdy_headers *h)
{
  const char *request_id = spdy_headers_get (h, "requestid"), *port_text = spdy_headers_get (h, "port");
  long long port;
  cleanup_free char *derived = NULL;
  struct pf_pair *pair;

  if (port_text == NULL || husk_parse_int64 (port_text, 1, 65535, &port) < 0)
    {
      spdy_put_rst (&s->out, st->id, SPDY_PROTOCOL_ERROR);
      st->local_closed = st->remote_closed = true;
      return;
    }
  if (request_id == NULL) /* an old client: the data stream follows its error stream */
    request_id = derived = xasprintf ("%u", st->type == ST_DATA ? st->id - 2 : st->id);
  pair = pair_for (s, request_id, (uint16_t) port);
  if (pair == NULL || (st->type == ST_DATA ? pair->data : pair->error) != NULL)
    {
      spdy_put_rst (&s->out, st->id, SPDY_REFUSED_STREAM);
      st->local_closed = st->remote_closed = true;
      return;
    }
  st->pair = pair;
  if (st->type == ST_DATA)
    pair->data = st;
  else
    pair->error = st;
  if (pair->data && pair->error)
    pair_connect (s, pair);
}

/* ------------------------------------------------------------------ */
/* Frames from the client                                              */

static void
on_syn_stream (struct session *s, const struct spdy_frame *f)
{
  struct spdy_headers h = { 0 }, reply = { 0 };
  struct husk_error *err = NULL;
  struct stream *st;
  int type;
  bool pf = s->args->protocol == PROTO_PORTFORWARD;

  if (spdy_headers_unpack (s->z, f->payload, f->payload_len, &h, &err) < 0)
    {
      husk_log (HUSK_LOG_INFO, "streaming: %s", err->msg);
      husk_error_free (&err);
      s->broken = true;
      return;
    }
  type = type_of (spdy_headers_get (&h, "streamtype"));
  if (f->stream_id == 0 || f->stream_id <= s->last_id || f->stream_id % 2 == 0)
    spdy_put_rst (&s->out, f->stream_id, SPDY_PROTOCOL_ERROR);
  else if (type < 0 || (pf != (type == ST_DATA) && type != ST_ERROR) || s->n_streams >= MAX_STREAMS
           || (!pf && s->by_type[type] != NULL) || (!pf && s->started))
    spdy_put_rst (&s->out, f->stream_id, SPDY_REFUSED_STREAM);
  else
    {
      st = xcalloc (1, sizeof *st);
      st->id = f->stream_id;
      st->type = (enum stream_type) type;
      st->send_window = s->initial_window;
      st->remote_closed = (f->flags & SPDY_FLAG_FIN) != 0;
      s->streams[s->n_streams++] = st;
      if (spdy_put_syn_reply (s->z, &s->out, st->id, 0, &reply, &err) < 0)
        {
          husk_error_free (&err);
          s->broken = true;
        }
      if (pf)
        pf_new_stream (s, st, &h);
      else
        s->by_type[type] = st;
    }
  if (f->stream_id > s->last_id)
    s->last_id = f->stream_id;
  spdy_headers_clear (&h);
}

static void
on_data (struct session *s, const struct spdy_frame *f)
{
  struct stream *st = find_stream (s, f->stream_id);

  if (st == NULL || st->remote_closed)
    {
      spdy_put_rst (&s->out, f->stream_id, st ? SPDY_STREAM_ALREADY_CLOSED : SPDY_INVALID_STREAM);
      return;
    }
  if (st->pair)
    {
      if (st->type == ST_DATA && f->payload_len)
        {
          spdy_buf_append (&st->pair->to_target, f->payload, f->payload_len);
          if (st->pair->fd < 0)
            st->pair->to_target.len = 0;
        }
    }
  else
    exec_data (s, st, f->payload, f->payload_len);
  if (f->flags & SPDY_FLAG_FIN)
    {
      st->remote_closed = true;
      if (st->type == ST_STDIN)
        write_stdin (s);
    }
  if (st->pair)
    {
      pair_write_target (s, st->pair);
      maybe_free_pair (s, st->pair);
    }
}

static void
on_rst (struct session *s, const struct spdy_frame *f)
{
  struct stream *st = find_stream (s, f->stream_id);

  if (st == NULL)
    return;
  st->remote_closed = st->local_closed = true;
  if (st->pair)
    {
      if (st->type == ST_DATA)
        {
          close_fd (&st->pair->fd);
          st->pair->target_eof = true;
          free_pair (s, st->pair);
        }
      return;
    }
  if (st->type == ST_STDIN)
    {
      s->stdin_pending.len = 0;
      close_fd (&s->stdin_w);
    }
}

static void
on_settings (struct session *s, const struct spdy_frame *f)
{
  for (uint32_t i = 0; i < f->value && (size_t) (i + 1) * 8 <= f->payload_len; i++)
    {
      const uint8_t *e = f->payload + 8 * i;
      uint32_t id = (uint32_t) e[1] << 16 | (uint32_t) e[2] << 8 | e[3];
      uint32_t value = (uint32_t) e[4] << 24 | (uint32_t) e[5] << 16 | (uint32_t) e[6] << 8 | e[7];
      if (id == SPDY_SETTINGS_INITIAL_WINDOW_SIZE)
        {
          s->initial_window = value;
          s->peer_flow = true;
        }
    }
}

static void
on_frame (struct session *s, const struct spdy_frame *f)
{
  struct spdy_headers h = { 0 };
  struct husk_error *err = NULL;
  struct stream *st;

  switch (f->type)
    {
    case SPDY_DATA:
      return on_data (s, f);
    case SPDY_SYN_STREAM:
      return on_syn_stream (s, f);
    case SPDY_RST_STREAM:
      return on_rst (s, f);
    case SPDY_PING:
      spdy_put_ping (&s->out, f->value);
      return;
    case SPDY_GOAWAY:
      s->peer_gone = true;
      return;
    case SPDY_SETTINGS:
      return on_settings (s, f);
    case SPDY_WINDOW_UPDATE:
      s->peer_flow = true;
      if ((st = find_stream (s, f->stream_id)) != NULL)
        st->send_window += f->value;
      return;
    case SPDY_HEADERS:
    case SPDY_SYN_REPLY:
      /* Their header block still moves the zlib state along. */
      if (spdy_headers_unpack (s->z, f->payload, f->payload_len, &h, &err) < 0)
        {
          husk_error_free (&err);
          s->broken = true;
        }
      spdy_headers_clear (&h);
      return;
    default:
      return;
    }
}

static void ws_read_frames (struct session *s);

/* Reads what the socket has and handles every complete frame. */
static void
read_socket (struct session *s)
{
  uint8_t buf[65536];
  ssize_t n = recv (s->fd, buf, sizeof buf, MSG_DONTWAIT);
  size_t used = 0, off = 0;
  struct spdy_frame f;
  struct husk_error *err = NULL;

  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  if (n <= 0)
    {
      s->broken = s->peer_gone = true;
      return;
    }
  spdy_buf_append (&s->in, buf, (size_t) n);
  if (s->args->websocket)
    return ws_read_frames (s);
  while (!s->broken && spdy_parse (s->in.data + off, s->in.len - off, &f, &used, &err) == 0 && used > 0)
    {
      on_frame (s, &f);
      off += used;
    }
  if (err)
    {
      husk_log (HUSK_LOG_INFO, "streaming: a client sent a bad frame: %s", err->msg);
      spdy_put_goaway (&s->out, s->last_id, SPDY_PROTOCOL_ERROR);
      husk_error_free (&err);
      s->broken = true;
    }
  spdy_buf_consume (&s->in, off);
}

/* ------------------------------------------------------------------ */
/* WebSocket                                                           */

/* The streams a WebSocket session has from its start: every channel the
 * request asked for. */
static void
ws_open_streams (struct session *s)
{
  const struct streaming_request *req = s->args->req;
  const bool want[ST_COUNT]
      = { true, req->want_stdin, req->want_stdout, req->want_stderr && !req->tty, req->tty };

  for (int t = 0; t < ST_DATA; t++)
    if (want[t])
      {
        struct stream *st = xcalloc (1, sizeof *st);
        st->id = ws_channels[t];
        st->type = (enum stream_type) t;
        s->streams[s->n_streams++] = st;
        s->by_type[t] = st;
      }
}

/* A WebSocket port forward: for the request's Nth port a pair of
 * channels, 2N (data) and 2N+1 (error), each opened with the port number
 * (2 bytes, little-endian), and the connection to the target made now. */
static void
ws_open_pairs (struct session *s)
{
  const struct streaming_request *req = s->args->req;

  for (unsigned i = 0; i < req->n_ports && i < MAX_PAIRS; i++)
    {
      char request_id[16];
      const uint8_t port_le[2] = { req->ports[i] & 0xff, req->ports[i] >> 8 };
      struct pf_pair *pair;

      snprintf (request_id, sizeof request_id, "%u", i);
      pair = pair_for (s, request_id, req->ports[i]);
      for (int k = 0; k < 2; k++)
        {
          struct stream *st = xcalloc (1, sizeof *st);
          st->id = 2 * i + (uint32_t) k;
          st->type = k == 0 ? ST_DATA : ST_ERROR;
          st->pair = pair;
          s->streams[s->n_streams++] = st;
          *(k == 0 ? &pair->data : &pair->error) = st;
          send_data (s, st, port_le, sizeof port_le);
        }
      pair_connect (s, pair);
      maybe_free_pair (s, pair); /* a target that refused: its error is sent */
    }
}

/* One whole k8s message: its channel byte, then data. */
static void
ws_message (struct session *s, const uint8_t *msg, size_t len)
{
  struct stream *st;

  if (len == 0)
    return;
  if (s->args->protocol == PROTO_PORTFORWARD)
    {
      st = find_stream (s, msg[0]);
      if (st && st->type == ST_DATA && st->pair->fd >= 0)
        {
          spdy_buf_append (&st->pair->to_target, msg + 1, len - 1);
          pair_write_target (s, st->pair);
        }
      return;
    }
  if (msg[0] == WS_CLOSE_CHANNEL && s->args->protocol >= PROTO_V5)
    {
      if (len >= 2 && (st = find_stream (s, msg[1])) != NULL && !st->remote_closed)
        {
          st->remote_closed = true;
          if (st->type == ST_STDIN)
            write_stdin (s);
        }
      return;
    }
  st = find_stream (s, msg[0]);
  if (st && !st->remote_closed && (st->type == ST_STDIN || st->type == ST_RESIZE))
    exec_data (s, st, msg + 1, len - 1);
}

static void
ws_frame (struct session *s, const struct ws_frame *f)
{
  switch (f->opcode)
    {
    case WS_PING:
      ws_put (&s->out, WS_PONG, f->payload, f->payload_len);
      return;
    case WS_CLOSE:
      ws_put_close (&s->out, 1000);
      s->peer_gone = s->broken = true;
      return;
    case WS_PONG:
      return;
    case WS_TEXT:
    case WS_BINARY:
      s->ws_message.len = 0;
      /* fall through */
    case WS_CONTINUATION:
      spdy_buf_append (&s->ws_message, f->payload, f->payload_len);
      if (s->ws_message.len > WS_MAX_MESSAGE)
        s->broken = true;
      else if (f->fin)
        {
          ws_message (s, s->ws_message.data, s->ws_message.len);
          s->ws_message.len = 0;
        }
      return;
    default:
      s->broken = true;
    }
}

static void
ws_read_frames (struct session *s)
{
  struct ws_frame f;
  struct husk_error *err = NULL;
  size_t used = 0, off = 0;

  while (!s->broken && ws_parse (s->in.data + off, s->in.len - off, &f, &used, &err) == 0 && used > 0)
    {
      ws_frame (s, &f);
      off += used;
    }
  if (err)
    {
      husk_log (HUSK_LOG_INFO, "streaming: a client sent a bad frame: %s", err->msg);
      ws_put_close (&s->out, 1002);
      husk_error_free (&err);
      s->broken = true;
    }
  spdy_buf_consume (&s->in, off);
}

/* ------------------------------------------------------------------ */
/* The loops                                                           */

static bool
socket_readable_now (const struct session *s)
{
  size_t pending = s->stdin_pending.len;

  for (size_t i = 0; i < s->n_pairs; i++)
    pending += s->pairs[i]->to_target.len;
  return pending < PENDING_MAX;
}

/* One poll over the socket, the stop fd and EXTRA; returns the count. */
static int
wait_events (struct session *s, struct pollfd *fds, size_t n, int64_t deadline)
{
  int timeout = -1;

  fds[0] = (struct pollfd){ .fd = s->fd, .events = socket_readable_now (s) ? POLLIN : 0 };
  fds[1] = (struct pollfd){ .fd = s->args->stop_fd, .events = POLLIN };
  if (deadline > 0)
    {
      int64_t left = deadline - now_ms ();
      timeout = left > 0 ? (int) left : 0;
    }
  int rc = poll (fds, n, timeout);
  if (rc > 0 && fds[1].revents)
    s->broken = true;
  if (rc > 0 && fds[0].revents)
    read_socket (s);
  return rc;
}

/* Starts the session's process once every stream it needs is open. */
static void
maybe_start (struct session *s)
{
  if (s->started || s->broken || s->finished || !streams_ready (s))
    return;
  start_runner (s);
  /* What came with the streams, and a FIN with them. */
  write_stdin (s);
  take_resizes (s);
}

static void
exec_loop (struct session *s)
{
  s->wait_deadline = now_ms () + s->args->stream_wait_ms;
  if (s->args->websocket)
    ws_open_streams (s);
  maybe_start (s);
  while (!s->broken && !s->finished)
    {
      struct pollfd fds[6];
      int64_t deadline = !s->started ? s->wait_deadline : s->running ? 0 : s->drain_deadline;

      fds[2] = (struct pollfd){ .fd = s->running ? s->done_fd : -1, .events = POLLIN };
      fds[3]
          = (struct pollfd){ .fd = can_send (s, s->by_type[ST_STDOUT]) ? s->stdout_r : -1, .events = POLLIN };
      fds[4]
          = (struct pollfd){ .fd = can_send (s, s->by_type[ST_STDERR]) ? s->stderr_r : -1, .events = POLLIN };
      fds[5] = (struct pollfd){ .fd = s->stdin_pending.len ? s->stdin_w : -1, .events = POLLOUT };
      int rc = wait_events (s, fds, 6, deadline);
      if (rc > 0 && fds[3].revents)
        pump_pipe (s, &s->stdout_r, s->by_type[ST_STDOUT]);
      if (rc > 0 && fds[4].revents)
        pump_pipe (s, &s->stderr_r, s->by_type[ST_STDERR]);
      if (rc > 0 && fds[5].revents)
        write_stdin (s);
      if (rc > 0 && fds[2].revents)
        reap_runner (s);
      maybe_start (s);
      if (!s->started && !s->finished && now_ms () >= s->wait_deadline)
        fail_session (s, "the client did not open its streams in time");
      if (s->started && !s->running && !s->finished
          && ((s->stdout_r < 0 && s->stderr_r < 0) || now_ms () >= s->drain_deadline))
        finish_exec (s);
      flush_out (s);
    }
}

static void
pf_loop (struct session *s)
{
  if (s->args->websocket)
    {
      ws_open_pairs (s);
      flush_out (s);
    }
  /* WebSocket: no pair left, or no client to tell (SPDY waits for both). */
  while (!s->broken && !(s->peer_gone && s->n_pairs == 0)
         && !(s->args->websocket && (s->n_pairs == 0 || s->peer_gone)))
    {
      struct pollfd fds[2 + MAX_PAIRS];
      size_t n = 2;

      for (size_t i = 0; i < s->n_pairs; i++)
        {
          struct pf_pair *p = s->pairs[i];
          short events
              = (!p->target_eof && can_send (s, p->data) ? POLLIN : 0) | (p->to_target.len ? POLLOUT : 0);
          fds[n++] = (struct pollfd){ .fd = events ? p->fd : -1, .events = events };
        }
      size_t n_before = s->n_pairs;
      struct pf_pair *polled[MAX_PAIRS];
      memcpy (polled, s->pairs, n_before * sizeof *polled);
      int rc = wait_events (s, fds, n, 0);
      for (size_t i = 0; rc > 0 && i < n_before; i++)
        {
          bool alive = false;
          for (size_t j = 0; j < s->n_pairs; j++)
            alive = alive || s->pairs[j] == polled[i];
          if (!alive || fds[2 + i].revents == 0)
            continue;
          if (fds[2 + i].revents & POLLOUT)
            pair_write_target (s, polled[i]);
          if (polled[i]->fd >= 0 && (fds[2 + i].revents & (POLLIN | POLLHUP | POLLERR)))
            pair_read_target (s, polled[i]);
          maybe_free_pair (s, polled[i]);
        }
      /* A WebSocket pair can also end unpolled (its target write failed). */
      for (size_t i = s->n_pairs; s->args->websocket && i > 0; i--)
        maybe_free_pair (s, s->pairs[i - 1]);
      flush_out (s);
    }
  if (s->args->websocket && !s->broken)
    {
      ws_put_close (&s->out, 1000);
      flush_out (s);
    }
}

/* Cancels a running session and waits for its thread. */
static void
stop_runner (struct session *s)
{
  if (!s->running)
    return;
  if (write (s->cancel_w, "x", 1) < 0)
    husk_log (HUSK_LOG_WARNING, "streaming: cannot cancel a session: %s", strerror (errno));
  /* Its pipes close: a process still writing gets EPIPE. */
  close_fd (&s->stdout_r);
  close_fd (&s->stderr_r);
  close_fd (&s->stdin_w);
  pthread_join (s->runner, NULL);
  s->running = false;
}

/* After the last frame: a half close, then what the client still sends
 * is read and dropped, so that closing does not reset what it has not read. */
static void
linger (struct session *s)
{
  int64_t deadline = now_ms () + LINGER_MS;
  char buf[4096];

  shutdown (s->fd, SHUT_WR);
  for (;;)
    {
      struct pollfd p = { .fd = s->fd, .events = POLLIN };
      int64_t left = deadline - now_ms ();
      if (left <= 0 || poll (&p, 1, (int) left) <= 0 || recv (s->fd, buf, sizeof buf, 0) <= 0)
        return;
    }
}

void
streaming_session_run (const struct streaming_session_args *args)
{
  struct session s = { .args = args, .fd = args->fd, .initial_window = SPDY_INITIAL_WINDOW };

  s.stdin_w = s.stdout_r = s.stderr_r = s.resize_w = s.cancel_w = s.done_fd = -1;
  s.io = (struct streaming_io){
    .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .resize_fd = -1, .cancel_fd = -1
  };
  s.z = spdy_zlib_new ();
  if (args->protocol == PROTO_PORTFORWARD)
    pf_loop (&s);
  else
    exec_loop (&s);
  stop_runner (&s);
  if (!s.broken)
    linger (&s);
  while (s.n_pairs)
    free_pair (&s, s.pairs[0]);
  while (s.n_streams)
    drop_stream (&s, s.streams[0]);
  close_io (&s);
  close_fd (&s.stdin_w);
  close_fd (&s.stdout_r);
  close_fd (&s.stderr_r);
  close_fd (&s.resize_w);
  close_fd (&s.cancel_w);
  close_fd (&s.done_fd);
  close (s.fd);
  spdy_zlib_free (s.z);
  spdy_buf_clear (&s.in);
  spdy_buf_clear (&s.out);
  spdy_buf_clear (&s.stdin_pending);
  spdy_buf_clear (&s.resize_text);
  spdy_buf_clear (&s.ws_message);
  free (s.run_error);
}
