/* Binding and connecting unix sockets whose path may be longer than
 * sun_path (include/husk/unix_socket.h). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/unix_socket.h"
#include "husk/util.h"

/* Fills ADDR for PATH; a long one goes through *DIR_FD, an O_PATH fd of
 * its folder that the caller closes once bind or connect is done. */
static int
fill_address (const char *path, struct sockaddr_un *addr, int *dir_fd, struct husk_error **err)
{
  cleanup_free char *dir_copy = xstrdup (path);
  cleanup_free char *base_copy = xstrdup (path);
  const char *base;
  int n;

  addr->sun_family = AF_UNIX;
  if (strlen (path) < sizeof addr->sun_path)
    {
      strcpy (addr->sun_path, path);
      return 0;
    }
  base = basename (base_copy);
  *dir_fd = open (dirname (dir_copy), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (*dir_fd < 0)
    return husk_error_make (err, errno, "unix socket `%s`: open its folder", path);
  n = snprintf (addr->sun_path, sizeof addr->sun_path, "/proc/self/fd/%d/%s", *dir_fd, base);
  if (n < 0 || (size_t) n >= sizeof addr->sun_path)
    return husk_error_make (err, ENAMETOOLONG, "unix socket `%s`: name `%s`", path, base);
  return 0;
}

static int
remove_stale_socket (const char *path, struct husk_error **err)
{
  struct stat st;

  if (lstat (path, &st) < 0)
    return errno == ENOENT ? 0 : husk_error_make (err, errno, "unix socket `%s`: stat", path);
  if (!S_ISSOCK (st.st_mode))
    return husk_error_make (err, EEXIST, "unix socket `%s`: a file that is not a socket is there", path);
  if (unlink (path) < 0)
    return husk_error_make (err, errno, "unix socket `%s`: remove the old one", path);
  return 0;
}

int
husk_unix_listen (const char *path, int type, unsigned mode, struct husk_error **err)
{
  struct sockaddr_un addr;
  cleanup_close int dir_fd = -1;
  cleanup_close int fd = -1;
  mode_t old_umask;
  int ret;

  if (fill_address (path, &addr, &dir_fd, err) < 0 || remove_stale_socket (path, err) < 0)
    return -1;
  fd = socket (AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return husk_error_make (err, errno, "unix socket `%s`: socket", path);
  /* Born with MODE: no moment where others may connect. */
  old_umask = umask (~mode & 0777);
  ret = bind (fd, (struct sockaddr *) &addr, sizeof addr);
  umask (old_umask);
  if (ret < 0)
    return husk_error_make (err, errno, "bind unix socket `%s`", path);
  if (listen (fd, 64) < 0)
    {
      int saved = errno;
      unlink (path);
      return husk_error_make (err, saved, "listen on unix socket `%s`", path);
    }
  return steal_fd (&fd);
}

int
husk_unix_connect (const char *path, int type, struct husk_error **err)
{
  struct sockaddr_un addr;
  cleanup_close int dir_fd = -1;
  cleanup_close int fd = -1;

  if (fill_address (path, &addr, &dir_fd, err) < 0)
    return -1;
  fd = socket (AF_UNIX, type | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return husk_error_make (err, errno, "unix socket `%s`: socket", path);
  if (connect (fd, (struct sockaddr *) &addr, sizeof addr) < 0)
    return husk_error_make (err, errno, "connect to unix socket `%s`", path);
  return steal_fd (&fd);
}

int
husk_unix_send_fd (int sock, int fd, const void *data, size_t len)
{
  union
  {
    char buf[CMSG_SPACE (sizeof (int))];
    struct cmsghdr align;
  } control = { 0 };
  struct iovec iov = { .iov_base = (void *) data, .iov_len = len };
  struct msghdr msg = {
    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf
  };
  struct cmsghdr *cmsg = CMSG_FIRSTHDR (&msg);

  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN (sizeof (int));
  memcpy (CMSG_DATA (cmsg), &fd, sizeof (int));
  return sendmsg (sock, &msg, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

int
husk_unix_recv_fd (int sock, void *data, size_t len, ssize_t *got)
{
  union
  {
    char buf[CMSG_SPACE (sizeof (int))];
    struct cmsghdr align;
  } control = { 0 };
  struct iovec iov = { .iov_base = data, .iov_len = len };
  struct msghdr msg = {
    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf
  };
  struct cmsghdr *cmsg;
  ssize_t n;
  int fd;

  do
    n = recvmsg (sock, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (got)
    *got = n;
  if (n < 0)
    return -1;
  cmsg = CMSG_FIRSTHDR (&msg);
  if (cmsg == NULL || cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS
      || cmsg->cmsg_len != CMSG_LEN (sizeof (int)))
    {
      errno = EPROTO;
      return -1;
    }
  memcpy (&fd, CMSG_DATA (cmsg), sizeof fd);
  return fd;
}
