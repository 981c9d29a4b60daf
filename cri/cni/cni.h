/* A CNI client (spec 1.0.0, also 0.3.x/0.4.0 configs) for huskd: loads the
 * network config list, runs its plugins for ADD/CHECK/DEL on a pod
 * sandbox's pinned netns, parses their results and caches the ADD result so
 * a DEL after a restart still has it.  Thread-safe: no mutable globals. */
#ifndef HUSK_CRI_CNI_H
#define HUSK_CRI_CNI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "husk/error.h"

#define CNI_DEFAULT_CONF_DIR "/etc/cni/net.d"
#define CNI_DEFAULT_BIN_DIRS "/usr/lib/cni:/opt/cni/bin"
#define CNI_DEFAULT_CACHE_DIR "/var/lib/husk/cni-cache"
#define CNI_DEFAULT_IFNAME "eth0"
#define CNI_DEFAULT_TIMEOUT_S 60

/* ---------------------------------------------------------------- config */

struct cni_plugin
{
  char *type;   /* the binary's name */
  json_t *conf; /* its object in the list, as written */
};

/* A network config list.  Immutable once loaded: threads may share one. */
struct cni_network
{
  char *path; /* the file it came from, or NULL */
  char *name;
  char *cni_version;
  bool disable_check;
  struct cni_plugin *plugins;
  size_t n_plugins;
  json_t *conflist; /* the list (a legacy .conf wrapped into one) */
  char **skipped;   /* "FILE: why" for each file passed over before this one */
};

void cni_network_free (struct cni_network *net);

/* Parses one config.  LEGACY: TEXT is a single plugin's config (.conf,
 * .json) and is wrapped into a list.  PATH names it in errors
 * ("PATH:LINE:COLUMN: ..." for bad JSON). */
int cni_config_parse (const char *text, size_t len, const char *path, bool legacy, struct cni_network **out,
                      struct husk_error **err);
/* By suffix: .conflist is a list, .conf and .json are legacy configs. */
int cni_config_load_file (const char *path, struct cni_network **out, struct husk_error **err);
/* The first file of DIR (by byte order of the names) that parses; the ones
 * before it are named in (*out)->skipped.  NULL DIR: CNI_DEFAULT_CONF_DIR. */
int cni_config_load_dir (const char *dir, struct cni_network **out, struct husk_error **err);

/* Finds the executable TYPE in the colon list BIN_DIRS (NULL: default). */
int cni_find_plugin (const char *bin_dirs, const char *type, char **path, struct husk_error **err);
/* 0 when every plugin of NET (and its IPAM plugin) is in BIN_DIRS. */
int cni_network_check_plugins (const struct cni_network *net, const char *bin_dirs, struct husk_error **err);
/* For the Status RPC: 0 (NetworkReady) when CONF_DIR holds a usable config
 * whose plugins are all installed; -1 with the reason otherwise. */
int cni_network_ready (const char *conf_dir, const char *bin_dirs, struct husk_error **err);

/* ---------------------------------------------------------------- results */

struct cni_interface
{
  char *name, *mac, *sandbox; /* mac and sandbox may be NULL */
};

struct cni_ip
{
  int family;    /* 4 or 6 */
  char *address; /* CIDR, "10.88.0.5/16" */
  char *gateway; /* or NULL */
  int interface; /* index into interfaces, or -1 */
};

struct cni_route
{
  char *dst, *gw; /* gw may be NULL */
};

struct cni_dns
{
  char **nameservers, **search, **options; /* NULL-terminated, never NULL */
  char *domain;                            /* or NULL */
};

struct cni_result
{
  char *cni_version;
  struct cni_interface *interfaces;
  size_t n_interfaces;
  struct cni_ip *ips;
  size_t n_ips;
  struct cni_route *routes;
  size_t n_routes;
  struct cni_dns dns;
  json_t *json; /* as the last plugin printed it */
};

