/* The parent/child handshake of `husk create` (see sync.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/sync.h"

#define SYNC_MAX_MSG 65536

struct sync_header
{
  uint32_t type;
  uint32_t len;
};

const char *
sync_msg_name (enum sync_msg_type type)
{
  static const char *const names[] = {
    [SYNC_PARENT_GO] = "PARENT_GO",
    [SYNC_CHILD_RUN_RUNTIME_HOOKS] = "CHILD_RUN_RUNTIME_HOOKS",
    [SYNC_PARENT_HOOKS_DONE] = "PARENT_HOOKS_DONE",
    [SYNC_CHILD_READY] = "CHILD_READY",
    [SYNC_CHILD_ERROR] = "CHILD_ERROR",
  };
  if ((size_t) type < sizeof names / sizeof names[0] && names[type])
    return names[type];
  return "UNKNOWN";
}

int
sync_send (int fd, enum sync_msg_type type, const void *payload, size_t len, struct husk_error **err)
{
  struct sync_header header = { .type = type, .len = (uint32_t) len };
  cleanup_free char *buf = NULL;
  ssize_t n;

  if (len > SYNC_MAX_MSG - sizeof header)
    return husk_error_make (err, EMSGSIZE, "sync: send %s", sync_msg_name (type));
  buf = xmalloc (sizeof header + len);
  memcpy (buf, &header, sizeof header);
  if (len)
    memcpy (buf + sizeof header, payload, len);
  do
    n = send (fd, buf, sizeof header + len, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return husk_error_make (err, errno, "sync: send %s", sync_msg_name (type));
  return 0;
}

int
sync_expect (int fd, enum sync_msg_type expected, char **payload, struct husk_error **err)
{
  cleanup_free char *buf = xmalloc (SYNC_MAX_MSG + 1);
  struct sync_header header;
  ssize_t n;

  do
    n = recv (fd, buf, SYNC_MAX_MSG, 0);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return husk_error_make (err, errno, "sync: waiting for %s", sync_msg_name (expected));
  if (n == 0)
    return husk_error_make (err, 0, "container init exited before %s", sync_msg_name (expected));
  if ((size_t) n < sizeof header)
    return husk_error_make (err, EPROTO, "sync: short message while waiting for %s",
                            sync_msg_name (expected));
  memcpy (&header, buf, sizeof header);
  if (header.len != (size_t) n - sizeof header)
    return husk_error_make (err, EPROTO, "sync: truncated %s", sync_msg_name (header.type));
  buf[n] = '\0';
  if (header.type == SYNC_CHILD_ERROR)
    return husk_error_make (err, 0, "%s", buf + sizeof header);
  if (header.type != expected)
    return husk_error_make (err, EPROTO, "sync: got %s while waiting for %s", sync_msg_name (header.type),
                            sync_msg_name (expected));
  if (payload)
    *payload = xstrdup (buf + sizeof header);
  return 0;
}

void
sync_child_fail (int fd, struct husk_error *err)
{
  const char *msg = err && err->msg ? err->msg : "container init failed";

  if (sync_send (fd, SYNC_CHILD_ERROR, msg, strlen (msg), NULL) < 0)
    {
      /* Nobody is listening any more (e.g. after create returned): say it
       * on stderr, which is the container's. */
      (void) !write (2, msg, strlen (msg));
      (void) !write (2, "\n", 1);
    }
  _exit (1);
}
