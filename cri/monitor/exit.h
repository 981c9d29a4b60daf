/* How the container's init ended, written to EXIT_DIR/ID for huskd:
 * {"exit_code": N, "signal": S, "oom_killed": B, "finished_at": "..."}.
 * The file is replaced atomically, so a reader sees all of it or none. */
#ifndef HUSK_MONITOR_EXIT_H
#define HUSK_MONITOR_EXIT_H

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#include "husk/error.h"

struct monitor_exit
{
  int exit_code; /* the exit status, or 128 + signal as a shell reports it */
  int signal;    /* the signal that killed it, 0 if it exited */
  bool oom_killed;
  struct timespec finished_at;
};

/* Fills EXIT from a waitpid status (oom_killed left false). */
void monitor_exit_from_wait_status (int wait_status, const struct timespec *finished_at,
                                    struct monitor_exit *exit);

/* The exit file's content, one line, newly allocated. */
char *monitor_exit_json (const struct monitor_exit *exit);

int monitor_exit_write (const char *exit_dir, const char *id, const struct monitor_exit *exit,
                        struct husk_error **err);

/* The answer to a reopen request (SIGUSR1), EXIT_DIR/ID.reopen, replaced
 * atomically after each: {"monotonic_ns": N} when the log file was opened
 * again, {"monotonic_ns": N, "errno": E, "error": "..."} when that failed.
 * N is CLOCK_MONOTONIC when the reopen began: a requester that read the
 * clock before it signalled takes an answer with N at or after that time
 * as its own.  Removed when the monitor exits. */
char *monitor_reopen_answer_path (const char *exit_dir, const char *id);
int monitor_reopen_answer_write (const char *exit_dir, const char *id, long long began_ns,
                                 const struct husk_error *failure, struct husk_error **err);

/* The file counting PID's cgroup's OOM kills, found while it is alive
 * (the cgroup outlives the process until `delete`): memory.events on
 * cgroup v2, memory.oom_control on v1.  NULL without a memory controller. */
char *monitor_oom_events_path (pid_t pid);

/* The oom_kill count in EVENTS_PATH, 0 if it cannot be read. */
unsigned long long monitor_oom_kills (const char *events_path);

#endif
