/* config.json "process": args, env, cwd, user, capabilities, rlimits,
 * oomScoreAdj, console size and the LSM labels, plus the capability names
 * husk knows (spec_capability_*). */
#include <inttypes.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <jansson.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/spec/spec_internal.h"

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

static const struct named_value rlimit_names[] = {
  NAMED (RLIMIT_AS),     NAMED (RLIMIT_CORE),   NAMED (RLIMIT_CPU),        NAMED (RLIMIT_DATA),
  NAMED (RLIMIT_FSIZE),  NAMED (RLIMIT_LOCKS),  NAMED (RLIMIT_MEMLOCK),    NAMED (RLIMIT_MSGQUEUE),
  NAMED (RLIMIT_NICE),   NAMED (RLIMIT_NOFILE), NAMED (RLIMIT_NPROC),      NAMED (RLIMIT_RSS),
  NAMED (RLIMIT_RTPRIO), NAMED (RLIMIT_RTTIME), NAMED (RLIMIT_SIGPENDING), NAMED (RLIMIT_STACK),
};

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

static int
check_env_entry (struct parse_ctx *ctx, const char *entry)
{
  if (strchr (entry, '=') == NULL)
    return ctx_fail (ctx, "\"%s\" must have the form NAME=VALUE", entry);
  return 0;
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

int
parse_process_object (struct parse_ctx *ctx, json_t *value, struct spec_process *process)
{
  if (parse_fields (ctx, value, process_fields, N_ELEMENTS (process_fields), process) < 0)
    return -1;
  if (process->env == NULL)
    process->env = xcalloc (1, sizeof (char *));
  return 0;
}

int
parse_process (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;

  spec->has_process = true;
  return parse_process_object (ctx, value, &spec->process);
}
