/* Parses and validates an OCI runtime config.json (runtime-spec 1.0 to 1.2)
 * into struct spec.  Every problem becomes one error line naming the file,
 * the field path ("mounts[2].destination") and what is wrong; nothing on the
 * host is touched here except stat() of the root filesystem. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/capability.h>
#include <seccomp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <jansson.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/spec.h"

/* The generic member parsers below write through these types. */
_Static_assert(sizeof (uid_t) == sizeof (uint32_t), "uid_t is 32 bits");
_Static_assert(sizeof (gid_t) == sizeof (uint32_t), "gid_t is 32 bits");
_Static_assert(sizeof (unsigned) == sizeof (uint32_t), "unsigned is 32 bits");

#define N_ELEMENTS(a) (sizeof (a) / sizeof ((a)[0]))

/* ------------------------------------------------------------------ */
/* Name tables                                                          */

#define CAP_ENTRY(c) [c] = #c
static const char *const capability_names[] = {
  CAP_ENTRY (CAP_CHOWN),
  CAP_ENTRY (CAP_DAC_OVERRIDE),
  CAP_ENTRY (CAP_DAC_READ_SEARCH),
  CAP_ENTRY (CAP_FOWNER),
  CAP_ENTRY (CAP_FSETID),
  CAP_ENTRY (CAP_KILL),
  CAP_ENTRY (CAP_SETGID),
  CAP_ENTRY (CAP_SETUID),
  CAP_ENTRY (CAP_SETPCAP),
  CAP_ENTRY (CAP_LINUX_IMMUTABLE),
  CAP_ENTRY (CAP_NET_BIND_SERVICE),
  CAP_ENTRY (CAP_NET_BROADCAST),
  CAP_ENTRY (CAP_NET_ADMIN),
  CAP_ENTRY (CAP_NET_RAW),
  CAP_ENTRY (CAP_IPC_LOCK),
  CAP_ENTRY (CAP_IPC_OWNER),
  CAP_ENTRY (CAP_SYS_MODULE),
  CAP_ENTRY (CAP_SYS_RAWIO),
  CAP_ENTRY (CAP_SYS_CHROOT),
  CAP_ENTRY (CAP_SYS_PTRACE),
  CAP_ENTRY (CAP_SYS_PACCT),
  CAP_ENTRY (CAP_SYS_ADMIN),
  CAP_ENTRY (CAP_SYS_BOOT),
  CAP_ENTRY (CAP_SYS_NICE),
  CAP_ENTRY (CAP_SYS_RESOURCE),
  CAP_ENTRY (CAP_SYS_TIME),
  CAP_ENTRY (CAP_SYS_TTY_CONFIG),
  CAP_ENTRY (CAP_MKNOD),
  CAP_ENTRY (CAP_LEASE),
  CAP_ENTRY (CAP_AUDIT_WRITE),
  CAP_ENTRY (CAP_AUDIT_CONTROL),
  CAP_ENTRY (CAP_SETFCAP),
  CAP_ENTRY (CAP_MAC_OVERRIDE),
  CAP_ENTRY (CAP_MAC_ADMIN),
  CAP_ENTRY (CAP_SYSLOG),
  CAP_ENTRY (CAP_WAKE_ALARM),
  CAP_ENTRY (CAP_BLOCK_SUSPEND),
  CAP_ENTRY (CAP_AUDIT_READ),
  CAP_ENTRY (CAP_PERFMON),
  CAP_ENTRY (CAP_BPF),
  CAP_ENTRY (CAP_CHECKPOINT_RESTORE),
};

struct named_value
{
  const char *name;
  long value;
};

#define NAMED(v)                                                                                             \
  {                                                                                                          \
#v, v                                                                                                    \
  }
static const struct named_value rlimit_names[] = {
  NAMED (RLIMIT_AS),     NAMED (RLIMIT_CORE),   NAMED (RLIMIT_CPU),        NAMED (RLIMIT_DATA),
  NAMED (RLIMIT_FSIZE),  NAMED (RLIMIT_LOCKS),  NAMED (RLIMIT_MEMLOCK),    NAMED (RLIMIT_MSGQUEUE),
  NAMED (RLIMIT_NICE),   NAMED (RLIMIT_NOFILE), NAMED (RLIMIT_NPROC),      NAMED (RLIMIT_RSS),
  NAMED (RLIMIT_RTPRIO), NAMED (RLIMIT_RTTIME), NAMED (RLIMIT_SIGPENDING), NAMED (RLIMIT_STACK),
};

static const struct named_value seccomp_op_names[] = {
  NAMED (SCMP_CMP_NE), NAMED (SCMP_CMP_LT), NAMED (SCMP_CMP_LE),        NAMED (SCMP_CMP_EQ),
  NAMED (SCMP_CMP_GE), NAMED (SCMP_CMP_GT), NAMED (SCMP_CMP_MASKED_EQ),
};

static const struct named_value seccomp_flag_names[] = {
  NAMED (SECCOMP_FILTER_FLAG_TSYNC),
  NAMED (SECCOMP_FILTER_FLAG_LOG),
  NAMED (SECCOMP_FILTER_FLAG_SPEC_ALLOW),
  NAMED (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV),
};

enum seccomp_action_kind
{
  ACTION_PLAIN,
  ACTION_WITH_ERRNO, /* errnoRet is folded into the low 16 bits */
  ACTION_UNSUPPORTED,
};

static const struct
{
  const char *name;
  uint32_t action;
  enum seccomp_action_kind kind;
} seccomp_actions[] = {
  { "SCMP_ACT_KILL", SCMP_ACT_KILL, ACTION_PLAIN },
  { "SCMP_ACT_KILL_PROCESS", SCMP_ACT_KILL_PROCESS, ACTION_PLAIN },
  { "SCMP_ACT_KILL_THREAD", SCMP_ACT_KILL_THREAD, ACTION_PLAIN },
  { "SCMP_ACT_TRAP", SCMP_ACT_TRAP, ACTION_PLAIN },
  { "SCMP_ACT_ERRNO", SCMP_ACT_ERRNO (0), ACTION_WITH_ERRNO },
  { "SCMP_ACT_TRACE", SCMP_ACT_TRACE (0), ACTION_WITH_ERRNO },
  { "SCMP_ACT_ALLOW", SCMP_ACT_ALLOW, ACTION_PLAIN },
  { "SCMP_ACT_LOG", SCMP_ACT_LOG, ACTION_PLAIN },
  /* Needs a listener socket and an agent; husk has neither. */
  { "SCMP_ACT_NOTIFY", SCMP_ACT_NOTIFY, ACTION_UNSUPPORTED },
};

static const char *const ns_names[SPEC_NS_COUNT] = {
  [SPEC_NS_PID] = "pid", [SPEC_NS_NETWORK] = "network", [SPEC_NS_MOUNT] = "mount",   [SPEC_NS_IPC] = "ipc",
  [SPEC_NS_UTS] = "uts", [SPEC_NS_USER] = "user",       [SPEC_NS_CGROUP] = "cgroup", [SPEC_NS_TIME] = "time",
};

static const char *const hook_names[SPEC_HOOK_KIND_COUNT] = {
  [SPEC_HOOK_PRESTART] = "prestart",
  [SPEC_HOOK_CREATE_RUNTIME] = "createRuntime",
  [SPEC_HOOK_CREATE_CONTAINER] = "createContainer",
  [SPEC_HOOK_START_CONTAINER] = "startContainer",
  [SPEC_HOOK_POSTSTART] = "poststart",
  [SPEC_HOOK_POSTSTOP] = "poststop",
};

const char *
spec_hook_kind_name (enum spec_hook_kind kind)
{
  return (unsigned) kind < SPEC_HOOK_KIND_COUNT ? hook_names[kind] : "unknown";
}

/* linux.timeOffsets clocks, in the order of spec->time_offset_*[]. */
static const char *const time_offset_clocks[2] = { "boottime", "monotonic" };

enum mount_option_kind
{
  MOUNT_OPT_FLAGS,        /* sets SET, clears CLEAR in mount->flags */
  MOUNT_OPT_BIND,         /* also marks the mount as a bind mount */
  MOUNT_OPT_PROPAGATION,  /* SET goes to mount->propagation */
  MOUNT_OPT_RECURSIVE_RO, /* mount_setattr(AT_RECURSIVE) later */
  MOUNT_OPT_IGNORED,      /* known, no effect in husk: warn */
  MOUNT_OPT_UNSUPPORTED,  /* known, cannot be honoured: error */
};

