/* The registry hosts file (mirrors, insecure registries, server overrides)
 * parsed with jansson, and the endpoint list the client walks for a domain.
 * URLs are taken apart with libcurl's URL API. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/hosts.h"
#include "image/reference.h"

/* A mirror or server URL, taken apart once at load time. */
struct hosts_url
{
  char *scheme; /* NULL when the text had none: chosen per host later */
  char *host;   /* "host[:port]" */
  char *path;   /* "" or "/prefix" */
  int insecure; /* -1: inherit from the host's own entry */
};

struct hosts_registry
{
  char *domain;
  struct hosts_url *mirrors;
  size_t n_mirrors;
  struct hosts_url *server; /* NULL: the domain itself */
  bool insecure;
  bool mirrors_only;
};

struct hosts_config
{
  struct hosts_registry *registries;
  size_t n_registries;
};

static void
hosts_url_clear (struct hosts_url *url)
{
  free (url->scheme);
  free (url->host);
  free (url->path);
}

void
hosts_config_free (struct hosts_config *cfg)
{
  if (cfg == NULL)
    return;
  for (size_t i = 0; i < cfg->n_registries; i++)
    {
      struct hosts_registry *reg = &cfg->registries[i];
      for (size_t j = 0; j < reg->n_mirrors; j++)
        hosts_url_clear (&reg->mirrors[j]);
      free (reg->mirrors);
      if (reg->server)
        hosts_url_clear (reg->server);
      free (reg->server);
      free (reg->domain);
    }
  free (cfg->registries);
  free (cfg);
}

static char *
url_part (CURLU *u, CURLUPart part)
{
  char *value = NULL;
  char *copy;

  if (curl_url_get (u, part, &value, 0) != CURLUE_OK)
    return NULL;
  copy = xstrdup (value);
  curl_free (value);
  return copy;
}

static void
strip_path (char *path)
{
  size_t n = strlen (path);

  while (n > 0 && path[n - 1] == '/')
    path[--n] = '\0';
  if (n >= 3 && strcmp (path + n - 3, "/v2") == 0)
    path[n - 3] = '\0';
  n = strlen (path);
  while (n > 0 && path[n - 1] == '/')
    path[--n] = '\0';
}

static int
parse_url (const char *text, const char *where, struct hosts_url *out, struct husk_error **err)
{
  bool has_scheme = strstr (text, "://") != NULL;
  CURLU *u = curl_url ();
  cleanup_free char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
  cleanup_free char *query = NULL, *fragment = NULL, *user = NULL;
  CURLUcode rc;

  if (u == NULL)
    abort ();
  rc = curl_url_set (u, CURLUPART_URL, text, CURLU_DEFAULT_SCHEME | CURLU_NON_SUPPORT_SCHEME);
  if (rc == CURLUE_OK)
    {
      scheme = url_part (u, CURLUPART_SCHEME);
      host = url_part (u, CURLUPART_HOST);
      port = url_part (u, CURLUPART_PORT);
      path = url_part (u, CURLUPART_PATH);
      query = url_part (u, CURLUPART_QUERY);
      fragment = url_part (u, CURLUPART_FRAGMENT);
      user = url_part (u, CURLUPART_USER);
    }
  curl_url_cleanup (u);
  if (rc != CURLUE_OK || host == NULL || *host == '\0')
    return husk_error_make (err, 0, "%s: \"%s\" is not a URL (%s)", where, text,
                            rc != CURLUE_OK ? curl_url_strerror (rc) : "no host");
  if (strcmp (scheme, "http") != 0 && strcmp (scheme, "https") != 0)
    return husk_error_make (err, 0, "%s: \"%s\": scheme must be http or https", where, text);
  if (query || fragment || user)
    return husk_error_make (err, 0, "%s: \"%s\": credentials, query and fragment are not allowed", where,
                            text);
  out->scheme = has_scheme ? steal_pointer (&scheme) : NULL;
  out->host = port ? xasprintf ("%s:%s", host, port) : steal_pointer (&host);
  out->path = path ? steal_pointer (&path) : xstrdup ("");
  strip_path (out->path);
  out->insecure = -1;
  return 0;
}

static int
get_bool (json_t *value, const char *where, const char *key, bool *out, struct husk_error **err)
{
  if (!json_is_boolean (value))
    return husk_error_make (err, 0, "%s.%s: must be true or false", where, key);
  *out = json_is_true (value);
  return 0;
}

