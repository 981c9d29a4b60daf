/* CNI results: the interfaces, addresses, routes and DNS a plugin list
 * reports after ADD, in the 0.3.x/0.4.0 shape (ips carry "version") and
 * the 1.0.0 one, and the pod IPs huskd reports in PodSandboxStatus. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cri/cni/internal.h"
#include "husk/cleanup.h"
#include "husk/util.h"

void
cni_result_free (struct cni_result *result)
{
  if (result == NULL)
    return;
  for (size_t i = 0; i < result->n_interfaces; i++)
    {
      free (result->interfaces[i].name);
      free (result->interfaces[i].mac);
      free (result->interfaces[i].sandbox);
    }
  for (size_t i = 0; i < result->n_ips; i++)
    {
      free (result->ips[i].address);
      free (result->ips[i].gateway);
    }
  for (size_t i = 0; i < result->n_routes; i++)
    {
      free (result->routes[i].dst);
      free (result->routes[i].gw);
    }
  free (result->interfaces);
  free (result->ips);
  free (result->routes);
  husk_strvfreep (&result->dns.nameservers);
  husk_strvfreep (&result->dns.search);
  husk_strvfreep (&result->dns.options);
  free (result->dns.domain);
  free (result->cni_version);
  json_decref (result->json);
  free (result);
}

static char *
optional_string (json_t *object, const char *key)
{
  return xstrdup (json_string_value (json_object_get (object, key)));
}

static char **
string_list (json_t *array)
{
  char **list = xcalloc (json_array_size (array) + 1, sizeof (char *));
  size_t n = 0;

  for (size_t i = 0; i < json_array_size (array); i++)
    if (json_is_string (json_array_get (array, i)))
      list[n++] = xstrdup (json_string_value (json_array_get (array, i)));
  return list;
}

/* 4 or 6 for a plain address, 0 for anything else. */
static int
address_family (const char *text)
{
  unsigned char buf[16];

  if (inet_pton (AF_INET, text, buf) == 1)
    return 4;
  if (inet_pton (AF_INET6, text, buf) == 1)
    return 6;
  return 0;
}

/* 4 or 6 for "ADDRESS/PREFIX" with a prefix that fits, 0 otherwise. */
static int
cidr_family (const char *text)
{
  const char *slash = strchr (text, '/');
  cleanup_free char *address = NULL;
  long long prefix;
  int family;

  if (slash == NULL)
    return 0;
  address = strndup (text, (size_t) (slash - text));
  family = address ? address_family (address) : 0;
  if (family == 0 || husk_parse_int64 (slash + 1, 0, family == 4 ? 32 : 128, &prefix) < 0)
    return 0;
  return family;
}

static int
parse_interfaces (json_t *list, struct cni_result *result, struct husk_error **err)
{
  result->interfaces = xcalloc (json_array_size (list) + 1, sizeof *result->interfaces);
  for (size_t i = 0; i < json_array_size (list); i++)
    {
      json_t *entry = json_array_get (list, i);
      struct cni_interface *iface = &result->interfaces[i];

      if (!json_is_string (json_object_get (entry, "name")))
        return husk_error_make (err, 0, "interfaces[%zu]: missing `name`", i);
      iface->name = optional_string (entry, "name");
      iface->mac = optional_string (entry, "mac");
      iface->sandbox = optional_string (entry, "sandbox");
      result->n_interfaces++;
    }
  return 0;
}

static int
parse_ip (json_t *entry, size_t index, size_t n_interfaces, struct cni_ip *ip, struct husk_error **err)
{
  const char *address = json_string_value (json_object_get (entry, "address"));
  const char *version = json_string_value (json_object_get (entry, "version"));
  json_t *gateway = json_object_get (entry, "gateway");
  json_t *interface = json_object_get (entry, "interface");

  ip->interface = -1;
  ip->family = address ? cidr_family (address) : 0;
  if (ip->family == 0)
    return husk_error_make (err, 0, "ips[%zu]: `address` must be ADDRESS/PREFIX", index);
  if (version != NULL && (version[0] - '0' != ip->family || version[1] != '\0'))
    return husk_error_make (err, 0, "ips[%zu]: version %s does not match address %s", index, version,
                            address);
  if (gateway != NULL && address_family (json_string_value (gateway) ?: "") != ip->family)
    return husk_error_make (err, 0, "ips[%zu]: bad `gateway`", index);
  if (interface != NULL
      && (!json_is_integer (interface) || json_integer_value (interface) < 0
          || (size_t) json_integer_value (interface) >= n_interfaces))
    return husk_error_make (err, 0, "ips[%zu]: `interface` is not an index into interfaces", index);
  if (interface != NULL)
    ip->interface = (int) json_integer_value (interface);
  ip->address = xstrdup (address);
  ip->gateway = xstrdup (json_string_value (gateway));
  return 0;
}

