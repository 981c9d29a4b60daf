/* Unit tests for the attach socket's messages: what huskd's client sends
 * (cri/attach.c) decoded by the monitor (cri/monitor/attach.c) over a
 * SOCK_SEQPACKET pair, messages that break the protocol, the output copies
 * and exit message, a slow client's bounded queue and back-pressure and
 * a stalled one dropped with an error, and
 * sockets at paths longer than sun_path and fds passed over a socket
 * (common/unix_socket.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "husk/cleanup.h"
#include "husk/unix_socket.h"
#include "husk/util.h"
#include "cri/attach.h"
#include "cri/monitor/attach.h"

static void
seqpacket_pair (int fds[2])
{
  assert_int_equal (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), 0);
}

/* One message from FD, decoded. */
static void
receive_request (int fd, char *buf, size_t size, struct attach_request *req)
{
  ssize_t n = recv (fd, buf, size, 0);

  assert_true (n > 0);
  assert_int_equal (attach_decode_request (buf, (size_t) n, req), 0);
}

static void
test_client_messages_round_trip (void **state)
{
  static char buf[2 * ATTACH_DATA_MAX];
  cleanup_free char *big = xmalloc (ATTACH_DATA_MAX + 10);
  struct attach_request req;
  int fds[2];

  (void) state;
  seqpacket_pair (fds);
  assert_int_equal (cri_attach_send_stdin (fds[0], "hello\n", 6), 0);
  receive_request (fds[1], buf, sizeof buf, &req);
  assert_int_equal (req.type, ATTACH_IN_STDIN);
  assert_int_equal (req.len, 6);
  assert_memory_equal (req.data, "hello\n", 6);

  assert_int_equal (cri_attach_resize (fds[0], 0x1234, 80), 0);
  receive_request (fds[1], buf, sizeof buf, &req);
  assert_int_equal (req.type, ATTACH_IN_RESIZE);
  assert_int_equal (req.rows, 0x1234);
  assert_int_equal (req.cols, 80);
  assert_int_equal ((unsigned char) buf[1], 0x34); /* little endian */

  assert_int_equal (cri_attach_close_stdin (fds[0]), 0);
  receive_request (fds[1], buf, sizeof buf, &req);
  assert_int_equal (req.type, ATTACH_IN_CLOSE_STDIN);

  /* Longer than one message: split, nothing lost. */
  memset (big, 'b', ATTACH_DATA_MAX + 10);
  assert_int_equal (cri_attach_send_stdin (fds[0], big, ATTACH_DATA_MAX + 10), 0);
  receive_request (fds[1], buf, sizeof buf, &req);
  assert_int_equal (req.len, ATTACH_DATA_MAX);
  receive_request (fds[1], buf, sizeof buf, &req);
  assert_int_equal (req.len, 10);

  errno = 0;
  assert_int_equal (cri_attach_resize (fds[0], 70000, 80), -1);
  assert_int_equal (errno, EINVAL);
  close (fds[0]);
  close (fds[1]);
}

static void
test_bad_requests (void **state)
{
  struct attach_request req;

  (void) state;
  assert_int_equal (attach_decode_request ("", 0, &req), -1);
  assert_int_equal (attach_decode_request ("\x09", 1, &req), -1);
  assert_int_equal (attach_decode_request ("\x01x", 2, &req), -1);
  assert_int_equal (attach_decode_request ("\x02\x01\x00\x02", 4, &req), -1);
  assert_int_equal (attach_decode_request ("\x02\x01\x00\x02\x00\x00", 6, &req), -1);
  assert_int_equal (attach_decode_request ("\x00", 1, &req), 0); /* empty stdin data */
  assert_int_equal (req.len, 0);
}

