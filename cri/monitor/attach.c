/* The attach socket of husk-monitor (cri/attach.h draws the protocol):
 * clients come and go for the container's whole life; each gets a copy of
 * the output, what its socket cannot take yet waits in a bounded queue of
 * its own, and none can hold the monitor up for more than ATTACH_STALL_MS
 * without progress: then it is dropped with an error. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
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

static long long
now_ms (void)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (long long) now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

void
attach_add_client (struct attach_server *server, int fd)
{
  int size = CLIENT_SNDBUF;

  if (setsockopt (fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) < 0)
    setsockopt (fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  server->clients = xrealloc (server->clients, (server->n_clients + 1) * sizeof *server->clients);
  server->clients[server->n_clients++] = (struct attach_client){ .fd = fd };
}

void
attach_accept (struct attach_server *server)
{
  int fd;

  while ((fd = accept4 (server->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0)
    attach_add_client (server, fd);
  if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
    husk_warn ("accept on the attach socket `%s`: %s", server->path, strerror (errno));
}

void
attach_drop_client (struct attach_server *server, size_t index)
{
  close (server->clients[index].fd);
  free (server->clients[index].queue);
  server->clients[index] = server->clients[--server->n_clients];
}

/* Drops client INDEX, telling it why when its socket has room for that. */
static void
drop_with_error (struct attach_server *server, size_t index, const char *why)
{
  struct attach_client *client = &server->clients[index];
  size_t waiting = client->queue_len - client->queue_off;
  char msg[256];
  int len;

  len = snprintf (msg, sizeof msg,
                  "%c%s (%zu bytes of output not delivered); the container's log has all of it",
                  ATTACH_OUT_ERROR, why, waiting);
  if (len > (int) sizeof msg - 1)
    len = (int) sizeof msg - 1;
  husk_warn ("attach client dropped: %s, %zu bytes not delivered", why, waiting);
  (void) send (client->fd, msg, (size_t) len, MSG_DONTWAIT | MSG_NOSIGNAL);
  attach_drop_client (server, index);
}

static size_t
queued (const struct attach_client *client)
{
  return client->queue_len - client->queue_off;
}

static void
note_fill (struct attach_client *client)
{
  if (queued (client) >= ATTACH_QUEUE_MAX && client->full_since_ms == 0)
    client->full_since_ms = now_ms ();
  else if (queued (client) < ATTACH_QUEUE_MAX / 2)
    client->full_since_ms = 0;
}

static void
enqueue (struct attach_client *client, const void *msg, size_t len)
{
  uint32_t len32 = (uint32_t) len;

  /* What was sent goes once it is the larger part: the queue stays near
   * its bound however long the output keeps coming. */
  if (client->queue_off > 0 && client->queue_off >= queued (client))
    {
      memmove (client->queue, client->queue + client->queue_off, queued (client));
      client->queue_len -= client->queue_off;
      client->queue_off = 0;
    }
  client->queue = xrealloc (client->queue, client->queue_len + sizeof len32 + len);
  memcpy (client->queue + client->queue_len, &len32, sizeof len32);
  memcpy (client->queue + client->queue_len + sizeof len32, msg, len);
  client->queue_len += sizeof len32 + len;
  note_fill (client);
}

/* Sends queued messages while the socket takes them; false when the
 * client is gone. */
static bool
send_queue (struct attach_client *client)
{
  while (queued (client) > 0)
    {
      uint32_t len32;
      ssize_t n;

      memcpy (&len32, client->queue + client->queue_off, sizeof len32);
      n = send (client->fd, client->queue + client->queue_off + sizeof len32, len32,
                MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        break;
      if (n != (ssize_t) len32)
        return false;
      client->queue_off += sizeof len32 + len32;
    }
  if (queued (client) == 0)
    {
      free (client->queue);
      client->queue = NULL;
      client->queue_len = client->queue_off = 0;
    }
  note_fill (client);
  return true;
}

/* Straight to the socket when nothing waits before it, else queued. */
static bool
send_or_queue (struct attach_client *client, const void *msg, size_t len)
{
  ssize_t n;

  if (queued (client) > 0)
    {
      enqueue (client, msg, len);
      return true;
    }
  n = send (client->fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n == (ssize_t) len)
    return true;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    {
      enqueue (client, msg, len);
      return true;
    }
  return false;
}

/* Each client in turn; one that is gone is dropped.  Runs from the end so
 * that a drop (the last moved into its place) is safe. */
static void
send_to_all (struct attach_server *server, const void *msg, size_t len)
{
  for (size_t i = server->n_clients; i-- > 0;)
    if (!send_or_queue (&server->clients[i], msg, len))
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

bool
attach_client_waiting (const struct attach_server *server, size_t index)
{
  return queued (&server->clients[index]) > 0;
}

bool
attach_backpressure (const struct attach_server *server)
{
  for (size_t i = 0; i < server->n_clients; i++)
    if (server->clients[i].full_since_ms != 0)
      return true;
  return false;
}

void
attach_flush (struct attach_server *server, size_t index)
{
  if (!send_queue (&server->clients[index]))
    attach_drop_client (server, index);
}

int
attach_expire (struct attach_server *server)
{
  long long now = now_ms ();
  long long next = -1;

  for (size_t i = server->n_clients; i-- > 0;)
    {
      long long since = server->clients[i].full_since_ms;

      if (since == 0)
        continue;
      if (now - since >= ATTACH_STALL_MS)
        drop_with_error (server, i,
                         "attach client too slow: it read too little of the container's output for "
                         "5 s");
      else if (next < 0 || since + ATTACH_STALL_MS - now < next)
        next = since + ATTACH_STALL_MS - now;
    }
  return (int) next;
}

ssize_t
attach_receive (struct attach_server *server, size_t index, char *buf, size_t size)
{
  ssize_t n = recv (server->clients[index].fd, buf, size, MSG_DONTWAIT | MSG_TRUNC);

  if (n < 0 && (errno == EAGAIN || errno == EINTR))
    return 0;
  if (n > 0 && (size_t) n <= size)
    return n;
  if (n > 0)
    husk_warn ("attach client sent %zd bytes, more than %zu: dropped", n, size);
  attach_drop_client (server, index);
  return -1;
}

/* Waits (poll) until some waiting client can take more, or DEADLINE. */
static void
wait_writable (struct attach_server *server, long long deadline)
{
  cleanup_free struct pollfd *fds = xcalloc (server->n_clients, sizeof *fds);
  long long left = deadline - now_ms ();

  for (size_t i = 0; i < server->n_clients; i++)
    fds[i] = (struct pollfd){ .fd = queued (&server->clients[i]) ? server->clients[i].fd : -1,
                              .events = POLLOUT };
  if (left > 0)
    (void) poll (fds, server->n_clients, (int) left);
}

void
attach_finish (struct attach_server *server, int exit_code)
{
  long long deadline = now_ms () + ATTACH_FINISH_MS;
  char msg[16];
  int len = snprintf (msg, sizeof msg, "%c%d", ATTACH_OUT_EXIT, exit_code);

  send_to_all (server, msg, (size_t) len);
  for (;;)
    {
      /* Those that took everything are done; the others get more time. */
      for (size_t i = server->n_clients; i-- > 0;)
        if (!send_queue (&server->clients[i]) || queued (&server->clients[i]) == 0)
          attach_drop_client (server, i);
      if (server->n_clients == 0 || now_ms () >= deadline)
        break;
      wait_writable (server, deadline);
    }
  while (server->n_clients > 0)
    drop_with_error (server, server->n_clients - 1,
                     "attach client too slow: the container exited and it did not read the rest in 10 s");
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
