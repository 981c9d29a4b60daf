/* Unit tests for cri_spec: each CRI ContainerConfig area mapped to OCI
 * config JSON, and each bad input refused with a message naming the CRI
 * field; and for the container store that keeps the records of what it
 * built.  Needs no root: temp dirs only. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

/* The Makefile builds this with -I$(BUILD)/gen -Ulinux (the generated
 * header has fields named `linux`, which GNU C predefines). */
#include "cri/proto/api.pb-c.h"

#include "husk/cleanup.h"
#include "husk/util.h"
#include "cri/container/container_store.h"
#include "cri/spec/cri_spec.h"
#include "cri/spec/seccomp_default.h"
#include "cri/spec/userns.h"
#include "runtime/security.h"
#include "runtime/spec/spec.h"

#define ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

struct fixture
{
  char dir[64]; /* rootfs and host files */
  char *rootfs;
  char *host_dir;
  struct image_config image;
  Runtime__V1__ContainerConfig config;
  Runtime__V1__LinuxContainerConfig linux_config;
  Runtime__V1__LinuxContainerSecurityContext sc;
  struct cri_spec_input in;
  json_t *spec;
  struct husk_error *err;
};

static char *image_env[] = { "PATH=/bin", "A=1", "B=2", NULL };
static char *image_entrypoint[] = { "/ep", NULL };
static char *image_cmd[] = { "c1", "c2", NULL };

static int
write_text (const char *path, const char *text)
{
  struct husk_error *err = NULL;
  int ret = husk_write_file_replace (path, text, strlen (text), 0644, &err);

  husk_error_free (&err);
  return ret;
}

static int
setup (void **state)
{
  struct fixture *f = xcalloc (1, sizeof *f);
  struct husk_error *err = NULL;
  cleanup_free char *etc = NULL, *passwd = NULL, *group = NULL;

  strcpy (f->dir, "/tmp/test_cri_spec.XXXXXX");
  assert_non_null (mkdtemp (f->dir));
  f->rootfs = xasprintf ("%s/rootfs", f->dir);
  f->host_dir = xasprintf ("%s/host", f->dir);
  etc = xasprintf ("%s/etc", f->rootfs);
  assert_int_equal (husk_mkdir_p (etc, 0755, &err), 0);
  assert_int_equal (husk_mkdir_p (f->host_dir, 0755, &err), 0);
  passwd = xasprintf ("%s/passwd", etc);
  group = xasprintf ("%s/group", etc);
  assert_int_equal (
      write_text (passwd, "root:x:0:0::/root:/bin/sh\nalice:x:1001:1002::/home/alice:/bin/sh\n"), 0);
  assert_int_equal (write_text (group, "root:x:0:\nstaff:x:50:alice\n"), 0);

  f->image.env = image_env;
  f->image.entrypoint = image_entrypoint;
  f->image.cmd = image_cmd;
  f->image.working_dir = "/image-wd";
  runtime__v1__container_config__init (&f->config);
  runtime__v1__linux_container_config__init (&f->linux_config);
  runtime__v1__linux_container_security_context__init (&f->sc);
  f->linux_config.security_context = &f->sc;
  f->config.linux = &f->linux_config;
  f->in = (struct cri_spec_input){
    .container_id = ID,
    .config = &f->config,
    .sandbox = {
      .id = "sandbox1",
      .hostname = "pod-host",
      .netns_path = "/run/husk/sb/net",
      .ipcns_path = "/run/husk/sb/ipc",
      .utsns_path = "/run/husk/sb/uts",
      .hosts_path = "/sb/hosts",
      .hostname_path = "/sb/hostname",
      .resolv_conf_path = "/sb/resolv.conf",
    },
    .image = &f->image,
    .image_name = "docker.io/library/busybox:latest",
    .rootfs = f->rootfs,
  };
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *f = *state;
  struct husk_error *err = NULL;

  husk_rm_rf (f->dir, &err);
  husk_error_free (&err);
  husk_error_free (&f->err);
  json_decref (f->spec);
  free (f->rootfs);
  free (f->host_dir);
  free (f);
  return 0;
}

static json_t *
build_ok (struct fixture *f)
{
  json_decref (f->spec);
  f->spec = NULL;
  if (cri_spec_build (&f->in, &f->spec, &f->err) < 0)
    fail_msg ("cri_spec_build: %s", f->err->msg);
  return f->spec;
}

/* Expects a failure with ERRNUM whose message contains FIELD. */
static void
build_fails (struct fixture *f, int errnum, const char *field)
{
  json_t *spec = NULL;

  husk_error_free (&f->err);
  assert_int_equal (cri_spec_build (&f->in, &spec, &f->err), -1);
  assert_null (spec);
  assert_non_null (f->err);
  if (strstr (f->err->msg, field) == NULL)
    fail_msg ("`%s` does not name `%s`", f->err->msg, field);
  assert_int_equal (f->err->errnum, errnum);
}

static json_t *
at (json_t *root, const char *path)
{
  cleanup_free char *copy = xstrdup (path);
  char *save = NULL;

  for (char *key = strtok_r (copy, ".", &save); key && root; key = strtok_r (NULL, ".", &save))
    root
        = json_is_array (root) ? json_array_get (root, strtoul (key, NULL, 10)) : json_object_get (root, key);
  return root;
}

static const char *
str_at (json_t *root, const char *path)
{
  return json_string_value (at (root, path));
}

static bool
array_has (json_t *array, const char *value)
{
  size_t i;
  json_t *item;

  json_array_foreach (array, i, item) if (strcmp (json_string_value (item) ?: "", value) == 0) return true;
  return false;
}

static json_t *
mount_at (json_t *spec, const char *destination)
{
  size_t i;
  json_t *m;

  json_array_foreach (json_object_get (spec, "mounts"), i,
                      m) if (strcmp (str_at (m, "destination"), destination) == 0) return m;
  return NULL;
}

static json_t *
namespace_of (json_t *spec, const char *type)
{
  size_t i;
  json_t *ns;

  json_array_foreach (at (spec, "linux.namespaces"), i,
                      ns) if (strcmp (str_at (ns, "type"), type) == 0) return ns;
  return NULL;
}

static void
assert_args (json_t *spec, const char *const *expected)
{
  json_t *args = at (spec, "process.args");
  size_t n = 0;

  for (; expected[n]; n++)
    assert_string_equal (json_string_value (json_array_get (args, n)), expected[n]);
  assert_int_equal (json_array_size (args), n);
}

static void
test_command_and_args (void **state)
{
  struct fixture *f = *state;
  char *command[] = { "/bin/x" }, *args[] = { "a1" };

  assert_args (build_ok (f), (const char *[]){ "/ep", "c1", "c2", NULL });
  f->config.n_args = 1, f->config.args = args;
  assert_args (build_ok (f), (const char *[]){ "/ep", "a1", NULL });
  f->config.n_command = 1, f->config.command = command;
  assert_args (build_ok (f), (const char *[]){ "/bin/x", "a1", NULL });
  f->config.n_args = 0, f->config.args = NULL;
  /* kubelet: a command alone drops the image's Cmd. */
  assert_args (build_ok (f), (const char *[]){ "/bin/x", NULL });

  f->config.n_command = 0, f->image.entrypoint = NULL, f->image.cmd = NULL;
  build_fails (f, EINVAL, "no command");
}

static void
test_working_dir_and_env (void **state)
{
  struct fixture *f = *state;
  Runtime__V1__KeyValue b = RUNTIME__V1__KEY_VALUE__INIT, c = RUNTIME__V1__KEY_VALUE__INIT;
  Runtime__V1__KeyValue *envs[] = { &b, &c };
  json_t *env;

  assert_string_equal (str_at (build_ok (f), "process.cwd"), "/image-wd");
  f->config.working_dir = "/work";
  b.key = "B", b.value = "3", c.key = "C", c.value = "x=y";
  f->config.n_envs = 2, f->config.envs = envs;
  build_ok (f);
  assert_string_equal (str_at (f->spec, "process.cwd"), "/work");
  env = at (f->spec, "process.env");
  assert_true (array_has (env, "A=1"));
  assert_true (array_has (env, "B=3"));
  assert_false (array_has (env, "B=2"));
  assert_true (array_has (env, "C=x=y"));
  assert_true (array_has (env, "HOSTNAME=pod-host"));
  assert_true (array_has (env, "PATH=/bin"));
}

