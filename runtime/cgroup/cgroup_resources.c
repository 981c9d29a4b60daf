/* linux.resources -> cgroup files.  Parsing validates every value with a
 * field path in its errors; writing first turns the request into a plan
 * (cgroup_plan.h: directory, file, value, the field it came from, the
 * controller it needs), with the v2 steps here and the v1 steps in
 * cgroup_resources_v1.c, checks the whole plan, and only then writes,
 * undoing on a refusal. */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/cgroup/cgroup_plan.h"

/* ------------------------------------------------------------ parsing */

static json_t *
member (json_t *object, const char *key)
{
  json_t *value = json_object_get (object, key);

  return json_is_null (value) ? NULL : value;
}

/* An integer KEY of OBJECT within [MIN, MAX]; absent or null leaves OUT unset. */
static int
read_int (json_t *object, const char *key, const char *where, const char *section, int64_t min, int64_t max,
          struct cgroup_value *out, struct husk_error **err)
{
  json_t *value = member (object, key);
  cleanup_free char *field = xasprintf ("%s%s%s", section, *section ? "." : "", key);
  json_int_t number;

  if (value == NULL)
    return 0;
  if (!json_is_integer (value))
    return cgroup_field_error (err, where, field, "must be an integer");
  number = json_integer_value (value);
  if (number < min)
    return cgroup_field_error (err, where, field, "must be >= %lld", (long long) min);
  if (number > max)
    return cgroup_field_error (err, where, field, "must be <= %lld", (long long) max);
  out->set = true;
  out->value = number;
  return 0;
}

static int
read_bool (json_t *object, const char *key, const char *where, const char *field, bool *out,
           struct husk_error **err)
{
  json_t *value = member (object, key);

  if (value == NULL)
    return 0;
  if (!json_is_boolean (value))
    return cgroup_field_error (err, where, field, "must be true or false");
  *out = json_is_true (value);
  return 0;
}

static int
want_section (json_t *section, const char *where, const char *name, bool array, struct husk_error **err)
{
  if (array ? json_is_array (section) : json_is_object (section))
    return 0;
  return husk_error_make (err, 0, "%s.%s: must be an %s", where, name, array ? "array" : "object");
}

/* Fields with no meaning here that are harmless to drop. */
static void
warn_ignored (json_t *object, const char *where, const char *section, const char *key, const char *why)
{
  json_t *value = member (object, key);

  if (value && !(json_is_integer (value) && json_integer_value (value) == 0) && !json_is_false (value))
    husk_warn ("%s.%s.%s: ignored: %s", where, section, key, why);
}

/* Zero means "not set" in runc's Go structs; treat it so. */
static void
zero_unsets (struct cgroup_value *value)
{
  if (value->set && value->value == 0)
    value->set = false;
}

static int
parse_memory (json_t *memory, const char *where, struct cgroup_resources *res, struct husk_error **err)
{
  if (want_section (memory, where, "memory", false, err) < 0
      || read_int (memory, "limit", where, "memory", -1, INT64_MAX, &res->memory.limit, err) < 0
      || read_int (memory, "reservation", where, "memory", -1, INT64_MAX, &res->memory.reservation, err) < 0
      || read_int (memory, "swap", where, "memory", -1, INT64_MAX, &res->memory.swap, err) < 0
      || read_int (memory, "kernel", where, "memory", -1, INT64_MAX, &res->memory.kernel, err) < 0
      || read_int (memory, "kernelTCP", where, "memory", -1, INT64_MAX, &res->memory.kernel_tcp, err) < 0
      || read_int (memory, "swappiness", where, "memory", -1, 100, &res->memory.swappiness, err) < 0
      || read_bool (memory, "disableOOMKiller", where, "memory.disableOOMKiller",
                    &res->memory.disable_oom_killer, err)
             < 0
      || read_bool (memory, "checkBeforeUpdate", where, "memory.checkBeforeUpdate",
                    &res->memory.check_before_update, err)
             < 0)
    return -1;
  zero_unsets (&res->memory.kernel);
  zero_unsets (&res->memory.kernel_tcp);
  /* runc: a swappiness of -1 (or beyond 100 as uint64 -1) means unset. */
  if (res->memory.swappiness.set && res->memory.swappiness.value < 0)
    res->memory.swappiness.set = false;
  zero_unsets (&res->memory.limit);
  zero_unsets (&res->memory.swap);
  if (res->memory.limit.set && res->memory.limit.value > 0 && res->memory.limit.value < 4096)
    return cgroup_field_error (err, where, "memory.limit", "%lld bytes is less than one page (4096)",
                               (long long) res->memory.limit.value);
  return 0;
}

/* "0-3,5,7-8": the kernel's list format for cpuset.cpus and .mems. */
static bool
valid_cpu_list (const char *list)
{
  const char *p = list;

  while (*p)
    {
      char *end;
      unsigned long first = strtoul (p, &end, 10), last;

      if (end == p || *p == '-' || *p == '+')
        return false;
      last = first;
      if (*end == '-')
        {
          p = end + 1;
          if (*p < '0' || *p > '9')
            return false;
          last = strtoul (p, &end, 10);
        }
      if (last < first)
        return false;
      p = end;
      if (*p == ',')
        p++;
      else if (*p)
        return false;
    }
  return *list != '\0' && list[strlen (list) - 1] != ',';
}

static int
read_cpu_list (json_t *cpu, const char *key, const char *where, char **out, struct husk_error **err)
{
  json_t *value = member (cpu, key);
  cleanup_free char *field = xasprintf ("cpu.%s", key);

  if (value == NULL)
    return 0;
  if (!json_is_string (value))
    return cgroup_field_error (err, where, field, "must be a string");
  if (json_string_length (value) == 0)
    return 0;
  if (!valid_cpu_list (json_string_value (value)))
    return cgroup_field_error (err, where, field, "`%s` is not a list like `0-3,5`",
                               json_string_value (value));
  *out = xstrdup (json_string_value (value));
  return 0;
}

