/* The floor of runtime/cgroup/: where the unified (v2) hierarchy is
 * mounted, and reading one cgroup file.  Used by the face (cgroup.c) and
 * the v1 code (cgroup_v1.c) alike. */
#include <linux/magic.h>
#include <stdlib.h>
#include <sys/vfs.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"

const char *
cgroup_unified_mount (void)
{
  static const char *const candidates[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
  struct statfs fs;

  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++)
    if (statfs (candidates[i], &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC)
      return candidates[i];
  return NULL;
}

char *
cgroup_read_file (const char *dir, const char *name)
{
  cleanup_free char *path = NULL;
  char *content = NULL;

  if (dir == NULL)
    return NULL;
  path = xasprintf ("%s/%s", dir, name);
  if (husk_read_file (path, &content, NULL, NULL) < 0)
    return NULL;
  return content;
}
