/* One gRPC call on the server side: reading its request, running its
 * handler (inline or on the pool), its replies, the send queue of a stream,
 * and the client going away.
 *
 * A call is reference counted: one ref for the request or the running
 * handler, one per batch gRPC holds (close watch, send, status), one for the
 * owner of an open stream and one while a cancel callback runs.  Batches
 * start only under call->lock and never once the close event has been seen,
 * which is what lets the server shut its completion queue down while stream
 * owners still hold calls.
 *
 * An RPC_BATCHED_STREAM call is a stream whose handler replies once:
 * rpc_batch_len() cuts the reply between top-level protobuf fields and the
 * pieces go out as the stream's messages. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "cri/rpc/internal.h"
#include "husk/util.h"

#define container_of(ptr, type, member) ((type *) ((char *) (ptr) -offsetof (type, member)))

struct rpc_call *
rpc_call_new (struct rpc_server *server, const struct rpc_method_slot *slot)
{
  struct rpc_call *call = xcalloc (1, sizeof *call);

  atomic_fetch_add (&server->refs, 1);
  call->server = server;
  call->slot = slot;
  atomic_init (&call->refs, 1);
  grpc_metadata_array_init (&call->metadata);
  grpc_call_details_init (&call->details);
  call->request = grpc_empty_slice ();
  call->request_tag.kind = RPC_TAG_REQUEST;
  call->close_tag.kind = RPC_TAG_CLOSE;
  call->send_tag.kind = RPC_TAG_SEND;
  call->status_tag.kind = RPC_TAG_STATUS;
  pthread_mutex_init (&call->lock, NULL);
  return call;
}

struct rpc_call *
rpc_call_from_tag (struct rpc_tag *tag)
{
  switch (tag->kind)
    {
    case RPC_TAG_REQUEST:
      return container_of (tag, struct rpc_call, request_tag);
    case RPC_TAG_CLOSE:
      return container_of (tag, struct rpc_call, close_tag);
    case RPC_TAG_SEND:
      return container_of (tag, struct rpc_call, send_tag);
    case RPC_TAG_STATUS:
      return container_of (tag, struct rpc_call, status_tag);
    default:
      return NULL;
    }
}

static bool
is_streaming (const struct rpc_call *call)
{
  return call->slot->method && (call->slot->method->flags & RPC_SERVER_STREAMING);
}

static bool
is_batched (const struct rpc_call *call)
{
  return is_streaming (call) && (call->slot->method->flags & RPC_BATCHED_STREAM);
}

static void
drop_out_queue_locked (struct rpc_call *call)
{
  while (call->out_head)
    {
      struct rpc_out_msg *msg = call->out_head;
      call->out_head = msg->next;
      grpc_byte_buffer_destroy (msg->buffer);
      free (msg);
    }
  call->out_tail = NULL;
  call->out_count = 0;
}

static void
call_destroy (struct rpc_call *call)
{
  struct rpc_server *server = call->server;

  drop_out_queue_locked (call);
  if (call->cancel_user_free)
    call->cancel_user_free (call->cancel_user);
  if (call->call)
    grpc_call_unref (call->call);
  if (call->payload)
    grpc_byte_buffer_destroy (call->payload);
  if (call->reply)
    grpc_byte_buffer_destroy (call->reply);
  if (call->in_flight)
    grpc_byte_buffer_destroy (call->in_flight);
  grpc_slice_unref (call->request);
  grpc_metadata_array_destroy (&call->metadata);
  grpc_call_details_destroy (&call->details);
  gpr_free (call->peer);
  free (call->unknown_path);
  free (call->final_msg);
  for (unsigned i = 0; i < call->n_log_fields; i++)
    free ((char *) call->log_fields[i].value);
  pthread_mutex_destroy (&call->lock);
  free (call);
  rpc_server_unref (server);
}

static void
call_ref (struct rpc_call *call)
{
  atomic_fetch_add (&call->refs, 1);
}

void
rpc_call_unref (struct rpc_call *call)
{
  if (atomic_fetch_sub (&call->refs, 1) == 1)
    call_destroy (call);
}

static grpc_byte_buffer *
byte_buffer_of (const void *bytes, size_t len)
{
  grpc_slice slice = grpc_slice_malloc (len);
  grpc_byte_buffer *buffer;

  if (len > 0)
    memcpy (GRPC_SLICE_START_PTR (slice), bytes, len);
  buffer = grpc_raw_byte_buffer_create (&slice, 1);
  grpc_slice_unref (slice);
  return buffer;
}

/* Holds a ref for the batch until its completion comes back.  Called with
 * call->lock held and a ref held by the caller, so the rollback below never
 * drops the last one. */
