/* The streaming server's parts (cri/streaming/): SPDY frames, header
 * blocks through zlib with the SPDY/3 dictionary, one-time tokens that
 * expire, the error stream's status, a whole exec session against the
 * server with a run callback of the test's, and the front door: request
 * heads, clients that vanish (a reset), drip or idle. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cri/streaming/http_head.h"
#include "cri/streaming/server.h"
#include "cri/streaming/session.h"
#include "cri/streaming/spdy.h"
#include "cri/streaming/tokens.h"
#include "cri/streaming/ws.h"
#include "husk/cleanup.h"
#include "husk/util.h"

static void
test_dictionary (void **state)
{
  size_t len;
  const uint8_t *dict = spdy_dictionary (&len);

  assert_int_equal (len, 1423); /* the size of the SPDY/3 draft's dictionary */
  assert_memory_equal (dict, "\0\0\0\7options\0\0\0\4head", 19);
  assert_memory_equal (dict + len - 6, "enq=0.", 6);
}

static void
test_frames (void **state)
{
  struct spdy_buf buf = { 0 };
  struct spdy_frame f;
  struct husk_error *err = NULL;
  size_t used, off = 0;

  spdy_put_data (&buf, 5, SPDY_FLAG_FIN, "hello", 5);
  spdy_put_rst (&buf, 7, SPDY_CANCEL);
  spdy_put_ping (&buf, 42);
  spdy_put_goaway (&buf, 9, 0);
  spdy_put_window_update (&buf, 3, 1000);

  assert_int_equal (spdy_parse (buf.data, 7, &f, &used, &err), 0);
  assert_int_equal (used, 0); /* not complete yet */
  assert_int_equal (spdy_parse (buf.data, 12, &f, &used, &err), 0);
  assert_int_equal (used, 0);
  assert_int_equal (spdy_parse (buf.data, buf.len, &f, &used, &err), 0);
  assert_int_equal (used, 13);
  assert_int_equal (f.type, SPDY_DATA);
  assert_int_equal (f.stream_id, 5);
  assert_int_equal (f.flags, SPDY_FLAG_FIN);
  assert_int_equal (f.payload_len, 5);
  assert_memory_equal (f.payload, "hello", 5);
  off += used;
  assert_int_equal (spdy_parse (buf.data + off, buf.len - off, &f, &used, &err), 0);
  assert_int_equal (f.type, SPDY_RST_STREAM);
  assert_int_equal (f.stream_id, 7);
  assert_int_equal (f.value, SPDY_CANCEL);
  off += used;
  assert_int_equal (spdy_parse (buf.data + off, buf.len - off, &f, &used, &err), 0);
  assert_int_equal (f.type, SPDY_PING);
  assert_int_equal (f.value, 42);
  off += used;
  assert_int_equal (spdy_parse (buf.data + off, buf.len - off, &f, &used, &err), 0);
  assert_int_equal (f.type, SPDY_GOAWAY);
  assert_int_equal (f.stream_id, 9);
  off += used;
  assert_int_equal (spdy_parse (buf.data + off, buf.len - off, &f, &used, &err), 0);
  assert_int_equal (f.type, SPDY_WINDOW_UPDATE);
  assert_int_equal (f.stream_id, 3);
  assert_int_equal (f.value, 1000);
  off += used;
  assert_int_equal (off, buf.len);
  spdy_buf_clear (&buf);
}

static void
test_bad_frames (void **state)
{
  /* A SPDY/2 control frame, a frame over the limit, a RST cut short. */
  const uint8_t v2[] = { 0x80, 0x02, 0x00, 0x06, 0x00, 0x00, 0x00, 0x04, 0, 0, 0, 1 };
  const uint8_t huge[] = { 0x00, 0x00, 0x00, 0x01, 0x00, 0xff, 0xff, 0xff };
  const uint8_t short_rst[] = { 0x80, 0x03, 0x00, 0x03, 0x00, 0x00, 0x00, 0x04, 0, 0, 0, 1 };
  struct spdy_frame f;
  struct husk_error *err = NULL;
  size_t used;

  assert_int_equal (spdy_parse (v2, sizeof v2, &f, &used, &err), -1);
  assert_non_null (strstr (err->msg, "version 2"));
  husk_error_free (&err);
  assert_int_equal (spdy_parse (huge, sizeof huge, &f, &used, &err), -1);
  assert_non_null (strstr (err->msg, "bytes"));
  husk_error_free (&err);
  assert_int_equal (spdy_parse (short_rst, sizeof short_rst, &f, &used, &err), -1);
  husk_error_free (&err);
}

