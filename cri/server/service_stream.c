/* Exec, Attach and PortForward: the RPCs check the request and return a
 * URL on the streaming server (cri/streaming/server.h); its callbacks
 * here say what a session does: `RUNTIME exec` with the session's pipes
 * (or a pty from --console-socket), the monitor's attach socket, or a
 * connection to a port inside the pod's network namespace. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cri/container/attach.h"
#include "cri/container/container_store.h"
#include "cri/config/runtime_exec.h"
#include "cri/pod/sandbox.h"
#include "cri/server/service.h"
#include "cri/config/runtime_probe.h"
#include "cri/streaming/server.h"
#include "husk/cleanup.h"
#include "husk/unix_socket.h"
#include "husk/util.h"

#define CONSOLE_WAIT_MS 10000

/* What a URL stands for, until its session ends. */
struct stream_target
{
  struct cri_service *svc;
  char *container_id;
  char **cmd;       /* exec */
  char *netns_path; /* port forward; NULL: the host's network */
  char *sandbox_id;
};

static void
free_target (void *data)
{
  struct stream_target *t = data;

  if (t == NULL)
    return;
  free (t->container_id);
  husk_strvfreep (&t->cmd);
  free (t->netns_path);
  free (t->sandbox_id);
  free (t);
}

/* ------------------------------------------------------------------ */
/* Exec                                                                 */

struct exec_child
{
  pid_t pid;
  int pidfd;
  char *pid_file;
  char *console_path; /* tty: the socket husk exec sends the master to */
  int console_fd;
  struct streaming_resize first_size; /* the client's, when it came at once */
  bool has_first_size;
};

static void
exec_child_clear (struct exec_child *x)
{
  if (x->pidfd >= 0)
    close (x->pidfd);
  if (x->console_fd >= 0)
    close (x->console_fd);
  if (x->pid_file)
    unlink (x->pid_file);
  if (x->console_path)
    unlink (x->console_path);
  free (x->pid_file);
  free (x->console_path);
}

/* The pid in PID_FILE, or -1; async-signal-safe. */
static pid_t
read_pid_file (const char *pid_file)
{
  char text[32];
  int fd = open (pid_file, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : read (fd, text, sizeof text - 1);
  long pid = 0;

  if (fd >= 0)
    close (fd);
  for (ssize_t i = 0; i < n && text[i] >= '0' && text[i] <= '9' && pid < INT32_MAX / 10; i++)
    pid = pid * 10 + (text[i] - '0');
  return pid > 1 ? (pid_t) pid : -1;
}

/* runc and crun take --console-socket only with --detach: the runtime
 * starts the process and exits, and the process is orphaned.  As conmon
 * and containerd's shim do, this child becomes a subreaper, so the orphan
 * comes to it; it waits for it and exits with its status, which is then
 * what the exec's caller sees of this child.  Async-signal-safe only. */
static void __attribute__ ((noreturn)) exec_detached_and_reap (char *const *argv, const char *pid_file)
{
  int status = 0;
  pid_t runtime, process;

  prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  runtime = fork ();
  if (runtime == 0)
    {
      execv (argv[0], argv);
      _exit (127);
    }
  while (runtime > 0 && waitpid (runtime, &status, 0) < 0 && errno == EINTR)
    ;
  if (runtime < 0 || !WIFEXITED (status) || WEXITSTATUS (status) != 0
      || (process = read_pid_file (pid_file)) < 0)
    _exit (runtime < 0 ? 127 : WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status));
  while (waitpid (process, &status, 0) < 0)
    if (errno != EINTR)
      _exit (255); /* not ours after all (a pid namespace in between) */
  _exit (WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status));
}

/* Only async-signal-safe calls: huskd has other threads. */
static void __attribute__ ((noreturn))
exec_child_main (char *const *argv, const struct streaming_io *io, int null_fd, const char *reap_pid_file)
{
  sigset_t none;

  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  setpgid (0, 0);
  dup2 (io->tty || io->stdin_fd < 0 ? null_fd : io->stdin_fd, 0);
  dup2 (io->tty || io->stdout_fd < 0 ? null_fd : io->stdout_fd, 1);
  dup2 (io->tty || io->stderr_fd < 0 ? null_fd : io->stderr_fd, 2);
  if (reap_pid_file)
    exec_detached_and_reap (argv, reap_pid_file);
  execv (argv[0], argv);
  _exit (127);
}

