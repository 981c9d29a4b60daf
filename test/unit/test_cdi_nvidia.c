/* Unit tests for NVIDIA GPU discovery (cri/cdi/nvidia*.c): the driver's
 * information file, mig-minors and capability files, ld.so.cache images
 * (hand-made in both layouts, and this machine's own), and the spec built
 * from a fake driver tree made here with mknod (the tests run as root):
 * its devices, nodes, NUMA annotations, mounts and hooks, and that the
 * registry and cdi_apply accept it. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "cri/cdi/cdi.h"
#include "cri/cdi/nvidia.h"
#include "husk/cleanup.h"
#include "husk/util.h"

static const char information[] = "Model: \t\t NVIDIA H100 80GB HBM3\n"
                                  "IRQ:   \t\t 188\n"
                                  "GPU UUID: \t GPU-4d9ba1d0-8e95-1b3c-7c4a-5f6e7d8c9b0a\n"
                                  "Video BIOS: \t 96.00.99.00.01\n"
                                  "Bus Type: \t PCIe\n"
                                  "DMA Size: \t 52 bits\n"
                                  "DMA Mask: \t 0xfffffffffffff\n"
                                  "Bus Location: \t 0000:1B:00.0\n"
                                  "Device Minor: \t 3\n"
                                  "GPU Excluded:\t No\n";

static void
test_information (void **state)
{
  struct nvidia_gpu_info info;
  struct husk_error *err = NULL;
  (void) state;

  assert_int_equal (nvidia_parse_information (information, "info", &info, &err), 0);
  assert_string_equal (info.model, "NVIDIA H100 80GB HBM3");
  assert_string_equal (info.uuid, "GPU-4d9ba1d0-8e95-1b3c-7c4a-5f6e7d8c9b0a");
  assert_string_equal (info.bus_id, "0000:1b:00.0"); /* lower case, as sysfs names it */
  assert_int_equal (info.minor, 3);
  nvidia_gpu_info_clear (&info);

  assert_int_equal (nvidia_parse_information ("Model: X\nGPU UUID: GPU-1\n", "f1", &info, &err), -1);
  assert_string_equal (err->msg, "f1: no `Bus Location:` line");
  husk_error_free (&err);
  assert_int_equal (
      nvidia_parse_information ("Bus Location: 0000:01:00.0\nDevice Minor: x\n", "f2", &info, &err), -1);
  assert_string_equal (err->msg, "f2: Device Minor `x` is not a number from 0 to 255");
  husk_error_free (&err);
  /* No minor: -1, no trailing newline */
  assert_int_equal (nvidia_parse_information ("Bus Location:0000:02:00.0", "f3", &info, &err), 0);
  assert_int_equal (info.minor, -1);
  assert_null (info.uuid);
  assert_string_equal (info.bus_id, "0000:02:00.0");
  nvidia_gpu_info_clear (&info);
}

static void
test_mig_minors (void **state)
{
  struct nvidia_mig_minor *m = NULL;
  size_t n = 0;
  struct husk_error *err = NULL;
  (void) state;

  assert_int_equal (nvidia_parse_mig_minors ("config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\n"
                                             "\ngpu1/gi14/ci7/access 272\nsomething/else 9\n",
                                             "mm", &m, &n, &err),
                    0);
  assert_int_equal (n, 3);
  assert_true (m[0].gpu == 0 && m[0].gi == 0 && m[0].ci == -1 && m[0].minor == 3);
  assert_true (m[1].gpu == 0 && m[1].gi == 0 && m[1].ci == 0 && m[1].minor == 4);
  assert_true (m[2].gpu == 1 && m[2].gi == 14 && m[2].ci == 7 && m[2].minor == 272);
  free (m);
  assert_int_equal (nvidia_parse_mig_minors ("config 1\ngpu0/gi0/access three\n", "mm", &m, &n, &err), -1);
  assert_string_equal (err->msg, "mm:2: `gpu0/gi0/access three` is not `NAME MINOR`");
  husk_error_free (&err);
  assert_int_equal (nvidia_parse_mig_minors ("config 1 2\n", "mm", &m, &n, &err), -1);
  husk_error_free (&err);

  assert_int_equal (
      nvidia_parse_cap_minor ("DeviceFileMinor: 12\nDeviceFileMode: 292\nDeviceFileModify: 1\n"), 12);
  assert_int_equal (nvidia_parse_cap_minor ("DeviceFileMode: 292\n"), -1);
  assert_int_equal (nvidia_parse_cap_minor ("DeviceFileMinor: x\n"), -1);
}