/* A mirror is "URL" or {"url": "URL", "insecure": BOOL}. */
static int
parse_mirror (json_t *value, const char *where, struct hosts_url *out, struct husk_error **err)
{
  const char *key;
  json_t *field;
  json_t *url;

  if (json_is_string (value))
    return parse_url (json_string_value (value), where, out, err);
  if (!json_is_object (value))
    return husk_error_make (err, 0, "%s: must be a URL string or an object with \"url\"", where);
  url = json_object_get (value, "url");
  if (!json_is_string (url))
    return husk_error_make (err, 0, "%s.url: must be a string", where);
  json_object_foreach (value, key, field)
  {
    if (strcmp (key, "url") != 0 && strcmp (key, "insecure") != 0)
      return husk_error_make (err, 0, "%s: unknown key \"%s\"", where, key);
  }
  if (parse_url (json_string_value (url), where, out, err) < 0)
    return -1;
  field = json_object_get (value, "insecure");
  if (field)
    {
      bool insecure = false;
      if (get_bool (field, where, "insecure", &insecure, err) < 0)
        return -1;
      out->insecure = insecure;
    }
  return 0;
}

static int
parse_mirrors (json_t *value, const char *where, struct hosts_registry *reg, struct husk_error **err)
{
  size_t i;
  json_t *item;

  if (!json_is_array (value))
    return husk_error_make (err, 0, "%s.mirrors: must be an array of URLs", where);
  reg->mirrors = xcalloc (json_array_size (value), sizeof *reg->mirrors);
  json_array_foreach (value, i, item)
  {
    cleanup_free char *item_where = xasprintf ("%s.mirrors[%zu]", where, i);
    reg->n_mirrors = i + 1;
    if (parse_mirror (item, item_where, &reg->mirrors[i], err) < 0)
      return -1;
  }
  return 0;
}

static int
parse_field (const char *key, json_t *value, const char *where, struct hosts_registry *reg,
             struct husk_error **err)
{
  if (strcmp (key, "mirrors") == 0)
    return parse_mirrors (value, where, reg, err);
  if (strcmp (key, "insecure") == 0)
    return get_bool (value, where, key, &reg->insecure, err);
  if (strcmp (key, "mirrorsOnly") == 0)
    return get_bool (value, where, key, &reg->mirrors_only, err);
  if (strcmp (key, "server") == 0)
    {
      cleanup_free char *server_where = xasprintf ("%s.server", where);
      if (!json_is_string (value))
        return husk_error_make (err, 0, "%s: must be a URL string", server_where);
      reg->server = xcalloc (1, sizeof *reg->server);
      return parse_url (json_string_value (value), server_where, reg->server, err);
    }
  return husk_error_make (err, 0, "%s: unknown key \"%s\" (known: mirrors, mirrorsOnly, insecure, server)",
                          where, key);
}

static int
parse_registry (const char *domain, json_t *value, struct hosts_registry *reg, struct husk_error **err)
{
  cleanup_free char *where = xasprintf ("registries.\"%s\"", domain);
  const char *key;
  json_t *field;

  reg->domain = xstrdup (strcmp (domain, "index.docker.io") == 0 ? REFERENCE_DEFAULT_DOMAIN : domain);
  if (!reference_domain_is_valid (domain))
    return husk_error_make (err, 0, "%s: not a registry host (want host or host:port)", where);
  if (!json_is_object (value))
    return husk_error_make (err, 0, "%s: must be an object", where);
  json_object_foreach (value, key, field)
  {
    if (parse_field (key, field, where, reg, err) < 0)
      return -1;
  }
  if (reg->mirrors_only && reg->n_mirrors == 0)
    return husk_error_make (err, 0, "%s: mirrorsOnly needs at least one mirror", where);
  return 0;
}

static int
parse_root (json_t *root, struct hosts_config *cfg, struct husk_error **err)
{
  json_t *registries;
  const char *key;
  json_t *value;

  if (!json_is_object (root))
    return husk_error_make (err, 0, "top level must be an object");
  json_object_foreach (root, key, value)
  {
    if (strcmp (key, "registries") != 0)
      return husk_error_make (err, 0, "unknown key \"%s\" (known: registries)", key);
  }
  registries = json_object_get (root, "registries");
  if (registries == NULL)
    return 0;
  if (!json_is_object (registries))
    return husk_error_make (err, 0, "registries: must be an object keyed by registry host");
  cfg->registries = xcalloc (json_object_size (registries), sizeof *cfg->registries);
  json_object_foreach (registries, key, value)
  {
    if (parse_registry (key, value, &cfg->registries[cfg->n_registries++], err) < 0)
      return -1;
  }
  return 0;
}

static int
parse_json (json_t *root, const json_error_t *jerr, const char *source, struct hosts_config **out,
            struct husk_error **err)
{
  struct hosts_config *cfg;

  if (root == NULL)
    return husk_error_make (err, 0, "parse registries config `%s`: line %d column %d: %s", source, jerr->line,
                            jerr->column, jerr->text);
  cfg = xcalloc (1, sizeof *cfg);
  if (parse_root (root, cfg, err) < 0)
    {
      json_decref (root);
      hosts_config_free (cfg);
      return husk_error_wrap (err, "registries config `%s`", source);
    }
  json_decref (root);
  *out = cfg;
  return 0;
}

int
hosts_config_parse (const char *json_text, const char *source, struct hosts_config **out,
                    struct husk_error **err)
{
  json_error_t jerr;
  json_t *root = json_loads (json_text, JSON_REJECT_DUPLICATES, &jerr);

