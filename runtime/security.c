/* Process attributes the container's init applies to itself just before
 * execve: rlimits, oom_score_adj, sysctls, user and groups, capabilities
 * and no_new_privs.  Each step is one function so the caller orders them. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/security.h"

static const char *const rlimit_names[] = {
  [RLIMIT_CPU] = "RLIMIT_CPU",           [RLIMIT_FSIZE] = "RLIMIT_FSIZE",
  [RLIMIT_DATA] = "RLIMIT_DATA",         [RLIMIT_STACK] = "RLIMIT_STACK",
  [RLIMIT_CORE] = "RLIMIT_CORE",         [RLIMIT_RSS] = "RLIMIT_RSS",
  [RLIMIT_NPROC] = "RLIMIT_NPROC",       [RLIMIT_NOFILE] = "RLIMIT_NOFILE",
  [RLIMIT_MEMLOCK] = "RLIMIT_MEMLOCK",   [RLIMIT_AS] = "RLIMIT_AS",
  [RLIMIT_LOCKS] = "RLIMIT_LOCKS",       [RLIMIT_SIGPENDING] = "RLIMIT_SIGPENDING",
  [RLIMIT_MSGQUEUE] = "RLIMIT_MSGQUEUE", [RLIMIT_NICE] = "RLIMIT_NICE",
  [RLIMIT_RTPRIO] = "RLIMIT_RTPRIO",     [RLIMIT_RTTIME] = "RLIMIT_RTTIME",
};

static const char *
rlimit_name (int resource, char *buf, size_t size)
{
  if (resource >= 0 && (size_t) resource < sizeof rlimit_names / sizeof rlimit_names[0]
      && rlimit_names[resource])
    return rlimit_names[resource];
  snprintf (buf, size, "rlimit %d", resource);
  return buf;
}

static void
format_rlim (uint64_t value, char *buf, size_t size)
{
  if (value == RLIM_INFINITY)
    snprintf (buf, size, "unlimited");
  else
    snprintf (buf, size, "%llu", (unsigned long long) value);
}

int
security_apply_rlimits (const struct spec_process *process, struct husk_error **err)
{
  for (size_t i = 0; i < process->n_rlimits; i++)
    {
      const struct spec_rlimit *limit = &process->rlimits[i];
      struct rlimit value = { .rlim_cur = limit->soft, .rlim_max = limit->hard };
      char name[32], soft[32], hard[32];

      if (setrlimit ((__rlimit_resource_t) limit->resource, &value) == 0)
        continue;
      format_rlim (limit->soft, soft, sizeof soft);
      format_rlim (limit->hard, hard, sizeof hard);
      return husk_error_make (err, errno, "setrlimit %s (soft %s, hard %s)",
                              rlimit_name (limit->resource, name, sizeof name), soft, hard);
    }
  return 0;
}

static int
read_oom_score_adj (int *out)
{
  cleanup_free char *text = NULL;
  long long value;

  if (husk_read_file ("/proc/self/oom_score_adj", &text, NULL, NULL) < 0)
    return -1;
  text[strcspn (text, "\n")] = '\0';
  if (husk_parse_int64 (text, -1000, 1000, &value) < 0)
    return -1;
  *out = (int) value;
  return 0;
}

int
security_apply_oom_score_adj (const struct spec_process *process, struct husk_error **err)
{
  char value[16];
  int current;

  if (!process->has_oom_score_adj)
    return 0;
  snprintf (value, sizeof value, "%d", process->oom_score_adj);
  if (husk_write_file ("/proc/self/oom_score_adj", value, strlen (value), err) == 0)
    return 0;
  /* Going below the floor needs CAP_SYS_RESOURCE, which we may not hold:
   * the container then keeps the runtime's value, as the host allows. */
  if (((*err)->errnum == EACCES || (*err)->errnum == EPERM) && read_oom_score_adj (&current) == 0
      && process->oom_score_adj < current)
    {
      husk_error_free (err);
      husk_warn ("oom_score_adj: cannot lower it from %d to %d without CAP_SYS_RESOURCE, keeping %d", current,
                 process->oom_score_adj, current);
      return 0;
    }
  return husk_error_wrap (err, "set oom_score_adj to %d", process->oom_score_adj);
}

