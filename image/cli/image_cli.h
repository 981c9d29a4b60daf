/* `husk image VERB`: the image debug CLI (served from husk-image.so). */
#ifndef HUSK_IMAGE_CLI_H
#define HUSK_IMAGE_CLI_H

#include <stdbool.h>

#include "husk/error.h"
#include "image/hosts.h"
#include "image/registry.h"
#include "image/store.h"

/* Options every image and container verb shares: where images live and
 * how registries are reached. */
struct image_cli_env
{
  const char *root;                   /* --root, default /var/lib/husk */
  const char *registries_file;        /* --registries, default /etc/husk/registries.json if present */
  const char *creds;                  /* --creds USER:PASS for the pulled registry */
  unsigned long long max_image_bytes; /* image pull --max-size; 0: the default */
};

/* Opens the store and a registry client as ENV says. */
int image_cli_open (const struct image_cli_env *env, struct store **store, struct hosts_config **hosts,
                    struct registry_client **client, const char *creds_host, struct husk_error **err);

/* Pulls REF with a progress display on stderr (in-place on a terminal,
 * one line per layer otherwise); PRINT_ID prints the image id on stdout. */
int image_cli_pull (const struct image_cli_env *env, const char *ref, const char *platform, bool print_id,
                    struct husk_error **err);

/* Parses the group options (--root, --registries, --help) every image and
 * container verb takes; returns the index of the verb. */
int image_cli_parse_env (const char *group, const char *usage, int argc, char **argv,
                         struct image_cli_env *env, struct husk_error **err);

int image_cli_main (int argc, char **argv, struct husk_error **err);

#endif