static const struct mount_option
{
  const char *name;
  enum mount_option_kind kind;
  unsigned long set, clear;
} mount_options[] = {
  { "defaults", MOUNT_OPT_FLAGS, 0, 0 },
  { "ro", MOUNT_OPT_FLAGS, MS_RDONLY, 0 },
  { "rw", MOUNT_OPT_FLAGS, 0, MS_RDONLY },
  { "suid", MOUNT_OPT_FLAGS, 0, MS_NOSUID },
  { "nosuid", MOUNT_OPT_FLAGS, MS_NOSUID, 0 },
  { "dev", MOUNT_OPT_FLAGS, 0, MS_NODEV },
  { "nodev", MOUNT_OPT_FLAGS, MS_NODEV, 0 },
  { "exec", MOUNT_OPT_FLAGS, 0, MS_NOEXEC },
  { "noexec", MOUNT_OPT_FLAGS, MS_NOEXEC, 0 },
  { "sync", MOUNT_OPT_FLAGS, MS_SYNCHRONOUS, 0 },
  { "async", MOUNT_OPT_FLAGS, 0, MS_SYNCHRONOUS },
  { "dirsync", MOUNT_OPT_FLAGS, MS_DIRSYNC, 0 },
  { "remount", MOUNT_OPT_FLAGS, MS_REMOUNT, 0 },
  { "mand", MOUNT_OPT_FLAGS, MS_MANDLOCK, 0 },
  { "nomand", MOUNT_OPT_FLAGS, 0, MS_MANDLOCK },
  { "atime", MOUNT_OPT_FLAGS, 0, MS_NOATIME },
  { "noatime", MOUNT_OPT_FLAGS, MS_NOATIME, 0 },
  { "diratime", MOUNT_OPT_FLAGS, 0, MS_NODIRATIME },
  { "nodiratime", MOUNT_OPT_FLAGS, MS_NODIRATIME, 0 },
  { "relatime", MOUNT_OPT_FLAGS, MS_RELATIME, 0 },
  { "norelatime", MOUNT_OPT_FLAGS, 0, MS_RELATIME },
  { "strictatime", MOUNT_OPT_FLAGS, MS_STRICTATIME, 0 },
  { "nostrictatime", MOUNT_OPT_FLAGS, 0, MS_STRICTATIME },
  { "nosymfollow", MOUNT_OPT_FLAGS, MS_NOSYMFOLLOW, 0 },
  { "symfollow", MOUNT_OPT_FLAGS, 0, MS_NOSYMFOLLOW },
  { "bind", MOUNT_OPT_BIND, MS_BIND, 0 },
  { "rbind", MOUNT_OPT_BIND, MS_BIND | MS_REC, 0 },
  { "private", MOUNT_OPT_PROPAGATION, MS_PRIVATE, 0 },
  { "rprivate", MOUNT_OPT_PROPAGATION, MS_PRIVATE | MS_REC, 0 },
  { "shared", MOUNT_OPT_PROPAGATION, MS_SHARED, 0 },
  { "rshared", MOUNT_OPT_PROPAGATION, MS_SHARED | MS_REC, 0 },
  { "slave", MOUNT_OPT_PROPAGATION, MS_SLAVE, 0 },
  { "rslave", MOUNT_OPT_PROPAGATION, MS_SLAVE | MS_REC, 0 },
  { "unbindable", MOUNT_OPT_PROPAGATION, MS_UNBINDABLE, 0 },
  { "runbindable", MOUNT_OPT_PROPAGATION, MS_UNBINDABLE | MS_REC, 0 },
  { "rro", MOUNT_OPT_RECURSIVE_RO, 0, 0 },
  { "tmpcopyup", MOUNT_OPT_IGNORED, 0, 0 },
  { "idmap", MOUNT_OPT_UNSUPPORTED, 0, 0 },
  { "ridmap", MOUNT_OPT_UNSUPPORTED, 0, 0 },
};

static int
lookup_name (const struct named_value *table, size_t n, const char *name, long *out)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp (table[i].name, name) == 0)
      {
        *out = table[i].value;
        return 0;
      }
  return -1;
}

static const struct mount_option *
find_mount_option (const char *name)
{
  for (size_t i = 0; i < N_ELEMENTS (mount_options); i++)
    if (strcmp (mount_options[i].name, name) == 0)
      return &mount_options[i];
  return NULL;
}

int
spec_capability_from_name (const char *name)
{
  for (size_t i = 0; i < N_ELEMENTS (capability_names); i++)
    if (capability_names[i] && strcmp (capability_names[i], name) == 0)
      return (int) i;
  return -1;
}

const char *
spec_capability_name (int cap)
{
  if (cap < 0 || (size_t) cap >= N_ELEMENTS (capability_names))
    return NULL;
  return capability_names[cap];
}

int
spec_cap_last_cap (void)
{
  static int last_cap = -1;
  cleanup_free char *text = NULL;
  struct husk_error *err = NULL;
  long long value;

  if (last_cap >= 0)
    return last_cap;
  last_cap = (int) N_ELEMENTS (capability_names) - 1;
  if (husk_read_file ("/proc/sys/kernel/cap_last_cap", &text, NULL, &err) < 0)
    {
      /* No /proc (early boot, tests in odd sandboxes): trust the headers. */
      husk_error_free (&err);
      return last_cap;
    }
  text[strcspn (text, "\n")] = '\0';
  if (husk_parse_int64 (text, 0, 63, &value) == 0)
    last_cap = (int) value;
  return last_cap;
}

const char *
spec_ns_name (enum spec_ns_type type)
{
  if ((int) type < 0 || type >= SPEC_NS_COUNT)
    return NULL;
  return ns_names[type];
}

/* ------------------------------------------------------------------ */
/* Parse context: the file name and the path of the field being read,  */
/* so that any error can say exactly where it is.                       */

struct parse_ctx
{
  const char *file;
  const char *bundle_dir;
  struct husk_error **err;
  size_t path_len;
  char path[512];
};

static int
ctx_failv (struct parse_ctx *ctx, int errnum, const char *fmt, va_list ap)
{
  cleanup_free char *what = NULL;

  if (vasprintf (&what, fmt, ap) < 0)
    abort ();
  if (ctx->path_len == 0)
    return husk_error_make (ctx->err, errnum, "%s: %s", ctx->file, what);
  return husk_error_make (ctx->err, errnum, "%s: %s: %s", ctx->file, ctx->path, what);
}

static int __attribute__ ((format (printf, 2, 3))) ctx_fail (struct parse_ctx *ctx, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  ctx_failv (ctx, 0, fmt, ap);
  va_end (ap);
  return -1;
}

static int __attribute__ ((format (printf, 3, 4)))
ctx_fail_errno (struct parse_ctx *ctx, int errnum, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  ctx_failv (ctx, errnum, fmt, ap);
  va_end (ap);
  return -1;
}

static void __attribute__ ((format (printf, 2, 3))) ctx_warn (struct parse_ctx *ctx, const char *fmt, ...)
{
  cleanup_free char *what = NULL;
  va_list ap;

  va_start (ap, fmt);
  if (vasprintf (&what, fmt, ap) < 0)
    abort ();
  va_end (ap);
  husk_warn ("%s: %s: %s", ctx->file, ctx->path, what);
}

static size_t __attribute__ ((format (printf, 2, 3)))
path_append (struct parse_ctx *ctx, const char *fmt, ...)
{
  size_t mark = ctx->path_len;
  size_t room = sizeof ctx->path - mark;
  va_list ap;
  int n;

  va_start (ap, fmt);
  n = vsnprintf (ctx->path + mark, room, fmt, ap);
  va_end (ap);
  if (n < 0)
    n = 0;
  ctx->path_len = (size_t) n < room ? mark + (size_t) n : sizeof ctx->path - 1;
  return mark;
}

static size_t
path_push_key (struct parse_ctx *ctx, const char *key)
{
  return path_append (ctx, ctx->path_len ? ".%s" : "%s", key);
}

static size_t
path_push_index (struct parse_ctx *ctx, size_t index)
{
  return path_append (ctx, "[%zu]", index);
}

static void
path_pop (struct parse_ctx *ctx, size_t mark)
{
  ctx->path_len = mark;
  ctx->path[mark] = '\0';
}

/* ------------------------------------------------------------------ */
/* Typed access to one JSON value (the path already points at it).      */

static int
want_string (struct parse_ctx *ctx, json_t *value, const char **out)
{
  *out = "";
  if (!json_is_string (value))
    return ctx_fail (ctx, "must be a string");
  *out = json_string_value (value);
  return 0;
}

static int
want_bool (struct parse_ctx *ctx, json_t *value, bool *out)
{
  *out = false;
  if (!json_is_boolean (value))
    return ctx_fail (ctx, "must be true or false");
  *out = json_is_true (value);
  return 0;
}

/* Integers above INT64_MAX make us reload the document with every number
 * as a double (see load_json), so an integral real is an integer too. */
static bool
real_is_integral (json_t *value)
{
  const double two_to_63 = 9223372036854775808.0;
  double d = json_real_value (value);

  if (d != d)
    return false;
  /* Every double this large is a whole number. */
  if (d >= two_to_63 || d <= -two_to_63)
    return true;
  return (double) (long long) d == d;
}

