/* Unit tests for the monitor's CRI log (cri/monitor/log.c, logfile.c) and
 * exit record (exit.c): records for whole, split, over-long, CR-LF and empty
 * lines, the timestamp, batches of whole records, reopen after rotation,
 * --log-max-size, whole records only on a full disk, and the exit file's
 * and the reopen answer's JSON. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "cri/monitor/exit.h"
#include "cri/monitor/log.h"

/* 2016-10-06T00:17:09.669794202Z, the example of the CRI docs. */
static const struct timespec example_time = { .tv_sec = 1475713029, .tv_nsec = 669794202 };
#define EXAMPLE_STAMP "2016-10-06T00:17:09.669794202Z"

/* A sink that keeps every batch, as the log file would receive them. */
struct test_sink
{
  struct log_sink sink; /* first */
  char *text;
  size_t len;
  int batches;
  bool batch_ended_mid_record;
};

static void
test_write_batch (struct log_sink *sink, const char *records, size_t len)
{
  struct test_sink *ts = (struct test_sink *) sink;

  ts->text = xrealloc (ts->text, ts->len + len + 1);
  memcpy (ts->text + ts->len, records, len);
  ts->len += len;
  ts->text[ts->len] = '\0';
  ts->batches++;
  if (len == 0 || records[len - 1] != '\n')
    ts->batch_ended_mid_record = true;
}

struct fixture
{
  struct test_sink out;
  struct log_stream stdout_stream;
  struct log_stream stderr_stream;
};

static int
setup (void **state)
{
  struct fixture *fx = xcalloc (1, sizeof *fx);

  fx->out.sink.write_batch = test_write_batch;
  log_stream_init (&fx->stdout_stream, "stdout");
  log_stream_init (&fx->stderr_stream, "stderr");
  *state = fx;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *fx = *state;

  free (fx->out.text);
  free (fx);
  return 0;
}

static void
feed (struct fixture *fx, struct log_stream *stream, const char *data, size_t len)
{
  log_stream_feed (stream, &fx->out.sink, &example_time, data, len);
}

static void
feed_str (struct fixture *fx, const char *data)
{
  feed (fx, &fx->stdout_stream, data, strlen (data));
}

static const char *
output (struct fixture *fx)
{
  return fx->out.text ? fx->out.text : "";
}

static size_t
count_records (const char *text)
{
  size_t n = 0;

  for (; *text; text++)
    n += *text == '\n';
  return n;
}

/* ---------------------------------------------------------------- tests */

static bool
is_digits (const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9')
      return false;
  return true;
}

/* The shape 4-2-2T2:2:2.9Z, checked character by character. */
static void
assert_timestamp_shape (const char *stamp)
{
  assert_int_equal (strlen (stamp), LOG_TIMESTAMP_LEN);
  assert_true (is_digits (stamp, 4) && stamp[4] == '-' && is_digits (stamp + 5, 2) && stamp[7] == '-');
  assert_true (is_digits (stamp + 8, 2) && stamp[10] == 'T' && is_digits (stamp + 11, 2) && stamp[13] == ':');
  assert_true (is_digits (stamp + 14, 2) && stamp[16] == ':' && is_digits (stamp + 17, 2));
  assert_true (stamp[19] == '.' && is_digits (stamp + 20, 9) && stamp[29] == 'Z');
}

static void
test_timestamp_format (void **state)
{
  char stamp[LOG_TIMESTAMP_LEN + 1];
  struct timespec whole_second = { .tv_sec = 0, .tv_nsec = 0 };
  struct timespec now;

  log_format_timestamp (&example_time, stamp);
  assert_string_equal (stamp, EXAMPLE_STAMP);
  /* Trailing zeros stay: every record's timestamp has the same width. */
  log_format_timestamp (&whole_second, stamp);
  assert_string_equal (stamp, "1970-01-01T00:00:00.000000000Z");
  clock_gettime (CLOCK_REALTIME, &now);
  log_format_timestamp (&now, stamp);
  assert_timestamp_shape (stamp);
}

