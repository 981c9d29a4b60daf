/* Unit tests for the pieces of `husk container` that are pure logic: the
 * CRI log's records and times (logs --since/--tail), and -p's parser. */
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "cri/container/containers.h"

#define NS 1000000000LL

static void
test_parse_time (void **state)
{
  long long ns = 0;
  const char *rest = NULL;

  (void) state;
  assert_int_equal (containers_log_parse_time ("1970-01-01T00:00:01Z", &ns, NULL), 0);
  assert_int_equal (ns, NS);
  assert_int_equal (containers_log_parse_time ("2024-01-02T15:04:05.123456789Z rest", &ns, &rest), 0);
  assert_int_equal (ns, 1704207845LL * NS + 123456789);
  assert_string_equal (rest, " rest");
  /* A fraction shorter than 9 digits, and an offset east of UTC. */
  assert_int_equal (containers_log_parse_time ("2024-01-02T16:04:05.5+01:00", &ns, NULL), 0);
  assert_int_equal (ns, 1704207845LL * NS + 500000000);
  assert_int_equal (containers_log_parse_time ("2024-01-02T10:04:05-05:00", &ns, NULL), 0);
  assert_int_equal (ns, 1704207845LL * NS);
  assert_int_equal (containers_log_parse_time ("2024-01-02T15:04:05", &ns, NULL), -1);
  assert_int_equal (containers_log_parse_time ("yesterday", &ns, NULL), -1);
}

static void
test_parse_since (void **state)
{
  struct husk_error *err = NULL;
  long long now = 1704207845LL * NS, ns = 0;

  (void) state;
  assert_int_equal (containers_log_parse_since ("10s", now, &ns, &err), 0);
  assert_int_equal (ns, now - 10 * NS);
  assert_int_equal (containers_log_parse_since ("1h30m", now, &ns, &err), 0);
  assert_int_equal (ns, now - 5400 * NS);
  assert_int_equal (containers_log_parse_since ("500ms", now, &ns, &err), 0);
  assert_int_equal (ns, now - NS / 2);
  assert_int_equal (containers_log_parse_since ("1704207000", now, &ns, &err), 0);
  assert_int_equal (ns, 1704207000LL * NS);
  assert_int_equal (containers_log_parse_since ("2024-01-02T15:04:05Z", now, &ns, &err), 0);
  assert_int_equal (ns, now);
  assert_int_equal (containers_log_parse_since ("10x", now, &ns, &err), -1);
  assert_non_null (strstr (err->msg, "--since `10x`"));
  husk_error_free (&err);
  assert_int_equal (containers_log_parse_since ("", now, &ns, &err), -1);
  husk_error_free (&err);
}

static bool
parse (const char *line, struct containers_log_record *rec)
{
  return containers_log_parse_record (line, strlen (line), rec);
}

static void
test_parse_record (void **state)
{
  const char *full = "2024-01-02T15:04:05.000000001Z stderr F an error";
  const char *partial = "2024-01-02T15:04:05.000000002Z stdout P part";
  struct containers_log_record rec;

  (void) state;
  assert_true (containers_log_parse_record (full, strlen (full), &rec));
  assert_true (rec.is_stderr && rec.full);
  assert_int_equal (rec.ns, 1704207845LL * NS + 1);
  assert_int_equal (rec.len, strlen ("an error"));
  assert_memory_equal (rec.text, "an error", rec.len);
  assert_true (containers_log_parse_record (partial, strlen (partial), &rec));
  assert_false (rec.is_stderr || rec.full);
  assert_int_equal (rec.len, 4);
  /* An empty line is a full record with no text. */
  assert_true (parse ("2024-01-02T15:04:05Z stdout F ", &rec));
  assert_int_equal (rec.len, 0);
  assert_false (parse ("2024-01-02T15:04:05Z stdin F x", &rec));
  assert_false (parse ("2024-01-02T15:04:05Z stdout X x", &rec));
  assert_false (parse ("2024-01-02T15:04:05Z stdout F", &rec));
  assert_false (parse ("garbage", &rec));
}

static void
check_publish (const char *arg, const char *ip, int host, int ctr, const char *proto)
{
  struct cni_port_mapping port = { 0 };
  struct husk_error *err = NULL;

  assert_int_equal (containers_parse_publish (arg, &port, &err), 0);
  assert_string_equal (port.host_ip, ip);
  assert_int_equal (port.host_port, host);
  assert_int_equal (port.container_port, ctr);
  assert_string_equal (port.protocol, proto);
  free ((char *) port.host_ip);
  free ((char *) port.protocol);
}

static void
check_publish_fails (const char *arg, const char *want)
{
  struct cni_port_mapping port = { 0 };
  struct husk_error *err = NULL;

  assert_int_equal (containers_parse_publish (arg, &port, &err), -1);
  assert_non_null (strstr (err->msg, arg));
  assert_non_null (strstr (err->msg, want));
  husk_error_free (&err);
}

static void
test_parse_publish (void **state)
{
  (void) state;
  check_publish ("8080:80", "", 8080, 80, "tcp");
  check_publish ("8080:80/udp", "", 8080, 80, "udp");
  check_publish ("127.0.0.1:8080:80/sctp", "127.0.0.1", 8080, 80, "sctp");
  check_publish_fails ("80", "[IP:]HOST:CTR");
  check_publish_fails ("0:80", "1 to 65535");
  check_publish_fails ("8080:65536", "1 to 65535");
  check_publish_fails ("x:80", "1 to 65535");
  check_publish_fails ("8080:80/icmp", "tcp, udp or sctp");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_parse_time),
    cmocka_unit_test (test_parse_since),
    cmocka_unit_test (test_parse_record),
    cmocka_unit_test (test_parse_publish),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
