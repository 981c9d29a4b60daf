/* Unit tests for the cgroup manager: linux.resources parsing and its
 * errors, the plan written into a (fake) cgroup directory, undo on a
 * refused write, path resolution, the device filter (compiled program run
 * by a small interpreter here, accepted by the kernel's verifier, and
 * enforced on a real cgroup of this host), the v1 files of a hybrid or v1
 * host (limits, write order, undo, devices, stats, every hierarchy),
 * freeze, kill and stats. */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "husk/cgroup_stats.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"

struct fixture
{
  char dir[64]; /* a fake cgroup: plain files in /tmp */
  char *real;   /* a real cgroup v2 directory, or NULL */
  pid_t child;  /* a process parked in REAL, killed in teardown */
};

/* Files a fake cgroup starts with, and their content. */
static const char *const fake_files[][2] = {
  { "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma\n" },
  { "cgroup.procs", "" },
  { "memory.max", "max\n" },
  { "memory.low", "0\n" },
  { "memory.swap.max", "max\n" },
  { "memory.current", "1048576\n" },
  { "memory.high", "max\n" },
  { "cpu.weight", "100\n" },
  { "cpu.max", "max 100000\n" },
  { "cpu.max.burst", "0\n" },
  { "cpu.idle", "0\n" },
  { "cpuset.cpus", "\n" },
  { "cpuset.mems", "\n" },
  { "pids.max", "max\n" },
  { "io.weight", "default 100\n" },
  { "io.max", "" },
  { "hugetlb.2MB.max", "max\n" },
  { "hugetlb.2MB.rsvd.max", "max\n" },
  { "hugetlb.1GB.max", "max\n" },
  { "rdma.max", "" },
};

static char *
fx_path (const char *dir, const char *name)
{
  return xasprintf ("%s/%s", dir, name);
}

static void
put (const char *dir, const char *name, const char *content)
{
  cleanup_free char *path = fx_path (dir, name);
  cleanup_close int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

  assert_true (fd >= 0);
  assert_int_equal (husk_write_all (fd, content, strlen (content)), 0);
}

/* A file's content without its trailing newline. */
static char *
get (const char *dir, const char *name)
{
  cleanup_free char *path = fx_path (dir, name);
  char *text = NULL;
  size_t len = 0;

  assert_int_equal (husk_read_file (path, &text, &len, NULL), 0);
  while (len > 0 && text[len - 1] == '\n')
    text[--len] = '\0';
  return text;
}

#define assert_file(dir, name, expected)                                                                     \
  do                                                                                                         \
    {                                                                                                        \
      cleanup_free char *actual_ = get (dir, name);                                                          \
      assert_string_equal (actual_, expected);                                                               \
    }                                                                                                        \
  while (0)

#define assert_error_contains(err, needle)                                                                   \
  do                                                                                                         \
    {                                                                                                        \
      assert_non_null (err);                                                                                 \
      if (strstr ((err)->msg, needle) == NULL)                                                               \
        fail_msg ("error `%s` does not contain `%s`", (err)->msg, needle);                                   \
      husk_error_free (&(err));                                                                              \
    }                                                                                                        \
  while (0)

static int
setup (void **state)
{
  struct fixture *fx = xcalloc (1, sizeof *fx);

  strcpy (fx->dir, "/tmp/husk-cgroup-XXXXXX");
  if (mkdtemp (fx->dir) == NULL)
    return -1;
  for (size_t i = 0; i < sizeof fake_files / sizeof fake_files[0]; i++)
    put (fx->dir, fake_files[i][0], fake_files[i][1]);
  *state = fx;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *fx = *state;

  if (fx->child > 0)
    {
      kill (fx->child, SIGKILL);
      waitpid (fx->child, NULL, 0);
    }
  if (fx->real)
    {
      cgroup_freeze (fx->real, false, NULL);
      cgroup_kill_all (fx->real, SIGKILL, NULL);
      cgroup_destroy (fx->real, NULL);
      free (fx->real);
    }
  husk_rm_rf (fx->dir, NULL);
  free (fx);
  return 0;
}

/* A fresh cgroup in every hierarchy of this host, for the tests that need
 * the kernel: the device rules, v1 files, freeze, kill. */
static const char *
real_cgroup (struct fixture *fx)
{
  const char *mount = cgroup_primary_mount ();
  struct husk_error *err = NULL;
  int fd;

  assert_non_null (mount);
  static int serial;

  fx->real = xasprintf ("%s/husk-unit-%d-%d", mount, (int) getpid (), ++serial);
  fd = cgroup_create (fx->real, &err);
  if (fd < 0)
    fail_msg ("%s", err->msg);
  close (fd);
  return fx->real;
}

static json_t *
parse_json (const char *text)
{
  json_error_t jerr;
  json_t *doc = json_loads (text, JSON_DECODE_ANY, &jerr);

  if (doc == NULL)
    fail_msg ("bad test JSON `%s`: %s", text, jerr.text);
  return doc;
}

static int
parse_text (const char *text, struct cgroup_resources *res, struct husk_error **err)
{
  json_t *doc = parse_json (text);
  int ret = cgroup_resources_parse (doc, "linux.resources", res, err);

  json_decref (doc);
  return ret;
}

/* Parses TEXT and writes it into DIR; returns write's result. */
static int
write_text (const char *dir, const char *text, struct husk_error **err)
{
  struct cgroup_resources res;
  int ret;

  if (parse_text (text, &res, err) < 0)
    return -2;
  ret = cgroup_resources_write (dir, &res, err);
  cgroup_resources_clear (&res);
  return ret;
}

/* ------------------------------------------------------------ parsing */