int
security_raise_oom_score_adj (const struct spec_process *process, struct husk_error **err)
{
  int current;

  if (!process->has_oom_score_adj || read_oom_score_adj (&current) < 0 || process->oom_score_adj <= current)
    return 0;
  return security_apply_oom_score_adj (process, err);
}

static bool
has_dotdot_component (const char *path)
{
  size_t len = strlen (path);

  return strcmp (path, "..") == 0 || husk_str_has_prefix (path, "../") || strstr (path, "/../") != NULL
         || (len >= 3 && strcmp (path + len - 3, "/..") == 0);
}

/* "net.ipv4.ip_forward" -> "net/ipv4/ip_forward"; a key already written
 * with slashes is kept.  Keys may not climb out of /proc/sys. */
static char *
sysctl_path (const char *key)
{
  cleanup_free char *relative = xstrdup (key);

  if (strchr (key, '/') == NULL)
    for (char *c = relative; *c; c++)
      if (*c == '.')
        *c = '/';
  if (relative[0] == '\0' || relative[0] == '/' || has_dotdot_component (relative))
    return NULL;
  return xasprintf ("/proc/sys/%s", relative);
}

/* The sysctls a namespace holds (runc's list): setting any other one would
 * change the host, whatever namespaces the container has. */
static const char *const ipc_sysctls[] = {
  "kernel.msgmax", "kernel.msgmnb", "kernel.msgmni", "kernel.sem",
  "kernel.shmall", "kernel.shmmax", "kernel.shmmni", "kernel.shm_rmid_forced",
};

static bool
is_ipc_sysctl (const char *key)
{
  for (size_t i = 0; i < sizeof ipc_sysctls / sizeof ipc_sysctls[0]; i++)
    if (strcmp (key, ipc_sysctls[i]) == 0)
      return true;
  return husk_str_has_prefix (key, "fs.mqueue.");
}

/* A namespace the container does not share with us: a new one, or a path
 * that is not our own (the host's, for a runtime run from the host). */
static bool
has_private_ns (const struct spec *spec, enum spec_ns_type type, const char *proc_name)
{
  const struct spec_namespace *ns = &spec->namespaces[type];
  cleanup_free char *ours = NULL;
  struct stat theirs_st, ours_st;

  if (!ns->present)
    return false;
  if (ns->path == NULL)
    return true;
  ours = xasprintf ("/proc/self/ns/%s", proc_name);
  if (stat (ns->path, &theirs_st) < 0 || stat (ours, &ours_st) < 0)
    return true; /* joining it fails later, with its own error */
  return theirs_st.st_dev != ours_st.st_dev || theirs_st.st_ino != ours_st.st_ino;
}

static int
check_sysctl (const struct spec *spec, const char *key, struct husk_error **err)
{
  cleanup_free char *dotted = xstrdup (key);

  for (char *c = dotted; *c; c++)
    if (*c == '/')
      *c = '.';
  if (is_ipc_sysctl (dotted))
    return has_private_ns (spec, SPEC_NS_IPC, "ipc")
               ? 0
               : husk_error_make (err, EPERM,
                                  "config.json: linux.sysctl `%s`: needs a private ipc namespace (it would "
                                  "change the host's)",
                                  key);
  if (husk_str_has_prefix (dotted, "net."))
    return has_private_ns (spec, SPEC_NS_NETWORK, "net")
               ? 0
               : husk_error_make (err, EPERM,
                                  "config.json: linux.sysctl `%s`: needs a private network namespace (it "
                                  "would change the host's)",
                                  key);
  if (strcmp (dotted, "kernel.hostname") == 0 || strcmp (dotted, "kernel.domainname") == 0)
    return has_private_ns (spec, SPEC_NS_UTS, "uts")
               ? 0
               : husk_error_make (err, EPERM,
                                  "config.json: linux.sysctl `%s`: needs a private uts namespace (it would "
                                  "change the host's)",
                                  key);
  return husk_error_make (err, EPERM,
                          "config.json: linux.sysctl `%s`: not in any of the container's namespaces, so it "
                          "would change the host's",
                          key);
}

