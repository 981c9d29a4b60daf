/* create as used by create and run.  Private to runtime/. */
#ifndef HUSK_RUNTIME_CREATE_H
#define HUSK_RUNTIME_CREATE_H

#include <stdbool.h>
#include <sys/types.h>

#include "runtime/container.h"

struct create_result
{
  pid_t pid;      /* the init, a child of the caller */
  int console_fd; /* run without --console-socket: socket the pty master arrives on, or -1 */
  bool started;   /* START_NOW was honoured: the init execs without waiting for start */
};

/* FOREGROUND: the caller stays the init's parent (run) and may proxy the
 * terminal itself.  START_NOW (run): the init goes on to its execve as
 * soon as it is ready, with no exec fifo and no `start` to wait for,
 * unless the config has poststart hooks (they must run after the process
 * started, so that case keeps the fifo and start). */
int create_container_job (const struct runtime_ctx *ctx, const char *id, const struct create_options *opts,
                          bool foreground, bool start_now, struct create_result *result,
                          struct husk_error **err);

#endif
