/* The sd_notify datagram protocol (see husk/sd_notify.h). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "husk/sd_notify.h"
#include "husk/util.h"

static int
parse_address (struct sd_notifier *notifier, const char *value, struct husk_error **err)
{
  size_t len = strlen (value);

  if (value[0] != '/' && value[0] != '@')
    return husk_error_make (err, 0, "NOTIFY_SOCKET `%s`: must be an absolute path or an @abstract name",
                            value);
  if (len >= sizeof notifier->addr.sun_path)
    return husk_error_make (err, 0, "NOTIFY_SOCKET `%s`: longer than a unix socket address (%zu bytes)",
                            value, sizeof notifier->addr.sun_path - 1);
  memset (&notifier->addr, 0, sizeof notifier->addr);
  notifier->addr.sun_family = AF_UNIX;
  memcpy (notifier->addr.sun_path, value, len);
  if (value[0] == '@')
    notifier->addr.sun_path[0] = '\0'; /* abstract: the length bounds the name, no NUL */
  notifier->addr_len = (socklen_t) (offsetof (struct sockaddr_un, sun_path) + len + (value[0] == '/'));
  return 0;
}

int
sd_notifier_open (struct sd_notifier *notifier, struct husk_error **err)
{
  const char *value = getenv ("NOTIFY_SOCKET");

  memset (notifier, 0, sizeof *notifier);
  notifier->fd = -1;
  if (value == NULL || value[0] == '\0')
    {
      unsetenv ("NOTIFY_SOCKET");
      return 0;
    }
  notifier->name = xstrdup (value);
  unsetenv ("NOTIFY_SOCKET");
  if (parse_address (notifier, notifier->name, err) < 0)
    {
      sd_notifier_close (notifier);
      return -1;
    }
  notifier->fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (notifier->fd < 0)
    {
      husk_error_make (err, errno, "NOTIFY_SOCKET `%s`: socket", notifier->name);
      sd_notifier_close (notifier);
      return -1;
    }
  return 1;
}

int
sd_notifier_send (struct sd_notifier *notifier, const char *state, struct husk_error **err)
{
  size_t len = strlen (state);
  ssize_t sent;

  if (notifier->fd < 0)
    return 0;
  do
    sent = sendto (notifier->fd, state, len, MSG_NOSIGNAL, (struct sockaddr *) &notifier->addr,
                   notifier->addr_len);
  while (sent < 0 && errno == EINTR);
  if (sent < 0)
    return husk_error_make (err, errno, "notify systemd at `%s`", notifier->name);
  if ((size_t) sent != len)
    return husk_error_make (err, 0, "notify systemd at `%s`: sent %zd of %zu bytes", notifier->name, sent,
                            len);
  return 0;
}

void
sd_notifier_close (struct sd_notifier *notifier)
{
  if (notifier->fd >= 0)
    close (notifier->fd);
  notifier->fd = -1;
  free (notifier->name);
  notifier->name = NULL;
}
