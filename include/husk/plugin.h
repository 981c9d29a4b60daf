/* The husk binary's debug verbs (`husk image ...`, `husk container ...`,
 * `husk cdi ...`) live in husk-image, a program of their own that husk
 * executes only when such a verb runs: husk itself then links no libcurl,
 * libarchive or their ~40 dependent libraries, and is linked statically
 * (the OCI runtime's hot path loads no library at all).  The CDI hooks
 * (`husk cdi-hook ...`) run at every create of a container given such a
 * device, so they have a program of their own, husk-hook, that needs only
 * jansson: loading husk-image's libraries cost ~14 ms of each hook's
 * ~17 ms.
 *
 * husk finds them next to itself (the build tree), in ../lib/husk
 * (installed) or in $HUSK_PLUGIN_DIR, sets HUSK_PLUGIN_DIR to the dir it
 * found and HUSK_BINARY to its own path (the husk that `husk container`
 * runs and that generated CDI hooks name), and executes
 *
 *     PLUGIN RUNTIME_ROOT GROUP VERB [options] ...
 *
 * where RUNTIME_ROOT is husk's --root (the OCI runtime state dir). */
#ifndef HUSK_PLUGIN_H
#define HUSK_PLUGIN_H

#define HUSK_PLUGIN_FILE "husk-image"
#define HUSK_HOOK_PLUGIN_FILE "husk-hook"
#define HUSK_BINARY_ENV "HUSK_BINARY"

/* GROUP is "image", "container" or "cdi" (husk-image), or "cdi-hook"
 * (husk-hook); ARGV[0] is GROUP, then its verb and options.  SELF_ARGV is
 * the program's whole argv, for its re-exec from a sealed copy (the
 * container verbs enter containers, see runtime/cloned_binary.c).
 * Returns the process exit code; errors are printed by the plugin. */
int husk_plugin_main (const char *group, int argc, char **argv, const char *runtime_root, char **self_argv);

#endif