static void
test_mounts (void **state)
{
  struct fixture *f = *state;
  Runtime__V1__Mount data = RUNTIME__V1__MOUNT__INIT, sub = RUNTIME__V1__MOUNT__INIT,
                     hosts = RUNTIME__V1__MOUNT__INIT;
  Runtime__V1__Mount *mounts[] = { &sub, &data, &hosts };
  cleanup_free char *sub_dir = xasprintf ("%s/sub", f->host_dir);
  struct husk_error *err = NULL;
  json_t *m, *list;
  size_t i_data = 0, i_sub = 0, i;

  assert_int_equal (husk_mkdir_p (sub_dir, 0755, &err), 0);
  data.host_path = f->host_dir, data.container_path = "/data", data.readonly = true;
  data.propagation = RUNTIME__V1__MOUNT_PROPAGATION__PROPAGATION_HOST_TO_CONTAINER;
  sub.host_path = sub_dir, sub.container_path = "/data/sub";
  sub.propagation = RUNTIME__V1__MOUNT_PROPAGATION__PROPAGATION_BIDIRECTIONAL;
  hosts.host_path = f->host_dir, hosts.container_path = "/etc/hosts";
  f->config.n_mounts = 3, f->config.mounts = mounts;
  build_ok (f);

  m = mount_at (f->spec, "/data");
  assert_non_null (m);
  assert_string_equal (str_at (m, "type"), "bind");
  assert_string_equal (str_at (m, "source"), f->host_dir);
  assert_true (array_has (at (m, "options"), "rbind"));
  assert_true (array_has (at (m, "options"), "rslave"));
  assert_true (array_has (at (m, "options"), "ro"));
  m = mount_at (f->spec, "/data/sub");
  assert_true (array_has (at (m, "options"), "rshared"));
  assert_true (array_has (at (m, "options"), "rw"));
  assert_string_equal (str_at (f->spec, "linux.rootfsPropagation"), "rshared");
  /* Parents first, whatever the order of the request. */
  list = json_object_get (f->spec, "mounts");
  json_array_foreach (list, i, m)
  {
    if (strcmp (str_at (m, "destination"), "/data") == 0)
      i_data = i;
    if (strcmp (str_at (m, "destination"), "/data/sub") == 0)
      i_sub = i;
  }
  assert_true (i_data < i_sub);
  /* The user's /etc/hosts replaces the sandbox's. */
  assert_string_equal (str_at (mount_at (f->spec, "/etc/hosts"), "source"), f->host_dir);
  assert_string_equal (str_at (mount_at (f->spec, "/etc/resolv.conf"), "source"), "/sb/resolv.conf");
  assert_string_equal (str_at (mount_at (f->spec, "/etc/hostname"), "source"), "/sb/hostname");

  sub.host_path = "/nonexistent/husk-test";
  build_fails (f, ENOENT, "mounts[0].host_path");
  sub.host_path = sub_dir, data.container_path = "relative";
  build_fails (f, EINVAL, "mounts[1].container_path");
}

static void
test_sandbox_files_readonly_rootfs (void **state)
{
  struct fixture *f = *state;

  build_ok (f);
  assert_false (json_is_true (at (f->spec, "root.readonly")));
  assert_true (array_has (at (mount_at (f->spec, "/etc/hosts"), "options"), "rw"));
  f->sc.readonly_rootfs = true;
  build_ok (f);
  assert_true (json_is_true (at (f->spec, "root.readonly")));
  assert_string_equal (str_at (f->spec, "root.path"), f->rootfs);
  assert_true (array_has (at (mount_at (f->spec, "/etc/hosts"), "options"), "ro"));
  assert_non_null (mount_at (f->spec, "/dev/shm"));
}

static void
test_pod_shm (void **state)
{
  struct fixture *f = *state;
  size_t n_shm = 0, i;
  json_t *m;

  build_ok (f);
  assert_string_equal (str_at (mount_at (f->spec, "/dev/shm"), "type"), "tmpfs");
  f->in.sandbox.shm_path = "/run/husk/sb/shm";
  f->sc.readonly_rootfs = true;
  build_ok (f);
  /* The pod's tmpfs replaces the container's own, and stays writable. */
  json_array_foreach (json_object_get (f->spec, "mounts"), i, m) n_shm
      += strcmp (json_string_value (json_object_get (m, "destination")), "/dev/shm") == 0;
  assert_int_equal (n_shm, 1);
  assert_string_equal (str_at (mount_at (f->spec, "/dev/shm"), "type"), "bind");
  assert_string_equal (str_at (mount_at (f->spec, "/dev/shm"), "source"), "/run/husk/sb/shm");
  assert_true (array_has (at (mount_at (f->spec, "/dev/shm"), "options"), "rw"));
  assert_true (array_has (at (mount_at (f->spec, "/dev/shm"), "options"), "noexec"));
}

static void
test_update_resources (void **state)
{
  Runtime__V1__LinuxContainerResources res = RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT;
  json_t *empty = cri_spec_resources (NULL), *json;

  assert_int_equal (json_object_size (empty), 0);
  json_decref (empty);
  res.cpu_shares = 256, res.memory_swap_limit_in_bytes = 1 << 20;
  json = cri_spec_resources (&res);
  assert_int_equal (json_integer_value (at (json, "cpu.shares")), 256);
  assert_int_equal (json_integer_value (at (json, "memory.swap")), 1 << 20);
  assert_null (at (json, "memory.limit"));
  assert_null (at (json, "devices"));
  json_decref (json);
}

static void
test_devices (void **state)
{
  struct fixture *f = *state;
  Runtime__V1__Device dev = RUNTIME__V1__DEVICE__INIT;
  Runtime__V1__Device *devices[] = { &dev };
  json_t *d, *rules, *rule;

  dev.host_path = "/dev/null", dev.container_path = "/dev/xnull", dev.permissions = "rw";
  f->config.n_devices = 1, f->config.devices = devices;
  build_ok (f);
  d = at (f->spec, "linux.devices.0");
  assert_string_equal (str_at (d, "path"), "/dev/xnull");
  assert_string_equal (str_at (d, "type"), "c");
  assert_int_equal (json_integer_value (at (d, "major")), 1);
  assert_int_equal (json_integer_value (at (d, "minor")), 3);
  rules = at (f->spec, "linux.resources.devices");
  assert_false (json_is_true (at (rules, "0.allow"))); /* the default deny stays first */
  rule = json_array_get (rules, json_array_size (rules) - 1);
  assert_true (json_is_true (at (rule, "allow")));
  assert_string_equal (str_at (rule, "access"), "rw");
  assert_int_equal (json_integer_value (at (rule, "minor")), 3);

  dev.permissions = "rwx";
  build_fails (f, EINVAL, "devices[0].permissions");
  dev.permissions = "", dev.host_path = f->host_dir;
  build_fails (f, EINVAL, "devices[0].host_path"); /* a directory without device nodes */

  /* A directory: every node under it, symlinks inside not followed. */
  {
    cleanup_free char *grp = xasprintf ("%s/devgrp", f->dir);
    cleanup_free char *sub = xasprintf ("%s/sub", grp);
    cleanup_free char *node = xasprintf ("%s/card0", sub);
    cleanup_free char *link = xasprintf ("%s/alias", grp);
    struct husk_error *err = NULL;

    assert_int_equal (husk_mkdir_p (sub, 0755, &err), 0);
    assert_int_equal (mknod (node, S_IFCHR | 0660, makedev (1, 3)), 0);
    assert_int_equal (chmod (node, 0660), 0); /* whatever the umask */
    assert_int_equal (symlink ("/dev/zero", link), 0);
    dev.host_path = grp, dev.container_path = "/dev/grp";
    build_ok (f);
    d = json_array_get (at (f->spec, "linux.devices"), 0);
    assert_int_equal (json_array_size (at (f->spec, "linux.devices")), 1);
    assert_string_equal (str_at (d, "path"), "/dev/grp/sub/card0");
    assert_int_equal (json_integer_value (at (d, "minor")), 3);
    assert_int_equal (json_integer_value (at (d, "fileMode")), 0660);
    rule = json_array_get (at (f->spec, "linux.resources.devices"),
                           json_array_size (at (f->spec, "linux.resources.devices")) - 1);
    assert_string_equal (str_at (rule, "access"), "rwm");
  }
  dev.host_path = "/dev/husk-nonexistent";
  build_fails (f, ENOENT, "devices[0].host_path");
  dev.host_path = "/dev/null", dev.container_path = "xnull";
  build_fails (f, EINVAL, "devices[0].container_path");
}

