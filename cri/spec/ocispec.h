/* Turning an image config plus a request into an OCI runtime config: the
 * translation containerd's and CRI-O's spec generators do.  Pure: it reads
 * the image's /etc/passwd and /etc/group only to resolve the user. */
#ifndef HUSK_CRI_OCISPEC_H
#define HUSK_CRI_OCISPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "husk/error.h"
#include "image/images.h"

struct ocispec_mount
{
  const char *source;      /* host path */
  const char *destination; /* container path */
  bool readonly;
};

enum ocispec_network
{
  OCISPEC_NETWORK_NONE, /* a new, empty network namespace */
  OCISPEC_NETWORK_HOST, /* the host's */
};

struct ocispec_request
{
  const char *hostname;
  char **args;       /* replaces the image's Cmd; NULL: keep it */
  char **entrypoint; /* replaces the image's Entrypoint; NULL: keep it */
  char **env;        /* KEY=VALUE, override the image's by key */
  const char *workdir;
  const char *user;       /* "name", "uid", "uid:gid", ...; NULL: the image's */
  const char *user_field; /* names USER in errors; NULL: "--user" */
  bool terminal;
  bool readonly_rootfs;
  enum ocispec_network network;
  const struct ocispec_mount *mounts;
  size_t n_mounts;
  char **devices;       /* host device paths to pass in */
  int64_t memory_limit; /* bytes; 0: none */
  double cpus;          /* 0: none */
  int64_t pids_limit;   /* 0: none */
  const char *cgroups_path;
};

/* Builds the config for a container whose root filesystem is ROOTFS (an
 * absolute path; its /etc files resolve the user).  *OUT is a new JSON
 * document.  Errors name the option: `--user nobody2: no such user`. */
int ocispec_build (const struct image_config *image, const struct ocispec_request *req, const char *rootfs,
                   json_t **out, struct husk_error **err);

/* Merges KEY=VALUE lists: later entries replace earlier ones by key.
 * Returns a new NULL-terminated list. */
char **ocispec_merge_env (char *const *base, char *const *overrides);

/* Docker's default capability set ("CAP_X" names, NULL-terminated). */
extern const char *const ocispec_default_caps[];

#endif
