/* Terminals and foreground processes: the pty handed over --console-socket
 * (as runc does: the master fd in SCM_RIGHTS), and the loop of `husk run`
 * and `husk exec` that forwards signals and copies between our stdio and
 * the pty. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/unix_socket.h"
#include "husk/util.h"
#include "runtime/init.h"

int
terminal_connect (const char *path, struct husk_error **err)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  cleanup_close int fd = -1;

  if (strlen (path) >= sizeof addr.sun_path)
    return husk_error_make (err, ENAMETOOLONG, "console socket `%s`", path);
  strcpy (addr.sun_path, path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return husk_error_make (err, errno, "console socket `%s`: socket", path);
  if (connect (fd, (struct sockaddr *) &addr, sizeof addr) < 0)
    return husk_error_make (err, errno, "connect to console socket `%s`", path);
  return steal_fd (&fd);
}

static int
send_fd (int sock, int fd, const char *name, struct husk_error **err)
{
  if (husk_unix_send_fd (sock, fd, name, strlen (name)) < 0)
    return husk_error_make (err, errno, "send the pty master over the console socket");
  return 0;
}

int
terminal_receive (int sock, struct husk_error **err)
{
  char name[256];
  int fd = husk_unix_recv_fd (sock, name, sizeof name, NULL);

  if (fd < 0 && errno == EPROTO)
    return husk_error_make (err, EPROTO, "receive the pty master: no fd in the message");
  if (fd < 0)
    return husk_error_make (err, errno, "receive the pty master");
  return fd;
}

int
terminal_setup_child (int console_fd, const struct spec_process *process, struct husk_error **err)
{
  cleanup_close int master = -1;
  cleanup_close int slave = -1;
  char name[128];

  if (console_fd < 0)
    return husk_error_make (err, 0, "process.terminal is set but no console socket was given");
  master = open ("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0)
    return husk_error_make (err, errno, "open /dev/ptmx in the container");
  if (unlockpt (master) < 0 || ptsname_r (master, name, sizeof name) != 0)
    return husk_error_make (err, errno, "unlock the pty");
  slave = open (name, O_RDWR | O_NOCTTY);
  if (slave < 0)
    return husk_error_make (err, errno, "open `%s`", name);
  if (process->console_width || process->console_height)
    {
      struct winsize ws = { .ws_row = (unsigned short) process->console_height,
                            .ws_col = (unsigned short) process->console_width };
      ioctl (slave, TIOCSWINSZ, &ws);
    }
  if (send_fd (console_fd, master, name, err) < 0)
    return -1;
  if (setsid () < 0)
    return husk_error_make (err, errno, "setsid");
  if (ioctl (slave, TIOCSCTTY, 0) < 0)
    return husk_error_make (err, errno, "make `%s` the controlling terminal", name);
  for (int fd = 0; fd < 3; fd++)
    if (dup2 (slave, fd) < 0)
      return husk_error_make (err, errno, "dup the pty onto fd %d", fd);
  return 0;
}

/* The signals a foreground runtime passes on to the container. */
static void
forwarded_signals (sigset_t *set)
{
  static const int sigs[] = { SIGHUP,  SIGINT,  SIGQUIT, SIGTERM, SIGUSR1,  SIGUSR2,
                              SIGPIPE, SIGALRM, SIGCONT, SIGTSTP, SIGWINCH, SIGCHLD };
  sigemptyset (set);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaddset (set, sigs[i]);
}

void
foreground_block_signals (void)
{
  sigset_t set;

  forwarded_signals (&set);
  sigprocmask (SIG_BLOCK, &set, NULL);
}

static int
copy_once (int from, int to)
{
  char buf[16384];
  ssize_t n = read (from, buf, sizeof buf);

  if (n <= 0)
    return -1;
  return husk_write_all (to, buf, (size_t) n);
}

static void
resize_from_stdin (int master)
{
  struct winsize ws;

  if (ioctl (0, TIOCGWINSZ, &ws) == 0)
    ioctl (master, TIOCSWINSZ, &ws);
}

static int
exit_code_of (int status)
{
  if (WIFEXITED (status))
    return WEXITSTATUS (status);
  if (WIFSIGNALED (status))
    return 128 + WTERMSIG (status);
  return 1;
}

/* Our stdin into the pty.  At its end a terminal user would type ^D: the
 * pty's EOF character, twice when a line is unfinished (the first only
 * ends the line), so a process reading a piped or redirected stdin sees
 * its end instead of waiting for ever.  False once stdin is done. */
static bool
stdin_to_pty (int master, char *last_byte)
{
  char buf[4096];
  ssize_t n = read (0, buf, sizeof buf);
  struct termios tio;

  if (n > 0)
    {
      *last_byte = buf[n - 1];
      return husk_write_all (master, buf, (size_t) n) == 0;
    }
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return true;
  if (n == 0 && !isatty (0) && tcgetattr (master, &tio) == 0)
    {
      char eof[2] = { (char) tio.c_cc[VEOF], (char) tio.c_cc[VEOF] };
      husk_write_all (master, eof, *last_byte == '\n' || *last_byte == '\0' ? 1 : 2);
    }
  return false;
}

/* Drains the pty after the process has exited, so no output is lost. */
static void
drain_master (int master)
{
  struct pollfd pfd = { .fd = master, .events = POLLIN };

  while (poll (&pfd, 1, 0) > 0 && (pfd.revents & POLLIN) && copy_once (master, 1) == 0)
    ;
}

int
foreground_wait (pid_t pid, int master, int *exit_code, struct husk_error **err)
{
  struct termios saved, raw;
  bool restore = false;
  sigset_t set;
  cleanup_close int sfd = -1;

  forwarded_signals (&set);
  sfd = signalfd (-1, &set, SFD_CLOEXEC);
  if (sfd < 0)
    return husk_error_make (err, errno, "signalfd");
  if (master >= 0)
    {
      if (isatty (0) && tcgetattr (0, &saved) == 0)
        {
          raw = saved;
          cfmakeraw (&raw);
          restore = tcsetattr (0, TCSANOW, &raw) == 0;
        }
      resize_from_stdin (master);
    }

  int pty_fd = master, stdin_fd = master >= 0 ? 0 : -1;
  char last_byte = '\0';
  for (;;)
    {
      struct pollfd fds[3] = { { sfd, POLLIN, 0 }, { pty_fd, POLLIN, 0 }, { stdin_fd, POLLIN, 0 } };
      int status;

      if (poll (fds, 3, -1) < 0 && errno != EINTR)
        break;
      if ((fds[1].revents & (POLLIN | POLLHUP | POLLERR)) && copy_once (pty_fd, 1) < 0)
        pty_fd = -1;
      if ((fds[2].revents & (POLLIN | POLLHUP)) && (pty_fd < 0 || !stdin_to_pty (pty_fd, &last_byte)))
        stdin_fd = -1;
      if (fds[0].revents & POLLIN)
        {
          struct signalfd_siginfo si;
          if (read (sfd, &si, sizeof si) != sizeof si)
            continue;
          if (si.ssi_signo == SIGWINCH && master >= 0)
            resize_from_stdin (master);
          else if (si.ssi_signo != SIGCHLD)
            kill (pid, (int) si.ssi_signo);
        }
      if (waitpid (pid, &status, WNOHANG) == pid)
        {
          if (pty_fd >= 0)
            drain_master (pty_fd);
          *exit_code = exit_code_of (status);
          break;
        }
    }
  if (restore)
    tcsetattr (0, TCSANOW, &saved);
  return 0;
}
