/* linux.resources -> cgroup v1 files, as steps of the plan of
 * cgroup_plan.h: memory (with the order memsw and the limit must be
 * written in), cpu (shares, CFS and real-time bandwidth), blkio, hugetlb
 * and the devices controller's allow/deny lists.  The files v1 shares
 * with v2 (pids.max, cpuset.*, rdma.max) use the v2 steps. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/cgroup/cgroup_plan.h"

/* ------------------------------------------------------------- memory */

/* A v1 limit file as a number; -1 for "no limit" (a page-rounded
 * LONG_MAX) or unknown. */
static int64_t
current_limit (const struct cgroup_plan *plan, const char *file)
{
  cleanup_free char *text = cgroup_plan_read (plan, file);
  long long value;

  if (text == NULL || husk_parse_int64 (text, 0, INT64_MAX, &value) < 0 || value >= (INT64_MAX & ~0xfffLL))
    return -1;
  return value;
}

/* memory.memsw.limit_in_bytes (memory plus swap, as the spec means it):
 * *MEMSW set, or -2 when nothing is to be written. */
static int
memsw_value (struct cgroup_plan *plan, const struct cgroup_resources *res, int64_t *memsw,
             struct husk_error **err)
{
  const struct cgroup_value *limit = &res->memory.limit, *swap = &res->memory.swap;
  bool accounted = cgroup_plan_has (plan, "memory.memsw.limit_in_bytes");
  int64_t memory;

  *memsw = -2;
  if (!swap->set)
    {
      /* Memory unlimited: swap unlimited too. */
      if (accounted && limit->set && limit->value == -1)
        *memsw = -1;
      return 0;
    }
  if (!accounted)
    {
      /* Asking for no swap beyond the limit needs no accounting. */
      if (swap->value == -1 || (limit->set && swap->value == limit->value))
        return 0;
      return cgroup_field_error (err, plan->where, "memory.swap",
                                 "cannot apply: the kernel does not account swap (no "
                                 "memory.memsw.limit_in_bytes; boot with swapaccount=1)");
    }
  memory = limit->set ? limit->value : current_limit (plan, "memory.limit_in_bytes");
  if (swap->value != -1 && memory == -1)
    return cgroup_field_error (err, plan->where, "memory.swap",
                               "needs a memory limit (swap is memory plus swap)");
  if (swap->value != -1 && swap->value < memory)
    return cgroup_field_error (err, plan->where, "memory.swap",
                               "%lld is less than the memory limit %lld (swap is memory plus swap)",
                               (long long) swap->value, (long long) memory);
  *memsw = swap->value;
  return 0;
}

/* The kernel wants memsw >= limit at every moment: raising writes memsw
 * first, lowering the limit first. */
static int
plan_limit_and_swap (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  const struct cgroup_value *limit = &res->memory.limit;
  int64_t memsw, current = current_limit (plan, "memory.limit_in_bytes");
  bool memsw_first;

  if (memsw_value (plan, res, &memsw, err) < 0)
    return -1;
  memsw_first = memsw == -1 || (memsw >= 0 && current != -1 && current < memsw);
  if (memsw >= -1 && memsw_first)
    cgroup_plan_add (plan, "memory.swap", "memory.memsw.limit_in_bytes", false, "%lld", (long long) memsw);
  if (limit->set)
    cgroup_plan_add (plan, "memory.limit", "memory.limit_in_bytes", false, "%lld", (long long) limit->value);
  if (memsw >= -1 && !memsw_first)
    cgroup_plan_add (plan, "memory.swap", "memory.memsw.limit_in_bytes", false, "%lld", (long long) memsw);
  return 0;
}

/* Kernel and TCP memory limits, where the kernel still has the files. */
static void
plan_kernel_memory (struct cgroup_plan *plan, const struct cgroup_value *value, const char *field,
                    const char *file)
{
  if (!value->set)
    return;
  if (!cgroup_plan_has (plan, file))
    {
      husk_warn ("%s.%s: ignored: this kernel has no %s", plan->where, field, file);
      return;
    }
  cgroup_plan_add (plan, field, file, false, "%lld", (long long) value->value);
}