static void
test_privileged (void **state)
{
  struct fixture *f = *state;
  Runtime__V1__SecurityProfile seccomp = RUNTIME__V1__SECURITY_PROFILE__INIT;
  json_t *rules;

  seccomp.profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault;
  f->sc.seccomp = &seccomp;
  f->sc.privileged = true;
  build_ok (f);
  assert_true (array_has (at (f->spec, "process.capabilities.bounding"), "CAP_SYS_ADMIN"));
  assert_true (array_has (at (f->spec, "process.capabilities.effective"), "CAP_SYS_MODULE"));
  assert_int_equal (json_array_size (at (f->spec, "linux.maskedPaths")), 0);
  assert_int_equal (json_array_size (at (f->spec, "linux.readonlyPaths")), 0);
  assert_null (at (f->spec, "linux.seccomp"));
  rules = at (f->spec, "linux.resources.devices");
  assert_int_equal (json_array_size (rules), 1);
  assert_true (json_is_true (at (rules, "0.allow")));
  assert_null (at (rules, "0.type"));
  assert_true (array_has (at (mount_at (f->spec, "/sys"), "options"), "rw"));
  assert_false (array_has (at (mount_at (f->spec, "/sys"), "options"), "ro"));
}

static void
test_capabilities (void **state)
{
  struct fixture *f = *state;
  Runtime__V1__Capability caps = RUNTIME__V1__CAPABILITY__INIT;
  char *add[] = { "NET_ADMIN", "cap_sys_time" }, *drop[] = { "chown" }, *all[] = { "ALL" },
       *bind[] = { "CAP_NET_BIND_SERVICE" }, *bogus[] = { "CAP_FLY" };
  json_t *eff;

  eff = at (build_ok (f), "process.capabilities.effective");
  assert_true (array_has (eff, "CAP_CHOWN"));
  assert_false (array_has (eff, "CAP_NET_ADMIN"));

  f->sc.capabilities = &caps;
  caps.n_add_capabilities = 2, caps.add_capabilities = add;
  caps.n_drop_capabilities = 1, caps.drop_capabilities = drop;
  eff = at (build_ok (f), "process.capabilities.effective");
  assert_true (array_has (eff, "CAP_NET_ADMIN"));
  assert_true (array_has (eff, "CAP_SYS_TIME"));
  assert_true (array_has (eff, "CAP_KILL"));
  assert_false (array_has (eff, "CAP_CHOWN"));
  assert_true (array_has (at (f->spec, "process.capabilities.bounding"), "CAP_NET_ADMIN"));

  caps.n_add_capabilities = 1, caps.add_capabilities = bind;
  caps.n_drop_capabilities = 1, caps.drop_capabilities = all;
  eff = at (build_ok (f), "process.capabilities.effective");
  assert_int_equal (json_array_size (eff), 1);
  assert_true (array_has (eff, "CAP_NET_BIND_SERVICE"));

  caps.n_add_capabilities = 0;
  assert_int_equal (json_array_size (at (build_ok (f), "process.capabilities.bounding")), 0);

  caps.n_add_capabilities = 1, caps.add_capabilities = all;
  caps.n_drop_capabilities = 1, caps.drop_capabilities = drop;
  eff = at (build_ok (f), "process.capabilities.effective");
  assert_true (array_has (eff, "CAP_SYS_ADMIN"));
  assert_false (array_has (eff, "CAP_CHOWN"));

  caps.n_add_capabilities = 1, caps.add_capabilities = bogus;
  build_fails (f, EINVAL, "capabilities.add_capabilities[0]");
  caps.n_add_capabilities = 0, caps.n_drop_capabilities = 1, caps.drop_capabilities = bogus;
  build_fails (f, EINVAL, "capabilities.drop_capabilities[0]");
}

static void
test_users (void **state)
{
  struct fixture *f = *state;
  Runtime__V1__Int64Value uid = RUNTIME__V1__INT64_VALUE__INIT, gid = RUNTIME__V1__INT64_VALUE__INIT;
  int64_t groups[] = { 7, 50, 7 };

  assert_int_equal (json_integer_value (at (build_ok (f), "process.user.uid")), 0);
  uid.value = 1000;
  f->sc.run_as_user = &uid;
  build_ok (f);
  assert_int_equal (json_integer_value (at (f->spec, "process.user.uid")), 1000);
  assert_int_equal (json_integer_value (at (f->spec, "process.user.gid")), 0);
  gid.value = 2000;
  f->sc.run_as_group = &gid;
  f->sc.n_supplemental_groups = 3, f->sc.supplemental_groups = groups;
  build_ok (f);
  assert_int_equal (json_integer_value (at (f->spec, "process.user.gid")), 2000);
  assert_int_equal (json_array_size (at (f->spec, "process.user.additionalGids")), 2);
  assert_int_equal (json_integer_value (at (f->spec, "process.user.additionalGids.0")), 7);

  f->sc.run_as_user = NULL, f->sc.run_as_group = NULL, f->sc.n_supplemental_groups = 0;
  f->sc.run_as_username = "alice";
  build_ok (f);
  assert_int_equal (json_integer_value (at (f->spec, "process.user.uid")), 1001);
  assert_int_equal (json_integer_value (at (f->spec, "process.user.gid")), 1002);
  assert_int_equal (json_integer_value (at (f->spec, "process.user.additionalGids.0")), 50);

  f->sc.run_as_username = "bob";
  build_fails (f, EINVAL, "run_as_username");
  f->sc.run_as_username = "";
  f->sc.run_as_group = &gid;
  build_fails (f, EINVAL, "linux.security_context.run_as_group");
  uid.value = -1;
  f->sc.run_as_user = &uid;
  build_fails (f, EINVAL, "linux.security_context.run_as_user");
}

static void
test_paths_and_no_new_privs (void **state)
{
  struct fixture *f = *state;
  char *masked[] = { "/proc/x" }, *readonly[] = { "/proc/y", "rel" };

  build_ok (f);
  assert_true (array_has (at (f->spec, "linux.maskedPaths"), "/proc/kcore"));
  assert_true (array_has (at (f->spec, "linux.readonlyPaths"), "/proc/sys"));
  assert_false (json_is_true (at (f->spec, "process.noNewPrivileges")));
  f->sc.no_new_privs = true;
  f->sc.n_masked_paths = 1, f->sc.masked_paths = masked;
  f->sc.n_readonly_paths = 1, f->sc.readonly_paths = readonly;
  build_ok (f);
  assert_true (json_is_true (at (f->spec, "process.noNewPrivileges")));
  assert_int_equal (json_array_size (at (f->spec, "linux.maskedPaths")), 1);
  assert_string_equal (str_at (f->spec, "linux.maskedPaths.0"), "/proc/x");
  assert_string_equal (str_at (f->spec, "linux.readonlyPaths.0"), "/proc/y");
  f->sc.n_readonly_paths = 2;
  build_fails (f, EINVAL, "readonly_paths[1]");
}