static void
test_full_lines (void **state)
{
  struct fixture *fx = *state;

  feed_str (fx, "hello\n");
  assert_string_equal (output (fx), EXAMPLE_STAMP " stdout F hello\n");
}

static void
test_several_lines_in_one_read (void **state)
{
  struct fixture *fx = *state;

  feed_str (fx, "one\ntwo\nthree\n");
  assert_string_equal (output (fx), EXAMPLE_STAMP " stdout F one\n" EXAMPLE_STAMP
                                                  " stdout F two\n" EXAMPLE_STAMP " stdout F three\n");
  assert_int_equal (fx->out.batches, 1);
}

static void
test_line_split_across_reads (void **state)
{
  struct fixture *fx = *state;

  feed_str (fx, "hel");
  assert_string_equal (output (fx), "");
  feed_str (fx, "lo wor");
  assert_string_equal (output (fx), "");
  feed_str (fx, "ld\nnext");
  assert_string_equal (output (fx), EXAMPLE_STAMP " stdout F hello world\n");
  feed_str (fx, "\n");
  assert_string_equal (output (fx), EXAMPLE_STAMP " stdout F hello world\n" EXAMPLE_STAMP " stdout F next\n");
}

/* Splits OUTPUT into records and checks each one's tag and content size;
 * returns the contents joined. */
static char *
join_records (const char *text, const char *tags, const size_t *sizes, size_t n)
{
  char *joined = xcalloc (1, strlen (text) + 1);
  size_t joined_len = 0;
  const char *record = text;

  for (size_t i = 0; i < n; i++)
    {
      const char *end = strchr (record, '\n');
      const char *content = record + LOG_TIMESTAMP_LEN + strlen (" stdout X ");

      assert_non_null (end);
      assert_memory_equal (record + LOG_TIMESTAMP_LEN, " stdout ", 8);
      assert_int_equal (record[LOG_TIMESTAMP_LEN + 8], tags[i]);
      assert_int_equal ((size_t) (end - content), sizes[i]);
      memcpy (joined + joined_len, content, sizes[i]);
      joined_len += sizes[i];
      record = end + 1;
    }
  assert_string_equal (record, "");
  return joined;
}

static void
test_long_line_becomes_partials (void **state)
{
  struct fixture *fx = *state;
  size_t line_len = 2 * LOG_LINE_MAX + 10;
  cleanup_free char *line = xmalloc (line_len + 1);
  cleanup_free char *joined = NULL;
  const size_t sizes[] = { LOG_LINE_MAX, LOG_LINE_MAX, 10 };

  for (size_t i = 0; i < line_len; i++)
    line[i] = (char) ('a' + i % 26);
  line[line_len] = '\n';
  /* In uneven reads, as a pipe delivers it. */
  feed (fx, &fx->stdout_stream, line, 5000);
  feed (fx, &fx->stdout_stream, line + 5000, 20000);
  feed (fx, &fx->stdout_stream, line + 25000, line_len + 1 - 25000);
  joined = join_records (output (fx), "PPF", sizes, 3);
  assert_memory_equal (joined, line, line_len);
}

static void
test_line_of_exactly_max_stays_whole (void **state)
{
  struct fixture *fx = *state;
  cleanup_free char *line = xmalloc (LOG_LINE_MAX);
  cleanup_free char *joined = NULL;
  const size_t sizes[] = { LOG_LINE_MAX };

  memset (line, 'x', LOG_LINE_MAX);
  feed (fx, &fx->stdout_stream, line, LOG_LINE_MAX);
  assert_string_equal (output (fx), "");
  /* Its newline comes in the next read. */
  feed_str (fx, "\n");
  joined = join_records (output (fx), "F", sizes, 1);
  assert_memory_equal (joined, line, LOG_LINE_MAX);
}

static void
test_crlf_keeps_cr (void **state)
{
  struct fixture *fx = *state;

  feed_str (fx, "tty line\r\n");
  assert_string_equal (output (fx), EXAMPLE_STAMP " stdout F tty line\r\n");
}