static bool
start_batch_locked (struct rpc_call *call, const grpc_op *ops, size_t n_ops, struct rpc_tag *tag)
{
  grpc_call_error ret;

  call_ref (call);
  ret = grpc_call_start_batch (call->call, ops, n_ops, tag, NULL);
  if (ret == GRPC_CALL_OK)
    return true;
  husk_log (HUSK_LOG_ERROR, "gRPC refused a batch on %s: %s", rpc_call_method (call),
            grpc_call_error_to_string (ret));
  atomic_fetch_sub (&call->refs, 1);
  return false;
}

static void
add_initial_metadata (struct rpc_call *call, grpc_op *ops, size_t *n_ops)
{
  if (call->sent_initial_metadata)
    return;
  call->sent_initial_metadata = true;
  ops[*n_ops] = (grpc_op){ .op = GRPC_OP_SEND_INITIAL_METADATA };
  (*n_ops)++;
}

/* The final status, with the unary reply if there is one: always the last
 * batch of a call. */
static void
start_status_locked (struct rpc_call *call)
{
  grpc_slice details = grpc_empty_slice ();
  grpc_op ops[3];
  size_t n_ops = 0;

  call->status_started = true;
  if (call->closed)
    return;
  add_initial_metadata (call, ops, &n_ops);
  if (call->reply)
    ops[n_ops++] = (grpc_op){ .op = GRPC_OP_SEND_MESSAGE, .data.send_message.send_message = call->reply };
  if (call->final_msg)
    details = grpc_slice_from_copied_string (call->final_msg);
  ops[n_ops++] = (grpc_op){ .op = GRPC_OP_SEND_STATUS_FROM_SERVER,
                            .data.send_status_from_server = {
                                .status = call->final_code,
                                .status_details = call->final_msg ? &details : NULL,
                            } };
  start_batch_locked (call, ops, n_ops, &call->status_tag);
  grpc_slice_unref (details);
}

static void
start_send_locked (struct rpc_call *call, grpc_byte_buffer *buffer)
{
  grpc_op ops[2];
  size_t n_ops = 0;

  add_initial_metadata (call, ops, &n_ops);
  ops[n_ops++] = (grpc_op){ .op = GRPC_OP_SEND_MESSAGE, .data.send_message.send_message = buffer };
  call->in_flight = buffer;
  if (!start_batch_locked (call, ops, n_ops, &call->send_tag))
    {
      call->in_flight = NULL;
      grpc_byte_buffer_destroy (buffer);
      drop_out_queue_locked (call);
    }
}

/* Records the final status and sends it unless a streamed message is still
 * going out (then the send completion sends it).  Returns 0 or an errno. */
static int
finish_locked (struct rpc_call *call, grpc_status_code code, char *msg, grpc_byte_buffer *reply)
{
  if (call->finished)
    {
      free (msg);
      if (reply)
        grpc_byte_buffer_destroy (reply);
      return EALREADY;
    }
  call->finished = true;
  call->final_code = code;
  call->final_msg = msg;
  call->reply = reply;
  if (call->in_flight == NULL)
    start_status_locked (call);
  return call->closed ? ECANCELED : 0;
}

static int
errno_result (int errnum)
{
  if (errnum == 0)
    return 0;
  errno = errnum;
  return -1;
}

/* The final status for any call; on a stream it also drops the owner's
 * ref, once. */
static int
finish_call (struct rpc_call *call, grpc_status_code code, char *msg, grpc_byte_buffer *reply)
{
  int ret;

  pthread_mutex_lock (&call->lock);
  ret = finish_locked (call, code, msg, reply);
  if (ret != EALREADY)
    rpc_call_log (call, rpc_call_method (call), code, msg, ret == ECANCELED);
  pthread_mutex_unlock (&call->lock);
  if (ret != EALREADY && is_streaming (call))
    rpc_call_unref (call);
  return errno_result (ret);
}

