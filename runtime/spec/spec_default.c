/* The two documents husk writes about the runtime-spec rather than reads:
 * the starting config.json of `husk spec` (like `runc spec`, optionally
 * rootless) and the features document of `husk features`. */
#include <errno.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <jansson.h>

#include "husk/cleanup.h"
#include "husk/idmap.h"
#include "husk/util.h"
#include "runtime/lsm/apparmor.h"
#include "runtime/spec/spec.h"

#define N_ELEMENTS(a) (sizeof (a) / sizeof ((a)[0]))

/* ------------------------------------------------------------------ */
/* husk spec                                                            */

static const char default_config[]
    = "{"
      "  \"ociVersion\": \"1.2.0\","
      "  \"process\": {"
      "    \"terminal\": true,"
      "    \"user\": { \"uid\": 0, \"gid\": 0 },"
      "    \"args\": [ \"sh\" ],"
      "    \"env\": ["
      "      \"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\","
      "      \"TERM=xterm\""
      "    ],"
      "    \"cwd\": \"/\","
      "    \"capabilities\": {"
      "      \"bounding\": [ \"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\" ],"
      "      \"effective\": [ \"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\" ],"
      "      \"permitted\": [ \"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\" ]"
      "    },"
      "    \"rlimits\": [ { \"type\": \"RLIMIT_NOFILE\", \"hard\": 1024, \"soft\": 1024 } ],"
      "    \"noNewPrivileges\": true"
      "  },"
      "  \"root\": { \"path\": \"rootfs\", \"readonly\": true },"
      "  \"hostname\": \"husk\","
      "  \"mounts\": ["
      "    { \"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\" },"
      "    { \"destination\": \"/dev\", \"type\": \"tmpfs\", \"source\": \"tmpfs\","
      "      \"options\": [ \"nosuid\", \"strictatime\", \"mode=755\", \"size=65536k\" ] },"
      "    { \"destination\": \"/dev/pts\", \"type\": \"devpts\", \"source\": \"devpts\","
      "      \"options\": [ \"nosuid\", \"noexec\", \"newinstance\", \"ptmxmode=0666\","
      "                     \"mode=0620\", \"gid=5\" ] },"
      "    { \"destination\": \"/dev/shm\", \"type\": \"tmpfs\", \"source\": \"shm\","
      "      \"options\": [ \"nosuid\", \"noexec\", \"nodev\", \"mode=1777\", \"size=65536k\" ] },"
      "    { \"destination\": \"/dev/mqueue\", \"type\": \"mqueue\", \"source\": \"mqueue\","
      "      \"options\": [ \"nosuid\", \"noexec\", \"nodev\" ] },"
      "    { \"destination\": \"/sys\", \"type\": \"sysfs\", \"source\": \"sysfs\","
      "      \"options\": [ \"nosuid\", \"noexec\", \"nodev\", \"ro\" ] },"
      "    { \"destination\": \"/sys/fs/cgroup\", \"type\": \"cgroup\", \"source\": \"cgroup\","
      "      \"options\": [ \"nosuid\", \"noexec\", \"nodev\", \"relatime\", \"ro\" ] }"
      "  ],"
      "  \"linux\": {"
      "    \"resources\": { \"devices\": [ { \"allow\": false, \"access\": \"rwm\" } ] },"
      "    \"namespaces\": ["
      "      { \"type\": \"pid\" }, { \"type\": \"network\" }, { \"type\": \"ipc\" },"
      "      { \"type\": \"uts\" }, { \"type\": \"mount\" }, { \"type\": \"cgroup\" }"
      "    ],"
      "    \"maskedPaths\": ["
      "      \"/proc/acpi\", \"/proc/asound\", \"/proc/kcore\", \"/proc/keys\","
      "      \"/proc/latency_stats\", \"/proc/timer_list\", \"/proc/timer_stats\","
      "      \"/proc/sched_debug\", \"/proc/scsi\", \"/sys/firmware\", \"/sys/devices/virtual/powercap\""
      "    ],"
      "    \"readonlyPaths\": ["
      "      \"/proc/bus\", \"/proc/fs\", \"/proc/irq\", \"/proc/sys\", \"/proc/sysrq-trigger\""
      "    ]"
      "  }"
      "}";

