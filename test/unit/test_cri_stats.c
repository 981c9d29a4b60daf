/* Unit tests for cri_stats: cgroup samples as CRI CpuUsage/MemoryUsage/
 * SwapUsage (working set and available bytes), the CPU rate from two
 * samples and its cache, /proc/net/dev parsing and the NetworkUsage made
 * from it, and the writable-layer walk on a temp dir.  Needs no root. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

/* Built with -I$(BUILD)/gen -Ulinux (fields named `linux`). */
#include "cri/proto/api.pb-c.h"

#include "cri/stats/cri_stats.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define GIB (1024ull * 1024 * 1024)
#define MIB (1024ull * 1024)

/* ------------------------------------------------------------------ */
/* cgroup sample -> CRI                                                 */

static struct husk_cgroup_stats
sample_with_memory (uint64_t usage, uint64_t inactive_file, uint64_t limit)
{
  struct husk_cgroup_stats s = { .timestamp_ns = 42, .has_memory = true };

  s.memory.usage = usage;
  s.memory.inactive_file = inactive_file;
  s.memory.working_set = usage > inactive_file ? usage - inactive_file : 0;
  s.memory.limit = limit;
  s.memory.swap_limit = HUSK_CGROUP_UNLIMITED;
  s.memory.anon = 3 * MIB;
  s.memory.page_faults = 100;
  s.memory.major_page_faults = 7;
  return s;
}

static void
test_memory_available (void **state)
{
  struct cri_arena arena = { 0 };
  struct husk_cgroup_stats s = sample_with_memory (300 * MIB, 100 * MIB, GIB);
  Runtime__V1__MemoryUsage *mem = cri_stats_memory (&arena, &s);

  assert_non_null (mem);
  assert_int_equal (mem->timestamp, 42);
  assert_int_equal (mem->working_set_bytes->value, 200 * MIB);
  assert_int_equal (mem->usage_bytes->value, 300 * MIB);
  assert_non_null (mem->available_bytes);
  assert_int_equal (mem->available_bytes->value, GIB - 200 * MIB);
  assert_int_equal (mem->rss_bytes->value, 3 * MIB);
  assert_int_equal (mem->page_faults->value, 100);
  assert_int_equal (mem->major_page_faults->value, 7);
  cri_arena_clear (&arena);
}

static void
test_memory_no_limit_or_over (void **state)
{
  struct cri_arena arena = { 0 };
  struct husk_cgroup_stats unlimited = sample_with_memory (300 * MIB, 0, HUSK_CGROUP_UNLIMITED);
  struct husk_cgroup_stats over = sample_with_memory (300 * MIB, 0, 200 * MIB);
  struct husk_cgroup_stats none = { .timestamp_ns = 1, .has_cpu = true };

  assert_null (cri_stats_memory (&arena, &unlimited)->available_bytes);
  assert_int_equal (cri_stats_memory (&arena, &over)->available_bytes->value, 0);
  /* No memory controller: no message, not zeros. */
  assert_null (cri_stats_memory (&arena, &none));
  assert_null (cri_stats_swap (&arena, &none));
  cri_arena_clear (&arena);
}

static void
test_swap (void **state)
{
  struct cri_arena arena = { 0 };
  struct husk_cgroup_stats s = sample_with_memory (MIB, 0, HUSK_CGROUP_UNLIMITED);
  Runtime__V1__SwapUsage *swap;

  s.memory.swap_usage = 10 * MIB;
  swap = cri_stats_swap (&arena, &s);
  assert_int_equal (swap->swap_usage_bytes->value, 10 * MIB);
  assert_null (swap->swap_available_bytes);
  s.memory.swap_limit = 64 * MIB;
  swap = cri_stats_swap (&arena, &s);
  assert_int_equal (swap->swap_available_bytes->value, 54 * MIB);
  cri_arena_clear (&arena);
}