static int
parse_cpu (json_t *cpu, const char *where, struct cgroup_resources *res, struct husk_error **err)
{
  if (want_section (cpu, where, "cpu", false, err) < 0
      || read_int (cpu, "shares", where, "cpu", 0, 262144, &res->cpu.shares, err) < 0
      || read_int (cpu, "quota", where, "cpu", -1, INT64_MAX, &res->cpu.quota, err) < 0
      || read_int (cpu, "period", where, "cpu", 0, 1000000, &res->cpu.period, err) < 0
      || read_int (cpu, "burst", where, "cpu", 0, INT64_MAX, &res->cpu.burst, err) < 0
      || read_int (cpu, "idle", where, "cpu", 0, 1, &res->cpu.idle, err) < 0
      || read_int (cpu, "realtimeRuntime", where, "cpu", -1, INT64_MAX, &res->cpu.rt_runtime, err) < 0
      || read_int (cpu, "realtimePeriod", where, "cpu", 0, INT64_MAX, &res->cpu.rt_period, err) < 0
      || read_cpu_list (cpu, "cpus", where, &res->cpu.cpus, err) < 0
      || read_cpu_list (cpu, "mems", where, &res->cpu.mems, err) < 0)
    return -1;
  zero_unsets (&res->cpu.shares);
  zero_unsets (&res->cpu.quota);
  zero_unsets (&res->cpu.period);
  if (res->cpu.shares.set && res->cpu.shares.value < 2)
    return cgroup_field_error (err, where, "cpu.shares", "must be between 2 and 262144");
  if (res->cpu.quota.set && res->cpu.quota.value > 0 && res->cpu.quota.value < 1000)
    return cgroup_field_error (err, where, "cpu.quota",
                               "must be -1 (no limit) or at least 1000 (microseconds)");
  if (res->cpu.period.set && res->cpu.period.value < 1000)
    return cgroup_field_error (err, where, "cpu.period", "must be between 1000 and 1000000 (microseconds)");
  zero_unsets (&res->cpu.rt_runtime);
  zero_unsets (&res->cpu.rt_period);
  return 0;
}

static int
parse_pids (json_t *pids, const char *where, struct cgroup_resources *res, struct husk_error **err)
{
  if (want_section (pids, where, "pids", false, err) < 0
      || read_int (pids, "limit", where, "pids", -1, INT64_MAX, &res->pids_limit, err) < 0)
    return -1;
  /* As crun: 0 and -1 both mean no limit. */
  if (res->pids_limit.set && res->pids_limit.value == 0)
    res->pids_limit.value = -1;
  return 0;
}

static const char *const throttle_keys[CGROUP_THROTTLE_COUNT] = {
  [CGROUP_THROTTLE_READ_BPS] = "throttleReadBpsDevice",
  [CGROUP_THROTTLE_WRITE_BPS] = "throttleWriteBpsDevice",
  [CGROUP_THROTTLE_READ_IOPS] = "throttleReadIOPSDevice",
  [CGROUP_THROTTLE_WRITE_IOPS] = "throttleWriteIOPSDevice",
};

/* One array of {major, minor, VALUE_KEY}; weights are checked to 10..1000. */
static int
parse_io_devices (json_t *list, const char *where, const char *key, const char *value_key,
                  struct cgroup_io_device **out, size_t *n_out, struct husk_error **err)
{
  cleanup_free char *section = xasprintf ("blockIO.%s", key);
  bool weights = strcmp (value_key, "weight") == 0;
  json_t *item;
  size_t i;

  if (list == NULL)
    return 0;
  if (want_section (list, where, section, true, err) < 0)
    return -1;
  *out = xcalloc (json_array_size (list) + 1, sizeof **out);
  json_array_foreach (list, i, item)
  {
    cleanup_free char *at = xasprintf ("%s[%zu]", section, i);
    struct cgroup_value major = { 0 }, minor = { 0 }, value = { 0 };

    if (want_section (item, where, at, false, err) < 0
        || read_int (item, "major", where, at, 0, UINT32_MAX, &major, err) < 0
        || read_int (item, "minor", where, at, 0, UINT32_MAX, &minor, err) < 0
        || read_int (item, value_key, where, at, weights ? 10 : 0, weights ? 1000 : INT64_MAX, &value, err)
               < 0)
      return -1;
    if (!major.set || !minor.set)
      return cgroup_field_error (err, where, at, "major and minor are required");
    warn_ignored (item, where, at, "leafWeight", "cgroup v2 has no leaf weights");
    if (!value.set)
      continue; /* a weightDevice entry with only a leafWeight */
    (*out)[*n_out] = (struct cgroup_io_device){ major.value, minor.value, (uint64_t) value.value };
    (*n_out)++;
  }
  return 0;
}

static int
parse_block_io (json_t *io, const char *where, struct cgroup_resources *res, struct husk_error **err)
{
  if (want_section (io, where, "blockIO", false, err) < 0
      || read_int (io, "weight", where, "blockIO", 0, 1000, &res->io.weight, err) < 0)
    return -1;
  zero_unsets (&res->io.weight);
  if (res->io.weight.set && res->io.weight.value < 10)
    return cgroup_field_error (err, where, "blockIO.weight", "must be between 10 and 1000");
  warn_ignored (io, where, "blockIO", "leafWeight", "cgroup v2 has no leaf weights");
  if (parse_io_devices (member (io, "weightDevice"), where, "weightDevice", "weight", &res->io.weight_devices,
                        &res->io.n_weight_devices, err)
      < 0)
    return -1;
  for (int t = 0; t < CGROUP_THROTTLE_COUNT; t++)
    if (parse_io_devices (member (io, throttle_keys[t]), where, throttle_keys[t], "rate",
                          &res->io.throttle[t], &res->io.n_throttle[t], err)
        < 0)
      return -1;
  return 0;
}

