/* huskd's exec helper (exec_helper.c): a small process forked at start that
 * forks ExecSync's processes, so that a probe does not fork all of huskd. */
#ifndef HUSK_CRI_EXEC_HELPER_H
#define HUSK_CRI_EXEC_HELPER_H

#include <stddef.h>
#include <sys/types.h>

#include "husk/error.h"

/* Returned by cri_exec_helper_spawn when huskd should fork the process
 * itself: no helper (it was not started, or it is gone), a request too
 * large for one message, a container that needs `husk exec`. */
#define CRI_EXEC_HELPER_DECLINED (-2)

/* Forks the helper; call before any thread starts. */
int cri_exec_helper_start (struct husk_error **err);

/* Has the helper start ARGS in container ID (runtime root ROOT) with STDIO
 * as its fds 0-2, writing PID_FILE; its pid (not huskd's child: wait with
 * cri_exec_helper_wait on *REPLY_FD), -1 with *ERR, or DECLINED. */
pid_t cri_exec_helper_spawn (const char *root, const char *id, const char *pid_file, const char *const *args,
                             size_t n_args, const int stdio[3], int *reply_fd, struct husk_error **err);
/* PID's wait status from the helper; closes REPLY_FD. */
void cri_exec_helper_wait (int reply_fd, pid_t pid, int *wait_status);

#endif