static void
test_cpu (void **state)
{
  struct cri_arena arena = { 0 };
  struct husk_cgroup_stats s = { .timestamp_ns = 5, .has_cpu = true };
  struct husk_cgroup_stats none = { .timestamp_ns = 5 };
  uint64_t rate = 250000000;
  Runtime__V1__CpuUsage *cpu;

  s.cpu.usage_usec = 1500;
  cpu = cri_stats_cpu (&arena, &s, NULL);
  assert_int_equal (cpu->timestamp, 5);
  assert_int_equal (cpu->usage_core_nano_seconds->value, 1500000);
  assert_null (cpu->usage_nano_cores);
  cpu = cri_stats_cpu (&arena, &s, &rate);
  assert_int_equal (cpu->usage_nano_cores->value, 250000000);
  assert_null (cri_stats_cpu (&arena, &none, NULL));
  cri_arena_clear (&arena);
}

static void
test_sum (void **state)
{
  struct husk_cgroup_stats sum = { 0 };
  struct husk_cgroup_stats a = sample_with_memory (100 * MIB, 10 * MIB, GIB);
  struct husk_cgroup_stats b = sample_with_memory (50 * MIB, 0, 512 * MIB);
  struct husk_cgroup_stats c = sample_with_memory (1 * MIB, 0, HUSK_CGROUP_UNLIMITED);

  a.has_cpu = b.has_cpu = true;
  a.cpu.usage_usec = 10;
  b.cpu.usage_usec = 32;
  b.timestamp_ns = 99;
  cri_stats_add (&sum, &a);
  cri_stats_add (&sum, &b);
  assert_true (sum.has_cpu && sum.has_memory);
  assert_int_equal (sum.cpu.usage_usec, 42);
  assert_int_equal (sum.timestamp_ns, 99);
  assert_int_equal (sum.memory.usage, 150 * MIB);
  assert_int_equal (sum.memory.working_set, 140 * MIB);
  assert_int_equal (sum.memory.limit, GIB + 512 * MIB);
  cri_stats_add (&sum, &c);
  assert_int_equal (sum.memory.limit, HUSK_CGROUP_UNLIMITED);

  /* Parts without memory leave the sum without it. */
  struct husk_cgroup_stats cpu_only_sum = { 0 }, cpu_only = { .timestamp_ns = 3, .has_cpu = true };
  cri_stats_add (&cpu_only_sum, &cpu_only);
  assert_false (cpu_only_sum.has_memory);
}

/* ------------------------------------------------------------------ */
/* cpu rate                                                             */

static void
test_nano_cores (void **state)
{
  uint64_t rate = 0;

  /* Half a CPU: 0.5 s of CPU in 1 s. */
  assert_true (cri_stats_nano_cores (1000000000, 10000000000, 1500000000, 11000000000, &rate));
  assert_int_equal (rate, 500000000);
  /* Two CPUs busy over 100 s: the product overflows 64 bits. */
  assert_true (cri_stats_nano_cores (0, 0, 200000000000ull, 100000000000ull, &rate));
  assert_int_equal (rate, 2000000000);
  assert_false (cri_stats_nano_cores (5, 10, 6, 10, &rate));   /* no interval */
  assert_false (cri_stats_nano_cores (5, 10, 6, 9, &rate));    /* older */
  assert_false (cri_stats_nano_cores (50, 10, 40, 20, &rate)); /* counter went back */
}

static void
test_cpu_cache (void **state)
{
  struct cri_cpu_cache cache = CRI_CPU_CACHE_INIT (2);
  uint64_t rate = 0;
  char *live[] = { "b" };

  assert_false (cri_cpu_cache_rate (&cache, 'c', "a", 1000, 1000000000, &rate));
  assert_true (cri_cpu_cache_rate (&cache, 'c', "a", 251000, 1001000000, &rate));
  assert_int_equal (rate, 250000000);
  /* Not newer than the recorded sample: no rate, the record stays. */
  assert_false (cri_cpu_cache_rate (&cache, 'c', "a", 999999, 1001000000, &rate));
  assert_true (cri_cpu_cache_rate (&cache, 'c', "a", 1251000, 1002000000, &rate));
  assert_int_equal (rate, 1000000000);
  /* A pod with the same id is another sample. */
  assert_false (cri_cpu_cache_rate (&cache, 'p', "a", 1, 2000000000, &rate));
  assert_int_equal (cache.n, 2);
  /* Bounded: a third sample pushes out the oldest (container a). */
  assert_false (cri_cpu_cache_rate (&cache, 'c', "b", 1, 3000000000, &rate));
  assert_int_equal (cache.n, 2);
  assert_int_equal (cache.samples[0].kind == 'p' ? cache.samples[1].kind : cache.samples[0].kind, 'c');
  /* Prune drops the containers not listed and keeps the pods. */
  cri_cpu_cache_prune (&cache, 'c', live, 1);
  assert_int_equal (cache.n, 2);
  cri_cpu_cache_prune (&cache, 'c', NULL, 0);
  assert_int_equal (cache.n, 1);
  assert_int_equal (cache.samples[0].kind, 'p');
  cri_cpu_cache_clear (&cache);
  assert_int_equal (cache.n, 0);
}

