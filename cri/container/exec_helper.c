/* huskd's exec helper: a small single-threaded process forked from huskd
 * at start, before any thread, that forks ExecSync's processes for it.
 * A fork of huskd itself copies the page tables of a multithreaded daemon
 * (gRPC's threads and arenas), takes glibc's fork locks over every malloc
 * arena, and its execve tears that copy down again: most of an exec
 * probe's CPU.  The helper's copy is small.
 *
 *   huskd thread                        helper
 *   ------------                        ------
 *   socketpair REPLY
 *   REQUEST(root, id, pid file, args)
 *     + fds stdin, stdout, stderr, REPLY ─►  plan (exec_plans.c), fork,
 *                                            pid file
 *                                   ◄─ STARTED(pid) | FAILED(errno, msg)
 *   reads stdout/stderr, deadline,
 *   kills pid at the deadline                 SIGCHLD: waitpid
 *                                   ◄─ EXITED(wait status), REPLY closed
 *
 * The helper exits when huskd's end of the control socket closes; the
 * processes it started then run on, and their pid files let the next
 * huskd kill them, as before. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cri/container/exec_helper.h"
#include "cri/container/exec_plans.h"
#include "husk/cleanup.h"
#include "husk/util.h"

/* A request larger than this (a huge command line) takes huskd's own fork. */
#define REQUEST_MAX (64 * 1024)
#define REQUEST_FDS 4

enum helper_reply_kind
{
  HELPER_STARTED = 1,
  HELPER_FAILED,
  HELPER_EXITED,
};

struct helper_reply
{
  int32_t kind;
  int32_t pid;
  int32_t wait_status;
  int32_t errnum;
  char msg[1024];
};

static int helper_fd = -1; /* huskd's end of the control socket */

/* ------------------------------------------------------------------ */
/* The helper process                                                   */

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
  struct helper_reply r = { .kind = kind, .pid = pid, .wait_status = wait_status };

  if (err)
    {
      r.errnum = err->errnum;
      snprintf (r.msg, sizeof r.msg, "%s", err->msg ? err->msg : "exec failed");
    }
  (void) !send (fd, &r, offsetof (struct helper_reply, msg) + strlen (r.msg) + 1, MSG_NOSIGNAL);
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
  char *fields[REQUEST_MAX / 2 + 2];
  size_t n = split_fields (payload, len, fields, sizeof fields / sizeof fields[0]);
  struct husk_error *err = NULL;
  struct plan_entry *e = NULL;
  pid_t pid = -1;

  if (n < 4)
    husk_error_make (&err, EPROTO, "exec helper: malformed request");
  else if ((e = cri_exec_plan_get (fields[0], fields[1], &err)) == NULL)
    ;
  else if (!cri_exec_plan_spawnable (e))
    husk_error_kind (&err, ENOTSUP, "container %s needs `husk exec`", fields[1]);
  else
    pid = cri_exec_plan_spawn (e, fields + 3, fds, *fields[2] ? fields[2] : NULL, &err);
  if (e)
    cri_exec_plan_release (e);
  if (pid < 0)
    {
      send_reply (fds[3], HELPER_FAILED, 0, 0, err);
      close (fds[3]);
      husk_error_free (&err);
      return;
    }
  send_reply (fds[3], HELPER_STARTED, pid, 0, NULL);
  h->running = xrealloc (h->running, (h->n_running + 1) * sizeof *h->running);
  h->running[h->n_running++] = (struct running){ .pid = pid, .reply_fd = fds[3] };
}

/* One request from the control socket; false when huskd is gone. */
static bool
read_request (struct helper *h)
{
  static char payload[REQUEST_MAX + 1];
  char control[CMSG_SPACE (REQUEST_FDS * sizeof (int))];
  struct iovec iov = { payload, REQUEST_MAX };
  struct msghdr msg
      = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control };
  struct cmsghdr *cmsg;
  int fds[REQUEST_FDS];
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
            if (n_fds < REQUEST_FDS)
              fds[n_fds++] = fd;
            else
              close (fd);
          }
      }
  if (n_fds == REQUEST_FDS && !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
    {
      payload[n] = '\0';
      serve_request (h, payload, (size_t) n, fds);
      n_fds = REQUEST_FDS - 1; /* the reply fd is kept (or closed) by serve_request */
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
          send_reply (h->running[i].reply_fd, HELPER_EXITED, pid, wait_status, NULL);
          close (h->running[i].reply_fd);
          h->running[i] = h->running[--h->n_running];
          break;
        }
}

