/* Unit tests for runtime/security.c and runtime/seccomp.c.  Every check that
 * changes the process (filters, capabilities, ids, limits) runs in a forked
 * child, which reports through its exit status, so the test process keeps
 * its privileges. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <seccomp.h>

#include <setjmp.h>
#include <cmocka.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/security.h"

#define CAPBIT(cap) (1ULL << (cap))

/* In a child: print what failed and exit non-zero. */
#define CHECK(cond)                                                                                          \
  do                                                                                                         \
    {                                                                                                        \
      if (!(cond))                                                                                           \
        {                                                                                                    \
          fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                          \
          return 1;                                                                                          \
        }                                                                                                    \
    }                                                                                                        \
  while (0)

#define CHECK_OK(call)                                                                                       \
  do                                                                                                         \
    {                                                                                                        \
      struct husk_error *check_err_ = NULL;                                                                  \
      if ((call) < 0)                                                                                        \
        {                                                                                                    \
          fprintf (stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,                              \
                   check_err_ ? check_err_->msg : "(no error)");                                             \
          return 1;                                                                                          \
        }                                                                                                    \
    }                                                                                                        \
  while (0)
#define ERR (&check_err_)

/* A syscall's errno, or 0 when it succeeded. */
#define SYSCALL_ERRNO(...) (syscall (__VA_ARGS__) < 0 ? errno : 0)

/* Runs BODY in a forked child; returns its wait status, so a test can clean
 * up before it asserts with assert_child_ok. */
static int
run_child (int (*body) (void *), void *data)
{
  int status = 0;
  pid_t pid;

  fflush (stdout);
  fflush (stderr);
  pid = fork ();
  if (pid < 0)
    return -1;
  if (pid == 0)
    _exit (body (data));
  if (waitpid (pid, &status, 0) != pid)
    return -1;
  return status;
}

static void
assert_child_ok (int status)
{
  assert_true (status != -1);
  if (WIFSIGNALED (status))
    fail_msg ("child killed by signal %d", WTERMSIG (status));
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 0);
}

static void
run_in_child (int (*body) (void *), void *data)
{
  assert_child_ok (run_child (body, data));
}

static bool
msg_is (struct husk_error *err, const char *expected)
{
  if (err && strcmp (err->msg, expected) == 0)
    return true;
  fprintf (stderr, "error is `%s`, expected `%s`\n", err ? err->msg : "(none)", expected);
  return false;
}

/* Warnings go to a memfd while CAPTURE is set up; read them back after. */
static int
log_capture_start (void)
{
  int fd = memfd_create ("husk-test-log", MFD_CLOEXEC);

  assert_true (fd >= 0);
  husk_log_set_file (fd, 0);
  return fd;
}

static char *
log_capture_stop (int fd)
{
  char *text = NULL;

  husk_log_set_file (2, 0);
  assert_int_equal (lseek (fd, 0, SEEK_SET), 0);
  assert_int_equal (husk_read_fd (fd, &text, NULL, "log memfd", NULL), 0);
  close (fd);
  return text;
}

/* Compiles SECCOMP with warnings captured; returns them (caller frees).  A
 * failure fails the test, after freeing what it holds. */
static char *
compile_ok (const struct spec_seccomp *seccomp, struct seccomp_program *program)
{
  struct husk_error *err = NULL;
  int log_fd = log_capture_start ();
  int rc = seccomp_compile (seccomp, program, &err);
  char *log = log_capture_stop (log_fd);
  char msg[512];

  if (rc == 0 && err == NULL)
    return log;
  snprintf (msg, sizeof msg, "%s", err ? err->msg : "(no error set)");
  husk_error_free (&err);
  free (log);
  fail_msg ("seccomp_compile: %s", msg);
  return NULL;
}

static uint64_t
status_hex (const char *field)
{
  cleanup_free char *text = NULL;
  char *line;

  if (husk_read_file ("/proc/self/status", &text, NULL, NULL) < 0)
    return ~0ULL;
  for (line = text; line; line = strchr (line, '\n') ? strchr (line, '\n') + 1 : NULL)
    if (husk_str_has_prefix (line, field) && line[strlen (field)] == ':')
      return strtoull (line + strlen (field) + 1, NULL, 16);
  return ~0ULL;
}

/* Test setup that must not depend on the code under test: clears one
 * capability from the effective set with libcap directly. */
