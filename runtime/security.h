/* Process attributes applied in the container's init just before execve:
 * rlimits, oom_score_adj, sysctls, user and groups, capabilities,
 * no_new_privs and the seccomp filter (compiled in the parent). */
#ifndef HUSK_RUNTIME_SECURITY_H
#define HUSK_RUNTIME_SECURITY_H

#include <linux/filter.h>
#include <stddef.h>

#include "husk/error.h"
#include "runtime/spec/spec.h"

/* A compiled seccomp program: classic BPF ready for seccomp(2). */
struct seccomp_program
{
  struct sock_filter *filter;
  size_t len;
  unsigned flags; /* SECCOMP_FILTER_FLAG_* */
};

/* Compiles spec->seccomp with libseccomp in the parent, before clone.
 * Unknown syscall names are warned about and skipped.  *out is zeroed when
 * the spec has no seccomp section. */
int seccomp_compile (const struct spec_seccomp *seccomp, struct seccomp_program *out,
                     struct husk_error **err);
/* Loads the program into the calling thread (the last thing before execve). */
int seccomp_program_load (const struct seccomp_program *program, struct husk_error **err);
void seccomp_program_clear (struct seccomp_program *program);

/* setrlimit for each of process->rlimits. */
int security_apply_rlimits (const struct spec_process *process, struct husk_error **err);
/* Writes /proc/self/oom_score_adj; a refused lowering (no CAP_SYS_RESOURCE)
 * is a warning, not an error. */
int security_apply_oom_score_adj (const struct spec_process *process, struct husk_error **err);
/* The same for an exec, only where it raises the value it inherited: a
 * caller that protects itself from the OOM killer (huskd under systemd's
 * OOMScoreAdjust=-999) does not pass that on to what runs in a container. */
int security_raise_oom_score_adj (const struct spec_process *process, struct husk_error **err);
/* Refuses a linux.sysctl key that no namespace of the container holds
 * (as runc: net.* needs a private network namespace, kernel.shm*, msg*,
 * sem and fs.mqueue.* an ipc one, kernel.hostname/domainname a uts one),
 * so it would change the host's value.  Called before anything is made. */
int security_check_sysctls (const struct spec *spec, struct husk_error **err);
/* Writes /proc/sys/... for linux.sysctl (after the mounts, before pivot). */
int security_apply_sysctls (const struct spec *spec, struct husk_error **err);

/* setgroups, setgid, setuid (keeping capabilities across the switch), umask. */
int security_apply_user (const struct spec_process *process, struct husk_error **err);
/* Bounding set first (while we still have CAP_SETPCAP), then after the user
 * switch the effective/permitted/inheritable sets and the ambient set.  The
 * two halves are separate so the user switch can happen between them. */
int security_drop_bounding (const struct spec_process *process, struct husk_error **err);
int security_apply_caps (const struct spec_process *process, struct husk_error **err);
int security_apply_no_new_privs (const struct spec_process *process, struct husk_error **err);

/* Before the start handshake, in the container's user namespace: fails
 * naming the first capability of process.capabilities that
 * security_drop_bounding and security_apply_caps could not give (one
 * outside our bounding or permitted set, an effective one not permitted,
 * an inheritable one outside the bounding set asked for), so that create
 * fails instead of the process dying after start. */
int security_check_caps (const struct spec_process *process, struct husk_error **err);

#endif