/* "2MB", "64KB", "1GB": how the runtime spec and the hugetlb files name sizes. */
static bool
valid_page_size (const char *size)
{
  size_t digits = strspn (size, "0123456789");

  return digits > 0 && size[0] != '0'
         && (strcmp (size + digits, "KB") == 0 || strcmp (size + digits, "MB") == 0
             || strcmp (size + digits, "GB") == 0);
}

static int
parse_hugepages (json_t *list, const char *where, struct cgroup_resources *res, struct husk_error **err)
{
  json_t *item;
  size_t i;

  if (want_section (list, where, "hugepageLimits", true, err) < 0)
    return -1;
  res->hugepages = xcalloc (json_array_size (list) + 1, sizeof *res->hugepages);
  json_array_foreach (list, i, item)
  {
    cleanup_free char *at = xasprintf ("hugepageLimits[%zu]", i);
    struct cgroup_value limit = { 0 };
    json_t *size = member (item, "pageSize");

    if (want_section (item, where, at, false, err) < 0
        || read_int (item, "limit", where, at, 0, INT64_MAX, &limit, err) < 0)
      return -1;
    if (!json_is_string (size) || !valid_page_size (json_string_value (size)))
      return cgroup_field_error (err, where, at, "pageSize must be a size like `2MB` or `1GB`");
    if (!limit.set)
      return cgroup_field_error (err, where, at, "limit is required");
    res->hugepages[res->n_hugepages].page_size = xstrdup (json_string_value (size));
    res->hugepages[res->n_hugepages++].limit = (uint64_t) limit.value;
  }
  return 0;
}

static int
parse_rdma (json_t *rdma, const char *where, struct cgroup_resources *res, struct husk_error **err)
{
  const char *device;
  json_t *limits;

  if (want_section (rdma, where, "rdma", false, err) < 0)
    return -1;
  res->rdma = xcalloc (json_object_size (rdma) + 1, sizeof *res->rdma);
  json_object_foreach (rdma, device, limits)
  {
    cleanup_free char *at = xasprintf ("rdma.%s", device);
    struct cgroup_rdma_limit *limit = &res->rdma[res->n_rdma];

    if (*device == '\0' || strpbrk (device, " \n/="))
      return cgroup_field_error (err, where, "rdma", "`%s` is not a device name", device);
    if (want_section (limits, where, at, false, err) < 0
        || read_int (limits, "hcaHandles", where, at, 0, UINT32_MAX, &limit->handles, err) < 0
        || read_int (limits, "hcaObjects", where, at, 0, UINT32_MAX, &limit->objects, err) < 0)
      return -1;
    if (!limit->handles.set && !limit->objects.set)
      continue;
    limit->device = xstrdup (device);
    res->n_rdma++;
  }
  return 0;
}

/* Files that manage membership or state, never a limit. */
static const char *const unified_refused[] = {
  "cgroup.procs", "cgroup.threads", "cgroup.kill", "cgroup.freeze", "cgroup.subtree_control", "cgroup.type",
};

static int
check_unified_key (const char *key, const char *where, struct husk_error **err)
{
  static const char file_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
  const char *dot = strchr (key, '.');

  if (dot == NULL || dot == key || dot[1] == '\0' || key[strspn (key, file_chars)] != '\0')
    return husk_error_make (err, 0, "%s.unified: unknown key `%s` (keys are cgroup files like `memory.high`)",
                            where, key);
  for (size_t i = 0; i < sizeof unified_refused / sizeof unified_refused[0]; i++)
    if (strcmp (key, unified_refused[i]) == 0)
      return husk_error_make (err, 0, "%s.unified: key `%s` manages the cgroup itself and cannot be set",
                              where, key);
  return 0;
}

static int
parse_unified (json_t *unified, const char *where, struct cgroup_resources *res, struct husk_error **err)
{
  const char *key;
  json_t *value;

  if (want_section (unified, where, "unified", false, err) < 0)
    return -1;
  res->unified = xcalloc (json_object_size (unified) + 1, sizeof *res->unified);
  json_object_foreach (unified, key, value)
  {
    if (check_unified_key (key, where, err) < 0)
      return -1;
    if (!json_is_string (value))
      return husk_error_make (err, 0, "%s.unified.%s: must be a string", where, key);
    res->unified[res->n_unified].key = xstrdup (key);
    res->unified[res->n_unified++].value = xstrdup (json_string_value (value));
  }
  return 0;
}

static int
parse_device_rule (json_t *item, const char *where, size_t index, struct cgroup_device_rule *rule,
                   struct husk_error **err)
{
  cleanup_free char *at = xasprintf ("devices[%zu]", index);
  struct cgroup_value major = { 0 }, minor = { 0 };
  json_t *type = member (item, "type"), *access = member (item, "access");
  bool allow = false;

  if (want_section (item, where, at, false, err) < 0
      || read_int (item, "major", where, at, -1, UINT32_MAX, &major, err) < 0
      || read_int (item, "minor", where, at, -1, UINT32_MAX, &minor, err) < 0)
    return -1;
  if (!json_is_boolean (member (item, "allow")))
    return cgroup_field_error (err, where, at, "allow (true or false) is required");
  allow = json_is_true (member (item, "allow"));
  if (type
      && (!json_is_string (type) || strlen (json_string_value (type)) != 1
          || !strchr ("acb", json_string_value (type)[0])))
    return cgroup_field_error (err, where, at, "type must be `a`, `c` or `b`");
  if (access
      && (!json_is_string (access) || json_string_value (access)[strspn (json_string_value (access), "rwm")]))
    return cgroup_field_error (err, where, at, "access may only contain r, w and m");
  *rule = (struct cgroup_device_rule){
    .allow = allow,
    .type = type ? json_string_value (type)[0] : 'a',
    .major = major.set ? major.value : -1,
    .minor = minor.set ? minor.value : -1,
    .access = 0,
  };
  for (const char *c = access ? json_string_value (access) : "rwm"; *c; c++)
    rule->access |= *c == 'r' ? CGROUP_DEV_READ : *c == 'w' ? CGROUP_DEV_WRITE : CGROUP_DEV_MKNOD;
  if (rule->access == 0)
    rule->access = CGROUP_DEV_ALL;
  return 0;
}