int
security_check_sysctls (const struct spec *spec, struct husk_error **err)
{
  for (size_t i = 0; i < spec->n_sysctls; i++)
    {
      const char *key = spec->sysctls[i].key;
      cleanup_free char *path = sysctl_path (key);

      if (path == NULL)
        return husk_error_make (err, EINVAL, "config.json: linux.sysctl `%s`: bad key", key);
      if (check_sysctl (spec, key, err) < 0)
        return -1;
    }
  return 0;
}

int
security_apply_sysctls (const struct spec *spec, struct husk_error **err)
{
  for (size_t i = 0; i < spec->n_sysctls; i++)
    {
      const struct spec_sysctl *sysctl = &spec->sysctls[i];
      cleanup_free char *path = sysctl_path (sysctl->key);

      if (path == NULL)
        return husk_error_make (err, EINVAL, "sysctl `%s`: bad key", sysctl->key);
      if (husk_write_file (path, sysctl->value, strlen (sysctl->value), err) < 0)
        return husk_error_wrap (err, "sysctl `%s`", sysctl->key);
    }
  return 0;
}

/* In a user namespace whose gid map was written without CAP_SETGID,
 * setgroups(2) is denied; an empty list then needs no call at all. */
static bool
setgroups_denied (void)
{
  cleanup_free char *text = NULL;

  if (husk_read_file ("/proc/self/setgroups", &text, NULL, NULL) < 0)
    return false;
  return husk_str_has_prefix (text, "deny");
}

