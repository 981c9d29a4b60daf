/* Scope-bound cleanup, as in crun and systemd: declare with a cleanup_*
 * attribute and the value is released when it goes out of scope; hand
 * ownership on with steal_pointer()/steal_fd(). */
#ifndef HUSK_CLEANUP_H
#define HUSK_CLEANUP_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void
husk_freep (void *p)
{
  void **pp = (void **) p;
  free (*pp);
  *pp = NULL;
}

static inline void
husk_closep (int *fd)
{
  if (*fd >= 0)
    {
      int saved = errno;
      close (*fd);
      errno = saved;
    }
  *fd = -1;
}

static inline void
husk_fclosep (FILE **f)
{
  if (*f)
    fclose (*f);
  *f = NULL;
}

static inline void
husk_closedirp (DIR **d)
{
  if (*d)
    closedir (*d);
  *d = NULL;
}

/* A NULL-terminated array of strings. */
static inline void
husk_strvfreep (char ***v)
{
  if (*v)
    {
      for (char **s = *v; *s; s++)
        free (*s);
      free (*v);
    }
  *v = NULL;
}

#define cleanup_free __attribute__ ((cleanup (husk_freep)))
#define cleanup_close __attribute__ ((cleanup (husk_closep)))
#define cleanup_file __attribute__ ((cleanup (husk_fclosep)))
#define cleanup_dir __attribute__ ((cleanup (husk_closedirp)))
#define cleanup_strv __attribute__ ((cleanup (husk_strvfreep)))

static inline void *
husk_steal_pointer (void *pp)
{
  void **ptr = (void **) pp;
  void *ret = *ptr;
  *ptr = NULL;
  return ret;
}
#define steal_pointer(pp) husk_steal_pointer (pp)

static inline int
steal_fd (int *fd)
{
  int ret = *fd;
  *fd = -1;
  return ret;
}

#endif