static int
listen_console (struct exec_child *x, struct husk_error **err)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };

  if (strlen (x->console_path) >= sizeof addr.sun_path)
    return husk_error_make (err, ENAMETOOLONG, "console socket %s", x->console_path);
  strcpy (addr.sun_path, x->console_path);
  unlink (x->console_path);
  x->console_fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (x->console_fd < 0 || bind (x->console_fd, (struct sockaddr *) &addr, sizeof addr) < 0
      || listen (x->console_fd, 1) < 0)
    return husk_error_make (err, errno, "console socket %s", x->console_path);
  return 0;
}

/* The client's first terminal size, when it comes within FIRST_SIZE_WAIT_MS
 * (kubelet's and crictl's clients send it as soon as the streams are up):
 * the runtime sizes the pty before the process starts, so that a command
 * that asks at once (stty size, a shell's first prompt) sees it rather than
 * 0x0.  False when no size came. */
#define FIRST_SIZE_WAIT_MS 100

static bool
first_size (const struct streaming_io *io, struct streaming_resize *size)
{
  struct pollfd p = { .fd = io->resize_fd, .events = POLLIN };

  if (io->resize_fd < 0 || poll (&p, 1, FIRST_SIZE_WAIT_MS) <= 0 || !(p.revents & POLLIN))
    return false;
  return read (io->resize_fd, size, sizeof *size) == (ssize_t) sizeof *size && size->width && size->height;
}

static int
spawn_exec (struct cri_service *svc, const struct cri_container *c, const struct stream_target *t,
            const struct streaming_io *io, struct exec_child *x, struct husk_error **err)
{
  static atomic_uint serial;
  const struct huskd_runtime *rt = cri_runtime_for (svc->cfg, c->runtime_handler, err);
  unsigned n_serial = atomic_fetch_add (&serial, 1);
  cleanup_free const char **argv = NULL;
  cleanup_close int null_fd = open ("/dev/null", O_RDWR | O_CLOEXEC);
  char size_arg[32];
  size_t n = 0;

  if (rt == NULL)
    return -1;
  x->pid_file = xasprintf ("%s/exec-%.12s-s%u.pid", svc->cfg->state, c->id, n_serial);
  if (io->tty)
    {
      x->console_path = xasprintf ("%s/exec-%.12s-s%u.sock", svc->cfg->state, c->id, n_serial);
      if (listen_console (x, err) < 0)
        return -1;
    }
  argv = cri_runtime_argv (rt, (const char *[]){ "exec", NULL }, husk_strv_len (t->cmd) + 13);
  n = 4 + husk_strv_len (rt->args);
  argv[n++] = "--pid-file", argv[n++] = x->pid_file;
  cri_runtime_probe_wait (); /* for rt->console_size */
  if (io->tty)
    argv[n++] = "--tty", argv[n++] = "--console-socket", argv[n++] = x->console_path, argv[n++] = "--env",
    argv[n++] = "TERM=xterm";
  /* husk keeps a console exec in the foreground; the others must detach. */
  if (io->tty && !rt->console_size)
    argv[n++] = "--detach";
  x->has_first_size = io->tty && first_size (io, &x->first_size);
  /* husk's extension (its features say so); for runc and crun the size
   * goes on the pty master once it comes (receive_master). */
  if (x->has_first_size && rt->console_size)
    {
      snprintf (size_arg, sizeof size_arg, "%ux%u", (unsigned) x->first_size.height,
                (unsigned) x->first_size.width);
      argv[n++] = "--console-size", argv[n++] = size_arg;
    }
  argv[n++] = c->id;
  for (size_t i = 0; t->cmd[i]; i++)
    argv[n++] = t->cmd[i];
  x->pid = fork ();
  if (x->pid < 0)
    return husk_error_make (err, errno, "fork `%s exec`", rt->path);
  if (x->pid == 0)
    exec_child_main ((char *const *) argv, io, null_fd, io->tty && !rt->console_size ? x->pid_file : NULL);
  x->pidfd = (int) syscall (SYS_pidfd_open, x->pid, 0);
  return 0;
}

