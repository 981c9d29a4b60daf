/* The metrics endpoint's listener and its one-request HTTP/1.1 exchange
 * (see metrics_http.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "cri/stats/metrics_http.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define HEAD_MAX 8192
#define REQUEST_TIMEOUT_S 5

struct metrics_http
{
  int listen_fd;
  int stop_pipe[2];
  pthread_t thread;
  metrics_render_fn render;
  void *user;
  char *address;
};

int
metrics_http_route (const char *head, bool *with_body)
{
  char method[16], target[256], version[16];

  *with_body = true;
  if (sscanf (head, "%15s %255s %15s", method, target, version) != 3 || strncmp (version, "HTTP/1.", 7) != 0)
    return 400;
  if (strcmp (method, "HEAD") == 0)
    *with_body = false;
  else if (strcmp (method, "GET") != 0)
    return 405;
  /* Prometheus may add a query ("?name[]=..."): the path alone counts. */
  target[strcspn (target, "?")] = '\0';
  return strcmp (target, "/metrics") == 0 ? 200 : 404;
}

/* Reads until the blank line ending the head; false on timeout, EOF or a
 * head over HEAD_MAX. */
static bool
read_head (int fd, char *buf, size_t cap)
{
  size_t len = 0;

  while (len + 1 < cap)
    {
      ssize_t n = read (fd, buf + len, cap - 1 - len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return false;
      len += (size_t) n;
      buf[len] = '\0';
      if (strstr (buf, "\r\n\r\n") || strstr (buf, "\n\n"))
        return true;
    }
  return false;
}

static void
write_all (int fd, const char *data, size_t len)
{
  while (len > 0)
    {
      ssize_t n = write (fd, data, len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return;
      data += n;
      len -= (size_t) n;
    }
}

static void
respond (int fd, int status, bool with_body, const char *content_type, const char *body, size_t body_len)
{
  static const struct
  {
    int code;
    const char *reason;
  } reasons[]
      = { { 200, "OK" }, { 400, "Bad Request" }, { 404, "Not Found" }, { 405, "Method Not Allowed" } };
  const char *reason = "Error";
  cleanup_free char *head = NULL;

  for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
    if (reasons[i].code == status)
      reason = reasons[i].reason;
  head
      = xasprintf ("HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
                   status, reason, content_type, body_len, status == 405 ? "Allow: GET, HEAD\r\n" : "");
  write_all (fd, head, strlen (head));
  if (with_body)
    write_all (fd, body, body_len);
}

static void
serve_one (struct metrics_http *srv, int fd)
{
  struct timeval timeout = { .tv_sec = REQUEST_TIMEOUT_S };
  char head[HEAD_MAX];
  bool with_body;
  int status;

  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  if (!read_head (fd, head, sizeof head))
    status = 400, with_body = true;
  else
    status = metrics_http_route (head, &with_body);
  if (status == 200)
    {
      struct prom_buf body = { 0 };
      srv->render (&body, srv->user);
      respond (fd, 200, with_body, METRICS_CONTENT_TYPE, body.data ? body.data : "", body.len);
      prom_buf_clear (&body);
      return;
    }
  {
    static const char *const messages[]
        = { "bad request\n", "not found: metrics are at /metrics\n", "method not allowed: GET or HEAD\n" };
    const char *msg = messages[status == 400 ? 0 : status == 404 ? 1 : 2];
    respond (fd, status, with_body, "text/plain; charset=utf-8", msg, strlen (msg));
  }
}

static void *
listener_main (void *arg)
{
  struct metrics_http *srv = arg;

  for (;;)
    {
      struct pollfd fds[2]
          = { { .fd = srv->listen_fd, .events = POLLIN }, { .fd = srv->stop_pipe[0], .events = POLLIN } };

      if (poll (fds, 2, -1) < 0)
        {
          if (errno == EINTR)
            continue;
          break;
        }
      if (fds[1].revents)
        break;
      if (fds[0].revents & POLLIN)
        {
          int fd = accept4 (srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);
          if (fd >= 0)
            {
              serve_one (srv, fd);
              close (fd);
            }
        }
    }
  return NULL;
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
  int rc;

  srv->listen_fd = srv->stop_pipe[0] = srv->stop_pipe[1] = -1;
  srv->render = render;
  srv->user = user;
  if (listen_on (srv, address, err) < 0)
    goto fail;
  if (pipe2 (srv->stop_pipe, O_CLOEXEC) < 0)
    {
      husk_error_make (err, errno, "metrics server: pipe");
      goto fail;
    }
  srv->address = bound_address (srv->listen_fd);
  if ((rc = pthread_create (&srv->thread, NULL, listener_main, srv)) != 0)
    {
      husk_error_make (err, rc, "metrics server: start its thread");
      goto fail;
    }
  *out = srv;
  return 0;
fail:
  if (srv->listen_fd >= 0)
    close (srv->listen_fd);
  if (srv->stop_pipe[0] >= 0)
    {
      close (srv->stop_pipe[0]);
      close (srv->stop_pipe[1]);
    }
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
  write_all (srv->stop_pipe[1], "x", 1);
  pthread_join (srv->thread, NULL);
  close (srv->listen_fd);
  close (srv->stop_pipe[0]);
  close (srv->stop_pipe[1]);
  free (srv->address);
  free (srv);
}