int
rpc_fail (struct rpc_call *call, grpc_status_code code, const char *fmt, ...)
{
  char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  if (vasprintf (&msg, fmt, ap) < 0)
    abort ();
  va_end (ap);
  return finish_call (call, code, msg, NULL);
}

int
rpc_stream_finish (struct rpc_call *call, grpc_status_code code, const char *msg)
{
  return finish_call (call, code, msg ? xstrdup (msg) : NULL, NULL);
}

/* Sends `buffer` now, or queues it behind the message in flight; takes it
 * in every case.  `bounded` applies stream_queue_max.  Returns 0 or an
 * errno. */
static int
send_or_queue_locked (struct rpc_call *call, grpc_byte_buffer *buffer, bool bounded)
{
  struct rpc_out_msg *msg;
  int ret = 0;

  if (call->finished)
    ret = EALREADY;
  else if (call->closed)
    ret = ECANCELED;
  else if (bounded && call->in_flight && call->out_count >= call->server->opts.stream_queue_max)
    ret = ENOBUFS;
  if (ret != 0)
    {
      grpc_byte_buffer_destroy (buffer);
      return ret;
    }
  if (call->in_flight == NULL)
    {
      start_send_locked (call, buffer);
      return 0;
    }
  msg = xmalloc (sizeof *msg);
  *msg = (struct rpc_out_msg){ buffer, NULL };
  if (call->out_tail)
    call->out_tail->next = msg;
  else
    call->out_head = msg;
  call->out_tail = msg;
  call->out_count++;
  return 0;
}

int
rpc_stream_send (struct rpc_call *call, const void *bytes, size_t len)
{
  int ret;

  if (!is_streaming (call))
    return errno_result (EINVAL);
  pthread_mutex_lock (&call->lock);
  ret = send_or_queue_locked (call, byte_buffer_of (bytes, len), true);
  pthread_mutex_unlock (&call->lock);
  return errno_result (ret);
}

/* Reads a base-128 varint at bytes[*pos]; false when it is cut short or
 * longer than 10 bytes. */
static bool
read_varint (const uint8_t *bytes, size_t len, size_t *pos, uint64_t *value)
{
  uint64_t result = 0;

  for (unsigned shift = 0; shift < 64 && *pos < len; shift += 7)
    {
      uint8_t byte = bytes[(*pos)++];
      result |= (uint64_t) (byte & 0x7f) << shift;
      if (!(byte & 0x80))
        {
          *value = result;
          return true;
        }
    }
  return false;
}

/* The length of the field that starts at bytes[0], tag included; 0 when it
 * does not parse.  Groups (wire types 3 and 4) are refused: proto3 has none. */
static size_t
field_len (const uint8_t *bytes, size_t len)
{
  static const uint64_t max_field_number = (1u << 29) - 1;
  size_t pos = 0;
  uint64_t tag, value;

  if (!read_varint (bytes, len, &pos, &tag) || tag >> 3 == 0 || tag >> 3 > max_field_number)
    return 0;
  switch (tag & 7)
    {
    case 0: /* varint */
      return read_varint (bytes, len, &pos, &value) ? pos : 0;
    case 1: /* fixed64 */
      return len - pos >= 8 ? pos + 8 : 0;
    case 2: /* length-delimited */
      if (!read_varint (bytes, len, &pos, &value) || value > len - pos)
        return 0;
      return pos + value;
    case 5: /* fixed32 */
      return len - pos >= 4 ? pos + 4 : 0;
    default:
      return 0;
    }
}

ssize_t
rpc_batch_len (const uint8_t *bytes, size_t len, size_t limit)
{
  size_t batch = 0;

  while (batch < len && (batch == 0 || batch < limit))
    {
      size_t field = field_len (bytes + batch, len - batch);

      if (field == 0)
        return -1;
      if (batch > 0 && field > limit - batch)
        break;
      batch += field;
    }
  return (ssize_t) batch;
}

static grpc_byte_buffer *
byte_buffer_of_part (grpc_slice whole, size_t begin, size_t end)
{
  grpc_slice part = grpc_slice_sub (whole, begin, end);
  grpc_byte_buffer *buffer = grpc_raw_byte_buffer_create (&part, 1);

  grpc_slice_unref (part);
  return buffer;
}