static int
want_int (struct parse_ctx *ctx, json_t *value, long long min, long long max, long long *out)
{
  long long v;

  if (json_is_integer (value))
    v = json_integer_value (value);
  else if (json_is_real (value) && real_is_integral (value))
    {
      double d = json_real_value (value);
      if (d < (double) min || d > (double) max)
        return ctx_fail (ctx, "%.0f is out of range (%lld to %lld)", d, min, max);
      v = (long long) d;
    }
  else
    return ctx_fail (ctx, "must be an integer");
  if (v < min || v > max)
    return ctx_fail (ctx, "%lld is out of range (%lld to %lld)", v, min, max);
  *out = v;
  return 0;
}

static int
want_uint64 (struct parse_ctx *ctx, json_t *value, uint64_t *out)
{
  const double two_to_64 = 18446744073709551616.0;

  if (json_is_integer (value))
    {
      if (json_integer_value (value) < 0)
        return ctx_fail (ctx, "must not be negative");
      *out = (uint64_t) json_integer_value (value);
      return 0;
    }
  if (!json_is_real (value) || !real_is_integral (value))
    return ctx_fail (ctx, "must be an integer");
  if (json_real_value (value) < 0)
    return ctx_fail (ctx, "must not be negative");
  /* 18446744073709551615 (RLIM_INFINITY) rounds up to exactly 2^64. */
  if (json_real_value (value) > two_to_64)
    return ctx_fail (ctx, "is too large for 64 bits");
  *out = json_real_value (value) == two_to_64 ? UINT64_MAX : (uint64_t) json_real_value (value);
  return 0;
}

static int
want_uint32 (struct parse_ctx *ctx, json_t *value, uint32_t *out)
{
  long long v;

  if (want_int (ctx, value, 0, UINT32_MAX, &v) < 0)
    return -1;
  *out = (uint32_t) v;
  return 0;
}

static int
want_object (struct parse_ctx *ctx, json_t *value)
{
  return json_is_object (value) ? 0 : ctx_fail (ctx, "must be an object");
}

static int
check_absolute (struct parse_ctx *ctx, const char *path)
{
  if (path[0] != '/')
    return ctx_fail (ctx, "must be an absolute path, not \"%s\"", path);
  return 0;
}

static int
check_env_entry (struct parse_ctx *ctx, const char *entry)
{
  if (strchr (entry, '=') == NULL)
    return ctx_fail (ctx, "\"%s\" must have the form NAME=VALUE", entry);
  return 0;
}

typedef int (*string_check_fn) (struct parse_ctx *ctx, const char *s);

/* An array of strings into a NULL-terminated vector owned by *OUT (set
 * before the items are read, so a failure leaves it for the caller to free). */
static int
want_strv (struct parse_ctx *ctx, json_t *value, string_check_fn check, char ***out)
{
  size_t i;
  json_t *item;

  if (!json_is_array (value))
    return ctx_fail (ctx, "must be an array of strings");
  husk_strvfreep (out);
  *out = xcalloc (json_array_size (value) + 1, sizeof (char *));
  json_array_foreach (value, i, item)
  {
    size_t mark = path_push_index (ctx, i);
    const char *s;

    if (want_string (ctx, item, &s) < 0 || (check && check (ctx, s) < 0))
      return -1;
    (*out)[i] = xstrdup (s);
    path_pop (ctx, mark);
  }
  return 0;
}

typedef int (*item_parse_fn) (struct parse_ctx *ctx, json_t *item, void *elem);

/* An array of objects into a zeroed C array of N elements of ELEM_SIZE,
 * handed to the caller before parsing so that spec_free can clean up a
 * half-parsed one. */
static int
want_array_of (struct parse_ctx *ctx, json_t *value, size_t elem_size, void **items, size_t *n_items,
               item_parse_fn parse_item)
{
  size_t i;
  json_t *item;

  if (!json_is_array (value))
    return ctx_fail (ctx, "must be an array");
  *items = xcalloc (json_array_size (value), elem_size);
  *n_items = json_array_size (value);
  json_array_foreach (value, i, item)
  {
    size_t mark = path_push_index (ctx, i);

    if (parse_item (ctx, item, (char *) *items + i * elem_size) < 0)
      return -1;
    path_pop (ctx, mark);
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* Field tables: an object is read by walking a table of its keys.      */

struct field
{
  const char *key;
  int (*parse) (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field);
  size_t offset; /* of the member the generic parsers write */
  bool required;
};

#define FIELD(key, fn)                                                                                       \
  {                                                                                                          \
    key, fn, 0, false                                                                                        \
  }
#define REQUIRED(key, fn)                                                                                    \
  {                                                                                                          \
    key, fn, 0, true                                                                                         \
  }
#define MEMBER(key, fn, type, member)                                                                        \
  {                                                                                                          \
    key, fn, offsetof (type, member), false                                                                  \
  }
#define REQUIRED_MEMBER(key, fn, type, member)                                                               \
  {                                                                                                          \
    key, fn, offsetof (type, member), true                                                                   \
  }
#define MEMBER_PTR(target, field, type) ((type *) ((char *) (target) + (field)->offset))

/* Keys that are absent or null are left alone (null is how Go encoders
 * write an unset pointer); unknown keys are ignored for forward
 * compatibility. */
static int
parse_fields (struct parse_ctx *ctx, json_t *object, const struct field *fields, size_t n_fields,
              void *target)
{
  if (want_object (ctx, object) < 0)
    return -1;
  for (size_t i = 0; i < n_fields; i++)
    {
      json_t *value = json_object_get (object, fields[i].key);
      size_t mark;

      if ((value == NULL || json_is_null (value)) && !fields[i].required)
        continue;
      mark = path_push_key (ctx, fields[i].key);
      if (value == NULL || json_is_null (value))
        return ctx_fail (ctx, "required field is missing");
      if (fields[i].parse (ctx, value, target, &fields[i]) < 0)
        return -1;
      path_pop (ctx, mark);
    }
  return 0;
}

static int
parse_string_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  char **slot = MEMBER_PTR (target, field, char *);
  const char *s;

  if (want_string (ctx, value, &s) < 0)
    return -1;
  free (*slot);
  *slot = xstrdup (s);
  return 0;
}

static int
parse_abs_path_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  const char *s;

  if (want_string (ctx, value, &s) < 0 || check_absolute (ctx, s) < 0)
    return -1;
  return parse_string_member (ctx, value, target, field);
}

static int
parse_bool_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  return want_bool (ctx, value, MEMBER_PTR (target, field, bool));
}

static int
parse_uint32_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  return want_uint32 (ctx, value, MEMBER_PTR (target, field, uint32_t));
}

static int
parse_uint64_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  return want_uint64 (ctx, value, MEMBER_PTR (target, field, uint64_t));
}

static int
parse_strv_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  return want_strv (ctx, value, NULL, MEMBER_PTR (target, field, char **));
}

static int
parse_abs_path_list_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  return want_strv (ctx, value, check_absolute, MEMBER_PTR (target, field, char **));
}

/* Lexical cleaning of an absolute path: no "//", ".", ".." or trailing
 * "/" (".." at the root stays at the root, as the kernel does). */
static char *
path_clean (const char *path)
{
  char *out = xmalloc (strlen (path) + 2);
  size_t len = 1;
  const char *p = path;

  out[0] = '/';
  while (*p)
    {
      const char *end;
      size_t n;

      while (*p == '/')
        p++;
      end = strchrnul (p, '/');
      n = (size_t) (end - p);
      if (n == 2 && p[0] == '.' && p[1] == '.')
        {
          while (len > 1 && out[len - 1] != '/')
            len--;
          if (len > 1)
            len--;
        }
      else if (n > 0 && !(n == 1 && p[0] == '.'))
        {
          if (len > 1)
            out[len++] = '/';
          memcpy (out + len, p, n);
          len += n;
        }
      p = end;
    }
  out[len] = '\0';
  return out;
}

static bool
path_has_dotdot (const char *path)
{
  for (const char *p = path; *p;)
    {
      const char *end = strchrnul (p, '/');
      if (end - p == 2 && p[0] == '.' && p[1] == '.')
        return true;
      p = *end ? end + 1 : end;
    }
  return false;
}

/* ------------------------------------------------------------------ */
/* ociVersion and root                                                  */

static bool
oci_version_supported (const char *version)
{
  unsigned major, minor, patch;
  int consumed = 0;
  const char *rest;

  if (!isdigit ((unsigned char) version[0])
      || sscanf (version, "%u.%u.%u%n", &major, &minor, &patch, &consumed) != 3)
    return false;
  rest = version + consumed;
  if (*rest != '\0' && *rest != '-' && *rest != '+')
    return false;
  return major == 1 && minor <= 2;
}