static void
test_empty_lines (void **state)
{
  struct fixture *fx = *state;

  feed_str (fx, "\n\nx\n\n");
  assert_string_equal (output (fx), EXAMPLE_STAMP " stdout F \n" EXAMPLE_STAMP " stdout F \n" EXAMPLE_STAMP
                                                  " stdout F x\n" EXAMPLE_STAMP " stdout F \n");
}

static void
test_stream_names (void **state)
{
  struct fixture *fx = *state;

  feed (fx, &fx->stderr_stream, "oops\n", 5);
  feed (fx, &fx->stdout_stream, "fine\n", 5);
  assert_string_equal (output (fx), EXAMPLE_STAMP " stderr F oops\n" EXAMPLE_STAMP " stdout F fine\n");
}

static void
test_streams_keep_their_own_partials (void **state)
{
  struct fixture *fx = *state;

  feed (fx, &fx->stdout_stream, "out-", 4);
  feed (fx, &fx->stderr_stream, "err-", 4);
  feed (fx, &fx->stderr_stream, "line\n", 5);
  feed (fx, &fx->stdout_stream, "line\n", 5);
  assert_string_equal (output (fx),
                       EXAMPLE_STAMP " stderr F err-line\n" EXAMPLE_STAMP " stdout F out-line\n");
}

static void
test_finish_writes_partial (void **state)
{
  struct fixture *fx = *state;

  feed_str (fx, "done\nno newline");
  log_stream_finish (&fx->stdout_stream, &fx->out.sink, &example_time);
  assert_string_equal (output (fx), EXAMPLE_STAMP " stdout F done\n" EXAMPLE_STAMP " stdout P no newline\n");
  /* Nothing pending: nothing more. */
  log_stream_finish (&fx->stdout_stream, &fx->out.sink, &example_time);
  assert_int_equal (count_records (output (fx)), 2);
}

static void
test_batches_hold_whole_records (void **state)
{
  struct fixture *fx = *state;
  size_t n_lines = 3 * LOG_BATCH_SIZE / 20;
  cleanup_free char *data = xmalloc (n_lines * 10);

  for (size_t i = 0; i < n_lines; i++)
    memcpy (data + i * 10, "123456789\n", 10);
  feed (fx, &fx->stdout_stream, data, n_lines * 10);
  assert_int_equal (count_records (output (fx)), n_lines);
  assert_true (fx->out.batches > 1);
  assert_false (fx->out.batch_ended_mid_record);
  assert_int_equal (fx->out.len, n_lines * (LOG_TIMESTAMP_LEN + strlen (" stdout F 123456789\n")));
}

static void
test_timestamp_is_the_read_time (void **state)
{
  struct fixture *fx = *state;
  struct timespec later = { .tv_sec = 1475713030, .tv_nsec = 5 };

  feed_str (fx, "part");
  log_stream_feed (&fx->stdout_stream, &fx->out.sink, &later, "ial\n", 4);
  assert_string_equal (output (fx), "2016-10-06T00:17:10.000000005Z stdout F partial\n");
}

/* ---------------------------------------------------------------- log file */

struct file_fixture
{
  char dir[64];
  char *path;
  struct log_file file;
  struct log_stream stream;
};

static int
setup_file (void **state)
{
  struct file_fixture *fx = xcalloc (1, sizeof *fx);

  strcpy (fx->dir, "/tmp/husk-monitor-log-XXXXXX");
  if (mkdtemp (fx->dir) == NULL)
    return -1;
  fx->path = xasprintf ("%s/ctr.log", fx->dir);
  fx->file.fd = -1;
  log_stream_init (&fx->stream, "stdout");
  *state = fx;
  return 0;
}

static int
teardown_file (void **state)
{
  struct file_fixture *fx = *state;

  if (fx->file.fd >= 0)
    log_file_close (&fx->file);
  husk_rm_rf (fx->dir, NULL);
  free (fx->path);
  free (fx);
  return 0;
}

static char *
read_text (const char *path)
{
  char *text = NULL;

  assert_int_equal (husk_read_file (path, &text, NULL, NULL), 0);
  return text;
}