static void
test_parse_errors (void **state)
{
  static const char *const cases[][2] = {
    { "{\"memory\":{\"limit\":-2}}", "linux.resources.memory.limit: must be >= -1" },
    { "{\"memory\":{\"limit\":\"1G\"}}", "linux.resources.memory.limit: must be an integer" },
    { "{\"memory\":{\"limit\":100}}", "linux.resources.memory.limit: 100 bytes is less than one page" },
    { "{\"memory\":{\"reservation\":-5}}", "linux.resources.memory.reservation: must be >= -1" },
    { "{\"memory\":{\"checkBeforeUpdate\":1}}", "memory.checkBeforeUpdate: must be true or false" },
    { "{\"memory\":[]}", "linux.resources.memory: must be an object" },
    { "{\"cpu\":{\"shares\":1}}", "linux.resources.cpu.shares: must be between 2 and 262144" },
    { "{\"cpu\":{\"shares\":300000}}", "linux.resources.cpu.shares: must be <= 262144" },
    { "{\"cpu\":{\"quota\":10}}", "linux.resources.cpu.quota: must be -1 (no limit) or at least 1000" },
    { "{\"cpu\":{\"quota\":-7}}", "linux.resources.cpu.quota: must be >= -1" },
    { "{\"cpu\":{\"period\":10}}", "linux.resources.cpu.period: must be between 1000 and 1000000" },
    { "{\"cpu\":{\"period\":5000000}}", "linux.resources.cpu.period: must be <= 1000000" },
    { "{\"cpu\":{\"idle\":2}}", "linux.resources.cpu.idle: must be <= 1" },
    { "{\"cpu\":{\"cpus\":\"3-1\"}}", "linux.resources.cpu.cpus: `3-1` is not a list" },
    { "{\"cpu\":{\"cpus\":\"0,,1\"}}", "linux.resources.cpu.cpus: `0,,1` is not a list" },
    { "{\"cpu\":{\"mems\":\"a\"}}", "linux.resources.cpu.mems: `a` is not a list" },
    { "{\"cpu\":{\"realtimeRuntime\":-2}}", "linux.resources.cpu.realtimeRuntime: must be >= -1" },
    { "{\"memory\":{\"swappiness\":101}}", "linux.resources.memory.swappiness: must be <= 100" },
    { "{\"pids\":{\"limit\":-3}}", "linux.resources.pids.limit: must be >= -1" },
    { "{\"blockIO\":{\"weight\":5}}", "linux.resources.blockIO.weight: must be between 10 and 1000" },
    { "{\"blockIO\":{\"weight\":5000}}", "linux.resources.blockIO.weight: must be <= 1000" },
    { "{\"blockIO\":{\"throttleReadBpsDevice\":[{\"major\":8,\"rate\":1}]}}",
      "linux.resources.blockIO.throttleReadBpsDevice[0]: major and minor are required" },
    { "{\"blockIO\":{\"throttleWriteIOPSDevice\":[{\"major\":8,\"minor\":0,\"rate\":-1}]}}",
      "linux.resources.blockIO.throttleWriteIOPSDevice[0].rate: must be >= 0" },
    { "{\"hugepageLimits\":[{\"pageSize\":\"3XB\",\"limit\":1}]}",
      "linux.resources.hugepageLimits[0]: pageSize must be a size like `2MB`" },
    { "{\"hugepageLimits\":[{\"pageSize\":\"2MB\"}]}",
      "linux.resources.hugepageLimits[0]: limit is required" },
    { "{\"unified\":{\"memory\":\"1\"}}", "linux.resources.unified: unknown key `memory`" },
    { "{\"unified\":{\"../memory.max\":\"1\"}}", "linux.resources.unified: unknown key `../memory.max`" },
    { "{\"unified\":{\"cgroup.procs\":\"1\"}}", "key `cgroup.procs` manages the cgroup itself" },
    { "{\"unified\":{\"memory.high\":5}}", "linux.resources.unified.memory.high: must be a string" },
    { "{\"network\":{\"classID\":-1}}", "linux.resources.network.classID: must be >= 0" },
    { "{\"network\":{\"priorities\":[{\"name\":\"a b\",\"priority\":1}]}}",
      "linux.resources.network.priorities[0]: name must be a network interface name" },
    { "{\"devices\":[{\"allow\":true,\"type\":\"x\"}]}",
      "linux.resources.devices[0]: type must be `a`, `c` or `b`" },
    { "{\"devices\":[{\"type\":\"c\"}]}", "linux.resources.devices[0]: allow (true or false) is required" },
    { "{\"devices\":[{\"allow\":true,\"access\":\"rwx\"}]}",
      "devices[0]: access may only contain r, w and m" },
    { "{\"devices\":[{\"allow\":true,\"major\":-2}]}", "linux.resources.devices[0].major: must be >= -1" },
  };

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      struct cgroup_resources res;
      struct husk_error *err = NULL;

      if (parse_text (cases[i][0], &res, &err) == 0)
        fail_msg ("`%s` was accepted", cases[i][0]);
      assert_error_contains (err, cases[i][1]);
    }
}

static void
test_parse_values (void **state)
{
  struct cgroup_resources res;
  struct husk_error *err = NULL;

  assert_int_equal (parse_text ("{\"memory\":{\"limit\":0,\"swap\":0,\"kernel\":5},\"cpu\":{\"shares\":0,"
                                "\"cpus\":\"\"},\"pids\":{\"limit\":0},\"devices\":[{\"allow\":false}]}",
                                &res, &err),
                    0);
  /* Zero means "not set", as in runc; pids 0 means no limit, as in crun. */
  assert_false (res.memory.limit.set);
  assert_false (res.memory.swap.set);
  assert_false (res.cpu.shares.set);
  assert_null (res.cpu.cpus);
  assert_true (res.pids_limit.set);
  assert_int_equal (res.pids_limit.value, -1);
  assert_true (res.has_devices);
  assert_int_equal (res.n_devices, 1);
  assert_int_equal (res.devices[0].type, 'a');
  assert_int_equal (res.devices[0].major, -1);
  assert_int_equal (res.devices[0].access, CGROUP_DEV_ALL);
  cgroup_resources_clear (&res);

  assert_int_equal (parse_text ("null", &res, &err), 0);
  assert_false (cgroup_resources_has_limits (&res));
  cgroup_resources_clear (&res);
}

/* ------------------------------------------------------------ writing */

static void
test_write_values (void **state)
{
  struct fixture *fx = *state;
  struct husk_error *err = NULL;

  assert_int_equal (
      write_text (fx->dir,
                  "{\"memory\":{\"limit\":268435456,\"reservation\":134217728,\"swap\":536870912},"
                  "\"cpu\":{\"shares\":1024,\"quota\":50000,\"period\":100000,\"burst\":1000,"
                  "\"idle\":1,\"cpus\":\"0-1\",\"mems\":\"0\"},\"pids\":{\"limit\":42},"
                  "\"blockIO\":{\"weight\":500,\"throttleReadBpsDevice\":[{\"major\":8,\"minor\":0,"
                  "\"rate\":1048576}]},\"hugepageLimits\":[{\"pageSize\":\"2MB\",\"limit\":4194304}],"
                  "\"rdma\":{\"mlx5_0\":{\"hcaHandles\":3}}}",
                  &err),
      0);
  assert_null (err);
  assert_file (fx->dir, "memory.max", "268435456");
  assert_file (fx->dir, "memory.low", "134217728");
  /* The spec's swap is memory plus swap: v2 gets the swap alone. */
  assert_file (fx->dir, "memory.swap.max", "268435456");
  /* shares 1024 -> weight 39, the conversion Kubernetes uses. */
  assert_file (fx->dir, "cpu.weight", "39");
  assert_file (fx->dir, "cpu.max", "50000 100000");
  assert_file (fx->dir, "cpu.max.burst", "1000");
  assert_file (fx->dir, "cpu.idle", "1");
  assert_file (fx->dir, "cpuset.cpus", "0-1");
  assert_file (fx->dir, "cpuset.mems", "0");
  assert_file (fx->dir, "pids.max", "42");
  /* No BFQ: blkio weight 500 scaled onto io.weight. */
  assert_file (fx->dir, "io.weight", "default 4950");
  assert_file (fx->dir, "io.max", "8:0 rbps=1048576");
  assert_file (fx->dir, "hugetlb.2MB.max", "4194304");
  assert_file (fx->dir, "hugetlb.2MB.rsvd.max", "4194304");
  assert_file (fx->dir, "rdma.max", "mlx5_0 hca_handle=3");
}

