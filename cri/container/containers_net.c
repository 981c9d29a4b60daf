/* The network of a `husk container`: a pinned netns with lo up (none), and
 * for the default bridge network the CNI plugins on it, as rootful podman
 * does (bridge, portmap, firewall, tuning).  The ADD result is cached
 * apart from huskd's (IMAGE_ROOT/container-cni-cache), so huskd's sweep of
 * pods it does not know never deletes a CLI container's network. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cri/container/containers.h"
#include "cri/pod/sandbox_internal.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define NETWORK_CONFIG_FILE "/etc/husk/container-network.conflist"

/* Like podman's 87-podman-bridge.conflist, on its own bridge and subnet
 * so both can be used on one host (podman's is cni-podman0, 10.88/16). */
static const char default_network[]
    = "{\"cniVersion\": \"1.0.0\", \"name\": \"husk\", \"plugins\": ["
      "{\"type\": \"bridge\", \"bridge\": \"husk0\", \"isGateway\": true,"
      " \"ipMasq\": true, \"hairpinMode\": true,"
      " \"ipam\": {\"type\": \"host-local\", \"routes\": [{\"dst\": \"0.0.0.0/0\"}],"
      " \"ranges\": [[{\"subnet\": \"10.89.0.0/16\", \"gateway\": \"10.89.0.1\"}]]}},"
      "{\"type\": \"portmap\", \"capabilities\": {\"portMappings\": true}},"
      "{\"type\": \"firewall\"}, {\"type\": \"tuning\"}]}";

const char *
containers_default_network (void)
{
  return default_network;
}

const char *
containers_network_config (void)
{
  const char *env = getenv ("HUSK_NETWORK_CONFIG");

  if (env && env[0])
    return env;
  return access (NETWORK_CONFIG_FILE, F_OK) == 0 ? NETWORK_CONFIG_FILE : NULL;
}

static char *
cache_dir (const struct containers_ctx *ctx)
{
  return xasprintf ("%s/container-cni-cache", ctx->image_root);
}

static int
load_network (const char *path, struct cni_network **net, struct husk_error **err)
{
  if (path == NULL)
    return cni_config_parse (default_network, strlen (default_network), "the built-in network", false, net,
                             err);
  if (cni_config_load_file (path, net, err) < 0)
    return husk_error_wrap (err, "network config");
  return 0;
}

/* The netns's path in CONFIG's network namespace entry (one is there:
 * ocispec_build adds it for every network but host). */
static void
set_netns_path (json_t *config, const char *netns)
{
  json_t *namespaces = json_object_get (json_object_get (config, "linux"), "namespaces");
  size_t i;
  json_t *ns;

  json_array_foreach (namespaces, i, ns)
  {
    if (strcmp (json_string_value (json_object_get (ns, "type")) ?: "", "network") == 0)
      json_object_set_new (ns, "path", json_string (netns));
  }
}

/* The host's resolver, as podman gives a bridge container; not into a
 * read-only rootfs that lacks the file (the mount point cannot be made). */
static void
add_resolv_conf (json_t *config)
{
  json_t *root = json_object_get (config, "root");
  cleanup_free char *target
      = xasprintf ("%s/etc/resolv.conf", json_string_value (json_object_get (root, "path")) ?: "");
  struct stat st;

  if (access ("/etc/resolv.conf", R_OK) != 0)
    return;
  if (json_is_true (json_object_get (root, "readonly")) && lstat (target, &st) < 0)
    return;
  json_array_append_new (json_object_get (config, "mounts"),
                         json_pack ("{s:s, s:s, s:s, s:[s,s,s]}", "destination", "/etc/resolv.conf", "type",
                                    "bind", "source", "/etc/resolv.conf", "options", "rbind", "ro",
                                    "nosuid"));
}

static int
bridge_add (const struct containers_ctx *ctx, struct container_record *rec, const char *config_path,
            struct husk_error **err)
{
  cleanup_free char *cache = cache_dir (ctx);
  struct cni_ctx cni = { .cache_dir = cache };
  struct cni_pod pod = {
    .container_id = rec->id, .netns = rec->netns, .port_mappings = rec->ports, .n_port_mappings = rec->n_ports
  };
  struct cni_network *net = NULL;
  struct cni_result *result = NULL;
  char **ips;