/* Kills what the exec runs (its pid file's process, then the runtime's
 * process group) and reaps it. */
static void
kill_exec (struct exec_child *x)
{
  cleanup_free char *text = NULL;
  struct husk_error *ignored = NULL;
  long long pid;

  if (husk_read_file (x->pid_file, &text, NULL, &ignored) == 0)
    {
      text[strcspn (text, "\n")] = '\0';
      if (husk_parse_int64 (text, 2, INT32_MAX, &pid) == 0)
        kill ((pid_t) pid, SIGKILL);
    }
  husk_error_free (&ignored);
  kill (-x->pid, SIGKILL);
  kill (x->pid, SIGKILL);
}

static int
reap_exec (struct exec_child *x)
{
  int status = 0;

  while (waitpid (x->pid, &status, 0) < 0 && errno == EINTR)
    ;
  return cri_child_exit_code (status);
}

/* Waits for the runtime to exit, or the client to go. */
static int
wait_plain (struct exec_child *x, const struct streaming_io *io)
{
  struct pollfd p[2] = { { .fd = x->pidfd, .events = POLLIN }, { .fd = io->cancel_fd, .events = POLLIN } };

  while (poll (p, 2, -1) < 0 && errno == EINTR)
    ;
  if (p[1].revents)
    kill_exec (x);
  return reap_exec (x);
}

static int
receive_master (struct exec_child *x, const struct streaming_io *io, struct husk_error **err)
{
  struct pollfd p[3] = { { .fd = x->console_fd, .events = POLLIN },
                         { .fd = x->pidfd, .events = POLLIN },
                         { .fd = io->cancel_fd, .events = POLLIN } };
  char name[256];
  cleanup_close int conn = -1;
  int master;

  if (poll (p, 3, CONSOLE_WAIT_MS) <= 0 || !p[0].revents)
    return husk_error_make (err, 0, "exec --tty: the runtime sent no pty");
  conn = accept4 (x->console_fd, NULL, NULL, SOCK_CLOEXEC);
  if (conn < 0)
    return husk_error_make (err, errno, "exec --tty: receive the pty master");
  master = husk_unix_recv_fd (conn, name, sizeof name, NULL);
  if (master < 0 && errno == EPROTO)
    return husk_error_make (err, 0, "exec --tty: the runtime sent no pty master");
  if (master < 0)
    return husk_error_make (err, errno, "exec --tty: receive the pty master");
  /* A runtime without --console-size (runc, crun): size the pty now. */
  if (x->has_first_size)
    {
      struct winsize ws = { .ws_row = x->first_size.height, .ws_col = x->first_size.width };
      ioctl (master, TIOCSWINSZ, &ws);
    }
  return master;
}

static void
apply_resizes (int resize_fd, int master)
{
  struct streaming_resize size;

  if (read (resize_fd, &size, sizeof size) == (ssize_t) sizeof size && master >= 0)
    {
      struct winsize ws = { .ws_row = size.height, .ws_col = size.width };
      ioctl (master, TIOCSWINSZ, &ws);
    }
}

/* Copies FROM to TO once; false at EOF or an error of FROM. */
static bool
copy_once (int from, int to)
{
  char buf[32768];
  ssize_t n = read (from, buf, sizeof buf);

  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return true;
  if (n <= 0)
    return false;
  if (to >= 0)
    (void) husk_write_all (to, buf, (size_t) n);
  return true;
}

/* The pty between the client and the process until the process has
 * ended and its output drained (EIO on the master). */
