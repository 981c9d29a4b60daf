/* The sandbox store's insides, shared by sandbox.c (records) and
 * sandbox_run.c (lifecycle). */
#ifndef HUSK_CRI_SANDBOX_STORE_H
#define HUSK_CRI_SANDBOX_STORE_H

#include <pthread.h>
#include <sys/types.h>

#include "cri/apparmor.h"
#include "cri/sandbox.h"

struct sandbox_store
{
  char *sandboxes_dir; /* ROOT/sandboxes */
  char *pins_dir;      /* STATE/sandboxes */
  char *cni_cache_dir; /* ROOT/cni-cache */
  char *cni_conf_dir, *cni_bin_dirs;
  pthread_mutex_t lock; /* guards what follows */
  pthread_cond_t idle;  /* a sandbox stopped being busy */
  struct sandbox **items;
  size_t n;
  char **reserved; /* "namespace/name/attempt" of runs in progress */
  /* Found at load, for sandbox_store_recover: runs that did not finish,
   * and ids with a directory but no readable record. */
  struct sandbox **unfinished;
  size_t n_unfinished;
  char **unreadable;
  /* sandbox_cgroup.c: the driver's form of parent RunPodSandbox takes;
   * STATE/cgroups-created.json; under cgroup_lock, the pod cgroup (name
   * below the mount) of each pod that holds one, once per pod. */
  bool systemd_cgroup;
  char *cgroups_record;
  pthread_mutex_t cgroup_lock;
  char **cgroup_users;
  const struct cri_apparmor *apparmor; /* the service's; NULL: AppArmor off */
};

struct sandbox *sandbox_copy (const struct sandbox *sb);
Runtime__V1__PodSandboxConfig *sandbox_config_copy (const Runtime__V1__PodSandboxConfig *config);
void sandbox_set_paths (struct sandbox_store *store, struct sandbox *sb);
/* shm_path, once ipcns_path is known. */
void sandbox_set_shm_path (struct sandbox *sb);
int sandbox_save (const struct sandbox *sb, bool with_config, struct husk_error **err);
ssize_t sandbox_store_find (struct sandbox_store *store, const char *id, struct husk_error **err);

#endif
