/* The floor of common/: allocation that never fails (out of memory aborts
 * with one line) and writing a whole buffer.  The error type (error.c) and
 * the other helpers (util.c) both stand on it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "husk/util.h"

static void
oom (void)
{
  static const char msg[] = "husk: out of memory\n";
  (void) !write (2, msg, sizeof msg - 1);
  abort ();
}

void *
xmalloc (size_t size)
{
  void *p = malloc (size ? size : 1);
  if (p == NULL)
    oom ();
  return p;
}

void *
xcalloc (size_t n, size_t size)
{
  void *p = calloc (n ? n : 1, size ? size : 1);
  if (p == NULL)
    oom ();
  return p;
}

void *
xrealloc (void *ptr, size_t size)
{
  void *p = realloc (ptr, size ? size : 1);
  if (p == NULL)
    oom ();
  return p;
}

char *
xstrdup (const char *s)
{
  char *p;

  if (s == NULL)
    return NULL;
  p = strdup (s);
  if (p == NULL)
    oom ();
  return p;
}

char *
xasprintf (const char *fmt, ...)
{
  char *out = NULL;
  va_list ap;

  va_start (ap, fmt);
  if (vasprintf (&out, fmt, ap) < 0)
    oom ();
  va_end (ap);
  return out;
}

int
husk_write_all (int fd, const void *buf, size_t len)
{
  const char *p = buf;

  while (len > 0)
    {
      ssize_t n = write (fd, p, len);
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          return -1;
        }
      p += n;
      len -= (size_t) n;
    }
  return 0;
}