static void
test_broadcast_and_exit (void **state)
{
  struct attach_server server = { .listen_fd = -1 };
  char buf[64];
  int a[2], b[2];

  (void) state;
  seqpacket_pair (a);
  seqpacket_pair (b);
  attach_add_client (&server, a[0]);
  attach_add_client (&server, b[0]);
  attach_broadcast (&server, ATTACH_OUT_STDERR, "err", 3);
  for (int i = 0; i < 2; i++)
    {
      assert_int_equal (recv (i ? b[1] : a[1], buf, sizeof buf, 0), 4);
      assert_memory_equal (buf,
                           "\x02"
                           "err",
                           4);
    }
  attach_finish (&server, 137);
  assert_int_equal (server.n_clients, 0);
  for (int i = 0; i < 2; i++)
    {
      int fd = i ? b[1] : a[1];
      assert_int_equal (recv (fd, buf, sizeof buf, 0), 4);
      assert_memory_equal (buf,
                           "\x03"
                           "137",
                           4);
      assert_int_equal (recv (fd, buf, sizeof buf, 0), 0); /* then closed */
      close (fd);
    }
}

/* Reads every message waiting on FD; checks that each is stdout and
 * counts its data bytes. */
static size_t
read_all_waiting (int fd, char *buf, size_t size)
{
  size_t got = 0;
  ssize_t n;

  while ((n = recv (fd, buf, size, MSG_DONTWAIT)) > 0)
    {
      assert_int_equal (buf[0], ATTACH_OUT_STDOUT);
      got += (size_t) n - 1;
    }
  return got;
}

/* A client that stops reading: its output waits in its queue, none is
 * lost; once the queue is full the monitor holds the container's output
 * (back-pressure); the client that reads is not held up; the stalled one
 * is dropped with an error message after ATTACH_STALL_MS, and the reader
 * gets everything and the exit code.  Before the queue, the stalled
 * client was closed at its first full socket buffer, without a word. */
static void
test_slow_client_queued (void **state)
{
  struct attach_server server = { .listen_fd = -1 };
  static char chunk[ATTACH_DATA_MAX];
  static char buf[1 + ATTACH_DATA_MAX];
  int stuck[2], reader[2];
  size_t sent = 0, read_stuck = 0, read_reader = 0;
  ssize_t n;

  (void) state;
  seqpacket_pair (stuck);
  seqpacket_pair (reader);
  attach_add_client (&server, stuck[0]);
  attach_add_client (&server, reader[0]);
  while (!attach_backpressure (&server))
    {
      attach_broadcast (&server, ATTACH_OUT_STDOUT, chunk, sizeof chunk);
      sent += sizeof chunk;
      read_reader += read_all_waiting (reader[1], buf, sizeof buf);
      assert_true (sent < 4 * (size_t) ATTACH_QUEUE_MAX);
    }
  assert_int_equal (server.n_clients, 2);
  assert_true (attach_client_waiting (&server, 0));
  assert_int_equal (read_reader, sent);
  assert_true (attach_expire (&server) > 0); /* not yet */
  /* The stalled one reads everything (its socket, then its queue). */
  while ((read_stuck += read_all_waiting (stuck[1], buf, sizeof buf)) < sent)
    attach_flush (&server, 0);
  assert_false (attach_backpressure (&server));
  assert_false (attach_client_waiting (&server, 0));
  /* Full again, and past the stall: dropped, told why. */
  while (!attach_backpressure (&server))
    {
      attach_broadcast (&server, ATTACH_OUT_STDOUT, chunk, sizeof chunk);
      sent += sizeof chunk;
      read_reader += read_all_waiting (reader[1], buf, sizeof buf);
    }
  server.clients[0].full_since_ms -= ATTACH_STALL_MS;
  assert_int_equal (attach_expire (&server), -1);
  assert_int_equal (server.n_clients, 1);
  assert_int_equal (server.clients[0].fd, reader[0]);
  assert_false (attach_backpressure (&server));
  /* Its socket still holds what it did not read: then the end, no exit. */
  while ((n = recv (stuck[1], buf, sizeof buf, MSG_DONTWAIT)) > 0 && buf[0] == ATTACH_OUT_STDOUT)
    ;
  if (n > 0)
    {
      assert_int_equal (buf[0], ATTACH_OUT_ERROR);
      buf[n] = '\0';
      assert_non_null (strstr (buf + 1, "too slow"));
      n = recv (stuck[1], buf, sizeof buf, MSG_DONTWAIT);
    }
  assert_int_equal (n, 0);
  attach_finish (&server, 0);
  while ((n = recv (reader[1], buf, sizeof buf, MSG_DONTWAIT)) > 0 && buf[0] == ATTACH_OUT_STDOUT)
    read_reader += (size_t) n - 1;
  assert_int_equal (n, 2);
  assert_memory_equal (buf,
                       "\x03"
                       "0",
                       2);
  assert_int_equal (read_reader, sent); /* the reader got every byte */
  close (stuck[1]);
  close (reader[1]);
}

