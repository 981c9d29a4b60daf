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
};

/* FOREGROUND: the caller stays the init's parent (run) and may proxy the
 * terminal itself. */
int create_container_job (const struct runtime_ctx *ctx, const char *id, const struct create_options *opts,
                          bool foreground, struct create_result *result, struct husk_error **err);

#endif