static void
test_write_conversions (void **state)
{
  struct fixture *fx = *state;
  struct husk_error *err = NULL;

  /* Only the period: the quota already there is kept. */
  put (fx->dir, "cpu.max", "20000 100000\n");
  assert_int_equal (write_text (fx->dir, "{\"cpu\":{\"period\":50000}}", &err), 0);
  assert_file (fx->dir, "cpu.max", "20000 50000");
  assert_int_equal (write_text (fx->dir, "{\"cpu\":{\"quota\":-1}}", &err), 0);
  assert_file (fx->dir, "cpu.max", "max 50000");
  /* Extremes of the shares scale. */
  assert_int_equal (write_text (fx->dir, "{\"cpu\":{\"shares\":2}}", &err), 0);
  assert_file (fx->dir, "cpu.weight", "1");
  assert_int_equal (write_text (fx->dir, "{\"cpu\":{\"shares\":262144}}", &err), 0);
  assert_file (fx->dir, "cpu.weight", "10000");
  /* Unlimited memory takes swap along; -1 pids is max. */
  put (fx->dir, "memory.swap.max", "0\n");
  assert_int_equal (write_text (fx->dir, "{\"memory\":{\"limit\":-1},\"pids\":{\"limit\":-1}}", &err), 0);
  assert_file (fx->dir, "memory.max", "max");
  assert_file (fx->dir, "memory.swap.max", "max");
  assert_file (fx->dir, "pids.max", "max");
  /* BFQ present: its file, on its own scale. */
  put (fx->dir, "io.bfq.weight", "default 100\n");
  assert_int_equal (write_text (fx->dir, "{\"blockIO\":{\"weight\":500}}", &err), 0);
  assert_file (fx->dir, "io.bfq.weight", "500");
  /* A throttle of 0 removes the limit. */
  assert_int_equal (write_text (fx->dir,
                                "{\"blockIO\":{\"throttleWriteIOPSDevice\":[{\"major\":1,\"minor\":0,"
                                "\"rate\":0}]}}",
                                &err),
                    0);
  assert_file (fx->dir, "io.max", "1:0 wiops=max");
  assert_null (err);
}

static void
test_unified_overrides (void **state)
{
  struct fixture *fx = *state;
  struct husk_error *err = NULL;

  assert_int_equal (write_text (fx->dir,
                                "{\"memory\":{\"limit\":1048576},\"unified\":{\"memory.max\":\"2097152\","
                                "\"memory.high\":\"1048576\"}}",
                                &err),
                    0);
  assert_file (fx->dir, "memory.max", "2097152");
  assert_file (fx->dir, "memory.high", "1048576");
}

/* Refused requests change nothing. */
static void
test_refused_changes_nothing (void **state)
{
  struct fixture *fx = *state;
  struct husk_error *err = NULL;

  assert_int_equal (
      write_text (fx->dir, "{\"memory\":{\"limit\":1048576},\"unified\":{\"memory.nosuch\":\"1\"}}", &err),
      -1);
  assert_error_contains (err, "linux.resources.unified: unknown key `memory.nosuch` (no such file in cgroup");
  assert_file (fx->dir, "memory.max", "max");

  assert_int_equal (
      write_text (fx->dir, "{\"memory\":{\"limit\":1048576},\"unified\":{\"bogus.key\":\"1\"}}", &err), -1);
  assert_error_contains (err, "unknown key `bogus.key`");
  assert_file (fx->dir, "memory.max", "max");

  /* A missing controller: named, with the field that needs it. */
  put (fx->dir, "cgroup.controllers", "cpu io\n");
  assert_int_equal (write_text (fx->dir, "{\"cpu\":{\"quota\":20000},\"pids\":{\"limit\":5}}", &err), -1);
  assert_error_contains (err, "linux.resources.pids.limit: cannot apply: the pids controller");
  assert_file (fx->dir, "cpu.max", "max 100000");

  assert_int_equal (
      write_text (fx->dir, "{\"hugepageLimits\":[{\"pageSize\":\"2MB\",\"limit\":2097152}]}", &err), -1);
  assert_error_contains (err, "hugepageLimits[0]: cannot apply: the hugetlb controller");
  put (fx->dir, "cgroup.controllers", "cpuset cpu io memory hugetlb pids\n");

  assert_int_equal (
      write_text (fx->dir, "{\"hugepageLimits\":[{\"pageSize\":\"64KB\",\"limit\":65536}]}", &err), -1);
  assert_error_contains (err, "hugepageLimits[0]: the kernel has no 64KB huge pages (it has: ");

  /* Swap is memory plus swap: less than the limit is absurd. */
  assert_int_equal (write_text (fx->dir, "{\"memory\":{\"limit\":2097152,\"swap\":1048576}}", &err), -1);
  assert_error_contains (err, "linux.resources.memory.swap: 1048576 is less than the memory limit 2097152");
  assert_int_equal (write_text (fx->dir, "{\"memory\":{\"swap\":1048576}}", &err), -1);
  assert_error_contains (err, "linux.resources.memory.swap: needs a memory limit");
  /* ... but with a limit already in place, swap alone is fine. */
  put (fx->dir, "memory.max", "1048576\n");
  assert_int_equal (write_text (fx->dir, "{\"memory\":{\"swap\":3145728}}", &err), 0);
  assert_file (fx->dir, "memory.swap.max", "2097152");

  /* checkBeforeUpdate: below the current usage (1 MiB here) is refused. */
  put (fx->dir, "memory.max", "max\n");
  assert_int_equal (write_text (fx->dir, "{\"memory\":{\"limit\":524288,\"checkBeforeUpdate\":true}}", &err),
                    -1);
  assert_error_contains (err, "524288 is below the current usage 1048576");
  assert_file (fx->dir, "memory.max", "max");
}

/* A write the kernel (here: the file system) refuses undoes the earlier ones. */
static void
test_undo_on_failure (void **state)
{
  struct fixture *fx = *state;
  cleanup_free char *huge = fx_path (fx->dir, "hugetlb.2MB.max");
  struct husk_error *err = NULL;

  put (fx->dir, "io.max", "8:0 rbps=100 wbps=max riops=max wiops=max\n");
  /* hugetlb.2MB.max as a directory: opening it for writing fails, after
   * memory, cpu, pids and io were written. */
  assert_int_equal (unlink (huge), 0);
  assert_int_equal (mkdir (huge, 0755), 0);
  assert_int_equal (
      write_text (fx->dir,
                  "{\"memory\":{\"limit\":1048576},\"cpu\":{\"quota\":20000},\"pids\":{\"limit\":5},"
                  "\"blockIO\":{\"throttleReadBpsDevice\":[{\"major\":8,\"minor\":0,\"rate\":5}],"
                  "\"throttleWriteBpsDevice\":[{\"major\":9,\"minor\":1,\"rate\":7}]},"
                  "\"hugepageLimits\":[{\"pageSize\":\"2MB\",\"limit\":2097152}]}",
                  &err),
      -1);
  assert_error_contains (err, "linux.resources.hugepageLimits[0]: open `");
  assert_file (fx->dir, "memory.max", "max");
  assert_file (fx->dir, "cpu.max", "max 100000");
  assert_file (fx->dir, "pids.max", "max");
  /* Keyed files get each device's old line back, or "no limit". */
  assert_file (fx->dir, "io.max", "8:0 rbps=100 wbps=max riops=max wiops=max");
}

/* ----------------------------------------------------- path resolution */

