/* config.json linux.cgroupsPath and linux.resources: resources are only
 * checked here and kept as JSON for the cgroup code, which applies them. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "husk/util.h"
#include "runtime/spec/spec_internal.h"

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
/* linux: cgroups path and resources                                    */

int
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

int
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