/* Queues every batch before finishing, outside stream_queue_max: the
 * reply is already whole in memory, so there is no producer to hold back.
 * The batches share one copy of the bytes. */
static int
queue_batches (struct rpc_call *call, const uint8_t *bytes, size_t len)
{
  size_t limit = call->server->opts.stream_batch_bytes;
  grpc_slice whole = grpc_slice_from_copied_buffer ((const char *) bytes, len);
  int ret = 0;

  pthread_mutex_lock (&call->lock);
  if (call->finished)
    ret = EALREADY;
  for (size_t at = 0, batch; ret == 0 && at < len; at += batch)
    {
      batch = (size_t) rpc_batch_len (bytes + at, len - at, limit);
      ret = send_or_queue_locked (call, byte_buffer_of_part (whole, at, at + batch), false);
    }
  pthread_mutex_unlock (&call->lock);
  grpc_slice_unref (whole);
  return ret;
}

static int
reply_batched (struct rpc_call *call, const void *bytes, size_t len)
{
  /* Checked whole first, so that a bad reply sends no part of itself. */
  if (rpc_batch_len (bytes, len, SIZE_MAX) != (ssize_t) len)
    {
      char *msg = xasprintf ("%s: the reply is not a protobuf message", rpc_call_method (call));

      husk_log (HUSK_LOG_ERROR, "%s", msg);
      if (finish_call (call, GRPC_STATUS_INTERNAL, msg, NULL) < 0 && errno == EALREADY)
        return -1;
      return errno_result (EPROTO);
    }
  if (queue_batches (call, bytes, len) == EALREADY)
    return errno_result (EALREADY);
  return finish_call (call, GRPC_STATUS_OK, NULL, NULL);
}

int
rpc_reply (struct rpc_call *call, const void *bytes, size_t len)
{
  if (is_batched (call))
    return reply_batched (call, bytes, len);
  if (is_streaming (call))
    {
      husk_warn ("rpc_reply on the stream %s: use rpc_stream_send and rpc_stream_finish",
                 rpc_call_method (call));
      return errno_result (EINVAL);
    }
  return finish_call (call, GRPC_STATUS_OK, NULL, byte_buffer_of (bytes, len));
}

static void
on_send_done (struct rpc_call *call, bool success)
{
  pthread_mutex_lock (&call->lock);
  grpc_byte_buffer_destroy (call->in_flight);
  call->in_flight = NULL;
  if (!success)
    drop_out_queue_locked (call);
  if (call->out_head && !call->closed)
    {
      struct rpc_out_msg *msg = call->out_head;
      call->out_head = msg->next;
      if (call->out_head == NULL)
        call->out_tail = NULL;
      call->out_count--;
      start_send_locked (call, msg->buffer);
      free (msg);
    }
  if (call->in_flight == NULL && call->finished && !call->status_started)
    start_status_locked (call);
  pthread_mutex_unlock (&call->lock);
}

static void
on_status_done (struct rpc_call *call)
{
  pthread_mutex_lock (&call->lock);
  if (call->reply)
    grpc_byte_buffer_destroy (call->reply);
  call->reply = NULL;
  pthread_mutex_unlock (&call->lock);
}

static void
run_cancel_callback (struct rpc_call *call, rpc_cancel_fn cb)
{
  cb (call, call->cancel_user);
  rpc_call_unref (call);
}

/* Decides under the lock whether the cancel callback is due now; if so
 * takes the ref that keeps the call alive while it runs. */
static rpc_cancel_fn
cancel_callback_due_locked (struct rpc_call *call)
{
  if (!call->cancelled || call->finished || call->cancel_fired || call->on_cancel == NULL)
    return NULL;
  call->cancel_fired = true;
  call_ref (call);
  return call->on_cancel;
}

static void
on_close (struct rpc_call *call)
{
  rpc_cancel_fn cb;

  pthread_mutex_lock (&call->lock);
  call->closed = true;
  call->cancelled = call->close_cancelled != 0;
  if (call->cancelled)
    drop_out_queue_locked (call);
  cb = cancel_callback_due_locked (call);
  pthread_mutex_unlock (&call->lock);
  rpc_server_call_closed (call->server, call->slot);
  if (cb)
    run_cancel_callback (call, cb);
}

