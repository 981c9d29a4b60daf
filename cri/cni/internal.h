/* The pieces of husk's CNI client that its files share and its unit tests
 * check one by one: names and versions, what a plugin gets on stdin and in
 * its environment, the result cache, and running one plugin. */
#ifndef HUSK_CRI_CNI_INTERNAL_H
#define HUSK_CRI_CNI_INTERNAL_H

#include "cri/cni/cni.h"

/* The spec's rule for network names and container ids: an alphanumeric,
 * then alphanumerics, '_', '.', '-'.  Both become file names here. */
bool cni_name_is_valid (const char *name);
bool cni_version_is_supported (const char *version);
/* VERSION >= MAJOR.MINOR (VERSION being a supported one). */
bool cni_version_at_least (const char *version, int major, int minor);

/* Builds a network from a conflist object (a reference is taken). */
int cni_network_from_json (json_t *conflist, const char *path, struct cni_network **out,
                           struct husk_error **err);

/* CNI_ARGS: K8S_POD_NAMESPACE=..;K8S_POD_NAME=..;K8S_POD_INFRA_CONTAINER_ID=..
 * [;K8S_POD_UID=..];IgnoreUnknown=1.  Fails on a value holding ';' or '='. */
char *cni_build_args (const struct cni_pod *pod, struct husk_error **err);

/* Every capability value the pod has ({"portMappings": [...], ...}); a
 * plugin gets the ones it declares. */
json_t *cni_runtime_config (const struct cni_pod *pod);

/* Plugin INDEX's stdin: its config with the list's name and cniVersion,
 * PREV_RESULT (may be NULL) as prevResult, and runtimeConfig holding the
 * values of RUNTIME_CONFIG (may be NULL) for the capabilities it declares. */
json_t *cni_plugin_stdin (const struct cni_network *net, size_t index, json_t *prev_result,
                          json_t *runtime_config);

/* ---------------------------------------------------------------- cache */

/* One attachment as ADD left it; RESULT is NULL while ADD runs. */
struct cni_cache_entry
{
  char *network, *container_id, *ifname, *netns, *cni_args;
  json_t *config;         /* the conflist ADD used */
  json_t *runtime_config; /* the pod's capability values */
  json_t *result;
  bool del_started; /* a DEL began: a retry must not trust the plugins alone */
};

void cni_cache_entry_free (struct cni_cache_entry *entry);
char *cni_cache_path (const char *cache_dir, const char *network, const char *container_id);
/* Writes it atomically (creating CACHE_DIR); DURABLE: fsync'd too. */
int cni_cache_write (const char *cache_dir, const struct cni_cache_entry *entry, bool durable,
                     struct husk_error **err);
/* *OUT = NULL when PATH does not exist. */
int cni_cache_read (const char *path, struct cni_cache_entry **out, struct husk_error **err);
/* Every entry of CONTAINER_ID, with the path each was read from. */
int cni_cache_find (const char *cache_dir, const char *container_id, struct cni_cache_entry ***entries,
                    char ***paths, size_t *n, struct husk_error **err);
int cni_cache_remove (const char *path, struct husk_error **err);

/* ---------------------------------------------------------------- rules */

/* The iptables-restore script (`--noflush`) that deletes what DUMP (an
 * iptables-save output) holds of one attachment: the rules tagged
 * `name: "NETWORK" id: "CONTAINER_ID"`, then the per-pod chains they jump
 * to (or, left empty, named from the hash the plugins use) that nothing
 * else reaches; NULL when there is nothing.  The counts are for the log. */
char *cni_rules_plan (const char *dump, const char *network, const char *container_id, size_t *n_rules,
                      size_t *n_chains);
/* Runs that for IPv4 and IPv6 (a family whose tools are missing is
 * skipped), logging what went. */
int cni_rules_sweep (const struct cni_ctx *ctx, const char *network, const char *container_id,
                     struct husk_error **err);

/* ---------------------------------------------------------------- exec */

struct cni_exec
{
  const char *path;
  char *const *argv; /* NULL: { path } (plugins get no arguments) */
  char *const *envp;
  const char *input;
  size_t input_len;
  int timeout_s; /* > 0 */
};

struct cni_exec_output
{
  char *out, *errout; /* NUL-terminated; stdout and (the start of) stderr */
  size_t out_len, err_len;
  int status; /* wait status */
};

/* Forks and execs EXEC->path with INPUT on its stdin, collecting stdout and
 * stderr until it exits.  -1 when it could not be run or passed the timeout
 * (then it is killed with its process group); the exit status is left to
 * the caller. */
int cni_exec_run (const struct cni_exec *exec, struct cni_exec_output *output, struct husk_error **err);
void cni_exec_output_clear (struct cni_exec_output *output);

#endif
