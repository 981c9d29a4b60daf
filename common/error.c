/* The husk error type and the log sink shared by every component. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "husk/error.h"
#include "husk/util.h"

int
husk_error_makev (struct husk_error **err, int errnum, const char *fmt, va_list ap)
{
  char *text = NULL;

  if (err == NULL)
    return -1;
  if (vasprintf (&text, fmt, ap) < 0)
    abort ();
  if (errnum != 0)
    {
      char *with_errno = xasprintf ("%s: %s", text, strerror (errnum));
      free (text);
      text = with_errno;
    }
  husk_error_free (err);
  *err = xmalloc (sizeof **err);
  (*err)->errnum = errnum;
  (*err)->msg = text;
  return -1;
}

int
husk_error_make (struct husk_error **err, int errnum, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  husk_error_makev (err, errnum, fmt, ap);
  va_end (ap);
  return -1;
}

int
husk_error_kindv (struct husk_error **err, int errnum, const char *fmt, va_list ap)
{
  husk_error_makev (err, 0, fmt, ap);
  if (err)
    (*err)->errnum = errnum;
  return -1;
}

int
husk_error_kind (struct husk_error **err, int errnum, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  husk_error_kindv (err, errnum, fmt, ap);
  va_end (ap);
  return -1;
}

int
husk_error_wrap (struct husk_error **err, const char *fmt, ...)
{
  char *prefix = NULL;
  char *joined;
  va_list ap;

  if (err == NULL || *err == NULL)
    return -1;
  va_start (ap, fmt);
  if (vasprintf (&prefix, fmt, ap) < 0)
    abort ();
  va_end (ap);
  joined = xasprintf ("%s: %s", prefix, (*err)->msg);
  free (prefix);
  free ((*err)->msg);
  (*err)->msg = joined;
  return -1;
}

void
husk_error_free (struct husk_error **err)
{
  if (err == NULL || *err == NULL)
    return;
  free ((*err)->msg);
  free (*err);
  *err = NULL;
}

void
husk_error_report (struct husk_error **err, const char *prog)
{
  if (err == NULL || *err == NULL)
    return;
  husk_log (HUSK_LOG_ERROR, "%s", (*err)->msg);
  /* With --log pointing elsewhere the caller still sees the error. */
  if (husk_log_is_redirected ())
    fprintf (stderr, "%s: %s\n", prog, (*err)->msg);
  husk_error_free (err);
}

static struct
{
  int fd;
  int json;
  int timestamps;
  enum husk_log_level level;
  const char *prog;
} log_sink = { 2, 0, 0, HUSK_LOG_WARNING, "husk" };

void
husk_log_set_file (int fd, int json)
{
  log_sink.fd = fd;
  log_sink.json = json;
}

void
husk_log_set_level (enum husk_log_level level)
{
  log_sink.level = level;
}

void
husk_log_set_prog (const char *prog)
{
  log_sink.prog = prog;
}

void
husk_log_set_timestamps (int on)
{
  log_sink.timestamps = on;
}

int
husk_log_is_redirected (void)
{
  return log_sink.fd != 2;
}

int
husk_log_enabled (enum husk_log_level level)
{
  return level <= log_sink.level;
}

static const char *
level_name (enum husk_log_level level)
{
  switch (level)
    {
    case HUSK_LOG_ERROR:
      return "error";
    case HUSK_LOG_WARNING:
      return "warning";
    case HUSK_LOG_INFO:
      return "info";
    default:
      return "debug";
    }
}

/* One log line in a fixed buffer.  Pieces go in whole or not at all, and
 * once one does not fit nothing more does: the closing bytes (a quote, a
 * brace, the newline) always have their room, so a cut JSON line still
 * parses. */
struct line_buf
{
  char *buf;
  size_t size, len;
  bool full;
  bool in_string; /* a JSON string is open */
};

#define LINE_RESERVE 4 /* "}\n and the NUL */

static bool
line_put (struct line_buf *line, const char *bytes, size_t n)
{
  if (line->full || line->len + n + LINE_RESERVE > line->size)
    {
      line->full = true;
      return false;
    }
  memcpy (line->buf + line->len, bytes, n);
  line->len += n;
  return true;
}

static void
line_puts (struct line_buf *line, const char *text)
{
  line_put (line, text, strlen (text));
}

/* TEXT escaped for a JSON string, without the quotes. */
static void
line_put_json_chars (struct line_buf *line, const char *text)
{
  for (; *text && !line->full; text++)
    {
      unsigned char c = (unsigned char) *text;
      char escaped[8];

      if (c == '"' || c == '\\')
        line_put (line, (char[]){ '\\', (char) c }, 2);
      else if (c == '\n')
        line_put (line, "\\n", 2);
      else if (c == '\t')
        line_put (line, "\\t", 2);
      else if (c < 0x20 || c == 0x7f)
        line_put (line, escaped, (size_t) snprintf (escaped, sizeof escaped, "\\u%04x", c));
      else
        line_put (line, (const char *) &c, 1);
    }
}