int
security_apply_user (const struct spec_process *process, struct husk_error **err)
{
  const struct spec_user *user = &process->user;

  if (user->n_additional_gids > 0 || !setgroups_denied ())
    if (setgroups (user->n_additional_gids, user->additional_gids) < 0)
      return husk_error_make (err, errno, "setgroups (%zu additional gids)", user->n_additional_gids);
  if (setresgid (user->gid, user->gid, user->gid) < 0)
    return husk_error_make (err, errno, "setresgid %u", (unsigned) user->gid);
  /* Without keep-caps a switch away from uid 0 empties the permitted set,
   * and security_apply_caps could not raise anything afterwards. */
  if (prctl (PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
    return husk_error_make (err, errno, "prctl PR_SET_KEEPCAPS");
  if (setresuid (user->uid, user->uid, user->uid) < 0)
    return husk_error_make (err, errno, "setresuid %u", (unsigned) user->uid);
  if (prctl (PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
    return husk_error_make (err, errno, "prctl PR_SET_KEEPCAPS");
  if (user->has_umask)
    umask (user->umask);
  return 0;
}

/* Highest capability the running kernel knows; caps above it do not exist
 * here and are ignored, as an older kernel would. */
static int
last_cap (void)
{
  int bits = (int) cap_max_bits ();

  if (bits > 64)
    bits = 64;
  return bits - 1;
}

static bool
cap_in (uint64_t mask, int cap)
{
  return (mask >> cap) & 1;
}

/* "CAP_KILL", as config.json spells it. */
static void
cap_name (int cap, char *buf, size_t size)
{
  char *name = cap_to_name ((cap_value_t) cap);

  snprintf (buf, size, "%s", name ? name : "?");
  cap_free (name);
  for (char *c = buf; *c; c++)
    *c = (char) toupper ((unsigned char) *c);
}

int
security_drop_bounding (const struct spec_process *process, struct husk_error **err)
{
  if (!process->has_capabilities)
    return 0;
  for (int cap = 0; cap <= last_cap (); cap++)
    {
      if (cap_in (process->caps.bounding, cap))
        continue;
      if (prctl (PR_CAPBSET_DROP, (unsigned long) cap, 0, 0, 0) < 0 && errno != EINVAL)
        {
          int saved = errno;
          char name[64];
          cap_name (cap, name, sizeof name);
          return husk_error_make (err, saved, "drop %s from the bounding set", name);
        }
    }
  return 0;
}

static void
cap_freep (cap_t *caps)
{
  if (*caps)
    cap_free (*caps);
  *caps = NULL;
}
#define cleanup_cap __attribute__ ((cleanup (cap_freep)))

static uint64_t
cap_mask_of (cap_t caps, cap_flag_t flag)
{
  uint64_t mask = 0;

  for (int cap = 0; cap <= last_cap (); cap++)
    {
      cap_flag_value_t value = CAP_CLEAR;
      if (cap_get_flag (caps, (cap_value_t) cap, flag, &value) == 0 && value == CAP_SET)
        mask |= 1ULL << cap;
    }
  return mask;
}

/* capset(2) says only EPERM; tell which of the three sets asked too much. */
static const char *
capset_culprit (const struct spec_capabilities *wanted)
{
  cleanup_cap cap_t current = cap_get_proc ();
  uint64_t known = last_cap () >= 63 ? ~0ULL : (1ULL << (last_cap () + 1)) - 1;

  if (current == NULL)
    return "capset refused";
  if (wanted->permitted & known & ~cap_mask_of (current, CAP_PERMITTED))
    return "permitted set is not within the current permitted set";
  if (wanted->effective & known & ~wanted->permitted)
    return "effective set is not within the permitted set";
  return "inheritable set is not within the bounding and permitted sets";
}

static int
set_process_caps (const struct spec_capabilities *wanted, struct husk_error **err)
{
  const struct
  {
    cap_flag_t flag;
    uint64_t mask;
  } sets[] = {
    { CAP_EFFECTIVE, wanted->effective },
    { CAP_PERMITTED, wanted->permitted },
    { CAP_INHERITABLE, wanted->inheritable },
  };
  cleanup_cap cap_t caps = cap_init ();

  if (caps == NULL)
    return husk_error_make (err, errno, "cap_init");
  for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++)
    for (int cap = 0; cap <= last_cap (); cap++)
      {
        cap_value_t value = cap;
        if (cap_in (sets[s].mask, cap) && cap_set_flag (caps, sets[s].flag, 1, &value, CAP_SET) < 0)
          return husk_error_make (err, errno, "cap_set_flag %d", cap);
      }
  if (cap_set_proc (caps) < 0)
    {
      int saved = errno;
      return husk_error_make (err, saved, "set capabilities: %s", capset_culprit (wanted));
    }
  return 0;
}

/* An ambient capability must also be permitted and inheritable.  Configs
 * from `runc spec` list ambient caps without inheritable ones (runc dropped
 * those in 1.1): like runc, skip what cannot be raised instead of failing. */
static int
set_ambient_caps (uint64_t ambient, uint64_t raisable, struct husk_error **err)
{
  if (prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
    {
      /* A kernel without ambient capabilities: fine unless some are asked. */
      if (errno == EINVAL && ambient == 0)
        return 0;
      return husk_error_make (err, errno, "clear the ambient capability set");
    }
  for (int cap = 0; cap <= last_cap (); cap++)
    {
      if (!cap_in (ambient, cap))
        continue;
      if (!cap_in (raisable, cap))
        {
          char name[64];
          cap_name (cap, name, sizeof name);
          husk_debug ("ambient %s skipped: not both permitted and inheritable", name);
          continue;
        }
      if (prctl (PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, (unsigned long) cap, 0, 0) < 0)
        {
          int saved = errno;
          char name[64];
          cap_name (cap, name, sizeof name);
          return husk_error_make (
              err, saved, "set capabilities: ambient set: raise %s (needs it permitted and inheritable)",
              name);
        }
    }
  return 0;
}

int
security_apply_caps (const struct spec_process *process, struct husk_error **err)
{
  if (!process->has_capabilities)
    return 0;
  if (set_process_caps (&process->caps, err) < 0)
    return -1;
  return set_ambient_caps (process->caps.ambient, process->caps.permitted & process->caps.inheritable, err);
}

/* The first capability in MASK, or -1. */
static int
first_cap (uint64_t mask)
{
  for (int cap = 0; cap <= last_cap (); cap++)
    if (cap_in (mask, cap))
      return cap;
  return -1;
}

/* Which capabilities of WANTED are in our bounding set: a prctl each,
 * so only those the config asks for (3 in `crun spec`'s config, 14 in a
 * CRI container's default set) where reading all 41 cost ~0.1 ms of
 * `run` on this host. */
static uint64_t
our_bounding_set (uint64_t wanted)
{
  uint64_t mask = 0;

  for (int cap = 0; cap <= last_cap (); cap++)
    if (cap_in (wanted, cap) && prctl (PR_CAPBSET_READ, (unsigned long) cap, 0, 0, 0) == 1)
      mask |= 1ULL << cap;
  return mask;
}

static int
cap_refused (int cap, const char *set, const char *why, struct husk_error **err)
{
  char name[64];

  cap_name (cap, name, sizeof name);
  return husk_error_kind (err, EPERM, "process.capabilities.%s: %s %s", set, name, why);
}

int
security_check_caps (const struct spec_process *process, struct husk_error **err)
{
  const struct spec_capabilities *caps = &process->caps;
  const struct
  {
    const char *name;
    uint64_t mask;
  } sets[] = {
    { "bounding", caps->bounding },       { "permitted", caps->permitted }, { "effective", caps->effective },
    { "inheritable", caps->inheritable }, { "ambient", caps->ambient },
  };
  uint64_t known = last_cap () >= 63 ? ~0ULL : (1ULL << (last_cap () + 1)) - 1;
  uint64_t bounding;
  cleanup_cap cap_t current = NULL;
  int cap;

  if (!process->has_capabilities)
    return 0;
  bounding = our_bounding_set (caps->bounding | caps->permitted | caps->effective | caps->inheritable
                               | caps->ambient);
  for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++)
    if ((cap = first_cap (sets[s].mask & known & ~bounding)) >= 0)
      return cap_refused (cap, sets[s].name,
                          "is not in the runtime's bounding set: it cannot be granted here", err);
  current = cap_get_proc ();
  if (current && (cap = first_cap (caps->permitted & known & ~cap_mask_of (current, CAP_PERMITTED))) >= 0)
    return cap_refused (cap, "permitted", "is not in the runtime's permitted set: it cannot be granted here",
                        err);
  if ((cap = first_cap (caps->effective & known & ~caps->permitted)) >= 0)
    return cap_refused (cap, "effective", "is not in process.capabilities.permitted", err);
  /* capset takes an inheritable one only within the (dropped) bounding
   * set or the inheritable set we already have. */
  if (current
      && (cap = first_cap (caps->inheritable & known
                           & ~(caps->bounding | cap_mask_of (current, CAP_INHERITABLE))))
             >= 0)
    return cap_refused (cap, "inheritable", "is not in process.capabilities.bounding", err);
  return 0;
}

int
security_apply_no_new_privs (const struct spec_process *process, struct husk_error **err)
{
  if (!process->no_new_privileges)
    return 0;
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return husk_error_make (err, errno, "prctl PR_SET_NO_NEW_PRIVS");
  return 0;
}
