/* The husk error type and the log sink shared by every component. */
#include <errno.h>
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
  enum husk_log_level level;
  const char *prog;
} log_sink = { 2, 0, HUSK_LOG_WARNING, "husk" };

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

int
husk_log_is_redirected (void)
{
  return log_sink.fd != 2;
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

/* JSON string escaping for the --log-format json lines runc writes. */
static void
append_json_escaped (char *out, size_t size, const char *in)
{
  size_t o = 0;

  for (; *in && o + 7 < size; in++)
    {
      unsigned char c = (unsigned char) *in;
      if (c == '"' || c == '\\')
        {
          out[o++] = '\\';
          out[o++] = (char) c;
        }
      else if (c < 0x20)
        o += (size_t) snprintf (out + o, size - o, "\\u%04x", c);
      else
        out[o++] = (char) c;
    }
  out[o] = '\0';
}

void
husk_log (enum husk_log_level level, const char *fmt, ...)
{
  char msg[4096];
  char line[9000];
  va_list ap;
  int n;

  if (level > log_sink.level)
    return;
  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);

  if (log_sink.json)
    {
      char escaped[8192];
      char stamp[64];
      struct timespec ts;
      struct tm tm;

      clock_gettime (CLOCK_REALTIME, &ts);
      gmtime_r (&ts.tv_sec, &tm);
      strftime (stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
      append_json_escaped (escaped, sizeof escaped, msg);
      n = snprintf (line, sizeof line, "{\"level\":\"%s\",\"msg\":\"%s\",\"time\":\"%s.%09ldZ\"}\n",
                    level_name (level), escaped, stamp, ts.tv_nsec);
    }
  else if (log_sink.fd == 2 && level == HUSK_LOG_ERROR)
    n = snprintf (line, sizeof line, "%s: %s\n", log_sink.prog, msg);
  else
    n = snprintf (line, sizeof line, "%s: %s: %s\n", log_sink.prog, level_name (level), msg);
  if (n > (int) sizeof line - 1)
    n = (int) sizeof line - 1;
  husk_write_all (log_sink.fd, line, (size_t) n);
}
