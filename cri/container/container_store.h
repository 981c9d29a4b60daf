/* CRI container records.  ROOT/containers/<id>/ holds the rootfs snapshot
 * (image/snapshot.h) and the bundle; next to them cri.json (the record,
 * replaced atomically) and config.pb (the packed ContainerConfig).  The
 * monitor's exit file STATE/exits/<id> says how a started container ended:
 * a lookup folds it into the record.  A cri.json that cannot be read is
 * rebuilt from what else is there (the bundle's annotations, config.pb,
 * the runtime's state through a hook) and saved in its place, so that a
 * damaged record never hides a container that runs. */
#ifndef HUSK_CRI_CONTAINER_STORE_H
#define HUSK_CRI_CONTAINER_STORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "husk/error.h"

/* The protobuf-c message (cri/proto/api.pb-c.h), by its tag, so that this
 * header does not need the generated include path. */
struct Runtime__V1__ContainerConfig;

enum cri_container_state
{
  CRI_CONTAINER_CREATED,
  CRI_CONTAINER_RUNNING,
  CRI_CONTAINER_EXITED,
};

struct cri_container
{
  char *id; /* 64 hex digits */
  char *sandbox_id;
  char *name;
  uint32_t attempt;
  char *image;     /* as kubelet named it (ImageSpec.image) */
  char *image_id;  /* config digest */
  char *image_ref; /* a repo digest, else the id */
  char *runtime_handler;
  char *log_path;    /* absolute; "" when kubelet gave none */
  char *stop_signal; /* the image's StopSignal, or NULL */
  enum cri_container_state state;
  int64_t created_at, started_at, finished_at; /* unix nanoseconds */
  int exit_code;
  bool oom_killed;
  char *reason, *message; /* NULL when there is none */
  pid_t pid, monitor_pid;
  /* /proc/<pid>/stat starttime of each, 0 when unknown: a pid reused by
   * another process is not mistaken for them. */
  unsigned long long pid_start, monitor_start;
  struct Runtime__V1__ContainerConfig *config; /* unpacked, owned */
};

void cri_container_free (struct cri_container *c);
void cri_containers_free (struct cri_container **list, size_t n);

struct container_store;

/* Fills in what only the runtime knows about container C, rebuilt from
 * disk with state CREATED: its runtime handler, state, pids, log path,
 * image ids (the store's rebuild hook). */
typedef void (*container_rebuild_fn) (struct container_store *store, struct cri_container *c, void *user);

struct container_store
{
  char *containers_dir; /* ROOT/containers */
  char *exit_dir;       /* STATE/exits */
  /* Serialises the checks and state changes of create, start, update and
   * remove.  Create and start hold it only to claim what they work on and
   * to record the outcome, so different containers' creates and starts
   * overlap. */
  pthread_mutex_t lock;
  pthread_cond_t idle; /* a claim was released */
  char **claims;       /* under LOCK: container ids being started, and
                          "create:<sandbox id>/<name>/<attempt>" of creates */
  /* The index: every record, sorted by id, read from disk at the first
   * use (LOADED) and replaced right after each write of its files, under
   * RECORDS_LOCK (taken after LOCK, never before it). */
  pthread_mutex_t records_lock;
  struct cri_container **records;
  size_t n_records;
  bool loaded;
  char **rebuild_warned; /* under RECORDS_LOCK: ids whose rebuild could
                            not be saved, warned about once */
  container_rebuild_fn rebuild;
  void *rebuild_user;
};

int container_store_open (const char *root, const char *state, struct container_store **out,
                          struct husk_error **err);
void container_store_free (struct container_store *store);

/* ROOT/containers/<id> and STATE/exits/<id> (malloc'd). */
char *container_store_dir (const struct container_store *store, const char *id);
char *container_store_exit_path (const struct container_store *store, const char *id);

/* With LOCK held: waits (releasing it meanwhile) until no claim begins
 * with PREFIX: a container id (or unique prefix) for its start, or
 * "create:<sandbox id>/" for the creates in a pod. */
void container_store_wait_idle (struct container_store *store, const char *prefix);
/* With LOCK held: whether KEY is claimed; claims it; releases it, waking
 * whoever waits. */
bool container_store_claimed (const struct container_store *store, const char *key);
void container_store_claim (struct container_store *store, const char *key);
void container_store_release (struct container_store *store, const char *key);

/* Writes cri.json atomically; with WITH_CONFIG config.pb as well; then
 * the index takes a copy of C.  Without WITH_CONFIG, a container the index
 * does not hold (removed meanwhile) is not written: errnum ENOENT. */
int container_save (struct container_store *store, const struct cri_container *c, bool with_config,
                    struct husk_error **err);

/* The rebuild hook, set once before the store is used by other threads. */
void container_store_set_rebuild (struct container_store *store, container_rebuild_fn fn, void *user);

/* By id or unique id prefix; an exit file that appeared is folded in.
 * Unknown: errnum ENOENT. */
int container_lookup (struct container_store *store, const char *id, struct cri_container **out,
                      struct husk_error **err);
/* Every container, from the index: no record file is read but at the
 * first use, when every record is.  A record that cannot be read then is
 * rebuilt (see the top of this file), saved in its place (the damaged file
 * is kept as cri.json.damaged) and warned about once.  Exit files that
 * appeared are folded in (one read of STATE/exits). */
int container_list (struct container_store *store, struct cri_container ***out, size_t *n,
                    struct husk_error **err);
/* As container_list, but each copy's config holds only the metadata,
 * labels and annotations (for the stats RPCs, which report no more of it). */
int container_list_attributes (struct container_store *store, struct cri_container ***out, size_t *n,
                               struct husk_error **err);
/* Calls FN with every record of the index (as container_list would copy
 * them), in place and under the index's lock: FN must not block, call
 * into the store or keep a pointer into a record (ListContainers packs
 * its reply there instead of copying each container first). */
typedef void (*container_read_fn) (const struct cri_container *const *records, size_t n, void *arg);
int container_store_read (struct container_store *store, container_read_fn fn, void *arg,
                          struct husk_error **err);
/* The id of the container named NAME, attempt ATTEMPT, in pod SANDBOX_ID
 * (malloc'd), or NULL when there is none. */
char *container_store_find_name (struct container_store *store, const char *sandbox_id, const char *name,
                                 uint32_t attempt);
/* Forgets the index; the next use reads every record from disk again (as
 * a restarted huskd would). */
void container_store_reload (struct container_store *store);
/* A deep copy of C. */
struct cri_container *cri_container_copy (const struct cri_container *c);

/* Removes the record files and the exit file; not an error when absent.
 * cri.json goes first: a lookup meanwhile finds no container rather than
 * half a record. */
int container_forget (struct container_store *store, const char *id, struct husk_error **err);

#endif
