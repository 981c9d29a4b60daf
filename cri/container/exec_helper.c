/* huskd's exec helper, huskd's side: `husk exec-helper` (runtime/exec_helper.c),
 * started at huskd's start with a control socket as its fd 3, forks
 * ExecSync's processes.  A fork of huskd itself copies the page tables and
 * ~500 mappings of a multithreaded daemon (gRPC's threads and ~90 libraries),
 * takes glibc's fork locks over every malloc arena, and the execve tears
 * that copy down again: most of an exec probe's CPU.  The helper's copy is
 * small.  The protocol is drawn in runtime/exec_helper.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cri/config/runtime_exec.h"
#include "cri/container/exec_helper.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/exec_helper.h"

static int helper_fd = -1; /* huskd's end of the control socket */

/* The helper answers one request at a time, and a spawn may hold it: a
 * child whose cwd or program sits on a hung filesystem holds it until its
 * 2 s timer, a container frozen between the helper's frozen check and the
 * child's cgroup join holds it until the thaw.  huskd counts the requests
 * the helper has not answered yet and when it last answered one; while one
 * has waited longer than STUCK_NS, new requests are declined and huskd
 * forks their processes itself, so one container cannot hold every pod's
 * probes.  Requests already sent wait for their answer. */
#define STUCK_NS (200 * 1000 * 1000LL)

static struct
{
  pthread_mutex_t lock;
  unsigned unanswered; /* requests sent, no STARTED or FAILED yet */
  int64_t since;       /* when the helper last answered, or its oldest request was sent */
  bool warned;         /* this stuck spell was logged */
} helper_load = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Counts a request in, or says no (false) while the helper is stuck. */
static bool
helper_take_request (void)
{
  int64_t now = husk_clock_ns (CLOCK_MONOTONIC);
  bool stuck;

  pthread_mutex_lock (&helper_load.lock);
  stuck = helper_load.unanswered > 0 && now - helper_load.since > STUCK_NS;
  if (!stuck)
    {
      if (helper_load.unanswered++ == 0)
        helper_load.since = now;
    }
  else if (!helper_load.warned)
    {
      helper_load.warned = true;
      husk_warn ("exec helper has answered nothing for %lld ms (%u requests waiting); huskd forks "
                 "ExecSync's processes itself until it does",
                 (long long) ((now - helper_load.since) / 1000000), helper_load.unanswered);
    }
  pthread_mutex_unlock (&helper_load.lock);
  return !stuck;
}

/* One request answered (or given up on). */
static void
helper_answered (void)
{
  bool was_stuck;

  pthread_mutex_lock (&helper_load.lock);
  helper_load.unanswered--;
  helper_load.since = husk_clock_ns (CLOCK_MONOTONIC);
  was_stuck = helper_load.warned;
  helper_load.warned = false;
  pthread_mutex_unlock (&helper_load.lock);
  if (was_stuck)
    husk_warn ("exec helper answers again");
}

/* In the forked child: the control socket as fd 3 and nothing else of
 * huskd's (no lock, no socket), then `husk exec-helper`. */
__attribute__ ((noreturn)) static void
exec_helper_child (const char *husk, int ctl)
{
  char *const argv[] = { (char *) husk, (char *) "exec-helper", NULL };
  sigset_t none;

  prctl (PR_SET_PDEATHSIG, SIGKILL);
  if (ctl == 3 ? fcntl (3, F_SETFD, 0) < 0 : dup2 (ctl, 3) < 0)
    _exit (127);
  syscall (SYS_close_range, 4U, ~0U, 0U);
  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  execv (husk, argv);
  _exit (127);
}

int
cri_exec_helper_start (struct husk_error **err)
{
  cleanup_free char *husk = cri_helper_path ("husk");
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
    exec_helper_child (husk, pair[1]);
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
      if (len + n > EXEC_HELPER_REQUEST_MAX)
        return 0;
      memcpy (buf + len, field, n);
      len += n;
    }
  return len;
}

static int
send_request (const char *payload, size_t len, const int fds[EXEC_HELPER_FDS])
{
  char control[CMSG_SPACE (EXEC_HELPER_FDS * sizeof (int))] = { 0 };
  struct iovec iov = { (void *) payload, len };
  struct msghdr msg
      = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control };
  struct cmsghdr *cmsg = CMSG_FIRSTHDR (&msg);
  ssize_t n;

  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN (EXEC_HELPER_FDS * sizeof (int));
  memcpy (CMSG_DATA (cmsg), fds, EXEC_HELPER_FDS * sizeof (int));
  do
    n = sendmsg (helper_fd, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == (ssize_t) len ? 0 : -1;
}

static int
recv_reply (int fd, struct exec_helper_reply *r)
{
  ssize_t n;

  memset (r, 0, sizeof *r);
  do
    n = recv (fd, r, sizeof *r - 1, 0);
  while (n < 0 && errno == EINTR);
  return n >= (ssize_t) offsetof (struct exec_helper_reply, msg) ? 0 : -1;
}

pid_t
cri_exec_helper_spawn (const char *root, const char *id, const char *pid_file, const char *const *args,
                       size_t n_args, const int stdio[3], int *reply_fd, struct husk_error **err)
{
  cleanup_free char *payload = NULL;
  struct exec_helper_reply r;
  int pair[2], received;
  size_t len;

  if (helper_fd < 0)
    return CRI_EXEC_HELPER_DECLINED;
  payload = xmalloc (EXEC_HELPER_REQUEST_MAX);
  if ((len = build_request (payload, root, id, pid_file, args, n_args)) == 0)
    return CRI_EXEC_HELPER_DECLINED;
  if (!helper_take_request ())
    return CRI_EXEC_HELPER_DECLINED; /* the helper is stuck: huskd forks */
  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
    {
      helper_answered ();
      return husk_error_make (err, errno, "exec helper: socketpair");
    }
  if (send_request (payload, len, (const int[EXEC_HELPER_FDS]){ stdio[0], stdio[1], stdio[2], pair[1] }) < 0)
    {
      helper_answered ();
      close (pair[0]), close (pair[1]);
      return CRI_EXEC_HELPER_DECLINED; /* the helper is gone: huskd forks */
    }
  close (pair[1]);
  received = recv_reply (pair[0], &r);
  helper_answered ();
  if (received < 0 || (r.kind != EXEC_HELPER_STARTED && r.kind != EXEC_HELPER_FAILED))
    {
      close (pair[0]);
      return husk_error_make (err, EPROTO, "exec helper: no answer");
    }
  if (r.kind == EXEC_HELPER_FAILED)
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
  struct exec_helper_reply r;

  if (recv_reply (reply_fd, &r) == 0 && r.kind == EXEC_HELPER_EXITED && r.pid == pid)
    *wait_status = r.wait_status;
  else
    {
      husk_warn ("exec helper gone before process %d exited; reported as killed", (int) pid);
      *wait_status = SIGKILL;
    }
  close (reply_fd);
}
