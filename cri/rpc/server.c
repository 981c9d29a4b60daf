/* rpc_server: the gRPC server itself.  One completion queue, shared by a few
 * threads that never block (kubelet sends everything on one connection,
 * which gRPC binds to one queue); a posted request per method and thread,
 * plus a generic one so unknown methods are refused at once; and the
 * shutdown order that keeps gRPC from waiting forever on open streams.
 * Calls themselves live in call.c. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "cri/rpc/internal.h"
#include "husk/cleanup.h"
#include "husk/util.h"

static const struct rpc_server_options rpc_defaults = {
  .cq_threads = 2,
  .pool_workers = 8,
  .pool_queue = 64,
  .bulk_workers = 4,
  .bulk_queue = 16,
  .probe_workers = 16,
  .probe_queue = 256,
  .shutdown_grace_ms = 2000,
  .stream_queue_max = 1024,
  .max_receive_bytes = 16 << 20,
  .stream_batch_bytes = 1 << 20,
};

#define DEFAULT_IF_ZERO(field)                                                                               \
  do                                                                                                         \
    {                                                                                                        \
      if (opts.field == 0)                                                                                   \
        opts.field = rpc_defaults.field;                                                                     \
    }                                                                                                        \
  while (0)

static struct rpc_server_options
options_with_defaults (const struct rpc_server_options *given)
{
  struct rpc_server_options opts = *given;

  DEFAULT_IF_ZERO (cq_threads);
  DEFAULT_IF_ZERO (pool_workers);
  DEFAULT_IF_ZERO (pool_queue);
  DEFAULT_IF_ZERO (bulk_workers);
  DEFAULT_IF_ZERO (bulk_queue);
  DEFAULT_IF_ZERO (probe_workers);
  DEFAULT_IF_ZERO (probe_queue);
  DEFAULT_IF_ZERO (shutdown_grace_ms);
  DEFAULT_IF_ZERO (stream_queue_max);
  DEFAULT_IF_ZERO (max_receive_bytes);
  DEFAULT_IF_ZERO (stream_batch_bytes);
  if (opts.max_receive_bytes > INT_MAX)
    opts.max_receive_bytes = INT_MAX;
  return opts;
}

static void
post_request (struct rpc_server *server, const struct rpc_method_slot *slot)
{
  struct rpc_call *call;
  grpc_call_error ret;

  pthread_mutex_lock (&server->lock);
  if (server->shutting_down)
    {
      pthread_mutex_unlock (&server->lock);
      return;
    }
  server->posted++;
  pthread_mutex_unlock (&server->lock);

  call = rpc_call_new (server, slot);
  if (slot->method)
    ret = grpc_server_request_registered_call (server->grpc, slot->handle, &call->call, &call->deadline,
                                               &call->metadata, &call->payload, server->cq, server->cq,
                                               &call->request_tag);
  else
    ret = grpc_server_request_call (server->grpc, &call->call, &call->details, &call->metadata, server->cq,
                                    server->cq, &call->request_tag);
  if (ret == GRPC_CALL_OK)
    return;
  husk_log (HUSK_LOG_ERROR, "post a gRPC request for %s: %s",
            slot->method ? slot->method->path : "unknown methods", grpc_call_error_to_string (ret));
  pthread_mutex_lock (&server->lock);
  server->posted--;
  rpc_server_changed_locked (server);
  pthread_mutex_unlock (&server->lock);
  rpc_call_unref (call);
}

/* A posted request came back: with a call, or empty because the server is
 * shutting down.  The request is re-posted before the handler runs so the
 * next call to the same method need not wait for this one. */
static void
on_request (struct rpc_server *server, struct rpc_call *call, bool success)
{
  pthread_mutex_lock (&server->lock);
  server->posted--;
  if (success)
    server->open_calls++;
  if (success && !rpc_slot_open_ended (call->slot))
    server->open_unary++;
  rpc_server_changed_locked (server);
  pthread_mutex_unlock (&server->lock);

  post_request (server, call->slot);
  if (!success)
    {
      rpc_call_unref (call);
      return;
    }
  if (call->slot->method == NULL)
    call->deadline = call->details.deadline;
  rpc_call_arrived (call);
}

static void *
cq_thread_main (void *arg)
{
  struct rpc_server *server = arg;

  for (;;)
    {
      grpc_event ev = grpc_completion_queue_next (server->cq, gpr_inf_future (GPR_CLOCK_MONOTONIC), NULL);
      struct rpc_tag *tag = ev.tag;

      if (ev.type == GRPC_QUEUE_SHUTDOWN)
        return NULL;
      if (ev.type != GRPC_OP_COMPLETE)
        continue;
      if (tag->kind == RPC_TAG_SHUTDOWN)
        {
          pthread_mutex_lock (&server->lock);
          server->shutdown_done = true;
          rpc_server_changed_locked (server);
          pthread_mutex_unlock (&server->lock);
        }
      else if (tag->kind == RPC_TAG_REQUEST)
        on_request (server, rpc_call_from_tag (tag), ev.success);
      else
        rpc_call_event (rpc_call_from_tag (tag), tag->kind, ev.success);
    }
}

