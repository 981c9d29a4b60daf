/* The streaming server's listener and HTTP/1.1 handshake (see server.h);
 * what follows the Upgrade is session.c's. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cri/streaming/http.h"
#include "cri/streaming/http_head.h"
#include "cri/streaming/server.h"
#include "cri/streaming/session.h"
#include "cri/streaming/tokens.h"
#include "cri/streaming/ws.h"
#include "husk/cleanup.h"
#include "husk/util.h"

struct streaming_server
{
  int listen_fd;
  int stop_fd; /* eventfd: readable once stopping, for the sessions */
  struct http_acceptor *acceptor;
  struct http_workers sessions;
  char *base;
  struct streaming_callbacks cb;
  struct streaming_tokens *tokens;
  int64_t stream_wait_ms;
};

/* A connection whose token was good, handed to a session thread. */
struct session_start
{
  struct streaming_server *srv;
  int fd;
  struct streaming_request *req;
  enum streaming_protocol protocol;
  bool websocket;
  char *upgrade; /* the 101 answer */
};

static void
free_request (void *value)
{
  struct streaming_request *req = value;

  if (req == NULL)
    return;
  if (req->free_data)
    req->free_data (req->data);
  free (req);
}

/* ------------------------------------------------------------------ */
/* The HTTP request                                                     */

struct http_request
{
  const char *method;
  char *path; /* in the head */
  const char *upgrade;
  char **protocols;    /* every X-Stream-Protocol-Version value, in order */
  char **ws_protocols; /* every Sec-WebSocket-Protocol value, in order */
  const char *ws_key, *ws_version;
};

static void
http_request_clear (struct http_request *r)
{
  husk_strvfreep (&r->protocols);
  husk_strvfreep (&r->ws_protocols);
}

static void
send_error (int fd, int code, const char *reason, const char *message)
{
  http_send_status (fd, code, reason, NULL, message);
}

static void
add_protocols (char ***list, const char *value)
{
  cleanup_free char *copy = xstrdup (value);
  char *save = NULL;

  for (char *tok = strtok_r (copy, ", \t", &save); tok; tok = strtok_r (NULL, ", \t", &save))
    *list = husk_strv_append (*list, tok);
}

/* HEAD (NUL-terminated) into R, whose strings point into it. */
static int
parse_head (char *head, struct http_request *r)
{
  struct http_head h;

  if (http_head_parse (head, &h) < 0)
    return -1;
  r->method = h.method;
  r->path = (char *) h.target;
  r->upgrade = http_head_get (&h, "Upgrade");
  r->ws_key = http_head_get (&h, "Sec-WebSocket-Key");
  r->ws_version = http_head_get (&h, "Sec-WebSocket-Version");
  for (size_t i = 0; i < h.n_headers; i++)
    if (strcasecmp (h.headers[i].name, "X-Stream-Protocol-Version") == 0)
      add_protocols (&r->protocols, h.headers[i].value);
    else if (strcasecmp (h.headers[i].name, "Sec-WebSocket-Protocol") == 0)
      add_protocols (&r->ws_protocols, h.headers[i].value);
  return 0;
}

static const struct
{
  const char *name;
  enum streaming_protocol protocol;
  bool portforward, websocket;
} protocols[] = {
  { "v4.channel.k8s.io", PROTO_V4, false, false },
  { "v3.channel.k8s.io", PROTO_V3, false, false },
  { "v2.channel.k8s.io", PROTO_V2, false, false },
  { "channel.k8s.io", PROTO_V1, false, false },
  { "portforward.k8s.io", PROTO_PORTFORWARD, true, false },
  { "v5.channel.k8s.io", PROTO_V5, false, true },
  { "v4.channel.k8s.io", PROTO_V4, false, true },
  { "v4.channel.k8s.io", PROTO_PORTFORWARD, true, true },
};

static bool
is_websocket (const struct http_request *r)
{
  return r->upgrade && strcasecmp (r->upgrade, "websocket") == 0;
}

/* The first of the client's protocols we speak for this kind and
 * transport; 0: none. */
static enum streaming_protocol
negotiate (const struct http_request *r, enum streaming_kind kind, const char **name)
{
  bool ws = is_websocket (r);
  char **offered = ws ? r->ws_protocols : r->protocols;

  for (size_t i = 0; offered && offered[i]; i++)
    for (size_t j = 0; j < sizeof protocols / sizeof protocols[0]; j++)
      if (strcmp (offered[i], protocols[j].name) == 0 && protocols[j].websocket == ws
          && protocols[j].portforward == (kind == STREAMING_PORTFORWARD))
        {
          *name = protocols[j].name;
          return protocols[j].protocol;
        }
  return 0;
}