/* ------------------------------------------------------ ld.so.cache images */

struct cache_lib
{
  int32_t flags;
  const char *name, *path;
};

#define X8664_LIBC6 0x0303
#define I386_LIBC6 0x0003

static void
put32 (unsigned char *p, uint32_t v)
{
  memcpy (p, &v, 4);
}

/* An ld.so.cache image as ldconfig writes it: the new format alone, or
 * (WITH_OLD) behind an old-format table of the same libraries. */
static unsigned char *
make_cache (const struct cache_lib *libs, size_t n, int with_old, size_t *len)
{
  size_t old_size = with_old ? ((16 + n * 12 + 7) & ~(size_t) 7) : 0;
  size_t head = 48 + n * 24, strings = 0;
  unsigned char *buf, *base;
  size_t at;

  for (size_t i = 0; i < n; i++)
    strings += strlen (libs[i].name) + 1 + strlen (libs[i].path) + 1;
  *len = old_size + head + strings;
  buf = calloc (1, *len);
  base = buf + old_size;
  if (with_old)
    {
      memcpy (buf, "ld.so-1.7.0", 11);
      put32 (buf + 12, (uint32_t) n);
    }
  memcpy (base, "glibc-ld.so.cache1.1", 20);
  put32 (base + 20, (uint32_t) n);
  put32 (base + 24, (uint32_t) strings);
  at = head;
  for (size_t i = 0; i < n; i++)
    {
      unsigned char *e = base + 48 + i * 24;
      put32 (e, (uint32_t) libs[i].flags);
      put32 (e + 4, (uint32_t) at);
      strcpy ((char *) base + at, libs[i].name);
      at += strlen (libs[i].name) + 1;
      put32 (e + 8, (uint32_t) at);
      strcpy ((char *) base + at, libs[i].path);
      at += strlen (libs[i].path) + 1;
    }
  return buf;
}

static const struct cache_lib fake_libs[] = {
  { I386_LIBC6, "libcuda.so.1", "/usr/lib/i386-linux-gnu/libcuda.so.1" },
  { X8664_LIBC6, "libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1" },
  { X8664_LIBC6, "libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1" },
  { X8664_LIBC6, "libnvidia-nvvm.so.4", "/usr/lib/x86_64-linux-gnu/libnvidia-nvvm.so.4" },
};
#define N_FAKE_LIBS (sizeof fake_libs / sizeof fake_libs[0])

static void
test_ldcache (void **state)
{
  struct nvidia_ldcache_entry *e = NULL;
  struct husk_error *err = NULL;
  size_t n = 0, len;
  (void) state;

  for (int with_old = 0; with_old < 2; with_old++)
    {
      cleanup_free unsigned char *img = make_cache (fake_libs, N_FAKE_LIBS, with_old, &len);
      assert_int_equal (nvidia_ldcache_parse (img, len, "c", &e, &n, &err), 0);
      assert_int_equal (n, N_FAKE_LIBS);
      for (size_t i = 0; i < n; i++)
        {
          assert_string_equal (e[i].name, fake_libs[i].name);
          assert_string_equal (e[i].path, fake_libs[i].path);
          assert_int_equal (e[i].flags, fake_libs[i].flags);
        }
#ifdef __x86_64__
      assert_false (nvidia_ldcache_native (e[0].flags));
      assert_true (nvidia_ldcache_native (e[1].flags));
#endif
      nvidia_ldcache_free (e, n);
      /* every truncation is refused, never read past the end */
      for (size_t cut = 0; cut < len; cut++)
        {
          if (nvidia_ldcache_parse (img, cut, "c", &e, &n, &err) == 0)
            nvidia_ldcache_free (e, n);
          else
            husk_error_free (&err);
        }
    }
  {
    cleanup_free unsigned char *img = make_cache (fake_libs, N_FAKE_LIBS, 0, &len);
    put32 (img + 48 + 4, 1u << 30); /* a key outside the file */
    assert_int_equal (nvidia_ldcache_parse (img, len, "c", &e, &n, &err), -1);
    assert_string_equal (err->msg, "c: ld.so.cache entry 0 points outside the file");
    husk_error_free (&err);
    put32 (img + 20, 1u << 30); /* more libraries than bytes */
    assert_int_equal (nvidia_ldcache_parse (img, len, "c", &e, &n, &err), -1);
    husk_error_free (&err);
  }
  assert_int_equal (nvidia_ldcache_parse ("not a cache at all", 18, "x", &e, &n, &err), -1);
  assert_string_equal (err->msg, "x: not an ld.so.cache (no `glibc-ld.so.cache` or `ld.so-1.7.0` magic)");
  husk_error_free (&err);
}