/* Header blocks through one sender's and one receiver's zlib state, the
 * second block compressed against the first. */
static void
test_header_blocks (void **state)
{
  struct spdy_zlib *tx = spdy_zlib_new (), *rx = spdy_zlib_new ();
  struct spdy_headers h = { 0 }, got = { 0 };
  struct spdy_buf frames = { 0 };
  struct husk_error *err = NULL;
  struct spdy_frame f;
  size_t used;

  spdy_headers_add (&h, "streamtype", "stdout");
  spdy_headers_add (&h, "port", "8080");
  for (int round = 0; round < 3; round++)
    {
      frames.len = 0;
      assert_int_equal (spdy_put_syn_stream (tx, &frames, 1 + 2 * round, 0, &h, &err), 0);
      assert_int_equal (spdy_parse (frames.data, frames.len, &f, &used, &err), 0);
      assert_int_equal (used, frames.len);
      assert_int_equal (f.type, SPDY_SYN_STREAM);
      assert_int_equal (f.stream_id, 1 + 2 * round);
      assert_int_equal (spdy_headers_unpack (rx, f.payload, f.payload_len, &got, &err), 0);
      assert_int_equal (got.n, 2);
      assert_string_equal (spdy_headers_get (&got, "StreamType"), "stdout");
      assert_string_equal (spdy_headers_get (&got, "port"), "8080");
      assert_null (spdy_headers_get (&got, "requestid"));
    }
  /* Garbage where a block should be. */
  {
    struct spdy_zlib *fresh = spdy_zlib_new ();
    assert_int_equal (spdy_headers_unpack (fresh, (const uint8_t *) "not zlib at all", 15, &got, &err), -1);
    assert_non_null (strstr (err->msg, "header block"));
    husk_error_free (&err);
    spdy_zlib_free (fresh);
  }
  spdy_headers_clear (&h);
  spdy_headers_clear (&got);
  spdy_buf_clear (&frames);
  spdy_zlib_free (tx);
  spdy_zlib_free (rx);
}

/* WebSocket: the RFC 6455 example key, masked client frames of each
 * length encoding, and what a server must refuse. */
