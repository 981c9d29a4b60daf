/* The pid files of execs (STATE/exec-<id>-*.pid, ExecSync and streaming
 * Exec) outlive a huskd killed while they ran, and so do their processes:
 * the next huskd kills those processes (when the pid is still theirs) and
 * removes the files, keeping the promise that an exec whose client is gone
 * is killed; RemoveContainer removes any of its container left. */
#ifndef HUSK_CRI_EXEC_LEFTOVERS_H
#define HUSK_CRI_EXEC_LEFTOVERS_H

#include <stdbool.h>
#include <sys/types.h>

/* Whether PID is still the process the exec pid file PATH named: it
 * started no later than the file was written (within a clock tick: the
 * mtime may be coarse), and it is in a cgroup whose
 * path holds ID12 (the exec joined its container's cgroup) -- a recycled
 * pid fails one or the other. */
bool cri_exec_pid_is_ours (const char *path, pid_t pid, const char *id12);

/* At start, before serving: every exec pid file in STATE_DIR, its process
 * killed, the file (and its console socket) removed; returns how many
 * processes were killed. */
int cri_exec_leftovers_recover (const char *state_dir);

/* The same for container ID's files only (RemoveContainer). */
int cri_exec_leftovers_remove (const char *state_dir, const char *id);

#endif
