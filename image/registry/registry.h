/* Client for the OCI distribution API v2 over libcurl: manifests by tag or
 * digest, blobs streamed into caller-given files with size and digest
 * checked on the way, parallel blob downloads, anonymous/Basic/Bearer auth,
 * mirrors and insecure registries from the hosts config, and retries.
 *
 * Errors are one line that starts with what was fetched, e.g.
 *   127.0.0.1:1/x:y: connect: Connection refused
 *   127.0.0.1:5000/x:y: unauthorized: authentication required
 *   127.0.0.1:5000/x:nope: manifest unknown
 *   127.0.0.1:5000/x: blob sha256:…: digest mismatch (got sha256:…)
 * so a caller only adds its verb ("pull …"). */
#ifndef HUSK_IMAGE_REGISTRY_H
#define HUSK_IMAGE_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "husk/error.h"
#include "image/digest.h"
#include "image/hosts.h"
#include "image/reference.h"

#define REGISTRY_MEDIA_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define REGISTRY_MEDIA_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define REGISTRY_MEDIA_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define REGISTRY_MEDIA_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"

/* Manifests larger than this are refused (containerd uses the same bound). */
#define REGISTRY_MANIFEST_MAX (4u << 20)

/* Fills *USERNAME and *PASSWORD (malloc'd) for HOST ("host[:port]", or
 * "docker.io") and returns true, or returns false for anonymous access. */
typedef bool (*registry_credentials_cb) (const char *host, char **username, char **password, void *user);
/* Blob INDEX of a fetch has DONE of TOTAL bytes. */
typedef void (*registry_progress_cb) (size_t index, uint64_t done, uint64_t total, void *user);

struct registry_options
{
  const struct hosts_config *hosts; /* borrowed; NULL: no mirrors, nothing insecure */
  registry_credentials_cb credentials;
  void *credentials_user;
  const char *user_agent;      /* NULL: "husk/HUSK_VERSION" */
  unsigned parallelism;        /* blobs at once */
  unsigned retries;            /* extra attempts on connection errors, 5xx, 429 */
  unsigned retry_delay_ms;     /* first backoff; doubles each time */
  unsigned connect_timeout_ms; /* per connection */
  unsigned request_timeout_ms; /* whole manifest or token request; 0: none */
  unsigned stall_timeout_s;    /* a transfer slower than low_speed_bytes/s for this long fails */
  unsigned low_speed_bytes;    /* the minimum rate over that window, bytes per second */
  /* Polled while transfers run (at least twice a second): true stops them
   * all with ECANCELED, e.g. when the client of a pull went away. */
  bool (*cancelled) (void *user);
  void *cancelled_user;
};

/* Defaults: parallelism 4, retries 3, 200 ms backoff, 30 s connect,
 * 60 s requests, under 1 byte/s for 30 s is a stall. */
void registry_options_init (struct registry_options *opts);

struct registry_client;
struct registry_client *registry_client_new (const struct registry_options *opts);
void registry_client_free (struct registry_client *client);
/* Static credentials for HOST, tried before the callback. */
void registry_client_add_credentials (struct registry_client *client, const char *host, const char *username,
                                      const char *password);

struct registry_manifest
{
  char *media_type; /* one of REGISTRY_MEDIA_* */
  char *data;       /* the exact bytes, NUL-terminated */
  size_t size;
  char digest[DIGEST_STR_SIZE];
};
void registry_manifest_free (struct registry_manifest *manifest);
bool registry_media_type_is_index (const char *media_type);

/* Fetches the manifest named by DIGEST if not NULL, else by REF's digest,
 * else by REF's tag.  The digest is always the sha256 of the bytes; a
 * Docker-Content-Digest header or a requested digest that disagrees with it
 * is an error.  Schema 1 manifests are refused ("unsupported media type"). */
int registry_fetch_manifest (struct registry_client *client, const struct reference *ref, const char *digest,
                             struct registry_manifest **out, struct husk_error **err);

/* Fetches REF's manifest; when it is an index, picks PLATFORM
 * ("os/arch[/variant]", NULL: the host's) and fetches that manifest.
 * *INDEX_OUT (if not NULL) receives the index, or NULL when there was none. */
int registry_resolve (struct registry_client *client, const struct reference *ref, const char *platform,
                      struct registry_manifest **manifest_out, struct registry_manifest **index_out,
                      struct husk_error **err);

/* Streams blob DIGEST into OUT_FD (a regular file, not O_APPEND; written
 * with pwrite from offset 0), checking the size and the sha256 as it goes.
 * Bytes already in the file are taken as a partial download and resumed
 * with a Range request (and dropped if they turn out wrong); a retry after a
 * dropped connection resumes too.  The caller owns naming and renaming. */
int registry_fetch_blob (struct registry_client *client, const struct reference *ref, const char *digest,
                         uint64_t expected_size, int out_fd, registry_progress_cb progress, void *user,
                         struct husk_error **err);

struct registry_blob_request
{
  const char *digest;
  uint64_t size;
  int out_fd;
};

/* Fetches N blobs, up to the client's parallelism at once (curl multi).
 * The first failure stops the others and is returned. */
int registry_fetch_blobs (struct registry_client *client, const struct reference *ref,
                          const struct registry_blob_request *blobs, size_t n, registry_progress_cb progress,
                          void *user, struct husk_error **err);

/* Asks DOMAIN's registry (its own server, not a mirror) for /v2/ with the
 * client's credentials for it, answering a Basic or Bearer challenge:
 * 0 when they are accepted (or none are needed), else an error such as
 * "log in to HOST: unauthorized: ...". */
int registry_check_login (struct registry_client *client, const char *domain, struct husk_error **err);

/* Picks the manifest for PLATFORM ("os/arch[/variant]"; NULL: the host's)
 * from an OCI index or Docker manifest list.  Without a variant the default
 * one is preferred (v8 on arm64, v7 on arm); with one it must match.  No
 * match is an error that lists the platforms the index has. */
int registry_select_platform (const char *index_json, const char *platform, char out_digest[DIGEST_STR_SIZE],
                              struct husk_error **err);
/* "linux/amd64" on x86-64, "linux/arm64/v8" on aarch64, ... */
const char *registry_default_platform (void);

/* BASE_URL "/v2/" REPOSITORY "/" KIND "/" OBJECT, e.g.
 * "http://127.0.0.1:5000/v2/x/y/manifests/latest". */
char *registry_url (const char *base_url, const char *repository, const char *kind, const char *object);

/* One challenge of a WWW-Authenticate header. */
struct registry_auth_param
{
  char *key; /* lower-case */
  char *value;
};
struct registry_challenge
{
  char *scheme; /* lower-case: "bearer", "basic" */
  struct registry_auth_param *params;
  size_t n_params;
};

/* Parses `Bearer realm="…",service="…",scope="…"` (and several challenges
 * in one header) into *OUT (N_OUT entries). */
int registry_parse_www_authenticate (const char *header, struct registry_challenge **out, size_t *n_out,
                                     struct husk_error **err);
void registry_challenges_free (struct registry_challenge *challenges, size_t n);
/* The value of KEY (case-insensitive) or NULL. */
const char *registry_challenge_param (const struct registry_challenge *challenge, const char *key);

#endif
