/* husk_spawn: clone (CLONE_VM | CLONE_VFORK) on a stack of the child's
 * own (see husk/spawn.h for why). */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>

#include "husk/spawn.h"

/* The child's calls before execve are few and shallow; sanitizer builds
 * add their interceptors' frames. */
#define CHILD_STACK_SIZE (256 * 1024)

pid_t
husk_spawn (int (*child) (void *), void *arg)
{
  char *stack = malloc (CHILD_STACK_SIZE);
  sigset_t all, saved;
  pid_t pid;
  int clone_errno;

  if (stack == NULL)
    return -1;
  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, &saved);
  /* The stack grows down on every architecture huskd runs on. */
  pid = clone (child, stack + CHILD_STACK_SIZE, CLONE_VM | CLONE_VFORK | SIGCHLD, arg);
  clone_errno = errno;
  pthread_sigmask (SIG_SETMASK, &saved, NULL);
  free (stack);
  errno = clone_errno;
  return pid;
}

void
husk_spawn_child_signals (const sigset_t *mask)
{
  for (int sig = 1; sig < NSIG; sig++)
    {
      struct sigaction current;

      /* The raw syscall would do; sigaction is async-signal-safe and
       * skips the signals glibc keeps for itself (EINVAL). */
      if (sigaction (sig, NULL, &current) == 0 && current.sa_handler != SIG_IGN
          && current.sa_handler != SIG_DFL)
        {
          struct sigaction dfl = { .sa_handler = SIG_DFL };
          sigemptyset (&dfl.sa_mask);
          sigaction (sig, &dfl, NULL);
        }
    }
  sigprocmask (SIG_SETMASK, mask, NULL);
}
