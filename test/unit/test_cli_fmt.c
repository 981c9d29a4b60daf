/* Unit tests for `husk container`'s podman-like output and exit codes
 * (cri/cli/cli_fmt.c): durations, STATUS, --format templates, aligned
 * columns, and which error is 125, 126 or 127. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <cmocka.h>

#include "cri/cli/cli_fmt.h"

static void
check_str (char *got, const char *want)
{
  assert_string_equal (got, want);
  free (got);
}

static void
test_human_duration (void **state)
{
  (void) state;
  check_str (cli_human_duration (0), "Less than a second");
  check_str (cli_human_duration (1), "1 second");
  check_str (cli_human_duration (5), "5 seconds");
  check_str (cli_human_duration (59), "59 seconds");
  check_str (cli_human_duration (60), "About a minute");
  check_str (cli_human_duration (119), "About a minute");
  check_str (cli_human_duration (120), "2 minutes");
  check_str (cli_human_duration (3599), "59 minutes");
  check_str (cli_human_duration (3600), "About an hour");
  check_str (cli_human_duration (5400), "2 hours");
  check_str (cli_human_duration (47 * 3600), "47 hours");
  check_str (cli_human_duration (48 * 3600), "2 days");
  check_str (cli_human_duration (15 * 86400), "2 weeks");
  check_str (cli_human_duration (61 * 86400), "2 months");
  check_str (cli_human_duration (800 * 86400LL), "2 years");
}

static void
test_status_text (void **state)
{
  (void) state;
  check_str (cli_status_text ("running", 0, 2), "Up 2 seconds");
  check_str (cli_status_text ("paused", 0, 60), "Up About a minute (Paused)");
  check_str (cli_status_text ("created", 0, 9), "Created");
  check_str (cli_status_text ("exited", 0, 3), "Exited (0) 3 seconds ago");
  check_str (cli_status_text ("exited", 137, 7200), "Exited (137) 2 hours ago");
  check_str (cli_status_text ("stopped", 0, 0), "Stopped");
}

static void
test_template (void **state)
{
  json_t *fields = json_pack ("{s:s, s:s, s:i}", "ID", "abc", "Names", "web", "ExitCode", 3);
  struct husk_error *err = NULL;
  char *out = NULL;

  (void) state;
  assert_int_equal (cli_template_render ("{{.ID}}\\t{{ .Names }} {{.ExitCode}}", fields, &out, &err), 0);
  check_str (out, "abc\tweb 3");
  assert_int_equal (cli_template_render ("plain", fields, &out, &err), 0);
  check_str (out, "plain");
  assert_int_equal (cli_template_render ("{{.Nope}}", fields, &out, &err), -1);
  assert_non_null (strstr (err->msg, ".Nope"));
  husk_error_free (&err);
  assert_int_equal (cli_template_render ("{{.ID", fields, &out, &err), -1);
  assert_non_null (strstr (err->msg, "without `}}`"));
  husk_error_free (&err);
  assert_int_equal (cli_template_render ("{{ID}}", fields, &out, &err), -1);
  husk_error_free (&err);
  json_decref (fields);
}

static void
test_table (void **state)
{
  struct cli_table table = { .n_columns = 3 };
  const char *head[] = { "ID", "NAME", "STATUS" };
  const char *row[] = { "abcdef", "x", "Up 2 seconds" };
  char *buf = NULL;
  size_t size = 0;
  FILE *out = open_memstream (&buf, &size);

  (void) state;
  cli_table_add (&table, head);
  cli_table_add (&table, row);
  cli_table_print (&table, out);
  fclose (out);
  assert_string_equal (buf, "ID      NAME  STATUS\nabcdef  x     Up 2 seconds\n");
  free (buf);
}

static int
code_for (const char *msg)
{
  struct husk_error e = { .errnum = 0, .msg = (char *) msg };
  return cli_exit_code (&e);
}

static void
test_exit_code (void **state)
{
  (void) state;
  assert_int_equal (code_for ("exec `/no/such`: No such file or directory"), 127);
  assert_int_equal (code_for ("exec `nosuch`: executable file not found in $PATH"), 127);
  assert_int_equal (code_for ("exec `/etc`: Permission denied"), 126);
  assert_int_equal (code_for ("exec `/bin/x`: Exec format error"), 126);
  assert_int_equal (code_for ("no such container: x"), 125);
  assert_int_equal (code_for ("open `/x`: No such file or directory"), 125);
  assert_int_equal (cli_exit_code (NULL), 125);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_human_duration), cmocka_unit_test (test_status_text),
    cmocka_unit_test (test_template),       cmocka_unit_test (test_table),
    cmocka_unit_test (test_exit_code),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
