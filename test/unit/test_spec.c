/* Unit tests for the config.json parser (runtime/spec.c) and the documents
 * of `husk spec` and `husk features` (runtime/spec/spec_default.c).  JSON in
 * this file is written with single quotes; quote() turns them into double
 * quotes so the configs stay readable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "husk/cleanup.h"
#include "husk/idmap.h"
#include "husk/util.h"
#include "runtime/spec/spec.h"

static char bundle_dir[PATH_MAX];
static char rootfs_dir[PATH_MAX];

#define assert_contains(haystack, needle)                                                                    \
  do                                                                                                         \
    {                                                                                                        \
      const char *haystack_ = (haystack);                                                                    \
      if (haystack_ == NULL || strstr (haystack_, (needle)) == NULL)                                         \
        fail_msg ("\"%s\" does not contain \"%s\"", haystack_ ? haystack_ : "(null)", (needle));             \
    }                                                                                                        \
  while (0)

#define BASE "'ociVersion': '1.2.0', 'root': {'path': 'rootfs'}"
#define PROCESS(extra) "'process': {'args': ['sh'], 'cwd': '/'" extra "}"

static char *
quote (const char *single_quoted)
{
  char *text = xstrdup (single_quoted);

  for (char *p = text; *p; p++)
    if (*p == '\'')
      *p = '"';
  return text;
}

static struct spec *
parse_text_ok (const char *single_quoted)
{
  cleanup_free char *text = quote (single_quoted);
  struct husk_error *err = NULL;
  struct spec *spec = NULL;

  if (spec_parse (text, strlen (text), "config.json", bundle_dir, &spec, &err) < 0)
    {
      char *msg = xstrdup (err->msg);
      husk_error_free (&err);
      fail_msg ("unexpected error: %s", msg);
    }
  assert_non_null (spec);
  return spec;
}

/* Returns the error message (to free) of a config that must be refused. */
static char *
parse_text_fail (const char *single_quoted)
{
  cleanup_free char *text = quote (single_quoted);
  struct husk_error *err = NULL;
  struct spec *spec = NULL;
  char *msg;

  if (spec_parse (text, strlen (text), "config.json", bundle_dir, &spec, &err) == 0)
    {
      spec_free (spec);
      fail_msg ("config was accepted: %s", text);
    }
  assert_null (spec);
  assert_non_null (err);
  assert_null (strchr (err->msg, '\n'));
  msg = xstrdup (err->msg);
  husk_error_free (&err);
  return msg;
}

/* BODY is added after ociVersion and root. */
static struct spec *
parse_ok (const char *body)
{
  cleanup_free char *text = xasprintf ("{" BASE ", %s}", body);
  return parse_text_ok (text);
}

static char *
parse_fail (const char *body)
{
  cleanup_free char *text = xasprintf ("{" BASE ", %s}", body);
  return parse_text_fail (text);
}

static void
expect_error (const char *body, const char *expected)
{
  cleanup_free char *msg = parse_fail (body);
  assert_contains (msg, expected);
}

static int
setup_bundle (void **state)
{
  char template[] = "/tmp/husk-test-spec.XXXXXX";

  if (mkdtemp (template) == NULL)
    return -1;
  snprintf (bundle_dir, sizeof bundle_dir, "%s", template);
  snprintf (rootfs_dir, sizeof rootfs_dir, "%s/rootfs", template);
  return mkdir (rootfs_dir, 0755);
}

static int
teardown_bundle (void **state)
{
  struct husk_error *err = NULL;

  if (husk_rm_rf (bundle_dir, &err) < 0)
    {
      husk_error_free (&err);
      return -1;
    }
  return 0;
}

/* ------------------------------------------------------------------ */

static const char full_config[]
    = "{ 'ociVersion': '1.0.2-dev',"
      "  'root': {'path': 'rootfs', 'readonly': true},"
      "  'hostname': 'box', 'domainname': 'example.org',"
      "  'process': {"
      "    'terminal': true, 'consoleSize': {'height': 24, 'width': 80},"
      "    'args': ['/bin/sh', '-c', 'echo hi'], 'env': ['PATH=/bin', 'A=b=c'], 'cwd': '/work',"
      "    'user': {'uid': 1000, 'gid': 100, 'umask': 18, 'additionalGids': [5, 6, 7]},"
      "    'capabilities': {'bounding': ['CAP_KILL', 'CAP_SYS_ADMIN'], 'effective': ['CAP_KILL'],"
      "                     'inheritable': [], 'permitted': ['CAP_KILL'], 'ambient': ['CAP_CHOWN']},"
      "    'rlimits': [{'type': 'RLIMIT_NOFILE', 'soft': 1024, 'hard': 4096},"
      "                {'type': 'RLIMIT_CORE', 'soft': 0, 'hard': 0}],"
      "    'noNewPrivileges': true, 'oomScoreAdj': 100,"
      "    'apparmorProfile': 'unconfined', 'selinuxLabel': 'system_u:system_r:svirt_lxc_net_t:s0'},"
      "  'mounts': ["
      "    {'destination': '/proc', 'type': 'proc', 'source': 'proc'},"
      "    {'destination': '/dev', 'type': 'tmpfs', 'source': 'tmpfs',"
      "     'options': ['nosuid', 'strictatime', 'mode=755', 'size=65536k']},"
      "    {'destination': '/data/', 'source': '/srv/data', 'options': ['rbind', 'ro', 'rprivate']}],"
      "  'hooks': {'prestart': [{'path': '/bin/true', 'args': ['true', 'x'], 'env': ['K=V'], 'timeout': 5}],"
      "            'poststop': [{'path': '/bin/false'}]},"
      "  'annotations': {'org.example.key': 'value', 'other': ''},"
      "  'linux': {"
      "    'namespaces': [{'type': 'pid'}, {'type': 'network', 'path': '/var/run/netns/n1'}, {'type': "
      "'mount'},"
      "                   {'type': 'user'}, {'type': 'time'}],"
      "    'uidMappings': [{'containerID': 0, 'hostID': 100000, 'size': 65536}],"
      "    'gidMappings': [{'containerID': 0, 'hostID': 200000, 'size': 1000}],"
      "    'devices': [{'path': '/dev/fuse', 'type': 'c', 'major': 10, 'minor': 229, 'fileMode': 8630,"
      "                 'uid': 0, 'gid': 5}],"
      "    'cgroupsPath': '/husk/box',"
      "    'resources': {'devices': [{'allow': false, 'access': 'rwm'}]},"
      "    'rootfsPropagation': 'rslave',"
      "    'maskedPaths': ['/proc/kcore'], 'readonlyPaths': ['/proc/sys', '/proc/bus'],"
      "    'sysctl': {'net.ipv4.ip_forward': '1'},"
      "    'seccomp': {'defaultAction': 'SCMP_ACT_ERRNO', 'architectures': ['SCMP_ARCH_X86_64'],"
      "                'syscalls': [{'names': ['read', 'write'], 'action': 'SCMP_ACT_ALLOW'}]},"
      "    'mountLabel': 'system_u:object_r:svirt_sandbox_file_t:s0',"
      "    'timeOffsets': {'monotonic': {'secs': -5, 'nanosecs': 7}, 'boottime': {'secs': 86400}}}}";

static void
test_full_config_process (void **state)
{
  struct spec *spec = parse_text_ok (full_config);
  const struct spec_process *p = &spec->process;

  assert_string_equal (spec->oci_version, "1.0.2-dev");
  assert_true (spec->has_process);
  assert_true (p->terminal);
  assert_int_equal (p->console_height, 24);
  assert_int_equal (p->console_width, 80);
  assert_int_equal (husk_strv_len (p->args), 3);
  assert_string_equal (p->args[2], "echo hi");
  assert_string_equal (p->env[1], "A=b=c");
  assert_null (p->env[2]);
  assert_string_equal (p->cwd, "/work");
  assert_int_equal (p->user.uid, 1000);
  assert_int_equal (p->user.gid, 100);
  assert_true (p->user.has_umask);
  assert_int_equal (p->user.umask, 022);
  assert_int_equal (p->user.n_additional_gids, 3);
  assert_int_equal (p->user.additional_gids[2], 7);
  assert_true (p->has_capabilities);
  assert_true (p->caps.bounding == ((UINT64_C (1) << 5) | (UINT64_C (1) << 21)));
  assert_true (p->caps.effective == (UINT64_C (1) << 5));
  assert_true (p->caps.inheritable == 0);
  assert_true (p->caps.ambient == 1);
  assert_int_equal (p->n_rlimits, 2);
  assert_int_equal (p->rlimits[0].resource, RLIMIT_NOFILE);
  assert_int_equal (p->rlimits[0].soft, 1024);
  assert_int_equal (p->rlimits[0].hard, 4096);
  assert_int_equal (p->rlimits[1].resource, RLIMIT_CORE);
  assert_true (p->no_new_privileges);
  assert_true (p->has_oom_score_adj);
  assert_int_equal (p->oom_score_adj, 100);
  assert_string_equal (p->apparmor_profile, "unconfined");
  assert_string_equal (p->selinux_label, "system_u:system_r:svirt_lxc_net_t:s0");
  spec_free (spec);
}