static void
test_websocket_frames (void **state)
{
  char accept[29];
  struct husk_error *err = NULL;
  struct ws_frame f;
  size_t used, sizes[] = { 0, 125, 126, 65535, 65536, 200000 };
  const uint8_t mask[4] = { 0x11, 0x22, 0x33, 0x44 };

  ws_accept_key ("dGhlIHNhbXBsZSBub25jZQ==", accept);
  assert_string_equal (accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
    {
      struct spdy_buf server = { 0 }, client = { 0 };
      uint8_t *payload = xmalloc (sizes[k] + 1);
      size_t header;

      for (size_t i = 0; i < sizes[k]; i++)
        payload[i] = (uint8_t) (i * 7);
      /* A server frame, turned into a client one: mask bit and key. */
      ws_put (&server, WS_BINARY, payload, sizes[k]);
      header = server.len - sizes[k];
      spdy_buf_append (&client, server.data, header);
      client.data[1] |= 0x80;
      spdy_buf_append (&client, mask, 4);
      for (size_t i = 0; i < sizes[k]; i++)
        {
          uint8_t b = payload[i] ^ mask[i % 4];
          spdy_buf_append (&client, &b, 1);
        }
      assert_int_equal (ws_parse (client.data, client.len - 1, &f, &used, &err), 0);
      assert_int_equal (used, 0); /* one byte short */
      assert_int_equal (ws_parse (client.data, client.len, &f, &used, &err), 0);
      assert_int_equal (used, client.len);
      assert_true (f.fin);
      assert_int_equal (f.opcode, WS_BINARY);
      assert_int_equal (f.payload_len, sizes[k]);
      if (sizes[k])
        assert_memory_equal (f.payload, payload, sizes[k]);
      /* The server's own frame is not masked: refused from a client. */
      assert_int_equal (ws_parse (server.data, server.len, &f, &used, &err), -1);
      assert_non_null (strstr (err->msg, "not masked"));
      husk_error_free (&err);
      free (payload);
      spdy_buf_clear (&server);
      spdy_buf_clear (&client);
    }
  {
    uint8_t reserved[] = { 0xc2, 0x80, 0, 0, 0, 0 }, big_ping[] = { 0x89, 0xfe, 0x01, 0x00 };
    assert_int_equal (ws_parse (reserved, sizeof reserved, &f, &used, &err), -1);
    husk_error_free (&err);
    assert_int_equal (ws_parse (big_ping, sizeof big_ping, &f, &used, &err), -1);
    husk_error_free (&err);
  }
}

static int freed;

static void
count_free (void *value)
{
  freed++;
  free (value);
}

static void
test_tokens (void **state)
{
  struct streaming_tokens *t = streaming_tokens_new (2, 50, count_free);
  char a[STREAMING_TOKEN_LEN + 1], b[STREAMING_TOKEN_LEN + 1], c[STREAMING_TOKEN_LEN + 1];
  struct husk_error *err = NULL;
  void *value;

  freed = 0;
  assert_int_equal (streaming_tokens_add (t, xstrdup ("one"), a, &err), 0);
  assert_int_equal (strlen (a), STREAMING_TOKEN_LEN);
  assert_int_equal (strspn (a, "0123456789abcdef"), STREAMING_TOKEN_LEN);
  assert_int_equal (streaming_tokens_add (t, xstrdup ("two"), b, &err), 0);
  assert_string_not_equal (a, b);
  /* Full: refused, and the value freed. */
  assert_int_equal (streaming_tokens_add (t, xstrdup ("three"), c, &err), -1);
  assert_int_equal (err->errnum, EAGAIN);
  husk_error_free (&err);
  assert_int_equal (freed, 1);
  /* Taken once, then never again; an unknown token is nothing. */
  value = streaming_tokens_take (t, a);
  assert_string_equal (value, "one");
  free (value);
  assert_null (streaming_tokens_take (t, a));
  assert_null (streaming_tokens_take (t, "00000000000000000000000000000000"));
  /* Expired after its 50 ms, and freed. */
  usleep (80000);
  assert_null (streaming_tokens_take (t, b));
  assert_int_equal (freed, 2);
  assert_int_equal (streaming_tokens_pending (t), 0);
  /* Left at the end: freed by the store. */
  assert_int_equal (streaming_tokens_add (t, xstrdup ("four"), c, &err), 0);
  streaming_tokens_free (t);
  assert_int_equal (freed, 3);
}

static void
test_exit_status (void **state)
{
  cleanup_free char *ok4 = streaming_exit_status (PROTO_V4, 0, NULL);
  cleanup_free char *code4 = streaming_exit_status (PROTO_V4, 3, NULL);
  cleanup_free char *fail4 = streaming_exit_status (PROTO_V4, -1, "bad \"thing\"\n");
  cleanup_free char *ok3 = streaming_exit_status (PROTO_V3, 0, NULL);
  cleanup_free char *code3 = streaming_exit_status (PROTO_V3, 3, NULL);

  assert_string_equal (ok4, "{\"metadata\":{},\"status\":\"Success\"}");
  assert_non_null (strstr (code4, "\"reason\":\"NonZeroExitCode\""));
  assert_non_null (strstr (code4, "\"causes\":[{\"reason\":\"ExitCode\",\"message\":\"3\"}]"));
  assert_non_null (strstr (fail4, "\"message\":\"bad \\\"thing\\\"\\u000a\""));
  assert_non_null (strstr (fail4, "\"status\":\"Failure\""));
  assert_string_equal (ok3, "");
  assert_non_null (strstr (code3, "non-zero exit code: 3"));
}

/* ------------------------------------------------------------------ */
/* A whole session against the server                                   */

/* Echoes stdin to stdout in capitals, then exits 3. */
static int
fake_run (void *user, enum streaming_kind kind, void *data, const struct streaming_io *io,
          struct husk_error **err)
{
  char buf[256];
  ssize_t n;

  while ((n = read (io->stdin_fd, buf, sizeof buf)) > 0)
    {
      for (ssize_t i = 0; i < n; i++)
        buf[i] = (char) (buf[i] >= 'a' && buf[i] <= 'z' ? buf[i] - 32 : buf[i]);
      (void) husk_write_all (io->stdout_fd, buf, (size_t) n);
    }
  (void) husk_write_all (io->stderr_fd, "bye", 3);
  return 3;
}

static int
fake_connect (void *user, void *data, uint16_t port, struct husk_error **err)
{
  return husk_error_make (err, ECONNREFUSED, "port %u", port);
}

static int
dial (const char *url, const char *path_and_headers, char *reply, size_t cap)
{
  unsigned port = 0;
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  int fd = socket (AF_INET, SOCK_STREAM, 0);
  size_t len = 0;

  sscanf (url, "http://127.0.0.1:%u", &port);
  addr.sin_port = htons ((uint16_t) port);
  assert_int_equal (connect (fd, (struct sockaddr *) &addr, sizeof addr), 0);
  assert_int_equal (husk_write_all (fd, path_and_headers, strlen (path_and_headers)), 0);
  /* The response head, byte by byte up to its blank line. */
  while (len < cap - 1 && read (fd, reply + len, 1) == 1)
    {
      len++;
      if (len >= 4 && memcmp (reply + len - 4, "\r\n\r\n", 4) == 0)
        break;
    }
  reply[len] = '\0';
  return fd;
}

static char *
request (const char *url, const char *protocol)
{
  const char *path = strstr (url + 7, "/");

  return xasprintf ("POST %s HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                    "X-Stream-Protocol-Version: %s\r\n\r\n",
                    path, protocol);
}

static void
open_stream (int fd, struct spdy_zlib *z, uint32_t id, const char *type)
{
  struct spdy_headers h = { 0 };
  struct spdy_buf out = { 0 };
  struct husk_error *err = NULL;

  spdy_headers_add (&h, "streamtype", type);
  assert_int_equal (spdy_put_syn_stream (z, &out, id, 0, &h, &err), 0);
  assert_int_equal (husk_write_all (fd, out.data, out.len), 0);
  spdy_headers_clear (&h);
  spdy_buf_clear (&out);
}

static void
test_server_session (void **state)
{
  struct streaming_callbacks cb = { .run = fake_run, .connect_port = fake_connect };
  struct streaming_options opts = { 0 };
  struct streaming_server *srv = NULL;
  struct streaming_request req
      = { .kind = STREAMING_EXEC, .want_stdin = true, .want_stdout = true, .want_stderr = true };
  struct husk_error *err = NULL;
  struct spdy_zlib *z = spdy_zlib_new ();
  struct spdy_buf in = { 0 }, out = { 0 };
  char reply[1024], outputs[8][256] = { { 0 } };
  bool fin[8] = { false };
  cleanup_free char *url = NULL, *bad = NULL, *head = NULL;
  int fd;

  assert_int_equal (streaming_server_start (&opts, &cb, &srv, &err), 0);
  url = streaming_server_url (srv, &req, &err);
  assert_non_null (url);
  assert_true (husk_str_has_prefix (url, streaming_server_base (srv)));
  assert_non_null (strstr (url, "/exec/"));

  /* A wrong protocol uses the token up: 403, then 404. */
  bad = streaming_server_url (srv, &req, &err);
  head = request (bad, "v9.channel.k8s.io");
  close (dial (bad, head, reply, sizeof reply));
  assert_true (husk_str_has_prefix (reply, "HTTP/1.1 403"));
  free (head);
  head = request (bad, "v4.channel.k8s.io");
  close (dial (bad, head, reply, sizeof reply));
  assert_true (husk_str_has_prefix (reply, "HTTP/1.1 404"));

  free (head);
  head = request (url, "v4.channel.k8s.io");
  fd = dial (url, head, reply, sizeof reply);
  assert_true (husk_str_has_prefix (reply, "HTTP/1.1 101"));
  assert_non_null (strstr (reply, "X-Stream-Protocol-Version: v4.channel.k8s.io"));
  open_stream (fd, z, 1, "error");
  open_stream (fd, z, 3, "stdin");
  open_stream (fd, z, 5, "stdout");
  open_stream (fd, z, 7, "stderr");
  spdy_put_data (&out, 3, SPDY_FLAG_FIN, "hello", 5);
  assert_int_equal (husk_write_all (fd, out.data, out.len), 0);

  /* Frames until the error stream ends: the replies, stdout, stderr, status. */
  while (!fin[0])
    {
      uint8_t buf[4096];
      struct spdy_frame f;
      struct spdy_headers h = { 0 };
      size_t used;
      ssize_t n = read (fd, buf, sizeof buf);

      assert_true (n > 0);
      spdy_buf_append (&in, buf, (size_t) n);
      while (spdy_parse (in.data, in.len, &f, &used, &err) == 0 && used > 0)
        {
          if (f.type == SPDY_SYN_REPLY)
            assert_int_equal (spdy_headers_unpack (z, f.payload, f.payload_len, &h, &err), 0);
          if (f.type == SPDY_DATA && f.stream_id < 16)
            {
              strncat (outputs[f.stream_id / 2], (const char *) f.payload,
                       f.payload_len < 200 ? f.payload_len : 200);
              fin[f.stream_id / 2] |= (f.flags & SPDY_FLAG_FIN) != 0;
            }
          spdy_headers_clear (&h);
          spdy_buf_consume (&in, used);
        }
    }
  assert_string_equal (outputs[2], "HELLO");
  assert_string_equal (outputs[3], "bye");
  assert_true (fin[2] && fin[3]);
  assert_non_null (strstr (outputs[0], "\"NonZeroExitCode\""));
  assert_non_null (strstr (outputs[0], "\"message\":\"3\""));
  close (fd);

  spdy_zlib_free (z);
  spdy_buf_clear (&in);
  spdy_buf_clear (&out);
  streaming_server_stop (srv);
}

/* A server stopped with sessions waiting for their client ends them. */
static void
test_server_stop_with_client (void **state)
{
  struct streaming_callbacks cb = { .run = fake_run, .connect_port = fake_connect };
  struct streaming_options opts = { 0 };
  struct streaming_server *srv = NULL;
  struct streaming_request req = { .kind = STREAMING_PORTFORWARD };
  struct husk_error *err = NULL;
  cleanup_free char *url = NULL, *head = NULL;
  char reply[1024];
  int fd;

  assert_int_equal (streaming_server_start (&opts, &cb, &srv, &err), 0);
  url = streaming_server_url (srv, &req, &err);
  head = request (url, "portforward.k8s.io");
  fd = dial (url, head, reply, sizeof reply);
  assert_true (husk_str_has_prefix (reply, "HTTP/1.1 101"));
  assert_int_equal (streaming_server_sessions (srv), 1);
  streaming_server_stop (srv);
  close (fd);
}

/* ------------------------------------------------------------------ */
/* The front door: request heads, clients that drip or vanish            */

static void
test_http_head (void **state)
{
  char ok_head[] = "POST /exec/abc?x=1 HTTP/1.1\r\nHost: h\r\nUpgrade:  SPDY/3.1 \r\n"
                   "X-Stream-Protocol-Version: v4.channel.k8s.io\r\nx-stream-protocol-version: v3\r\n\r\n";
  static const char *const bad[] = {
    "\r\n\r\n",
    "GET\r\n\r\n",
    "GET /\r\n\r\n",
    "GET / SPDY/3\r\n\r\n",
    "GET  / HTTP/1.1\r\n\r\n",
    "GET / HTTP/1.1 x\r\n\r\n",
    "GET / HTTP/1.1\r\nno colon\r\n\r\n",
    "GET / HTTP/1.1\r\n: empty\r\n\r\n",
    "GET / HTTP/1.1\r\nsp ace: x\r\n\r\n",
  };
  struct http_head h;
  cleanup_free char *many = NULL;

  assert_int_equal (http_head_end ("GET / HTTP/1.1\r\n", 16), 0);
  assert_int_equal (http_head_end ("GET / HTTP/1.1\r\n\r\nSPDY", 22), 18);
  assert_int_equal (http_head_end ("GET / HTTP/1.1\n\n", 16), 16);
  assert_int_equal (http_head_end ("\n", 1), 0);
  assert_int_equal (http_head_parse (ok_head, &h), 0);
  assert_string_equal (h.method, "POST");
  assert_string_equal (h.target, "/exec/abc?x=1");
  assert_string_equal (h.version, "HTTP/1.1");
  assert_int_equal (h.n_headers, 4);
  assert_string_equal (http_head_get (&h, "upgrade"), "SPDY/3.1");
  assert_string_equal (http_head_get (&h, "X-STREAM-PROTOCOL-VERSION"), "v4.channel.k8s.io");
  assert_null (http_head_get (&h, "Sec-WebSocket-Key"));
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      cleanup_free char *copy = xstrdup (bad[i]);
      assert_int_equal (http_head_parse (copy, &h), -1);
    }
  /* More fields than HTTP_HEADERS_MAX: refused, not overrun. */
  many = xstrdup ("GET / HTTP/1.1\r\n");
  for (int i = 0; i <= HTTP_HEADERS_MAX; i++)
    {
      char *more = xasprintf ("%sa%d: b\r\n", many, i);
      free (many);
      many = more;
    }
  assert_int_equal (http_head_parse (many, &h), -1);
}