static void
test_namespaces (void **state)
{
  struct fixture *f = *state;
  Runtime__V1__NamespaceOption ns = RUNTIME__V1__NAMESPACE_OPTION__INIT;

  build_ok (f);
  assert_string_equal (str_at (namespace_of (f->spec, "network"), "path"), "/run/husk/sb/net");
  assert_string_equal (str_at (namespace_of (f->spec, "ipc"), "path"), "/run/husk/sb/ipc");
  assert_string_equal (str_at (namespace_of (f->spec, "uts"), "path"), "/run/husk/sb/uts");
  assert_string_equal (str_at (f->spec, "hostname"), "pod-host");
  assert_non_null (namespace_of (f->spec, "pid"));
  assert_null (at (namespace_of (f->spec, "pid"), "path"));
  assert_non_null (namespace_of (f->spec, "mount"));

  f->sc.namespace_options = &ns;
  ns.pid = RUNTIME__V1__NAMESPACE_MODE__POD;
  f->in.sandbox.pidns_path = "/proc/42/ns/pid";
  assert_string_equal (str_at (namespace_of (build_ok (f), "pid"), "path"), "/proc/42/ns/pid");
  ns.pid = RUNTIME__V1__NAMESPACE_MODE__CONTAINER;
  assert_null (at (namespace_of (build_ok (f), "pid"), "path"));
  ns.pid = RUNTIME__V1__NAMESPACE_MODE__NODE;
  assert_null (namespace_of (build_ok (f), "pid"));
  ns.pid = RUNTIME__V1__NAMESPACE_MODE__TARGET;
  ns.target_id = "other";
  build_fails (f, EINVAL, "namespace_options.target_id");
  f->in.target_pidns_path = "/proc/43/ns/pid";
  assert_string_equal (str_at (namespace_of (build_ok (f), "pid"), "path"), "/proc/43/ns/pid");

  /* A host-network pod: no namespace of its own, and no hostname that
   * would rename the node. */
  f->in.sandbox.netns_path = f->in.sandbox.utsns_path = f->in.sandbox.ipcns_path = NULL;
  build_ok (f);
  assert_null (namespace_of (f->spec, "network"));
  assert_null (namespace_of (f->spec, "uts"));
  assert_null (namespace_of (f->spec, "ipc"));
  assert_null (at (f->spec, "hostname"));
  assert_false (array_has (at (f->spec, "process.env"), "HOSTNAME=pod-host"));
}

/* kubelet's userns_options as the tests build them: one mapping each. */
struct userns_msg
{
  Runtime__V1__UserNamespace msg;
  Runtime__V1__IDMapping uid, gid;
  Runtime__V1__IDMapping *uids[2], *gids[2];
};

static void
userns_msg_init (struct userns_msg *u, uint32_t host_id)
{
  *u = (struct userns_msg){ .msg = RUNTIME__V1__USER_NAMESPACE__INIT };
  u->uid = (Runtime__V1__IDMapping) RUNTIME__V1__IDMAPPING__INIT;
  u->uid.host_id = host_id, u->uid.container_id = 0, u->uid.length = 65536;
  u->gid = u->uid;
  u->uids[0] = &u->uid, u->gids[0] = &u->gid;
  u->msg.mode = RUNTIME__V1__NAMESPACE_MODE__POD;
  u->msg.n_uids = 1, u->msg.uids = u->uids;
  u->msg.n_gids = 1, u->msg.gids = u->gids;
}

static void
expect_userns_error (const Runtime__V1__UserNamespace *msg, const char *message)
{
  struct cri_userns parsed;
  struct husk_error *err = NULL;

  assert_int_equal (cri_userns_parse (msg, "u", &parsed, &err), -1);
  if (strstr (err->msg, message) == NULL)
    fail_msg ("`%s` does not say `%s`", err->msg, message);
  assert_int_equal (err->errnum, EINVAL);
  husk_error_free (&err);
}

static void
test_userns_parse (void **state)
{
  struct userns_msg u;
  Runtime__V1__IDMapping second = RUNTIME__V1__IDMAPPING__INIT;
  struct cri_userns parsed;
  struct husk_error *err = NULL;

  (void) state;
  assert_int_equal (cri_userns_parse (NULL, "u", &parsed, &err), 0);
  assert_false (parsed.pod);
  assert_int_equal (cri_userns_root_uid (&parsed), 0);

  userns_msg_init (&u, 65536);
  assert_int_equal (cri_userns_parse (&u.msg, "u", &parsed, &err), 0);
  assert_true (parsed.pod);
  assert_int_equal (parsed.n_uids, 1);
  assert_int_equal (parsed.uids[0].host_id, 65536);
  assert_int_equal (parsed.uids[0].size, 65536);
  assert_int_equal (cri_userns_root_uid (&parsed), 65536);
  assert_int_equal (cri_userns_root_gid (&parsed), 65536);

  /* Two ranges, root in the second: fine. */
  second.host_id = 10 * 65536, second.container_id = 65536, second.length = 1000;
  u.uids[0] = &second, u.uids[1] = &u.uid, u.msg.n_uids = 2;
  assert_int_equal (cri_userns_parse (&u.msg, "u", &parsed, &err), 0);
  assert_int_equal (cri_userns_root_uid (&parsed), 65536);
  second.host_id = 65536 + 65535; /* one id into the first range's host ids */
  expect_userns_error (&u.msg, "u.uids[1]: host_id 65536 (length 65536) overlaps uids[0]");
  second.host_id = 10 * 65536, second.container_id = 100;
  expect_userns_error (&u.msg, "u.uids[1]: container_id 0 (length 65536) overlaps uids[0]");

  userns_msg_init (&u, 65536);
  u.msg.n_uids = 0;
  expect_userns_error (&u.msg, "u.uids: required for mode POD");
  userns_msg_init (&u, 65536);
  u.msg.n_gids = 0;
  expect_userns_error (&u.msg, "u.gids: required for mode POD");
  userns_msg_init (&u, 0);
  expect_userns_error (&u.msg, "u.uids[0]: host_id 0 is below 65536");
  userns_msg_init (&u, 65536);
  u.gid.length = 0;
  expect_userns_error (&u.msg, "u.gids[0].length: must not be 0");
  userns_msg_init (&u, 0xFFFF0000u);
  expect_userns_error (&u.msg, "pass 2^32-1");
  userns_msg_init (&u, 65536);
  u.uid.container_id = 1;
  expect_userns_error (&u.msg, "u.uids: container_id 0 (the pod's root) is not mapped");
  userns_msg_init (&u, 65536);
  u.msg.mode = RUNTIME__V1__NAMESPACE_MODE__NODE;
  expect_userns_error (&u.msg, "u.uids: must be empty for mode NODE");
  u.msg.n_uids = u.msg.n_gids = 0;
  assert_int_equal (cri_userns_parse (&u.msg, "u", &parsed, &err), 0);
  assert_false (parsed.pod);
  u.msg.mode = RUNTIME__V1__NAMESPACE_MODE__TARGET;
  expect_userns_error (&u.msg, "u.mode: TARGET (3) is not supported");
}

/* A container of a pod with a user namespace joins it (and gets a cgroup
 * namespace of its own, owned by it); userns_options other than the pod's
 * are refused; kubelet's volume idmappings become OCI mount mappings. */
static void
test_userns_spec (void **state)
{
  struct fixture *f = *state;
  Runtime__V1__NamespaceOption ns = RUNTIME__V1__NAMESPACE_OPTION__INIT;
  struct userns_msg pod_msg, other;
  struct cri_userns pod;
  struct husk_error *err = NULL;
  Runtime__V1__Mount vol = RUNTIME__V1__MOUNT__INIT;
  Runtime__V1__Mount *mounts[] = { &vol };
  json_t *m;

  build_ok (f);
  assert_null (namespace_of (f->spec, "user"));

  userns_msg_init (&pod_msg, 3 * 65536);
  assert_int_equal (cri_userns_parse (&pod_msg.msg, "u", &pod, &err), 0);
  f->in.sandbox.userns = &pod;
  f->in.sandbox.userns_path = "/run/husk/sb/user";
  build_ok (f);
  assert_string_equal (str_at (namespace_of (f->spec, "user"), "path"), "/run/husk/sb/user");
  assert_non_null (namespace_of (f->spec, "cgroup"));
  assert_null (at (namespace_of (f->spec, "cgroup"), "path"));
  assert_null (at (f->spec, "linux.uidMappings"));

  /* The same options as the pod's: fine; others: refused. */
  f->sc.namespace_options = &ns;
  ns.userns_options = &pod_msg.msg;
  build_ok (f);
  userns_msg_init (&other, 4 * 65536);
  ns.userns_options = &other.msg;
  build_fails (f, EINVAL, "linux.security_context.namespace_options.userns_options: differs from the pod's");
  other.uid.length = 0;
  build_fails (f, EINVAL, "userns_options.uids[0].length");
  ns.userns_options = NULL;

  /* kubelet's volume idmappings. */
  vol.host_path = f->host_dir, vol.container_path = "/vol";
  vol.n_uidmappings = 1, vol.uidmappings = pod_msg.uids;
  vol.n_gidmappings = 1, vol.gidmappings = pod_msg.gids;
  f->config.n_mounts = 1, f->config.mounts = mounts;
  m = mount_at (build_ok (f), "/vol");
  assert_int_equal (json_integer_value (at (m, "uidMappings.0.hostID")), 3 * 65536);
  assert_int_equal (json_integer_value (at (m, "uidMappings.0.containerID")), 0);
  assert_int_equal (json_integer_value (at (m, "uidMappings.0.size")), 65536);
  assert_int_equal (json_integer_value (at (m, "gidMappings.0.hostID")), 3 * 65536);
  vol.n_gidmappings = 0;
  build_fails (f, EINVAL, "mounts[0].gidMappings: required with uidMappings");
  vol.n_gidmappings = 1;
  pod_msg.gid.length = 0;
  build_fails (f, EINVAL, "mounts[0].gidMappings[0].length: must not be 0");
}

