/* The --console-socket end the runtime connects to when process.terminal
 * is set: it sends the pty master (SCM_RIGHTS), which the monitor then
 * holds as the container's stdin and stdout. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/unix_socket.h"
#include "husk/util.h"
#include "cri/monitor/monitor.h"

/* A runtime that connected sends at once; this only bounds a broken one. */
#define CONSOLE_RECEIVE_TIMEOUT_S 10

int
console_socket_listen (const char *dir, char **path, struct husk_error **err)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  cleanup_free char *socket_path = xasprintf ("%s/console.sock", dir);
  cleanup_close int fd = -1;

  if (strlen (socket_path) >= sizeof addr.sun_path)
    return husk_error_make (err, ENAMETOOLONG, "console socket `%s`", socket_path);
  strcpy (addr.sun_path, socket_path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return husk_error_make (err, errno, "console socket `%s`: socket", socket_path);
  if (bind (fd, (struct sockaddr *) &addr, sizeof addr) < 0)
    return husk_error_make (err, errno, "bind console socket `%s`", socket_path);
  if (listen (fd, 1) < 0)
    return husk_error_make (err, errno, "listen on console socket `%s`", socket_path);
  *path = steal_pointer (&socket_path);
  return steal_fd (&fd);
}

static int
receive_fd (int conn_fd, struct husk_error **err)
{
  char name[256];
  int fd = husk_unix_recv_fd (conn_fd, name, sizeof name, NULL);

  if (fd < 0 && errno == EPROTO)
    return husk_error_make (err, 0, "the runtime sent no pty master over the console socket");
  if (fd < 0)
    return husk_error_make (err, errno, "receive the pty master from the console socket");
  return fd;
}

int
console_socket_receive (int listen_fd, struct husk_error **err)
{
  struct timeval timeout = { .tv_sec = CONSOLE_RECEIVE_TIMEOUT_S };
  cleanup_close int conn_fd = accept4 (listen_fd, NULL, NULL, SOCK_CLOEXEC);
  int master;

  if (conn_fd < 0)
    return husk_error_make (err, errno, "accept on the console socket");
  if (setsockopt (conn_fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) < 0)
    return husk_error_make (err, errno, "set a receive timeout on the console connection");
  master = receive_fd (conn_fd, err);
  if (master < 0)
    return -1;
  if (fcntl (master, F_SETFL, fcntl (master, F_GETFL) | O_NONBLOCK) < 0)
    {
      int saved = errno;
      close (master);
      return husk_error_make (err, saved, "make the pty master non-blocking");
    }
  return master;
}
