/* A container's record under --root/<id>/: state.json (written atomically),
 * the exec fifo and a copy of config.json.  The status is never stored: it
 * is derived from the init process (alive? its start time unchanged?) and
 * the fifo, as the runtime spec's lifecycle describes. */
#ifndef HUSK_RUNTIME_STATE_H
#define HUSK_RUNTIME_STATE_H

#include <stdbool.h>
#include <sys/types.h>

#include "husk/error.h"

#define STATE_OCI_VERSION "1.2.0"

enum container_status
{
  STATUS_CREATING,
  STATUS_CREATED,
  STATUS_RUNNING,
  STATUS_PAUSED,
  STATUS_STOPPED,
};

struct container_state
{
  char *id;
  char *state_dir;              /* --root/<id> */
  pid_t pid;                    /* init's pid on the host; 0 before clone */
  unsigned long long pid_start; /* /proc/<pid>/stat starttime, guards against pid reuse */
  char *bundle;
  char *rootfs;
  char *cgroup_path; /* absolute path in the cgroup filesystem, or NULL */
  char *created;     /* RFC 3339 */
  uid_t owner;
  bool creating; /* create has not finished */
  bool systemd_cgroup;
  char **annotations; /* k0, v0, k1, v1, ..., NULL */
};

const char *container_status_name (enum container_status status);

/* Rejects ids that are empty, too long, contain '/', or are "." / "..":
 * an id names a directory under --root. */
int state_validate_id (const char *id, struct husk_error **err);

/* Create and restore: fills a new container's STATE (id borrowed, the rest
 * newly allocated but the annotations, borrowed from the spec) for ID in
 * ROOT from the absolute bundle path BUNDLE and its ROOTFS, created now by
 * this user. */
void state_init_new (struct container_state *state, const char *root, const char *id, const char *bundle,
                     const char *rootfs, bool systemd_cgroup, char **annotations);

/* Path helpers (newly allocated). */
char *state_dir_path (const char *root, const char *id);
char *state_fifo_path (const char *state_dir);
char *state_config_path (const char *state_dir);

int state_write (const struct container_state *state, struct husk_error **err);
/* Loads ROOT/ID/state.json; a missing container is `container "ID" does not exist`. */
int state_load (const char *root, const char *id, struct container_state **out, struct husk_error **err);
void state_free (struct container_state *state);

/* Reads /proc/<pid>/stat's starttime; 0 if the process does not exist. */
unsigned long long state_proc_start_time (pid_t pid);
/* True if the init still exists (and is not a zombie) with the same start time. */
bool state_init_alive (const struct container_state *state);
enum container_status state_status (const struct container_state *state);

/* The OCI state document: {ociVersion, id, status, pid, bundle, annotations}
 * plus runc's rootfs/created/owner.  Newly allocated, pretty if PRETTY. */
char *state_oci_json (const struct container_state *state, enum container_status status, bool pretty);

/* RFC 3339 UTC timestamp with nanoseconds for now. */
char *state_now_rfc3339 (void);

#endif
