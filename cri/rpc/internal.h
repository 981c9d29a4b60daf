/* What server.c (the server, its completion-queue threads and requests),
 * call.c (one call: replies, streams, cancels) and socket.c (the unix
 * socket file) share.  Private to those files (and their unit test). */
#ifndef HUSK_CRI_RPC_INTERNAL_H
#define HUSK_CRI_RPC_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <grpc/grpc.h>

#include "cri/rpc/pool.h"
#include "cri/rpc/server.h"

/* Every completion-queue event's tag points at one of these, embedded in
 * the call or server it belongs to. */
enum rpc_tag_kind
{
  RPC_TAG_REQUEST, /* a posted request got a call (or was killed by shutdown) */
  RPC_TAG_CLOSE,   /* RECV_CLOSE_ON_SERVER: the call is over, cancelled or not */
  RPC_TAG_SEND,    /* one streamed message went out */
  RPC_TAG_STATUS,  /* the final status went out */
  RPC_TAG_SHUTDOWN,
};

struct rpc_tag
{
  enum rpc_tag_kind kind;
};

/* One registered method, or with method == NULL the generic request that
 * catches every unknown path. */
struct rpc_method_slot
{
  const struct rpc_method *method;
  void *handle; /* from grpc_server_register_method */
};

struct rpc_out_msg
{
  grpc_byte_buffer *buffer;
  struct rpc_out_msg *next;
};

struct rpc_call
{
  struct rpc_server *server;
  const struct rpc_method_slot *slot;
  atomic_uint refs; /* see call.c */

  /* Filled in by gRPC when the request completes. */
  grpc_call *call;
  gpr_timespec deadline;
  grpc_metadata_array metadata;
  grpc_call_details details; /* unknown methods only */
  grpc_byte_buffer *payload;
  int close_cancelled;

  grpc_slice request;
  char *unknown_path; /* NUL-terminated copy of details.method */

  struct rpc_tag request_tag, close_tag, send_tag, status_tag;

  /* Under lock, which is also held around every grpc_call_start_batch. */
  pthread_mutex_t lock;
  bool sent_initial_metadata;
  bool finished;       /* the owner gave the final status */
  bool status_started; /* ... and it went to gRPC, or there is no one to send it to */
  bool closed;         /* RECV_CLOSE_ON_SERVER completed: no more batches */
  bool cancelled;
  bool cancel_fired;
  grpc_byte_buffer *reply; /* unary reply, sent with the status */
  grpc_byte_buffer *in_flight;
  struct rpc_out_msg *out_head, *out_tail;
  unsigned out_count;
  grpc_status_code final_code;
  char *final_msg;
  rpc_cancel_fn on_cancel;
  void *cancel_user;
  void (*cancel_user_free) (void *);
  char *peer; /* gpr_malloc'd by grpc_call_get_peer, on first use */

  /* For the call's log line (log.c): when it arrived (CLOCK_MONOTONIC)
   * and what the service named it by (under lock). */
  struct timespec arrived;
  struct husk_log_field log_fields[RPC_LOG_FIELDS_MAX];
  unsigned n_log_fields;
};

struct rpc_server
{
  grpc_server *grpc;
  grpc_completion_queue *cq;
  struct rpc_pool *pool;
  struct rpc_pool *bulk_pool;    /* RPC_BULK methods */
  struct rpc_pool *probe_pool;   /* RPC_PROBE methods */
  struct rpc_method_slot *slots; /* n_slots - 1 methods, then the generic one */
  size_t n_slots;
  pthread_t *cq_threads;
  unsigned n_cq_threads;
  struct rpc_server_options opts;
  char *socket_path;
  bool socket_bound;
  sigset_t signals;
  atomic_uint refs; /* one for the owner, one per rpc_call */

  pthread_mutex_t lock;
  pthread_cond_t changed; /* any of the counters below moved */
  bool shutting_down;
  bool shutdown_done;
  unsigned posted;     /* requests waiting for a call */
  unsigned open_calls; /* calls whose RECV_CLOSE_ON_SERVER has not completed */
  unsigned open_unary; /* ... of which not streams */
  struct rpc_tag shutdown_tag;
};

/* server_refs.c */
void rpc_server_unref (struct rpc_server *server);
/* After a call's close event. */
void rpc_server_call_closed (struct rpc_server *server, const struct rpc_method_slot *slot);
/* Wakes what waits on the counters; called with server->lock held. */
void rpc_server_changed_locked (struct rpc_server *server);
/* A stream that ends only when its owner says so (not a batched one). */
bool rpc_slot_open_ended (const struct rpc_method_slot *slot);

/* call.c */
struct rpc_call *rpc_call_new (struct rpc_server *server, const struct rpc_method_slot *slot);
void rpc_call_unref (struct rpc_call *call);
/* A request completed with a call: watches for its close, reads the
 * request and runs (or queues) the handler.  Consumes the request's ref. */
void rpc_call_arrived (struct rpc_call *call);
void rpc_call_event (struct rpc_call *call, enum rpc_tag_kind kind, bool success);
struct rpc_call *rpc_call_from_tag (struct rpc_tag *tag);
/* The length of the first batch of the protobuf message `bytes`: as many
 * whole top-level fields as fit in `limit` bytes, or the first field alone
 * when it is larger.  0 when `len` is 0; -1 when a field it reads does not
 * parse (cut short, field number 0, wire type 3, 4, 6 or 7). */
ssize_t rpc_batch_len (const uint8_t *bytes, size_t len, size_t limit);

/* log.c */
/* The call's one log line, once it has its status: debug when OK, warning
 * or error (by CODE) with MSG, the cause, when not.  CLIENT_GONE: the
 * status found no one to go to. */
void rpc_call_log (struct rpc_call *call, const char *method, grpc_status_code code, const char *msg,
                   bool client_gone);
/* A debug line when a long-lived stream (GetContainerEvents) starts. */
void rpc_call_log_started (const char *method);
const char *rpc_status_name (grpc_status_code code);
enum husk_log_level rpc_status_log_level (grpc_status_code code);

/* socket.c */
/* Checks and clears `path` for binding: see rpc_server_start(). */
int rpc_socket_prepare (const char *path, struct husk_error **err);
int rpc_socket_set_mode (const char *path, struct husk_error **err);

#endif
