/* Unit tests for rpc_server, driven with the grpc core client API over a
 * temp unix socket: unary replies and failures, unknown methods, the pool
 * for slow handlers, deadlines, metadata, streams and client cancels,
 * shutdown with open streams, the socket file, SIGTERM; batched streams (a
 * unary-style reply split between top-level protobuf fields) and their
 * splitter; and the latency and RSS of a server in its own process
 * (`test_rpc_server --serve PATH`). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>
#include <valgrind/valgrind.h>

#include "cri/rpc/internal.h"
#include "cri/rpc/server.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define ECHO "/test.Echo/Echo"
#define FAIL "/test.Echo/Fail"
#define SLOW "/test.Echo/Slow"
#define DEADLINE "/test.Echo/Deadline"
#define FORGET "/test.Echo/Forget"
#define META "/test.Echo/Meta"
#define THREE "/test.Echo/Three"
#define WATCH "/test.Echo/Watch"
#define HOLD "/test.Echo/Hold"
#define BATCH "/test.Echo/Batch"
#define BATCH_FAIL "/test.Echo/BatchFail"
#define BATCH_FORGET "/test.Echo/BatchForget"
#define BATCH_SLOW "/test.Echo/BatchSlow"
#define BULK "/test.Echo/Bulk"
#define PROBE "/test.Echo/Probe"

/* Timing bounds are generous, and ten times so under valgrind. */
static long
scaled (long ms)
{
  return RUNNING_ON_VALGRIND ? ms * 10 : ms;
}

static double
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static gpr_timespec
deadline_in_ms (long ms)
{
  if (ms <= 0)
    return gpr_inf_future (GPR_CLOCK_MONOTONIC);
  return gpr_time_add (gpr_now (GPR_CLOCK_MONOTONIC), gpr_time_from_millis (ms, GPR_TIMESPAN));
}

/* What the server-side handlers saw, for the tests to wait on. */
static struct
{
  pthread_mutex_t lock;
  pthread_cond_t changed;
  int64_t deadline_left;
  int deadlines;
  int cancels;
  int user_frees;
  int slow_started; /* slow handlers that began: a test waits on it instead of sleeping */
  int errors;       /* checks that failed off the test's thread, where cmocka cannot fail */
  struct rpc_call *held;
} seen = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0, 0, NULL };

static void
seen_reset (void)
{
  pthread_mutex_lock (&seen.lock);
  seen.deadlines = seen.cancels = seen.user_frees = seen.slow_started = seen.errors = 0;
  seen.held = NULL;
  pthread_mutex_unlock (&seen.lock);
}

static void
seen_bump (int *counter)
{
  pthread_mutex_lock (&seen.lock);
  (*counter)++;
  pthread_cond_broadcast (&seen.changed);
  pthread_mutex_unlock (&seen.lock);
}

/* Waits until *counter >= target; returns its value. */
static int
seen_wait (int *counter, int target, long timeout_ms)
{
  double until = now_ms () + timeout_ms;
  int value;

  pthread_mutex_lock (&seen.lock);
  while (*counter < target && now_ms () < until)
    {
      pthread_mutex_unlock (&seen.lock);
      usleep (2000);
      pthread_mutex_lock (&seen.lock);
    }
  value = *counter;
  pthread_mutex_unlock (&seen.lock);
  return value;
}

/* ---- server-side handlers ---- */

static void
handle_echo (struct rpc_call *call, const void *req, size_t len, void *user)
{
  rpc_reply (call, req, len);
}

static void
handle_fail (struct rpc_call *call, const void *req, size_t len, void *user)
{
  rpc_fail (call, GRPC_STATUS_INVALID_ARGUMENT, "bad request `%.*s`", (int) len, (const char *) req);
}

/* Sleeps as many milliseconds as the request says. */
static void
handle_slow (struct rpc_call *call, const void *req, size_t len, void *user)
{
  cleanup_free char *text = xasprintf ("%.*s", (int) len, (const char *) req);

  seen_bump (&seen.slow_started);
  usleep ((useconds_t) atoi (text) * 1000);
  rpc_reply (call, "slept", 5);
}

/* Sleeps as many milliseconds as the request says, then replies one
 * protobuf field. */
static void
handle_slow_batch (struct rpc_call *call, const void *req, size_t len, void *user)
{
  cleanup_free char *text = xasprintf ("%.*s", (int) len, (const char *) req);

  seen_bump (&seen.slow_started);
  usleep ((useconds_t) atoi (text) * 1000);
  rpc_reply (call, "\x08\x01", 2);
}

static void
handle_deadline (struct rpc_call *call, const void *req, size_t len, void *user)
{
  pthread_mutex_lock (&seen.lock);
  seen.deadline_left = rpc_call_deadline_ms_left (call);
  pthread_mutex_unlock (&seen.lock);
  seen_bump (&seen.deadlines);
  rpc_reply (call, NULL, 0);
}

static void
handle_forget (struct rpc_call *call, const void *req, size_t len, void *user)
{
}

static void
handle_meta (struct rpc_call *call, const void *req, size_t len, void *user)
{
  cleanup_free char *answer = NULL;
  const char *value;
  size_t value_len;

  if (!rpc_call_metadata (call, "x-husk-test", &value, &value_len))
    {
      rpc_fail (call, GRPC_STATUS_NOT_FOUND, "no x-husk-test metadata");
      return;
    }
  answer = xasprintf ("%.*s %s %s", (int) value_len, value, rpc_call_method (call), rpc_call_peer (call));
  rpc_reply (call, answer, strlen (answer));
}

/* Streams from a thread of its own, after the handler has returned. */
static void *
send_three (void *arg)
{
  struct rpc_call *call = arg;
  static const char *const words[] = { "one", "two", "three" };

  for (size_t i = 0; i < 3; i++)
    if (rpc_stream_send (call, words[i], strlen (words[i])) < 0)
      seen_bump (&seen.errors);
  if (rpc_stream_finish (call, GRPC_STATUS_OK, NULL) < 0)
    seen_bump (&seen.errors);
  return NULL;
}

static void
handle_three (struct rpc_call *call, const void *req, size_t len, void *user)
{
  pthread_t thread;

  if (pthread_create (&thread, NULL, send_three, call) != 0)
    abort ();
  pthread_detach (thread);
}

static void
on_watch_cancel (struct rpc_call *call, void *user)
{
  if (strcmp (user, "watch") != 0 || !rpc_call_cancelled (call))
    seen_bump (&seen.errors);
  seen_bump (&seen.cancels);
  rpc_stream_finish (call, GRPC_STATUS_CANCELLED, NULL);
}

static void
count_user_free (void *user)
{
  free (user);
  seen_bump (&seen.user_frees);
}

static void
handle_watch (struct rpc_call *call, const void *req, size_t len, void *user)
{
  rpc_stream_send (call, "hello", 5);
  rpc_call_on_cancel (call, on_watch_cancel, xstrdup ("watch"), count_user_free);
}

/* Keeps the stream and never finishes it: the test does, later. */
static void
handle_hold (struct rpc_call *call, const void *req, size_t len, void *user)
{
  rpc_stream_send (call, "held", 4);
  pthread_mutex_lock (&seen.lock);
  seen.held = call;
  pthread_cond_broadcast (&seen.changed);
  pthread_mutex_unlock (&seen.lock);
}