static int
drop_effective_cap (cap_value_t cap)
{
  cap_t caps = cap_get_proc ();
  int rc;

  if (caps == NULL)
    return -1;
  rc = cap_set_flag (caps, CAP_EFFECTIVE, 1, &cap, CAP_CLEAR);
  if (rc == 0)
    rc = cap_set_proc (caps);
  cap_free (caps);
  return rc;
}

/* ---- seccomp ---- */

struct errno_profile
{
  char *mkdir_names[3];
  char *dup_names[2];
  char *dup3_names[2];
  char *getpid_names[2];
  struct spec_seccomp_arg dup_args[2];
  struct spec_seccomp_arg dup3_args[2];
  struct spec_seccomp_rule rules[4];
  struct spec_seccomp seccomp;
};

/* Default allow; mkdir -> EPERM; dup(100) or dup(101) -> EXDEV (two
 * conditions on one argument); dup3(100, 200) -> ENOTTY (two arguments);
 * getpid -> allow, the default, which must be skipped. */
static void
errno_profile_init (struct errno_profile *p)
{
  memset (p, 0, sizeof *p);
  p->mkdir_names[0] = "mkdir";
  p->mkdir_names[1] = "no_such_syscall_husk";
  p->dup_names[0] = "dup";
  p->dup3_names[0] = "dup3";
  p->getpid_names[0] = "getpid";
  p->dup_args[0] = (struct spec_seccomp_arg){ .index = 0, .value = 100, .op = SCMP_CMP_EQ };
  p->dup_args[1] = (struct spec_seccomp_arg){ .index = 0, .value = 101, .op = SCMP_CMP_EQ };
  p->dup3_args[0] = (struct spec_seccomp_arg){ .index = 0, .value = 100, .op = SCMP_CMP_EQ };
  p->dup3_args[1] = (struct spec_seccomp_arg){ .index = 1, .value = 200, .op = SCMP_CMP_EQ };
  p->rules[0] = (struct spec_seccomp_rule){ .names = p->mkdir_names, .action = SCMP_ACT_ERRNO (EPERM) };
  p->rules[1] = (struct spec_seccomp_rule){
    .names = p->dup_names, .action = SCMP_ACT_ERRNO (EXDEV), .args = p->dup_args, .n_args = 2
  };
  p->rules[2] = (struct spec_seccomp_rule){
    .names = p->dup3_names, .action = SCMP_ACT_ERRNO (ENOTTY), .args = p->dup3_args, .n_args = 2
  };
  p->rules[3] = (struct spec_seccomp_rule){ .names = p->getpid_names, .action = SCMP_ACT_ALLOW };
  p->seccomp.default_action = SCMP_ACT_ALLOW;
  p->seccomp.rules = p->rules;
  p->seccomp.n_rules = 4;
}

struct errno_child
{
  const struct seccomp_program *program;
  const char *dir; /* made and removed by the parent */
};

static int
child_errno_profile (void *data)
{
  const struct errno_child *child = data;
  cleanup_free char *sub = xasprintf ("%s/sub", child->dir);

  CHECK_OK (seccomp_program_load (child->program, ERR));
  CHECK (SYSCALL_ERRNO (SYS_mkdir, sub, 0755) == EPERM);
  CHECK (SYSCALL_ERRNO (SYS_dup, 100) == EXDEV);
  CHECK (SYSCALL_ERRNO (SYS_dup, 101) == EXDEV);
  CHECK (SYSCALL_ERRNO (SYS_dup, 102) == EBADF);
  CHECK (SYSCALL_ERRNO (SYS_dup3, 100, 200, 0) == ENOTTY);
  CHECK (SYSCALL_ERRNO (SYS_dup3, 100, 201, 0) == EBADF);
  CHECK (syscall (SYS_getpid) == getpid ());
  return 0;
}