static void
test_resolve (void **state)
{
  const char *mount = cgroup_unified_mount ();
  struct husk_error *err = NULL;
  cleanup_free char *expected = NULL;
  char *path = NULL;

  assert_non_null (mount);
  assert_int_equal (cgroup_resolve (NULL, "c1", false, &path, &err), 0);
  expected = xasprintf ("%s/husk/c1", mount);
  assert_string_equal (path, expected);
  free (path);
  free (expected);

  assert_int_equal (cgroup_resolve ("/kubepods/pod1/c1", "c1", false, &path, &err), 0);
  expected = xasprintf ("%s/kubepods/pod1/c1", mount);
  assert_string_equal (path, expected);
  free (path);
  free (expected);

  assert_int_equal (cgroup_resolve ("kubepods-burstable-pod1.slice:cri-husk:abc", "abc", true, &path, &err),
                    0);
  expected = xasprintf ("%s/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/"
                        "cri-husk-abc.scope",
                        mount);
  assert_string_equal (path, expected);
  free (path);
  free (expected);

  assert_int_equal (cgroup_resolve (":husk:abc", "abc", true, &path, &err), 0);
  expected = xasprintf ("%s/system.slice/husk-abc.scope", mount);
  assert_string_equal (path, expected);
  free (path);
  free (expected);
  expected = NULL;

  assert_int_equal (cgroup_resolve ("/a/../../etc", "c1", false, &path, &err), -1);
  assert_error_contains (err, "linux.cgroupsPath `/a/../../etc`: must not contain `..`");
  assert_int_equal (cgroup_resolve ("..", "c1", false, &path, &err), -1);
  assert_error_contains (err, "must not contain `..`");
  assert_int_equal (cgroup_resolve ("bad-.slice:p:n", "c1", true, &path, &err), -1);
  assert_error_contains (err, "invalid systemd slice `bad-.slice`");
  assert_int_equal (cgroup_resolve ("a.slice:p", "c1", true, &path, &err), -1);
  assert_error_contains (err, "expected `slice:prefix:name`");
}

/* ------------------------------------------------------- device filter */

/* The subset of eBPF the device filter uses, run over one access. */
static int
run_program (const struct bpf_insn *insns, size_t n_insns, uint32_t access_type, uint32_t major,
             uint32_t minor)
{
  uint32_t ctx[3] = { access_type, major, minor };
  uint64_t reg[11] = { 0 };
  size_t pc = 0;

  while (pc < n_insns)
    {
      const struct bpf_insn *in = &insns[pc++];
      uint8_t cls = BPF_CLASS (in->code), op = BPF_OP (in->code);
      uint64_t src = BPF_SRC (in->code) == BPF_X ? reg[in->src_reg] : (uint64_t) (int64_t) in->imm;

      if (cls == BPF_LDX)
        {
          assert_int_equal (in->code, BPF_LDX | BPF_MEM | BPF_W);
          assert_int_equal (in->src_reg, BPF_REG_1);
          assert_true (in->off >= 0 && in->off <= 8 && in->off % 4 == 0);
          reg[in->dst_reg] = ctx[in->off / 4];
        }
      else if (cls == BPF_ALU64 && op == BPF_MOV)
        reg[in->dst_reg] = src;
      else if (cls == BPF_ALU64 && op == BPF_AND)
        reg[in->dst_reg] &= src;
      else if (cls == BPF_ALU64 && op == BPF_RSH)
        reg[in->dst_reg] >>= src;
      else if (cls == BPF_JMP32 && (op == BPF_JNE || op == BPF_JEQ))
        {
          bool equal = (uint32_t) reg[in->dst_reg] == (uint32_t) src;
          if (equal == (op == BPF_JEQ))
            pc += (size_t) in->off;
        }
      else if (cls == BPF_JMP && op == BPF_EXIT)
        return (int) reg[0];
      else
        fail_msg ("unexpected instruction %#x at %zu", in->code, pc - 1);
    }
  fail_msg ("the program ran off its end");
  return -1;
}

static unsigned
bpf_access (unsigned access)
{
  return (access & CGROUP_DEV_MKNOD ? BPF_DEVCG_ACC_MKNOD : 0)
         | (access & CGROUP_DEV_READ ? BPF_DEVCG_ACC_READ : 0)
         | (access & CGROUP_DEV_WRITE ? BPF_DEVCG_ACC_WRITE : 0);
}

#define ANY (-1)

/* The program and the reference evaluation agree on every access. */
static void
assert_program_matches (const struct cgroup_device_rule *rules, size_t n_rules)
{
  static const uint32_t majors[] = { 0, 1, 5, 136, 4000000000u };
  static const uint32_t minors[] = { 0, 3, 5, 11, 4000000000u };
  struct bpf_insn *insns = NULL;
  size_t n_insns = 0;
  bool allow_all;

  cgroup_device_program (rules, n_rules, &insns, &n_insns, &allow_all);
  for (int t = 0; t < 2; t++)
    for (size_t ma = 0; ma < 5; ma++)
      for (size_t mi = 0; mi < 5; mi++)
        for (unsigned access = 1; access <= CGROUP_DEV_ALL; access++)
          {
            char type = t ? 'c' : 'b';
            bool expected = cgroup_device_allowed (rules, n_rules, type, majors[ma], minors[mi], access);
            uint32_t access_type = bpf_access (access) << 16 | (t ? BPF_DEVCG_DEV_CHAR : BPF_DEVCG_DEV_BLOCK);
            int got = allow_all ? 1 : run_program (insns, n_insns, access_type, majors[ma], minors[mi]);

            if (got != (int) expected)
              fail_msg ("%c %u:%u access %u: program says %d, rules say %d", type, majors[ma], minors[mi],
                        access, got, expected);
          }
  free (insns);
}

static void
test_device_rules (void **state)
{
  const struct cgroup_device_rule deny_all_then[] = {
    { false, 'a', ANY, ANY, CGROUP_DEV_ALL },
    { true, 'c', 1, 3, CGROUP_DEV_ALL },
    { true, 'c', 1, 5, CGROUP_DEV_READ },
    { true, 'c', 136, ANY, CGROUP_DEV_READ | CGROUP_DEV_WRITE },
    { true, 'b', ANY, ANY, CGROUP_DEV_MKNOD },
    { false, 'c', 1, 3, CGROUP_DEV_WRITE },
    { true, 'c', 4000000000, 4000000000, CGROUP_DEV_ALL },
  };
  const struct cgroup_device_rule allow_then_deny[] = {
    { true, 'a', ANY, ANY, CGROUP_DEV_ALL },
    { false, 'b', 5, ANY, CGROUP_DEV_WRITE },
    { false, 'a', 1, 11, CGROUP_DEV_ALL },
  };
  const struct cgroup_device_rule no_reset[] = {
    { false, 'c', 1, 5, CGROUP_DEV_READ },
    { true, 'c', 1, 5, CGROUP_DEV_READ | CGROUP_DEV_MKNOD },
  };
  const struct cgroup_device_rule privileged[] = {
    { false, 'a', ANY, ANY, CGROUP_DEV_ALL },
    { true, 'c', 1, 3, CGROUP_DEV_ALL },
    { true, 'a', ANY, ANY, CGROUP_DEV_ALL },
  };
  struct bpf_insn *insns = NULL;
  size_t n_insns = 0;
  bool allow_all;

  /* Last matching rule wins; a deny-all first makes deny the default. */
  assert_true (cgroup_device_allowed (deny_all_then, 7, 'c', 1, 3, CGROUP_DEV_READ));
  assert_false (cgroup_device_allowed (deny_all_then, 7, 'c', 1, 3, CGROUP_DEV_WRITE));
  assert_false (cgroup_device_allowed (deny_all_then, 7, 'c', 1, 3, CGROUP_DEV_READ | CGROUP_DEV_WRITE));
  assert_true (cgroup_device_allowed (deny_all_then, 7, 'c', 1, 5, CGROUP_DEV_READ));
  assert_false (cgroup_device_allowed (deny_all_then, 7, 'c', 1, 5, CGROUP_DEV_WRITE));
  assert_true (cgroup_device_allowed (deny_all_then, 7, 'c', 136, 7, CGROUP_DEV_READ | CGROUP_DEV_WRITE));
  assert_true (cgroup_device_allowed (deny_all_then, 7, 'b', 8, 0, CGROUP_DEV_MKNOD));
  assert_false (cgroup_device_allowed (deny_all_then, 7, 'b', 8, 0, CGROUP_DEV_READ));
  assert_false (cgroup_device_allowed (deny_all_then, 7, 'c', 1, 1, CGROUP_DEV_READ));
  assert_true (cgroup_device_allowed (deny_all_then, 7, 'c', 4000000000u, 4000000000u, CGROUP_DEV_WRITE));
  assert_true (cgroup_device_allowed (allow_then_deny, 3, 'b', 5, 1, CGROUP_DEV_READ));
  assert_false (cgroup_device_allowed (allow_then_deny, 3, 'b', 5, 1, CGROUP_DEV_READ | CGROUP_DEV_WRITE));
  assert_false (cgroup_device_allowed (allow_then_deny, 3, 'b', 1, 11, CGROUP_DEV_MKNOD));
  assert_true (cgroup_device_allowed (no_reset, 2, 'c', 1, 5, CGROUP_DEV_READ));
  assert_true (cgroup_device_allowed (no_reset, 2, 'c', 1, 5, CGROUP_DEV_WRITE));

  assert_program_matches (deny_all_then, 7);
  assert_program_matches (allow_then_deny, 3);
  assert_program_matches (no_reset, 2);
  assert_program_matches (cgroup_default_device_rules, cgroup_n_default_device_rules);
  assert_program_matches (deny_all_then, 1);

  /* Allowing everything needs no program at all. */
  cgroup_device_program (privileged, 3, &insns, &n_insns, &allow_all);
  assert_true (allow_all);
  assert_null (insns);
  cgroup_device_program (privileged, 0, &insns, &n_insns, &allow_all);
  assert_true (allow_all);
  cgroup_device_program (privileged, 2, &insns, &n_insns, &allow_all);
  assert_false (allow_all);
  assert_non_null (insns);
  free (insns);
}