static const char *
protocol_hint (const struct http_request *r, enum streaming_kind kind)
{
  if (is_websocket (r) && kind == STREAMING_PORTFORWARD)
    return "streaming: unable to negotiate a protocol: Sec-WebSocket-Protocol must offer v4.channel.k8s.io";
  if (is_websocket (r))
    return "streaming: unable to negotiate a protocol: Sec-WebSocket-Protocol must offer v5.channel.k8s.io "
           "or "
           "v4.channel.k8s.io";
  if (kind == STREAMING_PORTFORWARD)
    return "streaming: unable to negotiate a protocol: X-Stream-Protocol-Version must offer "
           "portforward.k8s.io";
  return "streaming: unable to negotiate a protocol: X-Stream-Protocol-Version must offer v4.channel.k8s.io, "
         "v3.channel.k8s.io, v2.channel.k8s.io or channel.k8s.io";
}

/* The 101 answer for the transport of R and protocol NAME (malloc'd). */
static char *
upgrade_response (const struct http_request *r, const char *name)
{
  char accept[29];

  if (!is_websocket (r))
    return xasprintf ("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                      "X-Stream-Protocol-Version: %s\r\n\r\n",
                      name);
  ws_accept_key (r->ws_key, accept);
  return xasprintf ("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                    "Sec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: %s\r\n\r\n",
                    accept, name);
}

static const char *const kind_paths[] = { "/exec/", "/attach/", "/portforward/" };

/* Checks the request and takes its token: what its session needs, or
 * NULL after an error reply. */
static struct session_start *
accept_request (struct streaming_server *srv, int fd, struct http_request *r)
{
  struct streaming_request *req = NULL;
  struct session_start *start;
  enum streaming_protocol protocol;
  const char *token = NULL, *name = NULL;
  int kind = -1;
  char *query = strchr (r->path, '?');

  if (query)
    *query = '\0';
  for (int k = 0; k < 3; k++)
    if (husk_str_has_prefix (r->path, kind_paths[k]))
      kind = k, token = r->path + strlen (kind_paths[k]);
  if (kind < 0)
    return send_error (fd, 404, "Not Found",
                       "streaming: no such path (expected /exec/, /attach/ or /portforward/TOKEN)"),
           NULL;
  if (strcmp (r->method, "GET") != 0 && strcmp (r->method, "POST") != 0)
    return send_error (fd, 405, "Method Not Allowed", "streaming: only GET and POST"), NULL;
  if (is_websocket (r) && (r->ws_key == NULL || r->ws_version == NULL || strcmp (r->ws_version, "13") != 0))
    return send_error (
               fd, 400, "Bad Request",
               "streaming: a WebSocket upgrade needs Sec-WebSocket-Key and Sec-WebSocket-Version: 13"),
           NULL;
  if (!is_websocket (r) && (r->upgrade == NULL || strcasecmp (r->upgrade, "SPDY/3.1") != 0))
    return send_error (fd, 400, "Bad Request",
                       "streaming: expected `Upgrade: SPDY/3.1` or `Upgrade: websocket`"),
           NULL;
  req = streaming_tokens_take (srv->tokens, token);
  if (req == NULL)
    return send_error (fd, 404, "Not Found", "streaming: unknown, used or expired token"), NULL;
  if ((int) req->kind != kind)
    {
      free_request (req);
      return send_error (fd, 400, "Bad Request", "streaming: the token is for another kind of session"), NULL;
    }
  if (is_websocket (r) && req->kind == STREAMING_PORTFORWARD && req->n_ports == 0)
    {
      free_request (req);
      return send_error (
                 fd, 400, "Bad Request",
                 "streaming: a port forward over WebSocket needs the ports in the PortForward request"),
             NULL;
    }
  protocol = negotiate (r, req->kind, &name);
  if (protocol == 0)
    {
      free_request (req);
      send_error (fd, 403, "Forbidden", protocol_hint (r, kind));
      return NULL;
    }
  start = xcalloc (1, sizeof *start);
  *start = (struct session_start){ .srv = srv,
                                   .fd = fd,
                                   .req = req,
                                   .protocol = protocol,
                                   .websocket = is_websocket (r),
                                   .upgrade = upgrade_response (r, name) };
  return start;
}

static void
session_start_free (struct session_start *start)
{
  free_request (start->req);
  free (start->upgrade);
  free (start);
}

/* A session thread: the 101 answer, then the upgraded protocol. */
static void
session_main (void *arg)
{
  struct session_start *start = arg;
  struct streaming_server *srv = start->srv;

  if (http_send_all (start->fd, start->upgrade, strlen (start->upgrade), HTTP_REPLY_TIMEOUT_MS) < 0)
    close (start->fd);
  else
    {
      struct streaming_session_args args = { .fd = start->fd,
                                             .stop_fd = srv->stop_fd,
                                             .protocol = start->protocol,
                                             .websocket = start->websocket,
                                             .req = start->req,
                                             .cb = &srv->cb,
                                             .stream_wait_ms = srv->stream_wait_ms };
      streaming_session_run (&args); /* closes the fd */
    }
  session_start_free (start);
}

/* On the acceptor's thread, so nothing here waits: a request without a
 * good token is answered and closed at once; only one with a token takes
 * a session (and a thread). */
