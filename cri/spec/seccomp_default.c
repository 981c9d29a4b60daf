/* The RuntimeDefault seccomp profile as one table of rule families: what
 * moby's and containerd's default profile allows (everything else fails
 * with EPERM), plus the few denials husk already made that are stricter. */
#include <errno.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#include <seccomp.h>

#include "cri/spec/seccomp_default.h"

#define N_ELEMENTS(a) (sizeof (a) / sizeof ((a)[0]))
#define NO_CAP -1

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

/* clone(2) flags that make a namespace: refused without CAP_SYS_ADMIN. */
#define CLONE_NAMESPACE_FLAGS                                                                                \
  ((unsigned long long) (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER         \
                         | CLONE_NEWPID | CLONE_NEWNET))

/* The plain allow-list: the syscalls of moby's default profile that need
 * no capability.  Not in it, so refused: io_uring_*, keyctl, add_key,
 * request_key, userfaultfd (unless CAP_SYS_PTRACE), ustat, uselib, vm86... */
static const char *const allowed_always[] = {
  "accept",
  "accept4",
  "access",
  "adjtimex",
  "alarm",
  "bind",
  "brk",
  "cachestat",
  "capget",
  "capset",
  "chdir",
  "chmod",
  "chown",
  "chown32",
  "clock_getres",
  "clock_getres_time64",
  "clock_gettime",
  "clock_gettime64",
  "clock_nanosleep",
  "clock_nanosleep_time64",
  "close",
  "close_range",
  "connect",
  "copy_file_range",
  "creat",
  "dup",
  "dup2",
  "dup3",
  "epoll_create",
  "epoll_create1",
  "epoll_ctl",
  "epoll_ctl_old",
  "epoll_pwait",
  "epoll_pwait2",
  "epoll_wait",
  "epoll_wait_old",
  "eventfd",
  "eventfd2",
  "execve",
  "execveat",
  "exit",
  "exit_group",
  "faccessat",
  "faccessat2",
  "fadvise64",
  "fadvise64_64",
  "fallocate",
  "fanotify_mark",
  "fchdir",
  "fchmod",
  "fchmodat",
  "fchmodat2",
  "fchown",
  "fchown32",
  "fchownat",
  "fcntl",
  "fcntl64",
  "fdatasync",
  "fgetxattr",
  "flistxattr",
  "flock",
  "fork",
  "fremovexattr",
  "fsetxattr",
  "fstat",
  "fstat64",
  "fstatat64",
  "fstatfs",
  "fstatfs64",
  "fsync",
  "ftruncate",
  "ftruncate64",
  "futex",
  "futex_requeue",
  "futex_time64",
  "futex_wait",
  "futex_waitv",
  "futex_wake",
  "futimesat",
  "getcpu",
  "getcwd",
  "getdents",
  "getdents64",
  "getegid",
  "getegid32",
  "geteuid",
  "geteuid32",
  "getgid",
  "getgid32",
  "getgroups",
  "getgroups32",
  "getitimer",
  "getpeername",
  "getpgid",
  "getpgrp",
  "getpid",
  "getppid",
  "getpriority",
  "getrandom",
  "getresgid",
  "getresgid32",
  "getresuid",
  "getresuid32",
  "getrlimit",
  "get_robust_list",
  "getrusage",
  "getsid",
  "getsockname",
  "getsockopt",
  "get_thread_area",
  "gettid",
  "gettimeofday",
  "getuid",
  "getuid32",
  "getxattr",
  "inotify_add_watch",
  "inotify_init",
  "inotify_init1",
  "inotify_rm_watch",
  "io_cancel",
  "ioctl",
  "io_destroy",
  "io_getevents",
  "io_pgetevents",
  "io_pgetevents_time64",
  "ioprio_get",
  "ioprio_set",
  "io_setup",
  "io_submit",
  "ipc",
  "kill",
  "landlock_add_rule",
  "landlock_create_ruleset",
  "landlock_restrict_self",
  "lchown",
  "lchown32",
  "lgetxattr",
  "link",
  "linkat",
  "listen",
  "listxattr",
  "llistxattr",
  "_llseek",
  "lremovexattr",
  "lseek",
  "lsetxattr",
  "lstat",
  "lstat64",
  "madvise",
  "map_shadow_stack",
  "membarrier",
  "memfd_create",
  "memfd_secret",
  "mincore",
  "mkdir",
  "mkdirat",
  "mknod",
  "mknodat",
  "mlock",
  "mlock2",
  "mlockall",
  "mmap",
  "mmap2",
  "mprotect",
  "mq_getsetattr",
  "mq_notify",
  "mq_open",
  "mq_timedreceive",
  "mq_timedreceive_time64",
  "mq_timedsend",
  "mq_timedsend_time64",
  "mq_unlink",
  "mremap",
  "mseal",
  "msgctl",
  "msgget",
  "msgrcv",
  "msgsnd",
  "msync",
  "munlock",
  "munlockall",
  "munmap",
  "nanosleep",
  "newfstatat",
  "_newselect",
  "open",
  "openat",
  "openat2",
  "pause",
  "pidfd_open",
  "pidfd_send_signal",
  "pipe",
  "pipe2",
  "pkey_alloc",
  "pkey_free",
  "pkey_mprotect",
  "poll",
  "ppoll",
  "ppoll_time64",
  "prctl",
  "pread64",
  "preadv",
  "preadv2",
  "prlimit64",
  "process_mrelease",
  "pselect6",
  "pselect6_time64",
  "pwrite64",
  "pwritev",
  "pwritev2",
  "read",
  "readahead",
  "readlink",
  "readlinkat",
  "readv",
  "recv",
  "recvfrom",
  "recvmmsg",
  "recvmmsg_time64",
  "recvmsg",
  "remap_file_pages",
  "removexattr",
  "rename",
  "renameat",
  "renameat2",
  "restart_syscall",
  "rmdir",
  "rseq",
  "rt_sigaction",
  "rt_sigpending",
  "rt_sigprocmask",
  "rt_sigqueueinfo",
  "rt_sigreturn",
  "rt_sigsuspend",
  "rt_sigtimedwait",
  "rt_sigtimedwait_time64",
  "rt_tgsigqueueinfo",
  "sched_getaffinity",
  "sched_getattr",
  "sched_getparam",
  "sched_get_priority_max",
  "sched_get_priority_min",
  "sched_getscheduler",
  "sched_rr_get_interval",
  "sched_rr_get_interval_time64",
  "sched_setaffinity",
  "sched_setattr",
  "sched_setparam",
  "sched_setscheduler",
  "sched_yield",
  "seccomp",
  "select",
  "semctl",
  "semget",
  "semop",
  "semtimedop",
  "semtimedop_time64",
  "send",
  "sendfile",
  "sendfile64",
  "sendmmsg",
  "sendmsg",
  "sendto",
  "setfsgid",
  "setfsgid32",
  "setfsuid",
  "setfsuid32",
  "setgid",
  "setgid32",
  "setgroups",
  "setgroups32",
  "setitimer",
  "setpgid",
  "setpriority",
  "setregid",
  "setregid32",
  "setresgid",
  "setresgid32",
  "setresuid",
  "setresuid32",
  "setreuid",
  "setreuid32",
  "setrlimit",
  "set_robust_list",
  "setsid",
  "setsockopt",
  "set_thread_area",
  "set_tid_address",
  "setuid",
  "setuid32",
  "setxattr",
  "shmat",
  "shmctl",
  "shmdt",
  "shmget",
  "shutdown",
  "sigaltstack",
  "signalfd",
  "signalfd4",
  "sigprocmask",
  "sigreturn",
  "socketcall",
  "socketpair",
  "splice",
  "stat",
  "stat64",
  "statfs",
  "statfs64",
  "statx",
  "symlink",
  "symlinkat",
  "sync",
  "sync_file_range",
  "syncfs",
  "sysinfo",
  "tee",
  "tgkill",
  "time",
  "timer_create",
  "timer_delete",
  "timer_getoverrun",
  "timer_gettime",
  "timer_gettime64",
  "timer_settime",
  "timer_settime64",
  "timerfd_create",
  "timerfd_gettime",
  "timerfd_gettime64",
  "timerfd_settime",
  "timerfd_settime64",
  "times",
  "tkill",
  "truncate",
  "truncate64",
  "ugetrlimit",
  "umask",
  "uname",
  "unlink",
  "unlinkat",
  "uretprobe",
  "utime",
  "utimensat",
  "utimensat_time64",
  "utimes",
  "vfork",
  "vmsplice",
  "wait4",
  "waitid",
  "waitpid",
  "write",
  "writev",
  NULL,
};