int
cgroup_plan_v1_memory (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  const struct cgroup_value *low = &res->memory.reservation;

  if (plan_limit_and_swap (plan, res, err) < 0)
    return -1;
  if (low->set)
    cgroup_plan_add (plan, "memory.reservation", "memory.soft_limit_in_bytes", false, "%lld",
                     (long long) low->value);
  plan_kernel_memory (plan, &res->memory.kernel, "memory.kernel", "memory.kmem.limit_in_bytes");
  plan_kernel_memory (plan, &res->memory.kernel_tcp, "memory.kernelTCP", "memory.kmem.tcp.limit_in_bytes");
  if (res->memory.swappiness.set)
    cgroup_plan_add (plan, "memory.swappiness", "memory.swappiness", false, "%lld",
                     (long long) res->memory.swappiness.value);
  if (res->memory.disable_oom_killer)
    cgroup_plan_add (plan, "memory.disableOOMKiller", "memory.oom_control", false, "1");
  return 0;
}

/* ---------------------------------------------------------------- cpu */

/* cpu.weight [1, 10000] back onto shares [2, 262144]. */
static int64_t
weight_to_shares (int64_t weight)
{
  return 2 + ((weight - 1) * 262142) / 9999;
}

int
cgroup_plan_v1_cpu (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  (void) err;
  if (res->cpu.shares.set)
    cgroup_plan_add (plan, "cpu.shares", "cpu.shares", false, "%lld", (long long) res->cpu.shares.value);
  else if (res->cpu.weight.set)
    cgroup_plan_add (plan, "cpu.weight", "cpu.shares", false, "%lld",
                     (long long) weight_to_shares (res->cpu.weight.value));
  /* The period first: a quota is checked against it. */
  if (res->cpu.period.set)
    cgroup_plan_add (plan, "cpu.period", "cpu.cfs_period_us", false, "%lld",
                     (long long) res->cpu.period.value);
  if (res->cpu.quota.set)
    cgroup_plan_add (plan, "cpu.quota", "cpu.cfs_quota_us", false, "%lld", (long long) res->cpu.quota.value);
  if (res->cpu.burst.set)
    cgroup_plan_add (plan, "cpu.burst", "cpu.cfs_burst_us", false, "%lld", (long long) res->cpu.burst.value);
  if (res->cpu.idle.set)
    cgroup_plan_add (plan, "cpu.idle", "cpu.idle", false, "%lld", (long long) res->cpu.idle.value);
  if (res->cpu.rt_period.set)
    cgroup_plan_add (plan, "cpu.realtimePeriod", "cpu.rt_period_us", false, "%lld",
                     (long long) res->cpu.rt_period.value);
  if (res->cpu.rt_runtime.set)
    cgroup_plan_add (plan, "cpu.realtimeRuntime", "cpu.rt_runtime_us", false, "%lld",
                     (long long) res->cpu.rt_runtime.value);
  return 0;
}

/* -------------------------------------------------------------- blkio */

