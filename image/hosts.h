/* Registry hosts configuration: mirrors and insecure registries, in the
 * spirit of containerd's hosts.toml but as one JSON file:
 *
 *   {"registries": {
 *      "docker.io": {"mirrors": ["http://127.0.0.1:5000"], "mirrorsOnly": false},
 *      "127.0.0.1:5001": {"insecure": true},
 *      "myreg:5000": {"server": "https://myreg:5000", "insecure": true}}}
 *
 * Used by the registry client and by the CRI server. */
#ifndef HUSK_IMAGE_HOSTS_H
#define HUSK_IMAGE_HOSTS_H

#include <stdbool.h>
#include <stddef.h>

#include "husk/error.h"

#define HOSTS_CONFIG_DEFAULT_PATH "/etc/husk/registries.json"
/* Where the API of docker.io really lives. */
#define HOSTS_DOCKER_HUB_SERVER "https://registry-1.docker.io"

/* One place to send distribution API requests for a registry domain. */
struct hosts_endpoint
{
  char *base_url; /* "https://registry-1.docker.io", "http://127.0.0.1:5000/prefix"; no "/v2", no trailing '/'
                   */
  char *host;     /* "host[:port]" whose credentials apply (the domain itself for its own server) */
  bool insecure;  /* skip TLS verification on https */
  bool is_mirror;
};

struct hosts_config;

/* Loads PATH.  Syntax errors name the file, line and column; a missing
 * file is an error (ENOENT). */
int hosts_config_load (const char *path, struct hosts_config **out, struct husk_error **err);
/* Loads HOSTS_CONFIG_DEFAULT_PATH; an absent file gives an empty config. */
int hosts_config_load_default (struct hosts_config **out, struct husk_error **err);
/* Parses JSON text; SOURCE names it in errors. */
int hosts_config_parse (const char *json_text, const char *source, struct hosts_config **out,
                        struct husk_error **err);
void hosts_config_free (struct hosts_config *cfg);

/* The endpoints to try, in order, for DOMAIN (as in a reference:
 * "docker.io", "127.0.0.1:5000"): its mirrors, then its own server unless
 * "mirrorsOnly".  CFG may be NULL.  The own server speaks plain HTTP when
 * the domain is insecure or loopback, HTTPS otherwise.  Returns the count;
 * free with hosts_endpoints_free. */
size_t hosts_config_endpoints (const struct hosts_config *cfg, const char *domain,
                               struct hosts_endpoint **out);
void hosts_endpoints_free (struct hosts_endpoint *endpoints, size_t n);

/* True when DOMAIN ("host[:port]") is localhost, 127.0.0.0/8 or ::1. */
bool hosts_is_loopback (const char *domain);
/* True when DOMAIN is marked insecure in CFG (which may be NULL). */
bool hosts_config_is_insecure (const struct hosts_config *cfg, const char *domain);

#endif