#if defined(__x86_64__) || defined(__i386__)
static const char *const allowed_arch[] = { "arch_prctl", "modify_ldt", NULL };
static const char *const profile_archs[] = { "SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", NULL };
#elif defined(__aarch64__) || defined(__arm__)
static const char *const allowed_arch[] = {
  "arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2", "breakpoint", "cacheflush", "set_tls", NULL,
};
static const char *const profile_archs[] = { "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM", NULL };
#else
static const char *const allowed_arch[] = { NULL };
static const char *const profile_archs[] = { NULL };
#endif

static const char *const socket_names[] = { "socket", NULL };
static const char *const personality_names[] = { "personality", NULL };
static const char *const clone_names[] = { "clone", NULL };
static const char *const clone3_names[] = { "clone3", NULL };

/* Namespaces, mounts and kernel-wide switches; husk adds name_to_handle_at,
 * pivot_root and swapon/swapoff, which it refused before without it. */
static const char *const sys_admin_names[] = {
  "bpf",
  "clone",
  "clone3",
  "fanotify_init",
  "fsconfig",
  "fsmount",
  "fsopen",
  "fspick",
  "lookup_dcookie",
  "mount",
  "mount_setattr",
  "move_mount",
  "name_to_handle_at",
  "open_tree",
  "perf_event_open",
  "pivot_root",
  "quotactl",
  "quotactl_fd",
  "setdomainname",
  "sethostname",
  "setns",
  "swapoff",
  "swapon",
  "umount",
  "umount2",
  "unshare",
  NULL,
};
static const char *const sys_boot_names[] = { "reboot", "kexec_load", "kexec_file_load", NULL };
static const char *const sys_chroot_names[] = { "chroot", NULL };
static const char *const sys_module_names[] = { "delete_module", "init_module", "finit_module", NULL };
static const char *const sys_pacct_names[] = { "acct", NULL };
/* Moby allows ptrace and process_vm_* to all on kernels >= 4.8; husk keeps
 * them behind CAP_SYS_PTRACE, as it did before (with userfaultfd). */
