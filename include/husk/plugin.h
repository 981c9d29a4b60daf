/* The husk binary's debug verbs (`husk image ...`, `husk container ...`)
 * live in husk-image.so, loaded only when such a verb runs: the OCI
 * runtime's hot path then never pays for libcurl, libarchive and their ~40
 * dependent libraries.  This is the one entry point the plugin exports. */
#ifndef HUSK_PLUGIN_H
#define HUSK_PLUGIN_H

#define HUSK_PLUGIN_FILE "husk-image.so"
#define HUSK_PLUGIN_ENTRY "husk_plugin_main"

/* GROUP is "image" or "container"; ARGV[0] is GROUP, then its verb and
 * options.  RUNTIME_ROOT is husk's --root (the OCI runtime state dir).
 * Returns the process exit code; errors are printed by the plugin. */
typedef int (*husk_plugin_main_fn) (const char *group, int argc, char **argv, const char *runtime_root);

int husk_plugin_main (const char *group, int argc, char **argv, const char *runtime_root);

#endif