/* The first rule of linux.seccomp that names SYSCALL, or NULL. */
static json_t *
rule_for (json_t *spec, const char *syscall)
{
  json_t *rules = at (spec, "linux.seccomp.syscalls"), *rule;
  size_t i;

  json_array_foreach (rules, i, rule)
  {
    if (array_has (json_object_get (rule, "names"), syscall))
      return rule;
  }
  return NULL;
}

static bool
profile_allows_plainly (json_t *spec, const char *syscall)
{
  json_t *rule = rule_for (spec, syscall);

  return rule && strcmp (json_string_value (json_object_get (rule, "action")), "SCMP_ACT_ALLOW") == 0
         && json_object_get (rule, "args") == NULL;
}

static void
test_seccomp (void **state)
{
  struct fixture *f = *state;
  Runtime__V1__SecurityProfile seccomp = RUNTIME__V1__SECURITY_PROFILE__INIT;
  Runtime__V1__Capability caps = RUNTIME__V1__CAPABILITY__INIT;
  char *sys_admin[] = { "SYS_ADMIN" };
  cleanup_free char *profile = xasprintf ("%s/profile.json", f->host_dir);
  const char *text = "{\"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": []}";
  json_t *clone;

  assert_null (at (build_ok (f), "linux.seccomp"));
  f->sc.seccomp = &seccomp;
  seccomp.profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined;
  assert_null (at (build_ok (f), "linux.seccomp"));

  /* An allow-list: what is not named fails with EPERM. */
  seccomp.profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault;
  build_ok (f);
  assert_string_equal (str_at (f->spec, "linux.seccomp.defaultAction"), "SCMP_ACT_ERRNO");
  assert_int_equal (json_integer_value (at (f->spec, "linux.seccomp.defaultErrnoRet")), EPERM);
  assert_true (profile_allows_plainly (f->spec, "read"));
  assert_null (rule_for (f->spec, "mount"));
  assert_null (rule_for (f->spec, "kexec_load"));
  assert_null (rule_for (f->spec, "keyctl"));
  assert_null (rule_for (f->spec, "io_uring_setup"));
  assert_null (rule_for (f->spec, "ptrace"));
  /* clone only without namespace flags; clone3 ENOSYS (libc falls back). */
  clone = rule_for (f->spec, "clone");
  assert_non_null (clone);
  assert_string_equal (str_at (clone, "args.0.op"), "SCMP_CMP_MASKED_EQ");
  assert_int_equal (json_integer_value (at (clone, "args.0.value")), 0x7E020000);
  assert_int_equal (json_integer_value (at (rule_for (f->spec, "clone3"), "errnoRet")), ENOSYS);
  assert_string_equal (str_at (rule_for (f->spec, "socket"), "args.0.op"), "SCMP_CMP_NE");
  assert_string_equal (str_at (rule_for (f->spec, "personality"), "args.0.op"), "SCMP_CMP_EQ");

  /* CAP_SYS_ADMIN makes mount and namespaces legitimate again, keyctl and
   * io_uring stay refused. */
  caps.n_add_capabilities = 1, caps.add_capabilities = sys_admin;
  f->sc.capabilities = &caps;
  build_ok (f);
  assert_true (profile_allows_plainly (f->spec, "mount"));
  assert_true (profile_allows_plainly (f->spec, "clone"));
  assert_true (profile_allows_plainly (f->spec, "clone3"));
  assert_true (profile_allows_plainly (f->spec, "unshare"));
  assert_null (rule_for (f->spec, "keyctl"));
  assert_null (rule_for (f->spec, "io_uring_setup"));
  f->sc.capabilities = NULL;

  seccomp.profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost;
  seccomp.localhost_ref = profile;
  build_fails (f, ENOENT, "seccomp.localhost_ref");
  assert_int_equal (write_text (profile, text), 0);
  assert_string_equal (str_at (build_ok (f), "linux.seccomp.defaultAction"), "SCMP_ACT_ERRNO");
  assert_int_equal (write_text (profile, "{nope"), 0);
  build_fails (f, EINVAL, "seccomp.localhost_ref");
  seccomp.localhost_ref = "";
  build_fails (f, EINVAL, "seccomp.localhost_ref");
}

/* huskd's default_capabilities and seccomp_profile (config keys) replace
 * the built-in set and profile; privileged and Unconfined are untouched. */
static void
test_config_defaults (void **state)
{
  struct fixture *f = *state;
  Runtime__V1__SecurityProfile seccomp = RUNTIME__V1__SECURITY_PROFILE__INIT;
  Runtime__V1__Capability caps = RUNTIME__V1__CAPABILITY__INIT;
  const char *const defaults[] = { "CAP_CHOWN", "CAP_KILL", NULL };
  char *add[] = { "NET_ADMIN" };
  json_t *profile = json_pack ("{s:s, s:[{s:[s], s:s}]}", "defaultAction", "SCMP_ACT_ALLOW", "syscalls",
                               "names", "mkdirat", "action", "SCMP_ACT_ERRNO");
  json_t *eff;

  f->in.default_capabilities = defaults;
  eff = at (build_ok (f), "process.capabilities.effective");
  assert_int_equal (json_array_size (eff), 2);
  assert_true (array_has (eff, "CAP_CHOWN"));
  assert_true (array_has (eff, "CAP_KILL"));
  assert_int_equal (json_array_size (at (f->spec, "process.capabilities.bounding")), 2);
  /* add/drop work on that set. */
  f->sc.capabilities = &caps;
  caps.n_add_capabilities = 1, caps.add_capabilities = add;
  eff = at (build_ok (f), "process.capabilities.effective");
  assert_int_equal (json_array_size (eff), 3);
  assert_true (array_has (eff, "CAP_NET_ADMIN"));
  f->sc.capabilities = NULL;

  f->sc.seccomp = &seccomp;
  seccomp.profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault;
  f->in.seccomp_default = profile;
  build_ok (f);
  assert_true (json_equal (at (f->spec, "linux.seccomp"), profile));
  assert_ptr_not_equal (at (f->spec, "linux.seccomp"), profile); /* a copy: the config's stays as it is */
  seccomp.profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined;
  assert_null (at (build_ok (f), "linux.seccomp"));
  json_decref (profile);
}

/* ------------------------------------------------------------------ */
/* RuntimeDefault, for real: each rule family compiled by husk's runtime,
 * loaded in a child (under no_new_privs, so no root needed) and probed. */

typedef int (*probe_fn) (void);

static int
errno_of (long rc)
{
  return rc < 0 ? errno : 0;
}

/* Forks; the child returns 0 at once; the parent reaps it: 0 or errno. */
static int
clone_with (unsigned long flags)
{
  long pid = syscall (SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);

  if (pid == 0)
    _exit (0);
  if (pid < 0)
    return errno;
  waitpid ((pid_t) pid, NULL, 0);
  return 0;
}

static int
probe_clone_userns (void)
{
  return clone_with (CLONE_NEWUSER | CLONE_NEWNET);
}

static int
probe_clone_plain (void)
{
  return clone_with (0);
}

static int
probe_clone3_userns (void)
{
  struct
  {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
  } args = { .flags = CLONE_NEWUSER, .exit_signal = SIGCHLD };
  long pid = syscall (435 /* clone3 */, &args, sizeof args);

  if (pid == 0)
    _exit (0);
  if (pid > 0)
    waitpid ((pid_t) pid, NULL, 0);
  return errno_of (pid);
}