static const struct rpc_method test_methods[] = {
  { ECHO, handle_echo, NULL, 0 },
  { FAIL, handle_fail, NULL, 0 },
  { SLOW, handle_slow, NULL, RPC_SLOW },
  { BULK, handle_slow, NULL, RPC_SLOW | RPC_BULK },
  { PROBE, handle_slow, NULL, RPC_SLOW | RPC_PROBE },
  { DEADLINE, handle_deadline, NULL, 0 },
  { FORGET, handle_forget, NULL, 0 },
  { META, handle_meta, NULL, 0 },
  { THREE, handle_three, NULL, RPC_SERVER_STREAMING },
  { WATCH, handle_watch, NULL, RPC_SERVER_STREAMING },
  { HOLD, handle_hold, NULL, RPC_SERVER_STREAMING },
  /* The unary handlers, answering on batched streams. */
  { BATCH, handle_echo, NULL, RPC_SERVER_STREAMING | RPC_BATCHED_STREAM },
  { BATCH_FAIL, handle_fail, NULL, RPC_SERVER_STREAMING | RPC_BATCHED_STREAM },
  { BATCH_FORGET, handle_forget, NULL, RPC_SERVER_STREAMING | RPC_BATCHED_STREAM | RPC_SLOW },
  { BATCH_SLOW, handle_slow_batch, NULL, RPC_SERVER_STREAMING | RPC_BATCHED_STREAM | RPC_SLOW },
};
#define N_TEST_METHODS (sizeof test_methods / sizeof test_methods[0])

/* ---- client side ---- */

static char *
slice_dup (grpc_slice slice, size_t *len)
{
  if (len)
    *len = GRPC_SLICE_LENGTH (slice);
  return xasprintf ("%.*s", (int) GRPC_SLICE_LENGTH (slice), (const char *) GRPC_SLICE_START_PTR (slice));
}

static char *
buffer_dup (grpc_byte_buffer *buffer, size_t *len)
{
  grpc_byte_buffer_reader reader;
  grpc_slice slice;
  char *text;

  assert_true (grpc_byte_buffer_reader_init (&reader, buffer));
  slice = grpc_byte_buffer_reader_readall (&reader);
  text = slice_dup (slice, len);
  grpc_slice_unref (slice);
  grpc_byte_buffer_reader_destroy (&reader);
  return text;
}

static grpc_byte_buffer *
buffer_of (const void *bytes, size_t len)
{
  grpc_slice slice = grpc_slice_from_copied_buffer (bytes, len);
  grpc_byte_buffer *buffer = grpc_raw_byte_buffer_create (&slice, 1);

  grpc_slice_unref (slice);
  return buffer;
}

static grpc_channel *
client_channel (const char *socket_path)
{
  cleanup_free char *target = xasprintf ("unix:%s", socket_path);
  grpc_channel_credentials *creds = grpc_insecure_credentials_create ();
  grpc_channel *channel = grpc_channel_create (target, creds, NULL);

  grpc_channel_credentials_release (creds);
  return channel;
}

static void
cq_destroy (grpc_completion_queue *cq)
{
  grpc_completion_queue_shutdown (cq);
  while (grpc_completion_queue_next (cq, gpr_inf_future (GPR_CLOCK_MONOTONIC), NULL).type
         != GRPC_QUEUE_SHUTDOWN)
    ;
  grpc_completion_queue_destroy (cq);
}

struct reply
{
  grpc_status_code status;
  char *details;
  char *body; /* NULL when no message came */
  size_t len;
  double ms;
};

static void
reply_clear (struct reply *reply)
{
  free (reply->details);
  free (reply->body);
  memset (reply, 0, sizeof *reply);
}

/* One unary call in flight. */
struct unary
{
  grpc_call *call;
  grpc_metadata_array initial, trailing;
  grpc_byte_buffer *request, *response;
  grpc_status_code status;
  grpc_slice details;
  double started;
};

static void
unary_start (struct unary *u, grpc_channel *channel, grpc_completion_queue *cq, const char *method,
             const void *req, size_t len, long timeout_ms, grpc_metadata *md, size_t n_md, void *tag)
{
  grpc_slice path = grpc_slice_from_static_string (method);

  memset (u, 0, sizeof *u);
  u->started = now_ms ();
  u->call = grpc_channel_create_call (channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq, path, NULL,
                                      deadline_in_ms (timeout_ms), NULL);
  grpc_metadata_array_init (&u->initial);
  grpc_metadata_array_init (&u->trailing);
  u->request = buffer_of (req, len);
  grpc_op ops[] = {
    { .op = GRPC_OP_SEND_INITIAL_METADATA, .data.send_initial_metadata = { .count = n_md, .metadata = md } },
    { .op = GRPC_OP_SEND_MESSAGE, .data.send_message.send_message = u->request },
    { .op = GRPC_OP_SEND_CLOSE_FROM_CLIENT },
    { .op = GRPC_OP_RECV_INITIAL_METADATA, .data.recv_initial_metadata.recv_initial_metadata = &u->initial },
    { .op = GRPC_OP_RECV_MESSAGE, .data.recv_message.recv_message = &u->response },
    { .op = GRPC_OP_RECV_STATUS_ON_CLIENT,
      .data.recv_status_on_client
      = { .trailing_metadata = &u->trailing, .status = &u->status, .status_details = &u->details } },
  };
  assert_int_equal (grpc_call_start_batch (u->call, ops, sizeof ops / sizeof ops[0], tag, NULL),
                    GRPC_CALL_OK);
}

static void
unary_done (struct unary *u, struct reply *out)
{
  out->ms = now_ms () - u->started;
  out->status = u->status;
  out->details = slice_dup (u->details, NULL);
  out->body = u->response ? buffer_dup (u->response, &out->len) : NULL;
  if (u->response)
    grpc_byte_buffer_destroy (u->response);
  grpc_byte_buffer_destroy (u->request);
  grpc_slice_unref (u->details);
  grpc_metadata_array_destroy (&u->initial);
  grpc_metadata_array_destroy (&u->trailing);
  grpc_call_unref (u->call);
}

static void
unary_on (grpc_channel *channel, grpc_completion_queue *cq, const char *method, const void *req, size_t len,
          long timeout_ms, grpc_metadata *md, size_t n_md, struct reply *out)
{
  struct unary u;
  grpc_event ev;

  unary_start (&u, channel, cq, method, req, len, timeout_ms, md, n_md, &u);
  ev = grpc_completion_queue_next (cq, deadline_in_ms (scaled (30000)), NULL);
  assert_int_equal (ev.type, GRPC_OP_COMPLETE);
  assert_ptr_equal (ev.tag, &u);
  unary_done (&u, out);
}

/* One server stream, read message by message. */
enum stream_tag
{
  STREAM_START = 1,
  STREAM_STATUS,
  STREAM_MESSAGE,
  STREAM_TAGS,
};

struct stream
{
  grpc_completion_queue *cq;
  grpc_call *call;
  grpc_metadata_array initial, trailing;
  grpc_byte_buffer *request, *message;
  grpc_status_code status;
  grpc_slice details;
  bool done[STREAM_TAGS];
};

static void
stream_open_with (struct stream *s, grpc_channel *channel, const char *method, const void *req, size_t len)
{
  grpc_slice path = grpc_slice_from_static_string (method);

  memset (s, 0, sizeof *s);
  s->cq = grpc_completion_queue_create_for_next (NULL);
  s->call = grpc_channel_create_call (channel, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq, path, NULL,
                                      gpr_inf_future (GPR_CLOCK_MONOTONIC), NULL);
  grpc_metadata_array_init (&s->initial);
  grpc_metadata_array_init (&s->trailing);
  s->request = buffer_of (req, len);
  grpc_op start[] = {
    { .op = GRPC_OP_SEND_INITIAL_METADATA },
    { .op = GRPC_OP_SEND_MESSAGE, .data.send_message.send_message = s->request },
    { .op = GRPC_OP_SEND_CLOSE_FROM_CLIENT },
    { .op = GRPC_OP_RECV_INITIAL_METADATA, .data.recv_initial_metadata.recv_initial_metadata = &s->initial },
  };
  grpc_op status[] = {
    { .op = GRPC_OP_RECV_STATUS_ON_CLIENT,
      .data.recv_status_on_client
      = { .trailing_metadata = &s->trailing, .status = &s->status, .status_details = &s->details } },
  };
  assert_int_equal (grpc_call_start_batch (s->call, start, 4, (void *) STREAM_START, NULL), GRPC_CALL_OK);
  assert_int_equal (grpc_call_start_batch (s->call, status, 1, (void *) STREAM_STATUS, NULL), GRPC_CALL_OK);
}