static int
connect_to (const char *url)
{
  unsigned port = 0;
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  sscanf (url, "http://127.0.0.1:%u", &port);
  addr.sin_port = htons ((uint16_t) port);
  assert_int_equal (connect (fd, (struct sockaddr *) &addr, sizeof addr), 0);
  return fd;
}

/* A close that resets the connection: the peer that vanishes. */
static void
reset_close (int fd)
{
  struct linger hard = { .l_onoff = 1, .l_linger = 0 };

  setsockopt (fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
  close (fd);
}

/* This process does not block SIGPIPE (huskd does): a write of the server
 * to a reset connection without MSG_NOSIGNAL would end the test here. */
static void
test_peer_vanishes (void **state)
{
  struct streaming_callbacks cb = { .run = fake_run, .connect_port = fake_connect };
  struct streaming_options opts = { 0 };
  struct streaming_server *srv = NULL;
  struct streaming_request req = { .kind = STREAMING_PORTFORWARD };
  struct husk_error *err = NULL;
  static const char *const heads[] = { "GET /metrics HTTP/1.1\r\n", "GET / HTTP/1.1\r\n\r\n", "BAD\r\n\r\n",
                                       "POST /exec/00000000000000000000000000000000 HTTP/1.1\r\n"
                                       "Upgrade: SPDY/3.1\r\n\r\n" };

  assert_int_equal (streaming_server_start (&opts, &cb, &srv, &err), 0);
  for (int round = 0; round < 20; round++)
    {
      for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++)
        {
          int fd = connect_to (streaming_server_base (srv));
          assert_int_equal (husk_write_all (fd, heads[i], strlen (heads[i])), 0);
          if (round % 2)
            usleep (2000); /* the answer on its way when the reset comes */
          reset_close (fd);
        }
      /* A good token, reset as its 101 goes out. */
      cleanup_free char *url = streaming_server_url (srv, &req, &err);
      cleanup_free char *head = request (url, "portforward.k8s.io");
      int fd = connect_to (url);
      assert_int_equal (husk_write_all (fd, head, strlen (head)), 0);
      reset_close (fd);
    }
  usleep (100000);
  /* Still serving. */
  {
    cleanup_free char *url = streaming_server_url (srv, &req, &err);
    cleanup_free char *head = request (url, "portforward.k8s.io");
    char reply[1024];
    close (dial (url, head, reply, sizeof reply));
    assert_true (husk_str_has_prefix (reply, "HTTP/1.1 101"));
  }
  streaming_server_stop (srv);
}