static int
parse_devices (json_t *list, const char *where, struct cgroup_resources *res, struct husk_error **err)
{
  json_t *item;
  size_t i;

  if (want_section (list, where, "devices", true, err) < 0)
    return -1;
  res->has_devices = true;
  res->devices = xcalloc (json_array_size (list) + 1, sizeof *res->devices);
  json_array_foreach (list, i, item)
  {
    if (parse_device_rule (item, where, i, &res->devices[i], err) < 0)
      return -1;
    res->n_devices++;
  }
  return 0;
}

static int
parse_priorities (json_t *list, const char *where, struct cgroup_resources *res, struct husk_error **err)
{
  json_t *item;
  size_t i;

  if (list == NULL)
    return 0;
  if (want_section (list, where, "network.priorities", true, err) < 0)
    return -1;
  res->network.priorities = xcalloc (json_array_size (list) + 1, sizeof *res->network.priorities);
  json_array_foreach (list, i, item)
  {
    cleanup_free char *at = xasprintf ("network.priorities[%zu]", i);
    struct cgroup_value priority = { 0 };
    json_t *name = member (item, "name");

    if (want_section (item, where, at, false, err) < 0
        || read_int (item, "priority", where, at, 0, UINT32_MAX, &priority, err) < 0)
      return -1;
    if (!json_is_string (name) || json_string_length (name) == 0
        || strpbrk (json_string_value (name), " \n/"))
      return cgroup_field_error (err, where, at, "name must be a network interface name");
    res->network.priorities[res->network.n_priorities++]
        = (struct cgroup_net_priority){ xstrdup (json_string_value (name)), (uint32_t) priority.value };
  }
  return 0;
}

static int
parse_network (json_t *network, const char *where, struct cgroup_resources *res, struct husk_error **err)
{
  if (want_section (network, where, "network", false, err) < 0
      || read_int (network, "classID", where, "network", 0, UINT32_MAX, &res->network.class_id, err) < 0)
    return -1;
  return parse_priorities (member (network, "priorities"), where, res, err);
}

typedef int (*section_parser) (json_t *section, const char *where, struct cgroup_resources *res,
                               struct husk_error **err);

static const struct
{
  const char *name;
  section_parser parse;
} sections[] = {
  { "memory", parse_memory },
  { "cpu", parse_cpu },
  { "pids", parse_pids },
  { "blockIO", parse_block_io },
  { "hugepageLimits", parse_hugepages },
  { "rdma", parse_rdma },
  { "unified", parse_unified },
  { "devices", parse_devices },
  { "network", parse_network },
};

int
cgroup_resources_parse (json_t *resources, const char *where, struct cgroup_resources *out,
                        struct husk_error **err)
{
  memset (out, 0, sizeof *out);
  out->where = xstrdup (where);
  if (resources == NULL || json_is_null (resources))
    return 0;
  if (!json_is_object (resources))
    return husk_error_make (err, 0, "%s: must be an object", where);
  for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
    {
      json_t *section = member (resources, sections[i].name);
      if (section && sections[i].parse (section, where, out, err) < 0)
        {
          cgroup_resources_clear (out);
          return -1;
        }
    }
  return 0;
}

void
cgroup_resources_clear (struct cgroup_resources *res)
{
  free (res->where);
  free (res->cpu.cpus);
  free (res->cpu.mems);
  free (res->io.weight_devices);
  for (int t = 0; t < CGROUP_THROTTLE_COUNT; t++)
    free (res->io.throttle[t]);
  for (size_t i = 0; i < res->n_hugepages; i++)
    free (res->hugepages[i].page_size);
  free (res->hugepages);
  for (size_t i = 0; i < res->n_rdma; i++)
    free (res->rdma[i].device);
  free (res->rdma);
  for (size_t i = 0; i < res->n_unified; i++)
    {
      free (res->unified[i].key);
      free (res->unified[i].value);
    }
  free (res->unified);
  free (res->devices);
  for (size_t i = 0; i < res->network.n_priorities; i++)
    free (res->network.priorities[i].interface);
  free (res->network.priorities);
  memset (res, 0, sizeof *res);
}

bool
cgroup_resources_has_limits (const struct cgroup_resources *res)
{
  size_t throttles = 0;

  for (int t = 0; t < CGROUP_THROTTLE_COUNT; t++)
    throttles += res->io.n_throttle[t];
  return res->memory.limit.set || res->memory.reservation.set || res->memory.swap.set
         || res->memory.kernel.set || res->memory.kernel_tcp.set || res->memory.swappiness.set
         || res->memory.disable_oom_killer || res->cpu.shares.set || res->cpu.weight.set || res->cpu.quota.set
         || res->cpu.period.set || res->cpu.burst.set || res->cpu.idle.set || res->cpu.rt_runtime.set
         || res->cpu.rt_period.set || res->cpu.cpus || res->cpu.mems || res->pids_limit.set
         || res->io.weight.set || res->io.n_weight_devices || throttles || res->n_hugepages || res->n_rdma
         || res->n_unified || res->network.class_id.set || res->network.n_priorities;
}

/* ------------------------------------------------------------ the plan */

static void
plan_clear (struct cgroup_plan *plan)
{
  for (size_t i = 0; i < plan->n; i++)
    {
      free (plan->writes[i].dir);
      free (plan->writes[i].file);
      free (plan->writes[i].value);
      free (plan->writes[i].field);
      free (plan->writes[i].controller);
      free (plan->writes[i].old_value);
    }
  free (plan->writes);
}

#define cleanup_plan __attribute__ ((cleanup (plan_clear)))

/* memory.max as a number; -1 for "max" or unknown. */
static int64_t
current_memory_limit (const char *path)
{
  cleanup_free char *max = cgroup_read_value (path, "memory.max");
  long long value;

  if (max == NULL || husk_parse_int64 (max, 0, INT64_MAX, &value) < 0)
    return -1;
  return value;
}

