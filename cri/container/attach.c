/* huskd's end of the monitor's attach socket (cri/container/attach.h): the socket's
 * path and the client messages. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "husk/cleanup.h"
#include "husk/unix_socket.h"
#include "husk/util.h"
#include "cri/container/attach.h"

char *
cri_attach_socket_path (const char *state_dir, const char *id)
{
  return xasprintf ("%s/exits/%s.attach", state_dir, id);
}

int
cri_attach_connect (const char *state_dir, const char *id, struct husk_error **err)
{
  cleanup_free char *path = cri_attach_socket_path (state_dir, id);
  struct husk_error *cause = NULL;
  int fd = husk_unix_connect (path, SOCK_SEQPACKET, &cause);

  if (fd >= 0)
    return fd;
  if (cause->errnum == ENOENT || cause->errnum == ECONNREFUSED)
    {
      husk_error_free (&cause);
      return husk_error_kind (err, ENOENT, "container %s has no attach socket (monitor gone?)", id);
    }
  *err = cause;
  return husk_error_wrap (err, "attach to container %s", id);
}

static int
send_message (int fd, const void *msg, size_t len)
{
  ssize_t n;

  do
    n = send (fd, msg, len, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n < 0 ? -1 : 0;
}

int
cri_attach_send_stdin (int fd, const void *data, size_t len)
{
  char msg[1 + ATTACH_DATA_MAX];
  const char *bytes = data;

  msg[0] = ATTACH_IN_STDIN;
  while (len > 0)
    {
      size_t chunk = len < ATTACH_DATA_MAX ? len : ATTACH_DATA_MAX;

      memcpy (msg + 1, bytes, chunk);
      if (send_message (fd, msg, 1 + chunk) < 0)
        return -1;
      bytes += chunk;
      len -= chunk;
    }
  return 0;
}

int
cri_attach_close_stdin (int fd)
{
  const char msg = ATTACH_IN_CLOSE_STDIN;

  return send_message (fd, &msg, 1);
}

int
cri_attach_resize (int fd, unsigned rows, unsigned cols)
{
  uint8_t msg[5] = { ATTACH_IN_RESIZE };

  if (rows > UINT16_MAX || cols > UINT16_MAX)
    {
      errno = EINVAL;
      return -1;
    }
  msg[1] = (uint8_t) (rows & 0xff);
  msg[2] = (uint8_t) (rows >> 8);
  msg[3] = (uint8_t) (cols & 0xff);
  msg[4] = (uint8_t) (cols >> 8);
  return send_message (fd, msg, sizeof msg);
}

ssize_t
cri_attach_receive (int fd, void *buf, size_t size)
{
  ssize_t n;

  do
    n = recv (fd, buf, size, 0);
  while (n < 0 && errno == EINTR);
  return n;
}