static void
stream_open (struct stream *s, grpc_channel *channel, const char *method)
{
  stream_open_with (s, channel, method, "", 0);
}

static bool
stream_wait (struct stream *s, enum stream_tag tag, long timeout_ms)
{
  gpr_timespec until = deadline_in_ms (timeout_ms);

  while (!s->done[tag])
    {
      grpc_event ev = grpc_completion_queue_next (s->cq, until, NULL);
      if (ev.type != GRPC_OP_COMPLETE)
        return false;
      s->done[(intptr_t) ev.tag] = true;
    }
  return true;
}

/* The next message (NUL-terminated, its length in *len), or NULL at the
 * end of the stream. */
static char *
stream_recv_len (struct stream *s, size_t *len)
{
  grpc_op op = { .op = GRPC_OP_RECV_MESSAGE, .data.recv_message.recv_message = &s->message };
  char *text = NULL;

  s->done[STREAM_MESSAGE] = false;
  s->message = NULL;
  assert_int_equal (grpc_call_start_batch (s->call, &op, 1, (void *) STREAM_MESSAGE, NULL), GRPC_CALL_OK);
  assert_true (stream_wait (s, STREAM_MESSAGE, scaled (5000)));
  if (s->message)
    {
      text = buffer_dup (s->message, len);
      grpc_byte_buffer_destroy (s->message);
    }
  return text;
}

static char *
stream_recv (struct stream *s)
{
  return stream_recv_len (s, NULL);
}

/* Waits for the status and frees the stream; returns the status, and its
 * message in *details unless that is NULL. */
static grpc_status_code
stream_close_details (struct stream *s, long timeout_ms, char **details)
{
  bool got_status = stream_wait (s, STREAM_STATUS, timeout_ms);

  if (!got_status)
    grpc_call_cancel (s->call, NULL);
  assert_true (stream_wait (s, STREAM_STATUS, scaled (5000)));
  assert_true (stream_wait (s, STREAM_START, scaled (5000)));
  if (details)
    *details = slice_dup (s->details, NULL);
  grpc_call_unref (s->call);
  grpc_byte_buffer_destroy (s->request);
  grpc_slice_unref (s->details);
  grpc_metadata_array_destroy (&s->initial);
  grpc_metadata_array_destroy (&s->trailing);
  cq_destroy (s->cq);
  assert_true (got_status);
  return s->status;
}

static grpc_status_code
stream_close (struct stream *s, long timeout_ms)
{
  return stream_close_details (s, timeout_ms, NULL);
}

/* ---- fixture: a server on a fresh socket, and a client channel ---- */

struct fixture
{
  char *dir;
  char *socket_path;
  struct rpc_server *server;
  grpc_channel *channel;
  grpc_completion_queue *cq;
  pid_t child;
};

static int
start_test_server (struct fixture *f, const struct rpc_server_options *extra)
{
  struct rpc_server_options opts = extra ? *extra : (struct rpc_server_options){ 0 };
  struct husk_error *err = NULL;

  opts.socket_path = f->socket_path;
  if (rpc_server_start (&opts, test_methods, N_TEST_METHODS, &f->server, &err) < 0)
    {
      fprintf (stderr, "rpc_server_start: %s\n", err->msg);
      husk_error_free (&err);
      return -1;
    }
  return 0;
}

static int
setup_dir (void **state)
{
  struct fixture *f = xcalloc (1, sizeof *f);
  char tmpl[] = "/tmp/husk-test-rpc-XXXXXX";

  if (mkdtemp (tmpl) == NULL)
    return -1;
  f->dir = xstrdup (tmpl);
  /* A directory that does not exist yet: the server creates it. */
  f->socket_path = xasprintf ("%s/run/husk.sock", f->dir);
  *state = f;
  return 0;
}

static int
setup (void **state)
{
  struct fixture *f;

  if (setup_dir (state) < 0)
    return -1;
  f = *state;
  if (start_test_server (f, NULL) < 0)
    return -1;
  grpc_init (); /* the client's own reference, after the server blocked the signals */
  f->channel = client_channel (f->socket_path);
  f->cq = grpc_completion_queue_create_for_next (NULL);
  seen_reset ();
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *f = *state;

  if (f->child > 0)
    {
      kill (f->child, SIGKILL);
      waitpid (f->child, NULL, 0);
    }
  if (f->channel)
    grpc_channel_destroy (f->channel);
  if (f->cq)
    cq_destroy (f->cq);
  rpc_server_shutdown (f->server);
  grpc_shutdown ();
  husk_rm_rf (f->dir, NULL);
  free (f->socket_path);
  free (f->dir);
  free (f);
  return 0;
}

/* A new server with other options, and a new channel: the old one would
 * sit in reconnect backoff after its server went away. */
static void
restart_server (struct fixture *f, const struct rpc_server_options *opts)
{
  grpc_channel_destroy (f->channel);
  rpc_server_shutdown (f->server);
  f->server = NULL;
  assert_int_equal (start_test_server (f, opts), 0);
  f->channel = client_channel (f->socket_path);
}

static void
call_simple (struct fixture *f, const char *method, const char *req, long timeout_ms, struct reply *out)
{
  unary_on (f->channel, f->cq, method, req, strlen (req), timeout_ms, NULL, 0, out);
}

/* ---- tests ---- */

static void
test_unary_echo (void **state)
{
  struct fixture *f = *state;
  const size_t big_len = 1 << 20;
  cleanup_free char *big = xmalloc (big_len);
  struct reply r;

  call_simple (f, ECHO, "hello", 0, &r);
  assert_int_equal (r.status, GRPC_STATUS_OK);
  assert_string_equal (r.body, "hello");
  reply_clear (&r);

  call_simple (f, ECHO, "", 0, &r);
  assert_int_equal (r.status, GRPC_STATUS_OK);
  assert_int_equal (r.len, 0);
  reply_clear (&r);

  for (size_t i = 0; i < big_len; i++)
    big[i] = (char) ('a' + i % 26);
  unary_on (f->channel, f->cq, ECHO, big, big_len, 0, NULL, 0, &r);
  assert_int_equal (r.status, GRPC_STATUS_OK);
  assert_int_equal (r.len, big_len);
  assert_memory_equal (r.body, big, big_len);
  reply_clear (&r);
}

static void
test_unknown_method (void **state)
{
  struct fixture *f = *state;
  static const char *const unknown[] = { "/x.Y/Z", "/test.Echo/Nope", "/runtime.v1.RuntimeService/Version" };
  struct reply r;

  for (size_t i = 0; i < 3; i++)
    {
      cleanup_free char *expected = xasprintf ("unknown method %s", unknown[i]);
      call_simple (f, unknown[i], "x", 10000, &r);
      assert_int_equal (r.status, GRPC_STATUS_UNIMPLEMENTED);
      assert_string_equal (r.details, expected);
      assert_true (r.ms < scaled (1000));
      reply_clear (&r);
    }
}

static void
test_fail_with_message (void **state)
{
  struct fixture *f = *state;
  struct reply r;

  call_simple (f, FAIL, "no-such-pod", 0, &r);
  assert_int_equal (r.status, GRPC_STATUS_INVALID_ARGUMENT);
  assert_string_equal (r.details, "bad request `no-such-pod`");
  assert_null (r.body);
  reply_clear (&r);
}

