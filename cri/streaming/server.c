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

#include "cri/streaming/server.h"
#include "cri/streaming/session.h"
#include "cri/streaming/tokens.h"
#include "cri/streaming/ws.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define REQUEST_MAX 8192
#define REQUEST_TIMEOUT_MS 10000

struct streaming_server
{
  int listen_fd;
  int stop_fd; /* eventfd: readable once stopping */
  pthread_t listener;
  char *base;
  struct streaming_callbacks cb;
  struct streaming_tokens *tokens;
  int64_t stream_wait_ms;
  pthread_mutex_t lock;
  pthread_cond_t idle;
  unsigned connections;
};

struct conn
{
  struct streaming_server *srv;
  int fd;
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
  char method[16];
  char path[512];
  char *upgrade;
  char **protocols;    /* every X-Stream-Protocol-Version value, in order */
  char **ws_protocols; /* every Sec-WebSocket-Protocol value, in order */
  char *ws_key, *ws_version;
};

static void
http_request_clear (struct http_request *r)
{
  free (r->upgrade);
  free (r->ws_key);
  free (r->ws_version);
  husk_strvfreep (&r->protocols);
  husk_strvfreep (&r->ws_protocols);
}

static void
send_error (int fd, int code, const char *reason, const char *message)
{
  cleanup_free char *body = xasprintf ("%s\n", message);
  cleanup_free char *resp
      = xasprintf ("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\n%s",
                   code, reason, strlen (body), body);

  (void) husk_write_all (fd, resp, strlen (resp));
}

/* Reads up to the blank line: 0, or -1 when the client went or sent more
 * than REQUEST_MAX or nothing in REQUEST_TIMEOUT_MS. */
static int
read_head (int fd, char *buf, size_t cap, size_t *len)
{
  *len = 0;
  while (*len < cap - 1)
    {
      struct pollfd p = { .fd = fd, .events = POLLIN };
      if (poll (&p, 1, REQUEST_TIMEOUT_MS) <= 0)
        return -1;
      /* Byte by byte up to the blank line: what follows is SPDY's. */
      ssize_t n = read (fd, buf + *len, 1);
      if (n <= 0)
        {
          if (n < 0 && errno == EINTR)
            continue;
          return -1;
        }
      *len += 1;
      buf[*len] = '\0';
      if (*len >= 4 && memcmp (buf + *len - 4, "\r\n\r\n", 4) == 0)
        return 0;
    }
  return -1;
}

static void
add_protocols (char ***list, const char *value)
{
  cleanup_free char *copy = xstrdup (value);
  char *save = NULL;

  for (char *tok = strtok_r (copy, ", \t", &save); tok; tok = strtok_r (NULL, ", \t", &save))
    *list = husk_strv_append (*list, tok);
}

static void
set_string (char **field, const char *value)
{
  free (*field);
  *field = xstrdup (value);
}