/* ------------------------------------------------------------------ */
/* /proc/net/dev                                                        */

static const char net_dev[] = "Inter-|   Receive                                                |  Transmit\n"
                              " face |bytes    packets errs drop fifo frame compressed multicast|bytes    "
                              "packets errs drop fifo colls "
                              "carrier compressed\n"
                              "    lo:     560       8    0    0    0     0          0         0      560    "
                              "   8    0    0    0     0    "
                              "   0          0\n"
                              "  eth0:    9746      95    2    0    0     0          0         0     1852    "
                              "  21    3    0    0     0    "
                              "   0          0\n"
                              "net1:12345678901 1 0 0 0 0 0 0 42 1 0 0 0 0 0 0\n";

static void
test_parse_net_dev (void **state)
{
  cleanup_free struct cri_net_dev *devs = NULL;
  struct husk_error *err = NULL;
  size_t n = 0;

  assert_int_equal (cri_stats_parse_net_dev (net_dev, &devs, &n, &err), 0);
  assert_int_equal (n, 3);
  assert_string_equal (devs[0].name, "lo");
  assert_string_equal (devs[1].name, "eth0");
  assert_int_equal (devs[1].rx_bytes, 9746);
  assert_int_equal (devs[1].rx_errors, 2);
  assert_int_equal (devs[1].tx_bytes, 1852);
  assert_int_equal (devs[1].tx_errors, 3);
  /* A counter wide enough to touch the colon. */
  assert_string_equal (devs[2].name, "net1");
  assert_int_equal (devs[2].rx_bytes, 12345678901ull);
  assert_int_equal (devs[2].tx_bytes, 42);
}

static void
test_parse_net_dev_bad (void **state)
{
  static const char *const bad[] = {
    "h1\nh2\n  eth0 9746 95\n",    /* no colon */
    "h1\nh2\n  eth0: 1 2 3 4 5\n", /* too few counters */
    "h1\nh2\n   : 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n",
  };

  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      struct cri_net_dev *devs = NULL;
      struct husk_error *err = NULL;
      size_t n = 0;

      assert_int_equal (cri_stats_parse_net_dev (bad[i], &devs, &n, &err), -1);
      assert_int_equal (err->errnum, EINVAL);
      assert_non_null (strstr (err->msg, "/proc/net/dev"));
      assert_null (devs);
      husk_error_free (&err);
    }
}

static void
test_network_usage (void **state)
{
  cleanup_free struct cri_net_dev *devs = NULL;
  struct husk_error *err = NULL;
  struct cri_arena arena = { 0 };
  Runtime__V1__NetworkUsage *net;
  size_t n = 0;

  assert_int_equal (cri_stats_parse_net_dev (net_dev, &devs, &n, &err), 0);
  net = cri_stats_network (&arena, devs, n, 77);
  assert_int_equal (net->timestamp, 77);
  assert_non_null (net->default_interface);
  assert_string_equal (net->default_interface->name, "eth0");
  assert_int_equal (net->default_interface->rx_bytes->value, 9746);
  assert_int_equal (net->default_interface->tx_errors->value, 3);
  /* lo is left out, the rest is listed. */
  assert_int_equal (net->n_interfaces, 1);
  assert_string_equal (net->interfaces[0]->name, "net1");
  /* Packs as a valid message. */
  assert_true (protobuf_c_message_get_packed_size (&net->base) > 0);
  cri_arena_clear (&arena);

  net = cri_stats_network (&arena, devs, 1, 77); /* only lo */
  assert_null (net->default_interface);
  assert_int_equal (net->n_interfaces, 0);
  cri_arena_clear (&arena);
}