/* Every program the rules give is accepted by this kernel's verifier. */
static void
test_verifier_accepts (void **state)
{
  const struct cgroup_device_rule rules[] = {
    { false, 'a', ANY, ANY, CGROUP_DEV_ALL },
    { true, 'c', 1, 3, CGROUP_DEV_READ },
    { true, 'b', 7, ANY, CGROUP_DEV_ALL },
    { false, 'c', ANY, 5, CGROUP_DEV_WRITE | CGROUP_DEV_MKNOD },
    { true, 'a', 4000000000, ANY, CGROUP_DEV_MKNOD },
  };
  struct husk_error *err = NULL;
  int prog_fd;

  for (size_t n = 1; n <= 5; n++)
    {
      struct bpf_insn *insns = NULL;
      size_t n_insns = 0;
      bool allow_all;
      int fd;

      cgroup_device_program (rules, n, &insns, &n_insns, &allow_all);
      assert_false (allow_all);
      fd = cgroup_device_program_load (insns, n_insns, &err);
      if (fd < 0)
        fail_msg ("%zu rules: %s", n, err->msg);
      close (fd);
      free (insns);
    }
  assert_int_equal (cgroup_devices_prepare (rules, 5, &prog_fd, &err), 0);
  assert_true (prog_fd >= 0);
  close (prog_fd);
}

/* Forks a child that joins CGROUP and opens each of PATHS with FLAGS;
 * returns a bitmask: bit i set when open i failed with EPERM, and -1 on
 * any other failure. */
static int
probe_opens (const char *cgroup, const char *const *paths, const int *flags, size_t n)
{
  int status = 0;
  pid_t pid = fork ();

  assert_true (pid >= 0);
  if (pid == 0)
    {
      int denied = 0;

      if (cgroup_enter (cgroup, getpid (), NULL) < 0)
        _exit (255);
      for (size_t i = 0; i < n; i++)
        {
          int fd = open (paths[i], flags[i] | O_CLOEXEC);
          if (fd >= 0)
            close (fd);
          else if (errno == EPERM)
            denied |= 1 << i;
          else
            _exit (254);
        }
      _exit (denied);
    }
  assert_int_equal (waitpid (pid, &status, 0), pid);
  assert_true (WIFEXITED (status));
  assert_true (WEXITSTATUS (status) < 254);
  return WEXITSTATUS (status);
}

static uint32_t
count_attached (const char *path)
{
  cleanup_close int fd = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  uint32_t ids[8];
  union bpf_attr attr;

  memset (&attr, 0, sizeof attr);
  attr.query.target_fd = (uint32_t) fd;
  attr.query.attach_type = BPF_CGROUP_DEVICE;
  attr.query.prog_ids = (uint64_t) (uintptr_t) ids;
  attr.query.prog_cnt = 8;
  assert_int_equal (syscall (SYS_bpf, BPF_PROG_QUERY, &attr, sizeof attr), 0);
  return attr.query.prog_cnt;
}

/* The filter on a real cgroup: allowed opens work, denied ones get EPERM,
 * a read-only rule refuses writing, and an update replaces the filter. */
static void
test_filter_enforced (void **state)
{
  struct fixture *fx = *state;
  const char *cgroup = real_cgroup (fx);
  /* kmsg (1:11) is in no default rule; full (1:7) is, so only the raw
   * program below, which has no defaults, denies it. */
  const char *const paths[] = { "/dev/null", "/dev/zero", "/dev/zero", "/dev/kmsg", "/dev/full" };
  const int flags[] = { O_RDWR, O_RDONLY, O_WRONLY, O_WRONLY, O_RDONLY };
  struct husk_error *err = NULL;

  bool bpf = cgroup_controller_version ("devices") == CGROUP_V2;

  assert_int_equal (probe_opens (cgroup, paths, flags, 5), 0);
  assert_int_equal (write_text (cgroup, "{\"devices\":[{\"allow\":false,\"access\":\"rwm\"}]}", &err), 0);
  /* Only the default nodes: kmsg (1:11) is denied (BPF on v2, the devices
   * controller on v1). */
  assert_int_equal (probe_opens (cgroup, paths, flags, 5), 1 << 3);
  assert_int_equal (count_attached (cgroup), bpf ? 1 : 0);
  if (!bpf)
    {
      /* v1: back to allow-all before the raw programs below. */
      assert_int_equal (write_text (cgroup, "{\"devices\":[{\"allow\":true,\"access\":\"rwm\"}]}", &err), 0);
      assert_int_equal (probe_opens (cgroup, paths, flags, 5), 0);
    }
  /* Raw programs (no defaults appended) to see a read-only rule. */
  {
    const struct cgroup_device_rule rules[] = {
      { false, 'a', ANY, ANY, CGROUP_DEV_ALL },
      { true, 'c', 1, 3, CGROUP_DEV_READ | CGROUP_DEV_WRITE },
      { true, 'c', 1, 5, CGROUP_DEV_READ },
    };
    struct bpf_insn *insns = NULL;
    size_t n_insns = 0;
    bool allow_all;
    int prog_fd;

    cgroup_device_program (rules, 3, &insns, &n_insns, &allow_all);
    prog_fd = cgroup_device_program_load (insns, n_insns, &err);
    assert_true (prog_fd >= 0);
    assert_int_equal (cgroup_devices_attach (cgroup, prog_fd, &err), 0);
    close (prog_fd);
    free (insns);
    assert_int_equal (count_attached (cgroup), 1);
    assert_int_equal (probe_opens (cgroup, paths, flags, 5), 1 << 2 | 1 << 3 | 1 << 4);
  }
  /* An update allowing everything removes the filter. */
  if (!bpf)
    assert_int_equal (cgroup_devices_attach (cgroup, -1, &err), 0);
  assert_int_equal (write_text (cgroup, "{\"devices\":[{\"allow\":true,\"access\":\"rwm\"}]}", &err), 0);
  assert_int_equal (count_attached (cgroup), 0);
  assert_int_equal (probe_opens (cgroup, paths, flags, 5), 0);
  assert_null (err);
}

