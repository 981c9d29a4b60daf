/* OCI hooks: each one runs with the container's state JSON on stdin, its
 * own args and env, and a timeout; a failing hook fails the operation
 * (after the process started, poststart and poststop failures are warnings). */
#ifndef HUSK_RUNTIME_HOOKS_H
#define HUSK_RUNTIME_HOOKS_H

#include "husk/error.h"
#include "runtime/spec/spec.h"

/* Runs every hook of KIND in order, each waited for.  STATE_JSON is written
 * to the hook's stdin.  Stops at the first failure (non-zero exit, signal,
 * timeout -> SIGKILL) and returns an error naming the hook kind, index and
 * path; poststart and poststop hooks all run whatever fails, and the error
 * names every one that failed ("; "-separated).  Hook stdout/stderr go to
 * the caller's stderr. */
int hooks_run (const struct spec_hooks *hooks, enum spec_hook_kind kind, const char *state_json,
               struct husk_error **err);

#endif
