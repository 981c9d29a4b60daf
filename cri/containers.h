/* A container made from an image: its rootfs snapshot, its OCI bundle and
 * a small record, under IMAGE_ROOT/containers/<id>/.  This is the one piece
 * of code that turns an image plus a request into a container; the debug
 * CLI uses it now and the CRI server will. */
#ifndef HUSK_CRI_CONTAINERS_H
#define HUSK_CRI_CONTAINERS_H

#include <stdbool.h>

#include "cri/ocispec.h"
#include "husk/error.h"

struct cdi_registry;

struct containers_ctx
{
  const char *image_root;   /* /var/lib/husk */
  const char *runtime_root; /* /run/husk/runtime */
};

struct container_record
{
  char *id;
  char *name;
  char *image;    /* as the user named it */
  char *image_id; /* config digest */
  char *created;  /* RFC 3339 */
  char *command;  /* args joined by spaces, for listings */
  bool has_exit_code;
  int exit_code;
  char *stop_signal; /* the image's StopSignal, or NULL */
};

void container_record_free (struct container_record *rec);

struct container_create_request
{
  const char *name;  /* NULL: derived from the id */
  const char *image; /* must be present in the store */
  struct ocispec_request spec;
  bool seccomp_unconfined; /* no seccomp filter; default: RuntimeDefault */
  /* CDI: the registry (NULL: none), the names asked for (--device
   * vendor/class=name, --gpus), and which NVIDIA_VISIBLE_DEVICES counts
   * (enum cdi_nvidia_env: -e, or also the image's ENV). */
  struct cdi_registry *cdi;
  char **cdi_names;
  int nvidia_env;
};

/* Creates the snapshot, bundle and record; *ID gets the new id.  Nothing is
 * left behind on failure. */
int containers_create (const struct containers_ctx *ctx, const struct container_create_request *req,
                       char **id, struct husk_error **err);

/* Finds a container by id, unique id prefix or name. */
int containers_lookup (const struct containers_ctx *ctx, const char *name_or_id,
                       struct container_record **out, struct husk_error **err);
/* Every container, in no particular order. */
int containers_list (const struct containers_ctx *ctx, struct container_record ***out, size_t *n,
                     struct husk_error **err);
void container_records_free (struct container_record **recs, size_t n);

/* Starts the container through husk's runtime.  DETACH: returns once it
 * runs, with its stdout/stderr going to its log file.  Otherwise waits,
 * records the exit code and stores it in *EXIT_CODE. */
int containers_start (const struct containers_ctx *ctx, const char *id, bool detach, int *exit_code,
                      struct husk_error **err);

/* "created", "running", "stopped", "exited (N)". */
char *containers_status (const struct containers_ctx *ctx, const struct container_record *rec);

/* SIGTERM (or the image's StopSignal), then SIGKILL after TIMEOUT seconds. */
int containers_stop (const struct containers_ctx *ctx, const char *id, int timeout, struct husk_error **err);

/* Removes the runtime container, the rootfs and the record.  A running one
 * needs FORCE. */
int containers_remove (const struct containers_ctx *ctx, const char *id, bool force, struct husk_error **err);

/* The pieces huskd's CreateContainer shares with containers_create. */

/* A new random container id: 64 hex digits. */
char *containers_new_id (void);
/* IMAGE_ROOT/containers/<id>/bundle */
char *containers_bundle_dir (const char *image_root, const char *id);
/* The rootfs of container ID made from IMAGE: unpacks the layer snapshots
 * that are missing, then mounts its overlay; *ROOTFS gets the path. */
int containers_prepare_rootfs (const char *image_root, const char *id, const struct image *image,
                               bool readonly, char **rootfs, struct husk_error **err);
/* Writes BUNDLE/config.json atomically, creating BUNDLE. */
int containers_write_config (const char *bundle, json_t *config, struct husk_error **err);

/* The log file of a detached container. */
char *containers_log_path (const struct containers_ctx *ctx, const char *id);

#endif
