/* Unit tests for common/sd_notify.c against a datagram socket standing in
 * for systemd's: a path and an abstract name, the variable taken out of
 * the environment, no socket set, bad values and no one listening. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "husk/sd_notify.h"
#include "husk/util.h"

/* A bound datagram socket at NAME ("/path" or "@abstract"). */
static int
listen_at (const char *name)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  size_t len = strlen (name);
  int fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

  assert_true (fd >= 0);
  memcpy (addr.sun_path, name, len);
  if (name[0] == '@')
    addr.sun_path[0] = '\0';
  assert_int_equal (bind (fd, (struct sockaddr *) &addr,
                          (socklen_t) (offsetof (struct sockaddr_un, sun_path) + len + (name[0] == '/'))),
                    0);
  return fd;
}

static void
expect_datagram (int fd, const char *want)
{
  char got[512];
  ssize_t n = recv (fd, got, sizeof got - 1, MSG_DONTWAIT);

  assert_true (n >= 0);
  got[n] = '\0';
  assert_string_equal (got, want);
}

static void
check_round_trip (const char *name)
{
  struct sd_notifier notifier;
  struct husk_error *err = NULL;
  int fd = listen_at (name);

  setenv ("NOTIFY_SOCKET", name, 1);
  assert_int_equal (sd_notifier_open (&notifier, &err), 1);
  assert_null (getenv ("NOTIFY_SOCKET")); /* children do not inherit it */
  assert_int_equal (sd_notifier_send (&notifier, "READY=1\nSTATUS=serving", &err), 0);
  expect_datagram (fd, "READY=1\nSTATUS=serving");
  assert_int_equal (sd_notifier_send (&notifier, "STOPPING=1", &err), 0);
  expect_datagram (fd, "STOPPING=1");
  sd_notifier_close (&notifier);
  assert_int_equal (notifier.fd, -1);
  close (fd);
}

static void
test_path_socket (void **state)
{
  char dir[] = "/tmp/husk-notify-XXXXXX";
  char *path;

  assert_non_null (mkdtemp (dir));
  path = xasprintf ("%s/notify", dir);
  check_round_trip (path);
  unlink (path);
  rmdir (dir);
  free (path);
}

static void
test_abstract_socket (void **state)
{
  char name[64];

  snprintf (name, sizeof name, "@husk-notify-test-%d", (int) getpid ());
  check_round_trip (name);
}

static void
test_unset_is_a_no_op (void **state)
{
  struct sd_notifier notifier;
  struct husk_error *err = NULL;

  unsetenv ("NOTIFY_SOCKET");
  assert_int_equal (sd_notifier_open (&notifier, &err), 0);
  assert_int_equal (notifier.fd, -1);
  assert_int_equal (sd_notifier_send (&notifier, "READY=1", &err), 0);
  assert_null (err);
  setenv ("NOTIFY_SOCKET", "", 1);
  assert_int_equal (sd_notifier_open (&notifier, &err), 0);
  assert_null (getenv ("NOTIFY_SOCKET"));
  sd_notifier_close (&notifier);
}

static void
expect_open_error (const char *value, const char *want)
{
  struct sd_notifier notifier;
  struct husk_error *err = NULL;

  setenv ("NOTIFY_SOCKET", value, 1);
  assert_int_equal (sd_notifier_open (&notifier, &err), -1);
  assert_non_null (err);
  if (strstr (err->msg, want) == NULL)
    fail_msg ("`%s` does not say `%s`", err->msg, want);
  assert_int_equal (notifier.fd, -1);
  husk_error_free (&err);
}

static void
test_bad_values (void **state)
{
  char long_path[200];

  expect_open_error ("run/systemd/notify", "NOTIFY_SOCKET `run/systemd/notify`: must be an absolute path");
  memset (long_path, 'a', sizeof long_path - 1);
  long_path[0] = '/';
  long_path[sizeof long_path - 1] = '\0';
  expect_open_error (long_path, "longer than a unix socket address");
}

static void
test_no_listener (void **state)
{
  struct sd_notifier notifier;
  struct husk_error *err = NULL;

  setenv ("NOTIFY_SOCKET", "/tmp/husk-notify-nobody-listens", 1);
  assert_int_equal (sd_notifier_open (&notifier, &err), 1);
  assert_int_equal (sd_notifier_send (&notifier, "READY=1", &err), -1);
  assert_non_null (err);
  assert_string_equal (err->msg,
                       "notify systemd at `/tmp/husk-notify-nobody-listens`: No such file or directory");
  husk_error_free (&err);
  sd_notifier_close (&notifier);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_path_socket),      cmocka_unit_test (test_abstract_socket),
    cmocka_unit_test (test_unset_is_a_no_op), cmocka_unit_test (test_bad_values),
    cmocka_unit_test (test_no_listener),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
