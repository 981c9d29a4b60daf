/* husk-monitor: one small process per container, like conmon.  It runs
 * `RUNTIME create`, becomes the parent of the container's init (child
 * subreaper), holds its stdio, writes the CRI log and, when init exits, the
 * exit file.  What main.c, create.c, io.c and console.c share. */
#ifndef HUSK_MONITOR_H
#define HUSK_MONITOR_H

#include <stdbool.h>
#include <sys/types.h>

#include "husk/error.h"
#include "cri/monitor/attach.h"
#include "cri/monitor/exit.h"
#include "cri/monitor/log.h"

struct monitor_options
{
  const char *id;
  const char *bundle;
  const char *runtime;      /* a runc-compatible binary; default husk next to us */
  const char *runtime_root; /* its --root */
  const char *log_path;
  const char *log_dir; /* the pod's log dir: LOG_PATH is opened beneath it, no symlinks */
  const char *exit_dir;
  const char *pid_file;         /* the container's, passed to create; default a private one */
  const char *monitor_pid_file; /* our own, for huskd to signal us after a restart */
  const char *monitor_log;      /* our own warnings; default /dev/null */
  const char *attach_socket;    /* where attach clients connect; none if NULL */
  const char *restore_dir;      /* a CRIU image: restore the container from it, not create */
  char **runtime_args;          /* --runtime-arg: global flags after --root; NULL-terminated or NULL */
  bool start_and_wait;          /* runtime_wait.c: we run `start`, and `wait` tells the exit */
  bool runtime_is_ours;         /* RUNTIME is the husk beside us: `create` is exec'd sealed */
  long long log_max_size;
  bool stdin_pipe;
  bool terminal;
  int sync_fd;  /* where the {"pid"} / {"error"} line goes; stdout if -1 */
  int stdin_fd; /* copied into the container's stdin, which closes at its EOF */
};

enum monitor_stream
{
  MONITOR_STDOUT,
  MONITOR_STDERR,
  MONITOR_N_STREAMS,
};

struct monitor
{
  const struct monitor_options *opts;
  int signal_fd;
  /* The container's output: pipes, or the pty master as stdout alone. */
  int output_fd[MONITOR_N_STREAMS];
  /* The container's stdin: our end of its pipe, or the pty master. */
  int stdin_target_fd;
  pid_t container_pid;
  /* --start-and-wait: `RUNTIME wait ID` and its stdout; 0 and -1 otherwise. */
  pid_t wait_pid;
  int wait_fd;
  bool wait_unknown; /* `wait` gave no exit status (the sandbox is gone) */
  char *oom_events_path;
  unsigned long long oom_kills_at_start;
  struct log_file log;
  struct log_stream streams[MONITOR_N_STREAMS];
  struct attach_server attach;
};

/* ------------------------------------------------------------ create.c */

/* Runs `RUNTIME --root ROOT create ...` with the container's stdio, waits
 * for it, and fills container_pid and the fds.  The runtime's own output
 * (all the container pipes carry before `start`) becomes the error
 * message when create fails. */
int monitor_create_container (struct monitor *monitor, struct husk_error **err);

/* ------------------------------------------------------------ runtime_wait.c */

/* OPTS->runtime, --root, the --runtime-arg flags, then VERB_ARGS. */
char **monitor_runtime_argv (const struct monitor_options *opts, const char *const *verb_args);
/* `RUNTIME start ID` with CHILD_STDIO as its stdio (the container's); a
 * failure carries its last line of output, read from CAPTURE_FD. */
int monitor_runtime_start (struct monitor *monitor, const int child_stdio[3],
                           int capture_fd[MONITOR_N_STREAMS], struct husk_error **err);
/* Spawns `RUNTIME wait ID`: fills wait_pid and wait_fd. */
int monitor_runtime_wait_spawn (struct monitor *monitor, struct husk_error **err);
/* Once wait_pid exited with WAIT_PROCESS_STATUS: the container's exit as a
 * wait status (255 and wait_unknown set when `wait` gave none). */
int monitor_runtime_wait_status (struct monitor *monitor, int wait_process_status);

/* ------------------------------------------------------------ console.c */

/* A unix socket at a fresh path in DIR for --console-socket. */
int console_socket_listen (const char *dir, char **path, struct husk_error **err);

/* Accepts one connection on LISTEN_FD and receives the pty master from it. */
int console_socket_receive (int listen_fd, struct husk_error **err);

/* ------------------------------------------------------------ io.c */

/* Copies the container's output to the log (and stdin_fd to its stdin)
 * until its init exits, then drains what is left; fills EXIT.  The attach
 * clients are finished by the caller (attach_finish), once the exit file
 * is written: a slow one does not hold it back. */
int monitor_run (struct monitor *monitor, struct monitor_exit *exit, struct husk_error **err);

/* Reaps every exited child; returns true (and the wait status) when one of
 * them was PID. */
bool monitor_reap (pid_t pid, int *wait_status);

#endif
