/* The husk binary's debug verbs (`husk image ...`, `husk container ...`,
 * `husk cdi ...`) live in husk-image.so, loaded only when such a verb runs:
 * the OCI runtime's hot path then never pays for libcurl, libarchive and
 * their ~40 dependent libraries.  The CDI hooks (`husk cdi-hook ...`) run
 * at every create of a container given such a device, so they have a
 * plugin of their own, husk-hook.so, that needs only jansson: loading
 * husk-image.so cost ~14 ms of each hook's ~17 ms.  Both export the one
 * entry point below. */
#ifndef HUSK_PLUGIN_H
#define HUSK_PLUGIN_H

#define HUSK_PLUGIN_FILE "husk-image.so"
#define HUSK_HOOK_PLUGIN_FILE "husk-hook.so"
#define HUSK_PLUGIN_ENTRY "husk_plugin_main"

/* GROUP is "image", "container" or "cdi" (husk-image.so), or "cdi-hook"
 * (husk-hook.so); ARGV[0] is GROUP, then its verb and
 * options.  RUNTIME_ROOT is husk's --root (the OCI runtime state dir).
 * Returns the process exit code; errors are printed by the plugin. */
typedef int (*husk_plugin_main_fn) (const char *group, int argc, char **argv, const char *runtime_root);

int husk_plugin_main (const char *group, int argc, char **argv, const char *runtime_root);

#endif