static void
test_seccomp_errno_rules (void **state)
{
  struct errno_profile profile;
  struct seccomp_program program;
  char dir[] = "/tmp/husk-seccomp-XXXXXX";
  struct errno_child child = { .program = &program, .dir = dir };
  char *log;
  bool warned, compiled;
  int status;

  errno_profile_init (&profile);
  log = compile_ok (&profile.seccomp, &program);
  warned = strstr (log, "seccomp: unknown syscall `no_such_syscall_husk`, skipped") != NULL;
  free (log);
  compiled = program.len > 0 && program.flags == 0;
  if (!warned || !compiled)
    seccomp_program_clear (&program);
  assert_true (warned);
  assert_true (compiled);
  assert_non_null (mkdtemp (dir));
  status = run_child (child_errno_profile, &child);
  seccomp_program_clear (&program);
  husk_rm_rf (dir, NULL);
  assert_child_ok (status);
  assert_null (program.filter);
  assert_int_equal (program.len, 0);
}

static int
child_allow_list (void *data)
{
  const struct seccomp_program *program = data;

  CHECK_OK (seccomp_program_load (program, ERR));
  CHECK (syscall (SYS_getpid) > 0);
  CHECK (SYSCALL_ERRNO (SYS_getppid) == ENOSYS);
  CHECK (SYSCALL_ERRNO (SYS_getuid) == ENOSYS);
  return 0;
}

static void
test_seccomp_allow_list (void **state)
{
  /* sigaltstack, mmap, munmap: what ASan's runtime needs on the way out
   * (`make sanitize`); none is what the child asserts on. */
  char *allowed[]
      = { "exit_group", "exit", "write", "getpid", "rt_sigreturn", "sigaltstack", "mmap", "munmap", NULL };
  uint32_t archs[] = { SCMP_ARCH_NATIVE, SCMP_ARCH_X86_64, SCMP_ARCH_X86, SCMP_ARCH_X32 };
  struct spec_seccomp_rule rule = { .names = allowed, .action = SCMP_ACT_ALLOW };
  struct spec_seccomp seccomp = {
    .default_action = SCMP_ACT_ERRNO (ENOSYS), .archs = archs, .n_archs = 4, .rules = &rule, .n_rules = 1
  };
  struct seccomp_program program;
  int status;

  free (compile_ok (&seccomp, &program));
  status = run_child (child_allow_list, &program);
  seccomp_program_clear (&program);
  assert_child_ok (status);
}

static int
child_load_ok (void *data)
{
  CHECK_OK (seccomp_program_load (data, ERR));
  CHECK (SYSCALL_ERRNO (SYS_mkdir, "/", 0755) == EPERM);
  return 0;
}

static void
test_seccomp_flags (void **state)
{
  unsigned all = SECCOMP_FILTER_FLAG_TSYNC | SECCOMP_FILTER_FLAG_LOG | SECCOMP_FILTER_FLAG_SPEC_ALLOW;
  struct errno_profile profile;
  struct seccomp_program program;
  int status;

  errno_profile_init (&profile);
  profile.seccomp.flags = all | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
  free (compile_ok (&profile.seccomp, &program));
  /* WAIT_KILLABLE_RECV only matters to a notify listener: dropped. */
  assert_int_equal (program.flags, all);
  status = run_child (child_load_ok, &program);
  seccomp_program_clear (&program);
  assert_child_ok (status);
}

static void
expect_compile_error (struct spec_seccomp *seccomp, const char *expected)
{
  struct seccomp_program program;
  struct husk_error *err = NULL;
  int log_fd = log_capture_start ();
  int rc = seccomp_compile (seccomp, &program, &err);
  bool matches;

  free (log_capture_stop (log_fd));
  matches = rc == -1 && msg_is (err, expected);
  husk_error_free (&err);
  assert_true (matches);
  assert_null (program.filter);
  assert_int_equal (program.len, 0);
}

