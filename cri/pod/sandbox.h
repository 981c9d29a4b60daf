/* Pod sandboxes: the namespaces a pod's containers share (network, IPC,
 * UTS pinned by bind mounts, so no process has to hold them; a pause
 * process only when the pod shares a PID namespace), the pod's hostname,
 * resolv.conf and hosts files, its CNI network, and a record that survives
 * huskd restarts.
 *
 * On disk: ROOT/sandboxes/<id>/ (persistent: config.pb = the packed
 * PodSandboxConfig, state.json written atomically, hostname, hosts,
 * resolv.conf) and STATE/sandboxes/<id>/ (volatile: the namespace pins
 * net, ipc, uts; the shm tmpfs).  The interface is shared by the sandbox RPCs
 * and the container RPCs. */
#ifndef HUSK_CRI_SANDBOX_H
#define HUSK_CRI_SANDBOX_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cri/proto/api.pb-c.h"
#include "cri/spec/userns.h"
#include "husk/error.h"

enum sandbox_state
{
  SANDBOX_READY,
  SANDBOX_NOTREADY,
};

struct sandbox
{
  char *id; /* 64 hex digits */
  char *name, *namespace_, *uid;
  uint32_t attempt;
  enum sandbox_state state;
  int64_t created_at; /* unix nanoseconds */
  char *runtime_handler;
  char *dir;       /* ROOT/sandboxes/<id> */
  char *state_dir; /* STATE/sandboxes/<id> */
  /* Namespace files containers join; NULL means the host's (NODE mode). */
  char *netns_path, *ipcns_path, *utsns_path;
  /* The pod's own user namespace (userns_options mode POD), which owns the
   * three above; NULL: the host's.  Its mappings are in config. */
  char *userns_path;
  /* The pause process's pid namespace (/proc/<pid>/ns/pid) when the pod
   * shares one (NamespaceMode POD); NULL otherwise. */
  char *pidns_path;
  pid_t pause_pid;
  bool network_down;                                   /* stopped: CNI DEL done, pause killed */
  bool creating;                                       /* RunPodSandbox not finished: rolled back at load */
  bool busy;                                           /* the store's: a stop or remove is running on it */
  unsigned long long pause_start_time;                 /* /proc/<pid>/stat starttime: guards pid reuse */
  char *hostname_path, *hosts_path, *resolv_conf_path; /* files containers bind-mount */
  /* The pod's /dev/shm, shared by its containers: a tmpfs in state_dir
   * for a pod IPC namespace, the host's /dev/shm for NODE. */
  char *shm_path;
  char *cgroup_parent;                   /* from linux.cgroup_parent, or NULL */
  bool cgroup_held;                      /* counted among the users of its pod cgroup */
  char **ips;                            /* pod IPs from CNI, IPv4 first; never NULL */
  Runtime__V1__PodSandboxConfig *config; /* unpacked, owned; never NULL */
  /* Why its record could not be read, or NULL.  Such a pod is NOTREADY,
   * known by what is on disk (pins, pause process, CNI cache), and Stop
   * and Remove clean it up like any other. */
  char *damaged;
};

void sandbox_free (struct sandbox *sb);

/* CONFIG's user namespace (linux.security_context.namespace_options.
 * userns_options), checked: EINVAL naming the field otherwise. */
int sandbox_userns (const Runtime__V1__PodSandboxConfig *config, struct cri_userns *out,
                    struct husk_error **err);

struct sandbox_store;

/* ROOT and STATE as huskd's --root and --state. */
int sandbox_store_open (const char *root, const char *state, struct sandbox_store **out,
                        struct husk_error **err);
void sandbox_store_free (struct sandbox_store *store);

/* The cgroup driver (huskd's cgroup_driver): SYSTEMD, RunPodSandbox takes
 * only systemd slices as linux.cgroup_parent (kubelet's cgroupDriver
 * systemd: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-
 * pod<uid>.slice", mapped to that cgroupfs directory), else only cgroupfs
 * paths ("/kubepods/burstable/pod<uid>"). */
void sandbox_store_set_cgroup_driver (struct sandbox_store *store, bool systemd);
/* What huskd found of AppArmor (it outlives the store): the pause process
 * runs under the pod's profile. */
struct cri_apparmor;
void sandbox_store_set_apparmor (struct sandbox_store *store, const struct cri_apparmor *apparmor);

/* PARENT's form against the driver, and that it maps to a cgroup: EINVAL
 * naming PARENT and the driver otherwise.  NULL or "" is fine. */
int sandbox_cgroup_check (const char *parent, bool systemd, struct husk_error **err);
/* The pod cgroup PARENT names, below the cgroup mount: a slice (the last
 * component of PARENT) as systemd nests it ("/a.slice/a-b.slice" for
 * "a-b.slice"), a path as the runtime resolves it; "" for the root, *NAME
 * NULL for no PARENT. */