/* ,"KEY":"VALUE" (or the opening {"KEY":"VALUE" when FIRST). */
static void
line_put_json_member (struct line_buf *line, bool first, const char *key, const char *value, bool number)
{
  char head[128];

  snprintf (head, sizeof head, "%s\"%s\":%s", first ? "{" : ",", key, number ? "" : "\"");
  if (!line_put (line, head, strlen (head)))
    return;
  if (number)
    {
      line_puts (line, value);
      return;
    }
  line->in_string = true;
  line_put_json_chars (line, value);
  if (line_put (line, "\"", 1))
    line->in_string = false;
}

static bool
is_json_number (const char *value)
{
  char *end;

  if (value[0] == '\0' || value[0] == '+' || value[0] == '.' || strpbrk (value, "xXnNiIpP") != NULL)
    return false;
  strtod (value, &end);
  return *end == '\0';
}

static bool
needs_quotes (const char *value)
{
  return value[0] == '\0' || strpbrk (value, " \t\n\"\\=") != NULL;
}

/* " KEY=VALUE", quoted as the header says; newlines become \n so that a
 * line stays one line. */
static void
line_put_text_field (struct line_buf *line, const char *key, const char *value)
{
  bool quoted = needs_quotes (value);
  char head[128];

  snprintf (head, sizeof head, " %s=%s", key, quoted ? "\"" : "");
  if (!line_put (line, head, strlen (head)))
    return;
  for (const char *p = value; *p && !line->full; p++)
    if (*p == '"' || *p == '\\')
      line_put (line, (char[]){ '\\', *p }, 2);
    else if (*p == '\n')
      line_put (line, "\\n", 2);
    else
      line_put (line, p, 1);
  if (quoted)
    line_put (line, "\"", 1);
}

static void
format_json (struct line_buf *line, enum husk_log_level level, const struct timespec *now,
             const struct husk_log_field *fields, size_t n_fields, const char *msg)
{
  char stamp[64], time_value[96];
  struct tm tm;

  gmtime_r (&now->tv_sec, &tm);
  strftime (stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf (time_value, sizeof time_value, "%s.%09ldZ", stamp, now->tv_nsec);
  line_put_json_member (line, true, "level", level_name (level), false);
  line_put_json_member (line, false, "msg", msg, false);
  line_put_json_member (line, false, "time", time_value, false);
  for (size_t i = 0; i < n_fields; i++)
    if (fields[i].value)
      line_put_json_member (line, false, fields[i].key, fields[i].value,
                            fields[i].number && is_json_number (fields[i].value));
  /* The reserve holds these. */
  if (line->in_string)
    line->buf[line->len++] = '"';
  if (line->len > 0)
    line->buf[line->len++] = '}';
}

static void
format_text (struct line_buf *line, enum husk_log_level level, const struct timespec *now,
             const struct husk_log_field *fields, size_t n_fields, const char *msg)
{
  char head[128];

  if (log_sink.timestamps)
    {
      char stamp[64];
      struct tm tm;

      gmtime_r (&now->tv_sec, &tm);
      strftime (stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
      snprintf (head, sizeof head, "%s.%06ldZ %s: ", stamp, now->tv_nsec / 1000, level_name (level));
    }
  else if (log_sink.fd == 2 && level == HUSK_LOG_ERROR)
    snprintf (head, sizeof head, "%s: ", log_sink.prog);
  else
    snprintf (head, sizeof head, "%s: %s: ", log_sink.prog, level_name (level));
  line_puts (line, head);
  for (const char *p = msg; *p && !line->full; p++)
    line_put (line, *p == '\n' ? " " : p, 1);
  for (size_t i = 0; i < n_fields; i++)
    if (fields[i].value)
      line_put_text_field (line, fields[i].key, fields[i].value);
}

size_t
husk_log_format (char *buf, size_t size, enum husk_log_level level, const struct timespec *now,
                 const struct husk_log_field *fields, size_t n_fields, const char *msg)
{
  struct line_buf line = { .buf = buf, .size = size };

  if (size < 64)
    abort (); /* a caller's bug: not even the head fits */
  if (log_sink.json)
    format_json (&line, level, now, fields, n_fields, msg);
  else
    format_text (&line, level, now, fields, n_fields, msg);
  line.buf[line.len++] = '\n';
  line.buf[line.len] = '\0';
  return line.len;
}

static void
log_line (enum husk_log_level level, const struct husk_log_field *fields, size_t n_fields, const char *fmt,
          va_list ap)
{
  char msg[4096];
  char line[16384];
  struct timespec now;
  size_t n;

  vsnprintf (msg, sizeof msg, fmt, ap);
  clock_gettime (CLOCK_REALTIME, &now);
  n = husk_log_format (line, sizeof line, level, &now, fields, n_fields, msg);
  /* One write per line: lines of threads do not interleave. */
  husk_write_all (log_sink.fd, line, n);
}

void
husk_log (enum husk_log_level level, const char *fmt, ...)
{
  va_list ap;

  if (level > log_sink.level)
    return;
  va_start (ap, fmt);
  log_line (level, NULL, 0, fmt, ap);
  va_end (ap);
}

void
husk_log_fields (enum husk_log_level level, const struct husk_log_field *fields, size_t n_fields,
                 const char *fmt, ...)
{
  va_list ap;

  if (level > log_sink.level)
    return;
  va_start (ap, fmt);
  log_line (level, fields, n_fields, fmt, ap);
  va_end (ap);
}
