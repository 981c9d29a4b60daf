/* The attacker inside the container for test_security.sh: a static binary
 * that tries one thing an escaping process would try and prints "ok" or the
 * errno name that stopped it.  Built by the test with `gcc -static`. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int
report (long rc)
{
  printf ("%s\n", rc < 0 ? strerrorname_np (errno) : "ok");
  return 0;
}

static long
clone_userns (void)
{
  long pid = syscall (SYS_clone, CLONE_NEWUSER | CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0);

  if (pid == 0)
    _exit (0);
  if (pid > 0)
    waitpid ((pid_t) pid, NULL, 0);
  return pid;
}

static long
clone3_userns (void)
{
  struct
  {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
  } args = { .flags = CLONE_NEWUSER, .exit_signal = SIGCHLD };
  long pid = syscall (435 /* clone3 */, &args, sizeof args);

  if (pid == 0)
    _exit (0);
  if (pid > 0)
    waitpid ((pid_t) pid, NULL, 0);
  return pid;
}

static long
io_uring (void)
{
  char params[120] = { 0 };
  long fd = syscall (425 /* io_uring_setup */, 1, params);

  if (fd >= 0)
    close ((int) fd);
  return fd;
}

/* True when /proc/PID/cmdline is a husk command line still running `exec`
 * (its argv has "--root" and "exec"): the exec child before its execve. */
static int
is_husk_exec (const char *pid)
{
  char path[300], buf[4096];
  int fd, has_root = 0, has_exec = 0;
  ssize_t n;

  snprintf (path, sizeof path, "/proc/%s/cmdline", pid);
  fd = open (path, O_RDONLY);
  if (fd < 0)
    return 0;
  n = read (fd, buf, sizeof buf - 1);
  close (fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  for (ssize_t i = 0; i < n; i += (ssize_t) strlen (buf + i) + 1)
    {
      has_root |= strcmp (buf + i, "--root") == 0;
      has_exec |= strcmp (buf + i, "exec") == 0;
    }
  return has_root && has_exec;
}

/* For SECONDS, opens /proc/PID/mem read-write of every husk exec child it
 * sees.  Prints "seen N hits M". */
static int
memscan (int seconds)
{
  time_t end = time (NULL) + seconds;
  int seen = 0, hits = 0;
  char self[16];

  snprintf (self, sizeof self, "%d", (int) getpid ());
  while (time (NULL) < end)
    {
      DIR *proc = opendir ("/proc");
      struct dirent *entry;

      while (proc && (entry = readdir (proc)))
        {
          char path[300];
          int fd;

          if (entry->d_name[0] < '0' || entry->d_name[0] > '9' || strcmp (entry->d_name, self) == 0
              || !is_husk_exec (entry->d_name))
            continue;
          seen++;
          snprintf (path, sizeof path, "/proc/%s/mem", entry->d_name);
          fd = open (path, O_RDWR);
          /* Still husk after the open: the fd holds husk's memory, not
           * that of the program it went on to execve. */
          if (fd >= 0 && is_husk_exec (entry->d_name))
            hits++;
          if (fd >= 0)
            close (fd);
        }
      if (proc)
        closedir (proc);
    }
  printf ("seen %d hits %d\n", seen, hits);
  return 0;
}

static long
open_mem (const char *pid)
{
  char path[300];
  int fd;

  snprintf (path, sizeof path, "/proc/%s/mem", pid);
  fd = open (path, O_RDWR);
  if (fd >= 0)
    close (fd);
  return fd;
}

int
main (int argc, char **argv)
{
  const char *what = argc > 1 ? argv[1] : "";

  setvbuf (stdout, NULL, _IONBF, 0);
  if (strcmp (what, "clone-userns") == 0)
    return report (clone_userns ());
  if (strcmp (what, "clone3-userns") == 0)
    return report (clone3_userns ());
  if (strcmp (what, "unshare-userns") == 0)
    return report (unshare (CLONE_NEWUSER));
  if (strcmp (what, "io-uring") == 0)
    return report (io_uring ());
  if (strcmp (what, "personality-noaslr") == 0)
    return report (syscall (SYS_personality, 0x0040000));
  if (strcmp (what, "personality-query") == 0)
    return report (syscall (SYS_personality, 0xffffffffUL));
  if (strcmp (what, "memscan") == 0 && argc > 2)
    return memscan (atoi (argv[2]));
  if (strcmp (what, "open-mem") == 0 && argc > 2)
    return report (open_mem (argv[2]));
  fprintf (stderr, "usage: probe clone-userns|clone3-userns|unshare-userns|io-uring|personality-noaslr|"
                   "personality-query|memscan SECONDS|open-mem PID\n");
  return 2;
}
