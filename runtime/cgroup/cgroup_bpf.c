/* The device filter: linux.resources.devices compiled into an eBPF
 * program of type BPF_PROG_TYPE_CGROUP_DEVICE and attached to the
 * container's cgroup, which is how cgroup v2 controls device access.  The
 * instructions are built here directly; no libbpf. */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"

#define ANY (-1)

const struct cgroup_device_rule cgroup_default_device_rules[] = {
  { true, 'c', ANY, ANY, CGROUP_DEV_MKNOD }, { true, 'b', ANY, ANY, CGROUP_DEV_MKNOD },
  { true, 'c', 1, 3, CGROUP_DEV_ALL },     /* null */
  { true, 'c', 1, 5, CGROUP_DEV_ALL },     /* zero */
  { true, 'c', 1, 7, CGROUP_DEV_ALL },     /* full */
  { true, 'c', 1, 8, CGROUP_DEV_ALL },     /* random */
  { true, 'c', 1, 9, CGROUP_DEV_ALL },     /* urandom */
  { true, 'c', 5, 0, CGROUP_DEV_ALL },     /* tty */
  { true, 'c', 5, 1, CGROUP_DEV_ALL },     /* console */
  { true, 'c', 5, 2, CGROUP_DEV_ALL },     /* ptmx */
  { true, 'c', 136, ANY, CGROUP_DEV_ALL }, /* pts/N */
  { true, 'c', 10, 200, CGROUP_DEV_ALL },  /* net/tun */
};
const size_t cgroup_n_default_device_rules
    = sizeof cgroup_default_device_rules / sizeof cgroup_default_device_rules[0];

/* ------------------------------------------------------- rule semantics */

static bool
resets_default (const struct cgroup_device_rule *rule)
{
  return rule->type == 'a' && rule->major == ANY && rule->minor == ANY && rule->access == CGROUP_DEV_ALL;
}

/* Rules before the last "all devices, all access" rule cannot matter:
 * that rule decides the default.  Without one the default is allow, as a
 * fresh v1 devices cgroup has it. */
size_t
cgroup_device_rules_start (const struct cgroup_device_rule *rules, size_t n_rules, bool *default_allow)
{
  *default_allow = true;
  for (size_t i = n_rules; i-- > 0;)
    if (resets_default (&rules[i]))
      {
        *default_allow = rules[i].allow;
        return i + 1;
      }
  return 0;
}

/* An allow rule must cover every access asked for; a deny rule applies
 * as soon as it covers one of them. */
static bool
rule_matches (const struct cgroup_device_rule *rule, char type, uint32_t major, uint32_t minor,
              unsigned access)
{
  if (rule->type != 'a' && rule->type != type)
    return false;
  if (rule->major != ANY && (uint32_t) rule->major != major)
    return false;
  if (rule->minor != ANY && (uint32_t) rule->minor != minor)
    return false;
  return rule->allow ? (access & ~rule->access) == 0 : (access & rule->access) != 0;
}

bool
cgroup_device_allowed (const struct cgroup_device_rule *rules, size_t n_rules, char type, uint32_t major,
                       uint32_t minor, unsigned access)
{
  bool default_allow;
  size_t first = cgroup_device_rules_start (rules, n_rules, &default_allow);

  for (size_t i = n_rules; i-- > first;)
    if (rule_matches (&rules[i], type, major, minor, access))
      return rules[i].allow;
  return default_allow;
}

/* ------------------------------------------------------------ compiling */

/* Registers after the prologue: the device type, the access asked for,
 * major and minor; R1 (the context) is free for scratch. */
enum
{
  REG_RET = BPF_REG_0,
  REG_SCRATCH = BPF_REG_1,
  REG_TYPE = BPF_REG_2,
  REG_ACCESS = BPF_REG_3,
  REG_MAJOR = BPF_REG_4,
  REG_MINOR = BPF_REG_5,
};

static struct bpf_insn
insn (uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
  return (struct bpf_insn){ .code = code, .dst_reg = dst, .src_reg = src, .off = off, .imm = imm };
}

static struct bpf_insn
load_ctx_u32 (uint8_t dst, int16_t offset)
{
  return insn (BPF_LDX | BPF_MEM | BPF_W, dst, BPF_REG_1, offset, 0);
}

static struct bpf_insn
alu_imm (uint8_t op, uint8_t dst, int32_t imm)
{
  return insn (BPF_ALU64 | op | BPF_K, dst, 0, 0, imm);
}

static struct bpf_insn
mov_reg (uint8_t dst, uint8_t src)
{
  return insn (BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0);
}

/* 32-bit compares: majors and minors use the whole u32 range. */
static struct bpf_insn
jump_imm (uint8_t op, uint8_t dst, int32_t imm, int16_t skip)
{
  return insn (BPF_JMP32 | op | BPF_K, dst, 0, skip, imm);
}