static void
write_line (struct file_fixture *fx, const char *line)
{
  log_stream_feed (&fx->stream, &fx->file.sink, &example_time, line, strlen (line));
}

static void
test_file_appends_and_reopens (void **state)
{
  struct file_fixture *fx = *state;
  struct husk_error *err = NULL;
  cleanup_free char *rotated = xasprintf ("%s/ctr.log.1", fx->dir);
  cleanup_free char *old_text = NULL;
  cleanup_free char *new_text = NULL;
  struct stat st;

  assert_int_equal (log_file_open (&fx->file, NULL, fx->path, 0, &err), 0);
  write_line (fx, "before\nhalf ");
  assert_int_equal (rename (fx->path, rotated), 0);
  write_line (fx, "still old\n");
  assert_int_equal (log_file_reopen (&fx->file, &err), 0);
  assert_int_equal (stat (fx->path, &st), 0);
  assert_int_equal (st.st_mode & 0777, 0640);
  write_line (fx, "after\n");
  old_text = read_text (rotated);
  new_text = read_text (fx->path);
  assert_string_equal (old_text,
                       EXAMPLE_STAMP " stdout F before\n" EXAMPLE_STAMP " stdout F half still old\n");
  assert_string_equal (new_text, EXAMPLE_STAMP " stdout F after\n");
}

static void
test_file_max_size_truncates (void **state)
{
  struct file_fixture *fx = *state;
  struct husk_error *err = NULL;
  size_t record_len = LOG_TIMESTAMP_LEN + strlen (" stdout F line-N\n");
  cleanup_free char *text = NULL;

  assert_int_equal (log_file_open (&fx->file, NULL, fx->path, (long long) (2 * record_len), &err), 0);
  write_line (fx, "line-1\n");
  write_line (fx, "line-2\n");
  write_line (fx, "line-3\n");
  text = read_text (fx->path);
  assert_string_equal (text, EXAMPLE_STAMP " stdout F line-3\n");
}

static void
test_file_open_error_names_path (void **state)
{
  struct file_fixture *fx = *state;
  struct husk_error *err = NULL;
  cleanup_free char *bad = xasprintf ("%s/missing/ctr.log", fx->dir);

  assert_int_equal (log_file_open (&fx->file, NULL, bad, 0, &err), -1);
  assert_non_null (strstr (err->msg, bad));
  husk_error_free (&err);
}

/* With the pod's log dir given, a symlink below it (the log file itself,
 * a directory on the way, a climb out) is refused naming it, and nothing
 * is made where it points; a plain file in a subdirectory opens, and so
 * does a reopen after rotation. */
static void
test_file_symlinks_under_log_dir (void **state)
{
  struct file_fixture *fx = *state;
  struct husk_error *err = NULL;
  cleanup_free char *logs = xasprintf ("%s/logs", fx->dir);
  cleanup_free char *host = xasprintf ("%s/host", fx->dir);
  cleanup_free char *target = xasprintf ("%s/target.log", host);
  cleanup_free char *link_file = xasprintf ("%s/evil.log", logs);
  cleanup_free char *link_dir = xasprintf ("%s/evildir", logs);
  cleanup_free char *climb = xasprintf ("%s/climb", logs);
  cleanup_free char *sub = xasprintf ("%s/ctr", logs);
  const char *bad[] = { "evil.log", "evildir/0.log", "climb/0.log" };

  assert_int_equal (mkdir (logs, 0755), 0);
  assert_int_equal (mkdir (host, 0755), 0);
  assert_int_equal (mkdir (sub, 0755), 0);
  assert_int_equal (symlink (target, link_file), 0);
  assert_int_equal (symlink (host, link_dir), 0);
  assert_int_equal (symlink ("../host", climb), 0);
  for (size_t i = 0; i < 3; i++)
    {
      cleanup_free char *path = xasprintf ("%s/%s", logs, bad[i]);
      assert_int_equal (log_file_open (&fx->file, logs, path, 0, &err), -1);
      assert_non_null (strstr (err->msg, "a symlink under the log dir"));
      assert_non_null (strstr (err->msg, path));
      husk_error_free (&err);
    }
  assert_int_equal (access (target, F_OK), -1);
  {
    cleanup_free char *through = xasprintf ("%s/0.log", host);
    assert_int_equal (access (through, F_OK), -1);
  }
  {
    cleanup_free char *outside = xasprintf ("%s/other.log", fx->dir);
    assert_int_equal (log_file_open (&fx->file, logs, outside, 0, &err), -1);
    assert_non_null (strstr (err->msg, "not under the log dir"));
    husk_error_free (&err);
  }
  free (fx->path);
  fx->path = xasprintf ("%s/0.log", sub);
  assert_int_equal (log_file_open (&fx->file, logs, fx->path, 0, &err), 0);
  write_line (fx, "kept\n");
  assert_int_equal (log_file_reopen (&fx->file, &err), 0);
}