/* Reads what FD's server sends until it closes, up to WAIT_MS: the bytes
 * read (NUL-terminated in BUF), or -1 when it stayed open. */
static ssize_t
read_until_closed (int fd, char *buf, size_t cap, int wait_ms)
{
  size_t len = 0;

  for (;;)
    {
      struct pollfd p = { .fd = fd, .events = POLLIN };
      if (poll (&p, 1, wait_ms) <= 0)
        return -1;
      ssize_t n = read (fd, buf + len, cap - 1 - len);
      if (n <= 0)
        break;
      len += (size_t) n;
    }
  buf[len] = '\0';
  return (ssize_t) len;
}

/* A client that drips its head a byte at a time is answered 408 and closed
 * once the whole head's time is up, however regularly it drips. */
static void
test_head_deadline (void **state)
{
  struct streaming_callbacks cb = { .run = fake_run, .connect_port = fake_connect };
  struct streaming_options opts = { .head_timeout_ms = 300 };
  struct streaming_server *srv = NULL;
  struct husk_error *err = NULL;
  const char *text = "POST /exec/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  char reply[512];
  int fd, sent = 0;

  assert_int_equal (streaming_server_start (&opts, &cb, &srv, &err), 0);
  fd = connect_to (streaming_server_base (srv));
  /* A byte every 50 ms, for up to 2.5 s: far past the 300 ms. */
  for (; text[sent]; sent++)
    {
      struct pollfd p = { .fd = fd, .events = POLLIN };
      if (poll (&p, 1, 50) > 0)
        break;
      if (send (fd, text + sent, 1, MSG_NOSIGNAL) != 1)
        break;
    }
  assert_true (text[sent] != '\0'); /* closed before it ran out of bytes */
  assert_true (read_until_closed (fd, reply, sizeof reply, 1000) >= 0);
  assert_true (husk_str_has_prefix (reply, "HTTP/1.1 408"));
  close (fd);
  streaming_server_stop (srv);
}