static const char *const sys_ptrace_names[] = {
  "kcmp",        "pidfd_getfd", "process_madvise", "process_vm_readv", "process_vm_writev", "ptrace",
  "userfaultfd", NULL,
};
static const char *const sys_rawio_names[] = { "iopl", "ioperm", NULL };
/* husk adds clock_adjtime, which it refused before without the cap. */
static const char *const sys_time_names[] = {
  "settimeofday", "stime", "clock_settime", "clock_settime64", "clock_adjtime", "clock_adjtime64", NULL,
};
static const char *const sys_tty_config_names[] = { "vhangup", NULL };
static const char *const sys_nice_names[] = {
  "get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node", "move_pages", NULL,
};
static const char *const syslog_names[] = { "syslog", NULL };
static const char *const bpf_names[] = { "bpf", NULL };
static const char *const perfmon_names[] = { "perf_event_open", NULL };
static const char *const dac_read_search_names[] = { "open_by_handle_at", NULL };

/* One condition on one argument; a family with several makes one rule per
 * condition, so they are alternatives (ORed). */
struct arg_condition
{
  unsigned index;
  unsigned long long value, value_two;
  const char *op;
};

static const struct arg_condition not_vsock[] = { { 0, 40 /* AF_VSOCK */, 0, "SCMP_CMP_NE" } };
/* PER_LINUX, PER_LINUX32, UNAME26, UNAME26|PER_LINUX32, and the query. */
static const struct arg_condition personality_values[] = {
  { 0, 0x0, 0, "SCMP_CMP_EQ" },     { 0, 0x8, 0, "SCMP_CMP_EQ" },        { 0, 0x20000, 0, "SCMP_CMP_EQ" },
  { 0, 0x20008, 0, "SCMP_CMP_EQ" }, { 0, 0xffffffff, 0, "SCMP_CMP_EQ" },
};
#if defined(__s390x__) || defined(__s390__)
#define CLONE_FLAGS_ARG 1 /* s390 swaps clone's first two arguments */
#else
#define CLONE_FLAGS_ARG 0
#endif
static const struct arg_condition clone_without_namespaces[]
    = { { CLONE_FLAGS_ARG, CLONE_NAMESPACE_FLAGS, 0, "SCMP_CMP_MASKED_EQ" } };

enum cap_gate
{
  GATE_NONE,    /* always in */
  GATE_WITH,    /* in only when the container holds CAP */
  GATE_WITHOUT, /* in only when it does not */
};

struct rule_family
{
  const char *const *names;
  const char *action;
  int errno_ret; /* for SCMP_ACT_ERRNO */
  enum cap_gate gate;
  int cap;
  const struct arg_condition *conditions;
  size_t n_conditions;
};

#define ALLOW "SCMP_ACT_ALLOW"
#define CONDS(a) a, N_ELEMENTS (a)