static int
parse_head (char *head, struct http_request *r)
{
  char *save = NULL, *line = strtok_r (head, "\r\n", &save);
  char version[16];

  if (line == NULL || sscanf (line, "%15s %511s %15s", r->method, r->path, version) != 3
      || strncmp (version, "HTTP/1.", 7) != 0)
    return -1;
  while ((line = strtok_r (NULL, "\r\n", &save)) != NULL)
    {
      char *colon = strchr (line, ':');
      if (colon == NULL)
        return -1;
      *colon = '\0';
      char *value = colon + 1 + strspn (colon + 1, " \t");
      if (strcasecmp (line, "Upgrade") == 0)
        set_string (&r->upgrade, value);
      else if (strcasecmp (line, "X-Stream-Protocol-Version") == 0)
        add_protocols (&r->protocols, value);
      else if (strcasecmp (line, "Sec-WebSocket-Protocol") == 0)
        add_protocols (&r->ws_protocols, value);
      else if (strcasecmp (line, "Sec-WebSocket-Key") == 0)
        set_string (&r->ws_key, value);
      else if (strcasecmp (line, "Sec-WebSocket-Version") == 0)
        set_string (&r->ws_version, value);
    }
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

/* Checks the request and takes its token: the request, or NULL after an
 * error reply. */
static struct streaming_request *
accept_request (struct conn *c, struct http_request *r, enum streaming_protocol *protocol, bool *websocket)
{
  struct streaming_request *req = NULL;
  const char *token = NULL, *name = NULL;
  int kind = -1;
  char *query = strchr (r->path, '?');

  if (query)
    *query = '\0';
  for (int k = 0; k < 3; k++)
    if (husk_str_has_prefix (r->path, kind_paths[k]))
      kind = k, token = r->path + strlen (kind_paths[k]);
  if (kind < 0)
    return send_error (c->fd, 404, "Not Found",
                       "streaming: no such path (expected /exec/, /attach/ or /portforward/TOKEN)"),
           NULL;
  if (strcmp (r->method, "GET") != 0 && strcmp (r->method, "POST") != 0)
    return send_error (c->fd, 405, "Method Not Allowed", "streaming: only GET and POST"), NULL;
  if (is_websocket (r) && (r->ws_key == NULL || r->ws_version == NULL || strcmp (r->ws_version, "13") != 0))
    return send_error (
               c->fd, 400, "Bad Request",
               "streaming: a WebSocket upgrade needs Sec-WebSocket-Key and Sec-WebSocket-Version: 13"),
           NULL;
  if (!is_websocket (r) && (r->upgrade == NULL || strcasecmp (r->upgrade, "SPDY/3.1") != 0))
    return send_error (c->fd, 400, "Bad Request",
                       "streaming: expected `Upgrade: SPDY/3.1` or `Upgrade: websocket`"),
           NULL;
  req = streaming_tokens_take (c->srv->tokens, token);
  if (req == NULL)
    return send_error (c->fd, 404, "Not Found", "streaming: unknown, used or expired token"), NULL;
  if ((int) req->kind != kind)
    {
      free_request (req);
      return send_error (c->fd, 400, "Bad Request", "streaming: the token is for another kind of session"),
             NULL;
    }
  if (is_websocket (r) && req->kind == STREAMING_PORTFORWARD && req->n_ports == 0)
    {
      free_request (req);
      return send_error (
                 c->fd, 400, "Bad Request",
                 "streaming: a port forward over WebSocket needs the ports in the PortForward request"),
             NULL;
    }
  *protocol = negotiate (r, req->kind, &name);
  if (*protocol == 0)
    {
      free_request (req);
      send_error (c->fd, 403, "Forbidden", protocol_hint (r, kind));
      return NULL;
    }
  cleanup_free char *resp = upgrade_response (r, name);
  if (husk_write_all (c->fd, resp, strlen (resp)) < 0)
    {
      free_request (req);
      return NULL;
    }
  *websocket = is_websocket (r);
  return req;
}

static void *
conn_main (void *arg)
{
  struct conn *c = arg;
  struct streaming_server *srv = c->srv;
  char head[REQUEST_MAX];
  size_t len;
  struct http_request r = { 0 };
  enum streaming_protocol protocol = 0;
  struct streaming_request *req = NULL;
  bool websocket = false;

  if (read_head (c->fd, head, sizeof head, &len) < 0)
    send_error (c->fd, 400, "Bad Request", "streaming: no complete HTTP request head");
  else if (parse_head (head, &r) < 0)
    send_error (c->fd, 400, "Bad Request", "streaming: malformed HTTP request");
  else
    req = accept_request (c, &r, &protocol, &websocket);
  http_request_clear (&r);
  if (req)
    {
      struct streaming_session_args args = { .fd = c->fd,
                                             .stop_fd = srv->stop_fd,
                                             .protocol = protocol,
                                             .websocket = websocket,
                                             .req = req,
                                             .cb = &srv->cb,
                                             .stream_wait_ms = srv->stream_wait_ms };
      streaming_session_run (&args); /* closes the fd */
      free_request (req);
    }
  else
    close (c->fd);
  free (c);
  pthread_mutex_lock (&srv->lock);
  if (--srv->connections == 0)
    pthread_cond_broadcast (&srv->idle);
  pthread_mutex_unlock (&srv->lock);
  return NULL;
}

static void
spawn_conn (struct streaming_server *srv, int fd)
{
  pthread_attr_t attr;
  pthread_t thread;
  struct conn *c;

  pthread_mutex_lock (&srv->lock);
  if (srv->connections >= STREAMING_MAX_CONNECTIONS)
    {
      pthread_mutex_unlock (&srv->lock);
      send_error (fd, 503, "Service Unavailable", "streaming: too many sessions at once");
      close (fd);
      return;
    }
  srv->connections++;
  pthread_mutex_unlock (&srv->lock);
  c = xcalloc (1, sizeof *c);
  c->srv = srv, c->fd = fd;
  pthread_attr_init (&attr);
  pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize (&attr, 256 * 1024);
  if (pthread_create (&thread, &attr, conn_main, c) != 0)
    {
      husk_log (HUSK_LOG_WARNING, "streaming: no thread for a connection: %s", strerror (errno));
      close (fd);
      free (c);
      pthread_mutex_lock (&srv->lock);
      if (--srv->connections == 0)
        pthread_cond_broadcast (&srv->idle);
      pthread_mutex_unlock (&srv->lock);
    }
  pthread_attr_destroy (&attr);
}

static void *
listener_main (void *arg)
{
  struct streaming_server *srv = arg;

  for (;;)
    {
      struct pollfd p[2]
          = { { .fd = srv->listen_fd, .events = POLLIN }, { .fd = srv->stop_fd, .events = POLLIN } };
      if (poll (p, 2, -1) < 0)
        continue;
      if (p[1].revents)
        return NULL;
      int fd = accept4 (srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);
      if (fd >= 0)
        spawn_conn (srv, fd);
      else if (errno == EMFILE || errno == ENFILE)
        usleep (100000);
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

  srv->listen_fd = -1;
  srv->cb = *cb;
  srv->stream_wait_ms = opts->stream_wait_ms > 0 ? opts->stream_wait_ms : 30000;
  pthread_mutex_init (&srv->lock, NULL);
  pthread_cond_init (&srv->idle, NULL);
  srv->tokens = streaming_tokens_new (
      STREAMING_MAX_PENDING, opts->token_ttl_ms > 0 ? opts->token_ttl_ms : STREAMING_DEFAULT_TOKEN_TTL_MS,
      free_request);
  srv->stop_fd = eventfd (0, EFD_CLOEXEC);
  if (srv->stop_fd < 0)
    husk_error_make (err, errno, "streaming server: eventfd");
  if (srv->stop_fd < 0 || listen_on (opts, srv, err) < 0)
    goto fail;
  if (pthread_create (&srv->listener, NULL, listener_main, srv) != 0)
    {
      husk_error_make (err, errno, "streaming server: thread");
      goto fail;
    }
  *out = srv;
  return 0;
fail:
  if (srv->listen_fd >= 0)
    close (srv->listen_fd);
  if (srv->stop_fd >= 0)
    close (srv->stop_fd);
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
  if (write (srv->stop_fd, &one, sizeof one) < 0)
    husk_log (HUSK_LOG_WARNING, "streaming: cannot signal the stop: %s", strerror (errno));
  pthread_join (srv->listener, NULL);
  close (srv->listen_fd);
  pthread_mutex_lock (&srv->lock);
  while (srv->connections > 0)
    pthread_cond_wait (&srv->idle, &srv->lock);
  pthread_mutex_unlock (&srv->lock);
  close (srv->stop_fd);
  streaming_tokens_free (srv->tokens);
  pthread_mutex_destroy (&srv->lock);
  pthread_cond_destroy (&srv->idle);
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
streaming_server_connections (struct streaming_server *srv)
{
  unsigned n;

  pthread_mutex_lock (&srv->lock);
  n = srv->connections;
  pthread_mutex_unlock (&srv->lock);
  return n;
}
