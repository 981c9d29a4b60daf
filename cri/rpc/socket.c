/* The socket file of rpc_server: its directory, a stale file left by a
 * crash (replaced), a live server on the same path (refused: gRPC would
 * silently unlink its socket and steal the path), and the file mode. */
#include <errno.h>
#include <libgen.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cri/rpc/internal.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define RPC_SOCKET_MODE 0660
#define RPC_SOCKET_DIR_MODE 0755

/* 0 when nothing listens on `path`, 1 when something answers, -1 on error. */
static int
socket_answers (const char *path, struct husk_error **err)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  cleanup_close int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  if (fd < 0)
    return husk_error_make (err, errno, "create a socket to probe `%s`", path);
  strcpy (addr.sun_path, path);
  if (connect (fd, (struct sockaddr *) &addr, sizeof addr) == 0)
    return 1;
  if (errno == ECONNREFUSED || errno == ENOENT)
    return 0;
  return husk_error_make (err, errno, "probe the socket `%s`", path);
}

int
rpc_socket_prepare (const char *path, struct husk_error **err)
{
  cleanup_free char *dir = xstrdup (path);
  struct stat st;
  int answers;

  if (path[0] != '/')
    return husk_error_make (err, 0, "socket path `%s` is not absolute", path);
  if (strlen (path) >= sizeof ((struct sockaddr_un *) NULL)->sun_path)
    return husk_error_make (err, 0, "socket path `%s` is longer than %zu bytes", path,
                            sizeof ((struct sockaddr_un *) NULL)->sun_path - 1);
  if (husk_mkdir_p (dirname (dir), RPC_SOCKET_DIR_MODE, err) < 0)
    return husk_error_wrap (err, "create the directory of the socket `%s`", path);
  if (lstat (path, &st) < 0)
    {
      if (errno == ENOENT)
        return 0;
      return husk_error_make (err, errno, "stat `%s`", path);
    }
  if (!S_ISSOCK (st.st_mode))
    return husk_error_make (err, 0, "`%s` exists and is not a socket: refusing to replace it", path);
  answers = socket_answers (path, err);
  if (answers < 0)
    return -1;
  if (answers > 0)
    return husk_error_make (err, 0, "another server is listening on `%s`", path);
  husk_log (HUSK_LOG_INFO, "replacing the stale socket `%s`", path);
  if (unlink (path) < 0 && errno != ENOENT)
    return husk_error_make (err, errno, "remove the stale socket `%s`", path);
  return 0;
}

int
rpc_socket_set_mode (const char *path, struct husk_error **err)
{
  if (chmod (path, RPC_SOCKET_MODE) < 0)
    return husk_error_make (err, errno, "chmod %o `%s`", RPC_SOCKET_MODE, path);
  return 0;
}
