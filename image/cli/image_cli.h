/* `husk image VERB`: the image debug CLI (served by husk-image). */
#ifndef HUSK_IMAGE_CLI_H
#define HUSK_IMAGE_CLI_H

#include <stdbool.h>

#include "husk/error.h"
#include "image/hosts.h"
#include "image/registry/registry.h"
#include "image/store.h"

/* Who uses an image: the plugin's container code (cri/cli) fills it in,
 * as image/ knows no containers.  LIST gives the ids of the containers
 * made from image IMAGE_ID (NULL-terminated; NULL with *ERR on failure);
 * REMOVE removes one, stopping it first. */
struct image_cli_users
{
  char **(*list) (const char *root, const char *image_id, struct husk_error **err);
  int (*remove) (const char *root, const char *container_id, struct husk_error **err);
};

/* Options every image and container verb shares: where images live and
 * how registries are reached. */
struct image_cli_env
{
  const struct image_cli_users *users; /* NULL: no containers to ask */
  const char *root;                    /* --root, default /var/lib/husk */
  const char *registries_file;         /* --registries, default /etc/husk/registries.json if present */
  const char *creds;                   /* --creds USER:PASS for the pulled registry */
  unsigned long long max_image_bytes;  /* image pull --max-size; 0: the default */
  const char *authfile;                /* --authfile; NULL: REGISTRY_AUTH_FILE or the default chain */
  bool quiet;                          /* pull -q: no progress */
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

/* USERS may be NULL.  ERR's errnum says how `image rm` failed: EBUSY in
 * use by a container, ENOENT no such image (podman's exit codes 2, 1). */
int image_cli_main (int argc, char **argv, const struct image_cli_users *users, struct husk_error **err);

#endif
