/* The running binary's path on disk, remembered across huskd's re-exec
 * from its sealed copy. */
#include <stdlib.h>
#include <unistd.h>

#include "cri/config/self_exe.h"
#include "husk/util.h"

static char *self_exe;

void
cri_set_self_exe (const char *path)
{
  free (self_exe);
  self_exe = path ? xstrdup (path) : NULL;
}

char *
cri_self_exe (void)
{
  char self[4096];
  ssize_t n;

  if (self_exe)
    return xstrdup (self_exe);
  n = readlink ("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return NULL;
  self[n] = '\0';
  return xstrdup (self);
}
