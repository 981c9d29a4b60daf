/* `husk image`, `husk container`, `husk cdi` and `husk cdi-hook`: find
 * the program that serves them (husk-image, or husk-hook for the hooks)
 * next to the binary (build tree), in ../lib/husk (installed), or in
 * $HUSK_PLUGIN_DIR, and execute it with the verb (see husk/plugin.h). */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/plugin.h"
#include "husk/util.h"
#include "runtime/cli/cli.h"

/* FILE in $HUSK_PLUGIN_DIR, beside SELF (husk's path), or in
 * SELF/../lib/husk. */
static char *
find_plugin (const char *file, const char *self)
{
  const char *env = getenv ("HUSK_PLUGIN_DIR");
  cleanup_free char *copy = NULL;
  char *dir;

  if (env && *env)
    return xasprintf ("%s/%s", env, file);
  copy = xstrdup (self);
  dir = dirname (copy);
  {
    char *beside = xasprintf ("%s/%s", dir, file);
    if (access (beside, X_OK) == 0)
      return beside;
    free (beside);
  }
  return xasprintf ("%s/../lib/husk/%s", dir, file);
}

/* Returns only on failure.  The plugin finds husk-monitor from
 * HUSK_PLUGIN_DIR and husk from HUSK_BINARY (cri/container/containers.c). */
static int
run_plugin (const char *group, struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  const char *file = strcmp (group, "cdi-hook") == 0 ? HUSK_HOOK_PLUGIN_FILE : HUSK_PLUGIN_FILE;
  cleanup_free char *path = NULL;
  cleanup_free char *dir = NULL;
  cleanup_free char **args = NULL;
  char self[PATH_MAX];

  if (realpath ("/proc/self/exe", self) == NULL)
    return husk_error_make (err, errno, "%s: the path of the husk binary (/proc/self/exe)", group);
  path = find_plugin (file, self);
  dir = xstrdup (path);
  if (setenv ("HUSK_PLUGIN_DIR", dirname (dir), 1) < 0 || setenv (HUSK_BINARY_ENV, self, 1) < 0)
    return husk_error_make (err, errno, "%s: set the plugin's environment", group);
  /* PLUGIN RUNTIME_ROOT GROUP VERB ...: ARGV[0] is GROUP. */
  args = xcalloc ((size_t) argc + 3, sizeof (char *));
  args[0] = path;
  args[1] = (char *) g->ctx.root;
  for (int i = 0; i < argc; i++)
    args[i + 2] = argv[i];
  /* The container verbs enter containers: from a sealed file (husk-image
   * would re-execute itself otherwise, see runtime/cloned_binary.c). */
  if (strcmp (group, "container") == 0)
    {
      container_exec_sealed (path, args, err);
      return husk_error_wrap (err, "%s", group);
    }
  execv (path, args);
  return husk_error_make (err, errno, "%s: execute `%s`", group, path);
}

int
cli_image (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  return run_plugin ("image", g, argc, argv, err);
}

int
cli_container (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  return run_plugin ("container", g, argc, argv, err);
}

int
cli_cdi_hook (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  return run_plugin ("cdi-hook", g, argc, argv, err);
}

int
cli_cdi (struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  return run_plugin ("cdi", g, argc, argv, err);
}
