/* `husk image VERB`: the image debug CLI (served from husk-image.so). */
#ifndef HUSK_IMAGE_CLI_H
#define HUSK_IMAGE_CLI_H

#include <stdbool.h>

#include "husk/error.h"
#include "image/hosts.h"
#include "image/registry/registry.h"
#include "image/store.h"

/* Options every image and container verb shares: where images live and
 * how registries are reached. */
struct image_cli_env
{
  const char *root;                   /* --root, default /var/lib/husk */
  const char *registries_file;        /* --registries, default /etc/husk/registries.json if present */
  const char *creds;                  /* --creds USER:PASS for the pulled registry */
  unsigned long long max_image_bytes; /* image pull --max-size; 0: the default */
  const char *authfile;               /* --authfile; NULL: REGISTRY_AUTH_FILE or the default chain */
  bool quiet;                         /* pull -q: no progress */
};

/* Opens the store and a registry client as ENV says. */
int image_cli_open (const struct image_cli_env *env, struct store **store, struct hosts_config **hosts,
                    struct registry_client **client, const char *creds_host, struct husk_error **err);

/* Only the registry client (login needs no store). */
int image_cli_open_registry (const struct image_cli_env *env, struct hosts_config **hosts,
                             struct registry_client **client, const char *creds_host,
                             struct husk_error **err);

/* Pulls REF with a progress display on stderr (one line per layer, redrawn
 * in place on a terminal at most 10 times a second; otherwise a line per
 * layer as it finishes); PRINT_ID prints the image id on stdout.
 * Credentials: ENV->creds, else the auth file (image/auth_file.h). */
int image_cli_pull (const struct image_cli_env *env, const char *ref, const char *platform, bool print_id,
                    struct husk_error **err);

/* Parses the group options (--root, --registries, --help) every image and
 * container verb takes; returns the index of the verb.  A missing value
 * and an unknown option are errors naming it. */
int image_cli_parse_env (const char *group, const char *usage, int argc, char **argv,
                         struct image_cli_env *env, struct husk_error **err);

int image_cli_main (int argc, char **argv, struct husk_error **err);

#endif