static int
parse_oci_version (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;
  const char *version;

  if (want_string (ctx, value, &version) < 0)
    return -1;
  if (!oci_version_supported (version))
    {
      /* Says it as a sentence: "ociVersion "2.0.0" is not supported". */
      path_pop (ctx, 0);
      return ctx_fail (ctx, "ociVersion \"%s\" is not supported (husk supports 1.0.0 to 1.2.x)", version);
    }
  spec->oci_version = xstrdup (version);
  return 0;
}

static int
parse_root_path (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;
  cleanup_free char *joined = NULL;
  const char *path;
  struct stat st;

  if (want_string (ctx, value, &path) < 0)
    return -1;
  if (path[0] == '\0')
    return ctx_fail (ctx, "must not be empty");
  joined = path[0] == '/' ? xstrdup (path) : xasprintf ("%s/%s", ctx->bundle_dir, path);
  free (spec->root_path);
  spec->root_path = path_clean (joined);
  if (stat (spec->root_path, &st) < 0)
    return ctx_fail_errno (ctx, errno, "`%s`", spec->root_path);
  if (!S_ISDIR (st.st_mode))
    return ctx_fail_errno (ctx, ENOTDIR, "`%s`", spec->root_path);
  return 0;
}

static const struct field root_fields[] = {
  REQUIRED ("path", parse_root_path),
  MEMBER ("readonly", parse_bool_member, struct spec, root_readonly),
};

static int
parse_root (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  return parse_fields (ctx, value, root_fields, N_ELEMENTS (root_fields), target);
}

/* ------------------------------------------------------------------ */
/* process                                                              */

static int
parse_args (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_process *process = target;

  if (want_strv (ctx, value, NULL, &process->args) < 0)
    return -1;
  if (process->args[0] == NULL)
    return ctx_fail (ctx, "must not be empty");
  return 0;
}

static int
parse_env (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_process *process = target;

  return want_strv (ctx, value, check_env_entry, &process->env);
}

static const struct field console_size_fields[] = {
  REQUIRED_MEMBER ("height", parse_uint32_member, struct spec_process, console_height),
  REQUIRED_MEMBER ("width", parse_uint32_member, struct spec_process, console_width),
};

static int
parse_console_size (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  return parse_fields (ctx, value, console_size_fields, N_ELEMENTS (console_size_fields), target);
}

static int
parse_umask (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_user *user = target;
  long long umask_bits;

  if (want_int (ctx, value, 0, 0777, &umask_bits) < 0)
    return -1;
  user->has_umask = true;
  user->umask = (mode_t) umask_bits;
  return 0;
}

static int
parse_additional_gids (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_user *user = target;
  size_t i;
  json_t *item;

  if (!json_is_array (value))
    return ctx_fail (ctx, "must be an array of integers");
  free (user->additional_gids);
  user->additional_gids = xcalloc (json_array_size (value), sizeof (gid_t));
  user->n_additional_gids = json_array_size (value);
  json_array_foreach (value, i, item)
  {
    size_t mark = path_push_index (ctx, i);

    if (want_uint32 (ctx, item, &user->additional_gids[i]) < 0)
      return -1;
    path_pop (ctx, mark);
  }
  return 0;
}

static const struct field user_fields[] = {
  MEMBER ("uid", parse_uint32_member, struct spec_user, uid),
  MEMBER ("gid", parse_uint32_member, struct spec_user, gid),
  FIELD ("umask", parse_umask),
  FIELD ("additionalGids", parse_additional_gids),
};

static int
parse_user (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_process *process = target;

  return parse_fields (ctx, value, user_fields, N_ELEMENTS (user_fields), &process->user);
}

/* A capability the kernel does not know is skipped with a warning, as
 * runc does: configs written for newer kernels keep working. */
static int
parse_cap_set (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  uint64_t *set = MEMBER_PTR (target, field, uint64_t);
  size_t i;
  json_t *item;

  if (!json_is_array (value))
    return ctx_fail (ctx, "must be an array of strings");
  *set = 0;
  json_array_foreach (value, i, item)
  {
    size_t mark = path_push_index (ctx, i);
    const char *name;
    int cap;

    if (want_string (ctx, item, &name) < 0)
      return -1;
    cap = spec_capability_from_name (name);
    if (cap < 0)
      return ctx_fail (ctx, "unknown capability \"%s\"", name);
    if (cap > spec_cap_last_cap ())
      ctx_warn (ctx, "%s is not known to the running kernel, ignored", name);
    else
      *set |= UINT64_C (1) << cap;
    path_pop (ctx, mark);
  }
  return 0;
}

static const struct field capability_fields[] = {
  MEMBER ("bounding", parse_cap_set, struct spec_capabilities, bounding),
  MEMBER ("effective", parse_cap_set, struct spec_capabilities, effective),
  MEMBER ("inheritable", parse_cap_set, struct spec_capabilities, inheritable),
  MEMBER ("permitted", parse_cap_set, struct spec_capabilities, permitted),
  MEMBER ("ambient", parse_cap_set, struct spec_capabilities, ambient),
};

static int
parse_capabilities (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_process *process = target;

  process->has_capabilities = true;
  return parse_fields (ctx, value, capability_fields, N_ELEMENTS (capability_fields), &process->caps);
}

static int
parse_rlimit_type (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_rlimit *rlimit = target;
  const char *name;
  long resource;

  if (want_string (ctx, value, &name) < 0)
    return -1;
  if (lookup_name (rlimit_names, N_ELEMENTS (rlimit_names), name, &resource) < 0)
    return ctx_fail (ctx, "unknown rlimit \"%s\"", name);
  rlimit->resource = (int) resource;
  return 0;
}

static const struct field rlimit_fields[] = {
  REQUIRED ("type", parse_rlimit_type),
  REQUIRED_MEMBER ("soft", parse_uint64_member, struct spec_rlimit, soft),
  REQUIRED_MEMBER ("hard", parse_uint64_member, struct spec_rlimit, hard),
};

static int
parse_rlimit_item (struct parse_ctx *ctx, json_t *item, void *elem)
{
  struct spec_rlimit *rlimit = elem;

  if (parse_fields (ctx, item, rlimit_fields, N_ELEMENTS (rlimit_fields), rlimit) < 0)
    return -1;
  if (rlimit->soft > rlimit->hard)
    return ctx_fail (ctx, "soft limit %" PRIu64 " is above the hard limit %" PRIu64, rlimit->soft,
                     rlimit->hard);
  return 0;
}

static const char *
rlimit_name (int resource)
{
  for (size_t i = 0; i < N_ELEMENTS (rlimit_names); i++)
    if (rlimit_names[i].value == resource)
      return rlimit_names[i].name;
  return "?";
}

static int
parse_rlimits (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_process *process = target;

  if (want_array_of (ctx, value, sizeof (struct spec_rlimit), (void **) &process->rlimits,
                     &process->n_rlimits, parse_rlimit_item)
      < 0)
    return -1;
  for (size_t i = 1; i < process->n_rlimits; i++)
    for (size_t j = 0; j < i; j++)
      if (process->rlimits[i].resource == process->rlimits[j].resource)
        {
          path_push_index (ctx, i);
          path_push_key (ctx, "type");
          return ctx_fail (ctx, "duplicate %s (also in rlimits[%zu])",
                           rlimit_name (process->rlimits[i].resource), j);
        }
  return 0;
}

static int
parse_oom_score_adj (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_process *process = target;
  long long adj;

  if (want_int (ctx, value, -1000, 1000, &adj) < 0)
    return -1;
  process->has_oom_score_adj = true;
  process->oom_score_adj = (int) adj;
  return 0;
}

static const struct field process_fields[] = {
  MEMBER ("terminal", parse_bool_member, struct spec_process, terminal),
  FIELD ("consoleSize", parse_console_size),
  REQUIRED ("args", parse_args),
  FIELD ("env", parse_env),
  REQUIRED_MEMBER ("cwd", parse_abs_path_member, struct spec_process, cwd),
  FIELD ("user", parse_user),
  FIELD ("capabilities", parse_capabilities),
  FIELD ("rlimits", parse_rlimits),
  MEMBER ("noNewPrivileges", parse_bool_member, struct spec_process, no_new_privileges),
  FIELD ("oomScoreAdj", parse_oom_score_adj),
  MEMBER ("apparmorProfile", parse_string_member, struct spec_process, apparmor_profile),
  MEMBER ("selinuxLabel", parse_string_member, struct spec_process, selinux_label),
};

static int
parse_process_object (struct parse_ctx *ctx, json_t *value, struct spec_process *process)
{
  if (parse_fields (ctx, value, process_fields, N_ELEMENTS (process_fields), process) < 0)
    return -1;
  if (process->env == NULL)
    process->env = xcalloc (1, sizeof (char *));
  return 0;
}

static int
parse_process (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;

  spec->has_process = true;
  return parse_process_object (ctx, value, &spec->process);
}

/* ------------------------------------------------------------------ */
/* mounts                                                               */