static void
test_full_config_rest (void **state)
{
  struct spec *spec = parse_text_ok (full_config);
  char resolved_bundle[PATH_MAX];

  assert_non_null (realpath (bundle_dir, resolved_bundle));
  assert_string_equal (spec->bundle_dir, resolved_bundle);
  assert_non_null (spec->root_path);
  assert_true (husk_str_has_prefix (spec->root_path, resolved_bundle));
  assert_true (husk_str_has_suffix (spec->root_path, "/rootfs"));
  assert_true (spec->root_readonly);
  assert_string_equal (spec->hostname, "box");
  assert_string_equal (spec->domainname, "example.org");
  assert_int_equal (spec->n_mounts, 3);
  assert_string_equal (spec->mounts[0].type, "proc");
  assert_null (spec->mounts[0].data);
  assert_int_equal (spec->mounts[1].flags, MS_NOSUID | MS_STRICTATIME);
  assert_string_equal (spec->mounts[1].data, "mode=755,size=65536k");
  assert_string_equal (spec->mounts[2].destination, "/data");
  assert_true (spec->mounts[2].bind);
  assert_int_equal (spec->mounts[2].flags, MS_BIND | MS_REC | MS_RDONLY);
  assert_int_equal (spec->mounts[2].propagation, MS_PRIVATE | MS_REC);
  assert_int_equal (spec->hooks.count[SPEC_HOOK_PRESTART], 1);
  assert_string_equal (spec->hooks.list[SPEC_HOOK_PRESTART][0].args[1], "x");
  assert_string_equal (spec->hooks.list[SPEC_HOOK_PRESTART][0].env[0], "K=V");
  assert_int_equal (spec->hooks.list[SPEC_HOOK_PRESTART][0].timeout, 5);
  assert_int_equal (spec->hooks.count[SPEC_HOOK_POSTSTOP], 1);
  assert_null (spec->hooks.list[SPEC_HOOK_POSTSTOP][0].args);
  assert_int_equal (spec->hooks.list[SPEC_HOOK_POSTSTOP][0].timeout, 0);
  assert_int_equal (spec->hooks.count[SPEC_HOOK_CREATE_RUNTIME], 0);
  assert_int_equal (husk_strv_len (spec->annotations), 4);
  assert_string_equal (spec->annotations[0], "org.example.key");
  assert_string_equal (spec->annotations[1], "value");
  assert_string_equal (spec->annotations[3], "");
  spec_free (spec);
}

static void
test_full_config_linux (void **state)
{
  struct spec *spec = parse_text_ok (full_config);

  assert_true (spec->namespaces[SPEC_NS_PID].present);
  assert_null (spec->namespaces[SPEC_NS_PID].path);
  assert_string_equal (spec->namespaces[SPEC_NS_NETWORK].path, "/var/run/netns/n1");
  assert_false (spec->namespaces[SPEC_NS_IPC].present);
  assert_true (spec->namespaces[SPEC_NS_USER].present);
  assert_int_equal (spec->n_uid_mappings, 1);
  assert_int_equal (spec->uid_mappings[0].host_id, 100000);
  assert_int_equal (spec->uid_mappings[0].size, 65536);
  assert_int_equal (spec->gid_mappings[0].host_id, 200000);
  assert_int_equal (spec->n_devices, 1);
  assert_int_equal (spec->devices[0].type, 'c');
  assert_int_equal (spec->devices[0].major, 10);
  assert_int_equal (spec->devices[0].minor, 229);
  assert_true (spec->devices[0].has_mode);
  assert_int_equal (spec->devices[0].file_mode, 0666); /* 8630 = S_IFCHR | 0666 */
  assert_true (spec->devices[0].has_gid);
  assert_int_equal (spec->devices[0].gid, 5);
  assert_string_equal (spec->cgroups_path, "/husk/box");
  assert_false (spec->resources.has_limits);
  assert_non_null (spec->resources.raw);
  assert_true (json_is_array (json_object_get (spec->resources.raw, "devices")));
  assert_int_equal (spec->rootfs_propagation, MS_SLAVE | MS_REC);
  assert_string_equal (spec->masked_paths[0], "/proc/kcore");
  assert_string_equal (spec->readonly_paths[1], "/proc/bus");
  assert_int_equal (spec->n_sysctls, 1);
  assert_string_equal (spec->sysctls[0].key, "net.ipv4.ip_forward");
  assert_string_equal (spec->sysctls[0].value, "1");
  assert_true (spec->has_seccomp);
  assert_int_equal (spec->seccomp.default_action, SCMP_ACT_ERRNO (EPERM));
  assert_int_equal (spec->seccomp.n_archs, 1);
  assert_int_equal (spec->seccomp.archs[0], SCMP_ARCH_X86_64);
  assert_int_equal (spec->seccomp.n_rules, 1);
  assert_string_equal (spec->seccomp.rules[0].names[1], "write");
  assert_int_equal (spec->seccomp.rules[0].action, SCMP_ACT_ALLOW);
  assert_string_equal (spec->mount_label, "system_u:object_r:svirt_sandbox_file_t:s0");
  assert_true (spec->has_time_offsets);
  assert_int_equal (spec->time_offset_secs[0], 86400);
  assert_int_equal (spec->time_offset_secs[1], -5);
  assert_int_equal (spec->time_offset_nanosecs[1], 7);
  spec_free (spec);
}

static void
test_minimal_config (void **state)
{
  struct spec *spec = parse_text_ok ("{" BASE "}");

  assert_false (spec->has_process);
  assert_int_equal (spec->n_mounts, 0);
  assert_null (spec->hostname);
  assert_null (spec->annotations);
  assert_false (spec->has_seccomp);
  assert_int_equal (spec->rootfs_propagation, 0);
  assert_non_null (spec->json);
  spec_free (spec);
}

static void
test_malformed_json (void **state)
{
  cleanup_free char *msg = parse_text_fail ("{\n  'ociVersion': '1.2.0',\n  'mounts': [\n  }\n");
  cleanup_free char *empty = parse_text_fail ("");
  cleanup_free char *array = parse_text_fail ("[]");

  assert_contains (msg, "config.json: line 4 column 3: ");
  assert_contains (msg, "near '}'");
  assert_contains (empty, "config.json: line 1 column 0: ");
  assert_string_equal (array, "config.json: must be a JSON object");
}

static void
test_oci_version (void **state)
{
  static const char *const accepted[] = { "1.0.0", "1.0.2-dev", "1.1.0", "1.1.0-rc.1", "1.2.0", "1.2.7" };
  static const char *const refused[] = { "2.0.0", "1.3.0", "0.9.0", "1.2", "abc", "v1.0.0", "1.0.0x" };

  for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++)
    {
      cleanup_free char *text = xasprintf ("{'ociVersion': '%s', 'root': {'path': 'rootfs'}}", accepted[i]);
      spec_free (parse_text_ok (text));
    }
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    {
      cleanup_free char *text = xasprintf ("{'ociVersion': '%s', 'root': {'path': 'rootfs'}}", refused[i]);
      cleanup_free char *msg = parse_text_fail (text);
      cleanup_free char *expected
          = xasprintf ("config.json: ociVersion \"%s\" is not supported (husk supports "
                       "1.0.0 to 1.2.x)",
                       refused[i]);
      assert_string_equal (msg, expected);
    }
  {
    cleanup_free char *missing = parse_text_fail ("{'root': {'path': 'rootfs'}}");
    cleanup_free char *number = parse_text_fail ("{'ociVersion': 1, 'root': {'path': 'rootfs'}}");
    assert_string_equal (missing, "config.json: ociVersion: required field is missing");
    assert_string_equal (number, "config.json: ociVersion: must be a string");
  }
}

static void
test_root (void **state)
{
  cleanup_free char *absolute = xasprintf ("{'ociVersion': '1.2.0', 'root': {'path': '%s/./'}}", rootfs_dir);
  cleanup_free char *file_path = xasprintf ("%s/file", bundle_dir);
  cleanup_free char *missing = parse_text_fail ("{'ociVersion': '1.2.0', 'root': {'path': 'nope'}}");
  cleanup_free char *no_root = parse_text_fail ("{'ociVersion': '1.2.0'}");
  cleanup_free char *no_path = parse_text_fail ("{'ociVersion': '1.2.0', 'root': {'readonly': true}}");
  cleanup_free char *not_dir = NULL;
  struct spec *spec = parse_text_ok (absolute);
  FILE *file;

  assert_string_equal (spec->root_path, rootfs_dir);
  assert_false (spec->root_readonly);
  spec_free (spec);
  assert_contains (missing, "config.json: root.path: `");
  assert_contains (missing, "/nope`: No such file or directory");
  assert_string_equal (no_root, "config.json: root: required field is missing");
  assert_string_equal (no_path, "config.json: root.path: required field is missing");

  file = fopen (file_path, "w");
  assert_non_null (file);
  fclose (file);
  not_dir = parse_text_fail ("{'ociVersion': '1.2.0', 'root': {'path': 'file'}}");
  unlink (file_path);
  assert_contains (not_dir, "/file`: Not a directory");
}

static void
test_process_errors (void **state)
{
  expect_error ("'process': {'cwd': '/'}", "config.json: process.args: required field is missing");
  expect_error ("'process': {'args': [], 'cwd': '/'}", "config.json: process.args: must not be empty");
  expect_error ("'process': {'args': ['sh', 3], 'cwd': '/'}",
                "config.json: process.args[1]: must be a string");
  expect_error ("'process': {'args': ['sh']}", "config.json: process.cwd: required field is missing");
  expect_error ("'process': {'args': ['sh'], 'cwd': 'tmp'}",
                "config.json: process.cwd: must be an absolute path");
  expect_error (PROCESS (", 'env': ['A=1', 'NOEQUALS']"),
                "config.json: process.env[1]: \"NOEQUALS\" must have");
  expect_error (PROCESS (", 'terminal': 'yes'"), "config.json: process.terminal: must be true or false");
  expect_error (PROCESS (", 'user': {'uid': -1}"), "config.json: process.user.uid: -1 is out of range");
  expect_error (PROCESS (", 'user': {'additionalGids': [1, 'x']}"),
                "config.json: process.user.additionalGids[1]: must be an integer");
  expect_error (PROCESS (", 'user': {'umask': 4096}"),
                "config.json: process.user.umask: 4096 is out of range");
  expect_error (PROCESS (", 'oomScoreAdj': 1001"), "config.json: process.oomScoreAdj: 1001 is out of range");
  expect_error (PROCESS (", 'consoleSize': {'height': 1}"),
                "config.json: process.consoleSize.width: required field is missing");
  expect_error ("'process': ['sh']", "config.json: process: must be an object");
}