/* This machine's own cache, as ldconfig made it, names libc.so.6. */
static void
test_ldcache_host (void **state)
{
  cleanup_free char *data = NULL;
  struct nvidia_ldcache_entry *e = NULL;
  struct husk_error *err = NULL;
  size_t len, n = 0, libc = 0;
  (void) state;

  assert_int_equal (husk_read_file ("/etc/ld.so.cache", &data, &len, &err), 0);
  assert_int_equal (nvidia_ldcache_parse (data, len, "/etc/ld.so.cache", &e, &n, &err), 0);
  assert_true (n > 10);
  for (size_t i = 0; i < n; i++)
    if (strcmp (e[i].name, "libc.so.6") == 0 && nvidia_ldcache_native (e[i].flags))
      {
        struct stat st;
        assert_int_equal (stat (e[i].path, &st), 0);
        libc++;
      }
  assert_int_equal (libc, 1);
  nvidia_ldcache_free (e, n);
}

/* ------------------------------------------------------- a fake driver tree */

struct tree
{
  char root[64];
  char dev[96], proc[96], sys[96], driver[96], specs[96];
};

static void
put_file (const char *root, const char *rel, const char *fmt, ...)
{
  char path[512];
  va_list ap;
  FILE *fp;
  struct husk_error *err = NULL;

  snprintf (path, sizeof path, "%s/%s", root, rel);
  *strrchr (path, '/') = '\0';
  assert_int_equal (husk_mkdir_p (path, 0755, &err), 0);
  snprintf (path, sizeof path, "%s/%s", root, rel);
  fp = fopen (path, "w");
  assert_non_null (fp);
  va_start (ap, fmt);
  vfprintf (fp, fmt, ap);
  va_end (ap);
  fclose (fp);
}

static void
put_node (const char *root, const char *rel, unsigned maj, unsigned min)
{
  char path[512];
  put_file (root, rel, "x"); /* makes the parents */
  snprintf (path, sizeof path, "%s/%s", root, rel);
  assert_int_equal (unlink (path), 0);
  assert_int_equal (mknod (path, S_IFCHR | 0666, makedev (maj, min)), 0);
}

static void
put_link (const char *root, const char *rel, const char *target)
{
  char path[512];
  snprintf (path, sizeof path, "%s/%s", root, rel);
  assert_int_equal (symlink (target, path), 0);
}

#define LIBDIR "usr/lib/x86_64-linux-gnu"

/* Two GPUs (bus 0000:41 minor 1 on NUMA node 1, bus 0000:21 minor 0 on
 * node 0: index 0 is the lower bus id), one MIG device on minor 0, the
 * control nodes, and a driver root with libcuda, libnvidia-ml, nvidia-smi
 * and firmware. */
