/* A syscall that gVisor's sentry (runsc 2022) does not implement and the
 * host kernel does: copy_file_range(2) with bad descriptors.  The host
 * answers EBADF; the sentry answers ENOSYS itself, so the call never
 * reaches the host.  Static, so that any image (busybox) can run it from
 * a hostPath volume.  Prints "copy_file_range: errno N (text)". */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int
main (void)
{
  long ret = syscall (SYS_copy_file_range, -1, NULL, -1, NULL, 1, 0);
  int err = ret < 0 ? errno : 0;

  printf ("copy_file_range: errno %d (%s)\n", err, err ? strerror (err) : "none");
  return 0;
}