static void
test_process_defaults (void **state)
{
  struct spec *spec = parse_ok (PROCESS (""));

  assert_true (spec->has_process);
  assert_non_null (spec->process.env);
  assert_null (spec->process.env[0]);
  assert_false (spec->process.has_capabilities);
  assert_false (spec->process.has_oom_score_adj);
  assert_false (spec->process.user.has_umask);
  assert_int_equal (spec->process.user.uid, 0);
  spec_free (spec);
}

static void
test_capabilities (void **state)
{
  struct spec *spec
      = parse_ok (PROCESS (", 'capabilities': {'bounding': ['CAP_CHOWN', 'CAP_CHECKPOINT_RESTORE']}"));

  assert_true (spec->process.caps.bounding == (1 | (UINT64_C (1) << 40)));
  spec_free (spec);
  expect_error (PROCESS (", 'capabilities': {'bounding': ['CAP_KILL', 'CAP_FOO']}"),
                "config.json: process.capabilities.bounding[1]: unknown capability \"CAP_FOO\"");
  expect_error (PROCESS (", 'capabilities': {'effective': ['cap_kill']}"),
                "process.capabilities.effective[0]: unknown capability \"cap_kill\"");
  expect_error (PROCESS (", 'capabilities': {'ambient': ['KILL']}"),
                "process.capabilities.ambient[0]: unknown capability \"KILL\"");
  expect_error (PROCESS (", 'capabilities': {'permitted': 'CAP_KILL'}"),
                "process.capabilities.permitted: must be an array of strings");
}

static void
test_capability_names (void **state)
{
  cleanup_free char *text = NULL;
  struct husk_error *err = NULL;
  long long kernel_last = -1;

  assert_int_equal (spec_capability_from_name ("CAP_CHOWN"), 0);
  assert_int_equal (spec_capability_from_name ("CAP_SYS_ADMIN"), 21);
  assert_int_equal (spec_capability_from_name ("CAP_NET_BIND_SERVICE"), 10);
  assert_int_equal (spec_capability_from_name ("CAP_BPF"), 39);
  assert_int_equal (spec_capability_from_name ("CAP_FOO"), -1);
  assert_int_equal (spec_capability_from_name ("SYS_ADMIN"), -1);
  assert_string_equal (spec_capability_name (0), "CAP_CHOWN");
  assert_string_equal (spec_capability_name (40), "CAP_CHECKPOINT_RESTORE");
  assert_null (spec_capability_name (-1));
  assert_null (spec_capability_name (64));
  for (int cap = 0; spec_capability_name (cap); cap++)
    assert_int_equal (spec_capability_from_name (spec_capability_name (cap)), cap);
  if (husk_read_file ("/proc/sys/kernel/cap_last_cap", &text, NULL, &err) == 0)
    {
      text[strcspn (text, "\n")] = '\0';
      assert_int_equal (husk_parse_int64 (text, 0, 63, &kernel_last), 0);
      assert_int_equal (spec_cap_last_cap (), kernel_last);
    }
  husk_error_free (&err);
  assert_true (spec_cap_last_cap () >= 36 && spec_cap_last_cap () <= 63);
}

static void
test_rlimits (void **state)
{
  static const struct
  {
    const char *name;
    int resource;
  } names[] = {
    { "RLIMIT_AS", RLIMIT_AS },
    { "RLIMIT_CORE", RLIMIT_CORE },
    { "RLIMIT_CPU", RLIMIT_CPU },
    { "RLIMIT_DATA", RLIMIT_DATA },
    { "RLIMIT_FSIZE", RLIMIT_FSIZE },
    { "RLIMIT_LOCKS", RLIMIT_LOCKS },
    { "RLIMIT_MEMLOCK", RLIMIT_MEMLOCK },
    { "RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE },
    { "RLIMIT_NICE", RLIMIT_NICE },
    { "RLIMIT_NOFILE", RLIMIT_NOFILE },
    { "RLIMIT_NPROC", RLIMIT_NPROC },
    { "RLIMIT_RSS", RLIMIT_RSS },
    { "RLIMIT_RTPRIO", RLIMIT_RTPRIO },
    { "RLIMIT_RTTIME", RLIMIT_RTTIME },
    { "RLIMIT_SIGPENDING", RLIMIT_SIGPENDING },
    { "RLIMIT_STACK", RLIMIT_STACK },
  };

  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    {
      cleanup_free char *body
          = xasprintf (PROCESS (", 'rlimits': [{'type': '%s', 'soft': 1, 'hard': 2}]"), names[i].name);
      struct spec *spec = parse_ok (body);
      assert_int_equal (spec->process.rlimits[0].resource, names[i].resource);
      spec_free (spec);
    }
  expect_error (PROCESS (", 'rlimits': [{'type': 'RLIMIT_FOO', 'soft': 1, 'hard': 1}]"),
                "config.json: process.rlimits[0].type: unknown rlimit \"RLIMIT_FOO\"");
  expect_error (PROCESS (", 'rlimits': [{'type': 'RLIMIT_NOFILE', 'soft': 1, 'hard': 1},"
                         "{'type': 'RLIMIT_CORE', 'soft': 1, 'hard': 1},"
                         "{'type': 'RLIMIT_NOFILE', 'soft': 2, 'hard': 2}]"),
                "config.json: process.rlimits[2].type: duplicate RLIMIT_NOFILE");
  expect_error (PROCESS (", 'rlimits': [{'type': 'RLIMIT_NOFILE', 'soft': 10, 'hard': 1}]"),
                "process.rlimits[0]: soft limit 10 is above the hard limit 1");
  expect_error (PROCESS (", 'rlimits': [{'type': 'RLIMIT_NOFILE', 'soft': 1}]"),
                "process.rlimits[0].hard: required field is missing");
  expect_error (PROCESS (", 'rlimits': [{'type': 'RLIMIT_NOFILE', 'soft': -1, 'hard': 1}]"),
                "process.rlimits[0].soft: must not be negative");
}

/* RLIM_INFINITY is often written as 18446744073709551615, beyond jansson's
 * int64: the document is re-read with doubles and still means "unlimited". */
static void
test_rlimit_infinity (void **state)
{
  struct spec *spec
      = parse_ok (PROCESS (", 'rlimits': [{'type': 'RLIMIT_MEMLOCK', 'soft': 18446744073709551615,"
                           " 'hard': 18446744073709551615}, {'type': 'RLIMIT_NOFILE', 'soft': 1024,"
                           " 'hard': 1048576}], 'user': {'uid': 1000}"));

  assert_true (spec->process.rlimits[0].soft == UINT64_MAX);
  assert_true (spec->process.rlimits[0].hard == UINT64_MAX);
  assert_int_equal (spec->process.rlimits[1].soft, 1024);
  assert_int_equal (spec->process.rlimits[1].hard, 1048576);
  assert_int_equal (spec->process.user.uid, 1000);
  spec_free (spec);
  expect_error (
      PROCESS (", 'rlimits': [{'type': 'RLIMIT_NOFILE', 'soft': 1.5, 'hard': 18446744073709551615}]"),
      "process.rlimits[0].soft: must be an integer");
}

/* ------------------------------------------------------------------ */
/* Mount options                                                        */

static void
parse_options (struct spec_mount *mount, const char *type, const char *const *options)
{
  struct husk_error *err = NULL;

  memset (mount, 0, sizeof *mount);
  mount->type = type ? xstrdup (type) : NULL;
  if (spec_mount_parse_options (mount, (char *const *) options, "mounts[0].options", &err) < 0)
    {
      char *msg = xstrdup (err->msg);
      husk_error_free (&err);
      fail_msg ("unexpected error: %s", msg);
    }
}

static void
mount_clear (struct spec_mount *mount)
{
  free (mount->type);
  free (mount->data);
  memset (mount, 0, sizeof *mount);
}

static void
test_mount_option_table (void **state)
{
  static const struct
  {
    const char *option;
    unsigned long flags;
  } cases[] = {
    { "defaults", 0 },
    { "ro", MS_RDONLY },
    { "rw", 0 },
    { "nosuid", MS_NOSUID },
    { "suid", 0 },
    { "nodev", MS_NODEV },
    { "dev", 0 },
    { "noexec", MS_NOEXEC },
    { "exec", 0 },
    { "sync", MS_SYNCHRONOUS },
    { "async", 0 },
    { "dirsync", MS_DIRSYNC },
    { "remount", MS_REMOUNT },
    { "mand", MS_MANDLOCK },
    { "nomand", 0 },
    { "noatime", MS_NOATIME },
    { "atime", 0 },
    { "nodiratime", MS_NODIRATIME },
    { "diratime", 0 },
    { "relatime", MS_RELATIME },
    { "norelatime", 0 },
    { "strictatime", MS_STRICTATIME },
    { "nostrictatime", 0 },
    { "nosymfollow", MS_NOSYMFOLLOW },
    { "bind", MS_BIND },
    { "rbind", MS_BIND | MS_REC },
  };

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      const char *options[] = { cases[i].option, NULL };
      struct spec_mount mount;

      parse_options (&mount, NULL, options);
      if (mount.flags != cases[i].flags)
        fail_msg ("option %s: flags %#lx, expected %#lx", cases[i].option, mount.flags, cases[i].flags);
      assert_null (mount.data);
      assert_int_equal (mount.propagation, 0);
      assert_int_equal (mount.bind, (cases[i].flags & MS_BIND) != 0);
      mount_clear (&mount);
    }
}

