/* Registry credentials in the containers-auth.json format that podman,
 * skopeo and buildah share:
 *   {"auths": {"HOST[:PORT]": {"auth": base64("USER:PASSWORD")}}}
 * `husk image login` writes it; `husk image pull` and huskd's PullImage
 * (when kubelet passes no auth) read it. */
#ifndef HUSK_IMAGE_AUTH_FILE_H
#define HUSK_IMAGE_AUTH_FILE_H

#include <stdbool.h>

#include "husk/error.h"

/* The file login writes and pulls read first, as containers-auth.json(5)
 * says: $REGISTRY_AUTH_FILE, else $XDG_RUNTIME_DIR/containers/auth.json,
 * else /run/containers/UID/auth.json (huskd as root: /run/containers/0/).
 * malloc'd. */
char *auth_file_default_path (void);

/* Looks HOST up in PATH: 1 and *USER, *PASSWORD (malloc'd) when found, 0
 * when the file or the entry is not there, -1 when the file is unreadable
 * or not the format (the error names the file).  Keys written as
 * "https://HOST/v1/" (docker's) match HOST too. */
int auth_file_lookup (const char *path, const char *host, char **user, char **password,
                      struct husk_error **err);

/* Sets HOST's entry in PATH, keeping every other key; creates PATH (mode
 * 0600) and its directory (0700).  The write is atomic (temp + rename). */
int auth_file_store (const char *path, const char *host, const char *user, const char *password,
                     struct husk_error **err);

/* Removes HOST's entry (or every entry when HOST is NULL); *REMOVED says
 * whether there was one. */
int auth_file_remove (const char *path, const char *host, bool *removed, struct husk_error **err);

/* A registry_credentials_cb: PATH_OR_NULL (a const char *), or when NULL
 * the default file, then the read-only fallbacks
 * ${XDG_CONFIG_HOME:-~/.config}/containers/auth.json and
 * ~/.docker/config.json.  A broken file is a warning, not a failed pull. */
bool auth_file_credentials (const char *host, char **user, char **password, void *path_or_null);

/* base64 of "USER:PASSWORD" (malloc'd), and back: -1 when TEXT is not
 * base64 of something with a colon. */
char *auth_file_encode (const char *user, const char *password);
int auth_file_decode (const char *text, char **user, char **password);

#endif
