/* The plan's floor (cgroup_plan.h): adding a write, reading and probing a
 * file in the step's directory, a field's error.  Shared by the v2 steps
 * (cgroup_resources.c) and the v1 steps (cgroup_resources_v1.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/cgroup/cgroup_plan.h"

int
cgroup_field_error (struct husk_error **err, const char *where, const char *field, const char *fmt, ...)
{
  cleanup_free char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  if (vasprintf (&msg, fmt, ap) < 0)
    msg = NULL;
  va_end (ap);
  return husk_error_make (err, 0, "%s.%s: %s", where, field, msg ? msg : "invalid");
}

void
cgroup_plan_add (struct cgroup_plan *plan, const char *field, const char *file, bool keyed, const char *fmt,
                 ...)
{
  struct cgroup_write *w;
  va_list ap;
  const char *dot = strchr (file, '.');

  if (plan->n == plan->cap)
    plan->writes
        = xrealloc (plan->writes, (plan->cap = plan->cap ? plan->cap * 2 : 16) * sizeof *plan->writes);
  w = &plan->writes[plan->n++];
  memset (w, 0, sizeof *w);
  w->dir = plan->dir ? xstrdup (plan->dir) : NULL;
  w->file = xstrdup (file);
  w->field = xasprintf ("%s.%s", plan->where, field);
  w->keyed = keyed;
  if (dot && strncmp (file, "cgroup.", 7) != 0)
    w->controller = xasprintf ("%.*s", (int) (dot - file), file);
  va_start (ap, fmt);
  if (vasprintf (&w->value, fmt, ap) < 0)
    abort ();
  va_end (ap);
}

/* The first line of a one-value cgroup file, NULL when it is missing. */
char *
cgroup_read_value (const char *dir, const char *file)
{
  char *content = cgroup_read_file (dir, file);

  if (content)
    content[strcspn (content, "\n")] = '\0';
  return content;
}

bool
cgroup_exists_in (const char *dir, const char *file)
{
  cleanup_free char *full = NULL;

  if (dir == NULL)
    return false;
  full = xasprintf ("%s/%s", dir, file);
  return access (full, F_OK) == 0;
}

char *
cgroup_plan_read (const struct cgroup_plan *plan, const char *file)
{
  return cgroup_read_value (plan->dir, file);
}

bool
cgroup_plan_has (const struct cgroup_plan *plan, const char *file)
{
  return cgroup_exists_in (plan->dir, file);
}