static int
tree_setup (void **state)
{
  struct tree *t = calloc (1, sizeof *t);
  static const char *const gpus[][3]
      = { { "0000:41:00.0", "GPU-bbbb", "1" }, { "0000:21:00.0", "GPU-aaaa", "0" } };

  strcpy (t->root, "/tmp/husk-test-nvidia-XXXXXX");
  assert_non_null (mkdtemp (t->root));
  snprintf (t->dev, sizeof t->dev, "%s/host", t->root);
  snprintf (t->proc, sizeof t->proc, "%s/host/proc", t->root);
  snprintf (t->sys, sizeof t->sys, "%s/host/sys", t->root);
  snprintf (t->driver, sizeof t->driver, "%s/driver", t->root);
  snprintf (t->specs, sizeof t->specs, "%s/cdi", t->root);
  for (int i = 0; i < 2; i++)
    {
      char rel[128];
      snprintf (rel, sizeof rel, "proc/driver/nvidia/gpus/%s/information", gpus[i][0]);
      put_file (t->dev, rel, "Model: \t\t Fake\nGPU UUID: \t %s\nBus Location: \t %s\nDevice Minor: \t %s\n",
                gpus[i][1], gpus[i][0], gpus[i][2]);
      snprintf (rel, sizeof rel, "sys/bus/pci/devices/%s/numa_node", gpus[i][0]);
      put_file (t->dev, rel, "%s\n", gpus[i][2]);
      snprintf (rel, sizeof rel, "dev/nvidia%s", gpus[i][2]);
      put_node (t->dev, rel, 195, (unsigned) atoi (gpus[i][2]));
    }
  put_node (t->dev, "dev/nvidiactl", 195, 255);
  put_node (t->dev, "dev/nvidia-uvm", 510, 0);
  put_node (t->dev, "dev/nvidia-caps/nvidia-cap12", 508, 12);
  put_node (t->dev, "dev/nvidia-caps/nvidia-cap13", 508, 13);
  put_file (t->dev, "proc/driver/nvidia/capabilities/gpu0/mig/gi1/access",
            "DeviceFileMinor: 12\nDeviceFileMode: 292\n");
  /* no DeviceFileMinor here: mig-minors has it */
  put_file (t->dev, "proc/driver/nvidia/capabilities/gpu0/mig/gi1/ci0/access", "DeviceFileMode: 292\n");
  put_file (t->dev, "proc/driver/nvidia-caps/mig-minors",
            "config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n");

  put_file (t->driver, LIBDIR "/libcuda.so.550.1", "elf");
  put_link (t->driver, LIBDIR "/libcuda.so.1", "libcuda.so.550.1");
  put_file (t->driver, LIBDIR "/libnvidia-ml.so.550.1", "elf");
  put_link (t->driver, LIBDIR "/libnvidia-ml.so.1", "/" LIBDIR "/libnvidia-ml.so.550.1");
  put_file (t->driver, "usr/bin/nvidia-smi", "#!/bin/sh\n");
  put_file (t->driver, "lib/firmware/nvidia/550.1/gsp.bin", "fw");
  {
    size_t len;
    cleanup_free unsigned char *img = make_cache (fake_libs, N_FAKE_LIBS, 0, &len);
    char path[256];
    struct husk_error *err = NULL;
    put_file (t->driver, "etc/ld.so.cache", "");
    snprintf (path, sizeof path, "%s/etc/ld.so.cache", t->driver);
    assert_int_equal (husk_write_file_atomic (path, img, len, 0644, &err), 0);
  }
  *state = t;
  return 0;
}

static int
tree_teardown (void **state)
{
  struct tree *t = *state;
  char cmd[128];
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", t->root);
  assert_int_equal (system (cmd), 0);
  free (t);
  return 0;
}

static struct nvidia_roots
roots_of (const struct tree *t)
{
  return (struct nvidia_roots){ .dev_root = t->dev,
                                .proc_root = t->proc,
                                .sys_root = t->sys,
                                .driver_root = t->driver,
                                .hook_path = "/opt/husk" };
}

static json_t *
device_named (json_t *spec, const char *name)
{
  size_t i;
  json_t *dev;
  json_array_foreach (json_object_get (spec, "devices"), i, dev)
  {
    if (strcmp (json_string_value (json_object_get (dev, "name")), name) == 0)
      return dev;
  }
  return NULL;
}

/* The deviceNodes paths of DEV, joined by spaces. */
static char *
node_paths (json_t *dev)
{
  json_t *nodes = json_object_get (json_object_get (dev, "containerEdits"), "deviceNodes");
  char *out = xstrdup ("");
  size_t i;
  json_t *node;
  json_array_foreach (nodes, i, node)
  {
    char *next = xasprintf ("%s%s%s", out, i ? " " : "", json_string_value (json_object_get (node, "path")));
    free (out);
    out = next;
  }
  return out;
}

static void
assert_nodes (json_t *spec, const char *name, const char *expected)
{
  json_t *dev = device_named (spec, name);
  cleanup_free char *got = NULL;
  if (dev == NULL)
    fail_msg ("no device %s", name);
  got = node_paths (dev);
  assert_string_equal (got, expected);
}

static const char *
numa_of (json_t *spec, const char *name)
{
  return json_string_value (
      json_object_get (json_object_get (device_named (spec, name), "annotations"), NVIDIA_NUMA_ANNOTATION));
}