/* The runtime spec's swap is memory plus swap (cgroup v1); v2's
 * memory.swap.max is the swap alone. */
static int
plan_swap (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  int64_t swap = res->memory.swap.value;
  int64_t limit;

  if (!res->memory.swap.set)
    {
      /* Memory unlimited: swap unlimited too, as v1 would have it. */
      if (res->memory.limit.set && res->memory.limit.value == -1)
        cgroup_plan_add (plan, "memory.limit", "memory.swap.max", false, "max");
      return 0;
    }
  if (swap == -1)
    {
      cgroup_plan_add (plan, "memory.swap", "memory.swap.max", false, "max");
      return 0;
    }
  limit = res->memory.limit.set ? res->memory.limit.value : current_memory_limit (plan->dir);
  if (limit == -1)
    return cgroup_field_error (err, plan->where, "memory.swap",
                               "needs a memory limit (swap is memory plus swap)");
  if (swap < limit)
    return cgroup_field_error (err, plan->where, "memory.swap",
                               "%lld is less than the memory limit %lld (swap is memory plus swap)",
                               (long long) swap, (long long) limit);
  cgroup_plan_add (plan, "memory.swap", "memory.swap.max", false, "%lld", (long long) (swap - limit));
  return 0;
}

static int
plan_memory (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  const struct cgroup_value *limit = &res->memory.limit, *low = &res->memory.reservation;

  if (limit->set && limit->value == -1)
    cgroup_plan_add (plan, "memory.limit", "memory.max", false, "max");
  else if (limit->set)
    cgroup_plan_add (plan, "memory.limit", "memory.max", false, "%lld", (long long) limit->value);
  if (low->set && low->value == -1)
    cgroup_plan_add (plan, "memory.reservation", "memory.low", false, "max");
  else if (low->set)
    cgroup_plan_add (plan, "memory.reservation", "memory.low", false, "%lld", (long long) low->value);
  if (res->memory.kernel.set)
    husk_warn ("%s.memory.kernel: ignored: kernel memory is always accounted in cgroup v2", plan->where);
  if (res->memory.kernel_tcp.set)
    husk_warn ("%s.memory.kernelTCP: ignored: TCP memory is always accounted in cgroup v2", plan->where);
  if (res->memory.swappiness.set)
    husk_warn ("%s.memory.swappiness: ignored: cgroup v2 has no per-cgroup swappiness", plan->where);
  if (res->memory.disable_oom_killer)
    husk_warn ("%s.memory.disableOOMKiller: ignored: cgroup v2 cannot disable the OOM killer", plan->where);
  return plan_swap (plan, res, err);
}

/* The conversion runc, crun and Kubernetes share: shares [2, 262144]
 * onto weight [1, 10000]. */
static int64_t
shares_to_weight (int64_t shares)
{
  return 1 + ((shares - 2) * 9999) / 262142;
}

static int
plan_cpu (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  if (res->cpu.weight.set)
    cgroup_plan_add (plan, "cpu.weight", "cpu.weight", false, "%lld", (long long) res->cpu.weight.value);
  else if (res->cpu.shares.set)
    cgroup_plan_add (plan, "cpu.shares", "cpu.weight", false, "%lld",
                     (long long) shares_to_weight (res->cpu.shares.value));
  if (res->cpu.quota.set || res->cpu.period.set)
    {
      /* cpu.max is "QUOTA PERIOD": keep the half that is not changed. */
      cleanup_free char *current = cgroup_plan_read (plan, "cpu.max");
      char quota[32] = "max", period[32] = "100000";

      if (current && sscanf (current, "%31s %31s", quota, period) < 1)
        strcpy (quota, "max");
      if (res->cpu.quota.set && res->cpu.quota.value == -1)
        strcpy (quota, "max");
      else if (res->cpu.quota.set)
        snprintf (quota, sizeof quota, "%lld", (long long) res->cpu.quota.value);
      if (res->cpu.period.set)
        snprintf (period, sizeof period, "%lld", (long long) res->cpu.period.value);
      cgroup_plan_add (plan, res->cpu.quota.set ? "cpu.quota" : "cpu.period", "cpu.max", false, "%s %s",
                       quota, period);
    }
  if (res->cpu.burst.set)
    cgroup_plan_add (plan, "cpu.burst", "cpu.max.burst", false, "%lld", (long long) res->cpu.burst.value);
  if (res->cpu.idle.set)
    cgroup_plan_add (plan, "cpu.idle", "cpu.idle", false, "%lld", (long long) res->cpu.idle.value);
  if (res->cpu.rt_runtime.set || res->cpu.rt_period.set)
    return cgroup_field_error (err, plan->where,
                               res->cpu.rt_runtime.set ? "cpu.realtimeRuntime" : "cpu.realtimePeriod",
                               "cannot apply: real-time bandwidth exists only in cgroup v1");
  return 0;
}

/* The same files on v1 and v2. */
static int
plan_cpuset (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  (void) err;
  if (res->cpu.cpus)
    cgroup_plan_add (plan, "cpu.cpus", "cpuset.cpus", false, "%s", res->cpu.cpus);
  if (res->cpu.mems)
    cgroup_plan_add (plan, "cpu.mems", "cpuset.mems", false, "%s", res->cpu.mems);
  return 0;
}

/* blockIO weights go to BFQ's file when the kernel has it (same scale),
 * otherwise to io.weight, scaled from [10, 1000] onto [1, 10000]. */
static int64_t
io_weight (bool bfq, uint64_t weight)
{
  return bfq ? (int64_t) weight : 1 + ((int64_t) weight - 10) * 9999 / 990;
}