static void
test_mount_option_negations (void **state)
{
  static const char *const pairs[][2] = {
    { "ro", "rw" },
    { "nosuid", "suid" },
    { "nodev", "dev" },
    { "noexec", "exec" },
    { "sync", "async" },
    { "mand", "nomand" },
    { "noatime", "atime" },
    { "nodiratime", "diratime" },
    { "relatime", "norelatime" },
    { "strictatime", "nostrictatime" },
    { "nosymfollow", "symfollow" },
  };

  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
    {
      const char *set_then_clear[] = { pairs[i][0], pairs[i][1], NULL };
      const char *clear_then_set[] = { pairs[i][1], pairs[i][0], NULL };
      struct spec_mount mount;
      unsigned long set_flags;

      parse_options (&mount, NULL, clear_then_set);
      set_flags = mount.flags;
      mount_clear (&mount);
      parse_options (&mount, NULL, set_then_clear);
      if (mount.flags != 0 || set_flags == 0)
        fail_msg ("%s/%s: last option must win (%#lx, %#lx)", pairs[i][0], pairs[i][1], set_flags,
                  mount.flags);
      mount_clear (&mount);
    }
}

static void
test_mount_option_propagation (void **state)
{
  static const struct
  {
    const char *option;
    unsigned long propagation;
  } cases[] = {
    { "private", MS_PRIVATE },       { "rprivate", MS_PRIVATE | MS_REC },
    { "shared", MS_SHARED },         { "rshared", MS_SHARED | MS_REC },
    { "slave", MS_SLAVE },           { "rslave", MS_SLAVE | MS_REC },
    { "unbindable", MS_UNBINDABLE }, { "runbindable", MS_UNBINDABLE | MS_REC },
  };

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      const char *options[] = { "nodev", cases[i].option, NULL };
      struct spec_mount mount;

      parse_options (&mount, NULL, options);
      assert_int_equal (mount.propagation, cases[i].propagation);
      assert_int_equal (mount.flags, MS_NODEV);
      mount_clear (&mount);
    }
}

static void
test_mount_option_bind_rro_data (void **state)
{
  const char *none[] = { NULL };
  const char *with_data[] = { "nosuid", "mode=755", "", "size=1m", "tmpcopyup", NULL };
  const char *rro[] = { "rbind", "rro", NULL };
  struct spec_mount mount;

  parse_options (&mount, "bind", none);
  assert_true (mount.bind);
  assert_int_equal (mount.flags, MS_BIND);
  mount_clear (&mount);

  parse_options (&mount, "tmpfs", with_data);
  assert_false (mount.bind);
  assert_int_equal (mount.flags, MS_NOSUID);
  assert_string_equal (mount.data, "mode=755,size=1m");
  mount_clear (&mount);

  parse_options (&mount, NULL, rro);
  assert_int_equal (mount.rec_attr_set, MOUNT_ATTR_RDONLY);
  assert_int_equal (mount.rec_attr_clr, 0);
  assert_true (mount.bind);
  assert_int_equal (mount.flags, MS_BIND | MS_REC);
  mount_clear (&mount);
}

/* The recursive options become MOUNT_ATTR_* to set and clear; a later
 * option of the same attribute wins, and atime options carry the atime
 * mask the kernel wants cleared with them. */
static void
test_mount_option_recursive (void **state)
{
  static const struct
  {
    const char *options[4];
    uint64_t set, clr;
  } cases[] = {
    { { "rnoexec", "rnosuid", "rnodev" }, MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0 },
    { { "rro", "rrw" }, 0, MOUNT_ATTR_RDONLY },
    { { "rrw", "rro" }, MOUNT_ATTR_RDONLY, 0 },
    { { "rexec", "rsuid", "rdev" }, 0, MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV },
    { { "rnoatime" }, MOUNT_ATTR_NOATIME, MOUNT_ATTR__ATIME },
    { { "rnoatime", "rstrictatime" }, MOUNT_ATTR_STRICTATIME, MOUNT_ATTR__ATIME },
    { { "rnoatime", "rrelatime" }, MOUNT_ATTR_RELATIME, MOUNT_ATTR__ATIME },
    { { "rnodiratime", "rnosymfollow" }, MOUNT_ATTR_NODIRATIME | MOUNT_ATTR_NOSYMFOLLOW, 0 },
    { { "rdiratime", "rsymfollow" }, 0, MOUNT_ATTR_NODIRATIME | MOUNT_ATTR_NOSYMFOLLOW },
  };
  struct spec_mount mount;

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      parse_options (&mount, NULL, cases[i].options);
      assert_int_equal (mount.rec_attr_set, cases[i].set);
      assert_int_equal (mount.rec_attr_clr, cases[i].clr);
      assert_int_equal (mount.flags, 0);
      assert_null (mount.data);
      mount_clear (&mount);
    }
}

/* "idmap"/"ridmap" mark an idmapped mount; the mappings come from
 * uidMappings/gidMappings, which must come together on a bind mount. */
static void
test_mount_idmapped (void **state)
{
  struct spec *spec
      = parse_ok ("'mounts': [{'destination': '/a', 'type': 'bind', 'source': '/b', 'options': "
                  "['rbind', 'idmap'], 'uidMappings': [{'containerID': 0, 'hostID': 65536, "
                  "'size': 65536}], 'gidMappings': [{'containerID': 0, 'hostID': 131072, "
                  "'size': 1000}, {'containerID': 1000, 'hostID': 200000, 'size': 1}]},"
                  "{'destination': '/c', 'type': 'bind', 'source': '/d', 'options': ['rbind']}]");

  assert_int_equal (spec->n_mounts, 2);
  assert_int_equal (spec->mounts[0].n_uid_mappings, 1);
  assert_int_equal (spec->mounts[0].uid_mappings[0].host_id, 65536);
  assert_int_equal (spec->mounts[0].uid_mappings[0].size, 65536);
  assert_int_equal (spec->mounts[0].n_gid_mappings, 2);
  assert_int_equal (spec->mounts[0].gid_mappings[1].container_id, 1000);
  assert_int_equal (spec->mounts[0].gid_mappings[1].host_id, 200000);
  assert_false (spec->mounts[0].prepared);
  assert_int_equal (spec->mounts[1].n_uid_mappings, 0);
  assert_false (spec->mounts[1].prepared);
  spec_free (spec);
  expect_error (
      "'mounts': [{'destination': '/a', 'type': 'bind', 'source': '/b', 'uidMappings': "
      "[{'containerID': 0, 'hostID': 65536, 'size': 65536}]}]",
      "config.json: mounts[0]: gidMappings: required with uidMappings (an idmapped mount needs both)");
  expect_error ("'mounts': [{'destination': '/a', 'type': 'tmpfs', 'source': 'tmpfs', 'uidMappings': "
                "[{'containerID': 0, 'hostID': 65536, 'size': 65536}], 'gidMappings': [{'containerID': 0, "
                "'hostID': 65536, 'size': 65536}]}]",
                "config.json: mounts[0]: uidMappings: only a bind mount can be idmapped (type `tmpfs`)");
  expect_error ("'mounts': [{'destination': '/a', 'type': 'bind', 'source': '/b', 'uidMappings': "
                "[{'containerID': 0, 'hostID': 65536, 'size': 0}], 'gidMappings': [{'containerID': 0, "
                "'hostID': 65536, 'size': 65536}]}]",
                "config.json: mounts[0]: uidMappings[0].size: must not be 0");
  expect_error ("'mounts': [{'destination': '/a', 'type': 'bind', 'source': '/b', 'uidMappings': "
                "[{'containerID': 0, 'size': 1}], 'gidMappings': []}]",
                "config.json: mounts[0].uidMappings[0].hostID: required");
}

static void
test_mounts (void **state)
{
  struct spec *spec = parse_ok ("'mounts': [{'destination': '//a/./b/../c//'}, {'destination': '/../..'},"
                                "{'destination': '/x', 'type': 'bind', 'source': 'data'},"
                                "{'destination': '/y', 'source': 'tmpfs', 'type': 'tmpfs'}]");

  assert_string_equal (spec->mounts[0].destination, "/a/c");
  assert_null (spec->mounts[0].type);
  assert_null (spec->mounts[0].source);
  assert_string_equal (spec->mounts[1].destination, "/");
  assert_true (spec->mounts[2].bind);
  assert_true (husk_str_has_prefix (spec->mounts[2].source, spec->bundle_dir));
  assert_true (husk_str_has_suffix (spec->mounts[2].source, "/data"));
  assert_string_equal (spec->mounts[3].source, "tmpfs");
  spec_free (spec);

  expect_error ("'mounts': [{'destination': '/a'}, {'destination': '/b'}, {'destination': 'tmp'}]",
                "config.json: mounts[2].destination: must be an absolute path");
  expect_error ("'mounts': [{'type': 'tmpfs'}]",
                "config.json: mounts[0].destination: required field is missing");
  expect_error ("'mounts': [{'destination': '/a', 'options': 'ro'}]",
                "config.json: mounts[0].options: must be an array of strings");
  expect_error ("'mounts': [{'destination': '/a', 'uidMappings': {}}]",
                "config.json: mounts[0].uidMappings: must be an array");
  expect_error ("'mounts': {}", "config.json: mounts: must be an array");
  expect_error ("'mounts': [1]", "config.json: mounts[0]: must be an object");
}