static void
test_generate (void **state)
{
  struct tree *t = *state;
  struct nvidia_roots roots = roots_of (t);
  struct husk_error *err = NULL;
  json_t *spec = nvidia_cdi_generate (&roots, &err), *edits, *hooks;
  cleanup_free char *text = NULL, *cuda_host = NULL;
  (void) err;

  assert_non_null (spec);
  assert_string_equal (json_string_value (json_object_get (spec, "kind")), "nvidia.com/gpu");
  assert_nodes (spec, "0", "/dev/nvidia0");
  assert_nodes (spec, "GPU-aaaa", "/dev/nvidia0");
  assert_nodes (spec, "1", "/dev/nvidia1");
  assert_nodes (spec, "GPU-bbbb", "/dev/nvidia1");
  assert_nodes (spec, "0:0", "/dev/nvidia0 /dev/nvidia-caps/nvidia-cap12 /dev/nvidia-caps/nvidia-cap13");
  assert_nodes (spec, "all",
                "/dev/nvidia0 /dev/nvidia1 /dev/nvidia-caps/nvidia-cap12 /dev/nvidia-caps/nvidia-cap13");
  assert_int_equal (json_array_size (json_object_get (spec, "devices")), 6);
  assert_string_equal (numa_of (spec, "0"), "0");
  assert_string_equal (numa_of (spec, "GPU-bbbb"), "1");
  assert_null (numa_of (spec, "all"));

  edits = json_object_get (spec, "containerEdits");
  {
    json_t *nodes = json_object_get (edits, "deviceNodes");
    assert_int_equal (json_array_size (nodes), 2);
    assert_string_equal (json_string_value (json_object_get (json_array_get (nodes, 0), "path")),
                         "/dev/nvidiactl");
    assert_string_equal (json_string_value (json_object_get (json_array_get (nodes, 1), "path")),
                         "/dev/nvidia-uvm");
  }
  text = json_dumps (json_object_get (edits, "mounts"), JSON_COMPACT);
  cuda_host = xasprintf ("\"hostPath\":\"%s/" LIBDIR "/libcuda.so.550.1\",\"containerPath\":\"/" LIBDIR
                         "/libcuda.so.550.1\",\"options\":[\"ro\",\"nosuid\",\"nodev\",\"bind\"]",
                         t->driver);
  assert_non_null (strstr (text, cuda_host));
  assert_non_null (strstr (text, "\"containerPath\":\"/" LIBDIR "/libnvidia-ml.so.550.1\""));
  assert_non_null (strstr (text, "\"containerPath\":\"/usr/bin/nvidia-smi\""));
  assert_non_null (strstr (text, "\"containerPath\":\"/lib/firmware/nvidia/550.1\""));
  assert_null (strstr (text, "i386"));
  assert_int_equal (json_array_size (json_object_get (edits, "mounts")), 4);

  hooks = json_object_get (edits, "hooks");
  free (text);
  text = json_dumps (hooks, JSON_COMPACT);
  assert_string_equal (
      text, "[{\"hookName\":\"createContainer\",\"path\":\"/opt/husk\",\"args\":[\"husk\",\"cdi-hook\","
            "\"create-symlinks\",\"--link\",\"libcuda.so.550.1::/" LIBDIR
            "/libcuda.so.1\",\"--link\",\"libcuda.so.1::/" LIBDIR
            "/libcuda.so\",\"--link\",\"libnvidia-ml.so.550.1::/" LIBDIR
            "/libnvidia-ml.so.1\"]},{\"hookName\":\"createContainer\",\"path\":\"/opt/husk\","
            "\"args\":[\"husk\",\"cdi-hook\",\"update-ldcache\",\"--folder\",\"/" LIBDIR "\"]}]");

  /* round trip through the parser */
  free (text);
  text = json_dumps (spec, 0);
  {
    json_t *back = cdi_spec_parse (text, strlen (text), 0, "nvidia.json", &err);
    if (back == NULL)
      fail_msg ("%s", err->msg);
    assert_true (json_equal (back, spec));
    json_decref (back);
  }
  json_decref (spec);
}

/* The registry takes the written spec and cdi_apply turns a MIG device
 * into nodes with the host's numbers and cgroup rules. */
