/* huskd's exec helper, `husk exec-helper`: a small single-threaded husk
 * that forks ExecSync's processes for huskd (a fork of huskd itself costs
 * several times more).  The protocol, over a SOCK_SEQPACKET control socket
 * that is the helper's fd 3:
 *
 *   huskd thread                           helper
 *   ------------                           ------
 *   socketpair REPLY
 *   REQUEST: root\0 id\0 pid-file\0 args...\0
 *     + fds stdin, stdout, stderr, REPLY ─────►  plan (exec_plans.c), fork,
 *                                                pid file
 *                              ◄── REPLY: STARTED(pid) | FAILED(errno, msg)
 *   reads stdout/stderr, keeps the deadline,
 *   kills pid at the deadline                    SIGCHLD: waitpid
 *                              ◄── REPLY: EXITED(wait status); REPLY closed
 *
 * The helper exits when the control socket closes (huskd is gone); the
 * processes it started run on, and their pid files let the next huskd kill
 * them.  FAILED with ENOTSUP: the container needs `husk exec` (a time
 * namespace). */
#ifndef HUSK_RUNTIME_EXEC_HELPER_H
#define HUSK_RUNTIME_EXEC_HELPER_H

#include <stdint.h>

#include "husk/error.h"

/* A larger request (a huge command line) takes huskd's own fork. */
#define EXEC_HELPER_REQUEST_MAX (64 * 1024)
#define EXEC_HELPER_FDS 4

enum exec_helper_reply_kind
{
  EXEC_HELPER_STARTED = 1,
  EXEC_HELPER_FAILED,
  EXEC_HELPER_EXITED,
};

struct exec_helper_reply
{
  int32_t kind;
  int32_t pid;
  int32_t wait_status;
  int32_t errnum;
  char msg[1024]; /* FAILED: one line */
};

/* Serves requests on CTL until it closes (0) or fails (-1). */
int exec_helper_serve (int ctl, struct husk_error **err);

#endif
