/* A container made from an image: its rootfs snapshot, its OCI bundle and
 * a small record, under IMAGE_ROOT/containers/<id>/.  This is the one piece
 * of code that turns an image plus a request into a container; the debug
 * CLI uses it now and the CRI server will. */
#ifndef HUSK_CRI_CONTAINERS_H
#define HUSK_CRI_CONTAINERS_H

#include <stdbool.h>

#include "cri/cni/cni.h"
#include "cri/spec/ocispec.h"
#include "husk/error.h"

struct snapshot_idmap;

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
  /* The network: "bridge" (CNI, the default), "none" (only lo) or
   * "host"; the pinned netns (NULL for host, and once released); the
   * bridge address (without prefix) and the port mappings given to
   * portmap (host_ip and protocol owned by the record). */
  char *network;
  char *netns;
  char *ip;
  struct cni_port_mapping *ports;
  size_t n_ports;
  bool detached;    /* runs under husk-monitor: the log and exit file are its */
  bool auto_remove; /* --rm: removed once it exits */
  bool tty;
  char *started;  /* RFC 3339, or NULL */
  char *finished; /* RFC 3339, or NULL */
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
  /* The network (OCISPEC_NETWORK_NONE gets a pinned netns with lo up),
   * and with BRIDGE the CNI conflist (NULL: containers_network_config)
   * and the port mappings. */
  bool bridge;
  const char *network_config;
  const struct cni_port_mapping *ports;
  size_t n_ports;
  bool auto_remove;
  bool detached;
};

/* Where the bridge network's conflist comes from: $HUSK_NETWORK_CONFIG,
 * else /etc/husk/container-network.conflist when it exists, else NULL
 * (the built-in one: bridge husk0, 10.89.0.0/16, portmap, firewall,
 * tuning). */
const char *containers_network_config (void);
/* The built-in conflist's text. */
const char *containers_default_network (void);

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

/* Starts the container through husk's runtime.  A detached one (see
 * the request) runs under husk-monitor, which holds its stdio, writes its
 * log (the CRI format) and exit file; a waiter process started here then
 * calls containers_finish when the monitor exits (podman's conmon
 * exit-command does the same).  Otherwise waits in the foreground,
 * records the exit code and stores it in *EXIT_CODE. */
int containers_start (const struct containers_ctx *ctx, const char *id, int *exit_code,
                      struct husk_error **err);

/* Starts a container that is not running again (start, restart): its
 * network made anew, then under husk-monitor as a detached one. */
int containers_start_again (const struct containers_ctx *ctx, const char *id, struct husk_error **err);

/* Once the container is no longer running: its exit code into the record,
 * its network released (CNI DEL, the netns unpinned) and, when it was run
 * with --rm, the container removed.  Idempotent; a running container is
 * left alone. */
int containers_finish (const struct containers_ctx *ctx, const char *id, struct husk_error **err);

/* "created", "running", "paused", "stopped", "exited (N)". */
char *containers_status (const struct containers_ctx *ctx, const struct container_record *rec);
/* True while the runtime has it created, running or paused. */
bool containers_running (const struct containers_ctx *ctx, const char *id);
/* The exit code the monitor wrote for a detached container, or the one
 * the record holds; false when none is known yet. */
bool containers_exit_code (const struct containers_ctx *ctx, const struct container_record *rec, int *code,
                           char **finished_at);

/* SIGTERM (or the image's StopSignal), then SIGKILL after TIMEOUT seconds;
 * *KILLED (may be NULL) is set true when it came to SIGKILL. */
int containers_stop (const struct containers_ctx *ctx, const char *id, int timeout, bool *killed,
                     struct husk_error **err);

/* Removes the runtime container, the rootfs and the record.  A running one
 * needs FORCE. */
int containers_remove (const struct containers_ctx *ctx, const char *id, bool force, struct husk_error **err);

/* The pieces huskd's CreateContainer shares with containers_create. */

/* A new random container id: 64 hex digits. */
char *containers_new_id (void);
/* IMAGE_ROOT/containers/<id>/bundle */
char *containers_bundle_dir (const char *image_root, const char *id);
/* The rootfs of container ID made from IMAGE: unpacks the layer snapshots
 * that are missing, then mounts its overlay (its layers idmapped when
 * IDMAP is not NULL); *ROOTFS gets the path. */
int containers_prepare_rootfs (const char *image_root, const char *id, const struct image *image,
                               bool readonly, const struct snapshot_idmap *idmap, char **rootfs,
                               struct husk_error **err);
/* Writes BUNDLE/config.json atomically, creating BUNDLE. */
int containers_write_config (const char *bundle, json_t *config, struct husk_error **err);

/* The netns (pinned under BUNDLE, with lo up) of every network but host,
 * set in CONFIG, and for the bridge network CNI ADD with the port
 * mappings; fills REC's netns and ip.  Nothing is left on failure. */
int containers_network_setup (const struct containers_ctx *ctx, struct container_record *rec,
                              const char *bundle, const struct container_create_request *req, json_t *config,
                              struct husk_error **err);
/* CNI DEL (warning only when it fails) and the netns unpinned; REC's
 * netns becomes NULL. */
void containers_network_release (const struct containers_ctx *ctx, struct container_record *rec);

/* One record of the CRI log: `<RFC3339Nano> <stdout|stderr> <F|P> <text>`;
 * TEXT and STAMP point into the line. */
struct containers_log_record
{
  long long ns;
  bool is_stderr, full; /* full: F, the end of a line */
  const char *text;
  size_t len;
  const char *stamp;
};

/* Parses LINE (LEN bytes, no newline); false for a line not in the format. */
bool containers_log_parse_record (const char *line, size_t len, struct containers_log_record *rec);
/* 2024-01-02T15:04:05[.fraction](Z|+hh:mm|-hh:mm) -> ns since the epoch;
 * *REST (may be NULL) after it. */
int containers_log_parse_time (const char *text, long long *out, const char **rest);
/* --since: RFC 3339, unix seconds, or a Go duration (1h30m, 10s, 500ms)
 * before NOW_NS. */
int containers_log_parse_since (const char *text, long long now_ns, long long *out, struct husk_error **err);

/* -p [IP:]HOST:CTR[/tcp|udp|sctp], as podman takes it; *OUT's strings are
 * new (freed by the caller). */
int containers_parse_publish (const char *arg, struct cni_port_mapping *out, struct husk_error **err);

/* The log file of a detached container (the CRI log format). */
char *containers_log_path (const struct containers_ctx *ctx, const char *id);
/* Its monitor's attach socket (cri/attach.h's protocol). */
char *containers_attach_path (const struct containers_ctx *ctx, const char *id);

#endif