static int
pump_tty (struct exec_child *x, const struct streaming_io *io, int master)
{
  int in_fd = io->stdin_fd, exit_code = -1;
  bool cancelled = false;

  fcntl (master, F_SETFL, fcntl (master, F_GETFL) & ~O_NONBLOCK);
  for (;;)
    {
      struct pollfd p[5] = {
        { .fd = master, .events = POLLIN },
        { .fd = in_fd, .events = POLLIN },
        { .fd = io->resize_fd, .events = POLLIN },
        { .fd = io->cancel_fd, .events = POLLIN },
        { .fd = exit_code < 0 ? x->pidfd : -1, .events = POLLIN },
      };
      if (poll (p, 5, exit_code >= 0 ? 500 : -1) == 0)
        break; /* exited, and the pty has nothing more */
      if (p[3].revents)
        {
          cancelled = true;
          break;
        }
      if (p[2].revents)
        apply_resizes (io->resize_fd, master);
      if (p[1].revents && !copy_once (in_fd, master))
        {
          /* The client closed stdin: the terminal's EOF, as the monitor does. */
          (void) husk_write_all (master, "\x04", 1);
          in_fd = -1;
        }
      if (p[0].revents && !copy_once (master, io->stdout_fd))
        break;
      if (p[4].revents)
        exit_code = reap_exec (x);
    }
  if (exit_code < 0)
    {
      if (cancelled)
        kill_exec (x);
      exit_code = reap_exec (x);
    }
  return exit_code;
}

static int
run_exec (struct cri_service *svc, const struct stream_target *t, const struct streaming_io *io,
          struct husk_error **err)
{
  struct exec_child x = { .pidfd = -1, .console_fd = -1 };
  struct cri_container *c = NULL;
  int ret = -1;

  if (container_lookup (svc->containers, t->container_id, &c, err) < 0)
    return -1;
  if (c->state != CRI_CONTAINER_RUNNING)
    ret = husk_error_kind (err, EAGAIN, "container %s is not running", c->id);
  else if (spawn_exec (svc, c, t, io, &x, err) < 0)
    ret = -1;
  else if (!io->tty)
    ret = wait_plain (&x, io);
  else
    {
      int master = receive_master (&x, io, err);
      if (master < 0)
        {
          kill_exec (&x);
          reap_exec (&x);
        }
      else
        {
          ret = pump_tty (&x, io, master);
          close (master);
        }
    }
  exec_child_clear (&x);
  cri_container_free (c);
  return ret;
}

/* ------------------------------------------------------------------ */
/* Attach                                                               */

/* One message of the monitor to the client's streams: false once the
 * attach is over (*EXIT_CODE set when the container exited, *ERR when the
 * monitor dropped this client or went away: the client did not get all
 * the output, and must not take the end for a success). */
static bool
attach_output (int fd, const struct streaming_io *io, int *exit_code, struct husk_error **err)
{
  char buf[2 + ATTACH_DATA_MAX];
  ssize_t n = cri_attach_receive (fd, buf, sizeof buf - 1);
  int to;

  if (n < 0 && errno == EINTR)
    return true;
  if (n <= 0)
    {
      husk_error_make (err, n < 0 ? errno : 0,
                       "attach: the container's monitor ended the connection before the container exited"
                       " (this client fell behind its output, or the monitor is gone): output is missing");
      return false;
    }
  buf[n] = '\0';
  if (buf[0] == ATTACH_OUT_ERROR)
    {
      husk_error_make (err, 0, "attach: %s", buf + 1);
      return false;
    }
  if (buf[0] == ATTACH_OUT_EXIT)
    {
      *exit_code = atoi (buf + 1);
      return false;
    }
  to = buf[0] == ATTACH_OUT_STDERR && io->stderr_fd >= 0 ? io->stderr_fd : io->stdout_fd;
  if (buf[0] == ATTACH_OUT_STDERR && io->stderr_fd < 0 && !io->tty)
    to = -1;
  if (to >= 0 && n > 1)
    (void) husk_write_all (to, buf + 1, (size_t) n - 1);
  return true;
}

/* The client's stdin to the monitor; false at its EOF. */
static bool
attach_input (int fd, int stdin_fd, bool stdin_once)
{
  char buf[ATTACH_DATA_MAX];
  ssize_t n = read (stdin_fd, buf, sizeof buf);

  if (n < 0 && errno == EINTR)
    return true;
  if (n <= 0)
    {
      /* The container's stdin closes with stdin_once (its output still
       * comes until it exits); otherwise this is a detach. */
      if (stdin_once)
        cri_attach_close_stdin (fd);
      return false;
    }
  cri_attach_send_stdin (fd, buf, (size_t) n);
  return true;
}

/* Copies between the client and the monitor's attach socket until the
 * container exits, the client closes stdin of a container without
 * stdin_once (a detach) or goes; the container runs on, and an attach
 * ends with exit code 0, as containerd's does. */
