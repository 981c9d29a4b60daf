/* The OCI runtime's operations on one container: create, start, run,
 * kill, delete, exec.  The CLI in runtime/cli/ is a thin layer over these. */
#ifndef HUSK_RUNTIME_CONTAINER_H
#define HUSK_RUNTIME_CONTAINER_H

#include <stdbool.h>
#include <sys/types.h>

#include "husk/error.h"
#include "runtime/spec/spec.h"
#include "runtime/state.h"

#define HUSK_DEFAULT_ROOT "/run/husk/runtime"

struct runtime_ctx
{
  const char *root; /* state dir, --root */
  bool systemd_cgroup;
};

struct create_options
{
  const char *bundle;         /* default "." */
  const char *console_socket; /* path of a unix socket to receive the pty master */
  const char *pid_file;
  bool no_pivot;
  bool no_new_keyring;
  int preserve_fds; /* fds 3 .. 3+N-1 go to the container */
};

int container_create (const struct runtime_ctx *ctx, const char *id, const struct create_options *opts,
                      struct husk_error **err);
int container_start (const struct runtime_ctx *ctx, const char *id, struct husk_error **err);

/* create + start.  Detached: returns after start.  Foreground: forwards
 * signals, proxies the terminal when there is no console socket, waits,
 * deletes the container and stores its exit code (128+N for signal N). */
int container_run (const struct runtime_ctx *ctx, const char *id, const struct create_options *opts,
                   bool detach, int *exit_code, struct husk_error **err);

int container_kill (const struct runtime_ctx *ctx, const char *id, int sig, bool all,
                    struct husk_error **err);
int container_delete (const struct runtime_ctx *ctx, const char *id, bool force, struct husk_error **err);

/* Every pid of the container (from its cgroup, or just init). */
int container_pids (const struct runtime_ctx *ctx, const char *id, pid_t **pids, size_t *n,
                    struct husk_error **err);

struct exec_options
{
  /* complete process to run; with no apparmorProfile of its own it gets
   * the container's (as runc), set here by container_exec */
  struct spec_process *process;
  bool detach;
  const char *console_socket;
  const char *pid_file;
  int preserve_fds;
};

/* Loads the container's config as created (for exec's defaults). */
int container_load_spec (const struct runtime_ctx *ctx, const char *id, struct spec **out,
                         struct husk_error **err);

int container_exec (const struct runtime_ctx *ctx, const char *id, const struct exec_options *opts,
                    int *exit_code, struct husk_error **err);

/* An exec plan: what exec needs of a running container (its state, its
 * process with exec's AppArmor default, the compiled seccomp filter, the
 * namespaces that differ from ours), loaded once for a caller that execs
 * into the same container again and again (huskd's ExecSync, a probe every
 * few seconds).  A plan applies exactly what `husk exec ID ARGS...` does. */
struct exec_plan;

int container_exec_plan_load (const struct runtime_ctx *ctx, const char *id, struct exec_plan **out,
                              struct husk_error **err);
/* False once the init is gone or replaced, or state.json was rewritten. */
bool container_exec_plan_current (const struct exec_plan *plan);
/* False where only `husk exec` can join (a time namespace, joined by a
 * single-threaded process alone). */
bool container_exec_plan_spawnable (const struct exec_plan *plan);
void container_exec_plan_free (struct exec_plan *plan);

/* Forks ARGS (the container's process otherwise, no terminal) with STDIO
 * as fds 0-2 and its own process group, from any thread of a
 * multithreaded caller; returns its pid, a child of the caller.  A
 * failure after the fork (no such executable, a cwd that is not there) is
 * the child's: `husk: MESSAGE` on its stderr and exit 1, as `husk exec`. */
pid_t container_exec_plan_spawn (const struct exec_plan *plan, char *const *args, const int stdio[3],
                                 struct husk_error **err);
/* For a single-threaded caller (huskd's exec helper): later spawns share
 * its memory until their execve (vfork) where they can, instead of
 * copying it (fork); the caller waits meanwhile, 2 s at most. */
void container_exec_plan_vfork (void);

/* Parses "TERM", "SIGTERM" or "15". */
int container_parse_signal (const char *name, int *sig, struct husk_error **err);

/* Re-executes the running binary from a file that cannot be written (a
 * private read-only overlay of it, else a sealed memfd copy) unless it
 * already runs from one, so a container can never reach the host's husk
 * binary through /proc/self/exe (CVE-2019-5736).  Returns only on failure
 * or when no re-exec was needed.  After the re-exec /proc/self/exe no
 * longer names the binary's path on disk. */
int container_ensure_cloned_binary (char **argv, struct husk_error **err);
/* Whether it runs from such a file already (no re-exec to come). */
bool container_running_from_sealed_exe (void);
/* Executes the binary at PATH with ARGV from such a file (husk's
 * `container` verbs start husk-image so: it then needs no re-exec of its
 * own, which would load its 47 libraries twice; husk-monitor starts `husk
 * create` so).  Returns only on failure. */
int container_exec_sealed (const char *path, char **argv, struct husk_error **err);

/* husk checkpoint / restore (runtime/checkpoint.c), through CRIU: runc's
 * options and semantics.  Without leave_running the checkpointed
 * container is gone afterwards, as with runc. */
struct criu_options;
int container_checkpoint (const struct runtime_ctx *ctx, const char *id, const struct criu_options *opts,
                          struct husk_error **err);
/* A new container ID from the bundle in OPTS and the image in COPTS;
 * detached returns once it runs, else waits, deletes and sets *EXIT_CODE. */
int container_restore (const struct runtime_ctx *ctx, const char *id, const struct create_options *opts,
                       const struct criu_options *copts, bool detach, int *exit_code,
                       struct husk_error **err);

#endif