static void
append_mount_data (char **data, const char *option)
{
  char *joined;

  if (*data == NULL)
    {
      *data = xstrdup (option);
      return;
    }
  joined = xasprintf ("%s,%s", *data, option);
  free (*data);
  *data = joined;
}

static int
apply_mount_option (struct spec_mount *mount, const struct mount_option *option, const char *field,
                    size_t index, struct husk_error **err)
{
  switch (option->kind)
    {
    case MOUNT_OPT_BIND:
      mount->bind = true;
      /* fallthrough */
    case MOUNT_OPT_FLAGS:
      mount->flags = (mount->flags | option->set) & ~option->clear;
      return 0;
    case MOUNT_OPT_PROPAGATION:
      mount->propagation = option->set;
      return 0;
    case MOUNT_OPT_RECURSIVE_RO:
      mount->recursive_ro = true;
      return 0;
    case MOUNT_OPT_IGNORED:
      husk_warn ("%s[%zu]: option \"%s\" is not supported, ignored", field, index, option->name);
      return 0;
    case MOUNT_OPT_UNSUPPORTED:
    default:
      return husk_error_make (err, 0, "%s[%zu]: option \"%s\" is not supported", field, index, option->name);
    }
}

int
spec_mount_parse_options (struct spec_mount *mount, char *const *options, const char *field,
                          struct husk_error **err)
{
  cleanup_free char *data = NULL;

  mount->flags = 0;
  mount->propagation = 0;
  mount->bind = false;
  mount->recursive_ro = false;
  for (size_t i = 0; options && options[i]; i++)
    {
      const struct mount_option *option = find_mount_option (options[i]);

      if (options[i][0] == '\0')
        continue;
      if (option == NULL)
        append_mount_data (&data, options[i]);
      else if (apply_mount_option (mount, option, field, i, err) < 0)
        return -1;
    }
  if (mount->type && strcmp (mount->type, "bind") == 0)
    {
      mount->bind = true;
      mount->flags |= MS_BIND;
    }
  free (mount->data);
  mount->data = steal_pointer (&data);
  return 0;
}

static int
parse_mount_destination (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_mount *mount = target;
  const char *destination;

  if (want_string (ctx, value, &destination) < 0 || check_absolute (ctx, destination) < 0)
    return -1;
  mount->destination = path_clean (destination);
  return 0;
}

static int
reject_idmapped_mount (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  return ctx_fail (ctx, "id-mapped mounts are not supported");
}

static const struct field mount_fields[] = {
  REQUIRED ("destination", parse_mount_destination),
  MEMBER ("type", parse_string_member, struct spec_mount, type),
  MEMBER ("source", parse_string_member, struct spec_mount, source),
  FIELD ("uidMappings", reject_idmapped_mount),
  FIELD ("gidMappings", reject_idmapped_mount),
};

static int
parse_mount_options_of (struct parse_ctx *ctx, json_t *item, struct spec_mount *mount)
{
  json_t *value = json_object_get (item, "options");
  cleanup_strv char **options = NULL;
  size_t mark = path_push_key (ctx, "options");

  if (value && !json_is_null (value) && want_strv (ctx, value, NULL, &options) < 0)
    return -1;
  if (spec_mount_parse_options (mount, options, ctx->path, ctx->err) < 0)
    return husk_error_wrap (ctx->err, "%s", ctx->file);
  path_pop (ctx, mark);
  return 0;
}

static int
parse_mount_item (struct parse_ctx *ctx, json_t *item, void *elem)
{
  struct spec_mount *mount = elem;

  if (parse_fields (ctx, item, mount_fields, N_ELEMENTS (mount_fields), mount) < 0
      || parse_mount_options_of (ctx, item, mount) < 0)
    return -1;
  /* A relative bind source means a path in the bundle, as runc reads it
   * from the bundle directory. */
  if (mount->bind && mount->source && mount->source[0] != '/')
    {
      char *in_bundle = xasprintf ("%s/%s", ctx->bundle_dir, mount->source);
      free (mount->source);
      mount->source = in_bundle;
    }
  return 0;
}

static int
parse_mounts (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;

  return want_array_of (ctx, value, sizeof (struct spec_mount), (void **) &spec->mounts, &spec->n_mounts,
                        parse_mount_item);
}

/* ------------------------------------------------------------------ */
/* hooks and annotations                                                */

static int
parse_hook_timeout (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_hook *hook = target;
  long long timeout;

  if (want_int (ctx, value, LLONG_MIN, LLONG_MAX, &timeout) < 0)
    return -1;
  if (timeout <= 0 || timeout > INT_MAX)
    return ctx_fail (ctx, "must be a positive number of seconds, not %lld", timeout);
  hook->timeout = (int) timeout;
  return 0;
}

static const struct field hook_fields[] = {
  REQUIRED_MEMBER ("path", parse_abs_path_member, struct spec_hook, path),
  MEMBER ("args", parse_strv_member, struct spec_hook, args),
  MEMBER ("env", parse_strv_member, struct spec_hook, env),
  FIELD ("timeout", parse_hook_timeout),
};

static int
parse_hook_item (struct parse_ctx *ctx, json_t *item, void *elem)
{
  return parse_fields (ctx, item, hook_fields, N_ELEMENTS (hook_fields), elem);
}

static int
parse_hooks (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_hooks *hooks = &((struct spec *) target)->hooks;

  if (want_object (ctx, value) < 0)
    return -1;
  for (int kind = 0; kind < SPEC_HOOK_KIND_COUNT; kind++)
    {
      json_t *list = json_object_get (value, hook_names[kind]);
      size_t mark;

      if (list == NULL || json_is_null (list))
        continue;
      mark = path_push_key (ctx, hook_names[kind]);
      if (want_array_of (ctx, list, sizeof (struct spec_hook), (void **) &hooks->list[kind],
                         &hooks->count[kind], parse_hook_item)
          < 0)
        return -1;
      path_pop (ctx, mark);
    }
  return 0;
}

