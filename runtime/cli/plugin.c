/* `husk image`, `husk container`, `husk cdi` and `husk cdi-hook`: find
 * the plugin (husk-image.so, or husk-hook.so for the hooks) next to the
 * binary (build tree), in ../lib/husk (installed), or in $HUSK_PLUGIN_DIR,
 * and hand the verb over. */
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/plugin.h"
#include "husk/util.h"
#include "runtime/cli/cli.h"

static char *
find_plugin (const char *file)
{
  char exe[PATH_MAX];
  const char *env = getenv ("HUSK_PLUGIN_DIR");
  ssize_t n = readlink ("/proc/self/exe", exe, sizeof exe - 1);
  char *dir;

  if (env && *env)
    return xasprintf ("%s/%s", env, file);
  if (n <= 0)
    return NULL;
  exe[n] = '\0';
  dir = dirname (exe);
  {
    char *beside = xasprintf ("%s/%s", dir, file);
    if (access (beside, R_OK) == 0)
      return beside;
    free (beside);
  }
  return xasprintf ("%s/../lib/husk/%s", dir, file);
}

void
cli_remember_plugin_dir (void)
{
  cleanup_free char *path = NULL;
  const char *env = getenv ("HUSK_PLUGIN_DIR");

  if (env && *env)
    return;
  path = find_plugin (HUSK_PLUGIN_FILE);
  if (path && access (path, R_OK) == 0)
    setenv ("HUSK_PLUGIN_DIR", dirname (path), 1);
}

static int
run_plugin (const char *group, struct cli_globals *g, int argc, char **argv, struct husk_error **err)
{
  const char *file = strcmp (group, "cdi-hook") == 0 ? HUSK_HOOK_PLUGIN_FILE : HUSK_PLUGIN_FILE;
  cleanup_free char *path = find_plugin (file);
  husk_plugin_main_fn entry;
  void *handle;

  if (path == NULL)
    return husk_error_make (err, 0, "%s: cannot locate %s", group, file);
  handle = dlopen (path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL)
    return husk_error_make (err, 0, "%s: load `%s`: %s", group, path, dlerror ());
  entry = (husk_plugin_main_fn) dlsym (handle, HUSK_PLUGIN_ENTRY);
  if (entry == NULL)
    return husk_error_make (err, 0, "%s: `%s` has no %s", group, path, HUSK_PLUGIN_ENTRY);
  return entry (group, argc, argv, g->ctx.root);
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