static void
plan_io_throttles (struct cgroup_plan *plan, const struct cgroup_resources *res)
{
  static const char *const keys[CGROUP_THROTTLE_COUNT] = { "rbps", "wbps", "riops", "wiops" };

  for (int t = 0; t < CGROUP_THROTTLE_COUNT; t++)
    for (size_t i = 0; i < res->io.n_throttle[t]; i++)
      {
        const struct cgroup_io_device *dev = &res->io.throttle[t][i];
        cleanup_free char *field = xasprintf ("blockIO.%s[%zu]", throttle_keys[t], i);
        char rate[32] = "max";

        if (dev->value > 0)
          snprintf (rate, sizeof rate, "%llu", (unsigned long long) dev->value);
        cgroup_plan_add (plan, field, "io.max", true, "%lld:%lld %s=%s", (long long) dev->major,
                         (long long) dev->minor, keys[t], rate);
      }
}

static int
plan_io (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  bool bfq = cgroup_plan_has (plan, "io.bfq.weight");
  const char *file = bfq ? "io.bfq.weight" : "io.weight";

  if (res->io.weight.set)
    cgroup_plan_add (plan, "blockIO.weight", file, false, "%s%lld", bfq ? "" : "default ",
                     (long long) io_weight (bfq, (uint64_t) res->io.weight.value));
  for (size_t i = 0; i < res->io.n_weight_devices; i++)
    {
      const struct cgroup_io_device *dev = &res->io.weight_devices[i];
      cleanup_free char *field = xasprintf ("blockIO.weightDevice[%zu]", i);

      cgroup_plan_add (plan, field, file, true, "%lld:%lld %lld", (long long) dev->major,
                       (long long) dev->minor, (long long) io_weight (bfq, dev->value));
    }
  plan_io_throttles (plan, res);
  return 0;
}

/* The huge page sizes the kernel has, from the hugetlb.*.max files. */
static char *
hugepage_sizes (const char *path)
{
  cleanup_dir DIR *dir = opendir (path);
  cleanup_free char *sizes = xstrdup ("");
  struct dirent *entry;

  while (dir && (entry = readdir (dir)) != NULL)
    {
      size_t len = strlen (entry->d_name);
      if (husk_str_has_prefix (entry->d_name, "hugetlb.") && husk_str_has_suffix (entry->d_name, ".max")
          && !husk_str_has_suffix (entry->d_name, ".rsvd.max"))
        {
          char *longer
              = xasprintf ("%s%s%.*s", sizes, *sizes ? ", " : "", (int) (len - 12), entry->d_name + 8);
          free (sizes);
          sizes = longer;
        }
    }
  return steal_pointer (&sizes);
}

static int
plan_hugepages (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  for (size_t i = 0; i < res->n_hugepages; i++)
    {
      const struct cgroup_hugepage_limit *hp = &res->hugepages[i];
      cleanup_free char *field = xasprintf ("hugepageLimits[%zu]", i);
      cleanup_free char *file = xasprintf ("hugetlb.%s.max", hp->page_size);
      cleanup_free char *rsvd = xasprintf ("hugetlb.%s.rsvd.max", hp->page_size);

      if (cgroup_has_controller (plan->dir, "hugetlb") && !cgroup_plan_has (plan, file))
        {
          cleanup_free char *sizes = hugepage_sizes (plan->dir);
          return cgroup_field_error (err, plan->where, field, "the kernel has no %s huge pages (it has: %s)",
                                     hp->page_size, *sizes ? sizes : "none");
        }
      cgroup_plan_add (plan, field, file, false, "%llu", (unsigned long long) hp->limit);
      /* Reservations count against the limit too, or mmap could overcommit. */
      if (cgroup_plan_has (plan, rsvd))
        cgroup_plan_add (plan, field, rsvd, false, "%llu", (unsigned long long) hp->limit);
    }
  return 0;
}

static int
plan_rdma (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  for (size_t i = 0; i < res->n_rdma; i++)
    {
      const struct cgroup_rdma_limit *rdma = &res->rdma[i];
      cleanup_free char *field = xasprintf ("rdma.%s", rdma->device);
      char handles[48] = "", objects[48] = "";

      if (rdma->handles.set)
        snprintf (handles, sizeof handles, " hca_handle=%lld", (long long) rdma->handles.value);
      if (rdma->objects.set)
        snprintf (objects, sizeof objects, " hca_object=%lld", (long long) rdma->objects.value);
      cgroup_plan_add (plan, field, "rdma.max", true, "%s%s%s", rdma->device, handles, objects);
    }
  return 0;
}

static int
plan_unified (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  for (size_t i = 0; i < res->n_unified; i++)
    {
      cleanup_free char *field = xasprintf ("unified.%s", res->unified[i].key);
      cgroup_plan_add (plan, field, res->unified[i].key, false, "%s", res->unified[i].value);
      plan->writes[plan->n - 1].unified = true;
    }
  return 0;
}

/* net_cls and net_prio exist only in v1, with these files. */
static int
plan_net_cls (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  (void) err;
  if (res->network.class_id.set)
    cgroup_plan_add (plan, "network.classID", "net_cls.classid", false, "%lld",
                     (long long) res->network.class_id.value);
  return 0;
}

static int
plan_net_prio (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  (void) err;
  for (size_t i = 0; i < res->network.n_priorities; i++)
    {
      cleanup_free char *field = xasprintf ("network.priorities[%zu]", i);
      cgroup_plan_add (plan, field, "net_prio.ifpriomap", true, "%s %u", res->network.priorities[i].interface,
                       res->network.priorities[i].priority);
    }
  return 0;
}

/* The same file on v1 and v2. */
static int
plan_pids (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  if (res->pids_limit.set && res->pids_limit.value == -1)
    cgroup_plan_add (plan, "pids.limit", "pids.max", false, "max");
  else if (res->pids_limit.set)
    cgroup_plan_add (plan, "pids.limit", "pids.max", false, "%lld", (long long) res->pids_limit.value);
  return 0;
}

/* Each controller's steps, in this order; unified last so that it
 * overrides.  CONTROLLER NULL: the unified directory itself. */
