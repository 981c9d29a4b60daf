/* The attach socket of husk-monitor (cri/container/attach.h draws the protocol):
 * clients come and go for the container's whole life; each gets a copy of
 * the output, and none can hold the monitor up — a send that would wait
 * drops the client instead. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/unix_socket.h"
#include "husk/util.h"
#include "cri/monitor/attach.h"

/* Room for bursts of output to a client that reads: the kernel charges
 * unread messages to our end.  FORCE needs CAP_NET_ADMIN; without it the
 * system's wmem_max caps it. */
#define CLIENT_SNDBUF (4 * 1024 * 1024)

int
attach_decode_request (const char *msg, size_t len, struct attach_request *req)
{
  const uint8_t *bytes = (const uint8_t *) msg;

  if (len == 0)
    return -1;
  memset (req, 0, sizeof *req);
  req->type = (enum attach_in_type) bytes[0];
  switch (bytes[0])
    {
    case ATTACH_IN_STDIN:
      req->data = msg + 1;
      req->len = len - 1;
      return 0;
    case ATTACH_IN_CLOSE_STDIN:
      return len == 1 ? 0 : -1;
    case ATTACH_IN_RESIZE:
      if (len != 5)
        return -1;
      req->rows = (unsigned) bytes[1] | (unsigned) bytes[2] << 8;
      req->cols = (unsigned) bytes[3] | (unsigned) bytes[4] << 8;
      return 0;
    default:
      return -1;
    }
}

int
attach_listen (struct attach_server *server, const char *path, struct husk_error **err)
{
  server->listen_fd = husk_unix_listen (path, SOCK_SEQPACKET, 0600, err);
  if (server->listen_fd < 0)
    return husk_error_wrap (err, "--attach-socket");
  server->path = xstrdup (path);
  return 0;
}

void
attach_accept (struct attach_server *server)
{
  int size = CLIENT_SNDBUF;
  int fd;

  while ((fd = accept4 (server->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0)
    {
      if (setsockopt (fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) < 0)
        setsockopt (fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
      server->clients = xrealloc (server->clients, (server->n_clients + 1) * sizeof *server->clients);
      server->clients[server->n_clients++] = fd;
    }
  if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
    husk_warn ("accept on the attach socket `%s`: %s", server->path, strerror (errno));
}

void
attach_drop_client (struct attach_server *server, size_t index)
{
  close (server->clients[index]);
  server->clients[index] = server->clients[--server->n_clients];
}

/* Each client in turn, dropping those a message cannot reach now.  Runs
 * from the end so that a drop (the last moved into its place) is safe. */
static void
send_to_all (struct attach_server *server, const void *msg, size_t len)
{
  for (size_t i = server->n_clients; i-- > 0;)
    if (send (server->clients[i], msg, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t) len)
      attach_drop_client (server, i);
}

void
attach_broadcast (struct attach_server *server, enum attach_out_type type, const char *data, size_t len)
{
  char msg[1 + ATTACH_DATA_MAX];

  while (len > 0 && server->n_clients > 0)
    {
      size_t chunk = len < ATTACH_DATA_MAX ? len : ATTACH_DATA_MAX;

      msg[0] = (char) type;
      memcpy (msg + 1, data, chunk);
      send_to_all (server, msg, 1 + chunk);
      data += chunk;
      len -= chunk;
    }
}

ssize_t
attach_receive (struct attach_server *server, size_t index, char *buf, size_t size)
{
  ssize_t n = recv (server->clients[index], buf, size, MSG_DONTWAIT | MSG_TRUNC);

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return 0;
  if (n > 0 && (size_t) n <= size)
    return n;
  if (n > 0)
    husk_warn ("attach client sent %zd bytes, more than %zu: dropped", n, size);
  attach_drop_client (server, index);
  return -1;
}

void
attach_finish (struct attach_server *server, int exit_code)
{
  char msg[16];
  int len = snprintf (msg, sizeof msg, "%c%d", ATTACH_OUT_EXIT, exit_code);

  send_to_all (server, msg, (size_t) len);
  while (server->n_clients > 0)
    attach_drop_client (server, server->n_clients - 1);
  free (server->clients);
  server->clients = NULL;
}

void
attach_close (struct attach_server *server)
{
  if (server->listen_fd >= 0)
    {
      husk_closep (&server->listen_fd);
      if (unlink (server->path) < 0 && errno != ENOENT)
        husk_warn ("remove the attach socket `%s`: %s", server->path, strerror (errno));
    }
  free (server->path);
  server->path = NULL;
}