__attribute__ ((noreturn)) static void
helper_main (int ctl)
{
  struct helper h = { .ctl = ctl };
  sigset_t chld;
  int sfd;

  prctl (PR_SET_NAME, "huskd-exec");
  prctl (PR_SET_PDEATHSIG, SIGKILL);
  /* Only the control socket, stdio and (below) the signalfd: no lock or
   * socket of huskd's stays open here. */
  if (ctl != 3)
    {
      dup2 (ctl, 3);
      h.ctl = ctl = 3;
    }
  syscall (SYS_close_range, 4U, ~0U, 0U);
  sigemptyset (&chld);
  sigaddset (&chld, SIGCHLD);
  sigprocmask (SIG_SETMASK, &chld, NULL);
  sfd = signalfd (-1, &chld, SFD_CLOEXEC);
  if (sfd < 0 || getppid () == 1)
    _exit (1);
  for (;;)
    {
      struct pollfd fds[2] = { { ctl, POLLIN, 0 }, { sfd, POLLIN, 0 } };
      struct signalfd_siginfo info;

      if (poll (fds, 2, -1) < 0 && errno != EINTR)
        _exit (1);
      if (fds[1].revents && read (sfd, &info, sizeof info) > 0)
        reap_children (&h);
      if (fds[0].revents && !read_request (&h))
        _exit (0);
    }
}

int
cri_exec_helper_start (struct husk_error **err)
{
  int pair[2];
  pid_t pid;

  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
    return husk_error_make (err, errno, "exec helper: socketpair");
  pid = fork ();
  if (pid < 0)
    {
      close (pair[0]), close (pair[1]);
      return husk_error_make (err, errno, "exec helper: fork");
    }
  if (pid == 0)
    {
      close (pair[0]);
      helper_main (pair[1]);
    }
  close (pair[1]);
  helper_fd = pair[0];
  return 0;
}

/* ------------------------------------------------------------------ */
/* huskd's side                                                         */

static size_t
build_request (char *buf, const char *root, const char *id, const char *pid_file, const char *const *args,
               size_t n_args)
{
  const char *head[3] = { root, id, pid_file ? pid_file : "" };
  size_t len = 0;

  for (size_t i = 0; i < 3 + n_args; i++)
    {
      const char *field = i < 3 ? head[i] : args[i - 3];
      size_t n = strlen (field) + 1;
      if (len + n > REQUEST_MAX)
        return 0;
      memcpy (buf + len, field, n);
      len += n;
    }
  return len;
}

static int
send_request (const char *payload, size_t len, const int fds[REQUEST_FDS])
{
  char control[CMSG_SPACE (REQUEST_FDS * sizeof (int))] = { 0 };
  struct iovec iov = { (void *) payload, len };
  struct msghdr msg
      = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control };
  struct cmsghdr *cmsg = CMSG_FIRSTHDR (&msg);
  ssize_t n;

  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN (REQUEST_FDS * sizeof (int));
  memcpy (CMSG_DATA (cmsg), fds, REQUEST_FDS * sizeof (int));
  do
    n = sendmsg (helper_fd, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == (ssize_t) len ? 0 : -1;
}

static int
recv_reply (int fd, struct helper_reply *r)
{
  ssize_t n;

  memset (r, 0, sizeof *r);
  do
    n = recv (fd, r, sizeof *r - 1, 0);
  while (n < 0 && errno == EINTR);
  return n >= (ssize_t) offsetof (struct helper_reply, msg) ? 0 : -1;
}

pid_t
cri_exec_helper_spawn (const char *root, const char *id, const char *pid_file, const char *const *args,
                       size_t n_args, const int stdio[3], int *reply_fd, struct husk_error **err)
{
  cleanup_free char *payload = NULL;
  struct helper_reply r;
  int pair[2];
  size_t len;

  if (helper_fd < 0)
    return CRI_EXEC_HELPER_DECLINED;
  payload = xmalloc (REQUEST_MAX);
  if ((len = build_request (payload, root, id, pid_file, args, n_args)) == 0)
    return CRI_EXEC_HELPER_DECLINED;
  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
    return husk_error_make (err, errno, "exec helper: socketpair");
  if (send_request (payload, len, (const int[REQUEST_FDS]){ stdio[0], stdio[1], stdio[2], pair[1] }) < 0)
    {
      close (pair[0]), close (pair[1]);
      return CRI_EXEC_HELPER_DECLINED; /* the helper is gone: huskd forks */
    }
  close (pair[1]);
  if (recv_reply (pair[0], &r) < 0 || (r.kind != HELPER_STARTED && r.kind != HELPER_FAILED))
    {
      close (pair[0]);
      return husk_error_make (err, EPROTO, "exec helper: no answer");
    }
  if (r.kind == HELPER_FAILED)
    {
      close (pair[0]);
      if (r.errnum == ENOTSUP)
        return CRI_EXEC_HELPER_DECLINED;
      return husk_error_kind (err, r.errnum, "%s", r.msg);
    }
  *reply_fd = pair[0];
  return r.pid;
}

void
cri_exec_helper_wait (int reply_fd, pid_t pid, int *wait_status)
{
  struct helper_reply r;

  if (recv_reply (reply_fd, &r) == 0 && r.kind == HELPER_EXITED && r.pid == pid)
    *wait_status = r.wait_status;
  else
    {
      husk_warn ("exec helper gone before process %d exited; reported as killed", (int) pid);
      *wait_status = SIGKILL;
    }
  close (reply_fd);
}