int sandbox_cgroup_name (const char *parent, char **name, struct husk_error **err);

/* Finds a sandbox by id or unique id prefix; a copy the caller frees.
 * Unknown: errnum ENOENT. */
int sandbox_lookup (struct sandbox_store *store, const char *id, struct sandbox **out,
                    struct husk_error **err);

/* Every sandbox (copies). */
int sandbox_list (struct sandbox_store *store, struct sandbox ***out, size_t *n, struct husk_error **err);
/* As sandbox_list, but brief copies for ListPodSandbox and the stats
 * RPCs: each one's config holds only the metadata, labels and annotations,
 * and of the strings only id, name, namespace_, uid, runtime_handler,
 * netns_path and cgroup_parent are there (the other paths NULL, ips empty). */
int sandbox_list_attributes (struct sandbox_store *store, struct sandbox ***out, size_t *n,
                             struct husk_error **err);
void sandboxes_free (struct sandbox **list, size_t n);

/* ---------------------------------------------------------------- lifecycle
 * Runs of different pods, and stops and removes of different pods, go in
 * parallel; two on the same pod wait for each other.  Lookups and lists
 * never wait for them.  Errors carry errnum EINVAL (a bad field, named),
 * EEXIST (a live sandbox with the same name, namespace and attempt),
 * ENONET (no CNI network config) or another errno. */

/* The CNI config dir and plugin dirs (NULL: cni.h's defaults); the CNI
 * result cache lives in ROOT/cni-cache. */
void sandbox_store_set_network (struct sandbox_store *store, const char *conf_dir, const char *bin_dirs);
/* One line at start: the CNI network pods will get (its file, plugins and
 * the other configs there it passes over), or a warning that there is none. */
void sandbox_store_log_network (struct sandbox_store *store);

/* After a crash: rolls back every RunPodSandbox that did not finish (its
 * CNI network, the processes in its network namespace, the pins, the
 * directories), and so a pod whose record is damaged and of which nothing
 * runs; one whose CNI DEL fails stays, NOTREADY, for RemovePodSandbox to
 * retry.  A damaged record of a pod that runs is listed NOTREADY.  Pins
 * without any record are removed when their namespaces are gone and left
 * alone when not (ROOT not mounted yet).  Then every CNI cache entry no
 * pod owns gets its DEL and goes.  A warning for each.  Call once, after
 * sandbox_store_set_network and before serving. */
void sandbox_store_recover (struct sandbox_store *store);

/* Creates the pod: namespaces, pause process, CNI network, files and the
 * record, which is on disk before this returns.  CONFIG is copied.  On
 * failure everything done is undone.  *ID: the new id, caller frees. */
int sandbox_run (struct sandbox_store *store, const Runtime__V1__PodSandboxConfig *config,
                 const char *runtime_handler, char **id, struct husk_error **err);

/* CNI DEL, kills the pause process, unmounts the pod's /dev/shm, marks it
 * NOTREADY.  The namespace pins stay until remove (containers may still
 * hold them, as with containerd).  *WAS_READY: this call stopped a READY
 * pod (false for a stopped one, which succeeds).  Unknown id: ENOENT. */
int sandbox_stop (struct sandbox_store *store, const char *id, bool *was_ready, struct husk_error **err);

/* Stops it if needed, unmounts the pins and removes its directories and
 * record.  Unknown id: ENOENT. */
int sandbox_remove (struct sandbox_store *store, const char *id, struct husk_error **err);

/* ------------------------------------------------- handlers that own the pod
 * (sandbox_handler.c; `"sandbox": "runtime"` in huskd.json: runsc).  Start:
 * after sandbox_run, creates and starts the pod's infra container (id: the
 * pod's, process husk-pause, container-type sandbox) through RT in the
 * pod's namespaces and cgroup parent; EINVAL for a pod on the host's
 * network.  Stop: `delete --force` of it (the whole sandbox), nothing when
 * RT does not know it.  Running: RT says it runs. */
struct huskd_runtime;
/* Before sandbox_run: what RT refuses (host network, privileged), EINVAL. */
int sandbox_handler_check (const struct huskd_runtime *rt, const Runtime__V1__PodSandboxConfig *config,
                           struct husk_error **err);
int sandbox_handler_start (const struct huskd_runtime *rt, const struct sandbox *sb, struct husk_error **err);
int sandbox_handler_stop (const struct huskd_runtime *rt, const char *sandbox_id, struct husk_error **err);
bool sandbox_handler_running (const struct huskd_runtime *rt, const char *sandbox_id);

#endif