static int
probe_unshare_userns (void)
{
  return errno_of (unshare (CLONE_NEWUSER));
}

static int
probe_io_uring (void)
{
  char params[120] = { 0 };
  long fd = syscall (425 /* io_uring_setup */, 1, params);

  if (fd >= 0)
    close ((int) fd);
  return errno_of (fd);
}

static int
probe_personality_no_aslr (void)
{
  return errno_of (syscall (SYS_personality, 0x0040000 /* ADDR_NO_RANDOMIZE */));
}

static int
probe_personality_query (void)
{
  return errno_of (syscall (SYS_personality, 0xffffffffUL));
}

static int
probe_vsock (void)
{
  int fd = socket (40 /* AF_VSOCK */, SOCK_STREAM, 0);

  if (fd >= 0)
    close (fd);
  /* Without the filter: a socket, or EAFNOSUPPORT without the module. */
  return fd < 0 && errno == EPERM ? EPERM : 0;
}

static int
probe_unix_socket (void)
{
  int fd = socket (AF_UNIX, SOCK_STREAM, 0);

  if (fd >= 0)
    close (fd);
  return errno_of (fd);
}

static int
probe_keyctl (void)
{
  /* KEYCTL_GET_KEYRING_ID of the session keyring. */
  return errno_of (syscall (SYS_keyctl, 0, -3, 0));
}

/* ENOENT (the target is missing) once the filter lets it through. */
static int
probe_mount (void)
{
  return errno_of (mount ("none", "/nonexistent/husk-test", "tmpfs", 0, NULL));
}

/* ESRCH (pid 1 is not our tracee) once the filter lets it through. */
static int
probe_ptrace (void)
{
  return errno_of (syscall (SYS_ptrace, 12 /* PTRACE_GETREGS */, 1, 0, 0));
}

/* A number past every syscall libseccomp knows: ENOSYS, so libc falls back. */
static int
probe_future_syscall (void)
{
  return errno_of (syscall (520));
}

static int
errno_under_default (uint64_t caps, probe_fn probe)
{
  json_t *doc
      = json_pack ("{s:s, s:{s:s}, s:{s:[s], s:s}, s:{s:o}}", "ociVersion", "1.0.2", "root", "path", "/",
                   "process", "args", "sh", "cwd", "/", "linux", "seccomp", seccomp_default_profile (caps));
  cleanup_free char *text = json_dumps (doc, JSON_COMPACT);
  struct seccomp_program program = { 0 };
  struct husk_error *err = NULL;
  struct spec *spec = NULL;
  int status = 0;
  pid_t pid;

  json_decref (doc);
  if (spec_parse (text, strlen (text), "config.json", "/tmp", &spec, &err) < 0
      || seccomp_compile (&spec->seccomp, &program, &err) < 0)
    fail_msg ("the default profile does not compile: %s", err->msg);
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0)
    {
      if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_program_load (&program, &err) < 0)
        _exit (255);
      _exit (probe ());
    }
  waitpid (pid, &status, 0);
  seccomp_program_clear (&program);
  spec_free (spec);
  assert_true (WIFEXITED (status) && WEXITSTATUS (status) != 255);
  return WEXITSTATUS (status);
}

#define CAP_BIT(cap) (UINT64_C (1) << (cap))
/* What a CRI container gets by default (containerd's list). */
#define DEFAULT_CAPS                                                                                         \
  (CAP_BIT (CAP_CHOWN) | CAP_BIT (CAP_DAC_OVERRIDE) | CAP_BIT (CAP_FSETID) | CAP_BIT (CAP_FOWNER)            \
   | CAP_BIT (CAP_MKNOD) | CAP_BIT (CAP_NET_RAW) | CAP_BIT (CAP_SETGID) | CAP_BIT (CAP_SETUID)               \
   | CAP_BIT (CAP_SETFCAP) | CAP_BIT (CAP_SETPCAP) | CAP_BIT (CAP_NET_BIND_SERVICE)                          \
   | CAP_BIT (CAP_SYS_CHROOT) | CAP_BIT (CAP_KILL) | CAP_BIT (CAP_AUDIT_WRITE))

static void
test_default_profile_namespaces (void **state)
{
  assert_int_equal (errno_under_default (DEFAULT_CAPS, probe_clone_userns), EPERM);
  assert_int_equal (errno_under_default (DEFAULT_CAPS, probe_clone3_userns), ENOSYS);
  assert_int_equal (errno_under_default (DEFAULT_CAPS, probe_unshare_userns), EPERM);
  /* Controls: fork and threads still work; with CAP_SYS_ADMIN so do the
   * namespaces (we run as root, so the kernel allows them). */
  assert_int_equal (errno_under_default (DEFAULT_CAPS, probe_clone_plain), 0);
  if (geteuid () == 0)
    {
      assert_int_equal (errno_under_default (DEFAULT_CAPS | CAP_BIT (CAP_SYS_ADMIN), probe_clone_userns), 0);
      assert_int_equal (errno_under_default (DEFAULT_CAPS | CAP_BIT (CAP_SYS_ADMIN), probe_clone3_userns), 0);
    }
}

static void
test_default_profile_denials (void **state)
{
  assert_int_equal (errno_under_default (DEFAULT_CAPS, probe_io_uring), EPERM);
  assert_int_equal (errno_under_default (DEFAULT_CAPS, probe_keyctl), EPERM);
  assert_int_equal (errno_under_default (DEFAULT_CAPS, probe_vsock), EPERM);
  assert_int_equal (errno_under_default (DEFAULT_CAPS, probe_unix_socket), 0);
#ifdef __x86_64__
  assert_int_equal (errno_under_default (DEFAULT_CAPS, probe_future_syscall), ENOSYS);
#endif
  /* Without the filter io_uring works here: the probe can tell. */
  assert_int_equal (probe_io_uring (), 0);
}

static void
test_default_profile_personality (void **state)
{
  assert_int_equal (errno_under_default (DEFAULT_CAPS, probe_personality_no_aslr), EPERM);
  assert_int_equal (errno_under_default (DEFAULT_CAPS, probe_personality_query), 0);
}

static void
test_default_profile_capability_families (void **state)
{
  assert_int_equal (errno_under_default (DEFAULT_CAPS, probe_mount), EPERM);
  assert_int_equal (errno_under_default (DEFAULT_CAPS | CAP_BIT (CAP_SYS_ADMIN), probe_mount), ENOENT);
  assert_int_equal (errno_under_default (DEFAULT_CAPS, probe_ptrace), EPERM);
  assert_int_equal (errno_under_default (DEFAULT_CAPS | CAP_BIT (CAP_SYS_PTRACE), probe_ptrace), ESRCH);
}

static void
test_resources_and_cgroups (void **state)
{
  struct fixture *f = *state;
  Runtime__V1__LinuxContainerResources res = RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT;
  cleanup_free char *systemd = NULL, *plain = NULL;

  build_ok (f);
  assert_null (at (f->spec, "linux.resources.cpu"));
  assert_null (at (f->spec, "linux.cgroupsPath"));
  res.cpu_shares = 512, res.cpu_quota = 50000, res.cpu_period = 100000;
  res.memory_limit_in_bytes = 64 << 20, res.cpuset_cpus = "0-1", res.cpuset_mems = "0";
  res.oom_score_adj = -997;
  f->linux_config.resources = &res;
  f->in.sandbox.cgroup_parent = "/kubepods/burstable/pod1";
  build_ok (f);
  assert_int_equal (json_integer_value (at (f->spec, "linux.resources.cpu.shares")), 512);
  assert_int_equal (json_integer_value (at (f->spec, "linux.resources.cpu.quota")), 50000);
  assert_int_equal (json_integer_value (at (f->spec, "linux.resources.cpu.period")), 100000);
  assert_string_equal (str_at (f->spec, "linux.resources.cpu.cpus"), "0-1");
  assert_string_equal (str_at (f->spec, "linux.resources.cpu.mems"), "0");
  assert_int_equal (json_integer_value (at (f->spec, "linux.resources.memory.limit")), 64 << 20);
  {
    /* Lowered only where huskd may (CAP_SYS_RESOURCE, as on these hosts
     * not): otherwise left out and noted on the container. */
    const char *note = json_string_value (
        json_object_get (json_object_get (f->spec, "annotations"), CRI_SPEC_OOM_SCORE_ADJ_ANNOTATION));
    if (at (f->spec, "process.oomScoreAdj") == NULL)
      assert_true (note && husk_str_has_prefix (note, "asked -997, kept "));
    else
      assert_true (json_integer_value (at (f->spec, "process.oomScoreAdj")) == -997 && note == NULL);
  }
  assert_string_equal (str_at (f->spec, "linux.cgroupsPath"), "/kubepods/burstable/pod1/" ID);

  systemd = cri_spec_cgroups_path ("/kubepods.slice/kubepods-pod1.slice", "c1");
  assert_string_equal (systemd, "/kubepods.slice/kubepods-pod1.slice/husk-c1.scope");
  free (systemd);
  systemd = cri_spec_cgroups_path ("kubepods-burstable-pod1_2.slice", "c1");
  assert_string_equal (
      systemd, "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice/husk-c1.scope");
  plain = cri_spec_cgroups_path ("/kubepods/", "c1");
  assert_string_equal (plain, "/kubepods/c1");
  assert_null (cri_spec_cgroups_path (NULL, "c1"));
}

