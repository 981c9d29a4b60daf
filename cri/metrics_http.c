/* The metrics endpoint: its listener, routing and scrapes, behind the
 * front door it shares with the streaming server (cri/streaming/http.h). */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cri/metrics_http.h"
#include "cri/streaming/http.h"
#include "cri/streaming/http_head.h"
#include "husk/cleanup.h"
#include "husk/util.h"

/* Connections still sending their head (the oldest goes when full), and
 * scrapes being rendered and sent at once. */
#define METRICS_MAX_HEADS 64
#define METRICS_MAX_SCRAPES 4

struct metrics_http
{
  int listen_fd;
  struct http_acceptor *acceptor;
  struct http_workers scrapes;
  metrics_render_fn render;
  void *user;
  char *address;
};

int
metrics_http_route (const char *head, bool *with_body)
{
  cleanup_free char *copy = xstrdup (head);
  struct http_head h;
  char *target;

  *with_body = true;
  if (http_head_parse (copy, &h) < 0)
    return 400;
  if (strcmp (h.method, "HEAD") == 0)
    *with_body = false;
  else if (strcmp (h.method, "GET") != 0)
    return 405;
  /* Prometheus may add a query ("?name[]=..."): the path alone counts. */
  target = (char *) h.target;
  target[strcspn (target, "?")] = '\0';
  return strcmp (target, "/metrics") == 0 ? 200 : 404;
}

struct scrape
{
  struct metrics_http *srv;
  int fd;
  bool with_body;
};

/* A worker: renders and sends within HTTP_REPLY_TIMEOUT_MS. */
static void
serve_scrape (void *arg)
{
  struct scrape *sc = arg;
  struct prom_buf body = { 0 };
  cleanup_free char *head = NULL;

  sc->srv->render (&body, sc->srv->user);
  head = xasprintf ("HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                    METRICS_CONTENT_TYPE, body.len);
  if (http_send_all (sc->fd, head, strlen (head), HTTP_REPLY_TIMEOUT_MS) == 0 && sc->with_body && body.len)
    (void) http_send_all (sc->fd, body.data, body.len, HTTP_REPLY_TIMEOUT_MS);
  prom_buf_clear (&body);
  close (sc->fd);
  free (sc);
}

/* On the acceptor's thread: errors are answered at once, a scrape goes to
 * a worker. */
static void
on_head (void *user, int fd, char *head, size_t len)
{
  struct metrics_http *srv = user;
  bool with_body;
  int status = metrics_http_route (head, &with_body);
  struct scrape *sc;

  if (status == 400)
    http_send_status (fd, 400, "Bad Request", NULL, "bad request");
  else if (status == 404)
    http_send_status (fd, 404, "Not Found", NULL, "not found: metrics are at /metrics");
  else if (status == 405)
    http_send_status (fd, 405, "Method Not Allowed", "Allow: GET, HEAD\r\n",
                      "method not allowed: GET or HEAD");
  if (status != 200)
    {
      close (fd);
      return;
    }
  sc = xmalloc (sizeof *sc);
  *sc = (struct scrape){ .srv = srv, .fd = fd, .with_body = with_body };
  if (http_workers_spawn (&srv->scrapes, serve_scrape, sc) < 0)
    {
      http_send_status (fd, 503, "Service Unavailable", "Retry-After: 1\r\n", "too many scrapes at once");
      close (fd);
      free (sc);
    }
}

/* HOST and PORT of ADDRESS (malloc'd; *HOST NULL for ":PORT"). */
static int
split_address (const char *address, char **host, char **port, struct husk_error **err)
{
  const char *colon = strrchr (address, ':');

  *host = *port = NULL;
  if (colon == NULL || colon[1] == '\0')
    return husk_error_make (err, EINVAL, "metrics_address `%s`: must be HOST:PORT", address);
  *port = xstrdup (colon + 1);
  if (address[0] == '[' && colon > address && colon[-1] == ']')
    *host = xasprintf ("%.*s", (int) (colon - address - 2), address + 1);
  else if (colon > address)
    *host = xasprintf ("%.*s", (int) (colon - address), address);
  return 0;
}

static char *
bound_address (int fd)
{
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char host[INET6_ADDRSTRLEN] = "?", port[8] = "?";

  if (getsockname (fd, (struct sockaddr *) &ss, &len) == 0)
    getnameinfo ((struct sockaddr *) &ss, len, host, sizeof host, port, sizeof port,
                 NI_NUMERICHOST | NI_NUMERICSERV);
  return ss.ss_family == AF_INET6 ? xasprintf ("[%s]:%s", host, port) : xasprintf ("%s:%s", host, port);
}

static int
listen_on (struct metrics_http *srv, const char *address, struct husk_error **err)
{
  cleanup_free char *host = NULL, *port = NULL;
  struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
  struct addrinfo *ai = NULL;
  int rc, one = 1;

  if (split_address (address, &host, &port, err) < 0)
    return -1;
  if ((rc = getaddrinfo (host, port, &hints, &ai)) != 0)
    return husk_error_make (err, EINVAL, "metrics_address `%s`: %s", address, gai_strerror (rc));
  srv->listen_fd = socket (ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  rc = 0;
  if (srv->listen_fd < 0 || setsockopt (srv->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0
      || bind (srv->listen_fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen (srv->listen_fd, 64) < 0)
    rc = husk_error_make (err, errno, "metrics_address `%s`: listen", address);
  freeaddrinfo (ai);
  return rc;
}

int
metrics_http_start (const char *address, metrics_render_fn render, void *user, struct metrics_http **out,
                    struct husk_error **err)
{
  struct metrics_http *srv = xcalloc (1, sizeof *srv);
  struct http_acceptor_options front
      = { .max_pending = METRICS_MAX_HEADS, .name = "metrics", .on_head = on_head, .user = srv };

  srv->listen_fd = -1;
  srv->render = render;
  srv->user = user;
  http_workers_init (&srv->scrapes, METRICS_MAX_SCRAPES);
  if (listen_on (srv, address, err) < 0)
    goto fail;
  srv->address = bound_address (srv->listen_fd);
  front.listen_fd = srv->listen_fd;
  if (http_acceptor_start (&front, &srv->acceptor, err) < 0)
    goto fail;
  *out = srv;
  return 0;
fail:
  if (srv->listen_fd >= 0)
    close (srv->listen_fd);
  http_workers_drain (&srv->scrapes);
  free (srv->address);
  free (srv);
  return -1;
}

const char *
metrics_http_address (const struct metrics_http *srv)
{
  return srv->address;
}

void
metrics_http_stop (struct metrics_http *srv)
{
  if (srv == NULL)
    return;
  http_acceptor_stop (srv->acceptor); /* closes the listener */
  http_workers_drain (&srv->scrapes);
  free (srv->address);
  free (srv);
}
