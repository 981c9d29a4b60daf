/* The plan linux.resources becomes before anything is written: one entry
 * per file write, each in the directory of the hierarchy that holds its
 * controller.  Built by the v2 steps (cgroup_resources.c) and the v1 steps
 * (cgroup_resources_v1.c); checked, written and undone in one place (cgroup_resources.c); the plan's
 * own helpers in cgroup_plan.c. */
#ifndef HUSK_RUNTIME_CGROUP_PLAN_H
#define HUSK_RUNTIME_CGROUP_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "husk/error.h"
#include "runtime/cgroup/cgroup.h"

/* One write.  KEYED files (io.max, blkio.throttle.*...) hold a line per
 * device; VALUE starts with the device. */
struct cgroup_write
{
  char *dir, *file, *value, *field;
  char *controller; /* NULL: core cgroup file */
  bool keyed;
  bool unified;    /* from linux.resources.unified: a missing file is an unknown key */
  bool no_undo;    /* write-only files (devices.allow): nothing to restore */
  char *old_value; /* for undo, read just before writing */
};

struct cgroup_plan
{
  const char *path; /* the container cgroup */
  const char *dir;  /* the current step's directory; NULL: no hierarchy has it */
  const char *where;
  struct cgroup_write *writes;
  size_t n, cap;
};

typedef int (*cgroup_plan_step) (struct cgroup_plan *plan, const struct cgroup_resources *res,
                                 struct husk_error **err);

void cgroup_plan_add (struct cgroup_plan *plan, const char *field, const char *file, bool keyed,
                      const char *fmt, ...) __attribute__ ((format (printf, 5, 6)));
/* The first line of a one-value cgroup file, NULL when it is missing; and
 * whether DIR (NULL: none) holds FILE. */
char *cgroup_read_value (const char *dir, const char *file);
bool cgroup_exists_in (const char *dir, const char *file);
/* The first line of FILE in the step's directory, NULL when missing. */
char *cgroup_plan_read (const struct cgroup_plan *plan, const char *file);
bool cgroup_plan_has (const struct cgroup_plan *plan, const char *file);
/* "WHERE.FIELD: message". */
int cgroup_field_error (struct husk_error **err, const char *where, const char *field, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));

/* The v1 steps (cgroup_resources_v1.c). */
int cgroup_plan_v1_memory (struct cgroup_plan *plan, const struct cgroup_resources *res,
                           struct husk_error **err);
int cgroup_plan_v1_cpu (struct cgroup_plan *plan, const struct cgroup_resources *res,
                        struct husk_error **err);
int cgroup_plan_v1_blkio (struct cgroup_plan *plan, const struct cgroup_resources *res,
                          struct husk_error **err);
int cgroup_plan_v1_hugetlb (struct cgroup_plan *plan, const struct cgroup_resources *res,
                            struct husk_error **err);
int cgroup_plan_v1_devices (struct cgroup_plan *plan, const struct cgroup_resources *res,
                            struct husk_error **err);

#endif