  if (load_network (config_path, &net, err) < 0)
    return -1;
  /* Before ADD: a missing plugin would also stop the undoing DEL at
   * itself, leaving what the plugins before it made. */
  if (cni_network_check_plugins (net, NULL, err) < 0 || cni_add (&cni, net, &pod, &result, err) < 0)
    {
      husk_error_wrap (err, "network %s", net->name);
      cni_network_free (net);
      return -1;
    }
  ips = cni_result_pod_ips (result, NULL);
  if (ips && ips[0])
    rec->ip = xstrdup (ips[0]);
  husk_strvfreep (&ips);
  cni_result_free (result);
  cni_network_free (net);
  return 0;
}

int
containers_network_setup (const struct containers_ctx *ctx, struct container_record *rec, const char *bundle,
                          const struct container_create_request *req, json_t *config, struct husk_error **err)
{
  struct sandbox_ns_setup setup = { 0 };

  if (req->spec.network == OCISPEC_NETWORK_HOST)
    return 0;
  if (husk_mkdir_p (bundle, 0700, err) < 0)
    return -1;
  rec->netns = xasprintf ("%s/netns", bundle);
  setup.net_pin = rec->netns;
  if (sandbox_ns_pin (&setup, err) < 0)
    {
      free (rec->netns);
      rec->netns = NULL;
      return husk_error_wrap (err, "network namespace");
    }
  set_netns_path (config, rec->netns);
  if (!req->bridge)
    return 0;
  if (bridge_add (ctx, rec, req->network_config, err) < 0)
    {
      containers_network_release (ctx, rec);
      return -1;
    }
  add_resolv_conf (config);
  return 0;
}

void
containers_network_release (const struct containers_ctx *ctx, struct container_record *rec)
{
  struct husk_error *err = NULL;

  if (rec->netns == NULL)
    return;
  if (rec->network && strcmp (rec->network, "bridge") == 0)
    {
      cleanup_free char *cache = cache_dir (ctx);
      struct cni_ctx cni = { .cache_dir = cache };
      struct cni_pod pod = { .container_id = rec->id,
                             .netns = sandbox_ns_pinned (rec->netns) ? rec->netns : NULL,
                             .port_mappings = rec->ports,
                             .n_port_mappings = rec->n_ports };

      if (cni_del (&cni, NULL, &pod, &err) < 0)
        husk_error_report (&err, "husk: container network");
    }
  sandbox_ns_unpin (rec->netns);
  free (rec->netns);
  rec->netns = NULL;
}

int
containers_parse_publish (const char *arg, struct cni_port_mapping *out, struct husk_error **err)
{
  cleanup_free char *copy = xstrdup (arg);
  char *proto = strchr (copy, '/'), *ctr, *host, *ip = NULL;
  long long host_port, ctr_port;

  if (proto)
    *proto++ = '\0';
  if (proto && strcmp (proto, "tcp") != 0 && strcmp (proto, "udp") != 0 && strcmp (proto, "sctp") != 0)
    return husk_error_make (err, 0, "--publish `%s`: the protocol must be tcp, udp or sctp", arg);
  ctr = strrchr (copy, ':');
  if (ctr == NULL)
    return husk_error_make (err, 0, "--publish `%s`: expected [IP:]HOST:CTR[/PROTO]", arg);
  *ctr++ = '\0';
  host = strrchr (copy, ':');
  if (host)
    {
      *host++ = '\0';
      ip = copy;
    }
  else
    host = copy;
  if (husk_parse_int64 (host, 1, 65535, &host_port) < 0 || husk_parse_int64 (ctr, 1, 65535, &ctr_port) < 0)
    return husk_error_make (err, 0, "--publish `%s`: ports are numbers from 1 to 65535", arg);
  *out = (struct cni_port_mapping){ .host_port = (int) host_port,
                                    .container_port = (int) ctr_port,
                                    .protocol = xstrdup (proto ? proto : "tcp"),
                                    .host_ip = xstrdup (ip ? ip : "") };
  return 0;
}