static void
test_seccomp_compile_errors (void **state)
{
  char *read_names[] = { "read", NULL };
  uint32_t bad_arch = 0x12345;
  struct spec_seccomp_arg bad_op = { .index = 0, .value = 1, .op = 99 };
  struct spec_seccomp_arg bad_index = { .index = 6, .value = 1, .op = SCMP_CMP_EQ };
  struct spec_seccomp_rule rule = { .names = read_names, .action = SCMP_ACT_ERRNO (EPERM) };
  struct spec_seccomp seccomp = { .default_action = SCMP_ACT_ALLOW, .rules = &rule, .n_rules = 1 };

  seccomp.archs = &bad_arch;
  seccomp.n_archs = 1;
  expect_compile_error (&seccomp, "seccomp: add arch 0x12345: Invalid argument");
  seccomp.n_archs = 0;

  rule.args = &bad_op;
  rule.n_args = 1;
  expect_compile_error (&seccomp, "seccomp: syscall `read` rule: Invalid argument");
  rule.args = &bad_index;
  expect_compile_error (&seccomp, "seccomp: syscall `read` rule: argument index 6: Invalid argument");
  rule.n_args = 0;

  rule.action = SCMP_ACT_NOTIFY;
  expect_compile_error (&seccomp,
                        "seccomp: syscalls[0]: action SCMP_ACT_NOTIFY needs a listener, not supported");
  rule.action = SCMP_ACT_ERRNO (EPERM);

  seccomp.flags = 1u << 20;
  expect_compile_error (&seccomp, "seccomp: unsupported filter flags 0x100000");
  seccomp.flags = 0;

  seccomp.listener_path = "/run/listener.sock";
  expect_compile_error (&seccomp, "seccomp: listenerPath `/run/listener.sock`: not supported");
}

/* The same syscall and condition with two different actions. */
static void
test_seccomp_conflicting_rules (void **state)
{
  char *write_names[] = { "write", NULL };
  struct spec_seccomp_arg fd_one = { .index = 0, .value = 1, .op = SCMP_CMP_EQ };
  struct spec_seccomp_rule rules[] = {
    { .names = write_names, .action = SCMP_ACT_ERRNO (EIO), .args = &fd_one, .n_args = 1 },
    { .names = write_names, .action = SCMP_ACT_ALLOW, .args = &fd_one, .n_args = 1 },
  };
  struct spec_seccomp seccomp = { .default_action = SCMP_ACT_ERRNO (EPERM), .rules = rules, .n_rules = 2 };

  expect_compile_error (&seccomp,
                        "seccomp: syscall `write` rule: conflicts with an earlier rule for it: File exists");
}

static void
test_seccomp_absent (void **state)
{
  struct seccomp_program program = { .len = 7 };
  struct husk_error *err = NULL;

  assert_int_equal (seccomp_compile (NULL, &program, &err), 0);
  assert_null (program.filter);
  assert_int_equal (program.len, 0);
  assert_int_equal (seccomp_program_load (&program, &err), 0);
  assert_null (err);
  seccomp_program_clear (&program);
}

/* Without CAP_SYS_ADMIN the kernel wants no_new_privs first. */
static int
child_load_needs_privilege (void *data)
{
  struct spec_process process = { .has_capabilities = true };
  struct husk_error *err = NULL;

  process.caps.effective = process.caps.permitted = process.caps.bounding = CAPBIT (CAP_KILL);
  CHECK_OK (security_drop_bounding (&process, ERR));
  CHECK_OK (security_apply_caps (&process, ERR));
  CHECK (seccomp_program_load (data, &err) == -1);
  CHECK (err && err->errnum == EACCES);
  CHECK (msg_is (err, "seccomp: load filter (needs no_new_privs or CAP_SYS_ADMIN): Permission denied"));
  husk_error_free (&err);
  process.no_new_privileges = true;
  CHECK_OK (security_apply_no_new_privs (&process, ERR));
  return child_load_ok (data);
}

static void
test_seccomp_load_needs_privilege (void **state)
{
  struct errno_profile profile;
  struct seccomp_program program;
  int status;

  errno_profile_init (&profile);
  free (compile_ok (&profile.seccomp, &program));
  status = run_child (child_load_needs_privilege, &program);
  seccomp_program_clear (&program);
  assert_child_ok (status);
}

/* Without no_new_privs the filter goes in while init still holds
 * CAP_SYS_ADMIN, before the user switch and the capability sets; the
 * profile must then allow what those steps call (it does: default allow). */