/* A full disk, played by RLIMIT_FSIZE in a child (a write past the limit
 * stores what fits, the next one fails with EFBIG): the lines in BEFORE
 * meet a file that takes LIMIT bytes, those in AFTER a file with room
 * again.  Each string is one read, one batch.  Returns the child's
 * warnings (a pipe: the limit is on files). */
static char *
write_with_size_limit (struct file_fixture *fx, rlim_t limit, const char *const *before,
                       const char *const *after)
{
  int warnings[2];
  pid_t child;
  int status;
  char *text = NULL;
  struct husk_error *err = NULL;

  assert_int_equal (pipe (warnings), 0);
  child = fork ();
  assert_true (child >= 0);
  if (child == 0)
    {
      struct rlimit rl;

      signal (SIGXFSZ, SIG_IGN);
      if (dup2 (warnings[1], 2) < 0 || getrlimit (RLIMIT_FSIZE, &rl) < 0
          || log_file_open (&fx->file, NULL, fx->path, 0, &err) < 0)
        _exit (2);
      rl.rlim_cur = limit;
      if (setrlimit (RLIMIT_FSIZE, &rl) < 0)
        _exit (3);
      for (; *before; before++)
        write_line (fx, *before);
      rl.rlim_cur = rl.rlim_max;
      if (setrlimit (RLIMIT_FSIZE, &rl) < 0)
        _exit (4);
      for (; *after; after++)
        write_line (fx, *after);
      log_file_close (&fx->file);
      _exit (0);
    }
  close (warnings[1]);
  assert_int_equal (waitpid (child, &status, 0), child);
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 0);
  assert_int_equal (husk_read_fd (warnings[0], &text, NULL, "warnings", &err), 0);
  close (warnings[0]);
  return text;
}

#define RECORD_LEN(content) (LOG_TIMESTAMP_LEN + strlen (" stdout F " content "\n"))

static void
test_file_full_drops_whole_records (void **state)
{
  struct file_fixture *fx = *state;
  /* line-3 gets the first 11 bytes of its record: "2016-10-06T". */
  rlim_t limit = 2 * RECORD_LEN ("line-N") + 11;
  cleanup_free char *text = NULL;
  cleanup_free char *warnings = NULL;
  cleanup_free char *expected_warning = NULL;

  warnings = write_with_size_limit (fx, limit,
                                    (const char *[]){ "line-1\n", "line-2\n", "line-3\n", "line-4\n", NULL },
                                    (const char *[]){ "line-5\nline-6\n", NULL });
  text = read_text (fx->path);
  assert_string_equal (text, EXAMPLE_STAMP
                       " stdout F line-1\n" EXAMPLE_STAMP " stdout F line-2\n" EXAMPLE_STAMP
                       " stderr F husk-monitor: 2 log records were dropped: File too large\n" EXAMPLE_STAMP
                       " stdout F line-5\n" EXAMPLE_STAMP " stdout F line-6\n");
  expected_warning
      = xasprintf ("write log file `%s`: File too large; dropping output until it works again", fx->path);
  assert_non_null (strstr (warnings, expected_warning));
  assert_non_null (strstr (warnings, "takes output again; 2 records were dropped"));
}