/* ------------------------------------------------ the host's hierarchy */

/* Where the unified hierarchy lacks a controller (this hybrid host: it
 * has only hugetlb), the limit goes to the v1 hierarchy that holds it;
 * where no hierarchy has it, it is refused naming the controller. */
static void
test_host_controllers (void **state)
{
  struct fixture *fx = *state;
  const char *cgroup = real_cgroup (fx);
  struct husk_error *err = NULL;
  static const char *const cases[][4] = {
    { "memory", "{\"memory\":{\"limit\":67108864}}", "memory.limit_in_bytes", "67108864" },
    { "cpu", "{\"cpu\":{\"quota\":50000}}", "cpu.cfs_quota_us", "50000" },
    { "pids", "{\"pids\":{\"limit\":10}}", "pids.max", "10" },
  };

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      cleanup_free char *dir = NULL;
      enum cgroup_version version = cgroup_locate (cgroup, cases[i][0], &dir);

      if (version == CGROUP_V2)
        continue; /* the VM tests cover v2 */
      if (version == CGROUP_NONE)
        {
          assert_int_equal (write_text (cgroup, cases[i][1], &err), -1);
          assert_error_contains (err, "no cgroup hierarchy on this host has the");
          continue;
        }
      assert_int_equal (write_text (cgroup, cases[i][1], &err), 0);
      assert_file (dir, cases[i][2], cases[i][3]);
    }
  if (cgroup_controller_version ("memory") != CGROUP_V2)
    {
      assert_int_equal (write_text (cgroup, "{\"unified\":{\"memory.high\":\"1\"}}", &err), -1);
      assert_error_contains (err, "linux.resources.unified.memory.high: cannot apply");
    }
  if (cgroup_controller_version ("net_cls") == CGROUP_NONE)
    {
      assert_int_equal (write_text (cgroup, "{\"network\":{\"classID\":1}}", &err), -1);
      assert_error_contains (
          err, "network.classID: cannot apply: no cgroup hierarchy on this host has the net_cls");
    }
  assert_int_equal (write_text (cgroup, "{}", &err), 0);
  assert_int_equal (write_text (cgroup, "{\"devices\":[]}", &err), 0);
  assert_null (err);
}

/* Skips a v1 test on a host whose memory controller is not on v1. */
#define REQUIRE_V1(controller)                                                                               \
  do                                                                                                         \
    {                                                                                                        \
      if (cgroup_controller_version (controller) != CGROUP_V1)                                               \
        skip ();                                                                                             \
    }                                                                                                        \
  while (0)

static char *
v1_dir (const char *cgroup, const char *controller)
{
  char *dir = NULL;

  assert_int_equal (cgroup_locate (cgroup, controller, &dir), CGROUP_V1);
  return dir;
}

/* The v1 mounts husk finds (at /sys/fs/cgroup/NAME when they are there,
 * without reading mountinfo) are the ones /proc/self/mountinfo lists, and
 * every hierarchy is listed once. */
static void
test_v1_layout_matches_mountinfo (void **state)
{
  static const char *const names[] = { "cpuset",  "cpu",      "cpuacct", "memory",     "devices", "freezer",
                                       "net_cls", "net_prio", "blkio",   "perf_event", "hugetlb", "pids" };
  FILE *f = fopen ("/proc/self/mountinfo", "re");
  char *const *hierarchies = cgroup_v1_hierarchies ();
  char line[4096];
  size_t n_mounts = 0, n_hierarchies = 0;
  char *mounts[64];

  (void) state;
  assert_non_null (f);
  while (fgets (line, sizeof line, f) && n_mounts < 64)
    {
      char point[1024], type[64];
      const char *dash = strstr (line, " - ");
      if (dash && sscanf (line, "%*s %*s %*s %*s %1023s", point) == 1 && sscanf (dash + 3, "%63s", type) == 1
          && strcmp (type, "cgroup") == 0)
        mounts[n_mounts++] = strdup (point);
    }
  fclose (f);
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    {
      const char *mount = cgroup_v1_mount (names[i]);
      bool listed = false;
      if (mount == NULL)
        continue;
      for (size_t k = 0; k < n_mounts; k++)
        listed = listed || strcmp (mounts[k], mount) == 0;
      if (!listed)
        fail_msg ("controller %s: %s is not a cgroup mount in mountinfo", names[i], mount);
    }
  for (; hierarchies && hierarchies[n_hierarchies]; n_hierarchies++)
    for (size_t k = 0; k < n_hierarchies; k++)
      assert_string_not_equal (hierarchies[k], hierarchies[n_hierarchies]);
  if (cgroup_controller_version ("memory") == CGROUP_V1)
    assert_true (n_hierarchies > 0);
  for (size_t k = 0; k < n_mounts; k++)
    free (mounts[k]);
}

/* Every v1 file of the memory, cpu and pids controllers, in the order the
 * kernel accepts (memsw >= limit at every step). */
static void
test_v1_writes (void **state)
{
  struct fixture *fx = *state;
  const char *cgroup;
  cleanup_free char *memory = NULL;
  cleanup_free char *cpu = NULL;
  cleanup_free char *pids = NULL;
  struct husk_error *err = NULL;

  REQUIRE_V1 ("memory");
  REQUIRE_V1 ("cpu");
  REQUIRE_V1 ("pids");
  cgroup = real_cgroup (fx);
  memory = v1_dir (cgroup, "memory");
  cpu = v1_dir (cgroup, "cpu");
  pids = v1_dir (cgroup, "pids");
  assert_int_equal (write_text (cgroup,
                                "{\"memory\":{\"limit\":67108864,\"swap\":134217728,\"reservation\":33554432,"
                                "\"swappiness\":10,\"disableOOMKiller\":true},\"cpu\":{\"shares\":512,"
                                "\"quota\":20000,\"period\":50000},\"pids\":{\"limit\":7}}",
                                &err),
                    0);
  assert_file (memory, "memory.limit_in_bytes", "67108864");
  assert_file (memory, "memory.memsw.limit_in_bytes", "134217728");
  assert_file (memory, "memory.soft_limit_in_bytes", "33554432");
  assert_file (memory, "memory.swappiness", "10");
  {
    cleanup_free char *oom = get (memory, "memory.oom_control");
    assert_non_null (strstr (oom, "oom_kill_disable 1"));
  }
  assert_file (cpu, "cpu.shares", "512");
  assert_file (cpu, "cpu.cfs_quota_us", "20000");
  assert_file (cpu, "cpu.cfs_period_us", "50000");
  assert_file (pids, "pids.max", "7");
  /* Raising both past the old memsw needs memsw first; lowering, the
   * limit first; -1 lifts both. */
  assert_int_equal (write_text (cgroup, "{\"memory\":{\"limit\":268435456,\"swap\":536870912}}", &err), 0);
  assert_file (memory, "memory.limit_in_bytes", "268435456");
  assert_int_equal (write_text (cgroup, "{\"memory\":{\"limit\":16777216,\"swap\":33554432}}", &err), 0);
  assert_file (memory, "memory.memsw.limit_in_bytes", "33554432");
  assert_int_equal (write_text (cgroup, "{\"memory\":{\"limit\":-1}}", &err), 0);
  assert_file (memory, "memory.memsw.limit_in_bytes", "9223372036854771712");
  /* weight (husk update --cpu-weight) onto shares */
  {
    struct cgroup_resources res;

    assert_int_equal (parse_text ("{}", &res, &err), 0);
    res.cpu.weight = (struct cgroup_value){ true, 100 };
    assert_int_equal (cgroup_resources_write (cgroup, &res, &err), 0);
    cgroup_resources_clear (&res);
  }
  assert_file (cpu, "cpu.shares", "2597");
  assert_null (err);
}