static void
test_forgotten_reply_is_internal (void **state)
{
  struct fixture *f = *state;
  struct reply r;

  call_simple (f, FORGET, "x", 5000, &r);
  assert_int_equal (r.status, GRPC_STATUS_INTERNAL);
  assert_non_null (strstr (r.details, "returned without a reply"));
  reply_clear (&r);
  /* The server is still fine afterwards. */
  call_simple (f, ECHO, "still here", 0, &r);
  assert_int_equal (r.status, GRPC_STATUS_OK);
  reply_clear (&r);
}

static void
test_metadata_method_and_peer (void **state)
{
  struct fixture *f = *state;
  grpc_metadata md = { .key = grpc_slice_from_static_string ("x-husk-test"),
                       .value = grpc_slice_from_static_string ("abc") };
  struct reply r;

  unary_on (f->channel, f->cq, META, "", 0, 0, &md, 1, &r);
  assert_int_equal (r.status, GRPC_STATUS_OK);
  assert_true (husk_str_has_prefix (r.body, "abc " META " unix:"));
  reply_clear (&r);

  call_simple (f, META, "", 0, &r);
  assert_int_equal (r.status, GRPC_STATUS_NOT_FOUND);
  reply_clear (&r);
}

static void
test_deadline_reaches_handler (void **state)
{
  struct fixture *f = *state;
  struct reply r;

  call_simple (f, DEADLINE, "", 500, &r);
  assert_int_equal (r.status, GRPC_STATUS_OK);
  reply_clear (&r);
  assert_int_equal (seen.deadlines, 1);
  assert_true (seen.deadline_left > 0);
  assert_true (seen.deadline_left <= 500);

  call_simple (f, DEADLINE, "", 0, &r);
  assert_int_equal (r.status, GRPC_STATUS_OK);
  reply_clear (&r);
  assert_int_equal (seen.deadline_left, INT64_MAX);
}

/* The deadline passes while the handler still runs: the client gets
 * DEADLINE_EXCEEDED on time, and the late reply is dropped quietly. */
static void
test_deadline_exceeded (void **state)
{
  struct fixture *f = *state;
  struct reply r;

  call_simple (f, SLOW, "600", 200, &r);
  assert_int_equal (r.status, GRPC_STATUS_DEADLINE_EXCEEDED);
  assert_true (r.ms < scaled (550));
  reply_clear (&r);
  usleep (500 * 1000);
  call_simple (f, ECHO, "after", 0, &r);
  assert_int_equal (r.status, GRPC_STATUS_OK);
  reply_clear (&r);
}

/* 50 calls at once on one channel; the slow one must not hold up the rest. */
static void
test_slow_handler_does_not_block_fast_ones (void **state)
{
  struct fixture *f = *state;
  enum
  {
    N = 50
  };
  struct unary calls[N];
  struct reply replies[N];
  double slowest_fast = 0;

  unary_start (&calls[0], f->channel, f->cq, SLOW, "2000", 4, 0, NULL, 0, &calls[0]);
  usleep (20 * 1000);
  for (int i = 1; i < N; i++)
    unary_start (&calls[i], f->channel, f->cq, ECHO, "fast", 4, 0, NULL, 0, &calls[i]);
  for (int done = 0; done < N; done++)
    {
      grpc_event ev = grpc_completion_queue_next (f->cq, deadline_in_ms (scaled (10000)), NULL);
      assert_int_equal (ev.type, GRPC_OP_COMPLETE);
      struct unary *u = ev.tag;
      unary_done (u, &replies[u - calls]);
    }
  for (int i = 1; i < N; i++)
    {
      assert_int_equal (replies[i].status, GRPC_STATUS_OK);
      assert_string_equal (replies[i].body, "fast");
      if (replies[i].ms > slowest_fast)
        slowest_fast = replies[i].ms;
    }
  assert_int_equal (replies[0].status, GRPC_STATUS_OK);
  assert_string_equal (replies[0].body, "slept");
  assert_true (replies[0].ms >= 1900);
  assert_true (slowest_fast < scaled (1000));
  printf ("rpc_server: 49 fast calls beside a 2 s one: slowest %.1f ms\n", slowest_fast);
  for (int i = 0; i < N; i++)
    reply_clear (&replies[i]);
}

/* One worker and one queue slot: of three slow calls, one is refused. */
static void
test_full_pool_is_resource_exhausted (void **state)
{
  struct fixture *f = *state;
  struct rpc_server_options opts = { .pool_workers = 1, .pool_queue = 1 };
  struct unary calls[3];
  struct reply replies[3];
  int ok = 0, exhausted = 0;

  restart_server (f, &opts);
  for (int i = 0; i < 3; i++)
    unary_start (&calls[i], f->channel, f->cq, SLOW, "400", 3, 0, NULL, 0, &calls[i]);
  for (int done = 0; done < 3; done++)
    {
      grpc_event ev = grpc_completion_queue_next (f->cq, deadline_in_ms (scaled (10000)), NULL);
      assert_int_equal (ev.type, GRPC_OP_COMPLETE);
      struct unary *u = ev.tag;
      unary_done (u, &replies[u - calls]);
    }
  for (int i = 0; i < 3; i++)
    {
      if (replies[i].status == GRPC_STATUS_OK)
        ok++;
      else if (replies[i].status == GRPC_STATUS_RESOURCE_EXHAUSTED)
        {
          exhausted++;
          assert_non_null (strstr (replies[i].details, "too many slow calls"));
          assert_true (replies[i].ms < scaled (350));
        }
      reply_clear (&replies[i]);
    }
  assert_int_equal (ok, 2);
  assert_int_equal (exhausted, 1);
}

/* Transfers that hang (one bulk worker, one queue slot, all taken) never
 * take the workers of the other slow calls, which still answer at once. */
static void
test_bulk_pool_apart (void **state)
{
  struct fixture *f = *state;
  struct rpc_server_options opts = { .pool_workers = 1, .pool_queue = 1, .bulk_workers = 1, .bulk_queue = 1 };
  struct unary calls[5];
  struct reply replies[5];
  int exhausted = 0;

  restart_server (f, &opts);
  for (int i = 0; i < 3; i++)
    unary_start (&calls[i], f->channel, f->cq, BULK, "1500", 4, 0, NULL, 0, &calls[i]);
  usleep (100 * 1000);
  for (int i = 3; i < 5; i++)
    unary_start (&calls[i], f->channel, f->cq, SLOW, "10", 2, 0, NULL, 0, &calls[i]);
  for (int done = 0; done < 5; done++)
    {
      grpc_event ev = grpc_completion_queue_next (f->cq, deadline_in_ms (scaled (10000)), NULL);
      assert_int_equal (ev.type, GRPC_OP_COMPLETE);
      struct unary *u = ev.tag;
      unary_done (u, &replies[u - calls]);
    }
  for (int i = 0; i < 3; i++)
    if (replies[i].status == GRPC_STATUS_RESOURCE_EXHAUSTED)
      {
        exhausted++;
        assert_non_null (strstr (replies[i].details, "too many transfers"));
      }
  assert_int_equal (exhausted, 1);
  for (int i = 3; i < 5; i++)
    {
      assert_int_equal (replies[i].status, GRPC_STATUS_OK);
      assert_true (replies[i].ms < scaled (1000));
    }
  for (int i = 0; i < 5; i++)
    reply_clear (&replies[i]);
}

/* Probes wait on a pool of their own: with the slow pool full of calls
 * that hang (one worker, one queue slot), a burst of probes past their own
 * workers waits and all succeed; past workers + queue one is refused,
 * naming the limit. */