int
cgroup_plan_v1_blkio (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  static const char *const throttle_files[CGROUP_THROTTLE_COUNT] = {
    "blkio.throttle.read_bps_device",
    "blkio.throttle.write_bps_device",
    "blkio.throttle.read_iops_device",
    "blkio.throttle.write_iops_device",
  };
  static const char *const throttle_fields[CGROUP_THROTTLE_COUNT] = {
    "throttleReadBpsDevice",
    "throttleWriteBpsDevice",
    "throttleReadIOPSDevice",
    "throttleWriteIOPSDevice",
  };
  bool bfq = cgroup_plan_has (plan, "blkio.bfq.weight");

  (void) err;
  if (res->io.weight.set)
    cgroup_plan_add (plan, "blockIO.weight", bfq ? "blkio.bfq.weight" : "blkio.weight", false, "%lld",
                     (long long) res->io.weight.value);
  for (size_t i = 0; i < res->io.n_weight_devices; i++)
    {
      const struct cgroup_io_device *dev = &res->io.weight_devices[i];
      cleanup_free char *field = xasprintf ("blockIO.weightDevice[%zu]", i);

      cgroup_plan_add (plan, field, bfq ? "blkio.bfq.weight_device" : "blkio.weight_device", true,
                       "%lld:%lld %llu", (long long) dev->major, (long long) dev->minor,
                       (unsigned long long) dev->value);
    }
  for (int t = 0; t < CGROUP_THROTTLE_COUNT; t++)
    for (size_t i = 0; i < res->io.n_throttle[t]; i++)
      {
        const struct cgroup_io_device *dev = &res->io.throttle[t][i];
        cleanup_free char *field = xasprintf ("blockIO.%s[%zu]", throttle_fields[t], i);

        cgroup_plan_add (plan, field, throttle_files[t], true, "%lld:%lld %llu", (long long) dev->major,
                         (long long) dev->minor, (unsigned long long) dev->value);
      }
  return 0;
}

/* ------------------------------------------------------------ hugetlb */

int
cgroup_plan_v1_hugetlb (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  for (size_t i = 0; i < res->n_hugepages; i++)
    {
      const struct cgroup_hugepage_limit *hp = &res->hugepages[i];
      cleanup_free char *field = xasprintf ("hugepageLimits[%zu]", i);
      cleanup_free char *file = xasprintf ("hugetlb.%s.limit_in_bytes", hp->page_size);

      if (!cgroup_plan_has (plan, file))
        return cgroup_field_error (err, plan->where, field, "the kernel has no %s huge pages (no %s)",
                                   hp->page_size, file);
      cgroup_plan_add (plan, field, file, false, "%llu", (unsigned long long) hp->limit);
    }
  return 0;
}

/* ------------------------------------------------------------ devices */

/* "c 1:3 rwm"; a type "a" rule for part of the access is two lines, as
 * "a" in devices.allow/deny always means every device and every access. */
static void
add_device_rule (struct cgroup_plan *plan, const struct cgroup_device_rule *rule)
{
  const char *file = rule->allow ? "devices.allow" : "devices.deny";
  char major[24] = "*", minor[24] = "*", access[4] = "";
  size_t n = 0;

  if (rule->major >= 0)
    snprintf (major, sizeof major, "%lld", (long long) rule->major);
  if (rule->minor >= 0)
    snprintf (minor, sizeof minor, "%lld", (long long) rule->minor);
  if (rule->access & CGROUP_DEV_READ)
    access[n++] = 'r';
  if (rule->access & CGROUP_DEV_WRITE)
    access[n++] = 'w';
  if (rule->access & CGROUP_DEV_MKNOD)
    access[n++] = 'm';
  for (const char *type = rule->type == 'a' ? "cb" : (rule->type == 'b' ? "b" : "c"); *type; type++)
    {
      cgroup_plan_add (plan, "devices", file, false, "%c %s:%s %s", *type, major, minor, access);
      plan->writes[plan->n - 1].no_undo = true;
    }
}

/* The rules in order after a reset to the default they start from, as the
 * devices controller applies them: its exception list then matches the
 * "last rule wins" reading of the runtime spec for whole rules. */
int
cgroup_plan_v1_devices (struct cgroup_plan *plan, const struct cgroup_resources *res, struct husk_error **err)
{
  size_t n_all = 0;
  cleanup_free struct cgroup_device_rule *all
      = cgroup_device_rules_with_defaults (res->devices, res->n_devices, &n_all);
  bool default_allow;
  size_t first = cgroup_device_rules_start (all, n_all, &default_allow);

  (void) err;
  cgroup_plan_add (plan, "devices", default_allow ? "devices.allow" : "devices.deny", false, "a");
  plan->writes[plan->n - 1].no_undo = true;
  for (size_t i = first; i < n_all; i++)
    add_device_rule (plan, &all[i]);
  return 0;
}
