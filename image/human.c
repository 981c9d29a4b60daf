/* Sizes, ages and names as podman prints them in its tables. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "husk/util.h"
#include "image/human.h"

void
human_size (uint64_t bytes, char *buf, size_t size)
{
  static const char *const units[] = { "B", "kB", "MB", "GB", "TB", "PB" };
  double value = (double) bytes;
  size_t unit = 0;

  while (value >= 999.5 && unit + 1 < sizeof units / sizeof units[0])
    {
      value /= 1000;
      unit++;
    }
  snprintf (buf, size, "%.3g %s", value, units[unit]);
}

static void
plural (char *buf, size_t size, long long n, const char *unit)
{
  snprintf (buf, size, "%lld %s%s ago", n, unit, n == 1 ? "" : "s");
}

void
human_ago (long long seconds, char *buf, size_t size)
{
  const long long minute = 60, hour = 60 * minute, day = 24 * hour;

  if (seconds < 1)
    snprintf (buf, size, "Less than a second ago");
  else if (seconds < minute)
    plural (buf, size, seconds, "second");
  else if (seconds < 2 * minute)
    snprintf (buf, size, "About a minute ago");
  else if (seconds < hour)
    plural (buf, size, seconds / minute, "minute");
  else if (seconds < 2 * hour)
    snprintf (buf, size, "About an hour ago");
  else if (seconds < 2 * day)
    plural (buf, size, seconds / hour, "hour");
  else if (seconds < 14 * day)
    plural (buf, size, seconds / day, "day");
  else if (seconds < 60 * day)
    plural (buf, size, seconds / (7 * day), "week");
  else if (seconds < 730 * day)
    plural (buf, size, seconds / (30 * day), "month");
  else
    plural (buf, size, seconds / (365 * day), "year");
}

int
parse_rfc3339 (const char *text, long long *out)
{
  struct tm tm = { 0 };
  const char *rest = text ? strptime (text, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
  long long offset = 0;

  if (rest == NULL)
    return -1;
  if (*rest == '.')
    for (rest++; *rest >= '0' && *rest <= '9'; rest++)
      ;
  if ((*rest == '+' || *rest == '-') && strlen (rest) == 6 && rest[3] == ':')
    {
      offset = ((rest[1] - '0') * 10 + (rest[2] - '0')) * 3600LL
               + ((rest[4] - '0') * 10 + (rest[5] - '0')) * 60LL;
      if (*rest == '-')
        offset = -offset;
    }
  else if (strcmp (rest, "Z") != 0 && strcmp (rest, "z") != 0)
    return -1;
  *out = (long long) timegm (&tm) - offset;
  return 0;
}

void
split_repo_tag (const char *name, char **repository, char **tag)
{
  const char *slash = strrchr (name, '/');
  const char *at = strchr (name, '@');
  const char *colon = strrchr (slash ? slash : name, ':');

  if (at)
    {
      *repository = strndup (name, (size_t) (at - name));
      *tag = xstrdup ("<none>");
    }
  else if (colon)
    {
      *repository = strndup (name, (size_t) (colon - name));
      *tag = xstrdup (colon + 1);
    }
  else
    {
      *repository = xstrdup (name);
      *tag = xstrdup ("<none>");
    }
}
