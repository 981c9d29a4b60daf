/* config.json "linux": namespaces, uid/gid mappings, devices,
 * rootfsPropagation, sysctl, timeOffsets and the "linux" object itself
 * (resources are in spec_resources.c, seccomp in spec_seccomp.c). */
#include <limits.h>
#include <string.h>

#include <jansson.h>

#include "husk/util.h"
#include "runtime/spec/spec_internal.h"

static const char *const ns_names[SPEC_NS_COUNT] = {
  [SPEC_NS_PID] = "pid", [SPEC_NS_NETWORK] = "network", [SPEC_NS_MOUNT] = "mount",   [SPEC_NS_IPC] = "ipc",
  [SPEC_NS_UTS] = "uts", [SPEC_NS_USER] = "user",       [SPEC_NS_CGROUP] = "cgroup", [SPEC_NS_TIME] = "time",
};

const char *
spec_ns_name (enum spec_ns_type type)
{
  if ((int) type < 0 || type >= SPEC_NS_COUNT)
    return NULL;
  return ns_names[type];
}

/* linux.timeOffsets clocks, in the order of spec->time_offset_*[]. */
static const char *const time_offset_clocks[2] = { "boottime", "monotonic" };

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
/* The linux object                                                     */

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

int
parse_linux (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  return parse_fields (ctx, value, linux_fields, N_ELEMENTS (linux_fields), target);
}