/* ------------------------------------------------------------------ */

static void
test_hooks (void **state)
{
  static const struct
  {
    const char *name;
    enum spec_hook_kind kind;
  } kinds[] = {
    { "prestart", SPEC_HOOK_PRESTART },
    { "createRuntime", SPEC_HOOK_CREATE_RUNTIME },
    { "createContainer", SPEC_HOOK_CREATE_CONTAINER },
    { "startContainer", SPEC_HOOK_START_CONTAINER },
    { "poststart", SPEC_HOOK_POSTSTART },
    { "poststop", SPEC_HOOK_POSTSTOP },
  };

  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    {
      cleanup_free char *body
          = xasprintf ("'hooks': {'%s': [{'path': '/h1'}, {'path': '/h2', 'timeout': 3}]}", kinds[i].name);
      struct spec *spec = parse_ok (body);

      for (int kind = 0; kind < SPEC_HOOK_KIND_COUNT; kind++)
        assert_int_equal (spec->hooks.count[kind], kind == (int) kinds[i].kind ? 2 : 0);
      assert_string_equal (spec->hooks.list[kinds[i].kind][1].path, "/h2");
      assert_int_equal (spec->hooks.list[kinds[i].kind][1].timeout, 3);
      spec_free (spec);
    }
  expect_error ("'hooks': {'prestart': [{'path': 'hook'}]}",
                "config.json: hooks.prestart[0].path: must be an absolute path");
  expect_error ("'hooks': {'poststop': [{'args': ['x']}]}",
                "config.json: hooks.poststop[0].path: required field is missing");
  expect_error ("'hooks': {'createRuntime': [{'path': '/h', 'timeout': 0}]}",
                "config.json: hooks.createRuntime[0].timeout: must be a positive number of seconds");
  expect_error ("'hooks': {'poststart': [{'path': '/h', 'timeout': -3}]}",
                "hooks.poststart[0].timeout: must be a positive number of seconds, not -3");
  expect_error ("'hooks': {'startContainer': [{'path': '/h', 'env': [1]}]}",
                "hooks.startContainer[0].env[0]: must be a string");
}

static void
test_annotations (void **state)
{
  struct spec *spec = parse_ok ("'annotations': {}");

  assert_non_null (spec->annotations);
  assert_null (spec->annotations[0]);
  spec_free (spec);
  expect_error ("'annotations': {'a': 'b', 'org.example': 5}",
                "config.json: annotations.org.example: must be a string");
  expect_error ("'annotations': ['a']", "config.json: annotations: must be an object");
}

static void
test_unknown_fields_and_null (void **state)
{
  struct spec *spec
      = parse_ok ("'future': {'x': 1}, 'hostname': null, 'linux': {'intelRdt': {}, 'personality': {},"
                  "'namespaces': [{'type': 'ipc', 'extra': true}]}," PROCESS (
                      ", 'ioPriority': {'class': 'IOPRIO_CLASS_RT'}, 'scheduler': {}"));

  assert_null (spec->hostname);
  assert_true (spec->namespaces[SPEC_NS_IPC].present);
  assert_true (spec->has_process);
  spec_free (spec);
  expect_error ("'hostname': 3", "config.json: hostname: must be a string");
  expect_error ("'linux': []", "config.json: linux: must be an object");
}

/* ------------------------------------------------------------------ */
/* linux                                                                */

static void
test_namespaces (void **state)
{
  struct spec *spec
      = parse_ok ("'linux': {'namespaces': [{'type': 'pid'}, {'type': 'network'}, {'type': 'mount'},"
                  "{'type': 'ipc', 'path': '/proc/1/ns/ipc'}, {'type': 'uts'}, {'type': 'cgroup'},"
                  "{'type': 'time'}]}");

  for (int type = 0; type < SPEC_NS_COUNT; type++)
    assert_int_equal (spec->namespaces[type].present, type != SPEC_NS_USER);
  assert_string_equal (spec->namespaces[SPEC_NS_IPC].path, "/proc/1/ns/ipc");
  assert_null (spec->namespaces[SPEC_NS_UTS].path);
  spec_free (spec);
  assert_string_equal (spec_ns_name (SPEC_NS_NETWORK), "network");
  assert_string_equal (spec_ns_name (SPEC_NS_TIME), "time");
  assert_null (spec_ns_name (SPEC_NS_COUNT));

  expect_error ("'linux': {'namespaces': [{'type': 'pid'}, {'type': 'net'}]}",
                "config.json: linux.namespaces[1].type: unknown namespace type \"net\"");
  expect_error ("'linux': {'namespaces': [{'type': 'pid'}, {'type': 'uts'}, {'type': 'pid'}]}",
                "config.json: linux.namespaces[2].type: namespace \"pid\" is listed twice");
  expect_error ("'linux': {'namespaces': [{'path': '/x'}]}",
                "config.json: linux.namespaces[0].type: required field is missing");
  expect_error ("'linux': {'namespaces': [{'type': 'pid', 'path': 'proc/1/ns/pid'}]}",
                "config.json: linux.namespaces[0].path: must be an absolute path");
}

static void
test_user_namespace_mappings (void **state)
{
  struct spec *joined = parse_ok ("'linux': {'namespaces': [{'type': 'user', 'path': '/proc/1/ns/user'}]}");

  assert_true (joined->namespaces[SPEC_NS_USER].present);
  assert_int_equal (joined->n_uid_mappings, 0);
  spec_free (joined);
  expect_error ("'linux': {'namespaces': [{'type': 'user'}]}",
                "config.json: linux.uidMappings: required for a new user namespace");
  expect_error ("'linux': {'namespaces': [{'type': 'user'}],"
                "'uidMappings': [{'containerID': 0, 'hostID': 1000, 'size': 1}]}",
                "config.json: linux.gidMappings: required for a new user namespace");
  expect_error ("'linux': {'uidMappings': [{'containerID': 0, 'hostID': 1000, 'size': 1}]}",
                "config.json: linux.uidMappings: set, but linux.namespaces has no user namespace");
  expect_error ("'linux': {'namespaces': [{'type': 'user'}], 'uidMappings': [{'containerID': 0, 'size': 1}]}",
                "config.json: linux.uidMappings[0].hostID: required field is missing");
  expect_error ("'linux': {'gidMappings': [{'containerID': 0, 'hostID': 4294967296, 'size': 1}]}",
                "config.json: linux.gidMappings[0].hostID: 4294967296 is out of range");
}

static void
test_devices (void **state)
{
  struct spec *spec = parse_ok ("'linux': {'devices': [{'path': '/dev/fifo', 'type': 'p'},"
                                "{'path': '/dev/sda', 'type': 'b', 'major': 8, 'minor': 0, 'uid': 7}]}");

  assert_int_equal (spec->n_devices, 2);
  assert_int_equal (spec->devices[0].type, 'p');
  assert_false (spec->devices[0].has_mode);
  assert_int_equal (spec->devices[1].type, 'b');
  assert_int_equal (spec->devices[1].major, 8);
  assert_true (spec->devices[1].has_uid);
  assert_false (spec->devices[1].has_gid);
  assert_int_equal (spec->devices[1].uid, 7);
  spec_free (spec);

  expect_error ("'linux': {'devices': [{'path': '/dev/x', 'type': 'c', 'minor': 1}]}",
                "config.json: linux.devices[0].major: required for a device of type 'c'");
  expect_error ("'linux': {'devices': [{'path': '/dev/x', 'type': 'u', 'major': 1}]}",
                "config.json: linux.devices[0].minor: required for a device of type 'u'");
  expect_error ("'linux': {'devices': [{'path': '/dev/x', 'type': 'x'}]}",
                "config.json: linux.devices[0].type: unknown device type \"x\"");
  expect_error ("'linux': {'devices': [{'path': 'dev/x', 'type': 'p'}]}",
                "config.json: linux.devices[0].path: must be an absolute path");
}

static void
test_cgroups_path (void **state)
{
  struct spec *spec = parse_ok ("'linux': {'cgroupsPath': 'pod..1/ctr'}");
  struct spec *empty = parse_ok ("'linux': {'cgroupsPath': ''}");

  assert_string_equal (spec->cgroups_path, "pod..1/ctr");
  assert_null (empty->cgroups_path);
  spec_free (spec);
  spec_free (empty);
  expect_error ("'linux': {'cgroupsPath': '/husk/../../etc'}",
                "config.json: linux.cgroupsPath: must not contain \"..\"");
  expect_error ("'linux': {'cgroupsPath': '..'}", "linux.cgroupsPath: must not contain \"..\"");
  expect_error ("'linux': {'cgroupsPath': 'a/..'}", "linux.cgroupsPath: must not contain \"..\"");
}

static void
expect_first_limit (const char *resources, const char *expected)
{
  cleanup_free char *body = xasprintf ("'linux': {'resources': %s}", resources);
  struct spec *spec = parse_ok (body);

  assert_non_null (spec->resources.raw);
  if (expected == NULL)
    {
      assert_false (spec->resources.has_limits);
      assert_null (spec->resources.first_limit);
    }
  else
    {
      assert_true (spec->resources.has_limits);
      assert_string_equal (spec->resources.first_limit, expected);
    }
  spec_free (spec);
}