static void
on_head (void *user, int fd, char *head, size_t len)
{
  struct streaming_server *srv = user;
  struct http_request r = { 0 };
  struct session_start *start = NULL;

  if (parse_head (head, &r) < 0)
    send_error (fd, 400, "Bad Request", "streaming: malformed HTTP request head");
  else
    start = accept_request (srv, fd, &r);
  http_request_clear (&r);
  if (start == NULL)
    close (fd);
  else if (http_workers_spawn (&srv->sessions, session_main, start) < 0)
    {
      send_error (fd, 503, "Service Unavailable", "streaming: too many sessions at once");
      close (fd);
      session_start_free (start);
    }
}

static int
listen_on (const struct streaming_options *opts, struct streaming_server *srv, struct husk_error **err)
{
  const char *address = opts->address && *opts->address ? opts->address : "127.0.0.1";
  const char *port = opts->port && *opts->port ? opts->port : "0";
  struct addrinfo hints = { .ai_family = AF_UNSPEC,
                            .ai_socktype = SOCK_STREAM,
                            .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE };
  struct addrinfo *ai = NULL;
  struct sockaddr_storage bound;
  socklen_t bound_len = sizeof bound;
  char host[INET6_ADDRSTRLEN], serv[16];
  int rc = getaddrinfo (address, port, &hints, &ai), one = 1;

  if (rc != 0)
    return husk_error_make (err, 0, "streaming server address `%s` port `%s`: %s", address, port,
                            gai_strerror (rc));
  srv->listen_fd = socket (ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (srv->listen_fd < 0)
    rc = husk_error_make (err, errno, "streaming server: socket");
  else if (setsockopt (srv->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0
           || bind (srv->listen_fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen (srv->listen_fd, 128) < 0
           || getsockname (srv->listen_fd, (struct sockaddr *) &bound, &bound_len) < 0)
    rc = husk_error_make (err, errno, "streaming server: listen on %s port %s", address, port);
  freeaddrinfo (ai);
  if (rc < 0)
    return -1;
  getnameinfo ((struct sockaddr *) &bound, bound_len, host, sizeof host, serv, sizeof serv,
               NI_NUMERICHOST | NI_NUMERICSERV);
  srv->base = bound.ss_family == AF_INET6 ? xasprintf ("http://[%s]:%s", host, serv)
                                          : xasprintf ("http://%s:%s", host, serv);
  return 0;
}

int
streaming_server_start (const struct streaming_options *opts, const struct streaming_callbacks *cb,
                        struct streaming_server **out, struct husk_error **err)
{
  struct streaming_server *srv = xcalloc (1, sizeof *srv);
  struct http_acceptor_options front = { .max_pending = STREAMING_MAX_HEADS,
                                         .head_timeout_ms = opts->head_timeout_ms,
                                         .name = "streaming",
                                         .on_head = on_head,
                                         .user = srv };

  srv->listen_fd = -1;
  srv->cb = *cb;
  srv->stream_wait_ms = opts->stream_wait_ms > 0 ? opts->stream_wait_ms : 30000;
  http_workers_init (&srv->sessions, STREAMING_MAX_SESSIONS);
  srv->tokens = streaming_tokens_new (
      STREAMING_MAX_PENDING, opts->token_ttl_ms > 0 ? opts->token_ttl_ms : STREAMING_DEFAULT_TOKEN_TTL_MS,
      free_request);
  srv->stop_fd = eventfd (0, EFD_CLOEXEC);
  if (srv->stop_fd < 0)
    husk_error_make (err, errno, "streaming server: eventfd");
  if (srv->stop_fd < 0 || listen_on (opts, srv, err) < 0)
    goto fail;
  front.listen_fd = srv->listen_fd;
  if (http_acceptor_start (&front, &srv->acceptor, err) < 0)
    goto fail;
  *out = srv;
  return 0;
fail:
  if (srv->listen_fd >= 0)
    close (srv->listen_fd);
  if (srv->stop_fd >= 0)
    close (srv->stop_fd);
  http_workers_drain (&srv->sessions);
  streaming_tokens_free (srv->tokens);
  free (srv->base);
  free (srv);
  return -1;
}

void
streaming_server_stop (struct streaming_server *srv)
{
  uint64_t one = 1;

  if (srv == NULL)
    return;
  http_acceptor_stop (srv->acceptor); /* closes the listener */
  if (write (srv->stop_fd, &one, sizeof one) < 0)
    husk_log (HUSK_LOG_WARNING, "streaming: cannot signal the stop: %s", strerror (errno));
  http_workers_drain (&srv->sessions);
  close (srv->stop_fd);
  streaming_tokens_free (srv->tokens);
  free (srv->base);
  free (srv);
}

char *
streaming_server_url (struct streaming_server *srv, const struct streaming_request *req,
                      struct husk_error **err)
{
  struct streaming_request *copy = xmalloc (sizeof *copy);
  char token[STREAMING_TOKEN_LEN + 1];

  *copy = *req;
  if (streaming_tokens_add (srv->tokens, copy, token, err) < 0)
    return NULL;
  return xasprintf ("%s%s%s", srv->base, kind_paths[req->kind], token);
}

const char *
streaming_server_base (const struct streaming_server *srv)
{
  return srv->base;
}

unsigned
streaming_server_sessions (struct streaming_server *srv)
{
  return http_workers_running (&srv->sessions);
}
