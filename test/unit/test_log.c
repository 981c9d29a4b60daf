/* Unit tests for common/error.c's log lines: the daemon's text lines (time,
 * level, message, KEY=VALUE fields quoted where needed), the CLI's lines,
 * JSON lines that parse whatever the message holds and however long it is,
 * and the level filter. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "husk/error.h"
#include "husk/util.h"

/* 2026-12-03T16:05:01Z and 123456789 ns. */
static const struct timespec when = { .tv_sec = 1796313901, .tv_nsec = 123456789 };

static int
reset (void **state)
{
  husk_log_set_file (2, 0);
  husk_log_set_timestamps (0);
  husk_log_set_prog ("husk");
  husk_log_set_level (HUSK_LOG_WARNING);
  return 0;
}

static void
test_text_daemon_line (void **state)
{
  struct husk_log_field fields[] = {
    { "method", "/runtime.v1.RuntimeService/Version", 0 },
    { "duration_ms", "0.125", 1 },
    { "skipped", NULL, 0 },
    { "error", "container `x` not found", 0 },
    { "empty", "", 0 },
    { "odd", "a=b \"q\" \\ end\nnext", 0 },
  };
  char line[512];

  husk_log_set_timestamps (1);
  husk_log_format (line, sizeof line, HUSK_LOG_WARNING, &when, fields, 6, "rpc failed");
  assert_string_equal (line, "2026-12-03T16:05:01.123456Z warning: rpc failed "
                             "method=/runtime.v1.RuntimeService/Version duration_ms=0.125 "
                             "error=\"container `x` not found\" empty=\"\" "
                             "odd=\"a=b \\\"q\\\" \\\\ end\\nnext\"\n");
  /* A message of several lines stays one line. */
  husk_log_format (line, sizeof line, HUSK_LOG_INFO, &when, NULL, 0, "one\ntwo");
  assert_string_equal (line, "2026-12-03T16:05:01.123456Z info: one two\n");
}

static void
test_text_cli_line (void **state)
{
  char line[256];

  husk_log_format (line, sizeof line, HUSK_LOG_ERROR, &when, NULL, 0, "create x: no such file");
  assert_string_equal (line, "husk: create x: no such file\n");
  husk_log_format (line, sizeof line, HUSK_LOG_WARNING, &when, NULL, 0, "careful");
  assert_string_equal (line, "husk: warning: careful\n");
  husk_log_set_file (7, 0); /* --log FILE: the level is said for errors too */
  husk_log_format (line, sizeof line, HUSK_LOG_ERROR, &when, NULL, 0, "bad");
  assert_string_equal (line, "husk: error: bad\n");
}

static json_t *
parse_line (const char *line)
{
  json_error_t jerr;
  size_t len = strlen (line);
  json_t *doc;

  assert_true (len > 0 && line[len - 1] == '\n');
  assert_null (memchr (line, '\n', len - 1));
  doc = json_loadb (line, len, 0, &jerr);
  if (doc == NULL)
    fail_msg ("not JSON (%s): %s", jerr.text, line);
  return doc;
}

static void
test_json_line (void **state)
{
  struct husk_log_field fields[] = {
    { "method", "/runtime.v1.ImageService/PullImage", 0 },
    { "duration_ms", "12.5", 1 },
    { "not_a_number", "12 ms", 1 },
    { "nan", "nan", 1 },
    { "error", "bad \"ref\"\n\ttab \x01 back\\slash", 0 },
    { "left_out", NULL, 0 },
  };
  char line[1024];
  json_t *doc;

  husk_log_set_file (2, 1);
  husk_log_format (line, sizeof line, HUSK_LOG_ERROR, &when, fields, 6, "rpc \"failed\"");
  doc = parse_line (line);
  assert_string_equal (json_string_value (json_object_get (doc, "level")), "error");
  assert_string_equal (json_string_value (json_object_get (doc, "msg")), "rpc \"failed\"");
  assert_string_equal (json_string_value (json_object_get (doc, "time")), "2026-12-03T16:05:01.123456789Z");
  assert_string_equal (json_string_value (json_object_get (doc, "method")),
                       "/runtime.v1.ImageService/PullImage");
  assert_true (json_is_real (json_object_get (doc, "duration_ms")));
  assert_true (json_real_value (json_object_get (doc, "duration_ms")) == 12.5);
  assert_string_equal (json_string_value (json_object_get (doc, "not_a_number")), "12 ms");
  assert_string_equal (json_string_value (json_object_get (doc, "nan")), "nan");
  assert_string_equal (json_string_value (json_object_get (doc, "error")),
                       "bad \"ref\"\n\ttab \x01 back\\slash");
  assert_null (json_object_get (doc, "left_out"));
  json_decref (doc);
}

/* A line longer than the buffer is cut, and a cut JSON line still parses
 * whichever byte the cut falls on. */
static void
test_cut_lines (void **state)
{
  char big[3000];
  char line[700];

  memset (big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  for (size_t i = 0; i < sizeof big - 1; i += 7)
    big[i] = i % 2 ? '"' : '\n';
  for (size_t size = 64; size <= sizeof line; size += 13)
    {
      struct husk_log_field fields[] = { { "a", "1", 1 }, { "big", big, 0 }, { "b", "2", 0 } };
      size_t n;
      json_t *doc;

      husk_log_set_file (2, 1);
      n = husk_log_format (line, size, HUSK_LOG_INFO, &when, fields, 3, big + (size % 5));
      assert_true (n < size);
      assert_int_equal (strlen (line), n);
      doc = parse_line (line);
      assert_string_equal (json_string_value (json_object_get (doc, "level")), "info");
      json_decref (doc);

      husk_log_set_file (2, 0);
      husk_log_set_timestamps (1);
      n = husk_log_format (line, size, HUSK_LOG_INFO, &when, fields, 3, big);
      assert_true (n < size);
      assert_int_equal (line[n - 1], '\n');
      assert_null (memchr (line, '\n', n - 1));
    }
}

/* husk_log_fields writes one line per call at or above the level. */
static void
test_level_filter (void **state)
{
  struct husk_log_field fields[] = { { "k", "v", 0 } };
  char out[4096] = "";
  int fds[2];
  ssize_t n;

  assert_int_equal (pipe (fds), 0);
  husk_log_set_file (fds[1], 0);
  husk_log_set_timestamps (1);
  husk_log_set_level (HUSK_LOG_INFO);
  assert_true (husk_log_enabled (HUSK_LOG_INFO));
  assert_false (husk_log_enabled (HUSK_LOG_DEBUG));
  husk_log_fields (HUSK_LOG_DEBUG, fields, 1, "hidden %d", 1);
  husk_log_fields (HUSK_LOG_INFO, fields, 1, "shown %d", 2);
  husk_log (HUSK_LOG_WARNING, "also %s", "shown");
  close (fds[1]);
  n = read (fds[0], out, sizeof out - 1);
  close (fds[0]);
  assert_true (n > 0);
  out[n] = '\0';
  assert_null (strstr (out, "hidden"));
  assert_non_null (strstr (out, "Z info: shown 2 k=v\n"));
  assert_non_null (strstr (out, "Z warning: also shown\n"));
  husk_log_set_file (2, 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup (test_text_daemon_line, reset), cmocka_unit_test_setup (test_text_cli_line, reset),
    cmocka_unit_test_setup (test_json_line, reset),        cmocka_unit_test_setup (test_cut_lines, reset),
    cmocka_unit_test_setup (test_level_filter, reset),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