static void
test_probe_pool_apart (void **state)
{
  struct fixture *f = *state;
  struct rpc_server_options opts
      = { .pool_workers = 1, .pool_queue = 1, .probe_workers = 2, .probe_queue = 3 };
  enum
  {
    N_SLOW = 2,
    N_PROBE = 6,
    N = N_SLOW + N_PROBE
  };
  struct unary calls[N];
  struct reply replies[N];
  int ok = 0, exhausted = 0, order[N];

  restart_server (f, &opts);
  for (int i = 0; i < N_SLOW; i++)
    unary_start (&calls[i], f->channel, f->cq, SLOW, "4000", 4, 0, NULL, 0, &calls[i]);
  assert_int_equal (seen_wait (&seen.slow_started, 1, scaled (5000)), 1);
  for (int i = N_SLOW; i < N; i++)
    unary_start (&calls[i], f->channel, f->cq, PROBE, "50", 2, 0, NULL, 0, &calls[i]);
  for (int done = 0; done < N; done++)
    {
      grpc_event ev = grpc_completion_queue_next (f->cq, deadline_in_ms (scaled (20000)), NULL);
      assert_int_equal (ev.type, GRPC_OP_COMPLETE);
      struct unary *u = ev.tag;
      unary_done (u, &replies[u - calls]);
      order[u - calls] = done;
    }
  /* Not behind the slow calls: every probe ends before either of them. */
  for (int i = N_SLOW; i < N; i++)
    assert_true (order[i] < N_PROBE);
  for (int i = N_SLOW; i < N; i++)
    if (replies[i].status == GRPC_STATUS_OK)
      ok++;
    else
      {
        exhausted++;
        assert_int_equal (replies[i].status, GRPC_STATUS_RESOURCE_EXHAUSTED);
        assert_non_null (strstr (replies[i].details,
                                 PROBE ": too many calls in progress: 2 running and 3 "
                                       "waiting is the limit (probe_workers + probe_queue)"));
      }
  assert_int_equal (ok, 5);
  assert_int_equal (exhausted, 1);
  for (int i = 0; i < N; i++)
    reply_clear (&replies[i]);
}

static void
test_stream_three_messages (void **state)
{
  struct fixture *f = *state;
  static const char *const words[] = { "one", "two", "three" };
  struct stream s;

  stream_open (&s, f->channel, THREE);
  for (size_t i = 0; i < 3; i++)
    {
      cleanup_free char *msg = stream_recv (&s);
      assert_non_null (msg);
      assert_string_equal (msg, words[i]);
    }
  assert_null (stream_recv (&s));
  assert_int_equal (stream_close (&s, scaled (5000)), GRPC_STATUS_OK);
  assert_int_equal (seen.errors, 0);
}

static void
test_client_cancel_reaches_stream (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *first = NULL;
  struct stream s;

  stream_open (&s, f->channel, WATCH);
  first = stream_recv (&s);
  assert_string_equal (first, "hello");
  assert_int_equal (seen.cancels, 0);
  grpc_call_cancel (s.call, NULL);
  assert_int_equal (seen_wait (&seen.cancels, 1, scaled (2000)), 1);
  /* The user pointer goes once the call is released, after the callback. */
  assert_int_equal (seen_wait (&seen.user_frees, 1, scaled (2000)), 1);
  assert_int_equal (stream_close (&s, scaled (5000)), GRPC_STATUS_CANCELLED);
  assert_int_equal (seen.errors, 0);
}

/* ---- batched streams and their splitter ---- */

/* Appends field 1, length-delimited, `payload_len` bytes of `fill`;
 * returns the field's whole size. */
static size_t
append_entry (uint8_t *buf, size_t *len, size_t payload_len, uint8_t fill)
{
  size_t start = *len;

  buf[(*len)++] = 0x0a;
  for (size_t rest = payload_len;; rest >>= 7)
    {
      buf[(*len)++] = (uint8_t) ((rest & 0x7f) | (rest >> 7 ? 0x80 : 0));
      if (rest >> 7 == 0)
        break;
    }
  memset (buf + *len, fill, payload_len);
  *len += payload_len;
  return *len - start;
}

static void
test_batch_len_splits_at_fields (void **state)
{
  uint8_t buf[512];
  size_t len = 0;

  for (int i = 0; i < 3; i++)
    assert_int_equal (append_entry (buf, &len, 10, (uint8_t) ('a' + i)), 12);
  assert_int_equal (rpc_batch_len (buf, len, 24), 24);
  assert_int_equal (rpc_batch_len (buf, len, 35), 24);
  assert_int_equal (rpc_batch_len (buf, len, 36), 36);
  assert_int_equal (rpc_batch_len (buf, len, SIZE_MAX), 36);
  assert_int_equal (rpc_batch_len (buf + 24, len - 24, 24), 12);
  assert_int_equal (rpc_batch_len (buf, 0, 24), 0);

  /* A field larger than the limit goes alone, wherever it stands. */
  len = 0;
  append_entry (buf, &len, 10, 'a');
  assert_int_equal (append_entry (buf, &len, 200, 'b'), 203);
  append_entry (buf, &len, 10, 'c');
  assert_int_equal (rpc_batch_len (buf, len, 24), 12);
  assert_int_equal (rpc_batch_len (buf + 12, len - 12, 24), 203);
  assert_int_equal (rpc_batch_len (buf + 215, len - 215, 24), 12);
  assert_int_equal (rpc_batch_len (buf, len, 1), 12);
  assert_int_equal (rpc_batch_len (buf, len, SIZE_MAX), 227);
}

static void
test_batch_len_wire_types (void **state)
{
  static const uint8_t mixed[] = {
    0x08, 0x96, 0x01,                   /* 1: varint 150 */
    0x11, 1,    2,    3, 4, 5, 6, 7, 8, /* 2: fixed64 */
    0x1d, 1,    2,    3, 4,             /* 3: fixed32 */
    0x22, 0x00,                         /* 4: empty bytes */
    0x80, 0x01, 0x00,                   /* 16: varint 0, a two-byte tag */
  };
  static const struct
  {
    const char *what;
    uint8_t bytes[12];
    size_t len;
  } bad[] = {
    { "a length past the end", { 0x0a, 0x05, 'a' }, 3 },
    { "wire type 3 (group)", { 0x0b, 0x00 }, 2 },
    { "wire type 7", { 0x0f, 0x00 }, 2 },
    { "field number 0", { 0x02, 0x00 }, 2 },
    { "a varint cut short", { 0x08 }, 1 },
    { "fixed64 cut short", { 0x11, 1, 2, 3 }, 4 },
    { "fixed32 cut short", { 0x1d, 1, 2 }, 3 },
    { "a varint of 11 bytes",
      { 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 },
      12 },
  };
  static const uint8_t bad_after_good[] = { 0x08, 0x01, 0x0b };

  assert_int_equal (rpc_batch_len (mixed, sizeof mixed, SIZE_MAX), sizeof mixed);
  assert_int_equal (rpc_batch_len (mixed, sizeof mixed, 3), 3);
  assert_int_equal (rpc_batch_len (mixed, sizeof mixed, 12), 12);
  assert_int_equal (rpc_batch_len (mixed + 3, sizeof mixed - 3, 3), 9);
  assert_int_equal (rpc_batch_len (mixed + 12, sizeof mixed - 12, 7), 7);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      printf ("rpc_batch_len refuses %s\n", bad[i].what);
      assert_int_equal (rpc_batch_len (bad[i].bytes, bad[i].len, SIZE_MAX), -1);
    }
  /* The walk stops at the limit; what lies past it is read next time. */
  assert_int_equal (rpc_batch_len (bad_after_good, 3, 2), 2);
  assert_int_equal (rpc_batch_len (bad_after_good, 3, SIZE_MAX), -1);
}