static struct bpf_insn
exit_insn (void)
{
  return insn (BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
}

struct program
{
  struct bpf_insn *insns;
  size_t n, cap;
};

static void
emit (struct program *prog, struct bpf_insn one)
{
  if (prog->n == prog->cap)
    prog->insns = xrealloc (prog->insns, (prog->cap = prog->cap ? prog->cap * 2 : 64) * sizeof *prog->insns);
  prog->insns[prog->n++] = one;
}

static void
emit_prologue (struct program *prog)
{
  /* struct bpf_cgroup_dev_ctx: access_type = access << 16 | type, major, minor */
  emit (prog, load_ctx_u32 (REG_TYPE, offsetof (struct bpf_cgroup_dev_ctx, access_type)));
  emit (prog, mov_reg (REG_ACCESS, REG_TYPE));
  emit (prog, alu_imm (BPF_AND, REG_TYPE, 0xffff));
  emit (prog, alu_imm (BPF_RSH, REG_ACCESS, 16));
  emit (prog, load_ctx_u32 (REG_MAJOR, offsetof (struct bpf_cgroup_dev_ctx, major)));
  emit (prog, load_ctx_u32 (REG_MINOR, offsetof (struct bpf_cgroup_dev_ctx, minor)));
}

static void
emit_verdict (struct program *prog, bool allow)
{
  emit (prog, alu_imm (BPF_MOV, REG_RET, allow ? 1 : 0));
  emit (prog, exit_insn ());
}

static int32_t
bpf_access_bits (unsigned access)
{
  return (access & CGROUP_DEV_MKNOD ? BPF_DEVCG_ACC_MKNOD : 0)
         | (access & CGROUP_DEV_READ ? BPF_DEVCG_ACC_READ : 0)
         | (access & CGROUP_DEV_WRITE ? BPF_DEVCG_ACC_WRITE : 0);
}

/* One rule: a run of tests that each jump past the block on mismatch,
 * then the verdict.  The block's length is counted first so that every
 * jump knows where the block ends. */
static void
emit_rule (struct program *prog, const struct cgroup_device_rule *rule)
{
  bool check_type = rule->type != 'a', check_access = rule->access != CGROUP_DEV_ALL;
  bool check_major = rule->major != ANY, check_minor = rule->minor != ANY;
  size_t length = check_type + 3 * check_access + check_major + check_minor + 2;
  size_t end = prog->n + length;
  int32_t bits = bpf_access_bits (rule->access);

#define SKIP ((int16_t) (end - prog->n - 1))
  if (check_type)
    emit (prog,
          jump_imm (BPF_JNE, REG_TYPE, rule->type == 'c' ? BPF_DEVCG_DEV_CHAR : BPF_DEVCG_DEV_BLOCK, SKIP));
  if (check_access)
    {
      emit (prog, mov_reg (REG_SCRATCH, REG_ACCESS));
      if (rule->allow)
        {
          emit (prog, alu_imm (BPF_AND, REG_SCRATCH, ~bits & 0x7));
          emit (prog, jump_imm (BPF_JNE, REG_SCRATCH, 0, SKIP));
        }
      else
        {
          emit (prog, alu_imm (BPF_AND, REG_SCRATCH, bits));
          emit (prog, jump_imm (BPF_JEQ, REG_SCRATCH, 0, SKIP));
        }
    }
  if (check_major)
    emit (prog, jump_imm (BPF_JNE, REG_MAJOR, (int32_t) (uint32_t) rule->major, SKIP));
  if (check_minor)
    emit (prog, jump_imm (BPF_JNE, REG_MINOR, (int32_t) (uint32_t) rule->minor, SKIP));
#undef SKIP
  emit_verdict (prog, rule->allow);
}

void
cgroup_device_program (const struct cgroup_device_rule *rules, size_t n_rules, struct bpf_insn **insns,
                       size_t *n_insns, bool *allow_all)
{
  struct program prog = { 0 };
  bool default_allow;
  size_t first = cgroup_device_rules_start (rules, n_rules, &default_allow);

  *allow_all = default_allow;
  for (size_t i = first; i < n_rules; i++)
    *allow_all = *allow_all && rules[i].allow;
  *insns = NULL;
  *n_insns = 0;
  if (*allow_all)
    return;
  emit_prologue (&prog);
  /* Last matching rule wins: test them from the last one back. */
  for (size_t i = n_rules; i-- > first;)
    emit_rule (&prog, &rules[i]);
  emit_verdict (&prog, default_allow);
  *insns = prog.insns;
  *n_insns = prog.n;
}

/* ------------------------------------------------------- kernel side */

static int
bpf (int cmd, union bpf_attr *attr)
{
  return (int) syscall (SYS_bpf, cmd, attr, sizeof *attr);
}

static const char *
last_log_line (char *log)
{
  size_t len = strlen (log);

  while (len > 0 && log[len - 1] == '\n')
    log[--len] = '\0';
  return strrchr (log, '\n') ? strrchr (log, '\n') + 1 : log;
}

int
cgroup_device_program_load (const struct bpf_insn *insns, size_t n_insns, struct husk_error **err)
{
  static char log[4096];
  union bpf_attr attr;
  int fd;

  memset (&attr, 0, sizeof attr);
  attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  attr.insns = (uint64_t) (uintptr_t) insns;
  attr.insn_cnt = (uint32_t) n_insns;
  attr.license = (uint64_t) (uintptr_t) "Apache-2.0";
  fd = bpf (BPF_PROG_LOAD, &attr);
  if (fd >= 0)
    return fd;
  /* Load again with a log only to explain the refusal. */
  log[0] = '\0';
  attr.log_buf = (uint64_t) (uintptr_t) log;
  attr.log_size = sizeof log;
  attr.log_level = 1;
  fd = bpf (BPF_PROG_LOAD, &attr);
  if (fd >= 0)
    return fd;
  if (log[0])
    return husk_error_make (err, errno, "load the device filter (verifier: %s)", last_log_line (log));
  return husk_error_make (err, errno, "load the device filter (BPF_PROG_TYPE_CGROUP_DEVICE)");
}

struct cgroup_device_rule *
cgroup_device_rules_with_defaults (const struct cgroup_device_rule *rules, size_t n_rules, size_t *n_all)
{
  struct cgroup_device_rule *all;

  *n_all = n_rules + cgroup_n_default_device_rules;
  all = xcalloc (*n_all, sizeof *all);
  if (n_rules)
    memcpy (all, rules, n_rules * sizeof *rules);
  memcpy (all + n_rules, cgroup_default_device_rules, cgroup_n_default_device_rules * sizeof *rules);
  return all;
}

int
cgroup_devices_prepare (const struct cgroup_device_rule *rules, size_t n_rules, int *prog_fd,
                        struct husk_error **err)
{
  size_t n_all = 0, n_insns = 0;
  cleanup_free struct cgroup_device_rule *all = cgroup_device_rules_with_defaults (rules, n_rules, &n_all);
  cleanup_free struct bpf_insn *insns = NULL;
  bool allow_all;

  cgroup_device_program (all, n_all, &insns, &n_insns, &allow_all);
  *prog_fd = -1;
  if (allow_all)
    return 0;
  *prog_fd = cgroup_device_program_load (insns, n_insns, err);
  return *prog_fd < 0 ? -1 : 0;
}

/* Ids of the device programs attached directly to the cgroup. */
static int
attached_programs (int cgroup_fd, const char *path, uint32_t *ids, uint32_t *n_ids, struct husk_error **err)
{
  union bpf_attr attr;

  memset (&attr, 0, sizeof attr);
  attr.query.target_fd = (uint32_t) cgroup_fd;
  attr.query.attach_type = BPF_CGROUP_DEVICE;
  attr.query.prog_ids = (uint64_t) (uintptr_t) ids;
  attr.query.prog_cnt = *n_ids;
  if (bpf (BPF_PROG_QUERY, &attr) < 0)
    return husk_error_make (err, errno, "query the device programs of cgroup `%s`", path);
  *n_ids = attr.query.prog_cnt;
  return 0;
}

static int
detach_program (int cgroup_fd, uint32_t id, const char *path, struct husk_error **err)
{
  union bpf_attr attr;
  cleanup_close int prog_fd = -1;

  memset (&attr, 0, sizeof attr);
  attr.prog_id = id;
  prog_fd = bpf (BPF_PROG_GET_FD_BY_ID, &attr);
  if (prog_fd < 0)
    return errno == ENOENT ? 0 : husk_error_make (err, errno, "open device program %u", id);
  memset (&attr, 0, sizeof attr);
  attr.target_fd = (uint32_t) cgroup_fd;
  attr.attach_bpf_fd = (uint32_t) prog_fd;
  attr.attach_type = BPF_CGROUP_DEVICE;
  if (bpf (BPF_PROG_DETACH, &attr) < 0 && errno != ENOENT)
    return husk_error_make (err, errno, "detach the old device filter from cgroup `%s`", path);
  return 0;
}

int
cgroup_devices_attach (const char *path, int prog_fd, struct husk_error **err)
{
  cleanup_close int cgroup_fd = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  uint32_t ids[64], n_ids = 64;
  union bpf_attr attr;

  if (cgroup_fd < 0)
    return husk_error_make (err, errno, "open cgroup `%s`", path);
  if (attached_programs (cgroup_fd, path, ids, &n_ids, err) < 0)
    return -1;
  if (prog_fd >= 0)
    {
      memset (&attr, 0, sizeof attr);
      attr.target_fd = (uint32_t) cgroup_fd;
      attr.attach_bpf_fd = (uint32_t) prog_fd;
      attr.attach_type = BPF_CGROUP_DEVICE;
      attr.attach_flags = BPF_F_ALLOW_MULTI;
      if (bpf (BPF_PROG_ATTACH, &attr) < 0)
        return husk_error_make (err, errno, "attach the device filter to cgroup `%s`", path);
    }
  /* The new filter is in place first, so there is no unfiltered moment. */
  for (uint32_t i = 0; i < n_ids && i < 64; i++)
    if (detach_program (cgroup_fd, ids[i], path, err) < 0)
      return -1;
  return 0;
}