/* A value the kernel refuses (a cpu that does not exist) is a clear error
 * and undoes what was written before it. */
static void
test_v1_refused_undone (void **state)
{
  struct fixture *fx = *state;
  const char *cgroup;
  cleanup_free char *memory = NULL;
  struct husk_error *err = NULL;

  REQUIRE_V1 ("memory");
  REQUIRE_V1 ("cpuset");
  cgroup = real_cgroup (fx);
  memory = v1_dir (cgroup, "memory");
  assert_int_equal (
      write_text (cgroup, "{\"memory\":{\"limit\":67108864},\"cpu\":{\"cpus\":\"4000\"}}", &err), -1);
  assert_error_contains (err, "linux.resources.cpu.cpus: write `4000` to `");
  assert_file (memory, "memory.limit_in_bytes", "9223372036854771712");
}

/* devices.allow/deny from the rules: deny all, then the defaults. */
static void
test_v1_devices (void **state)
{
  struct fixture *fx = *state;
  const char *cgroup;
  cleanup_free char *devices = NULL;
  cleanup_free char *list = NULL;
  const char *const paths[] = { "/dev/null", "/dev/kmsg" };
  const int flags[] = { O_RDWR, O_WRONLY };
  struct husk_error *err = NULL;

  REQUIRE_V1 ("devices");
  cgroup = real_cgroup (fx);
  devices = v1_dir (cgroup, "devices");
  assert_int_equal (write_text (cgroup,
                                "{\"devices\":[{\"allow\":false,\"access\":\"rwm\"},{\"allow\":true,"
                                "\"type\":\"c\",\"major\":1,\"minor\":11,\"access\":\"r\"}]}",
                                &err),
                    0);
  list = get (devices, "devices.list");
  assert_non_null (strstr (list, "c 1:11 r\n"));
  assert_non_null (strstr (list, "c 1:3 rwm"));
  assert_null (strstr (list, "a *:* rwm"));
  /* kmsg is readable only: writing it is denied. */
  assert_int_equal (probe_opens (cgroup, paths, flags, 2), 1 << 1);
  assert_int_equal (write_text (cgroup, "{\"devices\":[{\"allow\":true,\"access\":\"rwm\"}]}", &err), 0);
  assert_file (devices, "devices.list", "a *:* rwm");
  assert_null (err);
}

/* Stats from the v1 files of a cgroup with a process in it. */
static void
test_v1_stats (void **state)
{
  struct fixture *fx = *state;
  const char *cgroup;
  struct husk_cgroup_stats stats;
  struct husk_error *err = NULL;
  int pipefd[2];
  char byte;

  REQUIRE_V1 ("memory");
  cgroup = real_cgroup (fx);
  assert_int_equal (write_text (cgroup, "{\"memory\":{\"limit\":67108864},\"pids\":{\"limit\":9}}", &err), 0);
  assert_int_equal (pipe (pipefd), 0);
  fx->child = fork ();
  if (fx->child == 0)
    {
      volatile char *block;

      if (cgroup_enter (cgroup, getpid (), NULL) < 0 || (block = malloc (4 << 20)) == NULL)
        _exit (1);
      for (size_t at = 0; at < 4 << 20; at += 4096)
        block[at] = 1;
      if (write (pipefd[1], "x", 1) != 1)
        _exit (1);
      pause ();
      _exit (0);
    }
  assert_int_equal (read (pipefd[0], &byte, 1), 1);
  close (pipefd[0]);
  close (pipefd[1]);
  /* memory.stat's counters are flushed by the kernel lazily (rstat, about
   * every 2 s), where the usage counter is exact: wait for them. */
  for (int tries = 0;; tries++)
    {
      assert_int_equal (husk_cgroup_stats_read (cgroup, &stats, &err), 0);
      if (stats.memory.anon >= (4 << 20) || tries == 50)
        break;
      usleep (100 * 1000);
    }
  assert_true (stats.has_memory);
  assert_int_equal (stats.memory.limit, 67108864);
  assert_true (stats.memory.usage >= (4 << 20));
  assert_true (stats.memory.working_set > 0 && stats.memory.working_set <= stats.memory.usage);
  assert_true (stats.memory.anon >= (4 << 20));
  if (cgroup_controller_version ("cpuacct") == CGROUP_V1)
    assert_true (stats.has_cpu && stats.cpu.usage_usec > 0);
  if (cgroup_controller_version ("pids") == CGROUP_V1)
    {
      assert_true (stats.has_pids);
      assert_int_equal (stats.pids.current, 1);
      assert_int_equal (stats.pids.limit, 9);
    }
  husk_cgroup_stats_clear (&stats);
  assert_null (err);
}

/* Where several hierarchies exist the cgroup is made, joined and removed
 * in each of them. */
static void
test_every_hierarchy (void **state)
{
  struct fixture *fx = *state;
  const char *cgroup = real_cgroup (fx);
  cleanup_strv char **dirs = cgroup_dirs (cgroup);
  struct husk_error *err = NULL;

  for (size_t i = 0; dirs[i]; i++)
    assert_int_equal (access (dirs[i], F_OK), 0);
  assert_true (cgroup_exists (cgroup));
  assert_int_equal (cgroup_destroy (cgroup, &err), 0);
  for (size_t i = 0; dirs[i]; i++)
    assert_int_equal (access (dirs[i], F_OK), -1);
  assert_false (cgroup_exists (cgroup));
  free (fx->real);
  fx->real = NULL;
}

/* A process that counts in shared memory as fast as it can. */
static pid_t
spawn_counter (const char *cgroup, volatile uint64_t *counter)
{
  pid_t pid = fork ();

  assert_true (pid >= 0);
  if (pid == 0)
    {
      if (cgroup_enter (cgroup, getpid (), NULL) < 0)
        _exit (1);
      for (;;)
        (*counter)++;
    }
  return pid;
}

static void
sleep_ms (int ms)
{
  struct timespec pause = { ms / 1000, (ms % 1000) * 1000000L };
  nanosleep (&pause, NULL);
}

