/* The parent/child handshake of `husk create`, as a named protocol.  The
 * runtime (parent) and the container's init (child) talk over a
 * SOCK_SEQPACKET socketpair; each message is a type plus an optional
 * payload.  The sequence, in order:
 *
 *   parent                               child (container init)
 *   clone ─────────────────────────────► waits
 *   writes id maps, joins cgroup
 *   SYNC_PARENT_GO (state JSON) ───────► namespaces, hostname, mounts, /dev
 *                          ◄──────────── SYNC_CHILD_RUN_RUNTIME_HOOKS (if any)
 *   prestart + createRuntime hooks
 *   SYNC_PARENT_HOOKS_DONE ────────────► createContainer hooks, pivot_root,
 *                                        masks, terminal, cwd
 *                          ◄──────────── SYNC_CHILD_READY
 *   writes state, exits                  blocks on the exec fifo until start
 *                                        (run: no fifo, it execs at once)
 *
 * Where the go brings the child nothing its setup needs (no user or
 * cgroup namespace, no hook before ready, cgroups the child joins itself:
 * see init_may_go_late in create.c), the child sets up without waiting
 * and expects SYNC_PARENT_GO just before it sends SYNC_CHILD_READY.
 *
 * At any point the child may send SYNC_CHILD_ERROR (payload: one line) and
 * exit; the parent turns it into its own error (also when the child has
 * gone before the go could be sent). */
#ifndef HUSK_RUNTIME_SYNC_H
#define HUSK_RUNTIME_SYNC_H

#include <stddef.h>
#include <stdint.h>

#include "husk/error.h"

enum sync_msg_type
{
  SYNC_PARENT_GO = 1,
  SYNC_CHILD_RUN_RUNTIME_HOOKS,
  SYNC_PARENT_HOOKS_DONE,
  SYNC_CHILD_READY,
  SYNC_CHILD_ERROR,
};

const char *sync_msg_name (enum sync_msg_type type);

/* Sends one message; PAYLOAD may be NULL. */
int sync_send (int fd, enum sync_msg_type type, const void *payload, size_t len, struct husk_error **err);

/* Receives one message and checks it is EXPECTED.  A SYNC_CHILD_ERROR becomes
 * *err with the child's text; EOF means the peer died.  *payload (may be
 * NULL) gets a NUL-terminated copy the caller frees. */
int sync_expect (int fd, enum sync_msg_type expected, char **payload, struct husk_error **err);

/* In the child: sends ERR as SYNC_CHILD_ERROR (best effort) and _exit(1). */
__attribute__ ((noreturn)) void sync_child_fail (int fd, struct husk_error *err);

#endif
