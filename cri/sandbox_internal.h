/* What sandbox.c, sandbox_ns.c and sandbox_files.c share and nobody else
 * needs: namespace pinning, the pause process, the pod's files. */
#ifndef HUSK_CRI_SANDBOX_INTERNAL_H
#define HUSK_CRI_SANDBOX_INTERNAL_H

#include <stdbool.h>
#include <sys/types.h>

#include "cri/cni/cni.h"
#include "cri/sandbox.h"

/* One sysctl to write inside the pod's namespaces. */
struct sandbox_sysctl
{
  char *path; /* /proc/sys/net/ipv4/ip_forward */
  char *value;
};

/* The namespaces to create and pin; a NULL pin is not created (host's). */
struct sandbox_ns_setup
{
  const char *net_pin, *ipc_pin, *uts_pin;
  /* The pod's user namespace (USERNS->pod): made first, with USERNS's
   * mappings, and the three above are made inside it, owned by it. */
  const char *user_pin;
  const struct cri_userns *userns;
  const char *hostname; /* set in the new uts namespace; NULL: none */
  const struct sandbox_sysctl *sysctls;
  size_t n_sysctls;
  const char *apparmor_profile; /* the pause process's, at its execve; NULL: none */
};

/* Creates the namespaces in a forked child that bind-mounts them onto the
 * pins (empty files made here), sets the hostname, brings lo up and writes
 * the sysctls, then exits.  On failure nothing stays mounted. */
int sandbox_ns_pin (const struct sandbox_ns_setup *setup, struct husk_error **err);
/* Unmounts and unlinks a pin; a missing one is fine. */
void sandbox_ns_unpin (const char *pin);
/* The pod's /dev/shm: a tmpfs at PATH (created), and its unmount (not
 * an error when it is not mounted). */
int sandbox_shm_mount (const char *path, const struct cri_userns *userns, struct husk_error **err);
void sandbox_shm_unmount (const char *path);

/* SIGKILLs every process in the network namespace pinned at PIN (none
 * when it is not pinned); returns how many. */
int sandbox_ns_kill_members (const char *pin);
/* True when PIN is a mounted namespace file (false after a reboot). */
bool sandbox_ns_pinned (const char *pin);

/* Starts the pause process, pid 1 of a new pid namespace, inside the
 * pinned namespaces of SETUP (NULL: the host's; in the pod's user namespace
 * first, as its root, when it has one), named `husk-pause SANDBOX_ID`.
 * It is reparented away from huskd so it outlives huskd restarts.
 * *START_TIME guards against pid reuse. */
int sandbox_pause_start (const char *sandbox_id, const struct sandbox_ns_setup *setup, pid_t *pid,
                         unsigned long long *start_time, struct husk_error **err);
/* The pause process of SANDBOX_ID by its command line (for a record that
 * lost its pid), or 0. */
pid_t sandbox_pause_find (const char *sandbox_id, unsigned long long *start_time);
/* Kills it (and with it the whole pid namespace) and waits until gone. */
void sandbox_pause_kill (pid_t pid, unsigned long long start_time);
/* /proc/PID/stat starttime, 0 when PID is gone or a zombie. */
unsigned long long sandbox_proc_start_time (pid_t pid);

/* Validates CONFIG's sysctls for the pod's namespaces (EINVAL naming the
 * key otherwise) and returns them as /proc/sys paths. */
int sandbox_sysctls (const Runtime__V1__PodSandboxConfig *config, bool pod_net, bool pod_ipc,
                     struct sandbox_sysctl **out, size_t *n, struct husk_error **err);
void sandbox_sysctls_free (struct sandbox_sysctl *list, size_t n);

/* hostname, hosts and resolv.conf in SB->dir, from SB->config and SB->ips. */
/* A Kubernetes quantity ("10M", "1.5Gi", "500m") as a number; -1 when
 * TEXT is not one. */
int sandbox_parse_quantity (const char *text, double *value);
/* The pod's kubernetes.io/{ingress,egress}-bandwidth annotations for CNI's
 * bandwidth capability; *LIMITED false when there are none.  A bad value
 * is EINVAL naming the annotation. */
int sandbox_bandwidth (const Runtime__V1__PodSandboxConfig *config, struct cni_bandwidth *out, bool *limited,
                       struct husk_error **err);

/* sandbox_cgroup.c.  Create: makes the missing levels of SB's pod cgroup
 * in every hierarchy (recording them) and counts SB among its users.
 * Release (safe on a pod that holds none): counts SB out and removes the
 * levels husk made, deepest first, while no pod is under them and they
 * are empty.  Adopt: counts a loaded pod in. */
int sandbox_cgroup_create (struct sandbox_store *store, struct sandbox *sb, struct husk_error **err);
void sandbox_cgroup_release (struct sandbox_store *store, struct sandbox *sb);
void sandbox_cgroup_adopt (struct sandbox_store *store, struct sandbox *sb);

/* Owned by the pod's root (USERNS) when the pod has its own user namespace. */
int sandbox_write_files (struct sandbox *sb, const char *hostname, const struct cri_userns *userns,
                         struct husk_error **err);

#endif