static int
run_attach (struct cri_service *svc, const struct stream_target *t, const struct streaming_io *io,
            struct husk_error **err)
{
  struct cri_container *c = NULL;
  cleanup_close int fd = -1;
  int in_fd = io->stdin_fd, exit_code = 0;
  bool stdin_once;

  if (container_lookup (svc->containers, t->container_id, &c, err) < 0)
    return -1;
  stdin_once = c->config && c->config->stdin_once;
  if (c->state != CRI_CONTAINER_RUNNING)
    {
      cri_container_free (c);
      return husk_error_kind (err, EAGAIN, "container %s is not running", t->container_id);
    }
  cri_container_free (c);
  fd = cri_attach_connect (svc->cfg->state, t->container_id, err);
  if (fd < 0)
    return -1;
  for (;;)
    {
      struct pollfd p[4] = { { .fd = fd, .events = POLLIN },
                             { .fd = in_fd, .events = POLLIN },
                             { .fd = io->resize_fd, .events = POLLIN },
                             { .fd = io->cancel_fd, .events = POLLIN } };
      if (poll (p, 4, -1) < 0)
        continue;
      if (p[3].revents)
        break;
      if (p[2].revents)
        {
          struct streaming_resize size;
          if (read (io->resize_fd, &size, sizeof size) == (ssize_t) sizeof size)
            cri_attach_resize (fd, size.height, size.width);
        }
      if (p[1].revents && !attach_input (fd, in_fd, stdin_once))
        {
          if (!stdin_once)
            break; /* the client detached */
          in_fd = -1;
        }
      if (p[0].revents && !attach_output (fd, io, &exit_code, err))
        break;
    }
  (void) exit_code; /* kubectl attach reports no exit code */
  return err && *err ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* Port forward                                                         */

struct connect_job
{
  const char *netns_path;
  uint16_t port;
  int fd;
  int errnum;
  const char *step;
};

static int
connect_local (uint16_t port, int *errnum)
{
  struct sockaddr_in v4
      = { .sin_family = AF_INET, .sin_port = htons (port), .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  struct sockaddr_in6 v6
      = { .sin6_family = AF_INET6, .sin6_port = htons (port), .sin6_addr = IN6ADDR_LOOPBACK_INIT };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  if (fd >= 0 && connect (fd, (struct sockaddr *) &v4, sizeof v4) == 0)
    return fd;
  *errnum = errno;
  if (fd >= 0)
    close (fd);
  fd = socket (AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect (fd, (struct sockaddr *) &v6, sizeof v6) == 0)
    return fd;
  if (fd >= 0)
    close (fd);
  return -1;
}

/* A thread of its own: setns changes the calling thread's network
 * namespace only, and the thread ends with it. */
static void *
connect_in_netns (void *arg)
{
  struct connect_job *job = arg;
  int ns = open (job->netns_path, O_RDONLY | O_CLOEXEC);

  job->fd = -1;
  if (ns < 0 || setns (ns, CLONE_NEWNET) < 0)
    {
      job->errnum = errno;
      job->step = ns < 0 ? "open the pod's network namespace" : "enter the pod's network namespace";
    }
  else
    {
      job->fd = connect_local (job->port, &job->errnum);
      job->step = "connect to localhost";
    }
  if (ns >= 0)
    close (ns);
  return NULL;
}

static int
connect_port (struct cri_service *svc, const struct stream_target *t, uint16_t port, struct husk_error **err)
{
  struct connect_job job = { .netns_path = t->netns_path, .port = port, .fd = -1 };
  struct sandbox *sb = NULL;
  pthread_t thread;

  if (sandbox_lookup (svc->sandboxes, t->sandbox_id, &sb, err) < 0)
    return -1;
  if (sb->state != SANDBOX_READY)
    {
      sandbox_free (sb);
      return husk_error_kind (err, EAGAIN, "pod %s is not ready", t->sandbox_id);
    }
  sandbox_free (sb);
  if (t->netns_path == NULL)
    {
      job.fd = connect_local (port, &job.errnum);
      job.step = "connect to localhost";
    }
  else if (pthread_create (&thread, NULL, connect_in_netns, &job) != 0)
    return husk_error_make (err, errno, "pod %s: a thread to connect", t->sandbox_id);
  else
    pthread_join (thread, NULL);
  if (job.fd < 0)
    return husk_error_make (err, job.errnum, "pod %s port %u: %s", t->sandbox_id, port, job.step);
  return job.fd;
}

/* ------------------------------------------------------------------ */
/* The server's callbacks                                               */

static int
session_run (void *user, enum streaming_kind kind, void *data, const struct streaming_io *io,
             struct husk_error **err)
{
  struct stream_target *t = data;

  if (kind == STREAMING_EXEC)
    return run_exec (user, t, io, err);
  return run_attach (user, t, io, err);
}

static int
session_connect (void *user, void *data, uint16_t port, struct husk_error **err)
{
  return connect_port (user, data, port, err);
}

int
cri_streaming_start (struct cri_service *svc, struct husk_error **err)
{
  struct streaming_options opts = { .address = svc->cfg->stream_address,
                                    .port = svc->cfg->stream_port,
                                    .token_ttl_ms = (int64_t) svc->cfg->stream_token_ttl_s * 1000 };
  struct streaming_callbacks cb = { .run = session_run, .connect_port = session_connect, .user = svc };

  if (streaming_server_start (&opts, &cb, &svc->streaming, err) < 0)
    return -1;
  husk_log (HUSK_LOG_INFO, "streaming server on %s", streaming_server_base (svc->streaming));
  return 0;
}

void
cri_streaming_stop (struct cri_service *svc)
{
  streaming_server_stop (svc->streaming);
  svc->streaming = NULL;
}

/* ------------------------------------------------------------------ */
/* The RPCs                                                             */

static int
check_stdio (bool in, bool out, bool errs, bool tty, struct husk_error **err)
{
  if (tty && errs)
    return husk_error_kind (err, EINVAL, "tty and stderr cannot both be true");
  if (!in && !out && !errs)
    return husk_error_kind (err, EINVAL, "one of stdin, stdout or stderr must be true");
  return 0;
}

/* The container exists and runs; an attach that wants stdin needs one
 * created with stdin (its monitor holds no stdin otherwise, and what the
 * client typed would vanish). */
static int
check_running (struct cri_service *svc, const char *id, bool attach_stdin, struct husk_error **err)
{
  struct cri_container *c = NULL;
  int ret = 0;

  if (id == NULL || *id == '\0')
    return husk_error_kind (err, EINVAL, "container_id: required");
  if (container_lookup (svc->containers, id, &c, err) < 0)
    return -1;
  if (c->state != CRI_CONTAINER_RUNNING)
    ret = husk_error_kind (err, EAGAIN, "container %s is not running", c->id);
  else if (attach_stdin && !(c->config && c->config->stdin))
    ret = husk_error_kind (err, EINVAL, "stdin: container %s was created without stdin", c->id);
  cri_container_free (c);
  return ret;
}

static char *
url_for (struct cri_service *svc, struct streaming_request *req, struct husk_error **err)
{
  if (svc->streaming == NULL)
    {
      free_target (req->data);
      husk_error_kind (err, EAGAIN, "the streaming server is not running");
      return NULL;
    }
  req->free_data = free_target;
  return streaming_server_url (svc->streaming, req, err);
}

/* Exec and Attach alike: the request checked, then a URL for a session on
 * container ID (CMD for an exec, NULL for an attach). */
static char *
container_stream_url (struct cri_service *svc, enum streaming_kind kind, const char *id, bool in, bool out,
                      bool errs, bool tty, char *const *cmd, size_t n_cmd, struct husk_error **err)
{
  struct stream_target *t;
  struct streaming_request sreq
      = { .kind = kind, .want_stdin = in, .want_stdout = out, .want_stderr = errs, .tty = tty };

  if (check_stdio (in, out, errs, tty, err) < 0
      || check_running (svc, id, kind == STREAMING_ATTACH && in, err) < 0)
    return NULL;
  sreq.data = t = xcalloc (1, sizeof *t);
  t->svc = svc;
  t->container_id = xstrdup (id);
  for (size_t i = 0; i < n_cmd; i++)
    t->cmd = husk_strv_append (t->cmd, cmd[i]);
  return url_for (svc, &sreq, err);
}

void
cri_exec (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__ExecRequest *req = cri_unpack (call, &runtime__v1__exec_request__descriptor, req_bytes, len);
  Runtime__V1__ExecResponse resp = RUNTIME__V1__EXEC_RESPONSE__INIT;
  struct husk_error *err = NULL;
  cleanup_free char *url = NULL;

  if (req == NULL)
    return;
  if (req->n_cmd == 0)
    husk_error_kind (&err, EINVAL, "cmd: required");
  else
    url = container_stream_url (svc, STREAMING_EXEC, req->container_id, req->stdin, req->stdout, req->stderr,
                                req->tty, req->cmd, req->n_cmd, &err);
  if (url == NULL)
    cri_fail (call, &err);
  else
    {
      resp.url = url;
      cri_reply (call, &resp.base);
    }
  runtime__v1__exec_request__free_unpacked (req, NULL);
}

void
cri_attach (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__AttachRequest *req
      = cri_unpack (call, &runtime__v1__attach_request__descriptor, req_bytes, len);
  Runtime__V1__AttachResponse resp = RUNTIME__V1__ATTACH_RESPONSE__INIT;
  struct husk_error *err = NULL;
  cleanup_free char *url = NULL;

  if (req == NULL)
    return;
  url = container_stream_url (svc, STREAMING_ATTACH, req->container_id, req->stdin, req->stdout, req->stderr,
                              req->tty, NULL, 0, &err);
  if (url == NULL)
    cri_fail (call, &err);
  else
    {
      resp.url = url;
      cri_reply (call, &resp.base);
    }
  runtime__v1__attach_request__free_unpacked (req, NULL);
}

static int
port_forward_target (struct cri_service *svc, const char *sandbox_id, struct stream_target **out,
                     struct husk_error **err)
{
  struct sandbox *sb = NULL;

  if (sandbox_id == NULL || *sandbox_id == '\0')
    return husk_error_kind (err, EINVAL, "pod_sandbox_id: required");
  if (sandbox_lookup (svc->sandboxes, sandbox_id, &sb, err) < 0)
    return -1;
  if (sb->state != SANDBOX_READY)
    {
      sandbox_free (sb);
      return husk_error_kind (err, EAGAIN, "pod %s is not ready", sandbox_id);
    }
  *out = xcalloc (1, sizeof **out);
  (*out)->svc = svc;
  (*out)->sandbox_id = xstrdup (sb->id);
  (*out)->netns_path = sb->netns_path ? xstrdup (sb->netns_path) : NULL;
  sandbox_free (sb);
  return 0;
}

void
cri_port_forward (struct rpc_call *call, const void *req_bytes, size_t len, void *user)
{
  struct cri_service *svc = user;
  Runtime__V1__PortForwardRequest *req
      = cri_unpack (call, &runtime__v1__port_forward_request__descriptor, req_bytes, len);
  Runtime__V1__PortForwardResponse resp = RUNTIME__V1__PORT_FORWARD_RESPONSE__INIT;
  struct husk_error *err = NULL;
  struct stream_target *t = NULL;
  cleanup_free char *url = NULL;

  if (req == NULL)
    return;
  if (req->n_port > STREAMING_MAX_PORTS)
    husk_error_kind (&err, EINVAL, "port: %zu ports; at most %d in one request", req->n_port,
                     STREAMING_MAX_PORTS);
  for (size_t i = 0; i < req->n_port && err == NULL; i++)
    if (req->port[i] < 1 || req->port[i] > 65535)
      husk_error_kind (&err, EINVAL, "port: %d is not a TCP port", req->port[i]);
  if (err == NULL && port_forward_target (svc, req->pod_sandbox_id, &t, &err) == 0)
    {
      struct streaming_request sreq = { .kind = STREAMING_PORTFORWARD, .data = t, .n_ports = req->n_port };
      for (size_t i = 0; i < req->n_port; i++)
        sreq.ports[i] = (uint16_t) req->port[i];
      url = url_for (svc, &sreq, &err);
    }
  if (url == NULL)
    cri_fail (call, &err);
  else
    {
      resp.url = url;
      cri_reply (call, &resp.base);
    }
  runtime__v1__port_forward_request__free_unpacked (req, NULL);
}
