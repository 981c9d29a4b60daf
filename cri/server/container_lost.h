/* huskd standing in for a container's husk-monitor that died without
 * writing the exit file (kill -9, a crash, the OOM killer): it watches the
 * monitor of every running container, then the container's init, and
 * writes the exit file the monitor would have written, reason MonitorLost,
 * so that status, events, StopContainer and RemoveContainer go on as after
 * an ordinary exit. */
#ifndef HUSK_CRI_CONTAINER_LOST_H
#define HUSK_CRI_CONTAINER_LOST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct cri_service;
struct cri_container;

#define CRI_REASON_MONITOR_LOST "MonitorLost"

/* /proc/<pid>/stat starttime of PID (clock ticks after boot), 0 when it
 * does not exist; and that moment in unix nanoseconds (0: unknown). */
unsigned long long cri_proc_start (pid_t pid);
int64_t cri_proc_start_ns (unsigned long long start);

/* Whether C's monitor runs: its pid, not a zombie, with the recorded start
 * time (a record without one: a husk-monitor whose command line names C). */
bool cri_monitor_alive (const struct cri_container *c);

/* Whether PID's command line is husk-monitor's (its argv[0]'s last part)
 * with `--id ID`; *LOG_PATH (when not NULL) then gets its --log-path. */
bool cri_is_monitor_of (pid_t pid, const char *id, char **log_path);

/* The pid of a live husk-monitor whose command line names container ID, 0
 * when there is none; *LOG_PATH (when not NULL) gets its --log-path. */
pid_t cri_find_monitor (const char *id, char **log_path);

/* Watches the monitor of C, when C runs (once per container; a no-op
 * without an event hub).  A monitor that is gone already, or goes later
 * without an exit file, is cri_monitor_lost. */
void cri_watch_monitor (struct cri_service *svc, const struct cri_container *c);

/* C runs and its monitor is gone.  Its init (the runtime's state, its pid
 * and start time) is watched in the monitor's place, or, when it has
 * exited too, the exit file is written now.  Idempotent. */
void cri_monitor_lost (struct cri_service *svc, const struct cri_container *c);

#endif
