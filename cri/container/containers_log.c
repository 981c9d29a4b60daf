/* The CRI log of a detached container, read back (`husk container logs`):
 * times and records, kept out of the CLI so they can be unit-tested. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cri/container/containers.h"
#include "husk/util.h"

/* A Go duration made of NUMBER UNIT pairs: 1h30m, 10s, 500ms. */
static int
parse_duration_ns (const char *text, long long *out)
{
  long long total = 0;

  if (*text == '\0')
    return -1;
  while (*text)
    {
      char *end;
      double v = strtod (text, &end);
      double unit;

      if (end == text || v < 0)
        return -1;
      if (strncmp (end, "ms", 2) == 0)
        unit = 1e6, end += 2;
      else if (*end == 's')
        unit = 1e9, end++;
      else if (*end == 'm')
        unit = 60e9, end++;
      else if (*end == 'h')
        unit = 3600e9, end++;
      else
        return -1;
      total += (long long) (v * unit);
      text = end;
    }
  *out = total;
  return 0;
}

/* 2024-01-02T15:04:05[.frac](Z|+hh:mm|-hh:mm) -> ns since the epoch. */
int
containers_log_parse_time (const char *text, long long *out, const char **rest)
{
  struct tm tm = { 0 };
  const char *p = strptime (text, "%Y-%m-%dT%H:%M:%S", &tm);
  long long frac = 0, scale = 1000000000LL, offset = 0;

  if (p == NULL)
    return -1;
  if (*p == '.')
    for (p++; *p >= '0' && *p <= '9'; p++)
      if (scale > 1)
        {
          scale /= 10;
          frac += (*p - '0') * scale;
        }
  if (*p == 'Z')
    p++;
  else if ((*p == '+' || *p == '-') && strlen (p) >= 6 && p[3] == ':')
    {
      offset = ((p[1] - '0') * 10 + (p[2] - '0')) * 3600LL + ((p[4] - '0') * 10 + (p[5] - '0')) * 60LL;
      offset = *p == '+' ? -offset : offset;
      p += 6;
    }
  else
    return -1;
  *out = ((long long) timegm (&tm) + offset) * 1000000000LL + frac;
  if (rest)
    *rest = p;
  return 0;
}

int
containers_log_parse_since (const char *text, long long now_ns, long long *out, struct husk_error **err)
{
  const char *rest = NULL;
  long long v;

  if (containers_log_parse_time (text, out, &rest) == 0 && *rest == '\0')
    return 0;
  if (husk_parse_int64 (text, 0, INT64_MAX / 1000000000LL, &v) == 0)
    {
      *out = v * 1000000000LL;
      return 0;
    }
  if (parse_duration_ns (text, &v) == 0)
    {
      *out = now_ns - v;
      return 0;
    }
  return husk_error_make (err, 0, "--since `%s`: expected RFC 3339, unix seconds or a duration", text);
}

bool
containers_log_parse_record (const char *line, size_t len, struct containers_log_record *rec)
{
  const char *p;

  if (containers_log_parse_time (line, &rec->ns, &p) < 0 || *p != ' ')
    return false;
  rec->stamp = line;
  p++;
  if (strncmp (p, "stdout ", 7) == 0)
    rec->is_stderr = false;
  else if (strncmp (p, "stderr ", 7) == 0)
    rec->is_stderr = true;
  else
    return false;
  p += 7;
  if ((*p != 'F' && *p != 'P') || p[1] != ' ')
    return false;
  rec->full = *p == 'F';
  p += 2;
  rec->text = p;
  rec->len = len - (size_t) (p - line);
  return true;
}
