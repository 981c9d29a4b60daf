/* config.json linux.seccomp: default action, architectures, flags and
 * syscall rules, turned into libseccomp values. */
#include <ctype.h>
#include <errno.h>
#include <seccomp.h>
#include <string.h>

#include <jansson.h>

#include "husk/util.h"
#include "runtime/spec/spec_internal.h"

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

int
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