static json_t *
id_mapping_for (uid_t host_id)
{
  return json_pack ("[{s:i, s:I, s:i}]", "containerID", 0, "hostID", (json_int_t) host_id, "size", 1);
}

/* Without privileges the network namespace cannot be configured and sysfs
 * cannot be mounted fresh, so /sys is bound from the host read-only; uid=
 * and gid= mount options name ids that are not mapped. */
static void
fix_rootless_mounts (json_t *mounts)
{
  size_t i;
  json_t *mount;

  json_array_foreach (mounts, i, mount)
  {
    json_t *options = json_object_get (mount, "options");
    const char *destination = json_string_value (json_object_get (mount, "destination"));

    if (destination && strcmp (destination, "/sys") == 0)
      {
        json_array_set_new (mounts, i,
                            json_pack ("{s:s, s:s, s:s, s:[s,s,s,s,s]}", "destination", "/sys", "type",
                                       "none", "source", "/sys", "options", "rbind", "nosuid", "noexec",
                                       "nodev", "ro"));
        continue;
      }
    for (size_t j = json_array_size (options); j > 0; j--)
      {
        const char *option = json_string_value (json_array_get (options, j - 1));
        if (option && (husk_str_has_prefix (option, "uid=") || husk_str_has_prefix (option, "gid=")))
          json_array_remove (options, j - 1);
      }
  }
}

static void
make_rootless (json_t *config)
{
  json_t *linux_section = json_object_get (config, "linux");
  json_t *namespaces = json_object_get (linux_section, "namespaces");

  for (size_t i = json_array_size (namespaces); i > 0; i--)
    {
      const char *type = json_string_value (json_object_get (json_array_get (namespaces, i - 1), "type"));
      if (type && strcmp (type, "network") == 0)
        json_array_remove (namespaces, i - 1);
    }
  json_array_append_new (namespaces, json_pack ("{s:s}", "type", "user"));
  json_object_set_new (linux_section, "uidMappings", id_mapping_for (getuid ()));
  json_object_set_new (linux_section, "gidMappings", id_mapping_for (getgid ()));
  /* An unprivileged user cannot create cgroups. */
  json_object_del (linux_section, "resources");
  fix_rootless_mounts (json_object_get (config, "mounts"));
}

char *
spec_default_json (bool rootless)
{
  json_error_t json_error;
  json_t *config = json_loads (default_config, 0, &json_error);
  char *text;

  if (config == NULL)
    abort (); /* the literal above is broken: a bug, caught by the unit test */
  if (rootless)
    make_rootless (config);
  text = json_dumps (config, JSON_INDENT (2));
  json_decref (config);
  if (text == NULL)
    abort ();
  return text;
}

/* ------------------------------------------------------------------ */
/* husk features                                                        */

/* What spec.c accepts; test_spec checks each list against the parser so
 * the two cannot drift apart. */

static const char *const mount_option_names[] = {
  "defaults",
  "ro",
  "rw",
  "suid",
  "nosuid",
  "dev",
  "nodev",
  "exec",
  "noexec",
  "sync",
  "async",
  "dirsync",
  "remount",
  "mand",
  "nomand",
  "atime",
  "noatime",
  "diratime",
  "nodiratime",
  "relatime",
  "norelatime",
  "strictatime",
  "nostrictatime",
  "nosymfollow",
  "symfollow",
  "bind",
  "rbind",
  "private",
  "rprivate",
  "shared",
  "rshared",
  "slave",
  "rslave",
  "unbindable",
  "runbindable",
  "rro",
  "rrw",
  "rnosuid",
  "rsuid",
  "rnodev",
  "rdev",
  "rnoexec",
  "rexec",
  "rnodiratime",
  "rdiratime",
  "rrelatime",
  "rnorelatime",
  "rnoatime",
  "ratime",
  "rstrictatime",
  "rnostrictatime",
  "rnosymfollow",
  "rsymfollow",
};