static const struct
{
  const char *controller;
  cgroup_plan_step v2, v1;
} plan_sections[] = {
  { "memory", plan_memory, cgroup_plan_v1_memory },
  { "cpu", plan_cpu, cgroup_plan_v1_cpu },
  { "cpuset", plan_cpuset, plan_cpuset },
  { "pids", plan_pids, plan_pids },
  { "io", plan_io, cgroup_plan_v1_blkio },
  { "hugetlb", plan_hugepages, cgroup_plan_v1_hugetlb },
  { "rdma", plan_rdma, plan_rdma },
  { "net_cls", plan_net_cls, plan_net_cls },
  { "net_prio", plan_net_prio, plan_net_prio },
  { NULL, plan_unified, plan_unified },
};

/* The unified directory of the container cgroup, NULL without one. */
static enum cgroup_version
locate_unified (const char *path, char **dir)
{
  const char *name = cgroup_name (path);

  *dir = NULL;
  if (name == NULL)
    *dir = xstrdup (path);
  else if (cgroup_unified_mount ())
    *dir = xasprintf ("%s%s", cgroup_unified_mount (), name);
  return *dir ? CGROUP_V2 : CGROUP_NONE;
}

static int
build_section (struct cgroup_plan *plan, size_t section, const struct cgroup_resources *res,
               struct husk_error **err)
{
  const char *controller = plan_sections[section].controller;
  cleanup_free char *dir = NULL;
  enum cgroup_version version
      = controller ? cgroup_locate (plan->path, controller, &dir) : locate_unified (plan->path, &dir);
  size_t before = plan->n;

  plan->dir = dir;
  if ((version == CGROUP_V1 ? plan_sections[section].v1 : plan_sections[section].v2) (plan, res, err) < 0)
    return -1;
  plan->dir = NULL;
  if (version != CGROUP_NONE || plan->n == before)
    return 0;
  if (controller == NULL)
    return husk_error_make (err, 0, "%s.unified: cannot apply: this host has no cgroup v2 hierarchy",
                            plan->where);
  return cgroup_controller_error (plan->path, plan->writes[before].field, controller, err);
}

static int
build_plan (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  for (size_t i = 0; i < sizeof plan_sections / sizeof plan_sections[0]; i++)
    if (build_section (plan, i, res, err) < 0)
      return -1;
  return 0;
}

/* ------------------------------------------------- checking and writing */

static int
check_write (const struct cgroup_plan *plan, const struct cgroup_write *w, struct husk_error **err)
{
  /* A v1 directory is its controller's own hierarchy. */
  if (w->controller && !cgroup_is_v1_dir (w->dir) && !cgroup_has_controller (w->dir, w->controller))
    {
      /* A unified key naming no controller at all is simply unknown. */
      static const char *const known[]
          = { "cpu", "cpuset", "io", "memory", "hugetlb", "pids", "rdma", "misc" };
      bool is_controller = !w->unified;

      for (size_t i = 0; i < sizeof known / sizeof known[0] && !is_controller; i++)
        is_controller = strcmp (known[i], w->controller) == 0;
      if (is_controller)
        return cgroup_controller_error (w->dir, w->field, w->controller, err);
    }
  if (cgroup_exists_in (w->dir, w->file))
    return 0;
  if (w->unified)
    return husk_error_make (err, 0, "%s.unified: unknown key `%s` (no such file in cgroup `%s`)", plan->where,
                            w->file, w->dir);
  return husk_error_make (err, 0, "%s: cannot apply: `%s` does not exist in cgroup `%s`", w->field, w->file,
                          w->dir);
}

/* memory.checkBeforeUpdate: a limit below the current usage is refused. */
static int
check_memory_usage (const struct cgroup_plan *plan, const struct cgroup_resources *res,
                    struct husk_error **err)
{
  cleanup_free char *current = NULL;
  cleanup_free char *dir = NULL;
  long long usage;

  if (!res->memory.check_before_update || !res->memory.limit.set || res->memory.limit.value == -1)
    return 0;
  if (cgroup_locate (plan->path, "memory", &dir) == CGROUP_V1)
    current = cgroup_read_value (dir, "memory.usage_in_bytes");
  else
    current = cgroup_read_value (dir, "memory.current");
  if (current == NULL || husk_parse_int64 (current, 0, INT64_MAX, &usage) < 0)
    return 0;
  if (res->memory.limit.value < usage)
    return cgroup_field_error (err, plan->where, "memory.limit",
                               "%lld is below the current usage %lld (memory.checkBeforeUpdate is set)",
                               (long long) res->memory.limit.value, usage);
  return 0;
}

static int
write_value (const char *path, const char *file, const char *value, struct husk_error **err)
{
  cleanup_free char *full = xasprintf ("%s/%s", path, file);
  cleanup_close int fd = open (full, O_WRONLY | O_TRUNC | O_CLOEXEC);
  size_t len = strlen (value);

  if (fd < 0)
    return husk_error_make (err, errno, "open `%s`", full);
  /* An empty write never reaches the kernel; a newline means "empty". */
  if (husk_write_all (fd, len ? value : "\n", len ? len : 1) < 0)
    return husk_error_make (err, errno, "write `%s` to `%s`", value, full);
  return 0;
}

/* What to write back to undo W: the old line for W's device in a keyed
 * file (or "no limit"), the old content otherwise. */
static char *
undo_value (const struct cgroup_write *w)
{
  size_t key_len = strcspn (w->value, " ");

  if (!w->keyed)
    return xstrdup (w->old_value ? w->old_value : "");
  for (char *line = w->old_value; line && *line;
       line += strcspn (line, "\n") + (line[strcspn (line, "\n")] != 0))
    if (strncmp (line, w->value, key_len) == 0 && line[key_len] == ' ')
      return xasprintf ("%.*s", (int) strcspn (line, "\n"), line);
  if (strcmp (w->file, "io.max") == 0)
    return xasprintf ("%.*s rbps=max wbps=max riops=max wiops=max", (int) key_len, w->value);
  if (strcmp (w->file, "rdma.max") == 0)
    return xasprintf ("%.*s hca_handle=max hca_object=max", (int) key_len, w->value);
  /* v1 throttles and weights: 0 removes the device's line. */
  if (husk_str_has_prefix (w->file, "blkio.") || husk_str_has_prefix (w->file, "net_prio."))
    return xasprintf ("%.*s 0", (int) key_len, w->value);
  return xasprintf ("%.*s default", (int) key_len, w->value);
}

