/* The cgroup reader's field mask and kept files (husk/cgroup_stats.h), on
 * plain files laid out as a v2 and as a v1 cgroup: the usage-only sample
 * has every field the CRI stats RPCs report as the full one has it, reads
 * fewer files, and a reader that keeps its files open sees new values. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "husk/cgroup_stats.h"
#include "husk/cleanup.h"
#include "husk/util.h"

/* Written in place (as cgroupfs changes under an open file), not renamed. */
static void
put (const char *dir, const char *name, const char *text)
{
  cleanup_free char *path = xasprintf ("%s/%s", dir, name);
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

  assert_true (fd >= 0);
  assert_int_equal (write (fd, text, strlen (text)), (ssize_t) strlen (text));
  close (fd);
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

/* Usage-only and full samples of DIR (read as V1 or v2) agree; the
 * usage-only one left the detail fields out. */
static void
compare (const char *dir, bool v1, struct husk_cgroup_stats *lean)
{
  struct husk_cgroup_reader *lean_reader
      = husk_cgroup_reader_new_flat (dir, v1, HUSK_CGROUP_STATS_USAGE, false);
  struct husk_cgroup_reader *full_reader
      = husk_cgroup_reader_new_flat (dir, v1, HUSK_CGROUP_STATS_ALL, false);
  struct husk_cgroup_stats full;
  struct husk_error *err = NULL;

  assert_int_equal (husk_cgroup_reader_sample (lean_reader, lean, &err), 0);
  assert_int_equal (husk_cgroup_reader_sample (full_reader, &full, &err), 0);
  expect_same (lean, &full);
  assert_true (lean->timestamp_ns > 0);
  if (full.has_memory)
    {
      assert_int_not_equal (full.memory.peak, 0);
      assert_int_equal (lean->memory.peak, 0);
    }
  assert_int_equal (lean->n_io, 0);
  assert_int_equal (lean->pids.limit, HUSK_CGROUP_UNLIMITED);
  assert_int_equal (full.pids.limit, 64);
  husk_cgroup_stats_clear (&full);
  husk_cgroup_reader_free (lean_reader);
  husk_cgroup_reader_free (full_reader);
}

/* A kept reader of DIR sees memory usage FILE change in place, holding
 * N_OPEN descriptors. */
static void
kept_reader (const char *dir, bool v1, const char *file, size_t n_open)
{
  struct husk_cgroup_reader *reader = husk_cgroup_reader_new_flat (dir, v1, HUSK_CGROUP_STATS_USAGE, true);
  struct husk_cgroup_stats a, b;
  struct husk_error *err = NULL;

  assert_int_equal (husk_cgroup_reader_sample (reader, &a, &err), 0);
  assert_int_equal (husk_cgroup_reader_open_files (reader), n_open);
  put (dir, file, "20971520\n");
  assert_int_equal (husk_cgroup_reader_sample (reader, &b, &err), 0);
  assert_int_equal (husk_cgroup_reader_open_files (reader), n_open);
  assert_int_equal (b.memory.usage, 20971520);
  assert_int_equal (b.memory.working_set, 20971520 - 2097152);
  assert_int_equal (b.cpu.usage_usec, a.cpu.usage_usec);
  assert_int_equal (b.pids.current, 3);
  put (dir, file, "10485760\n");
  husk_cgroup_reader_free (reader);
}

static void
test_v2 (void **state)
{
  char dir[] = "/tmp/test_cgroup_stats_fields.XXXXXX";
  struct husk_cgroup_stats lean;
  struct husk_error *err = NULL;

  (void) state;
  assert_non_null (mkdtemp (dir));
  put (dir, "memory.current", "10485760\n");
  put (dir, "memory.max", "max\n");
  put (dir, "memory.peak", "11485760\n");
  put (dir, "memory.swap.current", "4096\n");
  put (dir, "memory.swap.max", "1048576\n");
  put (dir, "memory.events", "low 0\nhigh 0\nmax 2\noom 1\noom_kill 1\n");
  put (dir, "memory.stat",
       "anon 6291456\nfile 3145728\nkernel 12\ninactive_file 2097152\nactive_file 1048576\n"
       "pgfault 1234\npgmajfault 5\n");
  put (dir, "cpu.stat", "usage_usec 987654\nuser_usec 600000\nsystem_usec 387654\nnr_periods 0\n");
  put (dir, "pids.current", "3\n");
  put (dir, "pids.max", "64\n");
  put (dir, "io.stat", "8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0\n");
  compare (dir, false, &lean);
  assert_int_equal (lean.memory.working_set, 10485760 - 2097152);
  assert_int_equal (lean.memory.limit, HUSK_CGROUP_UNLIMITED);
  assert_int_equal (lean.memory.swap_limit, 1048576);
  assert_int_equal (lean.cpu.usage_usec, 987654);
  assert_int_equal (lean.pids.current, 3);
  assert_int_equal (lean.memory.events_oom, 0);
  /* memory.current, .max, .swap.current, .swap.max, .stat, cpu.stat,
   * pids.current */
  kept_reader (dir, false, "memory.current", 7);
  /* No memory files: no memory, either way. */
  {
    cleanup_free char *current = xasprintf ("%s/memory.current", dir);
    assert_int_equal (unlink (current), 0);
  }
  compare (dir, false, &lean);
  assert_false (lean.has_memory);
  assert_int_equal (husk_rm_rf (dir, &err), 0);
  /* Gone: an error naming it. */
  assert_int_equal (husk_cgroup_stats_read_fields (dir, HUSK_CGROUP_STATS_USAGE, &lean, &err), -1);
  assert_int_equal (err->errnum, ENOENT);
  assert_non_null (strstr (err->msg, dir));
  husk_error_free (&err);
}

static void
test_v1 (void **state)
{
  char dir[] = "/tmp/test_cgroup_stats_fields.XXXXXX";
  struct husk_cgroup_stats lean;
  struct husk_error *err = NULL;

  (void) state;
  assert_non_null (mkdtemp (dir));
  put (dir, "memory.usage_in_bytes", "10485760\n");
  put (dir, "memory.limit_in_bytes", "9223372036854771712\n");
  put (dir, "memory.max_usage_in_bytes", "11485760\n");
  put (dir, "memory.memsw.usage_in_bytes", "10489856\n");
  put (dir, "memory.memsw.limit_in_bytes", "9223372036854771712\n");
  put (dir, "memory.failcnt", "2\n");
  put (dir, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
  put (dir, "memory.stat",
       "cache 1\nrss 2\ntotal_cache 3145728\ntotal_rss 6291456\ntotal_inactive_file 2097152\n"
       "total_active_file 1048576\ntotal_pgfault 1234\ntotal_pgmajfault 5\n");
  put (dir, "cpuacct.usage", "987654000\n");
  put (dir, "cpuacct.stat", "user 60\nsystem 38\n");
  put (dir, "cpu.shares", "1024\n");
  put (dir, "pids.current", "3\n");
  put (dir, "pids.max", "64\n");
  put (dir, "blkio.throttle.io_service_bytes_recursive", "8:0 Read 10\n8:0 Write 20\n");
  compare (dir, true, &lean);
  assert_true (lean.has_swap);
  assert_int_equal (lean.memory.swap_usage, 4096);
  assert_int_equal (lean.memory.limit, HUSK_CGROUP_UNLIMITED);
  assert_int_equal (lean.memory.swap_limit, HUSK_CGROUP_UNLIMITED);
  assert_int_equal (lean.memory.anon, 6291456);
  assert_int_equal (lean.memory.working_set, 10485760 - 2097152);
  assert_int_equal (lean.cpu.usage_usec, 987654);
  assert_int_equal (lean.cpu.user_usec, 0);
  assert_int_equal (lean.memory.events_max, 0);
  /* usage, limit, memsw usage and limit, stat, cpuacct.usage, pids.current */
  kept_reader (dir, true, "memory.usage_in_bytes", 7);
  /* Without memsw (no swap accounting): no swap, one file fewer. */
  {
    cleanup_free char *memsw = xasprintf ("%s/memory.memsw.usage_in_bytes", dir);
    cleanup_free char *memsw_limit = xasprintf ("%s/memory.memsw.limit_in_bytes", dir);
    assert_int_equal (unlink (memsw), 0);
    assert_int_equal (unlink (memsw_limit), 0);
  }
  compare (dir, true, &lean);
  assert_false (lean.has_swap);
  kept_reader (dir, true, "memory.usage_in_bytes", 5);
  assert_int_equal (husk_rm_rf (dir, &err), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_v2),
    cmocka_unit_test (test_v1),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
