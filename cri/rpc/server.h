/* A small gRPC server over a unix socket, on the grpc core C API.  It knows
 * no CRI messages: methods are registered by full path
 * ("/runtime.v1.RuntimeService/Version") and handlers get the request bytes
 * and reply with bytes; the CRI layer packs and unpacks protobuf-c. */
#ifndef HUSK_CRI_RPC_SERVER_H
#define HUSK_CRI_RPC_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/status.h>

#include "husk/error.h"

struct rpc_server;
struct rpc_call;

/* Handles one call.  `req`/`len` is the request message, valid until the
 * handler returns.
 *
 * A unary handler must answer with rpc_reply() or rpc_fail() before it
 * returns; the call is gone once it has returned.  (One that forgets is a
 * bug: it is logged and the client gets INTERNAL; built with -DHUSK_DEBUG
 * the server aborts instead.)
 *
 * A server-streaming handler sends with rpc_stream_send() from any thread
 * and ends with rpc_stream_finish() or rpc_fail(), exactly once, also from
 * any thread and also after the handler has returned: the call stays valid
 * until then, even after the client has gone or the server has shut down. */
typedef void (*rpc_handler) (struct rpc_call *call, const void *req, size_t len, void *user);

enum rpc_method_flags
{
  /* May block (pulls, stops, exec): runs on the worker pool, not on a
   * completion-queue thread.  When the pool's queue is full the client gets
   * RESOURCE_EXHAUSTED. */
  RPC_SLOW = 1 << 0,
  /* One request, a stream of replies (GetContainerEvents). */
  RPC_SERVER_STREAMING = 1 << 1,
  /* With RPC_SERVER_STREAMING: a server stream whose handler answers like a
   * unary one (the Stream* twins of the CRI List* calls).  rpc_reply() splits
   * the reply between top-level protobuf fields into messages of at most
   * stream_batch_bytes (a larger field goes alone), sends them and finishes
   * with OK; an empty reply sends no message.  rpc_fail() ends the stream
   * with its status, and a handler that returns without either gets
   * INTERNAL, as a unary one would. */
  RPC_BATCHED_STREAM = 1 << 2,
  /* With RPC_SLOW: long transfers (image pulls).  They run on a pool of
   * their own, so however many of them hang, the calls kubelet needs for
   * health (exec probes, stop, status) still find a worker. */
  RPC_BULK = 1 << 3,
  /* With RPC_SLOW: short calls a client sends in bursts to check health
   * (kubelet's exec probes, ExecSync).  They run on a pool of their own,
   * probe_workers running and probe_queue waiting, so neither a burst past
   * the slow pool nor slow calls that hang (stops) fails a probe: it waits.
   * A waiting call whose client leaves or whose deadline passes never runs;
   * past the bound the client gets RESOURCE_EXHAUSTED naming it. */
  RPC_PROBE = 1 << 4,
};

struct rpc_method
{
  const char *path; /* "/package.Service/Method"; must outlive the server */
  rpc_handler handler;
  void *user;
  unsigned flags; /* enum rpc_method_flags */
};

/* Zero means the default for every field but socket_path. */
struct rpc_server_options
{
  const char *socket_path;    /* /run/husk/husk.sock; a "unix://" prefix is accepted */
  unsigned cq_threads;        /* threads polling the completion queue: 2 */
  unsigned pool_workers;      /* workers for RPC_SLOW methods: 8 */
  unsigned pool_queue;        /* RPC_SLOW calls that may wait for a worker: 64 */
  unsigned bulk_workers;      /* workers for RPC_BULK methods: 4 */
  unsigned bulk_queue;        /* RPC_BULK calls that may wait for a worker: 16 */
  unsigned probe_workers;     /* workers for RPC_PROBE methods: 16 */
  unsigned probe_queue;       /* RPC_PROBE calls that may wait for a worker: 256 */
  unsigned shutdown_grace_ms; /* how long calls may finish before being cancelled: 2000 */
  unsigned stream_queue_max;  /* unsent messages a stream may hold: 1024 */
  size_t max_receive_bytes;   /* largest request accepted: 16 MiB, as kubelet sends */
  size_t stream_batch_bytes;  /* largest message of an RPC_BATCHED_STREAM reply: 1 MiB */
};

/* Blocks SIGINT and SIGTERM in the calling thread (call it from main before
 * starting other threads: gRPC's threads and the server's inherit the mask,
 * so rpc_server_run() is the one place that sees them), initialises gRPC,
 * prepares the socket (creates its directory, replaces a stale socket left by
 * a crash, refuses one that a live server answers on), binds it with mode
 * 0660 and starts serving.  `methods` must outlive the server. */