static const char *const seccomp_action_names[] = {
  "SCMP_ACT_ALLOW",       "SCMP_ACT_ERRNO", "SCMP_ACT_KILL",  "SCMP_ACT_KILL_PROCESS",
  "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG",   "SCMP_ACT_TRACE", "SCMP_ACT_TRAP",
};

static const char *const seccomp_operator_names[] = {
  "SCMP_CMP_EQ", "SCMP_CMP_GE",        "SCMP_CMP_GT", "SCMP_CMP_LE",
  "SCMP_CMP_LT", "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE",
};

/* Listed only when the linked libseccomp resolves them. */
static const char *const seccomp_arch_candidates[] = {
  "SCMP_ARCH_X86",     "SCMP_ARCH_X86_64",   "SCMP_ARCH_X32",         "SCMP_ARCH_ARM",
  "SCMP_ARCH_AARCH64", "SCMP_ARCH_MIPS",     "SCMP_ARCH_MIPS64",      "SCMP_ARCH_MIPS64N32",
  "SCMP_ARCH_MIPSEL",  "SCMP_ARCH_MIPSEL64", "SCMP_ARCH_MIPSEL64N32", "SCMP_ARCH_PPC",
  "SCMP_ARCH_PPC64",   "SCMP_ARCH_PPC64LE",  "SCMP_ARCH_S390",        "SCMP_ARCH_S390X",
  "SCMP_ARCH_PARISC",  "SCMP_ARCH_PARISC64", "SCMP_ARCH_RISCV64",
};

static const struct
{
  const char *name;
  unsigned long flag;
} seccomp_flags[] = {
  { "SECCOMP_FILTER_FLAG_TSYNC", SECCOMP_FILTER_FLAG_TSYNC },
  { "SECCOMP_FILTER_FLAG_LOG", SECCOMP_FILTER_FLAG_LOG },
  { "SECCOMP_FILTER_FLAG_SPEC_ALLOW", SECCOMP_FILTER_FLAG_SPEC_ALLOW },
  { "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV", SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV },
};

static json_t *
hook_kind_array (void)
{
  json_t *a = json_array ();

  for (int kind = 0; kind < SPEC_HOOK_KIND_COUNT; kind++)
    json_array_append_new (a, json_string (spec_hook_kind_name ((enum spec_hook_kind) kind)));
  return a;
}

static json_t *
string_array (const char *const *names, size_t n)
{
  json_t *array = json_array ();

  for (size_t i = 0; i < n; i++)
    json_array_append_new (array, json_string (names[i]));
  return array;
}

static json_t *
seccomp_archs (void)
{
  json_t *array = json_array ();

  for (size_t i = 0; i < N_ELEMENTS (seccomp_arch_candidates); i++)
    {
      char lower[32];
      const char *suffix = seccomp_arch_candidates[i] + strlen ("SCMP_ARCH_");
      size_t n;

      for (n = 0; suffix[n] && n < sizeof lower - 1; n++)
        lower[n] = (char) (suffix[n] >= 'A' && suffix[n] <= 'Z' ? suffix[n] - 'A' + 'a' : suffix[n]);
      lower[n] = '\0';
      if (seccomp_arch_resolve_name (lower) != 0)
        json_array_append_new (array, json_string (seccomp_arch_candidates[i]));
    }
  return array;
}

/* With a NULL program the kernel validates the flags before it reads the
 * program: EFAULT means it knows the flag, EINVAL that it does not.
 * WAIT_KILLABLE_RECV alone is EINVAL (it needs a listener), so it is
 * known but never reported as supported, which matches the parser. */
static bool
seccomp_flag_supported (unsigned long flag)
{
  return syscall (SYS_seccomp, SECCOMP_SET_MODE_FILTER, flag, NULL) < 0 && errno == EFAULT;
}

