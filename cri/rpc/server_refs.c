/* What calls settle with their server: its count of open calls as each
 * closes, and its last reference.  Below both call.c and server.c, so that
 * a call never calls back into the server that made it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <grpc/grpc.h>

#include "cri/rpc/internal.h"

/* The last ref goes after rpc_server_shutdown() and after the last call a
 * stream owner held: only then may gRPC itself go, since releasing a call
 * still talks to it. */
void
rpc_server_unref (struct rpc_server *server)
{
  if (atomic_fetch_sub (&server->refs, 1) != 1)
    return;
  pthread_cond_destroy (&server->changed);
  pthread_mutex_destroy (&server->lock);
  free (server->slots);
  free (server->cq_threads);
  free (server->socket_path);
  free (server);
  grpc_shutdown ();
}

void
rpc_server_changed_locked (struct rpc_server *server)
{
  pthread_cond_broadcast (&server->changed);
}

/* Streams that end only when their owner says so; a batched stream ends by
 * itself like a unary call, so shutdown's grace period waits for it too. */
bool
rpc_slot_open_ended (const struct rpc_method_slot *slot)
{
  return slot->method && (slot->method->flags & RPC_SERVER_STREAMING)
         && !(slot->method->flags & RPC_BATCHED_STREAM);
}

void
rpc_server_call_closed (struct rpc_server *server, const struct rpc_method_slot *slot)
{
  pthread_mutex_lock (&server->lock);
  server->open_calls--;
  if (!rpc_slot_open_ended (slot))
    server->open_unary--;
  rpc_server_changed_locked (server);
  pthread_mutex_unlock (&server->lock);
}