/* What a batched stream sent: its messages (lengths, and joined), its
 * status and message. */
struct streamed
{
  size_t n;
  size_t lens[64];
  uint8_t *bytes;
  size_t len;
  grpc_status_code status;
  char *details;
};

static void
streamed_clear (struct streamed *out)
{
  free (out->bytes);
  free (out->details);
  memset (out, 0, sizeof *out);
}

static void
stream_all (struct fixture *f, const char *method, const void *req, size_t len, struct streamed *out)
{
  struct stream s;
  size_t msg_len;
  char *msg;

  memset (out, 0, sizeof *out);
  stream_open_with (&s, f->channel, method, req, len);
  while ((msg = stream_recv_len (&s, &msg_len)) != NULL)
    {
      assert_true (out->n < sizeof out->lens / sizeof out->lens[0]);
      out->lens[out->n++] = msg_len;
      out->bytes = xrealloc (out->bytes, out->len + msg_len + 1);
      memcpy (out->bytes + out->len, msg, msg_len);
      out->len += msg_len;
      free (msg);
    }
  out->status = stream_close_details (&s, scaled (5000), &out->details);
}

/* Ten 12-byte entries under a 24-byte limit: five messages, more than the
 * stream queue holds, every byte in order. */
static void
test_batched_stream_splits (void **state)
{
  struct fixture *f = *state;
  struct rpc_server_options opts = { .stream_batch_bytes = 24, .stream_queue_max = 2 };
  uint8_t req[256];
  size_t len = 0;
  struct streamed out;

  restart_server (f, &opts);
  for (int i = 0; i < 10; i++)
    append_entry (req, &len, 10, (uint8_t) ('a' + i));
  stream_all (f, BATCH, req, len, &out);
  assert_int_equal (out.status, GRPC_STATUS_OK);
  assert_int_equal (out.n, 5);
  for (size_t i = 0; i < out.n; i++)
    assert_int_equal (out.lens[i], 24);
  assert_int_equal (out.len, len);
  assert_memory_equal (out.bytes, req, len);
  streamed_clear (&out);

  len = 0;
  for (int i = 0; i < 3; i++)
    append_entry (req, &len, 10, 'x');
  stream_all (f, BATCH, req, len, &out);
  assert_int_equal (out.status, GRPC_STATUS_OK);
  assert_int_equal (out.n, 2);
  assert_int_equal (out.lens[0], 24);
  assert_int_equal (out.lens[1], 12);
  streamed_clear (&out);
}

static void
test_batched_stream_large_entry_alone (void **state)
{
  struct fixture *f = *state;
  struct rpc_server_options opts = { .stream_batch_bytes = 24 };
  uint8_t req[512];
  size_t len = 0;
  struct streamed out;

  restart_server (f, &opts);
  append_entry (req, &len, 10, 'a');
  append_entry (req, &len, 300, 'b');
  append_entry (req, &len, 10, 'c');
  stream_all (f, BATCH, req, len, &out);
  assert_int_equal (out.status, GRPC_STATUS_OK);
  assert_int_equal (out.n, 3);
  assert_int_equal (out.lens[0], 12);
  assert_int_equal (out.lens[1], 303);
  assert_int_equal (out.lens[2], 12);
  assert_memory_equal (out.bytes, req, len);
  streamed_clear (&out);
}

/* The default limit is 1 MiB: three 300 KiB entries fit in one message,
 * a fourth does not. */
static void
test_batched_stream_default_limit (void **state)
{
  struct fixture *f = *state;
  const size_t entry = 300 << 10, whole = entry + 4;
  cleanup_free uint8_t *req = xmalloc (5 * whole);
  size_t len = 0;
  struct streamed out;

  for (int i = 0; i < 5; i++)
    assert_int_equal (append_entry (req, &len, entry, (uint8_t) ('a' + i)), whole);
  stream_all (f, BATCH, req, len, &out);
  assert_int_equal (out.status, GRPC_STATUS_OK);
  assert_int_equal (out.n, 2);
  assert_int_equal (out.lens[0], 3 * whole);
  assert_int_equal (out.lens[1], 2 * whole);
  assert_memory_equal (out.bytes, req, len);
  streamed_clear (&out);
}

static void
test_batched_stream_empty (void **state)
{
  struct fixture *f = *state;
  struct streamed out;

  stream_all (f, BATCH, "", 0, &out);
  assert_int_equal (out.status, GRPC_STATUS_OK);
  assert_int_equal (out.n, 0);
  assert_string_equal (out.details, "");
  streamed_clear (&out);
}

/* rpc_fail, a reply that is not protobuf and a forgotten reply each end
 * the stream with their status and no message. */
static void
test_batched_stream_failures (void **state)
{
  struct fixture *f = *state;
  static const uint8_t not_protobuf[] = { 0x0a, 0x05, 'a' };
  struct streamed out;

  stream_all (f, BATCH_FAIL, "nope", 4, &out);
  assert_int_equal (out.status, GRPC_STATUS_INVALID_ARGUMENT);
  assert_string_equal (out.details, "bad request `nope`");
  assert_int_equal (out.n, 0);
  streamed_clear (&out);

  stream_all (f, BATCH, not_protobuf, sizeof not_protobuf, &out);
  assert_int_equal (out.status, GRPC_STATUS_INTERNAL);
  assert_non_null (strstr (out.details, "/test.Echo/Batch: the reply is not a protobuf message"));
  assert_int_equal (out.n, 0);
  streamed_clear (&out);

  stream_all (f, BATCH_FORGET, "", 0, &out);
  assert_int_equal (out.status, GRPC_STATUS_INTERNAL);
  assert_non_null (strstr (out.details, "returned without a reply"));
  assert_int_equal (out.n, 0);
  streamed_clear (&out);

  /* The server is still fine afterwards. */
  stream_all (f, BATCH, "\x08\x01", 2, &out);
  assert_int_equal (out.status, GRPC_STATUS_OK);
  assert_int_equal (out.n, 1);
  streamed_clear (&out);
  assert_int_equal (seen.errors, 0);
}

static void *
shutdown_thread (void *arg)
{
  rpc_server_shutdown (arg);
  return NULL;
}

/* Two open streams (one never finished by its owner) and a slow unary call
 * in flight: the unary call finishes within the grace period, the streams
 * are cancelled without waiting for the rest of it, and shutdown returns
 * soon after. */
static void
test_shutdown_with_open_streams (void **state)
{
  struct fixture *f = *state;
  struct rpc_server_options opts = { .shutdown_grace_ms = 2000 };
  cleanup_free char *held_msg = NULL, *watch_msg = NULL;
  struct stream held, watch;
  struct unary slow;
  struct reply slow_reply;
  grpc_event ev;
  pthread_t thread;
  double started, took;
  struct rpc_call *held_call;
  struct stat st;

  restart_server (f, &opts);
  stream_open (&held, f->channel, HOLD);
  stream_open (&watch, f->channel, WATCH);
  held_msg = stream_recv (&held);
  watch_msg = stream_recv (&watch);
  assert_string_equal (held_msg, "held");
  assert_string_equal (watch_msg, "hello");
  unary_start (&slow, f->channel, f->cq, SLOW, "250", 3, 0, NULL, 0, &slow);
  assert_int_equal (seen_wait (&seen.slow_started, 1, scaled (5000)), 1);

  started = now_ms ();
  assert_int_equal (pthread_create (&thread, NULL, shutdown_thread, f->server), 0);
  f->server = NULL;
  ev = grpc_completion_queue_next (f->cq, deadline_in_ms (scaled (5000)), NULL);
  assert_int_equal (ev.type, GRPC_OP_COMPLETE);
  unary_done (&slow, &slow_reply);
  assert_int_equal (slow_reply.status, GRPC_STATUS_OK);
  reply_clear (&slow_reply);
  pthread_join (thread, NULL);
  took = now_ms () - started;
  printf ("rpc_server: shutdown with two open streams and a 250 ms call took %.0f ms (grace 2000 ms)\n",
          took);
  assert_true (took >= 150);
  assert_true (took < scaled (1500));

  assert_int_equal (seen.cancels, 1);
  assert_int_not_equal (stream_close (&held, scaled (5000)), GRPC_STATUS_OK);
  assert_int_not_equal (stream_close (&watch, scaled (5000)), GRPC_STATUS_OK);
  assert_int_equal (stat (f->socket_path, &st), -1);

  /* The owner of the held stream finishes it late: nothing is sent. */
  held_call = seen.held;
  assert_non_null (held_call);
  assert_true (rpc_call_cancelled (held_call));
  assert_int_equal (rpc_stream_send (held_call, "late", 4), -1);
  assert_int_equal (errno, ECANCELED);
  rpc_stream_finish (held_call, GRPC_STATUS_OK, NULL);
  assert_int_equal (seen.errors, 0);
}