static int
parse_annotations (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;
  const char *key;
  json_t *item;
  size_t n = 0;

  if (want_object (ctx, value) < 0)
    return -1;
  spec->annotations = xcalloc (2 * json_object_size (value) + 1, sizeof (char *));
  json_object_foreach (value, key, item)
  {
    size_t mark = path_push_key (ctx, key);
    const char *text;

    if (want_string (ctx, item, &text) < 0)
      return -1;
    spec->annotations[n++] = xstrdup (key);
    spec->annotations[n++] = xstrdup (text);
    path_pop (ctx, mark);
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* linux: namespaces, id mappings, devices                              */

static int
ns_from_name (const char *name)
{
  for (int type = 0; type < SPEC_NS_COUNT; type++)
    if (strcmp (ns_names[type], name) == 0)
      return type;
  return -1;
}

static int
parse_namespace_item (struct parse_ctx *ctx, json_t *item, struct spec *spec)
{
  json_t *type_json = json_object_get (item, "type");
  json_t *path_json = json_object_get (item, "path");
  const char *type_name, *path = NULL;
  size_t mark;
  int type;

  if (want_object (ctx, item) < 0)
    return -1;
  mark = path_push_key (ctx, "type");
  if (type_json == NULL || json_is_null (type_json))
    return ctx_fail (ctx, "required field is missing");
  if (want_string (ctx, type_json, &type_name) < 0)
    return -1;
  type = ns_from_name (type_name);
  if (type < 0)
    return ctx_fail (ctx, "unknown namespace type \"%s\"", type_name);
  if (spec->namespaces[type].present)
    return ctx_fail (ctx, "namespace \"%s\" is listed twice", type_name);
  path_pop (ctx, mark);
  if (path_json && !json_is_null (path_json))
    {
      mark = path_push_key (ctx, "path");
      if (want_string (ctx, path_json, &path) < 0 || check_absolute (ctx, path) < 0)
        return -1;
      path_pop (ctx, mark);
    }
  spec->namespaces[type].present = true;
  spec->namespaces[type].path = xstrdup (path);
  return 0;
}

static int
parse_namespaces (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  size_t i;
  json_t *item;

  if (!json_is_array (value))
    return ctx_fail (ctx, "must be an array");
  json_array_foreach (value, i, item)
  {
    size_t mark = path_push_index (ctx, i);

    if (parse_namespace_item (ctx, item, target) < 0)
      return -1;
    path_pop (ctx, mark);
  }
  return 0;
}

static const struct field id_mapping_fields[] = {
  REQUIRED_MEMBER ("containerID", parse_uint32_member, struct spec_id_mapping, container_id),
  REQUIRED_MEMBER ("hostID", parse_uint32_member, struct spec_id_mapping, host_id),
  REQUIRED_MEMBER ("size", parse_uint32_member, struct spec_id_mapping, size),
};

static int
parse_id_mapping_item (struct parse_ctx *ctx, json_t *item, void *elem)
{
  return parse_fields (ctx, item, id_mapping_fields, N_ELEMENTS (id_mapping_fields), elem);
}

static int
parse_uid_mappings (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;

  return want_array_of (ctx, value, sizeof (struct spec_id_mapping), (void **) &spec->uid_mappings,
                        &spec->n_uid_mappings, parse_id_mapping_item);
}

static int
parse_gid_mappings (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;

  return want_array_of (ctx, value, sizeof (struct spec_id_mapping), (void **) &spec->gid_mappings,
                        &spec->n_gid_mappings, parse_id_mapping_item);
}

static int
parse_device_type (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_device *device = target;
  const char *type;

  if (want_string (ctx, value, &type) < 0)
    return -1;
  if (strlen (type) != 1 || strchr ("cbup", type[0]) == NULL)
    return ctx_fail (ctx, "unknown device type \"%s\" (c, b, u or p)", type);
  device->type = type[0];
  return 0;
}

static int
parse_device_number (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  long long number;

  if (want_int (ctx, value, 0, UINT32_MAX, &number) < 0)
    return -1;
  *MEMBER_PTR (target, field, int64_t) = number;
  return 0;
}

static int
parse_device_mode (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_device *device = target;
  uint32_t mode;

  if (want_uint32 (ctx, value, &mode) < 0)
    return -1;
  device->has_mode = true;
  /* Callers sometimes pass a full st_mode; the node type comes from "type". */
  device->file_mode = mode & 07777;
  return 0;
}

static int
parse_device_uid (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_device *device = target;

  device->has_uid = true;
  return want_uint32 (ctx, value, &device->uid);
}

static int
parse_device_gid (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_device *device = target;

  device->has_gid = true;
  return want_uint32 (ctx, value, &device->gid);
}

static const struct field device_fields[] = {
  REQUIRED_MEMBER ("path", parse_abs_path_member, struct spec_device, path),
  REQUIRED ("type", parse_device_type),
  MEMBER ("major", parse_device_number, struct spec_device, major),
  MEMBER ("minor", parse_device_number, struct spec_device, minor),
  FIELD ("fileMode", parse_device_mode),
  FIELD ("uid", parse_device_uid),
  FIELD ("gid", parse_device_gid),
};

static int
parse_device_item (struct parse_ctx *ctx, json_t *item, void *elem)
{
  struct spec_device *device = elem;
  static const char *const numbers[] = { "major", "minor" };

  if (parse_fields (ctx, item, device_fields, N_ELEMENTS (device_fields), device) < 0)
    return -1;
  if (device->type == 'p')
    return 0;
  for (size_t i = 0; i < N_ELEMENTS (numbers); i++)
    {
      json_t *number = json_object_get (item, numbers[i]);
      if (number == NULL || json_is_null (number))
        {
          path_push_key (ctx, numbers[i]);
          return ctx_fail (ctx, "required for a device of type '%c'", device->type);
        }
    }
  return 0;
}

static int
parse_devices (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;

  return want_array_of (ctx, value, sizeof (struct spec_device), (void **) &spec->devices, &spec->n_devices,
                        parse_device_item);
}

/* ------------------------------------------------------------------ */
/* linux: cgroups path and resources                                    */

static int
parse_cgroups_path (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;
  const char *path;

  if (want_string (ctx, value, &path) < 0)
    return -1;
  if (path_has_dotdot (path))
    return ctx_fail (ctx, "must not contain \"..\"");
  if (path[0] != '\0')
    spec->cgroups_path = xstrdup (path);
  return 0;
}

/* The limits, in the order first_limit reports them.  A "keys" section
 * (memory, cpu...) is a limit as soon as one of its keys is set; the other
 * sections as soon as they are non-empty. */
enum limit_shape
{
  LIMIT_KEYS,
  LIMIT_NONEMPTY_ARRAY,
  LIMIT_NONEMPTY_OBJECT,
};

static const struct
{
  const char *name;
  enum limit_shape shape;
} limit_sections[] = {
  { "memory", LIMIT_KEYS },
  { "cpu", LIMIT_KEYS },
  { "pids", LIMIT_KEYS },
  { "blockIO", LIMIT_KEYS },
  { "hugepageLimits", LIMIT_NONEMPTY_ARRAY },
  { "network", LIMIT_KEYS },
  { "rdma", LIMIT_NONEMPTY_OBJECT },
  { "unified", LIMIT_NONEMPTY_OBJECT },
};

/* Checks the shape of one section and returns the name of the limit it
 * sets, or NULL. */
static int
limit_in_section (struct parse_ctx *ctx, json_t *section, size_t index, char **limit)
{
  const char *name = limit_sections[index].name;
  const char *key;
  json_t *value;

  *limit = NULL;
  if (limit_sections[index].shape == LIMIT_NONEMPTY_ARRAY)
    {
      if (!json_is_array (section))
        return ctx_fail (ctx, "must be an array");
      if (json_array_size (section) > 0)
        *limit = xstrdup (name);
      return 0;
    }
  if (want_object (ctx, section) < 0)
    return -1;
  if (limit_sections[index].shape == LIMIT_NONEMPTY_OBJECT)
    {
      if (json_object_size (section) > 0)
        *limit = xstrdup (name);
      return 0;
    }
  json_object_foreach (section, key, value) if (!json_is_null (value))
  {
    *limit = xasprintf ("%s.%s", name, key);
    return 0;
  }
  return 0;
}

static const char *const device_rule_types[] = { "a", "c", "b" };

static int
check_device_rule_type (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  const char *type;

  if (want_string (ctx, value, &type) < 0)
    return -1;
  for (size_t i = 0; i < N_ELEMENTS (device_rule_types); i++)
    if (strcmp (type, device_rule_types[i]) == 0)
      return 0;
  return ctx_fail (ctx, "unknown device type \"%s\" (a, c or b)", type);
}

static int
check_device_rule_number (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  long long number;

  /* -1 is how some callers write "any". */
  return want_int (ctx, value, -1, UINT32_MAX, &number);
}

static int
check_device_rule_access (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  const char *access;

  if (want_string (ctx, value, &access) < 0)
    return -1;
  if (access[strspn (access, "rwm")] != '\0')
    return ctx_fail (ctx, "\"%s\" may only contain r, w and m", access);
  return 0;
}

static int
check_device_rule_allow (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  bool allow;

  return want_bool (ctx, value, &allow);
}

/* Checked only: the device controller reads resources.devices itself. */
static const struct field device_rule_fields[] = {
  REQUIRED ("allow", check_device_rule_allow), FIELD ("type", check_device_rule_type),
  FIELD ("major", check_device_rule_number),   FIELD ("minor", check_device_rule_number),
  FIELD ("access", check_device_rule_access),
};

static int
check_device_rules (struct parse_ctx *ctx, json_t *rules)
{
  size_t i;
  json_t *rule;

  if (!json_is_array (rules))
    return ctx_fail (ctx, "must be an array");
  json_array_foreach (rules, i, rule)
  {
    size_t mark = path_push_index (ctx, i);

    if (parse_fields (ctx, rule, device_rule_fields, N_ELEMENTS (device_rule_fields), NULL) < 0)
      return -1;
    path_pop (ctx, mark);
  }
  return 0;
}

static int
parse_resources (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_resources *resources = &((struct spec *) target)->resources;
  json_t *rules = json_object_get (value, "devices");

  if (want_object (ctx, value) < 0)
    return -1;
  resources->raw = value;
  if (rules && !json_is_null (rules))
    {
      size_t mark = path_push_key (ctx, "devices");
      if (check_device_rules (ctx, rules) < 0)
        return -1;
      path_pop (ctx, mark);
    }
  for (size_t i = 0; i < N_ELEMENTS (limit_sections); i++)
    {
      json_t *section = json_object_get (value, limit_sections[i].name);
      char *limit = NULL;
      size_t mark;

      if (section == NULL || json_is_null (section))
        continue;
      mark = path_push_key (ctx, limit_sections[i].name);
      if (limit_in_section (ctx, section, i, &limit) < 0)
        return -1;
      path_pop (ctx, mark);
      if (limit && !resources->has_limits)
        {
          resources->has_limits = true;
          resources->first_limit = limit;
        }
      else
        free (limit);
    }
  return 0;
}

/* ------------------------------------------------------------------ */
/* linux: propagation, sysctl, time offsets                             */

static int
parse_rootfs_propagation (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;
  const struct mount_option *option;
  const char *name;

  if (want_string (ctx, value, &name) < 0)
    return -1;
  if (name[0] == '\0')
    return 0;
  option = find_mount_option (name);
  if (option == NULL || option->kind != MOUNT_OPT_PROPAGATION)
    return ctx_fail (ctx, "unknown propagation \"%s\"", name);
  spec->rootfs_propagation = option->set;
  return 0;
}

static int
parse_sysctl (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;
  const char *key;
  json_t *item;

  if (want_object (ctx, value) < 0)
    return -1;
  spec->sysctls = xcalloc (json_object_size (value), sizeof (struct spec_sysctl));
  json_object_foreach (value, key, item)
  {
    size_t mark = path_push_key (ctx, key);
    const char *text;

    if (want_string (ctx, item, &text) < 0)
      return -1;
    spec->sysctls[spec->n_sysctls].key = xstrdup (key);
    spec->sysctls[spec->n_sysctls].value = xstrdup (text);
    spec->n_sysctls++;
    path_pop (ctx, mark);
  }
  return 0;
}

struct time_offset
{
  int64_t secs;
  uint32_t nanosecs;
};

static int
parse_offset_secs (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  long long secs;

  if (want_int (ctx, value, LLONG_MIN, LLONG_MAX, &secs) < 0)
    return -1;
  ((struct time_offset *) target)->secs = secs;
  return 0;
}

static int
parse_offset_nanosecs (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  long long nanosecs;

  if (want_int (ctx, value, 0, 999999999, &nanosecs) < 0)
    return -1;
  ((struct time_offset *) target)->nanosecs = (uint32_t) nanosecs;
  return 0;
}

static const struct field time_offset_fields[] = {
  FIELD ("secs", parse_offset_secs),
  FIELD ("nanosecs", parse_offset_nanosecs),
};

static int
parse_time_offsets (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;
  const char *clock;
  json_t *item;

  if (want_object (ctx, value) < 0)
    return -1;
  spec->has_time_offsets = true;
  json_object_foreach (value, clock, item)
  {
    size_t mark = path_push_key (ctx, clock);
    struct time_offset offset = { 0, 0 };
    size_t index;

    for (index = 0; index < N_ELEMENTS (time_offset_clocks); index++)
      if (strcmp (clock, time_offset_clocks[index]) == 0)
        break;
    if (index == N_ELEMENTS (time_offset_clocks))
      return ctx_fail (ctx, "unknown clock (boottime or monotonic)");
    if (parse_fields (ctx, item, time_offset_fields, N_ELEMENTS (time_offset_fields), &offset) < 0)
      return -1;
    spec->time_offset_secs[index] = offset.secs;
    spec->time_offset_nanosecs[index] = offset.nanosecs;
    path_pop (ctx, mark);
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* linux.seccomp                                                        */

/* Reads ACTION_KEY and ERRNO_KEY of OBJECT into one SCMP_ACT_* value. */
static int
parse_seccomp_action (struct parse_ctx *ctx, json_t *object, const char *action_key, const char *errno_key,
                      uint32_t *out)
{
  json_t *action_json = json_object_get (object, action_key);
  json_t *errno_json = json_object_get (object, errno_key);
  long long errno_ret = EPERM;
  const char *name;
  size_t mark;

  if (errno_json && !json_is_null (errno_json))
    {
      mark = path_push_key (ctx, errno_key);
      if (want_int (ctx, errno_json, 0, 0xffff, &errno_ret) < 0)
        return -1;
      path_pop (ctx, mark);
    }
  mark = path_push_key (ctx, action_key);
  if (action_json == NULL || json_is_null (action_json))
    return ctx_fail (ctx, "required field is missing");
  if (want_string (ctx, action_json, &name) < 0)
    return -1;
  for (size_t i = 0; i < N_ELEMENTS (seccomp_actions); i++)
    {
      if (strcmp (seccomp_actions[i].name, name) != 0)
        continue;
      if (seccomp_actions[i].kind == ACTION_UNSUPPORTED)
        return ctx_fail (ctx, "action %s is not supported", name);
      *out = seccomp_actions[i].action;
      if (seccomp_actions[i].kind == ACTION_WITH_ERRNO)
        *out |= (uint32_t) errno_ret;
      path_pop (ctx, mark);
      return 0;
    }
  return ctx_fail (ctx, "unknown action \"%s\"", name);
}

/* "SCMP_ARCH_X86_64" -> libseccomp's token for "x86_64"; 0 if unknown. */
static uint32_t
seccomp_arch_from_name (const char *name)
{
  const char *prefix = "SCMP_ARCH_";
  char lower[32];
  size_t n;

  if (!husk_str_has_prefix (name, prefix))
    return 0;
  name += strlen (prefix);
  for (n = 0; name[n] && n < sizeof lower - 1; n++)
    lower[n] = (char) tolower ((unsigned char) name[n]);
  if (name[n] != '\0')
    return 0;
  lower[n] = '\0';
  return seccomp_arch_resolve_name (lower);
}

static int
parse_seccomp_archs (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_seccomp *seccomp = target;
  size_t i;
  json_t *item;

  if (!json_is_array (value))
    return ctx_fail (ctx, "must be an array of strings");
  seccomp->archs = xcalloc (json_array_size (value), sizeof (uint32_t));
  json_array_foreach (value, i, item)
  {
    size_t mark = path_push_index (ctx, i);
    const char *name;
    uint32_t arch;

    if (want_string (ctx, item, &name) < 0)
      return -1;
    arch = seccomp_arch_from_name (name);
    if (arch == 0)
      return ctx_fail (ctx, "unknown architecture \"%s\"", name);
    seccomp->archs[seccomp->n_archs++] = arch;
    path_pop (ctx, mark);
  }
  return 0;
}

static int
parse_seccomp_flags (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_seccomp *seccomp = target;
  size_t i;
  json_t *item;

  if (!json_is_array (value))
    return ctx_fail (ctx, "must be an array of strings");
  json_array_foreach (value, i, item)
  {
    size_t mark = path_push_index (ctx, i);
    const char *name;
    long flag;

    if (want_string (ctx, item, &name) < 0)
      return -1;
    if (lookup_name (seccomp_flag_names, N_ELEMENTS (seccomp_flag_names), name, &flag) < 0)
      return ctx_fail (ctx, "unknown flag \"%s\"", name);
    /* The kernel refuses it without a notify listener, which husk has not. */
    if (flag == SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)
      ctx_warn (ctx, "%s has no effect without a seccomp listener, ignored", name);
    else
      seccomp->flags |= (unsigned) flag;
    path_pop (ctx, mark);
  }
  return 0;
}

static int
parse_listener_path (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  const char *path;

  if (want_string (ctx, value, &path) < 0)
    return -1;
  if (path[0] != '\0')
    return ctx_fail (ctx, "seccomp notify listeners are not supported");
  return 0;
}

static int
parse_arg_index (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  long long index;

  if (want_int (ctx, value, 0, 5, &index) < 0)
    return -1;
  ((struct spec_seccomp_arg *) target)->index = (unsigned) index;
  return 0;
}

static int
parse_arg_op (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  const char *name;
  long op;

  if (want_string (ctx, value, &name) < 0)
    return -1;
  if (lookup_name (seccomp_op_names, N_ELEMENTS (seccomp_op_names), name, &op) < 0)
    return ctx_fail (ctx, "unknown operator \"%s\"", name);
  ((struct spec_seccomp_arg *) target)->op = (int) op;
  return 0;
}

static const struct field seccomp_arg_fields[] = {
  REQUIRED ("index", parse_arg_index),
  REQUIRED_MEMBER ("value", parse_uint64_member, struct spec_seccomp_arg, value),
  MEMBER ("valueTwo", parse_uint64_member, struct spec_seccomp_arg, value_two),
  REQUIRED ("op", parse_arg_op),
};

static int
parse_seccomp_arg_item (struct parse_ctx *ctx, json_t *item, void *elem)
{
  return parse_fields (ctx, item, seccomp_arg_fields, N_ELEMENTS (seccomp_arg_fields), elem);
}

static int
parse_rule_names (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_seccomp_rule *rule = target;

  if (want_strv (ctx, value, NULL, &rule->names) < 0)
    return -1;
  if (rule->names[0] == NULL)
    return ctx_fail (ctx, "must not be empty");
  return 0;
}

static int
parse_rule_args (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_seccomp_rule *rule = target;

  return want_array_of (ctx, value, sizeof (struct spec_seccomp_arg), (void **) &rule->args, &rule->n_args,
                        parse_seccomp_arg_item);
}

static const struct field seccomp_rule_fields[] = {
  REQUIRED ("names", parse_rule_names),
  FIELD ("args", parse_rule_args),
};

static int
parse_seccomp_rule_item (struct parse_ctx *ctx, json_t *item, void *elem)
{
  struct spec_seccomp_rule *rule = elem;

  if (parse_fields (ctx, item, seccomp_rule_fields, N_ELEMENTS (seccomp_rule_fields), rule) < 0)
    return -1;
  return parse_seccomp_action (ctx, item, "action", "errnoRet", &rule->action);
}

static int
parse_seccomp_rules (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_seccomp *seccomp = target;

  return want_array_of (ctx, value, sizeof (struct spec_seccomp_rule), (void **) &seccomp->rules,
                        &seccomp->n_rules, parse_seccomp_rule_item);
}

static const struct field seccomp_fields[] = {
  FIELD ("architectures", parse_seccomp_archs),
  FIELD ("flags", parse_seccomp_flags),
  FIELD ("listenerPath", parse_listener_path),
  FIELD ("syscalls", parse_seccomp_rules),
};

static int
parse_seccomp (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;

  spec->has_seccomp = true;
  if (want_object (ctx, value) < 0
      || parse_seccomp_action (ctx, value, "defaultAction", "defaultErrnoRet", &spec->seccomp.default_action)
             < 0)
    return -1;
  return parse_fields (ctx, value, seccomp_fields, N_ELEMENTS (seccomp_fields), &spec->seccomp);
}

/* ------------------------------------------------------------------ */
/* The document                                                         */

static const struct field linux_fields[] = {
  FIELD ("namespaces", parse_namespaces),
  FIELD ("uidMappings", parse_uid_mappings),
  FIELD ("gidMappings", parse_gid_mappings),
  FIELD ("devices", parse_devices),
  FIELD ("cgroupsPath", parse_cgroups_path),
  FIELD ("resources", parse_resources),
  FIELD ("rootfsPropagation", parse_rootfs_propagation),
  MEMBER ("maskedPaths", parse_abs_path_list_member, struct spec, masked_paths),
  MEMBER ("readonlyPaths", parse_abs_path_list_member, struct spec, readonly_paths),
  FIELD ("sysctl", parse_sysctl),
  FIELD ("seccomp", parse_seccomp),
  MEMBER ("mountLabel", parse_string_member, struct spec, mount_label),
  FIELD ("timeOffsets", parse_time_offsets),
};

static int
parse_linux (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  return parse_fields (ctx, value, linux_fields, N_ELEMENTS (linux_fields), target);
}

static const struct field spec_fields[] = {
  REQUIRED ("ociVersion", parse_oci_version),
  REQUIRED ("root", parse_root),
  FIELD ("process", parse_process),
  MEMBER ("hostname", parse_string_member, struct spec, hostname),
  MEMBER ("domainname", parse_string_member, struct spec, domainname),
  FIELD ("mounts", parse_mounts),
  FIELD ("hooks", parse_hooks),
  FIELD ("annotations", parse_annotations),
  FIELD ("linux", parse_linux),
};

/* Rules that tie fields together, checked once everything is read. */
static int
check_consistency (struct parse_ctx *ctx, const struct spec *spec)
{
  const struct spec_namespace *userns = &spec->namespaces[SPEC_NS_USER];

  if (userns->present && userns->path == NULL)
    {
      if (spec->n_uid_mappings == 0)
        return ctx_fail (ctx, "linux.uidMappings: required for a new user namespace");
      if (spec->n_gid_mappings == 0)
        return ctx_fail (ctx, "linux.gidMappings: required for a new user namespace");
    }
  if (!userns->present && spec->n_uid_mappings > 0)
    return ctx_fail (ctx, "linux.uidMappings: set, but linux.namespaces has no user namespace");
  if (!userns->present && spec->n_gid_mappings > 0)
    return ctx_fail (ctx, "linux.gidMappings: set, but linux.namespaces has no user namespace");
  if (spec->has_time_offsets && !spec->namespaces[SPEC_NS_TIME].present)
    return ctx_fail (ctx, "linux.timeOffsets: set, but linux.namespaces has no time namespace");
  return 0;
}

static void
spec_freep (struct spec **spec)
{
  spec_free (*spec);
  *spec = NULL;
}

/* Integers above INT64_MAX (RLIM_INFINITY written as 18446744073709551615,
 * 64-bit seccomp masks) overflow jansson's integers; such a document is read
 * again with numbers as doubles, which want_int/want_uint64 accept. */
static json_t *
load_json (struct parse_ctx *ctx, const char *text, size_t len)
{
  json_error_t json_error;
  json_t *root = json_loadb (text, len, 0, &json_error);

  if (root == NULL && json_error_code (&json_error) == json_error_numeric_overflow)
    root = json_loadb (text, len, JSON_DECODE_INT_AS_REAL, &json_error);
  if (root == NULL)
    ctx_fail (ctx, "line %d column %d: %s", json_error.line, json_error.column, json_error.text);
  return root;
}

int
spec_parse (const char *text, size_t len, const char *file_name, const char *bundle_dir, struct spec **out,
            struct husk_error **err)
{
  __attribute__ ((cleanup (spec_freep))) struct spec *spec = NULL;
  struct parse_ctx ctx = { .file = file_name, .err = err };
  char resolved[PATH_MAX];

  if (realpath (bundle_dir ? bundle_dir : ".", resolved) == NULL)
    return husk_error_make (err, errno, "bundle `%s`", bundle_dir ? bundle_dir : ".");
  spec = xcalloc (1, sizeof *spec);
  spec->bundle_dir = xstrdup (resolved);
  ctx.bundle_dir = spec->bundle_dir;
  spec->json = load_json (&ctx, text, len);
  if (spec->json == NULL)
    return -1;
  if (!json_is_object ((json_t *) spec->json))
    return ctx_fail (&ctx, "must be a JSON object");
  if (parse_fields (&ctx, spec->json, spec_fields, N_ELEMENTS (spec_fields), spec) < 0
      || check_consistency (&ctx, spec) < 0)
    return -1;
  *out = steal_pointer (&spec);
  return 0;
}

int
spec_load (const char *bundle_dir, struct spec **out, struct husk_error **err)
{
  cleanup_free char *config_path = xasprintf ("%s/config.json", bundle_dir);
  cleanup_free char *text = NULL;
  size_t len = 0;

  if (husk_read_file (config_path, &text, &len, err) < 0)
    return -1;
  return spec_parse (text, len, config_path, bundle_dir, out, err);
}

int
spec_parse_process (const char *text, size_t len, const char *file_name, struct spec_process *out,
                    struct husk_error **err)
{
  json_auto_t *root = NULL;
  struct parse_ctx ctx = { .file = file_name, .err = err };

  memset (out, 0, sizeof *out);
  root = load_json (&ctx, text, len);
  if (root == NULL)
    return -1;
  if (parse_process_object (&ctx, root, out) < 0)
    {
      spec_process_clear (out);
      return -1;
    }
  return 0;
}

/* ------------------------------------------------------------------ */
/* Freeing                                                              */

void
spec_process_clear (struct spec_process *process)
{
  husk_strvfreep (&process->args);
  husk_strvfreep (&process->env);
  free (process->cwd);
  free (process->user.additional_gids);
  free (process->rlimits);
  free (process->apparmor_profile);
  free (process->selinux_label);
  memset (process, 0, sizeof *process);
}

static void
seccomp_clear (struct spec_seccomp *seccomp)
{
  for (size_t i = 0; i < seccomp->n_rules; i++)
    {
      husk_strvfreep (&seccomp->rules[i].names);
      free (seccomp->rules[i].args);
    }
  free (seccomp->rules);
  free (seccomp->archs);
  free (seccomp->listener_path);
}

static void
mounts_free (struct spec_mount *mounts, size_t n_mounts)
{
  for (size_t i = 0; i < n_mounts; i++)
    {
      free (mounts[i].destination);
      free (mounts[i].source);
      free (mounts[i].type);
      free (mounts[i].data);
    }
  free (mounts);
}

static void
hooks_clear (struct spec_hooks *hooks)
{
  for (int kind = 0; kind < SPEC_HOOK_KIND_COUNT; kind++)
    {
      for (size_t i = 0; i < hooks->count[kind]; i++)
        {
          free (hooks->list[kind][i].path);
          husk_strvfreep (&hooks->list[kind][i].args);
          husk_strvfreep (&hooks->list[kind][i].env);
        }
      free (hooks->list[kind]);
    }
}

void
spec_free (struct spec *spec)
{
  if (spec == NULL)
    return;
  free (spec->oci_version);
  free (spec->bundle_dir);
  free (spec->root_path);
  free (spec->hostname);
  free (spec->domainname);
  spec_process_clear (&spec->process);
  mounts_free (spec->mounts, spec->n_mounts);
  hooks_clear (&spec->hooks);
  husk_strvfreep (&spec->annotations);
  for (int type = 0; type < SPEC_NS_COUNT; type++)
    free (spec->namespaces[type].path);
  free (spec->uid_mappings);
  free (spec->gid_mappings);
  for (size_t i = 0; i < spec->n_devices; i++)
    free (spec->devices[i].path);
  free (spec->devices);
  free (spec->cgroups_path);
  free (spec->resources.first_limit);
  husk_strvfreep (&spec->masked_paths);
  husk_strvfreep (&spec->readonly_paths);
  for (size_t i = 0; i < spec->n_sysctls; i++)
    {
      free (spec->sysctls[i].key);
      free (spec->sysctls[i].value);
    }
  free (spec->sysctls);
  seccomp_clear (&spec->seccomp);
  free (spec->mount_label);
  json_decref (spec->json);
  free (spec);
}