/* Connections that never send a head take no session: with more of them
 * held open than there are sessions, a client with a token is served. */
static void
test_idle_connections_take_no_session (void **state)
{
  struct streaming_callbacks cb = { .run = fake_run, .connect_port = fake_connect };
  struct streaming_options opts = { 0 };
  struct streaming_server *srv = NULL;
  struct streaming_request req = { .kind = STREAMING_PORTFORWARD };
  struct husk_error *err = NULL;
  int idle[STREAMING_MAX_SESSIONS + 44];
  const size_t n_idle = sizeof idle / sizeof idle[0];
  cleanup_free char *url = NULL, *head = NULL;
  char reply[1024];
  int fd;

  assert_int_equal (streaming_server_start (&opts, &cb, &srv, &err), 0);
  for (size_t i = 0; i < n_idle; i++)
    {
      idle[i] = connect_to (streaming_server_base (srv));
      assert_int_equal (send (idle[i], "P", 1, MSG_NOSIGNAL), 1);
    }
  url = streaming_server_url (srv, &req, &err);
  head = request (url, "portforward.k8s.io");
  fd = dial (url, head, reply, sizeof reply);
  assert_true (husk_str_has_prefix (reply, "HTTP/1.1 101"));
  assert_int_equal (streaming_server_sessions (srv), 1);
  close (fd);
  for (size_t i = 0; i < n_idle; i++)
    close (idle[i]);
  streaming_server_stop (srv);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_dictionary),
    cmocka_unit_test (test_frames),
    cmocka_unit_test (test_bad_frames),
    cmocka_unit_test (test_header_blocks),
    cmocka_unit_test (test_tokens),
    cmocka_unit_test (test_exit_status),
    cmocka_unit_test (test_websocket_frames),
    cmocka_unit_test (test_server_session),
    cmocka_unit_test (test_server_stop_with_client),
    cmocka_unit_test (test_http_head),
    cmocka_unit_test (test_peer_vanishes),
    cmocka_unit_test (test_head_deadline),
    cmocka_unit_test (test_idle_connections_take_no_session),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