/* Reads a 0.3.x/0.4.0 ("version" in ips) or 1.0.0 result. */
int cni_result_parse (const char *text, size_t len, struct cni_result **out, struct husk_error **err);
int cni_result_from_json (json_t *json, struct cni_result **out, struct husk_error **err);
void cni_result_free (struct cni_result *result);

/* The pod's addresses without prefix length, IPv4 first, then IPv6: those
 * on the sandbox interface IFNAME (NULL: eth0), or every address when the
 * result does not say which interface holds it. */
char **cni_result_pod_ips (const struct cni_result *result, const char *ifname);

/* ---------------------------------------------------------------- operations */

struct cni_ctx
{
  const char *bin_dirs;  /* colon list; NULL: CNI_DEFAULT_BIN_DIRS */
  const char *cache_dir; /* NULL: CNI_DEFAULT_CACHE_DIR */
  int timeout_s;         /* per plugin exec; 0: CNI_DEFAULT_TIMEOUT_S */
  /* Where iptables-save and iptables-restore (and ip6tables-*) are looked
   * up for removing the rules a DEL left; NULL: the usual sbin and bin. */
  const char *tools_path;
};

/* A CRI PortMapping.  Those with host_port <= 0 are not passed on. */
struct cni_port_mapping
{
  int host_port, container_port;
  const char *protocol; /* "tcp", "udp", "sctp" (any case); NULL: tcp */
  const char *host_ip;  /* NULL or "": every host address */
};

/* Bits per second and bits, as the bandwidth plugin wants them. */
struct cni_bandwidth
{
  uint64_t ingress_rate, ingress_burst, egress_rate, egress_burst;
};

struct cni_pod
{
  const char *container_id; /* the sandbox id */
  const char *netns;        /* the pinned netns path */
  const char *ifname;       /* NULL: eth0 */
  const char *pod_namespace, *pod_name, *pod_uid;
  const struct cni_port_mapping *port_mappings;
  size_t n_port_mappings;
  const struct cni_bandwidth *bandwidth;                               /* NULL: none */
  char *const *dns_servers, *const *dns_searches, *const *dns_options; /* NULL or NULL-terminated */
};

/* Runs ADD through the list in order, each plugin given the result of the
 * one before; caches the final result and returns it in *RESULT.  On
 * failure runs DEL for the whole list and leaves nothing behind. */
int cni_add (const struct cni_ctx *ctx, const struct cni_network *net, const struct cni_pod *pod,
             struct cni_result **result, struct husk_error **err);

/* Runs CHECK in order with the cached result (a no-op for disableCheck or
 * configs older than 0.4.0). */
int cni_check (const struct cni_ctx *ctx, const struct cni_network *net, const struct cni_pod *pod,
               struct husk_error **err);

/* Runs DEL in reverse order for every cached attachment of the pod, with
 * the config, port mappings and result cached at ADD, then removes the
 * cache entry.  NET (may be NULL) is also torn down, without a prevResult,
 * when nothing was cached for it.  Idempotent: deleting what was never
 * added, or twice, succeeds.  A DEL without the netns (gone) or a retry of
 * one that did not finish is followed by the removal of the iptables
 * rules the plugins tagged for the pod and left (see rules.c); that one
 * only warns when it fails.  The cache entry goes once DEL worked, so a
 * failed DEL is retried with all ADD cached. */
int cni_del (const struct cni_ctx *ctx, const struct cni_network *net, const struct cni_pod *pod,
             struct husk_error **err);

/* The container ids with a readable cache entry (each once; a NULL-
 * terminated list the caller frees), for a sweep of those no pod owns any
 * more.  Unreadable entries are named in a warning. */
int cni_cached_ids (const struct cni_ctx *ctx, char ***ids, struct husk_error **err);

/* The cached ADD result of CONTAINER_ID on NETWORK, or *RESULT = NULL when
 * none is cached (for PodSandboxStatus after a restart). */
int cni_cached_result (const struct cni_ctx *ctx, const char *network, const char *container_id,
                       struct cni_result **result, struct husk_error **err);

#endif