/* A batched stream ends by itself, so shutdown's grace period lets it
 * finish as it lets a unary call. */
static void
test_shutdown_waits_for_batched_stream (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *msg = NULL;
  struct stream s;
  pthread_t thread;
  size_t len = 0;

  /* A grace period no loaded machine runs out of: what is tested is that
   * shutdown waits for the batched stream, not how fast it ends. */
  struct rpc_server_options opts = { .shutdown_grace_ms = (unsigned) scaled (30000) };

  restart_server (f, &opts);
  stream_open_with (&s, f->channel, BATCH_SLOW, "250", 3);
  /* Shut down only once the handler runs: before, a loaded machine could
   * still have the call in flight and the server would refuse it. */
  assert_int_equal (seen_wait (&seen.slow_started, 1, scaled (5000)), 1);
  assert_int_equal (pthread_create (&thread, NULL, shutdown_thread, f->server), 0);
  f->server = NULL;
  msg = stream_recv_len (&s, &len);
  assert_non_null (msg);
  assert_int_equal (len, 2);
  assert_memory_equal (msg, "\x08\x01", 2);
  assert_int_equal (stream_close (&s, scaled (5000)), GRPC_STATUS_OK);
  pthread_join (thread, NULL);
}

static void
test_socket_mode_and_directory (void **state)
{
  struct fixture *f = *state;
  struct stat st;

  assert_int_equal (stat (f->socket_path, &st), 0);
  assert_true (S_ISSOCK (st.st_mode));
  assert_int_equal (st.st_mode & 07777, 0660);
}

static int
bind_unix (const char *path, bool listening)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  assert_true (fd >= 0);
  strcpy (addr.sun_path, path);
  assert_int_equal (bind (fd, (struct sockaddr *) &addr, sizeof addr), 0);
  if (listening)
    assert_int_equal (listen (fd, 4), 0);
  return fd;
}

static void
test_stale_socket_is_replaced (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *stale = xasprintf ("%s/stale.sock", f->dir);
  struct rpc_server_options opts = { .socket_path = stale };
  struct rpc_method echo = { ECHO, handle_echo, NULL, 0 };
  struct rpc_server *server = NULL;
  struct husk_error *err = NULL;
  grpc_channel *channel;
  struct reply r;
  struct stat st;

  close (bind_unix (stale, false)); /* what a crash leaves behind */
  assert_int_equal (stat (stale, &st), 0);
  assert_int_equal (rpc_server_start (&opts, &echo, 1, &server, &err), 0);
  assert_int_equal (stat (stale, &st), 0);
  assert_int_equal (st.st_mode & 07777, 0660);
  channel = client_channel (stale);
  unary_on (channel, f->cq, ECHO, "again", 5, 0, NULL, 0, &r);
  assert_int_equal (r.status, GRPC_STATUS_OK);
  reply_clear (&r);
  grpc_channel_destroy (channel);
  rpc_server_shutdown (server);
  assert_int_equal (stat (stale, &st), -1);
}

static void
test_live_socket_is_refused (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *live = xasprintf ("%s/live.sock", f->dir);
  cleanup_free char *file = xasprintf ("%s/file", f->dir);
  cleanup_close int listener = bind_unix (live, true);
  struct rpc_server_options opts = { .socket_path = live };
  struct rpc_method echo = { ECHO, handle_echo, NULL, 0 };
  struct rpc_server *server = NULL;
  struct husk_error *err = NULL;
  struct reply r;
  struct stat st;

  assert_int_equal (rpc_server_start (&opts, &echo, 1, &server, &err), -1);
  assert_non_null (strstr (err->msg, "another server is listening on"));
  assert_non_null (strstr (err->msg, live));
  husk_error_free (&err);
  assert_int_equal (stat (live, &st), 0);

  /* Our own running server is live too. */
  opts.socket_path = f->socket_path;
  assert_int_equal (rpc_server_start (&opts, &echo, 1, &server, &err), -1);
  assert_non_null (strstr (err->msg, "another server is listening on"));
  husk_error_free (&err);
  call_simple (f, ECHO, "unharmed", 0, &r);
  assert_int_equal (r.status, GRPC_STATUS_OK);
  reply_clear (&r);

  assert_int_equal (husk_write_file_replace (file, "x", 1, 0644, NULL), 0);
  opts.socket_path = file;
  assert_int_equal (rpc_server_start (&opts, &echo, 1, &server, &err), -1);
  assert_non_null (strstr (err->msg, "is not a socket"));
  husk_error_free (&err);
}

static void
test_bad_method_table (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *path = xasprintf ("%s/dup.sock", f->dir);
  struct rpc_server_options opts = { .socket_path = path };
  struct rpc_method dup[] = { { ECHO, handle_echo, NULL, 0 }, { ECHO, handle_echo, NULL, 0 } };
  struct rpc_method no_slash = { "test.Echo/Echo", handle_echo, NULL, 0 };
  struct rpc_method half_batched = { BATCH, handle_echo, NULL, RPC_BATCHED_STREAM };
  struct rpc_server *server = NULL;
  struct husk_error *err = NULL;
  struct stat st;

  assert_int_equal (rpc_server_start (&opts, dup, 2, &server, &err), -1);
  assert_non_null (strstr (err->msg, "registered twice"));
  husk_error_free (&err);
  assert_int_equal (stat (path, &st), -1);
  assert_int_equal (rpc_server_start (&opts, &no_slash, 1, &server, &err), -1);
  assert_non_null (strstr (err->msg, "test.Echo/Echo"));
  husk_error_free (&err);
  assert_int_equal (rpc_server_start (&opts, &half_batched, 1, &server, &err), -1);
  assert_non_null (strstr (err->msg, "RPC_BATCHED_STREAM without RPC_SERVER_STREAMING"));
  husk_error_free (&err);
  assert_int_equal (stat (path, &st), -1);
}

static void *
send_sigterm (void *arg)
{
  usleep (100 * 1000);
  kill (getpid (), SIGTERM);
  return NULL;
}

static void
test_run_returns_on_sigterm (void **state)
{
  struct fixture *f = *state;
  pthread_t thread;

  assert_int_equal (pthread_create (&thread, NULL, send_sigterm, NULL), 0);
  assert_int_equal (rpc_server_run (f->server), SIGTERM);
  pthread_join (thread, NULL);
}

/* ---- a server in its own process: latency, RSS, SIGTERM ---- */