void
rpc_call_event (struct rpc_call *call, enum rpc_tag_kind kind, bool success)
{
  switch (kind)
    {
    case RPC_TAG_CLOSE:
      on_close (call);
      break;
    case RPC_TAG_SEND:
      on_send_done (call, success);
      break;
    case RPC_TAG_STATUS:
      on_status_done (call);
      break;
    default:
      break;
    }
  rpc_call_unref (call);
}

void
rpc_call_on_cancel (struct rpc_call *call, rpc_cancel_fn cb, void *user, void (*user_free) (void *))
{
  rpc_cancel_fn due;

  pthread_mutex_lock (&call->lock);
  if (call->cancel_user_free && call->cancel_user != user)
    call->cancel_user_free (call->cancel_user);
  call->on_cancel = cb;
  call->cancel_user = user;
  call->cancel_user_free = user_free;
  due = cancel_callback_due_locked (call);
  pthread_mutex_unlock (&call->lock);
  if (due)
    run_cancel_callback (call, due);
}

int64_t
rpc_call_deadline_ms_left (struct rpc_call *call)
{
  gpr_timespec deadline = gpr_convert_clock_type (call->deadline, GPR_CLOCK_MONOTONIC);
  gpr_timespec now = gpr_now (GPR_CLOCK_MONOTONIC);
  gpr_timespec left;

  if (gpr_time_cmp (deadline, gpr_inf_future (GPR_CLOCK_MONOTONIC)) == 0)
    return INT64_MAX;
  if (gpr_time_cmp (deadline, now) <= 0)
    return 0;
  left = gpr_time_sub (deadline, now);
  return left.tv_sec * 1000 + left.tv_nsec / 1000000;
}

int64_t
rpc_call_age_ms (struct rpc_call *call)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (int64_t) (now.tv_sec - call->arrived.tv_sec) * 1000
         + (now.tv_nsec - call->arrived.tv_nsec) / 1000000;
}

bool
rpc_call_cancelled (struct rpc_call *call)
{
  bool cancelled;

  pthread_mutex_lock (&call->lock);
  cancelled = call->cancelled;
  pthread_mutex_unlock (&call->lock);
  return cancelled || rpc_call_deadline_ms_left (call) == 0;
}

const char *
rpc_call_method (struct rpc_call *call)
{
  return call->slot->method ? call->slot->method->path : call->unknown_path;
}

bool
rpc_call_status (struct rpc_call *call, grpc_status_code *code)
{
  bool finished;

  pthread_mutex_lock (&call->lock);
  finished = call->finished;
  *code = call->final_code;
  pthread_mutex_unlock (&call->lock);
  return finished;
}

const char *
rpc_call_peer (struct rpc_call *call)
{
  const char *peer;

  pthread_mutex_lock (&call->lock);
  if (call->peer == NULL)
    call->peer = grpc_call_get_peer (call->call);
  peer = call->peer;
  pthread_mutex_unlock (&call->lock);
  return peer;
}

bool
rpc_call_metadata (struct rpc_call *call, const char *key, const char **value, size_t *len)
{
  size_t key_len = strlen (key);

  for (size_t i = 0; i < call->metadata.count; i++)
    {
      const grpc_metadata *md = &call->metadata.metadata[i];
      if (GRPC_SLICE_LENGTH (md->key) == key_len
          && memcmp (GRPC_SLICE_START_PTR (md->key), key, key_len) == 0)
        {
          *value = (const char *) GRPC_SLICE_START_PTR (md->value);
          *len = GRPC_SLICE_LENGTH (md->value);
          return true;
        }
    }
  return false;
}

/* Runs the handler and makes sure a unary call gets its one status.  A call
 * cancelled while it waited for a worker never reaches its handler. */