static void
test_long_socket_path (void **state)
{
  char dir[] = "/tmp/husk-attach-test.XXXXXX";
  cleanup_free char *deep = NULL;
  cleanup_free char *path = NULL;
  struct husk_error *err = NULL;
  struct attach_server server = { .listen_fd = -1 };
  struct stat st;
  int client;

  (void) state;
  assert_non_null (mkdtemp (dir));
  deep = xasprintf ("%s/%0100d", dir, 0);
  assert_int_equal (mkdir (deep, 0700), 0);
  path = xasprintf ("%s/%s.attach", deep, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
  assert_true (strlen (path) > 108);
  assert_int_equal (attach_listen (&server, path, &err), 0);
  assert_int_equal (stat (path, &st), 0);
  assert_true (S_ISSOCK (st.st_mode));
  assert_int_equal (st.st_mode & 0777, 0600);
  client = husk_unix_connect (path, SOCK_SEQPACKET, &err);
  assert_true (client >= 0);
  attach_accept (&server);
  assert_int_equal (server.n_clients, 1);
  attach_finish (&server, 0);
  attach_close (&server);
  assert_int_equal (stat (path, &st), -1);
  close (client);

  /* Gone: a clear error naming the container. */
  assert_int_equal (cri_attach_connect (dir, "abc", &err), -1);
  assert_string_equal (err->msg, "container abc has no attach socket (monitor gone?)");
  husk_error_free (&err);
  /* Not a socket there: left alone, an error. */
  assert_int_equal (mkdir (path, 0700), 0);
  assert_int_equal (attach_listen (&server, path, &err), -1);
  assert_non_null (strstr (err->msg, "not a socket"));
  husk_error_free (&err);
  rmdir (path);
  rmdir (deep);
  rmdir (dir);
}

/* husk_unix_send_fd / husk_unix_recv_fd (how the pty master and the
 * userns helper's pidfd travel): the fd arrives CLOEXEC and refers to the
 * same file, the data with it; a message without an fd is EPROTO, with the
 * data still read; a closed peer is EPROTO with 0 bytes. */
static void
test_pass_fd (void **state)
{
  int pair[2], pipefd[2], got_fd, flags;
  char buf[16] = { 0 };
  ssize_t got = -1;
  struct stat a, b;

  (void) state;
  assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  assert_int_equal (pipe (pipefd), 0);
  assert_int_equal (husk_unix_send_fd (pair[0], pipefd[1], "ptmx", 4), 0);
  got_fd = husk_unix_recv_fd (pair[1], buf, sizeof buf, &got);
  assert_true (got_fd >= 0);
  assert_int_equal (got, 4);
  assert_memory_equal (buf, "ptmx", 4);
  assert_int_equal (fstat (got_fd, &a), 0);
  assert_int_equal (fstat (pipefd[1], &b), 0);
  assert_true (a.st_ino == b.st_ino && a.st_dev == b.st_dev);
  flags = fcntl (got_fd, F_GETFD);
  assert_true (flags & FD_CLOEXEC);
  close (got_fd);

  assert_int_equal (write (pair[0], "e", 1), 1);
  errno = 0;
  assert_int_equal (husk_unix_recv_fd (pair[1], buf, sizeof buf, &got), -1);
  assert_int_equal (errno, EPROTO);
  assert_int_equal (got, 1);

  close (pair[0]);
  assert_int_equal (husk_unix_recv_fd (pair[1], buf, sizeof buf, &got), -1);
  assert_int_equal (errno, EPROTO);
  assert_int_equal (got, 0);
  close (pair[1]);
  close (pipefd[0]);
  close (pipefd[1]);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_client_messages_round_trip), cmocka_unit_test (test_bad_requests),
    cmocka_unit_test (test_broadcast_and_exit),         cmocka_unit_test (test_slow_client_queued),
    cmocka_unit_test (test_long_socket_path),           cmocka_unit_test (test_pass_fd),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