static void
test_resources (void **state)
{
  expect_first_limit (
      "{'devices': [{'allow': false, 'access': 'rwm'}, {'allow': true, 'type': 'c', 'major': 1,"
      "'minor': 3, 'access': 'rw'}]}",
      NULL);
  expect_first_limit ("{}", NULL);
  expect_first_limit ("{'memory': {}, 'cpu': {'shares': null}, 'hugepageLimits': [], 'unified': {}}", NULL);
  expect_first_limit ("{'memory': {'limit': 1048576}}", "memory.limit");
  expect_first_limit ("{'pids': {'limit': 10}, 'cpu': {'quota': 1000, 'period': 100000}}", "cpu.quota");
  expect_first_limit ("{'pids': {'limit': 10}}", "pids.limit");
  expect_first_limit ("{'blockIO': {'weight': 10}}", "blockIO.weight");
  expect_first_limit ("{'hugepageLimits': [{'pageSize': '2MB', 'limit': 0}]}", "hugepageLimits");
  expect_first_limit ("{'network': {'classID': 1}}", "network.classID");
  expect_first_limit ("{'rdma': {'mlx5_1': {'hcaHandles': 3}}}", "rdma");
  expect_first_limit ("{'unified': {'memory.high': '1G'}, 'devices': []}", "unified");

  expect_error ("'linux': {'resources': {'devices': [{'allow': true, 'access': 'rwx'}]}}",
                "config.json: linux.resources.devices[0].access: \"rwx\" may only contain r, w and m");
  expect_error ("'linux': {'resources': {'devices': [{'access': 'r'}]}}",
                "config.json: linux.resources.devices[0].allow: required field is missing");
  expect_error ("'linux': {'resources': {'devices': [{'allow': true, 'type': 'p'}]}}",
                "linux.resources.devices[0].type: unknown device type \"p\"");
  expect_error ("'linux': {'resources': {'memory': 5}}",
                "config.json: linux.resources.memory: must be an object");
  expect_error ("'linux': {'resources': {'hugepageLimits': {}}}",
                "linux.resources.hugepageLimits: must be an array");
}

static void
test_rootfs_propagation (void **state)
{
  static const struct
  {
    const char *name;
    unsigned long flags;
  } cases[] = {
    { "private", MS_PRIVATE },       { "rprivate", MS_PRIVATE | MS_REC },
    { "slave", MS_SLAVE },           { "rslave", MS_SLAVE | MS_REC },
    { "shared", MS_SHARED },         { "rshared", MS_SHARED | MS_REC },
    { "unbindable", MS_UNBINDABLE }, { "runbindable", MS_UNBINDABLE | MS_REC },
  };

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      cleanup_free char *body = xasprintf ("'linux': {'rootfsPropagation': '%s'}", cases[i].name);
      struct spec *spec = parse_ok (body);
      assert_int_equal (spec->rootfs_propagation, cases[i].flags);
      spec_free (spec);
    }
  expect_error ("'linux': {'rootfsPropagation': 'ro'}",
                "config.json: linux.rootfsPropagation: unknown propagation \"ro\"");
}

static void
test_paths_and_sysctl (void **state)
{
  struct spec *spec = parse_ok ("'linux': {'maskedPaths': [], 'readonlyPaths': ['/proc/sys'],"
                                "'sysctl': {'kernel.shm_rmid_forced': '1', 'net.core.somaxconn': '1024'}}");

  assert_non_null (spec->masked_paths);
  assert_null (spec->masked_paths[0]);
  assert_string_equal (spec->readonly_paths[0], "/proc/sys");
  assert_int_equal (spec->n_sysctls, 2);
  assert_string_equal (spec->sysctls[1].key, "net.core.somaxconn");
  assert_string_equal (spec->sysctls[1].value, "1024");
  spec_free (spec);
  expect_error ("'linux': {'maskedPaths': ['/proc/kcore', 'proc/keys']}",
                "config.json: linux.maskedPaths[1]: must be an absolute path");
  expect_error ("'linux': {'readonlyPaths': '/proc'}",
                "config.json: linux.readonlyPaths: must be an array of strings");
  expect_error ("'linux': {'sysctl': {'net.ipv4.ip_forward': 1}}",
                "config.json: linux.sysctl.net.ipv4.ip_forward: must be a string");
}

/* ------------------------------------------------------------------ */
/* linux.seccomp                                                        */

static uint32_t
parse_default_action (const char *seccomp)
{
  cleanup_free char *body = xasprintf ("'linux': {'seccomp': %s}", seccomp);
  struct spec *spec = parse_ok (body);
  uint32_t action = spec->seccomp.default_action;

  spec_free (spec);
  return action;
}

static void
test_seccomp_actions (void **state)
{
  static const struct
  {
    const char *seccomp;
    uint32_t action;
  } cases[] = {
    { "{'defaultAction': 'SCMP_ACT_KILL'}", SCMP_ACT_KILL },
    { "{'defaultAction': 'SCMP_ACT_KILL_PROCESS'}", SCMP_ACT_KILL_PROCESS },
    { "{'defaultAction': 'SCMP_ACT_KILL_THREAD'}", SCMP_ACT_KILL_THREAD },
    { "{'defaultAction': 'SCMP_ACT_TRAP'}", SCMP_ACT_TRAP },
    { "{'defaultAction': 'SCMP_ACT_ERRNO'}", SCMP_ACT_ERRNO (EPERM) },
    { "{'defaultAction': 'SCMP_ACT_ERRNO', 'defaultErrnoRet': 38}", SCMP_ACT_ERRNO (ENOSYS) },
    { "{'defaultAction': 'SCMP_ACT_TRACE'}", SCMP_ACT_TRACE (EPERM) },
    { "{'defaultAction': 'SCMP_ACT_TRACE', 'defaultErrnoRet': 3}", SCMP_ACT_TRACE (3) },
    { "{'defaultAction': 'SCMP_ACT_ALLOW'}", SCMP_ACT_ALLOW },
    { "{'defaultAction': 'SCMP_ACT_LOG'}", SCMP_ACT_LOG },
    { "{'defaultAction': 'SCMP_ACT_ALLOW', 'defaultErrnoRet': 1}", SCMP_ACT_ALLOW },
  };

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (parse_default_action (cases[i].seccomp) != cases[i].action)
      fail_msg ("%s: action %#x, expected %#x", cases[i].seccomp, parse_default_action (cases[i].seccomp),
                cases[i].action);

  expect_error ("'linux': {'seccomp': {'defaultAction': 'SCMP_ACT_NOTIFY'}}",
                "config.json: linux.seccomp.defaultAction: action SCMP_ACT_NOTIFY is not supported");
  expect_error ("'linux': {'seccomp': {'defaultAction': 'SCMP_ACT_MAYBE'}}",
                "config.json: linux.seccomp.defaultAction: unknown action \"SCMP_ACT_MAYBE\"");
  expect_error ("'linux': {'seccomp': {'architectures': []}}",
                "config.json: linux.seccomp.defaultAction: required field is missing");
  expect_error ("'linux': {'seccomp': {'defaultAction': 'SCMP_ACT_ERRNO', 'defaultErrnoRet': 70000}}",
                "config.json: linux.seccomp.defaultErrnoRet: 70000 is out of range");
}

static void
test_seccomp_rules (void **state)
{
  struct spec *spec = parse_ok ("'linux': {'seccomp': {'defaultAction': 'SCMP_ACT_ALLOW', 'syscalls': ["
                                "{'names': ['mount', 'umount2'], 'action': 'SCMP_ACT_ERRNO', 'errnoRet': 1},"
                                "{'names': ['personality'], 'action': 'SCMP_ACT_ERRNO', 'args': ["
                                "  {'index': 0, 'value': 8, 'op': 'SCMP_CMP_NE'}, {'index': 5, 'value': 255, "
                                "'valueTwo': 18446744073709551615,"
                                "   'op': 'SCMP_CMP_MASKED_EQ'}]},"
                                "{'names': ['ptrace'], 'action': 'SCMP_ACT_KILL_PROCESS'}]}}");
  const struct spec_seccomp *seccomp = &spec->seccomp;

  assert_int_equal (seccomp->n_rules, 3);
  assert_int_equal (seccomp->rules[0].action, SCMP_ACT_ERRNO (1));
  assert_int_equal (seccomp->rules[0].n_args, 0);
  assert_int_equal (seccomp->rules[1].action, SCMP_ACT_ERRNO (EPERM));
  assert_int_equal (seccomp->rules[1].n_args, 2);
  assert_int_equal (seccomp->rules[1].args[0].op, SCMP_CMP_NE);
  assert_int_equal (seccomp->rules[1].args[0].value, 8);
  assert_int_equal (seccomp->rules[1].args[1].index, 5);
  assert_int_equal (seccomp->rules[1].args[1].op, SCMP_CMP_MASKED_EQ);
  assert_true (seccomp->rules[1].args[1].value_two == UINT64_MAX);
  assert_int_equal (seccomp->rules[2].action, SCMP_ACT_KILL_PROCESS);
  spec_free (spec);

  expect_error (
      "'linux': {'seccomp': {'defaultAction': 'SCMP_ACT_ALLOW', 'syscalls': [{'names': ['read']}]}}",
      "config.json: linux.seccomp.syscalls[0].action: required field is missing");
  expect_error ("'linux': {'seccomp': {'defaultAction': 'SCMP_ACT_ALLOW', 'syscalls': [{'names': [],"
                "'action': 'SCMP_ACT_LOG'}]}}",
                "config.json: linux.seccomp.syscalls[0].names: must not be empty");
  expect_error ("'linux': {'seccomp': {'defaultAction': 'SCMP_ACT_ALLOW', 'syscalls': [{'names': ['read'],"
                "'action': 'SCMP_ACT_NOTIFY'}]}}",
                "config.json: linux.seccomp.syscalls[0].action: action SCMP_ACT_NOTIFY is not supported");
  expect_error ("'linux': {'seccomp': {'defaultAction': 'SCMP_ACT_ALLOW', 'syscalls': [{'names': ['read'],"
                "'action': 'SCMP_ACT_LOG', 'args': [{'index': 6, 'value': 1, 'op': 'SCMP_CMP_EQ'}]}]}}",
                "config.json: linux.seccomp.syscalls[0].args[0].index: 6 is out of range");
  expect_error ("'linux': {'seccomp': {'defaultAction': 'SCMP_ACT_ALLOW', 'syscalls': [{'names': ['read'],"
                "'action': 'SCMP_ACT_LOG', 'args': [{'index': 1, 'value': 1, 'op': 'SCMP_CMP_SIMILAR'}]}]}}",
                "config.json: linux.seccomp.syscalls[0].args[0].op: unknown operator \"SCMP_CMP_SIMILAR\"");
}