/* ------------------------------------------------------------------ */
/* writable layer                                                       */

static void
write_bytes (const char *path, size_t size)
{
  cleanup_free char *data = xmalloc (size);
  struct husk_error *err = NULL;

  memset (data, 'x', size);
  assert_int_equal (husk_write_file_atomic (path, data, size, 0644, &err), 0);
}

static int
tmpdir_setup (void **state)
{
  char *dir = xstrdup ("/tmp/husk-test-cri-stats.XXXXXX");

  if (mkdtemp (dir) == NULL)
    return -1;
  *state = dir;
  return 0;
}

static int
tmpdir_teardown (void **state)
{
  struct husk_error *err = NULL;

  husk_rm_rf (*state, &err);
  husk_error_free (&err);
  free (*state);
  return 0;
}

static uint64_t
blocks_of (const char *path)
{
  struct stat st;

  assert_int_equal (lstat (path, &st), 0);
  return (uint64_t) st.st_blocks * 512;
}

static void
test_dir_usage (void **state)
{
  const char *dir = *state;
  cleanup_free char *sub = xasprintf ("%s/sub", dir);
  cleanup_free char *big = xasprintf ("%s/sub/big", dir);
  cleanup_free char *small = xasprintf ("%s/small", dir);
  cleanup_free char *hard_link = xasprintf ("%s/hard", dir);
  cleanup_free char *sym = xasprintf ("%s/sym", dir);
  struct cri_dir_usage usage = { 0 };
  struct husk_error *err = NULL;
  uint64_t expected;

  assert_int_equal (cri_stats_dir_usage (dir, &usage, &err), 0);
  assert_int_equal (usage.inodes, 1);
  assert_int_equal (usage.bytes, blocks_of (dir));

  assert_int_equal (mkdir (sub, 0755), 0);
  write_bytes (big, 1024 * 1024);
  write_bytes (small, 10);
  assert_int_equal (link (big, hard_link), 0);
  assert_int_equal (symlink ("/etc", sym), 0);
  assert_int_equal (cri_stats_dir_usage (dir, &usage, &err), 0);
  /* dir, sub, big (its hard link counted once), small, sym, not /etc. */
  assert_int_equal (usage.inodes, 5);
  expected = blocks_of (dir) + blocks_of (sub) + blocks_of (big) + blocks_of (small) + blocks_of (sym);
  assert_int_equal (usage.bytes, expected);
  assert_true (usage.bytes >= 1024 * 1024);
}

static void
test_dir_usage_missing (void **state)
{
  cleanup_free char *missing = xasprintf ("%s/nope", (char *) *state);
  struct cri_dir_usage usage = { 0 };
  struct husk_error *err = NULL;

  assert_int_equal (cri_stats_dir_usage (missing, &usage, &err), -1);
  assert_int_equal (err->errnum, ENOENT);
  assert_non_null (strstr (err->msg, missing));
  husk_error_free (&err);
}

/* ------------------------------------------------------------------ */
/* memory without a memory controller                                   */

static void
test_memory_from_pids (void **state)
{
  const char *proc = *state;
  cleanup_free char *dir1 = xasprintf ("%s/10", proc);
  cleanup_free char *dir2 = xasprintf ("%s/20", proc);
  cleanup_free char *statm1 = xasprintf ("%s/statm", dir1);
  cleanup_free char *statm2 = xasprintf ("%s/statm", dir2);
  const pid_t pids[] = { 10, 20, 30 }; /* 30 is gone */
  uint64_t page = (uint64_t) sysconf (_SC_PAGESIZE);
  struct husk_cgroup_stats s = { .timestamp_ns = 5 };
  struct cri_arena arena = { 0 };
  Runtime__V1__MemoryUsage *mem;
  struct husk_error *err = NULL;

  assert_int_equal (mkdir (dir1, 0755), 0);
  assert_int_equal (mkdir (dir2, 0755), 0);
  assert_int_equal (husk_write_file_atomic (statm1, "900 100 50 1 0 80 0\n", 20, 0644, &err), 0);
  assert_int_equal (husk_write_file_atomic (statm2, "400 25 5 1 0 20 0\n", 19, 0644, &err), 0);
  cri_stats_memory_from_pids (&s, proc, pids, 3);
  mem = cri_stats_memory (&arena, &s);
  assert_non_null (mem);
  assert_int_equal (mem->timestamp, 5);
  assert_int_equal (mem->working_set_bytes->value, 125 * page);
  assert_int_equal (mem->usage_bytes->value, 125 * page);
  assert_int_equal (mem->rss_bytes->value, 125 * page);
  assert_null (mem->available_bytes); /* no limit */
  cri_arena_clear (&arena);
  /* No process at all: still a MemoryUsage, of zero. */
  memset (&s, 0, sizeof s);
  cri_stats_memory_from_pids (&s, proc, NULL, 0);
  assert_true (s.has_memory);
  assert_int_equal (s.memory.working_set, 0);
}