static void
test_freeze_and_kill (void **state)
{
  struct fixture *fx = *state;
  const char *cgroup = real_cgroup (fx);
  volatile uint64_t *counter = mmap (NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  struct husk_error *err = NULL;
  uint64_t before, after;
  pid_t *pids = NULL;
  size_t n = 0;
  int status;

  assert_true (counter != MAP_FAILED);
  fx->child = spawn_counter (cgroup, counter);
  while (*counter == 0)
    sleep_ms (1);
  assert_int_equal (cgroup_pids (cgroup, &pids, &n, &err), 0);
  assert_int_equal (n, 1);
  assert_int_equal (pids[0], fx->child);
  free (pids);

  assert_int_equal (cgroup_freeze (cgroup, true, &err), 0);
  before = *counter;
  sleep_ms (200);
  after = *counter;
  assert_true (before == after);
  assert_int_equal (cgroup_freeze (cgroup, false, &err), 0);
  sleep_ms (100);
  assert_true (*counter > after);

  /* kill --all, through cgroup.kill where the kernel has it. */
  assert_int_equal (cgroup_kill_all (cgroup, SIGKILL, &err), 0);
  assert_int_equal (waitpid (fx->child, &status, 0), fx->child);
  assert_true (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);
  fx->child = 0;
  assert_int_equal (cgroup_destroy (cgroup, &err), 0);
  assert_int_equal (access (cgroup, F_OK), -1);
  free (fx->real);
  fx->real = NULL;
  munmap ((void *) counter, 4096);
  assert_null (err);
}

/* A create killed while its init joined the hierarchies one by one leaves
 * the init in some of them only (on this hybrid host: the unified one, the
 * last of cgroup_dirs).  It is still found, killed, and the cgroup goes. */
static void
test_kill_half_joined (void **state)
{
  struct fixture *fx = *state;
  const char *cgroup = real_cgroup (fx);
  cleanup_strv char **dirs = cgroup_dirs (cgroup);
  struct husk_error *err = NULL;
  size_t last = husk_strv_len (dirs) - 1;
  cleanup_free char *procs = xasprintf ("%s/cgroup.procs", dirs[last]);
  cleanup_free char *pid_text = NULL;
  pid_t *pids = NULL;
  size_t n = 0;
  int status;

  fx->child = fork ();
  assert_true (fx->child >= 0);
  if (fx->child == 0)
    {
      alarm (20); /* a kill that missed it fails the test, not hangs it */
      pause ();
      _exit (0);
    }
  pid_text = xasprintf ("%d", (int) fx->child);
  assert_int_equal (husk_write_file (procs, pid_text, strlen (pid_text), &err), 0);
  assert_int_equal (cgroup_pids (cgroup, &pids, &n, &err), 0);
  assert_int_equal (n, 1);
  assert_int_equal (pids[0], fx->child);
  free (pids);

  assert_int_equal (cgroup_kill_all (cgroup, SIGKILL, &err), 0);
  assert_int_equal (waitpid (fx->child, &status, 0), fx->child);
  assert_true (WIFSIGNALED (status) && WTERMSIG (status) == SIGKILL);
  fx->child = 0;
  assert_int_equal (cgroup_destroy (cgroup, &err), 0);
  assert_false (cgroup_exists (cgroup));
  free (fx->real);
  fx->real = NULL;
  assert_null (err);
}

/* --------------------------------------------------------------- stats */

static void
test_stats (void **state)
{
  struct fixture *fx = *state;
  struct husk_cgroup_stats stats;
  struct husk_error *err = NULL;
  cleanup_free char *json = NULL;

  put (fx->dir, "memory.current", "10485760\n");
  put (fx->dir, "memory.max", "20971520\n");
  put (fx->dir, "memory.stat",
       "anon 6291456\nfile 4194304\ninactive_file 1048576\npgfault 77\npgmajfault 2\n");
  put (fx->dir, "memory.events", "low 0\nhigh 0\nmax 9\noom 3\noom_kill 3\n");
  put (fx->dir, "cpu.stat",
       "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 4\nnr_throttled 1\n"
       "throttled_usec 20\n");
  put (fx->dir, "cpu.max", "50000 100000\n");
  put (fx->dir, "pids.current", "3\n");
  put (fx->dir, "io.stat",
       "8:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n1:0 rbytes=1 wbytes=2 "
       "rios=3 wios=4 dbytes=5 dios=6\n");
  put (fx->dir, "hugetlb.2MB.current", "2097152\n");
  put (fx->dir, "hugetlb.2MB.max", "4194304\n");
  put (fx->dir, "hugetlb.2MB.events", "max 1\n");

  assert_int_equal (husk_cgroup_stats_read (fx->dir, &stats, &err), 0);
  assert_true (stats.has_memory && stats.has_cpu && stats.has_pids);
  assert_int_equal (stats.memory.usage, 10485760);
  assert_int_equal (stats.memory.limit, 20971520);
  assert_int_equal (stats.memory.swap_limit, HUSK_CGROUP_UNLIMITED);
  assert_int_equal (stats.memory.anon, 6291456);
  assert_int_equal (stats.memory.working_set, 10485760 - 1048576);
  assert_int_equal (stats.memory.events_oom_kill, 3);
  assert_int_equal (stats.memory.major_page_faults, 2);
  assert_int_equal (stats.cpu.usage_usec, 1500);
  assert_int_equal (stats.cpu.nr_throttled, 1);
  assert_int_equal (stats.cpu.quota_usec, 50000);
  assert_int_equal (stats.pids.current, 3);
  assert_int_equal (stats.pids.limit, HUSK_CGROUP_UNLIMITED);
  assert_int_equal (stats.n_io, 2);
  assert_int_equal (stats.io[1].discard_ios, 6);
  assert_int_equal (stats.io[0].write_bytes, 8192);
  assert_int_equal (stats.n_hugetlb, 1);
  assert_string_equal (stats.hugetlb[0].page_size, "2MB");
  assert_int_equal (stats.hugetlb[0].max_events, 1);

  json = husk_cgroup_stats_json (&stats, "c1");
  assert_non_null (strstr (json, "\"type\":\"stats\",\"id\":\"c1\""));
  assert_non_null (strstr (json, "\"oomKill\":3"));
  assert_non_null (strstr (json, "\"total\":1500000"));
  assert_non_null (strstr (json, "\"pids\":{\"current\":3,\"limit\":null}"));
  assert_non_null (strstr (json, "\"2MB\":{\"usage\":2097152,\"limit\":4194304,\"failcnt\":1}"));
  husk_cgroup_stats_clear (&stats);

  assert_int_equal (husk_cgroup_stats_read ("/nonexistent/cgroup", &stats, &err), -1);
  assert_error_contains (err, "read stats of cgroup `/nonexistent/cgroup`");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_parse_errors),
    cmocka_unit_test (test_parse_values),
    cmocka_unit_test_setup_teardown (test_write_values, setup, teardown),
    cmocka_unit_test_setup_teardown (test_write_conversions, setup, teardown),
    cmocka_unit_test_setup_teardown (test_unified_overrides, setup, teardown),
    cmocka_unit_test_setup_teardown (test_refused_changes_nothing, setup, teardown),
    cmocka_unit_test_setup_teardown (test_undo_on_failure, setup, teardown),
    cmocka_unit_test (test_resolve),
    cmocka_unit_test (test_device_rules),
    cmocka_unit_test (test_verifier_accepts),
    cmocka_unit_test_setup_teardown (test_filter_enforced, setup, teardown),
    cmocka_unit_test_setup_teardown (test_host_controllers, setup, teardown),
    cmocka_unit_test_setup_teardown (test_v1_writes, setup, teardown),
    cmocka_unit_test_setup_teardown (test_v1_refused_undone, setup, teardown),
    cmocka_unit_test_setup_teardown (test_v1_devices, setup, teardown),
    cmocka_unit_test_setup_teardown (test_v1_stats, setup, teardown),
    cmocka_unit_test_setup_teardown (test_every_hierarchy, setup, teardown),
    cmocka_unit_test (test_v1_layout_matches_mountinfo),
    cmocka_unit_test_setup_teardown (test_freeze_and_kill, setup, teardown),
    cmocka_unit_test_setup_teardown (test_kill_half_joined, setup, teardown),
    cmocka_unit_test_setup_teardown (test_stats, setup, teardown),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