static void
test_annotations_and_tty (void **state)
{
  struct fixture *f = *state;
  Runtime__V1__ContainerConfig__AnnotationsEntry a1 = RUNTIME__V1__CONTAINER_CONFIG__ANNOTATIONS_ENTRY__INIT,
                                                 a2 = RUNTIME__V1__CONTAINER_CONFIG__ANNOTATIONS_ENTRY__INIT;
  Runtime__V1__ContainerConfig__AnnotationsEntry *annotations[] = { &a1, &a2 };
  Runtime__V1__ContainerMetadata meta = RUNTIME__V1__CONTAINER_METADATA__INIT;

  a1.key = a2.key = "k", a1.value = "first", a2.value = "last";
  meta.name = "web";
  f->config.n_annotations = 2, f->config.annotations = annotations;
  f->config.metadata = &meta;
  f->config.tty = true;
  build_ok (f);
  assert_string_equal (str_at (f->spec, "annotations.k"), "last");
  assert_string_equal (
      json_string_value (json_object_get (at (f->spec, "annotations"), "io.kubernetes.cri.container-name")),
      "web");
  assert_string_equal (
      json_string_value (json_object_get (at (f->spec, "annotations"), "io.kubernetes.cri.sandbox-id")),
      "sandbox1");
  assert_true (json_is_true (at (f->spec, "process.terminal")));
}

/* What cri_spec writes, husk's runtime reads: every area at once. */
static void
test_runtime_accepts (void **state)
{
  struct fixture *f = *state;
  Runtime__V1__Mount data = RUNTIME__V1__MOUNT__INIT;
  Runtime__V1__Mount *mounts[] = { &data };
  Runtime__V1__Device dev = RUNTIME__V1__DEVICE__INIT;
  Runtime__V1__Device *devices[] = { &dev };
  Runtime__V1__SecurityProfile seccomp = RUNTIME__V1__SECURITY_PROFILE__INIT;
  Runtime__V1__Capability caps = RUNTIME__V1__CAPABILITY__INIT;
  Runtime__V1__Int64Value uid = RUNTIME__V1__INT64_VALUE__INIT;
  Runtime__V1__LinuxContainerResources res = RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT;
  char *add[] = { "NET_ADMIN" }, *ambient[] = { "NET_BIND_SERVICE" };
  int64_t groups[] = { 5 };
  struct spec *parsed = NULL;
  cleanup_free char *text = NULL;

  data.host_path = f->host_dir, data.container_path = "/data";
  data.propagation = RUNTIME__V1__MOUNT_PROPAGATION__PROPAGATION_HOST_TO_CONTAINER;
  dev.host_path = "/dev/null", dev.container_path = "/dev/xnull", dev.permissions = "rwm";
  seccomp.profile_type = RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault;
  caps.n_add_capabilities = 1, caps.add_capabilities = add;
  caps.n_add_ambient_capabilities = 1, caps.add_ambient_capabilities = ambient;
  uid.value = 1000;
  res.cpu_shares = 256, res.memory_limit_in_bytes = 1 << 26, res.oom_score_adj = 500;
  f->config.n_mounts = 1, f->config.mounts = mounts;
  f->config.n_devices = 1, f->config.devices = devices;
  f->sc.seccomp = &seccomp, f->sc.capabilities = &caps, f->sc.run_as_user = &uid;
  f->sc.n_supplemental_groups = 1, f->sc.supplemental_groups = groups;
  f->sc.readonly_rootfs = f->sc.no_new_privs = true;
  f->linux_config.resources = &res;
  f->in.sandbox.cgroup_parent = "/kubepods/pod1";
  text = json_dumps (build_ok (f), JSON_COMPACT);
  if (spec_parse (text, strlen (text), "config.json", f->dir, &parsed, &f->err) < 0)
    fail_msg ("runtime refuses the spec: %s", f->err->msg);
  assert_true (parsed->root_readonly);
  spec_free (parsed);

  f->sc.privileged = true;
  free (text);
  text = json_dumps (build_ok (f), JSON_COMPACT);
  if (spec_parse (text, strlen (text), "config.json", f->dir, &parsed, &f->err) < 0)
    fail_msg ("runtime refuses the privileged spec: %s", f->err->msg);
  spec_free (parsed);
}

static void
test_capability_names (void **state)
{
  cleanup_free char *a = cri_spec_capability_name ("net_admin");
  cleanup_free char *b = cri_spec_capability_name ("CAP_KILL");
  cleanup_free char *c = cri_spec_capability_name ("FLY");

  (void) state;
  assert_string_equal (a, "CAP_NET_ADMIN");
  assert_string_equal (b, "CAP_KILL");
  assert_null (c);
}

/* ------------------------------------------------------------------ */
/* the container store                                                  */

#define ID_A "aaaa000000000000000000000000000000000000000000000000000000000001"
#define ID_B "aaaa000000000000000000000000000000000000000000000000000000000002"
#define ID_C "cccc000000000000000000000000000000000000000000000000000000000003"

struct store_fixture
{
  char dir[64];
  char *root, *state;
  struct container_store *store;
};

static int
store_setup (void **state)
{
  struct store_fixture *f = xcalloc (1, sizeof *f);
  struct husk_error *err = NULL;

  strcpy (f->dir, "/tmp/test_container_store.XXXXXX");
  assert_non_null (mkdtemp (f->dir));
  f->root = xasprintf ("%s/root", f->dir);
  f->state = xasprintf ("%s/state", f->dir);
  assert_int_equal (container_store_open (f->root, f->state, &f->store, &err), 0);
  *state = f;
  return 0;
}

static int
store_teardown (void **state)
{
  struct store_fixture *f = *state;
  struct husk_error *err = NULL;

  container_store_free (f->store);
  husk_rm_rf (f->dir, &err);
  husk_error_free (&err);
  free (f->root);
  free (f->state);
  free (f);
  return 0;
}

static void
store_save (struct store_fixture *f, const char *id, const char *name, const char *label_value)
{
  Runtime__V1__ContainerConfig config = RUNTIME__V1__CONTAINER_CONFIG__INIT;
  Runtime__V1__ContainerMetadata meta = RUNTIME__V1__CONTAINER_METADATA__INIT;
  Runtime__V1__ContainerConfig__LabelsEntry label = RUNTIME__V1__CONTAINER_CONFIG__LABELS_ENTRY__INIT;
  Runtime__V1__ContainerConfig__LabelsEntry *labels[] = { &label };
  struct cri_container c = {
    .id = (char *) id,
    .sandbox_id = "pod1",
    .name = (char *) name,
    .attempt = 2,
    .image = "busybox",
    .image_id = "sha256:1234",
    .image_ref = "busybox@sha256:5678",
    .runtime_handler = "",
    .log_path = "/logs/x.log",
    .stop_signal = "SIGQUIT",
    .state = CRI_CONTAINER_RUNNING,
    .created_at = 11,
    .started_at = 22,
    .pid = 1234,
    .monitor_pid = 1233,
    .config = &config,
  };
  struct husk_error *err = NULL;

  meta.name = (char *) name;
  label.key = "app", label.value = (char *) label_value;
  config.metadata = &meta;
  config.n_labels = 1, config.labels = labels;
  if (container_save (f->store, &c, true, &err) < 0)
    fail_msg ("container_save: %s", err->msg);
}