/* Thousands of small blocks carved from chunks, and big ones of their
 * own: each zeroed, aligned for any type, none overlapping another. */
static void
test_arena (void **state)
{
  struct cri_arena arena = { 0 };
  const size_t align = _Alignof(max_align_t);
  unsigned char *blocks[3000];
  size_t sizes[3000];

  (void) state;
  for (size_t i = 0; i < 3000; i++)
    {
      sizes[i] = i % 97 == 0 ? 9000 + i : i % 61;
      blocks[i] = cri_arena_alloc (&arena, sizes[i]);
      assert_non_null (blocks[i]);
      assert_true ((uintptr_t) blocks[i] % align == 0);
      for (size_t k = 0; k < sizes[i]; k++)
        assert_int_equal (blocks[i][k], 0);
      memset (blocks[i], (int) (i & 0xff) | 1, sizes[i]);
    }
  for (size_t i = 0; i < 3000; i++)
    for (size_t k = 0; k < sizes[i]; k++)
      assert_int_equal (blocks[i][k], (i & 0xff) | 1);
  /* Chunks, not a block each. */
  assert_true (arena.n < 3000 / 4);
  assert_non_null (cri_arena_adopt (&arena, xstrdup ("adopted")));
  cri_arena_clear (&arena);
  assert_int_equal (arena.n, 0);
  assert_null (arena.chunk);
  assert_non_null (cri_arena_alloc (&arena, 0));
  cri_arena_clear (&arena);
}

static void *
background (void *arg)
{
  int *nice = arg;

  cri_stats_background_thread ();
  errno = 0;
  *nice = getpriority (PRIO_PROCESS, (id_t) gettid ());
  return NULL;
}

/* The samplers' threads run behind everything else; the caller's nice
 * value stays. */
static void
test_background_thread (void **state)
{
  int before = getpriority (PRIO_PROCESS, 0), nice = -100;
  pthread_t thread;

  (void) state;
  assert_int_equal (pthread_create (&thread, NULL, background, &nice), 0);
  pthread_join (thread, NULL);
  assert_int_equal (nice, before < CRI_STATS_BACKGROUND_NICE ? CRI_STATS_BACKGROUND_NICE : before);
  assert_int_equal (getpriority (PRIO_PROCESS, 0), before);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_arena),
    cmocka_unit_test (test_background_thread),
    cmocka_unit_test (test_memory_available),
    cmocka_unit_test (test_memory_no_limit_or_over),
    cmocka_unit_test (test_swap),
    cmocka_unit_test (test_cpu),
    cmocka_unit_test (test_sum),
    cmocka_unit_test (test_nano_cores),
    cmocka_unit_test (test_cpu_cache),
    cmocka_unit_test (test_parse_net_dev),
    cmocka_unit_test (test_parse_net_dev_bad),
    cmocka_unit_test (test_network_usage),
    cmocka_unit_test_setup_teardown (test_dir_usage, tmpdir_setup, tmpdir_teardown),
    cmocka_unit_test_setup_teardown (test_dir_usage_missing, tmpdir_setup, tmpdir_teardown),
    cmocka_unit_test_setup_teardown (test_memory_from_pids, tmpdir_setup, tmpdir_teardown),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