static void
run_handler (void *arg)
{
  struct rpc_call *call = arg;
  const struct rpc_method *method = call->slot->method;
  bool forgot;

  if (is_streaming (call))
    call_ref (call); /* the owner's, until the stream is finished */
  if (is_streaming (call) && !is_batched (call))
    rpc_call_log_started (rpc_call_method (call)); /* its end may be hours away */
  if (rpc_call_cancelled (call))
    finish_call (call, GRPC_STATUS_CANCELLED, NULL, NULL);
  else
    method->handler (call, GRPC_SLICE_START_PTR (call->request), GRPC_SLICE_LENGTH (call->request),
                     method->user);
  pthread_mutex_lock (&call->lock);
  forgot = !call->finished && (!is_streaming (call) || is_batched (call));
  pthread_mutex_unlock (&call->lock);
  if (forgot)
    {
      husk_log (HUSK_LOG_ERROR, "handler for %s returned without a reply", method->path);
#ifdef HUSK_DEBUG
      abort ();
#endif
      finish_call (call, GRPC_STATUS_INTERNAL,
                   xasprintf ("%s: handler returned without a reply", method->path), NULL);
    }
  grpc_slice_unref (call->request);
  call->request = grpc_empty_slice ();
  rpc_call_unref (call);
}

/* Moves the request bytes into call->request; false if there are none. */
static bool
read_request (struct rpc_call *call)
{
  grpc_byte_buffer_reader reader;

  if (call->payload == NULL || !grpc_byte_buffer_reader_init (&reader, call->payload))
    return false;
  call->request = grpc_byte_buffer_reader_readall (&reader);
  grpc_byte_buffer_reader_destroy (&reader);
  grpc_byte_buffer_destroy (call->payload);
  call->payload = NULL;
  return true;
}

static void
watch_close (struct rpc_call *call)
{
  grpc_op op
      = { .op = GRPC_OP_RECV_CLOSE_ON_SERVER, .data.recv_close_on_server.cancelled = &call->close_cancelled };

  pthread_mutex_lock (&call->lock);
  if (!start_batch_locked (call, &op, 1, &call->close_tag))
    {
      /* Without the close event nothing tells us the call ended. */
      call->closed = true;
      rpc_server_call_closed (call->server, call->slot);
    }
  pthread_mutex_unlock (&call->lock);
}

/* Replies on the completion-queue thread without running a handler, and
 * releases the request's ref. */
static void
refuse (struct rpc_call *call, grpc_status_code code, char *msg)
{
  if (is_streaming (call))
    call_ref (call); /* the owner's ref, which finishing drops */
  finish_call (call, code, msg, NULL);
  rpc_call_unref (call);
}

void
rpc_call_arrived (struct rpc_call *call)
{
  const struct rpc_method *method = call->slot->method;

  clock_gettime (CLOCK_MONOTONIC, &call->arrived);
  watch_close (call);
  if (method == NULL)
    {
      call->unknown_path = xasprintf ("%.*s", (int) GRPC_SLICE_LENGTH (call->details.method),
                                      (const char *) GRPC_SLICE_START_PTR (call->details.method));
      refuse (call, GRPC_STATUS_UNIMPLEMENTED, xasprintf ("unknown method %s", call->unknown_path));
      return;
    }
  if (!read_request (call))
    {
      refuse (call, GRPC_STATUS_INVALID_ARGUMENT, xasprintf ("%s: the request has no message", method->path));
      return;
    }
  if (!(method->flags & RPC_SLOW))
    {
      run_handler (call);
      return;
    }
  if (method->flags & RPC_PROBE)
    {
      if (rpc_pool_submit (call->server->probe_pool, run_handler, call) == 0)
        return;
      refuse (call, GRPC_STATUS_RESOURCE_EXHAUSTED,
              xasprintf ("%s: too many calls in progress: %u running and %u waiting is the limit "
                         "(probe_workers + probe_queue)",
                         method->path, call->server->opts.probe_workers, call->server->opts.probe_queue));
      return;
    }
  if (method->flags & RPC_BULK)
    {
      if (rpc_pool_submit (call->server->bulk_pool, run_handler, call) == 0)
        return;
      refuse (call, GRPC_STATUS_RESOURCE_EXHAUSTED,
              xasprintf ("%s: too many transfers in progress (%u workers, %u waiting)", method->path,
                         call->server->opts.bulk_workers, call->server->opts.bulk_queue));
      return;
    }
  if (rpc_pool_submit (call->server->pool, run_handler, call) == 0)
    return;
  refuse (call, GRPC_STATUS_RESOURCE_EXHAUSTED,
          xasprintf ("%s: too many slow calls in progress (%u workers, %u waiting)", method->path,
                     call->server->opts.pool_workers, call->server->opts.pool_queue));
}