static int
child_load_before_user_switch (void *data)
{
  struct spec_process process = { .user = { .uid = 1000, .gid = 1000 }, .has_capabilities = true };

  process.caps.bounding = process.caps.effective = process.caps.permitted = CAPBIT (CAP_KILL);
  CHECK_OK (security_drop_bounding (&process, ERR));
  CHECK_OK (seccomp_program_load (data, ERR));
  CHECK_OK (security_apply_user (&process, ERR));
  CHECK_OK (security_apply_caps (&process, ERR));
  CHECK (prctl (PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 0);
  CHECK (getuid () == 1000);
  CHECK (status_hex ("CapEff") == CAPBIT (CAP_KILL));
  CHECK (SYSCALL_ERRNO (SYS_mkdir, "/", 0755) == EPERM);
  return 0;
}

static void
test_seccomp_load_before_user_switch (void **state)
{
  struct errno_profile profile;
  struct seccomp_program program;
  int status;

  errno_profile_init (&profile);
  free (compile_ok (&profile.seccomp, &program));
  status = run_child (child_load_before_user_switch, &program);
  seccomp_program_clear (&program);
  assert_child_ok (status);
}

/* ---- rlimits ---- */

static int
child_rlimits (void *data)
{
  struct spec_rlimit limits[] = {
    { .resource = RLIMIT_NOFILE, .soft = 256, .hard = 512 },
    { .resource = RLIMIT_CORE, .soft = 0, .hard = 0 },
  };
  struct spec_process process = { .rlimits = limits, .n_rlimits = 2 };
  struct spec_rlimit raise_hard = { .resource = RLIMIT_NOFILE, .soft = 10, .hard = 513 };
  struct husk_error *err = NULL;
  struct rlimit now;

  CHECK_OK (security_apply_rlimits (&process, ERR));
  CHECK (getrlimit (RLIMIT_NOFILE, &now) == 0);
  CHECK (now.rlim_cur == 256 && now.rlim_max == 512);
  CHECK (getrlimit (RLIMIT_CORE, &now) == 0);
  CHECK (now.rlim_cur == 0 && now.rlim_max == 0);

  /* Raising a hard limit needs CAP_SYS_RESOURCE. */
  CHECK (drop_effective_cap (CAP_SYS_RESOURCE) == 0);
  process.rlimits = &raise_hard;
  process.n_rlimits = 1;
  CHECK (security_apply_rlimits (&process, &err) == -1);
  CHECK (msg_is (err, "setrlimit RLIMIT_NOFILE (soft 10, hard 513): Operation not permitted"));
  husk_error_free (&err);
  return 0;
}

static void
test_rlimits (void **state)
{
  run_in_child (child_rlimits, NULL);
}

/* ---- oom_score_adj ---- */

static int
read_oom (void)
{
  cleanup_free char *text = NULL;

  if (husk_read_file ("/proc/self/oom_score_adj", &text, NULL, NULL) < 0)
    return -2000;
  return atoi (text);
}

static int
child_oom (void *data)
{
  struct spec_process process = { .has_oom_score_adj = true };
  struct husk_error *err = NULL;
  cleanup_free char *log = NULL;
  int start = read_oom (), raised, log_fd;

  CHECK (start > -1000 && start <= 1000);
  CHECK (drop_effective_cap (CAP_SYS_RESOURCE) == 0);
  raised = start < 1000 ? start + 1 : 1000;
  process.oom_score_adj = raised;
  CHECK_OK (security_apply_oom_score_adj (&process, ERR));
  CHECK (read_oom () == raised);

  process.oom_score_adj = -1000;
  log_fd = memfd_create ("log", MFD_CLOEXEC);
  husk_log_set_file (log_fd, 0);
  CHECK_OK (security_apply_oom_score_adj (&process, ERR));
  husk_log_set_file (2, 0);
  CHECK (read_oom () == raised);
  CHECK (lseek (log_fd, 0, SEEK_SET) == 0);
  CHECK (husk_read_fd (log_fd, &log, NULL, "log", NULL) == 0);
  CHECK (strstr (log, "warning: oom_score_adj: cannot lower it from") != NULL);

  process.oom_score_adj = 5000;
  CHECK (security_apply_oom_score_adj (&process, &err) == -1);
  CHECK (msg_is (err, "set oom_score_adj to 5000: write `/proc/self/oom_score_adj`: Invalid argument"));
  husk_error_free (&err);

  process.has_oom_score_adj = false;
  CHECK_OK (security_apply_oom_score_adj (&process, ERR));
  CHECK (read_oom () == raised);
  return 0;
}

static void
test_oom_score_adj (void **state)
{
  run_in_child (child_oom, NULL);
}

/* ---- sysctls ---- */

static int
child_sysctls (void *data)
{
  struct spec_sysctl sysctls[] = {
    { "kernel.hostname", "husk-sysctl" },
    { "kernel/domainname", "husk.test" },
    { "kernel.msgmax", "12345" },
  };
  struct spec spec = { .sysctls = sysctls, .n_sysctls = 3 };
  struct spec_sysctl unknown = { "kernel.no_such_key_husk", "1" };
  struct spec_sysctl climbing = { "kernel/../../self/oom_score_adj", "1" };
  struct husk_error *err = NULL;
  cleanup_free char *msgmax = NULL;
  struct utsname names;

  CHECK (unshare (CLONE_NEWUTS | CLONE_NEWIPC) == 0);
  CHECK_OK (security_apply_sysctls (&spec, ERR));
  CHECK (uname (&names) == 0);
  CHECK (strcmp (names.nodename, "husk-sysctl") == 0);
  CHECK (strcmp (names.domainname, "husk.test") == 0);
  CHECK (husk_read_file ("/proc/sys/kernel/msgmax", &msgmax, NULL, NULL) == 0);
  CHECK (strcmp (msgmax, "12345\n") == 0);

  spec.sysctls = &unknown;
  spec.n_sysctls = 1;
  CHECK (security_apply_sysctls (&spec, &err) == -1);
  CHECK (msg_is (err, "sysctl `kernel.no_such_key_husk`: open `/proc/sys/kernel/no_such_key_husk`: No such "
                      "file or directory"));
  husk_error_free (&err);
  spec.sysctls = &climbing;
  CHECK (security_apply_sysctls (&spec, &err) == -1);
  CHECK (msg_is (err, "sysctl `kernel/../../self/oom_score_adj`: bad key: Invalid argument"));
  husk_error_free (&err);
  return 0;
}

static void
test_sysctls (void **state)
{
  run_in_child (child_sysctls, NULL);
}

/* Which namespace holds which key: a key no namespace of the container
 * holds is refused before anything is made, whatever its value. */
static void
test_sysctl_namespace_check (void **state)
{
  struct spec_sysctl sysctl = { .value = "1" };
  struct spec spec = { .sysctls = &sysctl, .n_sysctls = 1 };
  struct husk_error *err = NULL;
  static const struct
  {
    const char *key;
    enum spec_ns_type needs; /* SPEC_NS_COUNT: refused whatever the namespaces */
  } cases[] = {
    { "net.ipv4.ip_forward", SPEC_NS_NETWORK },
    { "net/core/somaxconn", SPEC_NS_NETWORK },
    { "kernel.shmmax", SPEC_NS_IPC },
    { "kernel.msgmnb", SPEC_NS_IPC },
    { "kernel.sem", SPEC_NS_IPC },
    { "fs.mqueue.queues_max", SPEC_NS_IPC },
    { "kernel.hostname", SPEC_NS_UTS },
    { "kernel.domainname", SPEC_NS_UTS },
    { "vm.stat_interval", SPEC_NS_COUNT },
    { "kernel.core_pattern", SPEC_NS_COUNT },
    { "kernel.shm_next_id_x", SPEC_NS_COUNT },
    { "fs.file-max", SPEC_NS_COUNT },
  };

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      sysctl.key = (char *) cases[i].key;
      memset (spec.namespaces, 0, sizeof spec.namespaces);
      assert_int_equal (security_check_sysctls (&spec, &err), -1);
      assert_non_null (strstr (err->msg, cases[i].key));
      husk_error_free (&err);
      for (int ns = 0; ns < SPEC_NS_COUNT; ns++)
        spec.namespaces[ns].present = ns != (int) cases[i].needs;
      assert_int_equal (security_check_sysctls (&spec, &err), -1);
      husk_error_free (&err);
      if (cases[i].needs == SPEC_NS_COUNT)
        continue;
      spec.namespaces[cases[i].needs].present = true;
      if (security_check_sysctls (&spec, &err) < 0)
        fail_msg ("%s with its namespace: %s", cases[i].key, err->msg);
      /* Joining our own namespace by path is no namespace of its own. */
      spec.namespaces[cases[i].needs].path = (char *) (cases[i].needs == SPEC_NS_NETWORK ? "/proc/self/ns/net"
                                                       : cases[i].needs == SPEC_NS_IPC   ? "/proc/self/ns/ipc"
                                                                                       : "/proc/self/ns/uts");
      assert_int_equal (security_check_sysctls (&spec, &err), -1);
      husk_error_free (&err);
      spec.namespaces[cases[i].needs].path = NULL;
    }
  sysctl.key = "net/../../kernel/core_pattern";
  spec.namespaces[SPEC_NS_NETWORK].present = true;
  assert_int_equal (security_check_sysctls (&spec, &err), -1);
  husk_error_free (&err);
}