static void
test_file_full_keeps_the_whole_records_of_a_batch (void **state)
{
  struct file_fixture *fx = *state;
  /* One batch of three records: the first fits, the second is torn. */
  rlim_t limit = 2 * RECORD_LEN ("line-N") - 3;
  cleanup_free char *text = NULL;

  free (write_with_size_limit (fx, limit, (const char *[]){ "line-1\nline-2\nline-3\n", "line-4\n", NULL },
                               (const char *[]){ "line-5\n", NULL }));
  text = read_text (fx->path);
  assert_string_equal (text, EXAMPLE_STAMP
                       " stdout F line-1\n" EXAMPLE_STAMP
                       " stderr F husk-monitor: 3 log records were dropped: File too large\n" EXAMPLE_STAMP
                       " stdout F line-5\n");
}

/* Still full at the end: nothing torn is left, nothing is noted. */
static void
test_file_full_to_the_end (void **state)
{
  struct file_fixture *fx = *state;
  rlim_t limit = RECORD_LEN ("line-N") + 20;
  cleanup_free char *text = NULL;

  cleanup_free char *warnings = NULL;

  warnings = write_with_size_limit (fx, limit, (const char *[]){ "line-1\n", "line-2\n", "line-3\n", NULL },
                                    (const char *[]){ NULL });
  text = read_text (fx->path);
  assert_string_equal (text, EXAMPLE_STAMP " stdout F line-1\n");
  assert_non_null (strstr (warnings, "the last 2 records were dropped: File too large"));
}

/* ---------------------------------------------------------------- exit */

static void
test_exit_record (void **state)
{
  struct monitor_exit exit_record;
  cleanup_free char *json = NULL;
  json_t *doc;

  monitor_exit_from_wait_status (3 << 8, &example_time, &exit_record);
  assert_int_equal (exit_record.exit_code, 3);
  assert_int_equal (exit_record.signal, 0);
  json = monitor_exit_json (&exit_record);
  assert_string_equal (
      json, "{\"exit_code\":3,\"signal\":0,\"oom_killed\":false,\"finished_at\":\"" EXAMPLE_STAMP "\"}");
  free (steal_pointer (&json));

  monitor_exit_from_wait_status (SIGKILL, &example_time, &exit_record);
  exit_record.oom_killed = true;
  json = monitor_exit_json (&exit_record);
  doc = json_loads (json, 0, NULL);
  assert_non_null (doc);
  assert_int_equal (json_integer_value (json_object_get (doc, "exit_code")), 137);
  assert_int_equal (json_integer_value (json_object_get (doc, "signal")), 9);
  assert_true (json_is_true (json_object_get (doc, "oom_killed")));
  json_decref (doc);
}

static void
test_exit_file_and_oom_count (void **state)
{
  struct file_fixture *fx = *state;
  struct husk_error *err = NULL;
  struct monitor_exit exit_record;
  cleanup_free char *exit_path = xasprintf ("%s/c1", fx->dir);
  cleanup_free char *events = xasprintf ("%s/memory.events", fx->dir);
  cleanup_free char *text = NULL;
  cleanup_free char *own_events = NULL;
  const char *events_text = "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\noom_group_kill 0\n";

  monitor_exit_from_wait_status (0, &example_time, &exit_record);
  assert_int_equal (monitor_exit_write (fx->dir, "c1", &exit_record, &err), 0);
  text = read_text (exit_path);
  assert_string_equal (
      text, "{\"exit_code\":0,\"signal\":0,\"oom_killed\":false,\"finished_at\":\"" EXAMPLE_STAMP "\"}\n");

  assert_int_equal (husk_write_file_replace (events, events_text, strlen (events_text), 0644, &err), 0);
  assert_int_equal (monitor_oom_kills (events), 2);
  assert_int_equal (monitor_oom_kills (NULL), 0);
  /* Our own cgroup: NULL without a memory controller, else its v2
   * memory.events or its v1 memory.oom_control, readable. */
  own_events = monitor_oom_events_path (getpid ());
  if (own_events)
    {
      assert_true (husk_str_has_suffix (own_events, "/memory.events")
                   || husk_str_has_suffix (own_events, "/memory.oom_control"));
      assert_int_equal (access (own_events, R_OK), 0);
    }
}