/* gRPC publishes the shutdown only once clients have closed their
 * connections, and kubelet keeps its own open, with an event stream on it
 * that never ends by itself: the grace period is for unary calls only. */
static bool
calls_done (struct rpc_server *server)
{
  return server->shutdown_done || server->open_unary == 0;
}

/* Nothing of gRPC's can come back to the queue any more: no request is
 * posted and every call has seen its close event, so no batch starts. */
static bool
everything_returned (struct rpc_server *server)
{
  return server->shutdown_done && server->posted == 0 && server->open_calls == 0;
}

/* Waits until `done` holds or `timeout_ms` passes (< 0: forever, with a
 * warning every 10 s).  Returns whether it holds. */
static bool
wait_until (struct rpc_server *server, bool (*done) (struct rpc_server *), long timeout_ms, const char *what)
{
  struct timespec now, until;
  long step_ms = timeout_ms < 0 ? 10000 : timeout_ms;
  bool held;

  pthread_mutex_lock (&server->lock);
  for (;;)
    {
      clock_gettime (CLOCK_MONOTONIC, &now);
      until.tv_sec = now.tv_sec + step_ms / 1000;
      until.tv_nsec = now.tv_nsec + (step_ms % 1000) * 1000000L;
      if (until.tv_nsec >= 1000000000L)
        {
          until.tv_sec++;
          until.tv_nsec -= 1000000000L;
        }
      while (!(held = done (server))
             && pthread_cond_timedwait (&server->changed, &server->lock, &until) != ETIMEDOUT)
        ;
      held = done (server);
      if (held || timeout_ms >= 0)
        break;
      husk_warn ("gRPC server shutdown: still waiting for %s (%u requests, %u calls open)", what,
                 server->posted, server->open_calls);
    }
  pthread_mutex_unlock (&server->lock);
  return held;
}

/* The order matters: stop re-posting, let calls finish for the grace period,
 * cancel what is left (event streams never end on their own), wait until
 * gRPC holds nothing of ours on the queue, then shut the queue down. */
static void
stop_serving (struct rpc_server *server)
{
  pthread_mutex_lock (&server->lock);
  server->shutting_down = true;
  pthread_mutex_unlock (&server->lock);
  if (server->grpc)
    {
      grpc_server_shutdown_and_notify (server->grpc, server->cq, &server->shutdown_tag);
      if (!wait_until (server, calls_done, server->opts.shutdown_grace_ms, "calls"))
        husk_log (HUSK_LOG_INFO, "cancelling %u unary calls still open after %u ms", server->open_unary,
                  server->opts.shutdown_grace_ms);
      /* Also ends the streams and closes the connections clients keep open. */
      grpc_server_cancel_all_calls (server->grpc);
      wait_until (server, everything_returned, -1, "gRPC to return calls and requests");
    }
  if (server->cq)
    grpc_completion_queue_shutdown (server->cq);
  for (unsigned i = 0; i < server->n_cq_threads; i++)
    pthread_join (server->cq_threads[i], NULL);
  server->n_cq_threads = 0;
}

void
rpc_server_shutdown (struct rpc_server *server)
{
  if (server == NULL)
    return;
  stop_serving (server);
  rpc_pool_free (server->pool);
  server->pool = NULL;
  rpc_pool_free (server->bulk_pool);
  server->bulk_pool = NULL;
  rpc_pool_free (server->probe_pool);
  server->probe_pool = NULL;
  if (server->grpc)
    grpc_server_destroy (server->grpc);
  if (server->cq)
    grpc_completion_queue_destroy (server->cq);
  if (server->socket_bound && unlink (server->socket_path) < 0 && errno != ENOENT)
    husk_warn ("remove the socket `%s`: %s", server->socket_path, strerror (errno));
  rpc_server_unref (server);
}

int
rpc_server_run (struct rpc_server *server)
{
  int signo = 0;

  while (sigwait (&server->signals, &signo) != 0)
    ;
  husk_log (HUSK_LOG_INFO, "received %s: shutting down the gRPC server", strsignal (signo));
  return signo;
}