static int
parse_ips (json_t *list, struct cni_result *result, struct husk_error **err)
{
  result->ips = xcalloc (json_array_size (list) + 1, sizeof *result->ips);
  for (size_t i = 0; i < json_array_size (list); i++)
    {
      if (parse_ip (json_array_get (list, i), i, result->n_interfaces, &result->ips[i], err) < 0)
        return -1;
      result->n_ips++;
    }
  return 0;
}

static int
parse_routes (json_t *list, struct cni_result *result, struct husk_error **err)
{
  result->routes = xcalloc (json_array_size (list) + 1, sizeof *result->routes);
  for (size_t i = 0; i < json_array_size (list); i++)
    {
      json_t *entry = json_array_get (list, i);
      const char *dst = json_string_value (json_object_get (entry, "dst"));
      const char *gw = json_string_value (json_object_get (entry, "gw"));

      if (dst == NULL || cidr_family (dst) == 0)
        return husk_error_make (err, 0, "routes[%zu]: `dst` must be ADDRESS/PREFIX", i);
      if (gw != NULL && address_family (gw) == 0)
        return husk_error_make (err, 0, "routes[%zu]: bad `gw`", i);
      result->routes[i].dst = xstrdup (dst);
      result->routes[i].gw = xstrdup (gw);
      result->n_routes++;
    }
  return 0;
}

static void
parse_dns (json_t *dns, struct cni_dns *out)
{
  out->nameservers = string_list (json_object_get (dns, "nameservers"));
  out->search = string_list (json_object_get (dns, "search"));
  out->options = string_list (json_object_get (dns, "options"));
  out->domain = optional_string (dns, "domain");
}

/* Each list must be a list when present. */
static int
check_shape (json_t *json, struct husk_error **err)
{
  static const char *const lists[] = { "interfaces", "ips", "routes" };
  json_t *dns = json_object_get (json, "dns");

  if (!json_is_object (json))
    return husk_error_make (err, 0, "not a JSON object");
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
    {
      json_t *value = json_object_get (json, lists[i]);
      if (value != NULL && !json_is_array (value))
        return husk_error_make (err, 0, "`%s` is not a list", lists[i]);
    }
  if (dns != NULL && !json_is_object (dns))
    return husk_error_make (err, 0, "`dns` is not an object");
  return 0;
}

int
cni_result_from_json (json_t *json, struct cni_result **out, struct husk_error **err)
{
  struct cni_result *result;

  if (check_shape (json, err) < 0)
    return husk_error_wrap (err, "CNI result");
  result = xcalloc (1, sizeof *result);
  result->json = json_incref (json);
  result->cni_version = optional_string (json, "cniVersion");
  parse_dns (json_object_get (json, "dns"), &result->dns);
  if (parse_interfaces (json_object_get (json, "interfaces"), result, err) < 0
      || parse_ips (json_object_get (json, "ips"), result, err) < 0
      || parse_routes (json_object_get (json, "routes"), result, err) < 0)
    {
      cni_result_free (result);
      return husk_error_wrap (err, "CNI result");
    }
  *out = result;
  return 0;
}

int
cni_result_parse (const char *text, size_t len, struct cni_result **out, struct husk_error **err)
{
  json_error_t json_err;
  json_t *json = json_loadb (text, len, 0, &json_err);
  int ret;

  if (json == NULL)
    return husk_error_make (err, 0, "parse CNI result:%d:%d: %s", json_err.line, json_err.column,
                            json_err.text);
  ret = cni_result_from_json (json, out, err);
  json_decref (json);
  return ret;
}

static bool
ip_on_interface (const struct cni_result *result, const struct cni_ip *ip, const char *ifname)
{
  return ip->interface >= 0 && strcmp (result->interfaces[ip->interface].name, ifname) == 0;
}

static bool
any_ip_on_interface (const struct cni_result *result, const char *ifname)
{
  for (size_t i = 0; i < result->n_ips; i++)
    if (ip_on_interface (result, &result->ips[i], ifname))
      return true;
  return false;
}

char **
cni_result_pod_ips (const struct cni_result *result, const char *ifname)
{
  char **ips = xcalloc (result->n_ips + 1, sizeof (char *));
  bool by_interface;
  size_t n = 0;

  ifname = ifname ? ifname : CNI_DEFAULT_IFNAME;
  by_interface = any_ip_on_interface (result, ifname);
  for (int family = 4; family <= 6; family += 2)
    for (size_t i = 0; i < result->n_ips; i++)
      {
        const struct cni_ip *ip = &result->ips[i];

        if (ip->family != family || (by_interface && !ip_on_interface (result, ip, ifname)))
          continue;
        ips[n++] = strndup (ip->address, strcspn (ip->address, "/"));
        if (ips[n - 1] == NULL)
          abort ();
      }
  return ips;
}