/* ---- capabilities and user ---- */

static int
child_caps_exact (void *data)
{
  struct spec_process process = { .has_capabilities = true };
  uint64_t wanted = CAPBIT (CAP_KILL) | CAPBIT (CAP_CHOWN);

  process.caps.bounding = process.caps.effective = process.caps.permitted = wanted;
  CHECK_OK (security_drop_bounding (&process, ERR));
  CHECK (status_hex ("CapBnd") == wanted);
  CHECK_OK (security_apply_caps (&process, ERR));
  CHECK (status_hex ("CapEff") == wanted);
  CHECK (status_hex ("CapPrm") == wanted);
  CHECK (status_hex ("CapInh") == 0);
  CHECK (status_hex ("CapAmb") == 0);
  CHECK (status_hex ("CapBnd") == wanted);
  return 0;
}

static void
test_caps_exact (void **state)
{
  run_in_child (child_caps_exact, NULL);
}

static int
child_caps_absent (void *data)
{
  struct spec_process process = { .has_capabilities = false };
  uint64_t bounding = status_hex ("CapBnd"), effective = status_hex ("CapEff");

  CHECK_OK (security_drop_bounding (&process, ERR));
  CHECK_OK (security_apply_caps (&process, ERR));
  CHECK (status_hex ("CapBnd") == bounding);
  CHECK (status_hex ("CapEff") == effective);
  return 0;
}

