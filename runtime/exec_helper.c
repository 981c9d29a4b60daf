/* `husk exec-helper`: the server side of huskd's exec helper, a small
 * single-threaded husk (five libraries, ~40 mappings, where huskd has ~90
 * libraries and ~500) that forks ExecSync's processes for huskd from the
 * kept exec plans (exec_plans.c).  The protocol is drawn in exec_helper.h. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/exec_helper.h"
#include "runtime/exec_plans.h"

/* ------------------------------------------------------------------ */
/* The helper                                                   */

struct running
{
  pid_t pid;
  int reply_fd;
};

struct helper
{
  int ctl;
  struct running *running;
  size_t n_running;
};

static void
send_reply (int fd, int kind, pid_t pid, int wait_status, const struct husk_error *err)
{
  struct exec_helper_reply r = { .kind = kind, .pid = pid, .wait_status = wait_status };

  if (err)
    {
      r.errnum = err->errnum;
      snprintf (r.msg, sizeof r.msg, "%s", err->msg ? err->msg : "exec failed");
    }
  (void) !send (fd, &r, offsetof (struct exec_helper_reply, msg) + strlen (r.msg) + 1, MSG_NOSIGNAL);
}

/* Splits PAYLOAD (root, id, pid file, args..., each NUL-terminated) into
 * FIELDS (NULL-terminated); the number of fields. */
static size_t
split_fields (char *payload, size_t len, char **fields, size_t max)
{
  size_t n = 0;

  for (size_t at = 0; at < len && n + 1 < max; at += strlen (payload + at) + 1)
    fields[n++] = payload + at;
  fields[n] = NULL;
  return n;
}

static void
serve_request (struct helper *h, char *payload, size_t len, const int *fds)
{
  char *fields[EXEC_HELPER_REQUEST_MAX / 2 + 2];
  size_t n = split_fields (payload, len, fields, sizeof fields / sizeof fields[0]);
  struct husk_error *err = NULL;
  struct exec_plan_ref *e = NULL;
  pid_t pid = -1;

  if (n < 4)
    husk_error_make (&err, EPROTO, "exec helper: malformed request");
  else if ((e = exec_plans_get (fields[0], fields[1], &err)) == NULL)
    ;
  else if (!exec_plans_spawnable (e))
    husk_error_kind (&err, ENOTSUP, "container %s needs `husk exec`", fields[1]);
  else
    pid = exec_plans_spawn (e, fields + 3, fds, *fields[2] ? fields[2] : NULL, &err);
  if (e)
    exec_plans_release (e);
  if (pid < 0)
    {
      send_reply (fds[3], EXEC_HELPER_FAILED, 0, 0, err);
      close (fds[3]);
      husk_error_free (&err);
      return;
    }
  send_reply (fds[3], EXEC_HELPER_STARTED, pid, 0, NULL);
  h->running = xrealloc (h->running, (h->n_running + 1) * sizeof *h->running);
  h->running[h->n_running++] = (struct running){ .pid = pid, .reply_fd = fds[3] };
}

/* One request from the control socket; false when huskd is gone. */
static bool
read_request (struct helper *h)
{
  static char payload[EXEC_HELPER_REQUEST_MAX + 1];
  char control[CMSG_SPACE (EXEC_HELPER_FDS * sizeof (int))];
  struct iovec iov = { payload, EXEC_HELPER_REQUEST_MAX };
  struct msghdr msg
      = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control };
  struct cmsghdr *cmsg;
  int fds[EXEC_HELPER_FDS];
  size_t n_fds = 0;
  ssize_t n = recvmsg (h->ctl, &msg, MSG_CMSG_CLOEXEC);

  if (n < 0)
    return errno == EINTR || errno == EAGAIN;
  if (n == 0)
    return false;
  for (cmsg = CMSG_FIRSTHDR (&msg); cmsg; cmsg = CMSG_NXTHDR (&msg, cmsg))
    if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS)
      {
        size_t got = (cmsg->cmsg_len - CMSG_LEN (0)) / sizeof (int);
        for (size_t i = 0; i < got; i++)
          {
            int fd;
            memcpy (&fd, CMSG_DATA (cmsg) + i * sizeof fd, sizeof fd);
            if (n_fds < EXEC_HELPER_FDS)
              fds[n_fds++] = fd;
            else
              close (fd);
          }
      }
  if (n_fds == EXEC_HELPER_FDS && !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
    {
      payload[n] = '\0';
      serve_request (h, payload, (size_t) n, fds);
      n_fds = EXEC_HELPER_FDS - 1; /* the reply fd is kept (or closed) by serve_request */
    }
  for (size_t i = 0; i < n_fds; i++)
    close (fds[i]);
  return true;
}

static void
reap_children (struct helper *h)
{
  int wait_status;
  pid_t pid;

  while ((pid = waitpid (-1, &wait_status, WNOHANG)) > 0)
    for (size_t i = 0; i < h->n_running; i++)
      if (h->running[i].pid == pid)
        {
          send_reply (h->running[i].reply_fd, EXEC_HELPER_EXITED, pid, wait_status, NULL);
          close (h->running[i].reply_fd);
          h->running[i] = h->running[--h->n_running];
          break;
        }
}

int
exec_helper_serve (int ctl, struct husk_error **err)
{
  struct helper h = { .ctl = ctl };
  cleanup_close int sfd = -1;
  sigset_t chld;

  sigemptyset (&chld);
  sigaddset (&chld, SIGCHLD);
  sigprocmask (SIG_SETMASK, &chld, NULL);
  sfd = signalfd (-1, &chld, SFD_CLOEXEC);
  if (sfd < 0)
    return husk_error_make (err, errno, "exec-helper: signalfd");
  for (;;)
    {
      struct pollfd fds[2] = { { ctl, POLLIN, 0 }, { sfd, POLLIN, 0 } };
      struct signalfd_siginfo info;

      if (poll (fds, 2, -1) < 0 && errno != EINTR)
        return husk_error_make (err, errno, "exec-helper: poll");
      if (fds[1].revents && read (sfd, &info, sizeof info) > 0)
        reap_children (&h);
      if (fds[0].revents && !read_request (&h))
        return 0;
    }
}