/* The answer to SIGUSR1 huskd reads: when the reopen began, and the
 * error when it failed (a path that is not UTF-8 keeps the errno text). */
static void
test_reopen_answer (void **state)
{
  struct file_fixture *fx = *state;
  struct husk_error *err = NULL;
  struct husk_error failure
      = { .errnum = ENOENT, .msg = "open log file `/x/0.log`: No such file or directory" };
  struct husk_error not_utf8 = { .errnum = EACCES, .msg = "open log file `/x/\xff.log`: Permission denied" };
  cleanup_free char *path = monitor_reopen_answer_path (fx->dir, "c1");
  cleanup_free char *expected_path = xasprintf ("%s/c1.reopen", fx->dir);
  char *text;

  assert_string_equal (path, expected_path);
  assert_int_equal (monitor_reopen_answer_write (fx->dir, "c1", 123456789012LL, NULL, &err), 0);
  text = read_text (path);
  assert_string_equal (text, "{\"monotonic_ns\":123456789012}");
  free (text);
  assert_int_equal (monitor_reopen_answer_write (fx->dir, "c1", 5, &failure, &err), 0);
  text = read_text (path);
  assert_string_equal (text,
                       "{\"monotonic_ns\":5,\"errno\":2,\"error\":\"open log file `/x/0.log`: No such file "
                       "or directory\"}");
  free (text);
  assert_int_equal (monitor_reopen_answer_write (fx->dir, "c1", 6, &not_utf8, &err), 0);
  text = read_text (path);
  assert_string_equal (
      text, "{\"monotonic_ns\":6,\"errno\":13,\"error\":\"open the log file: Permission denied\"}");
  free (text);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_timestamp_format),
    cmocka_unit_test_setup_teardown (test_full_lines, setup, teardown),
    cmocka_unit_test_setup_teardown (test_several_lines_in_one_read, setup, teardown),
    cmocka_unit_test_setup_teardown (test_line_split_across_reads, setup, teardown),
    cmocka_unit_test_setup_teardown (test_long_line_becomes_partials, setup, teardown),
    cmocka_unit_test_setup_teardown (test_line_of_exactly_max_stays_whole, setup, teardown),
    cmocka_unit_test_setup_teardown (test_crlf_keeps_cr, setup, teardown),
    cmocka_unit_test_setup_teardown (test_empty_lines, setup, teardown),
    cmocka_unit_test_setup_teardown (test_stream_names, setup, teardown),
    cmocka_unit_test_setup_teardown (test_streams_keep_their_own_partials, setup, teardown),
    cmocka_unit_test_setup_teardown (test_finish_writes_partial, setup, teardown),
    cmocka_unit_test_setup_teardown (test_batches_hold_whole_records, setup, teardown),
    cmocka_unit_test_setup_teardown (test_timestamp_is_the_read_time, setup, teardown),
    cmocka_unit_test_setup_teardown (test_file_appends_and_reopens, setup_file, teardown_file),
    cmocka_unit_test_setup_teardown (test_file_max_size_truncates, setup_file, teardown_file),
    cmocka_unit_test_setup_teardown (test_file_open_error_names_path, setup_file, teardown_file),
    cmocka_unit_test_setup_teardown (test_file_symlinks_under_log_dir, setup_file, teardown_file),
    cmocka_unit_test_setup_teardown (test_file_full_drops_whole_records, setup_file, teardown_file),
    cmocka_unit_test_setup_teardown (test_file_full_keeps_the_whole_records_of_a_batch, setup_file,
                                     teardown_file),
    cmocka_unit_test_setup_teardown (test_file_full_to_the_end, setup_file, teardown_file),
    cmocka_unit_test (test_exit_record),
    cmocka_unit_test_setup_teardown (test_exit_file_and_oom_count, setup_file, teardown_file),
    cmocka_unit_test_setup_teardown (test_reopen_answer, setup_file, teardown_file),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
