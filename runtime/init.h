/* What the runtime hands to a new container's init (the cloned child), and
 * helpers shared by create and exec.  Private to runtime/. */
#ifndef HUSK_RUNTIME_INIT_H
#define HUSK_RUNTIME_INIT_H

#include <stdbool.h>
#include <sys/types.h>

#include "runtime/container.h"
#include "runtime/security.h"
#include "runtime/spec/spec.h"

struct init_config
{
  const struct spec *spec;
  const struct create_options *opts;
  const struct seccomp_program *seccomp;
  int sync_fd;    /* child's end of the handshake socket */
  int fifo_fd;    /* exec fifo, opened O_RDWR by the parent; -1: exec once ready (run) */
  int console_fd; /* socket that receives the pty master, or -1 */
  bool new_user_ns;
  bool joined_user_ns; /* linux.namespaces user has a path: the clone was made inside it */
  /* The namespaces given by path, opened by create before the clone (in
   * a user namespace the paths may be out of reach); -1: none. */
  const int *ns_fds;
  bool new_net_ns;
  bool new_cgroup_ns;
  const char *cgroup_path; /* the container's cgroup, made before the clone; NULL: none */
  bool join_cgroup_v1;     /* init moves itself into CGROUP_PATH's v1 hierarchies */
  bool go_late;            /* set up before the parent's go, wait for it only before ready */
};

/* The container's init: runs in the cloned child, never returns. */
__attribute__ ((noreturn)) void container_init (const struct init_config *cfg);

/* chdir to process->cwd in the current root, refusing a directory outside
 * it (reached through a leaked fd or a /proc/self/fd symlink). */
int init_enter_cwd (const struct spec_process *process, struct husk_error **err);

/* Resolves process->args[0] against PATH from process->env (as execvp would,
 * in the current root); returns a newly allocated path. */
int init_find_executable (const struct spec_process *process, char **out, struct husk_error **err);

/* The last steps before execve, shared by init and exec: bounding set, user,
 * capabilities, no_new_privs, seccomp, execve.  Returns only on failure. */
int init_exec_process (const struct spec_process *process, const char *executable,
                       const struct seccomp_program *seccomp, struct husk_error **err);

/* Marks every fd >= FIRST close-on-exec. */
void init_cloexec_from (int first);

/* Terminal: in the child, opens a pty in the current root, sends the master
 * over CONSOLE_FD and makes the slave the controlling terminal and stdio. */
int terminal_setup_child (int console_fd, const struct spec_process *process, struct husk_error **err);
/* Connects to the --console-socket path. */
int terminal_connect (const char *path, struct husk_error **err);
/* Receives the pty master sent by terminal_setup_child. */
int terminal_receive (int sock, struct husk_error **err);

/* Waits for PID (a child of ours) while forwarding signals to it and, when
 * MASTER >= 0, copying between our stdio and the pty.  Stores the exit code
 * (128+N when killed by signal N). */
int foreground_wait (pid_t pid, int master, int *exit_code, struct husk_error **err);

/* Blocks the signals foreground_wait forwards (before the child exists, so
 * none is lost); the child unblocks them with init_reset_signals. */
void foreground_block_signals (void);
void init_reset_signals (void);

#endif