int rpc_server_start (const struct rpc_server_options *opts, const struct rpc_method *methods,
                      size_t n_methods, struct rpc_server **out, struct husk_error **err);

/* Waits for SIGINT or SIGTERM and returns its number.  Does not stop the
 * server: call rpc_server_shutdown() next. */
int rpc_server_run (struct rpc_server *server);

/* Stops taking calls, lets unary calls (and RPC_BATCHED_STREAM ones) in
 * progress finish for the grace period (other streams never end by
 * themselves, so they do not hold it up),
 * cancels the rest (the cancel callbacks of streams run), waits for RPC_SLOW
 * handlers still running to return (they should poll rpc_call_cancelled()),
 * removes the socket and frees the server.  Streams whose owners have not
 * finished them stay valid until they do; sends on them fail.  The matching
 * grpc_shutdown() runs once the last such call is released.  Not to be
 * called from a handler.  NULL is a no-op. */
void rpc_server_shutdown (struct rpc_server *server);

/* The final status of a call; each returns 0, or -1 with errno set:
 * EALREADY when the call already has its status, ECANCELED when the client
 * went away (nothing is sent then; the call is still released). */

/* Unary: replies `len` bytes and OK.  RPC_BATCHED_STREAM: sends them split
 * (see there) and OK.  EINVAL on other streams; EPROTO (and INTERNAL to the
 * client) when a batched reply is not a protobuf message. */
int rpc_reply (struct rpc_call *call, const void *bytes, size_t len);
/* Ends any call with a non-OK status and a message for the client.  On a
 * stream it is rpc_stream_finish() with that status. */
int rpc_fail (struct rpc_call *call, grpc_status_code code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* Streaming only.  Queues one message; at most one is in flight per call,
 * the rest wait in order (ENOBUFS past stream_queue_max, ECANCELED once the
 * client has gone, EALREADY after finish). */
int rpc_stream_send (struct rpc_call *call, const void *bytes, size_t len);
/* Sends the status after every queued message and releases the call: the
 * pointer is invalid once this returns.  `msg` may be NULL. */
int rpc_stream_finish (struct rpc_call *call, grpc_status_code code, const char *msg);

/* Runs `cb` once, on a completion-queue thread (so it must not block), when
 * the client cancels, the deadline passes or the server shuts down before
 * the call has its status; at once, in this thread, if that already
 * happened.  The call stays valid while `cb` runs even if another thread
 * finishes it meanwhile, so `cb` may call rpc_stream_finish().  `user` is
 * handed to `user_free` (may be NULL) when the call is released, which is
 * after `cb` has returned: so `user` may be what `cb` needs to find. */
typedef void (*rpc_cancel_fn) (struct rpc_call *call, void *user);
void rpc_call_on_cancel (struct rpc_call *call, rpc_cancel_fn cb, void *user, void (*user_free) (void *));

/* True once the client has gone away, the deadline has passed or the
 * server is shutting down with the call cancelled: long handlers poll it. */
bool rpc_call_cancelled (struct rpc_call *call);
/* Milliseconds until the client's deadline: 0 when passed, INT64_MAX when
 * the client set none. */
int64_t rpc_call_deadline_ms_left (struct rpc_call *call);
/* Milliseconds since the call arrived: for an RPC_SLOW handler, at its
 * start, how long it waited for a worker (a timeout in the request, such
 * as ExecSync's, counts from the call's arrival, as its client's does). */
int64_t rpc_call_age_ms (struct rpc_call *call);
const char *rpc_call_method (struct rpc_call *call);
/* Whether the call has its final status yet, and which (*CODE). */
bool rpc_call_status (struct rpc_call *call, grpc_status_code *code);
/* "unix:" for unix-socket peers, as gRPC reports them. */
const char *rpc_call_peer (struct rpc_call *call);
/* Adds KEY=VALUE to the call's log line (method, status, duration and
 * these): what the call is about, as "pod_sandbox_id" or "container_id".
 * KEY must outlive the call; VALUE is copied.  At most
 * RPC_LOG_FIELDS_MAX fields; a key given again replaces its value. */
#define RPC_LOG_FIELDS_MAX 6
void rpc_call_log_field (struct rpc_call *call, const char *key, const char *value);
/* The first value of request metadata `key` (lowercase), not
 * NUL-terminated; valid for the life of the call.  False if absent. */
bool rpc_call_metadata (struct rpc_call *call, const char *key, const char **value, size_t *len);

#endif
