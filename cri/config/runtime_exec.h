/* How huskd runs its children: an OCI runtime command (`husk`, `runc`,
 * `crun` with --root), or any program with its output captured and a
 * deadline; and the clocks the CRI records use. */
#ifndef HUSK_CRI_RUNTIME_EXEC_H
#define HUSK_CRI_RUNTIME_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cri/config/config.h"
#include "husk/error.h"

struct cri_child_output
{
  char *data; /* NUL-terminated, NULL when nothing came */
  size_t len;
  bool truncated;
};

struct cri_child_run
{
  char *const *argv;
  int64_t timeout_ms; /* 0: none */
  /* Where the child writes the pid of the process it runs for us (`exec
   * --pid-file`): at the deadline that process is killed first and the
   * child given time to reap it, so nothing it ran outlives the call. */
  const char *pid_file;
  size_t output_max;
  /* Instead of fork+exec of argv: starts the child with STDIO as its fds
   * 0-2 and its own process group, returning its pid (ExecSync's
   * in-process exec). */
  pid_t (*spawn) (void *spawn_arg, const int stdio[3], struct husk_error **err);
  /* With spawn, when the child is not ours to waitpid: its wait status. */
  void (*wait) (void *spawn_arg, pid_t pid, int *wait_status);
  void *spawn_arg;
  /* Without spawn: instead of capturing, stdout to /dev/null and stderr
   * to this file (made 0600, truncated), and the call ends when the child
   * exits, not when its output closes (a created container's init, or
   * runsc's sandbox, inherits the runtime's stderr and lives on). */
  const char *err_path;
  struct cri_child_output out[2]; /* stdout, stderr */
  int wait_status;
  bool timed_out;
};

/* Runs RUN->argv (stdin /dev/null, its own process group, no signals
 * blocked) with stdout and stderr captured up to output_max each, killing
 * the process group at the deadline (after RUN->pid_file's process and a
 * grace period, when there is one).  Fails only when it cannot start. */
int cri_child_run (struct cri_child_run *run, struct husk_error **err);
void cri_child_run_clear (struct cri_child_run *run);

/* An exit code the way a shell reports it: 128 + signal for a kill. */
int cri_child_exit_code (int wait_status);

/* `RT->path --root RT->root RT->args... ARGS...`: a NULL-terminated
 * array (free it; the strings are RT's and ARGS'), EXTRA free slots
 * before the terminator for the caller to fill. */
const char **cri_runtime_argv (const struct huskd_runtime *rt, const char *const *args, size_t extra);

/* `RT->path --root RT->root RT->args... ARGS...` (NULL-terminated); a
 * failure carries the runtime's stderr in one line. */
int cri_run_runtime (const struct huskd_runtime *rt, const char *const *args, struct husk_error **err);

/* As cri_run_runtime, for a verb whose runtime leaves processes behind
 * that keep its stdio (runsc's create: the sandbox and gofer): stdout is
 * /dev/null, stderr goes to ERR_PATH (a failure carries its last line),
 * and the call ends when the runtime exits, not its pipes. */
int cri_run_runtime_to_file (const struct huskd_runtime *rt, const char *const *args, const char *err_path,
                             struct husk_error **err);

/* `RUNTIME state ID`: *STATUS ("creating", "created", "running",
 * "paused", "stopped"; malloc'd) and the init's *PID.  A container the
 * runtime does not know is an error carrying its stderr. */
int cri_runtime_state (const struct huskd_runtime *rt, const char *id, char **status, pid_t *pid,
                       struct husk_error **err);

/* The configured runtime for HANDLER ("" or NULL: the default), or
 * EINVAL naming it. */
const struct huskd_runtime *cri_runtime_for (const struct huskd_config *cfg, const char *handler,
                                             struct husk_error **err);

/* A program installed next to the running binary (husk-monitor,
 * husk-pause), or NAME for a PATH lookup when /proc/self/exe is unknown. */
char *cri_helper_path (const char *name);

/* True when RT's binary is the husk installed with this huskd (the same
 * build reads the same state), so huskd may do `husk exec`'s and `husk
 * kill`'s work itself, unless HUSKD_EXEC_VIA_RUNTIME=1 (then it runs them).
 * Decided once, by path: a husk replaced in place is taken for the same
 * build, so an upgrade restarts huskd with its husk (both ship together). */
bool cri_runtime_in_process (const struct huskd_runtime *rt);

/* CLOCK_REALTIME in nanoseconds (CRI timestamps), CLOCK_MONOTONIC in ms. */
int64_t cri_now_ns (void);
int64_t cri_monotonic_ms (void);

#endif