static void
test_caps_absent (void **state)
{
  run_in_child (child_caps_absent, NULL);
}

static int
child_caps_errors (void *data)
{
  struct spec_process process = { .has_capabilities = true };
  struct husk_error *err = NULL;

  process.caps.bounding = ~0ULL;
  process.caps.permitted = CAPBIT (CAP_KILL);
  process.caps.effective = CAPBIT (CAP_KILL) | CAPBIT (CAP_CHOWN);
  CHECK (security_apply_caps (&process, &err) == -1);
  CHECK (msg_is (err,
                 "set capabilities: effective set is not within the permitted set: Operation not permitted"));
  husk_error_free (&err);

  /* Ambient without inheritable (as `runc spec` writes it) is skipped, as
   * runc does, rather than failing the container. */
  process.caps.effective = CAPBIT (CAP_KILL);
  process.caps.ambient = CAPBIT (CAP_KILL);
  CHECK_OK (security_apply_caps (&process, ERR));
  CHECK (status_hex ("CapAmb") == 0);

  /* Now only CAP_KILL is permitted: CAP_CHOWN cannot come back. */
  process.caps.permitted = process.caps.effective = CAPBIT (CAP_KILL) | CAPBIT (CAP_CHOWN);
  process.caps.ambient = 0;
  CHECK (security_apply_caps (&process, &err) == -1);
  CHECK (msg_is (err,
                 "set capabilities: permitted set is not within the current permitted set: Operation not "
                 "permitted"));
  husk_error_free (&err);
  return 0;
}

static void
test_caps_errors (void **state)
{
  run_in_child (child_caps_errors, NULL);
}

/* The switch to uid 1000 keeps what the spec grants, and the ambient set
 * carries CAP_KILL across execve of an ordinary binary. */