static json_t *
seccomp_features (void)
{
  json_t *known = json_array ();
  json_t *supported = json_array ();

  for (size_t i = 0; i < N_ELEMENTS (seccomp_flags); i++)
    {
      json_array_append_new (known, json_string (seccomp_flags[i].name));
      if (seccomp_flag_supported (seccomp_flags[i].flag))
        json_array_append_new (supported, json_string (seccomp_flags[i].name));
    }
  return json_pack ("{s:b, s:o, s:o, s:o, s:o, s:o}", "enabled", 1, "actions",
                    string_array (seccomp_action_names, N_ELEMENTS (seccomp_action_names)), "operators",
                    string_array (seccomp_operator_names, N_ELEMENTS (seccomp_operator_names)), "archs",
                    seccomp_archs (), "knownFlags", known, "supportedFlags", supported);
}

static json_t *
linux_features (void)
{
  json_t *namespaces = json_array ();
  json_t *capabilities = json_array ();

  for (int type = 0; type < SPEC_NS_COUNT; type++)
    json_array_append_new (namespaces, json_string (spec_ns_name ((enum spec_ns_type) type)));
  for (int cap = 0; spec_capability_name (cap) != NULL; cap++)
    json_array_append_new (capabilities, json_string (spec_capability_name (cap)));
  return json_pack ("{s:o, s:o, s:{s:b, s:b, s:b, s:b, s:b}, s:o, s:{s:b}, s:{s:b}, s:{s:b}, s:{s:{s:b}}}",
                    "namespaces", namespaces, "capabilities", capabilities, "cgroup", "v1", 1, "v2", 1,
                    "systemd", 0, "systemdUser", 0, "rdma", 0, "seccomp", seccomp_features (), "apparmor",
                    "enabled", apparmor_enabled (), "selinux", "enabled", 0, "intelRdt", "enabled", 0,
                    "mountExtensions", "idmap", "enabled", husk_idmap_supported ("/"));
}

static bool
can_lower_oom_score_adj (void)
{
  cap_t caps = cap_get_proc ();
  cap_flag_value_t value = CAP_CLEAR;

  if (caps)
    cap_get_flag (caps, CAP_SYS_RESOURCE, CAP_EFFECTIVE, &value);
  cap_free (caps);
  return value == CAP_SET;
}

/* runtime-specific facts, as the features schema keeps them: `exec
 * --console-size` (huskd looks for it), a deviation from the spec's MUST
 * on oomScoreAdj, and whether it applies here. */
static json_t *
features_annotations (void)
{
  const struct scmp_version *libseccomp = seccomp_version ();
  cleanup_free char *libseccomp_version
      = xasprintf ("%u.%u.%u", libseccomp->major, libseccomp->minor, libseccomp->micro);

  return json_pack (
      "{s:s, s:s, s:s, s:s}", "io.github.seccomp.libseccomp.version", libseccomp_version,
      "io.husk.exec.consoleSize", "true", "io.husk.oomScoreAdj",
      "a value below the current one needs CAP_SYS_RESOURCE; without it husk warns and keeps the "
      "current value instead of failing",
      "io.husk.oomScoreAdj.canLower", can_lower_oom_score_adj () ? "true" : "false");
}

char *
spec_features_json (void)
{
  json_t *features = json_pack ("{s:s, s:s, s:o, s:o, s:o, s:o}", "ociVersionMin", "1.0.0", "ociVersionMax",
                                "1.2.0", "hooks", hook_kind_array (), "mountOptions",
                                string_array (mount_option_names, N_ELEMENTS (mount_option_names)), "linux",
                                linux_features (), "annotations", features_annotations ());
  char *text;

  if (features == NULL)
    abort (); /* a bad json_pack format: a bug, caught by the unit test */
  text = json_dumps (features, JSON_INDENT (2));
  json_decref (features);
  if (text == NULL)
    abort ();
  return text;
}