  return parse_json (root, &jerr, source, out, err);
}

int
hosts_config_load (const char *path, struct hosts_config **out, struct husk_error **err)
{
  cleanup_free char *text = NULL;
  size_t len;

  if (husk_read_file (path, &text, &len, err) < 0)
    return husk_error_wrap (err, "load registries config");
  return hosts_config_parse (text, path, out, err);
}

int
hosts_config_load_default (struct hosts_config **out, struct husk_error **err)
{
  if (access (HOSTS_CONFIG_DEFAULT_PATH, F_OK) < 0 && errno == ENOENT)
    {
      *out = xcalloc (1, sizeof **out);
      return 0;
    }
  return hosts_config_load (HOSTS_CONFIG_DEFAULT_PATH, out, err);
}

static const struct hosts_registry *
find_registry (const struct hosts_config *cfg, const char *domain)
{
  if (cfg == NULL)
    return NULL;
  for (size_t i = 0; i < cfg->n_registries; i++)
    if (strcmp (cfg->registries[i].domain, domain) == 0)
      return &cfg->registries[i];
  return NULL;
}

bool
hosts_config_is_insecure (const struct hosts_config *cfg, const char *domain)
{
  const struct hosts_registry *reg = find_registry (cfg, domain);

  return reg != NULL && reg->insecure;
}

bool
hosts_is_loopback (const char *domain)
{
  cleanup_free char *host = NULL;
  const char *colon;
  struct in_addr v4;

  if (domain[0] == '[')
    {
      const char *close = strchr (domain, ']');
      host = strndup (domain + 1, close ? (size_t) (close - domain - 1) : strlen (domain + 1));
      if (host == NULL)
        abort ();
      return strcmp (host, "::1") == 0 || strcmp (host, "0:0:0:0:0:0:0:1") == 0;
    }
  colon = strchr (domain, ':');
  host = colon ? strndup (domain, (size_t) (colon - domain)) : xstrdup (domain);
  if (host == NULL)
    abort ();
  if (strcasecmp (host, "localhost") == 0)
    return true;
  return inet_pton (AF_INET, host, &v4) == 1 && (ntohl (v4.s_addr) >> 24) == 127;
}

/* No scheme written: plain HTTP for insecure and loopback hosts, as
 * containerd does; HTTPS for everything else. */
static void
endpoint_from_url (const struct hosts_url *url, bool inherited_insecure, bool is_mirror,
                   struct hosts_endpoint *ep)
{
  bool insecure = url->insecure >= 0 ? url->insecure : inherited_insecure;
  const char *scheme = url->scheme;

  if (scheme == NULL)
    scheme = (insecure || hosts_is_loopback (url->host)) ? "http" : "https";
  ep->base_url = xasprintf ("%s://%s%s", scheme, url->host, url->path);
  ep->host = xstrdup (url->host);
  ep->insecure = insecure;
  ep->is_mirror = is_mirror;
}

static void
endpoint_for_domain (const struct hosts_registry *reg, const char *domain, struct hosts_endpoint *ep)
{
  bool insecure = reg != NULL && reg->insecure;

  if (strcmp (domain, REFERENCE_DEFAULT_DOMAIN) == 0)
    ep->base_url = xstrdup (HOSTS_DOCKER_HUB_SERVER);
  else
    ep->base_url = xasprintf ("%s://%s", (insecure || hosts_is_loopback (domain)) ? "http" : "https", domain);
  ep->host = xstrdup (domain);
  ep->insecure = insecure;
  ep->is_mirror = false;
}

size_t
hosts_config_endpoints (const struct hosts_config *cfg, const char *domain, struct hosts_endpoint **out)
{
  const struct hosts_registry *reg = find_registry (cfg, domain);
  size_t n_mirrors = reg ? reg->n_mirrors : 0;
  bool own = reg == NULL || !reg->mirrors_only;
  struct hosts_endpoint *eps = xcalloc (n_mirrors + 1, sizeof *eps);
  size_t n = 0;

  for (size_t i = 0; i < n_mirrors; i++)
    {
      const struct hosts_url *mirror = &reg->mirrors[i];
      endpoint_from_url (mirror, hosts_config_is_insecure (cfg, mirror->host), true, &eps[n++]);
    }
  if (own && reg != NULL && reg->server != NULL)
    {
      endpoint_from_url (reg->server, reg->insecure, false, &eps[n]);
      free (eps[n].host);
      eps[n++].host = xstrdup (domain);
    }
  else if (own)
    endpoint_for_domain (reg, domain, &eps[n++]);
  *out = eps;
  return n;
}

void
hosts_endpoints_free (struct hosts_endpoint *endpoints, size_t n)
{
  if (endpoints == NULL)
    return;
  for (size_t i = 0; i < n; i++)
    {
      free (endpoints[i].base_url);
      free (endpoints[i].host);
    }
  free (endpoints);
}
