/* CRI's lean cgroup sample against the runtime's full one: on the same v2
 * files, every field the stats RPCs report is the same. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cri/cgroup_sample.h"
#include "husk/cleanup.h"
#include "husk/util.h"

static void
put (const char *dir, const char *name, const char *text)
{
  cleanup_free char *path = xasprintf ("%s/%s", dir, name);
  struct husk_error *err = NULL;

  if (husk_write_file_replace (path, text, strlen (text), 0600, &err) < 0)
    fail_msg ("%s", err->msg);
}

static void
expect_same (const struct husk_cgroup_stats *lean, const struct husk_cgroup_stats *full)
{
  assert_int_equal (lean->has_memory, full->has_memory);
  assert_int_equal (lean->has_swap, full->has_swap);
  assert_int_equal (lean->memory.usage, full->memory.usage);
  assert_int_equal (lean->memory.limit, full->memory.limit);
  assert_int_equal (lean->memory.swap_usage, full->memory.swap_usage);
  assert_int_equal (lean->memory.swap_limit, full->memory.swap_limit);
  assert_int_equal (lean->memory.working_set, full->memory.working_set);
  assert_int_equal (lean->memory.anon, full->memory.anon);
  assert_int_equal (lean->memory.file, full->memory.file);
  assert_int_equal (lean->memory.inactive_file, full->memory.inactive_file);
  assert_int_equal (lean->memory.page_faults, full->memory.page_faults);
  assert_int_equal (lean->memory.major_page_faults, full->memory.major_page_faults);
  assert_int_equal (lean->has_cpu, full->has_cpu);
  assert_int_equal (lean->cpu.usage_usec, full->cpu.usage_usec);
  assert_int_equal (lean->has_pids, full->has_pids);
  assert_int_equal (lean->pids.current, full->pids.current);
}

static void
test_v2_same_as_full (void **state)
{
  char dir[] = "/tmp/test_cri_cgroup_sample.XXXXXX";
  struct husk_cgroup_stats lean, full;
  struct husk_error *err = NULL;

  (void) state;
  assert_non_null (mkdtemp (dir));
  put (dir, "memory.current", "10485760\n");
  put (dir, "memory.max", "max\n");
  put (dir, "memory.swap.current", "4096\n");
  put (dir, "memory.swap.max", "1048576\n");
  put (dir, "memory.stat",
       "anon 6291456\nfile 3145728\nkernel 12\ninactive_file 2097152\nactive_file 1048576\n"
       "pgfault 1234\npgmajfault 5\n");
  put (dir, "cpu.stat", "usage_usec 987654\nuser_usec 600000\nsystem_usec 387654\nnr_periods 0\n");
  put (dir, "pids.current", "3\n");
  put (dir, "pids.max", "max\n");
  assert_int_equal (cri_cgroup_sample (dir, &lean, &err), 0);
  assert_int_equal (husk_cgroup_stats_read (dir, &full, &err), 0);
  expect_same (&lean, &full);
  assert_int_equal (lean.memory.working_set, 10485760 - 2097152);
  assert_int_equal (lean.memory.limit, HUSK_CGROUP_UNLIMITED);
  assert_int_equal (lean.cpu.usage_usec, 987654);
  assert_int_equal (lean.pids.current, 3);
  assert_true (lean.timestamp_ns > 0);
  husk_cgroup_stats_clear (&full);
  /* No memory files: no memory, as the full reader says. */
  {
    cleanup_free char *current = xasprintf ("%s/memory.current", dir);
    assert_int_equal (unlink (current), 0);
  }
  assert_int_equal (cri_cgroup_sample (dir, &lean, &err), 0);
  assert_int_equal (husk_cgroup_stats_read (dir, &full, &err), 0);
  expect_same (&lean, &full);
  assert_false (lean.has_memory);
  husk_cgroup_stats_clear (&full);
  assert_int_equal (husk_rm_rf (dir, &err), 0);
  /* Gone: an error naming it. */
  assert_int_equal (cri_cgroup_sample (dir, &lean, &err), -1);
  assert_int_equal (err->errnum, ENOENT);
  assert_non_null (strstr (err->msg, dir));
  husk_error_free (&err);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_v2_same_as_full),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