static void
test_save_and_lookup (void **state)
{
  struct store_fixture *f = *state;
  struct container_store *reopened = NULL;
  struct cri_container *c = NULL;
  struct husk_error *err = NULL;

  store_save (f, ID_A, "web", "x");
  assert_int_equal (container_store_open (f->root, f->state, &reopened, &err), 0);
  assert_int_equal (container_lookup (reopened, ID_A, &c, &err), 0);
  assert_string_equal (c->id, ID_A);
  assert_string_equal (c->sandbox_id, "pod1");
  assert_string_equal (c->name, "web");
  assert_int_equal (c->attempt, 2);
  assert_string_equal (c->image_ref, "busybox@sha256:5678");
  assert_string_equal (c->stop_signal, "SIGQUIT");
  assert_int_equal (c->state, CRI_CONTAINER_RUNNING);
  assert_int_equal (c->created_at, 11);
  assert_int_equal (c->started_at, 22);
  assert_int_equal (c->pid, 1234);
  assert_int_equal (c->monitor_pid, 1233);
  assert_null (c->reason);
  assert_string_equal (c->config->metadata->name, "web");
  assert_string_equal (c->config->labels[0]->value, "x");
  cri_container_free (c);
  container_store_free (reopened);
}

static void
test_prefixes (void **state)
{
  struct store_fixture *f = *state;
  struct cri_container *c = NULL, **list = NULL;
  struct husk_error *err = NULL;
  cleanup_free char *cli_dir = xasprintf ("%s/containers/%s", f->root, "dddd");
  size_t n = 0;

  store_save (f, ID_A, "a", "1");
  store_save (f, ID_B, "b", "2");
  store_save (f, ID_C, "c", "3");
  /* A debug-CLI container (no cri.json) is not listed. */
  assert_int_equal (husk_mkdir_p (cli_dir, 0700, &err), 0);
  assert_int_equal (container_list (f->store, &list, &n, &err), 0);
  assert_int_equal (n, 3);
  cri_containers_free (list, n);

  assert_int_equal (container_lookup (f->store, "cccc", &c, &err), 0);
  assert_string_equal (c->id, ID_C);
  cri_container_free (c);
  assert_int_equal (container_lookup (f->store, "aaaa", &c, &err), -1);
  assert_int_equal (err->errnum, EINVAL);
  assert_non_null (strstr (err->msg, "ambiguous"));
  husk_error_free (&err);
  assert_int_equal (container_lookup (f->store, ID_B, &c, &err), 0);
  assert_string_equal (c->name, "b");
  cri_container_free (c);
  assert_int_equal (container_lookup (f->store, "ffff", &c, &err), -1);
  assert_int_equal (err->errnum, ENOENT);
  husk_error_free (&err);
  assert_int_equal (container_lookup (f->store, "", &c, &err), -1);
  assert_int_equal (err->errnum, EINVAL);
  husk_error_free (&err);
}

static void
exit_with (struct store_fixture *f, const char *id, const char *json)
{
  cleanup_free char *path = container_store_exit_path (f->store, id);
  struct husk_error *err = NULL;

  assert_int_equal (husk_write_file_replace (path, json, strlen (json), 0644, &err), 0);
}

static void
test_exit_file (void **state)
{
  struct store_fixture *f = *state;
  struct cri_container *c = NULL;
  struct husk_error *err = NULL;
  const struct
  {
    const char *id, *json, *reason;
    int exit_code;
  } cases[] = {
    { ID_A, "{\"exit_code\": 0, \"signal\": 0, \"oom_killed\": false}", "Completed", 0 },
    { ID_B,
      "{\"exit_code\": 3, \"signal\": 0, \"oom_killed\": false, \"finished_at\": "
      "\"2016-10-06T00:17:09.669794202Z\"}",
      "Error", 3 },
    { ID_C, "{\"exit_code\": 137, \"signal\": 9, \"oom_killed\": true}", "OOMKilled", 137 },
  };

  for (size_t i = 0; i < 3; i++)
    {
      store_save (f, cases[i].id, "x", "y");
      exit_with (f, cases[i].id, cases[i].json);
      assert_int_equal (container_lookup (f->store, cases[i].id, &c, &err), 0);
      assert_int_equal (c->state, CRI_CONTAINER_EXITED);
      assert_int_equal (c->exit_code, cases[i].exit_code);
      assert_string_equal (c->reason, cases[i].reason);
      assert_true (c->finished_at > 0);
      if (i == 1)
        assert_int_equal (c->finished_at, INT64_C (1475713029669794202));
      cri_container_free (c);
    }
  /* Folded into the record: still EXITED without the exit file. */
  {
    cleanup_free char *path = container_store_exit_path (f->store, ID_B);
    unlink (path);
  }
  assert_int_equal (container_lookup (f->store, ID_B, &c, &err), 0);
  assert_int_equal (c->state, CRI_CONTAINER_EXITED);
  assert_int_equal (c->exit_code, 3);
  cri_container_free (c);
}

static void
test_forget (void **state)
{
  struct store_fixture *f = *state;
  struct cri_container *c = NULL;
  struct husk_error *err = NULL;
  cleanup_free char *dir = container_store_dir (f->store, ID_A);
  struct stat st;

  store_save (f, ID_A, "x", "y");
  exit_with (f, ID_A, "{\"exit_code\": 1}");
  assert_int_equal (container_forget (f->store, ID_A, &err), 0);
  assert_int_equal (container_lookup (f->store, ID_A, &c, &err), -1);
  assert_int_equal (err->errnum, ENOENT);
  husk_error_free (&err);
  assert_int_equal (stat (dir, &st), -1);
  assert_int_equal (container_forget (f->store, ID_A, &err), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_command_and_args, setup, teardown),
    cmocka_unit_test_setup_teardown (test_config_defaults, setup, teardown),
    cmocka_unit_test_setup_teardown (test_working_dir_and_env, setup, teardown),
    cmocka_unit_test_setup_teardown (test_mounts, setup, teardown),
    cmocka_unit_test_setup_teardown (test_sandbox_files_readonly_rootfs, setup, teardown),
    cmocka_unit_test_setup_teardown (test_pod_shm, setup, teardown),
    cmocka_unit_test_setup_teardown (test_update_resources, setup, teardown),
    cmocka_unit_test_setup_teardown (test_devices, setup, teardown),
    cmocka_unit_test_setup_teardown (test_privileged, setup, teardown),
    cmocka_unit_test_setup_teardown (test_capabilities, setup, teardown),
    cmocka_unit_test_setup_teardown (test_users, setup, teardown),
    cmocka_unit_test_setup_teardown (test_paths_and_no_new_privs, setup, teardown),
    cmocka_unit_test_setup_teardown (test_namespaces, setup, teardown),
    cmocka_unit_test (test_userns_parse),
    cmocka_unit_test_setup_teardown (test_userns_spec, setup, teardown),
    cmocka_unit_test_setup_teardown (test_seccomp, setup, teardown),
    cmocka_unit_test (test_default_profile_namespaces),
    cmocka_unit_test (test_default_profile_denials),
    cmocka_unit_test (test_default_profile_personality),
    cmocka_unit_test (test_default_profile_capability_families),
    cmocka_unit_test_setup_teardown (test_resources_and_cgroups, setup, teardown),
    cmocka_unit_test_setup_teardown (test_annotations_and_tty, setup, teardown),
    cmocka_unit_test_setup_teardown (test_runtime_accepts, setup, teardown),
    cmocka_unit_test (test_capability_names),
    cmocka_unit_test_setup_teardown (test_save_and_lookup, store_setup, store_teardown),
    cmocka_unit_test_setup_teardown (test_prefixes, store_setup, store_teardown),
    cmocka_unit_test_setup_teardown (test_exit_file, store_setup, store_teardown),
    cmocka_unit_test_setup_teardown (test_forget, store_setup, store_teardown),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