static int
register_methods (struct rpc_server *server, const struct rpc_method *methods, size_t n_methods,
                  struct husk_error **err)
{
  server->n_slots = n_methods + 1;
  server->slots = xcalloc (server->n_slots, sizeof *server->slots);
  for (size_t i = 0; i < n_methods; i++)
    {
      const struct rpc_method *method = &methods[i];

      if (method->path == NULL || method->path[0] != '/' || method->handler == NULL)
        return husk_error_make (
            err, 0, "register gRPC method %zu `%s`: needs a /package.Service/Method path and a handler", i,
            method->path ? method->path : "(null)");
      if ((method->flags & RPC_BATCHED_STREAM) && !(method->flags & RPC_SERVER_STREAMING))
        return husk_error_make (err, 0,
                                "register gRPC method `%s`: RPC_BATCHED_STREAM without RPC_SERVER_STREAMING",
                                method->path);
      server->slots[i].method = method;
      server->slots[i].handle = grpc_server_register_method (server->grpc, method->path, NULL,
                                                             GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
      if (server->slots[i].handle == NULL)
        return husk_error_make (err, 0, "register gRPC method `%s`: registered twice?", method->path);
    }
  return 0;
}

static int
bind_socket (struct rpc_server *server, struct husk_error **err)
{
  grpc_server_credentials *creds = grpc_insecure_server_credentials_create ();
  cleanup_free char *address = xasprintf ("unix:%s", server->socket_path);
  int port = grpc_server_add_http2_port (server->grpc, address, creds);

  grpc_server_credentials_release (creds);
  if (port <= 0)
    return husk_error_make (err, 0, "bind the gRPC socket `%s` (gRPC logs why)", server->socket_path);
  server->socket_bound = true;
  return rpc_socket_set_mode (server->socket_path, err);
}

static int
start_cq_threads (struct rpc_server *server, struct husk_error **err)
{
  server->cq_threads = xcalloc (server->opts.cq_threads, sizeof *server->cq_threads);
  for (; server->n_cq_threads < server->opts.cq_threads; server->n_cq_threads++)
    {
      int ret = pthread_create (&server->cq_threads[server->n_cq_threads], NULL, cq_thread_main, server);
      if (ret != 0)
        return husk_error_make (err, ret, "start gRPC completion-queue thread %u", server->n_cq_threads + 1);
    }
  return 0;
}

/* Everything up to serving; on failure the caller shuts down what exists. */
static int
setup (struct rpc_server *server, const struct rpc_method *methods, size_t n_methods, struct husk_error **err)
{
  grpc_arg max_receive = { .type = GRPC_ARG_INTEGER,
                           .key = (char *) GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                           .value.integer = (int) server->opts.max_receive_bytes };
  grpc_channel_args args = { .num_args = 1, .args = &max_receive };

  if (rpc_pool_new (server->opts.pool_workers, server->opts.pool_queue, &server->pool, err) < 0
      || rpc_pool_new (server->opts.bulk_workers, server->opts.bulk_queue, &server->bulk_pool, err) < 0
      || rpc_pool_new (server->opts.probe_workers, server->opts.probe_queue, &server->probe_pool, err) < 0)
    return -1;
  server->cq = grpc_completion_queue_create_for_next (NULL);
  if (start_cq_threads (server, err) < 0)
    return -1;
  server->grpc = grpc_server_create (&args, NULL);
  grpc_server_register_completion_queue (server->grpc, server->cq, NULL);
  if (register_methods (server, methods, n_methods, err) < 0 || bind_socket (server, err) < 0)
    return -1;
  grpc_server_start (server->grpc);
  for (size_t i = 0; i < server->n_slots; i++)
    for (unsigned k = 0; k < server->opts.cq_threads; k++)
      post_request (server, &server->slots[i]);
  return 0;
}

static void
init_monotonic_cond (pthread_cond_t *cond)
{
  pthread_condattr_t attr;

  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  pthread_cond_init (cond, &attr);
  pthread_condattr_destroy (&attr);
}

static const char *
socket_path_of (const char *endpoint)
{
  if (husk_str_has_prefix (endpoint, "unix://"))
    return endpoint + strlen ("unix://");
  return endpoint;
}

int
rpc_server_start (const struct rpc_server_options *opts, const struct rpc_method *methods, size_t n_methods,
                  struct rpc_server **out, struct husk_error **err)
{
  struct rpc_server *server;
  const char *path;
  int ret;

  if (opts->socket_path == NULL)
    return husk_error_make (err, 0, "start the gRPC server: no socket path");
  path = socket_path_of (opts->socket_path);
  if (rpc_socket_prepare (path, err) < 0)
    return husk_error_wrap (err, "start the gRPC server");

  server = xcalloc (1, sizeof *server);
  server->opts = options_with_defaults (opts);
  server->socket_path = xstrdup (path);
  server->opts.socket_path = server->socket_path;
  server->shutdown_tag.kind = RPC_TAG_SHUTDOWN;
  atomic_init (&server->refs, 1);
  pthread_mutex_init (&server->lock, NULL);
  init_monotonic_cond (&server->changed);
  /* Before grpc_init and any thread: everything started from here on
   * inherits the mask, so only rpc_server_run() sees these signals. */
  sigemptyset (&server->signals);
  sigaddset (&server->signals, SIGINT);
  sigaddset (&server->signals, SIGTERM);
  pthread_sigmask (SIG_BLOCK, &server->signals, NULL);
  grpc_init ();

  ret = setup (server, methods, n_methods, err);
  if (ret < 0)
    {
      rpc_server_shutdown (server);
      return husk_error_wrap (err, "start the gRPC server on `%s`", path);
    }
  husk_log (HUSK_LOG_INFO, "gRPC server listening on unix://%s (%zu methods)", path, n_methods);
  *out = server;
  return 0;
}