static void
undo_writes (const struct cgroup_plan *plan, size_t done)
{
  while (done-- > 0)
    {
      const struct cgroup_write *w = &plan->writes[done];
      cleanup_free char *value = NULL;
      struct husk_error *ignored = NULL;

      if (w->no_undo)
        continue;
      value = undo_value (w);
      if (write_value (w->dir, w->file, value, &ignored) < 0)
        {
          husk_debug ("undo %s: %s", w->field, ignored->msg);
          husk_error_free (&ignored);
        }
    }
}

static int
execute_plan (struct cgroup_plan *plan, struct husk_error **err)
{
  for (size_t i = 0; i < plan->n; i++)
    {
      struct cgroup_write *w = &plan->writes[i];
      cleanup_free char *full = xasprintf ("%s/%s", w->dir, w->file);

      /* What undo would write back: nothing to read for a write that
       * undo skips (the devices rules, 13 reads of devices.allow). */
      if (!w->no_undo && husk_read_file (full, &w->old_value, NULL, NULL) == 0 && !w->keyed)
        w->old_value[strcspn (w->old_value, "\n")] = '\0';
      if (write_value (w->dir, w->file, w->value, err) < 0)
        {
          husk_error_wrap (err, "%s", w->field);
          undo_writes (plan, i);
          return -1;
        }
    }
  return 0;
}

/* Where no hierarchy has a devices controller and there is no cgroup v2
 * for a filter, only rules that allow everything can be honoured. */
static int
check_devices_unenforceable (const struct cgroup_resources *res, const char *where, struct husk_error **err)
{
  size_t n_all = 0, n_insns = 0;
  cleanup_free struct cgroup_device_rule *all
      = cgroup_device_rules_with_defaults (res->devices, res->n_devices, &n_all);
  cleanup_free struct bpf_insn *insns = NULL;
  bool allow_all;

  cgroup_device_program (all, n_all, &insns, &n_insns, &allow_all);
  if (allow_all)
    return 0;
  return husk_error_make (err, 0,
                          "%s.devices: cannot enforce the device rules: this host has neither a cgroup v1 "
                          "devices controller nor a cgroup v2 hierarchy for a device filter",
                          where);
}

/* The device rules: written by the plan on v1; on v2 a filter program
 * loaded now and attached once the plan is written (*DIR). */
static int
plan_devices (struct cgroup_plan *plan, const struct cgroup_resources *res, int *prog_fd, char **dir,
              struct husk_error **err)
{
  if (!res->has_devices)
    return 0;
  switch (cgroup_locate (plan->path, "devices", dir))
    {
    case CGROUP_V1:
      plan->dir = *dir;
      if (cgroup_plan_v1_devices (plan, res, err) < 0)
        return -1;
      plan->dir = NULL;
      free (steal_pointer (dir));
      return 0;
    case CGROUP_V2:
      if (cgroup_devices_prepare (res->devices, res->n_devices, prog_fd, err) < 0)
        return husk_error_wrap (err, "%s.devices", plan->where);
      return 0;
    default:
      return check_devices_unenforceable (res, plan->where, err);
    }
}

int
cgroup_resources_write (const char *path, const struct cgroup_resources *res, struct husk_error **err)
{
  cleanup_plan struct cgroup_plan plan
      = { .path = path, .where = res->where ? res->where : "linux.resources" };
  cleanup_close int prog_fd = -1;
  cleanup_free char *filter_dir = NULL;

  if (build_plan (&plan, res, err) < 0 || check_memory_usage (&plan, res, err) < 0
      || plan_devices (&plan, res, &prog_fd, &filter_dir, err) < 0)
    return -1;
  for (size_t i = 0; i < plan.n; i++)
    if (check_write (&plan, &plan.writes[i], err) < 0)
      return -1;
  if (execute_plan (&plan, err) < 0)
    return -1;
  if (filter_dir && cgroup_devices_attach (filter_dir, prog_fd, err) < 0)
    {
      undo_writes (&plan, plan.n);
      return husk_error_wrap (err, "%s.devices", plan.where);
    }
  return 0;
}

/* No cgroup at all: what the spec asks for must need none. */
static int
check_without_cgroup (const struct cgroup_resources *res, struct husk_error **err)
{
  if (cgroup_resources_has_limits (res))
    return husk_error_make (err, 0,
                            "%s: cannot apply limits: no cgroup hierarchy is mounted (no cgroup2 at "
                            "/sys/fs/cgroup or /sys/fs/cgroup/unified, no cgroup v1 controller)",
                            res->where);
  if (res->has_devices)
    return check_devices_unenforceable (res, res->where, err);
  return 0;
}

int
cgroup_apply_resources (const struct spec *spec, const char *path, struct husk_error **err)
{
  struct cgroup_resources res;
  int ret;

  if (cgroup_resources_parse (spec->resources.raw, "linux.resources", &res, err) < 0)
    return -1;
  ret = path ? cgroup_resources_write (path, &res, err) : check_without_cgroup (&res, err);
  cgroup_resources_clear (&res);
  return ret;
}

int
cgroup_setup_container (const struct spec *spec, const char *id, bool systemd, char **path, int *fd,
                        struct husk_error **err)
{
  struct husk_error *resolve_err = NULL;

  *fd = -1;
  if (cgroup_resolve (spec->cgroups_path, id, systemd, path, &resolve_err) < 0)
    {
      if (cgroup_primary_mount () == NULL)
        {
          husk_error_free (&resolve_err);
          return cgroup_apply_resources (spec, NULL, err);
        }
      *err = resolve_err;
      return -1;
    }
  if ((*fd = cgroup_create (*path, err)) < 0)
    return -1;
  return cgroup_apply_resources (spec, *path, err);
}