static void
test_generate_registry_apply (void **state)
{
  struct tree *t = *state;
  struct nvidia_roots roots = roots_of (t);
  struct husk_error *err = NULL;
  json_t *spec = nvidia_cdi_generate (&roots, &err), *config, *devices;
  cleanup_free char *path = xasprintf ("%s/nvidia.json", t->specs);
  const char *dirs[] = { t->specs, NULL };
  const char *names[] = { "nvidia.com/gpu=0:0", NULL };
  struct cdi_registry *reg;
  size_t n;

  assert_non_null (spec);
  assert_int_equal (husk_mkdir_p (t->specs, 0755, &err), 0);
  assert_int_equal (json_dump_file (spec, path, 0), 0);
  json_decref (spec);
  reg = cdi_registry_new (dirs);
  cdi_registry_list (reg, &n);
  assert_int_equal (n, 6);
  cdi_registry_errors (reg, &n);
  assert_int_equal (n, 0);
  config = json_pack ("{s:{s:[s]}, s:{}}", "process", "args", "true", "linux");
  if (cdi_apply (reg, config, names, &err) < 0)
    fail_msg ("%s", err->msg);
  devices = json_object_get (json_object_get (config, "linux"), "devices");
  /* nvidiactl, nvidia-uvm, then the device's own three */
  assert_int_equal (json_array_size (devices), 5);
  {
    json_t *cap = json_array_get (devices, 4);
    assert_string_equal (json_string_value (json_object_get (cap, "path")), "/dev/nvidia-caps/nvidia-cap13");
    assert_int_equal (json_integer_value (json_object_get (cap, "major")), 508);
    assert_int_equal (json_integer_value (json_object_get (cap, "minor")), 13);
  }
  json_decref (config);
  cdi_registry_free (reg);
}

static void
expect_failure (const struct nvidia_roots *roots, const char *expected)
{
  struct husk_error *err = NULL;
  json_t *spec = nvidia_cdi_generate (roots, &err);
  assert_null (spec);
  assert_non_null (err);
  if (strstr (err->msg, expected) == NULL)
    fail_msg ("error `%s` lacks `%s`", err->msg, expected);
  husk_error_free (&err);
}

static void
test_generate_errors (void **state)
{
  struct tree *t = *state;
  struct nvidia_roots roots = roots_of (t);
  cleanup_free char *msg = NULL, *node = NULL, *cache = NULL;

  roots.driver_root = "/nonexistent-driver-root";
  expect_failure (&roots, "driver root `/nonexistent-driver-root`: No such file or directory");
  roots.driver_root = "relative";
  expect_failure (&roots, "driver root `relative` is not an absolute path");
  roots = roots_of (t);
  roots.driver_root = t->dev; /* no ld.so.cache there */
  expect_failure (&roots, "/etc/ld.so.cache");
  /* a cache without libcuda */
  cache = xasprintf ("%s/etc/ld.so.cache", t->driver);
  {
    size_t len;
    struct husk_error *err = NULL;
    cleanup_free unsigned char *img = make_cache (fake_libs + 2, 2, 0, &len);
    assert_int_equal (husk_write_file_atomic (cache, img, len, 0644, &err), 0);
  }
  roots = roots_of (t);
  expect_failure (&roots, "no libcuda.so.* for this machine in the ldcache of driver root");
  /* no GPU: neither /proc nor /dev lists one */
  roots.dev_root = roots.proc_root = t->driver;
  msg = xasprintf ("no NVIDIA GPU found under %s/dev", t->driver);
  expect_failure (&roots, msg);
  /* a listed GPU whose node is gone is left out; with none left, no GPU */
  node = xasprintf ("%s/dev/nvidia0", t->dev);
  assert_int_equal (unlink (node), 0);
  free (node);
  node = xasprintf ("%s/dev/nvidia1", t->dev);
  assert_int_equal (unlink (node), 0);
  roots = roots_of (t);
  free (msg);
  msg = xasprintf ("no NVIDIA GPU found under %s/dev", t->dev);
  expect_failure (&roots, msg);
}

/* Without /proc/driver/nvidia the GPUs come from /dev/nvidiaN alone. */
static void
test_generate_dev_only (void **state)
{
  struct tree *t = *state;
  struct nvidia_roots roots = roots_of (t);
  struct husk_error *err = NULL;
  json_t *spec;

  roots.proc_root = t->driver; /* no driver/nvidia there */
  spec = nvidia_cdi_generate (&roots, &err);
  assert_non_null (spec);
  assert_nodes (spec, "0", "/dev/nvidia0");
  assert_nodes (spec, "1", "/dev/nvidia1");
  assert_nodes (spec, "all", "/dev/nvidia0 /dev/nvidia1");
  assert_null (device_named (spec, "0:0"));
  json_decref (spec);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_information),
    cmocka_unit_test (test_mig_minors),
    cmocka_unit_test (test_ldcache),
    cmocka_unit_test (test_ldcache_host),
    cmocka_unit_test_setup_teardown (test_generate, tree_setup, tree_teardown),
    cmocka_unit_test_setup_teardown (test_generate_registry_apply, tree_setup, tree_teardown),
    cmocka_unit_test_setup_teardown (test_generate_errors, tree_setup, tree_teardown),
    cmocka_unit_test_setup_teardown (test_generate_dev_only, tree_setup, tree_teardown),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