static int
serve_main (const char *socket_path)
{
  struct rpc_server_options opts = { .socket_path = socket_path };
  struct rpc_method echo = { ECHO, handle_echo, NULL, 0 };
  struct rpc_server *server;
  struct husk_error *err = NULL;
  double started;

  if (rpc_server_start (&opts, &echo, 1, &server, &err) < 0)
    {
      husk_error_report (&err, "test_rpc_server");
      return 1;
    }
  printf ("ready\n");
  fflush (stdout);
  rpc_server_run (server);
  started = now_ms ();
  rpc_server_shutdown (server);
  /* grpc_shutdown() included: the server was its only user here. */
  fprintf (stderr, "rpc_server: --serve: rpc_server_shutdown took %.1f ms\n", now_ms () - started);
  return 0;
}

static long
rss_kb (pid_t pid)
{
  cleanup_free char *path = xasprintf ("/proc/%d/status", pid);
  cleanup_free char *status = NULL;
  const char *line;

  if (husk_read_file (path, &status, NULL, NULL) < 0 || (line = strstr (status, "VmRSS:")) == NULL)
    return -1;
  return strtol (line + strlen ("VmRSS:"), NULL, 10);
}

/* Resolved at start: under valgrind, /proc/self/exe names valgrind. */
static char self_exe[4096];

static pid_t
spawn_server (const char *socket_path)
{
  int pipe_fds[2];
  char ready[16] = "";
  pid_t pid;

  assert_int_equal (pipe2 (pipe_fds, O_CLOEXEC), 0);
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0)
    {
      dup2 (pipe_fds[1], 1);
      execl (self_exe, "test_rpc_server", "--serve", socket_path, (char *) NULL);
      _exit (127);
    }
  close (pipe_fds[1]);
  assert_true (read (pipe_fds[0], ready, sizeof ready - 1) > 0);
  close (pipe_fds[0]);
  assert_string_equal (ready, "ready\n");
  return pid;
}

static int
compare_doubles (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

struct bench
{
  grpc_channel *channel;
  double *latencies; /* ms */
  size_t n;
};

static void *
bench_thread (void *arg)
{
  struct bench *b = arg;
  grpc_completion_queue *cq = grpc_completion_queue_create_for_next (NULL);
  static const char payload[] = "0123456789abcdef";

  for (size_t i = 0; i < b->n; i++)
    {
      struct reply r;
      unary_on (b->channel, cq, ECHO, payload, sizeof payload - 1, 0, NULL, 0, &r);
      if (r.status != GRPC_STATUS_OK)
        seen_bump (&seen.errors);
      b->latencies[i] = r.ms;
      reply_clear (&r);
    }
  cq_destroy (cq);
  return NULL;
}

/* Runs `total` echo calls on `threads` threads; prints and returns p50 in ms. */
static double
bench_echo (grpc_channel *channel, unsigned threads, size_t total)
{
  cleanup_free double *latencies = xcalloc (total, sizeof *latencies);
  struct bench benches[16];
  pthread_t ids[16];
  double p50, p99;

  for (unsigned t = 0; t < threads; t++)
    {
      benches[t] = (struct bench){ channel, latencies + t * (total / threads), total / threads };
      assert_int_equal (pthread_create (&ids[t], NULL, bench_thread, &benches[t]), 0);
    }
  for (unsigned t = 0; t < threads; t++)
    pthread_join (ids[t], NULL);
  assert_int_equal (seen.errors, 0);
  qsort (latencies, total, sizeof *latencies, compare_doubles);
  p50 = latencies[total / 2];
  p99 = latencies[total * 99 / 100];
  printf ("rpc_server: unary echo, %zu calls on %u client thread(s): p50 %.0f us, p99 %.0f us\n", total,
          threads, p50 * 1000, p99 * 1000);
  return p50;
}

static void
test_server_process (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *path = xasprintf ("%s/bench.sock", f->dir);
  size_t calls = RUNNING_ON_VALGRIND ? 200 : 2000;
  grpc_channel *channel;
  long idle_kb, busy_kb;
  double started;
  int status = 0;

  f->child = spawn_server (path);
  usleep (200 * 1000);
  idle_kb = rss_kb (f->child);
  channel = client_channel (path);
  bench_echo (channel, 1, 50); /* connect and warm up */
  assert_true (bench_echo (channel, 1, calls) < scaled (20));
  assert_true (bench_echo (channel, 8, calls) < scaled (50));
  busy_kb = rss_kb (f->child);
  printf ("rpc_server: server process RSS: %ld kB idle, %ld kB after the calls\n", idle_kb, busy_kb);
  assert_true (idle_kb > 0 && idle_kb < 64 * 1024);

  started = now_ms ();
  kill (f->child, SIGTERM);
  assert_int_equal (waitpid (f->child, &status, 0), f->child);
  f->child = 0;
  printf ("rpc_server: server process exited %.0f ms after SIGTERM\n", now_ms () - started);
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 0);
  assert_true (now_ms () - started < scaled (5000));
  grpc_channel_destroy (channel);
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_unary_echo, setup, teardown),
    cmocka_unit_test_setup_teardown (test_unknown_method, setup, teardown),
    cmocka_unit_test_setup_teardown (test_fail_with_message, setup, teardown),
    cmocka_unit_test_setup_teardown (test_forgotten_reply_is_internal, setup, teardown),
    cmocka_unit_test_setup_teardown (test_metadata_method_and_peer, setup, teardown),
    cmocka_unit_test_setup_teardown (test_deadline_reaches_handler, setup, teardown),
    cmocka_unit_test_setup_teardown (test_deadline_exceeded, setup, teardown),
    cmocka_unit_test_setup_teardown (test_slow_handler_does_not_block_fast_ones, setup, teardown),
    cmocka_unit_test_setup_teardown (test_full_pool_is_resource_exhausted, setup, teardown),
    cmocka_unit_test_setup_teardown (test_bulk_pool_apart, setup, teardown),
    cmocka_unit_test_setup_teardown (test_probe_pool_apart, setup, teardown),
    cmocka_unit_test_setup_teardown (test_stream_three_messages, setup, teardown),
    cmocka_unit_test_setup_teardown (test_client_cancel_reaches_stream, setup, teardown),
    cmocka_unit_test_setup_teardown (test_shutdown_with_open_streams, setup, teardown),
    cmocka_unit_test_setup_teardown (test_batch_len_splits_at_fields, NULL, NULL),
    cmocka_unit_test_setup_teardown (test_batch_len_wire_types, NULL, NULL),
    cmocka_unit_test_setup_teardown (test_batched_stream_splits, setup, teardown),
    cmocka_unit_test_setup_teardown (test_batched_stream_large_entry_alone, setup, teardown),
    cmocka_unit_test_setup_teardown (test_batched_stream_default_limit, setup, teardown),
    cmocka_unit_test_setup_teardown (test_batched_stream_empty, setup, teardown),
    cmocka_unit_test_setup_teardown (test_batched_stream_failures, setup, teardown),
    cmocka_unit_test_setup_teardown (test_shutdown_waits_for_batched_stream, setup, teardown),
    cmocka_unit_test_setup_teardown (test_socket_mode_and_directory, setup, teardown),
    cmocka_unit_test_setup_teardown (test_stale_socket_is_replaced, setup, teardown),
    cmocka_unit_test_setup_teardown (test_live_socket_is_refused, setup, teardown),
    cmocka_unit_test_setup_teardown (test_bad_method_table, setup, teardown),
    cmocka_unit_test_setup_teardown (test_run_returns_on_sigterm, setup, teardown),
    cmocka_unit_test_setup_teardown (test_server_process, setup, teardown),
  };

  if (argc == 3 && strcmp (argv[1], "--serve") == 0)
    return serve_main (argv[2]);
  if (readlink ("/proc/self/exe", self_exe, sizeof self_exe - 1) < 0)
    return 1;
  return cmocka_run_group_tests (tests, NULL, NULL);
}