static void
test_seccomp_ops (void **state)
{
  static const struct
  {
    const char *name;
    int op;
  } ops[] = {
    { "SCMP_CMP_NE", SCMP_CMP_NE },
    { "SCMP_CMP_LT", SCMP_CMP_LT },
    { "SCMP_CMP_LE", SCMP_CMP_LE },
    { "SCMP_CMP_EQ", SCMP_CMP_EQ },
    { "SCMP_CMP_GE", SCMP_CMP_GE },
    { "SCMP_CMP_GT", SCMP_CMP_GT },
    { "SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ },
  };

  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    {
      cleanup_free char *body = xasprintf (
          "'linux': {'seccomp': {'defaultAction': 'SCMP_ACT_ALLOW', 'syscalls': [{'names': ['read'],"
          "'action': 'SCMP_ACT_LOG', 'args': [{'index': 1, 'value': 2, 'op': '%s'}]}]}}",
          ops[i].name);
      struct spec *spec = parse_ok (body);
      assert_int_equal (spec->seccomp.rules[0].args[0].op, ops[i].op);
      spec_free (spec);
    }
}

static void
test_seccomp_archs_and_flags (void **state)
{
  struct spec *spec = parse_ok ("'linux': {'seccomp': {'defaultAction': 'SCMP_ACT_ALLOW',"
                                "'architectures': ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32',"
                                "'SCMP_ARCH_AARCH64', 'SCMP_ARCH_MIPSEL64N32', 'SCMP_ARCH_S390X'],"
                                "'flags': ['SECCOMP_FILTER_FLAG_TSYNC', 'SECCOMP_FILTER_FLAG_LOG',"
                                "'SECCOMP_FILTER_FLAG_SPEC_ALLOW'], 'listenerPath': ''}}");

  assert_int_equal (spec->seccomp.n_archs, 6);
  assert_int_equal (spec->seccomp.archs[0], SCMP_ARCH_X86_64);
  assert_int_equal (spec->seccomp.archs[1], SCMP_ARCH_X86);
  assert_int_equal (spec->seccomp.archs[2], SCMP_ARCH_X32);
  assert_int_equal (spec->seccomp.archs[3], SCMP_ARCH_AARCH64);
  assert_int_equal (spec->seccomp.archs[4], SCMP_ARCH_MIPSEL64N32);
  assert_int_equal (spec->seccomp.archs[5], SCMP_ARCH_S390X);
  assert_int_equal (spec->seccomp.flags,
                    SECCOMP_FILTER_FLAG_TSYNC | SECCOMP_FILTER_FLAG_LOG | SECCOMP_FILTER_FLAG_SPEC_ALLOW);
  assert_null (spec->seccomp.listener_path);
  spec_free (spec);

  expect_error (
      "'linux': {'seccomp': {'defaultAction': 'SCMP_ACT_ALLOW', 'architectures': ['SCMP_ARCH_Z80']}}",
      "config.json: linux.seccomp.architectures[0]: unknown architecture \"SCMP_ARCH_Z80\"");
  expect_error ("'linux': {'seccomp': {'defaultAction': 'SCMP_ACT_ALLOW', 'architectures': ['x86_64']}}",
                "linux.seccomp.architectures[0]: unknown architecture \"x86_64\"");
  expect_error (
      "'linux': {'seccomp': {'defaultAction': 'SCMP_ACT_ALLOW', 'flags': ['SECCOMP_FILTER_FLAG_FAST']}}",
      "config.json: linux.seccomp.flags[0]: unknown flag \"SECCOMP_FILTER_FLAG_FAST\"");
  expect_error (
      "'linux': {'seccomp': {'defaultAction': 'SCMP_ACT_ALLOW', 'listenerPath': '/run/agent.sock'}}",
      "config.json: linux.seccomp.listenerPath: seccomp notify listeners are not supported");
}

static void
test_time_offsets (void **state)
{
  expect_error ("'linux': {'timeOffsets': {'boottime': {'secs': 1}}}",
                "config.json: linux.timeOffsets: set, but linux.namespaces has no time namespace");
  expect_error ("'linux': {'namespaces': [{'type': 'time'}], 'timeOffsets': {'realtime': {'secs': 1}}}",
                "config.json: linux.timeOffsets.realtime: unknown clock");
  expect_error (
      "'linux': {'namespaces': [{'type': 'time'}], 'timeOffsets': {'monotonic': {'nanosecs': 1000000000}}}",
      "config.json: linux.timeOffsets.monotonic.nanosecs: 1000000000 is out of range");
}

/* ------------------------------------------------------------------ */
/* spec_load, spec_parse_process                                        */

static void
test_spec_load (void **state)
{
  cleanup_free char *config_path = xasprintf ("%s/config.json", bundle_dir);
  cleanup_free char *expected = xasprintf ("open `%s/config.json`: No such file or directory", bundle_dir);
  cleanup_free char *bad_field = xasprintf ("%s/config.json: hostname: must be a string", bundle_dir);
  cleanup_free char *good = quote ("{" BASE ", 'hostname': 'loaded'}");
  cleanup_free char *bad = quote ("{" BASE ", 'hostname': []}");
  struct husk_error *err = NULL;
  struct spec *spec = NULL;

  assert_int_equal (spec_load (bundle_dir, &spec, &err), -1);
  assert_string_equal (err->msg, expected);
  assert_int_equal (err->errnum, ENOENT);
  husk_error_free (&err);

  assert_int_equal (husk_write_file_atomic (config_path, good, strlen (good), 0644, &err), 0);
  assert_int_equal (spec_load (bundle_dir, &spec, &err), 0);
  assert_string_equal (spec->hostname, "loaded");
  spec_free (spec);
  spec = NULL;

  assert_int_equal (husk_write_file_atomic (config_path, bad, strlen (bad), 0644, &err), 0);
  assert_int_equal (spec_load (bundle_dir, &spec, &err), -1);
  assert_string_equal (err->msg, bad_field);
  husk_error_free (&err);
  unlink (config_path);
}

static void
test_spec_parse_process (void **state)
{
  cleanup_free char *good = quote ("{'args': ['ls', '-l'], 'cwd': '/tmp', 'env': ['A=1'], 'terminal': false,"
                                   "'capabilities': {'bounding': ['CAP_KILL']}, 'user': {'uid': 33}}");
  cleanup_free char *bad = quote ("{'args': ['ls'], 'cwd': '/', 'rlimits': [{'type': 'RLIMIT_X', 'soft': 1,"
                                  " 'hard': 1}]}");
  cleanup_free char *broken = quote ("{'args': ['ls'],, }");
  struct spec_process process;
  struct husk_error *err = NULL;

  assert_int_equal (spec_parse_process (good, strlen (good), "process.json", &process, &err), 0);
  assert_string_equal (process.args[1], "-l");
  assert_string_equal (process.cwd, "/tmp");
  assert_int_equal (process.user.uid, 33);
  assert_true (process.caps.bounding == (UINT64_C (1) << 5));
  spec_process_clear (&process);
  assert_null (process.args);

  assert_int_equal (spec_parse_process (bad, strlen (bad), "process.json", &process, &err), -1);
  assert_string_equal (err->msg, "process.json: rlimits[0].type: unknown rlimit \"RLIMIT_X\"");
  husk_error_free (&err);
  assert_null (process.rlimits);

  assert_int_equal (spec_parse_process (broken, strlen (broken), "process.json", &process, &err), -1);
  assert_contains (err->msg, "process.json: line 1 column 17: ");
  husk_error_free (&err);
}

/* ------------------------------------------------------------------ */
/* husk spec and husk features                                          */

static void
test_default_spec (void **state)
{
  cleanup_free char *text = spec_default_json (false);
  struct husk_error *err = NULL;
  struct spec *spec = NULL;
  const uint64_t caps = (UINT64_C (1) << 29) | (UINT64_C (1) << 5) | (UINT64_C (1) << 10);

  assert_int_equal (spec_parse (text, strlen (text), "config.json", bundle_dir, &spec, &err), 0);
  assert_string_equal (spec->oci_version, "1.2.0");
  assert_string_equal (spec->root_path + strlen (spec->root_path) - 7, "/rootfs");
  assert_true (spec->root_readonly);
  assert_string_equal (spec->process.args[0], "sh");
  assert_true (spec->process.terminal);
  assert_true (spec->process.caps.bounding == caps);
  assert_true (spec->process.caps.effective == caps);
  assert_true (spec->process.caps.permitted == caps);
  assert_int_equal (spec->process.n_rlimits, 1);
  assert_int_equal (spec->process.rlimits[0].resource, RLIMIT_NOFILE);
  assert_int_equal (spec->process.rlimits[0].hard, 1024);
  assert_int_equal (spec->n_mounts, 7);
  assert_string_equal (spec->mounts[6].destination, "/sys/fs/cgroup");
  assert_string_equal (spec->mounts[2].data, "newinstance,ptmxmode=0666,mode=0620,gid=5");
  assert_true (spec->namespaces[SPEC_NS_NETWORK].present);
  assert_true (spec->namespaces[SPEC_NS_CGROUP].present);
  assert_false (spec->namespaces[SPEC_NS_USER].present);
  assert_false (spec->resources.has_limits);
  assert_non_null (spec->masked_paths[0]);
  assert_string_equal (spec->readonly_paths[3], "/proc/sys");
  spec_free (spec);
}

static void
test_default_spec_rootless (void **state)
{
  cleanup_free char *text = spec_default_json (true);
  struct husk_error *err = NULL;
  struct spec *spec = NULL;

  assert_int_equal (spec_parse (text, strlen (text), "config.json", bundle_dir, &spec, &err), 0);
  assert_true (spec->namespaces[SPEC_NS_USER].present);
  assert_false (spec->namespaces[SPEC_NS_NETWORK].present);
  assert_int_equal (spec->n_uid_mappings, 1);
  assert_int_equal (spec->uid_mappings[0].container_id, 0);
  assert_int_equal (spec->uid_mappings[0].host_id, getuid ());
  assert_int_equal (spec->gid_mappings[0].host_id, getgid ());
  assert_int_equal (spec->uid_mappings[0].size, 1);
  assert_null (spec->resources.raw);
  assert_string_equal (spec->mounts[5].destination, "/sys");
  assert_true (spec->mounts[5].bind);
  assert_int_equal (spec->mounts[5].flags, MS_BIND | MS_REC | MS_NOSUID | MS_NOEXEC | MS_NODEV | MS_RDONLY);
  assert_string_equal (spec->mounts[2].data, "newinstance,ptmxmode=0666,mode=0620");
  spec_free (spec);
}

static json_t *
load_features (void)
{
  cleanup_free char *text = spec_features_json ();
  json_error_t json_error;
  json_t *features = json_loads (text, 0, &json_error);

  if (features == NULL)
    fail_msg ("features are not JSON: line %d: %s", json_error.line, json_error.text);
  return features;
}

static void
test_features_document (void **state)
{
  json_auto_t *features = load_features ();
  json_t *linux_section = json_object_get (features, "linux");
  json_t *cgroup = json_object_get (linux_section, "cgroup");
  json_t *seccomp = json_object_get (linux_section, "seccomp");
  json_t *known = json_object_get (seccomp, "knownFlags");
  json_t *supported = json_object_get (seccomp, "supportedFlags");

  assert_string_equal (json_string_value (json_object_get (features, "ociVersionMin")), "1.0.0");
  assert_string_equal (json_string_value (json_object_get (features, "ociVersionMax")), "1.2.0");
  assert_int_equal (json_array_size (json_object_get (features, "hooks")), SPEC_HOOK_KIND_COUNT);
  assert_int_equal (json_array_size (json_object_get (linux_section, "namespaces")), SPEC_NS_COUNT);
  assert_true (json_is_true (json_object_get (cgroup, "v1")));
  assert_true (json_is_true (json_object_get (cgroup, "v2")));
  assert_true (json_is_false (json_object_get (cgroup, "systemd")));
  assert_true (json_is_false (json_object_get (cgroup, "systemdUser")));
  assert_true (json_is_true (json_object_get (seccomp, "enabled")));
  assert_int_equal (json_array_size (known), 4);
  assert_true (json_array_size (supported) <= json_array_size (known));
  assert_true (json_is_false (json_object_get (json_object_get (linux_section, "apparmor"), "enabled")));
  assert_true (json_is_false (json_object_get (json_object_get (linux_section, "selinux"), "enabled")));
  assert_true (json_is_false (json_object_get (json_object_get (linux_section, "intelRdt"), "enabled")));
  /* As the kernel can idmap the root filesystem (see husk/idmap.h). */
  assert_true (json_is_boolean (json_object_get (
      json_object_get (json_object_get (linux_section, "mountExtensions"), "idmap"), "enabled")));
  assert_int_equal (
      json_is_true (json_object_get (
          json_object_get (json_object_get (linux_section, "mountExtensions"), "idmap"), "enabled")),
      husk_idmap_supported ("/"));
  assert_true (json_is_string (
      json_object_get (json_object_get (features, "annotations"), "io.github.seccomp.libseccomp.version")));
  /* The oomScoreAdj deviation is stated, and whether it applies to us. */
  assert_non_null (strstr (
      json_string_value (json_object_get (json_object_get (features, "annotations"), "io.husk.oomScoreAdj"))
          ?: "",
      "keeps the current value"));
  {
    cap_t caps = cap_get_proc ();
    cap_flag_value_t held = CAP_CLEAR;
    cap_get_flag (caps, CAP_SYS_RESOURCE, CAP_EFFECTIVE, &held);
    cap_free (caps);
    assert_string_equal (json_string_value (json_object_get (json_object_get (features, "annotations"),
                                                             "io.husk.oomScoreAdj.canLower")),
                         held == CAP_SET ? "true" : "false");
  }
}

/* Everything the features document claims must be accepted by the parser. */
static void
test_features_match_parser (void **state)
{
  json_auto_t *features = load_features ();
  json_t *linux_section = json_object_get (features, "linux");
  json_t *seccomp = json_object_get (linux_section, "seccomp");
  size_t i;
  json_t *item;

  json_array_foreach (json_object_get (features, "mountOptions"), i, item)
  {
    const char *options[] = { json_string_value (item), NULL };
    struct spec_mount mount;

    parse_options (&mount, NULL, options);
    if (mount.data != NULL)
      fail_msg ("mount option %s is listed but not understood", options[0]);
    mount_clear (&mount);
  }
  json_array_foreach (json_object_get (linux_section, "capabilities"), i, item)
      assert_int_equal (spec_capability_from_name (json_string_value (item)), i);
  json_array_foreach (json_object_get (features, "hooks"), i, item)
  {
    cleanup_free char *body = xasprintf ("'hooks': {'%s': [{'path': '/h'}]}", json_string_value (item));
    struct spec *spec = parse_ok (body);
    assert_int_equal (spec->hooks.count[i], 1);
    spec_free (spec);
  }
  json_array_foreach (json_object_get (seccomp, "actions"), i, item)
  {
    cleanup_free char *body = xasprintf ("{'defaultAction': '%s'}", json_string_value (item));
    parse_default_action (body);
  }
  json_array_foreach (json_object_get (seccomp, "archs"), i, item)
  {
    cleanup_free char *body = xasprintf ("{'defaultAction': 'SCMP_ACT_ALLOW', 'architectures': ['%s']}",
                                         json_string_value (item));
    parse_default_action (body);
  }
  json_array_foreach (json_object_get (seccomp, "knownFlags"), i, item)
  {
    cleanup_free char *body
        = xasprintf ("{'defaultAction': 'SCMP_ACT_ALLOW', 'flags': ['%s']}", json_string_value (item));
    parse_default_action (body);
  }
  json_array_foreach (json_object_get (linux_section, "namespaces"), i, item)
      assert_string_equal (json_string_value (item), spec_ns_name ((enum spec_ns_type) i));
  assert_true (json_array_size (json_object_get (seccomp, "archs")) >= 16);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_full_config_process),
    cmocka_unit_test (test_full_config_rest),
    cmocka_unit_test (test_full_config_linux),
    cmocka_unit_test (test_minimal_config),
    cmocka_unit_test (test_malformed_json),
    cmocka_unit_test (test_oci_version),
    cmocka_unit_test (test_root),
    cmocka_unit_test (test_process_errors),
    cmocka_unit_test (test_process_defaults),
    cmocka_unit_test (test_capabilities),
    cmocka_unit_test (test_capability_names),
    cmocka_unit_test (test_rlimits),
    cmocka_unit_test (test_rlimit_infinity),
    cmocka_unit_test (test_mount_option_table),
    cmocka_unit_test (test_mount_option_negations),
    cmocka_unit_test (test_mount_option_propagation),
    cmocka_unit_test (test_mount_option_bind_rro_data),
    cmocka_unit_test (test_mount_option_recursive),
    cmocka_unit_test (test_mount_idmapped),
    cmocka_unit_test (test_mounts),
    cmocka_unit_test (test_hooks),
    cmocka_unit_test (test_annotations),
    cmocka_unit_test (test_unknown_fields_and_null),
    cmocka_unit_test (test_namespaces),
    cmocka_unit_test (test_user_namespace_mappings),
    cmocka_unit_test (test_devices),
    cmocka_unit_test (test_cgroups_path),
    cmocka_unit_test (test_resources),
    cmocka_unit_test (test_rootfs_propagation),
    cmocka_unit_test (test_paths_and_sysctl),
    cmocka_unit_test (test_seccomp_actions),
    cmocka_unit_test (test_seccomp_rules),
    cmocka_unit_test (test_seccomp_ops),
    cmocka_unit_test (test_seccomp_archs_and_flags),
    cmocka_unit_test (test_time_offsets),
    cmocka_unit_test (test_spec_load),
    cmocka_unit_test (test_spec_parse_process),
    cmocka_unit_test (test_default_spec),
    cmocka_unit_test (test_default_spec_rootless),
    cmocka_unit_test (test_features_document),
    cmocka_unit_test (test_features_match_parser),
  };

  return cmocka_run_group_tests (tests, setup_bundle, teardown_bundle);
}
