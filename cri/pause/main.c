/* husk-pause: pid 1 of a pod that shares its PID namespace.  It only
 * reaps the orphans the pod's containers leave and otherwise sleeps; as a
 * namespace's init it ignores every signal it has no handler for, so only
 * SIGKILL from outside ends it.  Linked statically and tiny: one runs per
 * such pod for the pod's whole life. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void
on_sigchld (int sig)
{
  (void) sig;
}

int
main (int argc, char **argv)
{
  struct sigaction sa;
  sigset_t none, chld;
  int devnull;

  if (argc > 1 && (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "--version") == 0))
    {
      printf ("husk-pause: pid 1 of a husk pod that shares its PID namespace (started by huskd)\n");
      return 0;
    }
  devnull = open ("/dev/null", O_RDWR);
  if (devnull >= 0)
    {
      dup2 (devnull, 0);
      dup2 (devnull, 1);
      dup2 (devnull, 2);
      if (devnull > 2)
        close (devnull);
    }
  memset (&sa, 0, sizeof sa);
  sa.sa_handler = on_sigchld;
  sa.sa_flags = SA_NOCLDSTOP;
  sigaction (SIGCHLD, &sa, NULL);
  signal (SIGPIPE, SIG_IGN);
  /* SIGCHLD stays blocked but while sigsuspend waits: one that comes
   * between the last waitpid and the wait is not lost. */
  sigemptyset (&none);
  sigemptyset (&chld);
  sigaddset (&chld, SIGCHLD);
  sigprocmask (SIG_SETMASK, &chld, NULL);
  for (;;)
    {
      while (waitpid (-1, NULL, WNOHANG) > 0)
        ;
      sigsuspend (&none);
    }
}