static const struct rule_family families[] = {
  { allowed_always, ALLOW, 0, GATE_NONE, NO_CAP, NULL, 0 },
  { allowed_arch, ALLOW, 0, GATE_NONE, NO_CAP, NULL, 0 },
  { socket_names, ALLOW, 0, GATE_NONE, NO_CAP, CONDS (not_vsock) },
  { personality_names, ALLOW, 0, GATE_NONE, NO_CAP, CONDS (personality_values) },
  { clone_names, ALLOW, 0, GATE_WITHOUT, CAP_SYS_ADMIN, CONDS (clone_without_namespaces) },
  /* ENOSYS, not EPERM: glibc then falls back to clone, which the rule
   * above checks (clone3's flags are in memory, out of seccomp's reach). */
  { clone3_names, "SCMP_ACT_ERRNO", ENOSYS, GATE_WITHOUT, CAP_SYS_ADMIN, NULL, 0 },
  { sys_admin_names, ALLOW, 0, GATE_WITH, CAP_SYS_ADMIN, NULL, 0 },
  { sys_boot_names, ALLOW, 0, GATE_WITH, CAP_SYS_BOOT, NULL, 0 },
  { sys_chroot_names, ALLOW, 0, GATE_WITH, CAP_SYS_CHROOT, NULL, 0 },
  { sys_module_names, ALLOW, 0, GATE_WITH, CAP_SYS_MODULE, NULL, 0 },
  { sys_pacct_names, ALLOW, 0, GATE_WITH, CAP_SYS_PACCT, NULL, 0 },
  { sys_ptrace_names, ALLOW, 0, GATE_WITH, CAP_SYS_PTRACE, NULL, 0 },
  { sys_rawio_names, ALLOW, 0, GATE_WITH, CAP_SYS_RAWIO, NULL, 0 },
  { sys_time_names, ALLOW, 0, GATE_WITH, CAP_SYS_TIME, NULL, 0 },
  { sys_tty_config_names, ALLOW, 0, GATE_WITH, CAP_SYS_TTY_CONFIG, NULL, 0 },
  { sys_nice_names, ALLOW, 0, GATE_WITH, CAP_SYS_NICE, NULL, 0 },
  { syslog_names, ALLOW, 0, GATE_WITH, CAP_SYSLOG, NULL, 0 },
  { bpf_names, ALLOW, 0, GATE_WITH, CAP_BPF, NULL, 0 },
  { perfmon_names, ALLOW, 0, GATE_WITH, CAP_PERFMON, NULL, 0 },
  { dac_read_search_names, ALLOW, 0, GATE_WITH, CAP_DAC_READ_SEARCH, NULL, 0 },
};

static bool
family_applies (const struct rule_family *family, uint64_t caps)
{
  bool held = family->cap >= 0 && (caps & (UINT64_C (1) << family->cap));

  switch (family->gate)
    {
    case GATE_WITH:
      return held;
    case GATE_WITHOUT:
      return !held;
    default:
      return true;
    }
}

/* The family's names the linked libseccomp knows, each once per profile for
 * unconditional rules (two cap families may both allow bpf). */
static json_t *
family_names (const struct rule_family *family, json_t *seen)
{
  json_t *names = json_array ();

  for (const char *const *name = family->names; *name; name++)
    {
      if (seccomp_syscall_resolve_name (*name) == __NR_SCMP_ERROR)
        continue;
      if (family->n_conditions == 0 && json_object_get (seen, *name))
        continue;
      if (family->n_conditions == 0)
        json_object_set_new (seen, *name, json_true ());
      json_array_append_new (names, json_string (*name));
    }
  return names;
}

static json_t *
family_rule (const struct rule_family *family, json_t *names, const struct arg_condition *cond)
{
  json_t *rule = json_pack ("{s:O, s:s}", "names", names, "action", family->action);

  if (family->errno_ret)
    json_object_set_new (rule, "errnoRet", json_integer (family->errno_ret));
  if (cond)
    json_object_set_new (rule, "args",
                         json_pack ("[{s:i, s:I, s:I, s:s}]", "index", (int) cond->index, "value",
                                    (json_int_t) cond->value, "valueTwo", (json_int_t) cond->value_two, "op",
                                    cond->op));
  return rule;
}

static void
add_family (json_t *rules, const struct rule_family *family, json_t *seen)
{
  json_t *names = family_names (family, seen);

  if (json_array_size (names) == 0)
    ;
  else if (family->n_conditions == 0)
    json_array_append_new (rules, family_rule (family, names, NULL));
  else
    for (size_t i = 0; i < family->n_conditions; i++)
      json_array_append_new (rules, family_rule (family, names, &family->conditions[i]));
  json_decref (names);
}

json_t *
seccomp_default_profile (uint64_t caps)
{
  json_t *rules = json_array (), *archs = json_array (), *seen = json_object ();

  for (size_t i = 0; i < N_ELEMENTS (families); i++)
    if (family_applies (&families[i], caps))
      add_family (rules, &families[i], seen);
  for (const char *const *arch = profile_archs; *arch; arch++)
    json_array_append_new (archs, json_string (*arch));
  json_decref (seen);
  return json_pack ("{s:s, s:i, s:o, s:o}", "defaultAction", "SCMP_ACT_ERRNO", "defaultErrnoRet", EPERM,
                    "architectures", archs, "syscalls", rules);
}