static int
child_user_keeps_caps (void *data)
{
  gid_t gids[] = { 10, 20 };
  struct spec_process process = {
    .user = { .uid = 1000,
              .gid = 1001,
              .has_umask = true,
              .umask = 027,
              .additional_gids = gids,
              .n_additional_gids = 2 },
    .has_capabilities = true,
  };
  uint64_t wanted = CAPBIT (CAP_KILL) | CAPBIT (CAP_CHOWN);
  char *shell_argv[]
      = { "sh", "-c", "grep -q '^CapEff:[[:space:]]*0000000000000020$' /proc/self/status", NULL };
  char *shell_env[] = { "PATH=/usr/bin:/bin", NULL };
  gid_t groups[8];
  uid_t ruid, euid, suid;
  gid_t rgid, egid, sgid;

  process.caps.bounding = process.caps.effective = process.caps.permitted = wanted;
  process.caps.inheritable = process.caps.ambient = CAPBIT (CAP_KILL);
  CHECK_OK (security_drop_bounding (&process, ERR));
  CHECK_OK (security_apply_user (&process, ERR));
  CHECK (getresuid (&ruid, &euid, &suid) == 0 && ruid == 1000 && euid == 1000 && suid == 1000);
  CHECK (getresgid (&rgid, &egid, &sgid) == 0 && rgid == 1001 && egid == 1001 && sgid == 1001);
  CHECK (getgroups (8, groups) == 2 && groups[0] == 10 && groups[1] == 20);
  CHECK (umask (0) == 027);
  CHECK (prctl (PR_GET_KEEPCAPS, 0, 0, 0, 0) == 0);
  /* Keep-caps kept the permitted set; the effective one is always cleared. */
  CHECK ((status_hex ("CapPrm") & wanted) == wanted);
  CHECK (status_hex ("CapEff") == 0);
  CHECK_OK (security_apply_caps (&process, ERR));
  CHECK (status_hex ("CapEff") == wanted);
  CHECK (status_hex ("CapPrm") == wanted);
  CHECK (status_hex ("CapAmb") == CAPBIT (CAP_KILL));
  execve ("/bin/sh", shell_argv, shell_env);
  return 100;
}

static void
test_user_keeps_caps (void **state)
{
  run_in_child (child_user_keeps_caps, NULL);
}

/* A user namespace with setgroups denied: an empty group list is fine, a
 * non-empty one is a clear error. */
static int
child_user_setgroups_denied (void *data)
{
  gid_t gids[] = { 0 };
  struct spec_process process = { .user = { .uid = 0, .gid = 0 } };
  struct husk_error *err = NULL;
  cleanup_free char *uid_map = xasprintf ("0 %u 1\n", (unsigned) getuid ());
  cleanup_free char *gid_map = xasprintf ("0 %u 1\n", (unsigned) getgid ());

  CHECK (unshare (CLONE_NEWUSER) == 0);
  CHECK_OK (husk_write_file ("/proc/self/setgroups", "deny", 4, ERR));
  CHECK_OK (husk_write_file ("/proc/self/uid_map", uid_map, strlen (uid_map), ERR));
  CHECK_OK (husk_write_file ("/proc/self/gid_map", gid_map, strlen (gid_map), ERR));
  CHECK_OK (security_apply_user (&process, ERR));
  process.user.additional_gids = gids;
  process.user.n_additional_gids = 1;
  CHECK (security_apply_user (&process, &err) == -1);
  CHECK (msg_is (err, "setgroups (1 additional gids): Operation not permitted"));
  husk_error_free (&err);
  return 0;
}

static void
test_user_setgroups_denied (void **state)
{
  run_in_child (child_user_setgroups_denied, NULL);
}

static int
child_no_new_privs (void *data)
{
  struct spec_process process = { .no_new_privileges = false };

  CHECK_OK (security_apply_no_new_privs (&process, ERR));
  CHECK (prctl (PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 0);
  process.no_new_privileges = true;
  CHECK_OK (security_apply_no_new_privs (&process, ERR));
  CHECK (prctl (PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1);
  return 0;
}

static void
test_no_new_privs (void **state)
{
  run_in_child (child_no_new_privs, NULL);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_seccomp_errno_rules),
    cmocka_unit_test (test_seccomp_allow_list),
    cmocka_unit_test (test_seccomp_flags),
    cmocka_unit_test (test_seccomp_compile_errors),
    cmocka_unit_test (test_seccomp_absent),
    cmocka_unit_test (test_seccomp_load_needs_privilege),
    cmocka_unit_test (test_seccomp_load_before_user_switch),
    cmocka_unit_test (test_seccomp_conflicting_rules),
    cmocka_unit_test (test_rlimits),
    cmocka_unit_test (test_oom_score_adj),
    cmocka_unit_test (test_sysctls),
    cmocka_unit_test (test_sysctl_namespace_check),
    cmocka_unit_test (test_caps_exact),
    cmocka_unit_test (test_caps_absent),
    cmocka_unit_test (test_caps_errors),
    cmocka_unit_test (test_user_keeps_caps),
    cmocka_unit_test (test_user_setgroups_denied),
    cmocka_unit_test (test_no_new_privs),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
