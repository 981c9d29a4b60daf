/* Unit tests for the sources of CDI names (cri/cdi/sources.c):
 * NVIDIA_VISIBLE_DEVICES (indices, UUIDs, MIG ids, all, none, void, empty,
 * unknown and malformed items, no NVIDIA spec), which env counts under
 * each mode (container-config, image-too, off), docker's --gpus, the
 * merge of names, and the NUMA nodes of devices from their annotations. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "cri/cdi/cdi.h"
#include "cri/spec/seccomp_default.h"
#include "husk/cleanup.h"
#include "husk/util.h"

struct fixture
{
  char dir[64];
  struct cdi_registry *reg;
};

static void
write_spec (const char *dir, const char *name, const char *text)
{
  char path[256];
  snprintf (path, sizeof path, "%s/%s", dir, name);
  FILE *fp = fopen (path, "w");
  assert_non_null (fp);
  fputs (text, fp);
  fclose (fp);
}

/* A spec of KIND with devices NAMES, each with the NUMA annotation of
 * the same index in NUMA ("" for none). */
static char *
spec_of (const char *kind, const char *const *names, const char *const *numa)
{
  char *devices = xstrdup ("");
  for (size_t i = 0; names[i]; i++)
    {
      char *annot
          = numa[i][0] ? xasprintf (",\"annotations\":{\"husk/numa-node\":\"%s\"}", numa[i]) : xstrdup ("");
      char *next = xasprintf ("%s%s{\"name\":\"%s\"%s,\"containerEdits\":{\"env\":[\"GPU=%s\"]}}", devices,
                              i ? "," : "", names[i], annot, names[i]);
      free (annot);
      free (devices);
      devices = next;
    }
  char *spec = xasprintf ("{\"cdiVersion\":\"0.6.0\",\"kind\":\"%s\",\"devices\":[%s]}", kind, devices);
  free (devices);
  return spec;
}

static void
write_gpu_spec (const char *dir, const char *const *names, const char *const *numa)
{
  cleanup_free char *spec = spec_of ("nvidia.com/gpu", names, numa);
  write_spec (dir, "gpu.json", spec);
}

static int
setup (void **state)
{
  struct fixture *f = calloc (1, sizeof (*f));
  strcpy (f->dir, "/tmp/husk-test-cdi-src-XXXXXX");
  assert_non_null (mkdtemp (f->dir));
  /* GPUs 0, 1, 2 and 10 (index order is not name order), a UUID, a MIG
   * device by id and by UUID, `all`; another vendor's device. */
  static const char *const names[] = { "0", "1", "2", "10", "GPU-6f1e2d3c", "0:1", "MIG-aa11", "all", NULL };
  static const char *const numa[] = { "0", "1", "1", "", "0", "", "", "" };
  static const char *const fpga[] = { "0", NULL }, *const fpga_numa[] = { "x" };
  cleanup_free char *other = spec_of ("example.com/fpga", fpga, fpga_numa);
  write_gpu_spec (f->dir, names, numa);
  write_spec (f->dir, "fpga.json", other);
  const char *dirs[] = { f->dir, NULL };
  f->reg = cdi_registry_new (dirs);
  assert_non_null (f->reg);
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *f = *state;
  char cmd[128];
  cdi_registry_free (f->reg);
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", f->dir);
  assert_int_equal (system (cmd), 0);
  free (f);
  return 0;
}

/* NAMES joined by spaces ("" for none). */
static char *
joined (char **names)
{
  char *out = xstrdup ("");
  for (size_t i = 0; names && names[i]; i++)
    {
      char *next = xasprintf ("%s%s%s", out, i ? " " : "", names[i]);
      free (out);
      out = next;
    }
  return out;
}

static void
expect_visible (struct cdi_registry *reg, const char *value, const char *want)
{
  cleanup_strv char **names = NULL;
  struct husk_error *err = NULL;
  int ret = cdi_nvidia_visible_devices (reg, value, &names, &err);
  if (ret < 0)
    fail_msg ("NVIDIA_VISIBLE_DEVICES=%s: %s", value ? value : "(unset)", err->msg);
  cleanup_free char *got = joined (names);
  if (strcmp (got, want) != 0)
    fail_msg ("NVIDIA_VISIBLE_DEVICES=%s: got `%s`, want `%s`", value ? value : "(unset)", got, want);
}

static void
expect_refused (int ret, struct husk_error **err, int errnum, const char *needle)
{
  assert_int_equal (ret, -1);
  assert_non_null (*err);
  if ((*err)->errnum != errnum || strstr ((*err)->msg, needle) == NULL)
    fail_msg ("error `%s` (errno %d): want errno %d and `%s`", (*err)->msg, (*err)->errnum, errnum, needle);
  husk_error_free (err);
}

static void
test_visible_devices (void **state)
{
  struct fixture *f = *state;

  expect_visible (f->reg, NULL, "");
  expect_visible (f->reg, "", "");
  expect_visible (f->reg, "  ", "");
  expect_visible (f->reg, "none", "");
  expect_visible (f->reg, "void", "");
  expect_visible (f->reg, "0", "nvidia.com/gpu=0");
  expect_visible (f->reg, "2,0", "nvidia.com/gpu=2 nvidia.com/gpu=0");
  expect_visible (f->reg, " 1 , 1,10 ", "nvidia.com/gpu=1 nvidia.com/gpu=10");
  expect_visible (f->reg, "GPU-6f1e2d3c", "nvidia.com/gpu=GPU-6f1e2d3c");
  expect_visible (f->reg, "MIG-aa11,0:1", "nvidia.com/gpu=MIG-aa11 nvidia.com/gpu=0:1");
  expect_visible (f->reg, "all", "nvidia.com/gpu=all");
}

static void
test_visible_devices_refused (void **state)
{
  struct fixture *f = *state;
  cleanup_strv char **names = NULL;
  struct husk_error *err = NULL;

  expect_refused (cdi_nvidia_visible_devices (f->reg, "0,7", &names, &err), &err, ENOENT, "GPU `7`");
  expect_refused (cdi_nvidia_visible_devices (f->reg, "GPU-dead", &names, &err), &err, ENOENT,
                  "nvidia.com/gpu=GPU-dead");
  expect_refused (cdi_nvidia_visible_devices (f->reg, "0,a b", &names, &err), &err, EINVAL,
                  "NVIDIA_VISIBLE_DEVICES=0,a b");
}

/* Without an `all` device: every index, in numeric order; without any
 * nvidia.com/gpu device: the env is ignored. */
static void
test_visible_devices_without_all_or_spec (void **state)
{
  struct fixture *f = *state;
  char path[128];

  static const char *const names[] = { "10", "2", "0:1", "0", NULL }, *const numa[] = { "", "", "", "" };

  write_gpu_spec (f->dir, names, numa);
  expect_visible (f->reg, "all", "nvidia.com/gpu=0 nvidia.com/gpu=2 nvidia.com/gpu=10");
  snprintf (path, sizeof path, "%s/gpu.json", f->dir);
  assert_int_equal (unlink (path), 0);
  expect_visible (f->reg, "0,1", "");
  expect_visible (f->reg, "all", "");
}

static void
test_merge_keeps_each_once (void **state)
{
  struct fixture *f = *state;
  cleanup_strv char **names = husk_strv_append (NULL, "example.com/fpga=0");
  struct husk_error *err = NULL;

  cdi_names_add (&names, "nvidia.com/gpu=1");
  assert_int_equal (cdi_nvidia_visible_devices (f->reg, "1,0", &names, &err), 0);
  cdi_names_add (&names, "nvidia.com/gpu=0");
  cleanup_free char *got = joined (names);
  assert_string_equal (got, "example.com/fpga=0 nvidia.com/gpu=1 nvidia.com/gpu=0");
}

static void
test_env_modes (void **state)
{
  char *image_env[] = { "PATH=/bin", "NVIDIA_VISIBLE_DEVICES=all", NULL };
  char *cli_env[] = { "NVIDIA_VISIBLE_DEVICES=0", "A=1", "NVIDIA_VISIBLE_DEVICES=1", NULL };
  enum cdi_nvidia_env mode;

  assert_string_equal (cdi_env_lookup (cli_env, "NVIDIA_VISIBLE_DEVICES"), "1");
  assert_null (cdi_env_lookup (cli_env, "NVIDIA"));
  assert_null (cdi_env_lookup (NULL, "A"));
  /* container-config: only the container's own */
  assert_null (cdi_nvidia_env_value (CDI_NVIDIA_ENV_CONTAINER, NULL, image_env));
  assert_string_equal (cdi_nvidia_env_value (CDI_NVIDIA_ENV_CONTAINER, "0", image_env), "0");
  /* image-too: the container's wins, even empty; else the image's */
  assert_string_equal (cdi_nvidia_env_value (CDI_NVIDIA_ENV_IMAGE_TOO, NULL, image_env), "all");
  assert_string_equal (cdi_nvidia_env_value (CDI_NVIDIA_ENV_IMAGE_TOO, "1", image_env), "1");
  assert_string_equal (cdi_nvidia_env_value (CDI_NVIDIA_ENV_IMAGE_TOO, "", image_env), "");
  assert_null (cdi_nvidia_env_value (CDI_NVIDIA_ENV_IMAGE_TOO, NULL, NULL));
  /* off: nothing */
  assert_null (cdi_nvidia_env_value (CDI_NVIDIA_ENV_OFF, "0", image_env));
  assert_int_equal (cdi_nvidia_env_parse ("image-too", &mode), 0);
  assert_int_equal (mode, CDI_NVIDIA_ENV_IMAGE_TOO);
  assert_int_equal (cdi_nvidia_env_parse ("off", &mode), 0);
  assert_int_equal (mode, CDI_NVIDIA_ENV_OFF);
  assert_int_equal (cdi_nvidia_env_parse ("container-config", &mode), 0);
  assert_int_equal (mode, CDI_NVIDIA_ENV_CONTAINER);
  assert_int_equal (cdi_nvidia_env_parse ("on", &mode), -1);
  assert_string_equal (cdi_nvidia_env_name (CDI_NVIDIA_ENV_IMAGE_TOO), "image-too");
}

static void
expect_gpus (struct cdi_registry *reg, const char *value, const char *want)
{
  cleanup_strv char **names = NULL;
  struct husk_error *err = NULL;
  if (cdi_gpus_option (reg, value, &names, &err) < 0)
    fail_msg ("--gpus %s: %s", value, err->msg);
  cleanup_free char *got = joined (names);
  if (strcmp (got, want) != 0)
    fail_msg ("--gpus %s: got `%s`, want `%s`", value, got, want);
}

static void
test_gpus_option (void **state)
{
  struct fixture *f = *state;
  cleanup_strv char **names = NULL;
  struct husk_error *err = NULL;
  char path[128];

  expect_gpus (f->reg, "all", "nvidia.com/gpu=all");
  expect_gpus (f->reg, "1", "nvidia.com/gpu=0");
  expect_gpus (f->reg, "4", "nvidia.com/gpu=0 nvidia.com/gpu=1 nvidia.com/gpu=2 nvidia.com/gpu=10");
  expect_gpus (f->reg, "device=2,0", "nvidia.com/gpu=2 nvidia.com/gpu=0");
  expect_gpus (f->reg, "\"device=GPU-6f1e2d3c,MIG-aa11\"",
               "nvidia.com/gpu=GPU-6f1e2d3c nvidia.com/gpu=MIG-aa11");
  expect_refused (cdi_gpus_option (f->reg, "5", &names, &err), &err, ENOENT, "--gpus 5: only 4 GPUs");
  expect_refused (cdi_gpus_option (f->reg, "device=3", &names, &err), &err, ENOENT, "nvidia.com/gpu=3");
  /* docker's CSV form: count=, capabilities=, quoted device lists. */
  expect_gpus (f->reg, "count=2", "nvidia.com/gpu=0 nvidia.com/gpu=1");
  expect_gpus (f->reg, "count=all", "nvidia.com/gpu=all");
  expect_gpus (f->reg, "all,capabilities=utility", "nvidia.com/gpu=all");
  expect_gpus (f->reg, "\"capabilities=compute,utility\",count=1", "nvidia.com/gpu=0");
  expect_gpus (f->reg, "\"device=0,2\",capabilities=compute,driver=nvidia",
               "nvidia.com/gpu=0 nvidia.com/gpu=2");
  expect_refused (cdi_gpus_option (f->reg, "all,capabilities=graphics", &names, &err), &err, EINVAL,
                  "capability `graphics`");
  expect_refused (cdi_gpus_option (f->reg, "count=2,device=0", &names, &err), &err, EINVAL,
                  "a count and device= together");
  expect_refused (cdi_gpus_option (f->reg, "count=x", &names, &err), &err, EINVAL, "count `x`");
  expect_refused (cdi_gpus_option (f->reg, "capabilities=utility", &names, &err), &err, EINVAL,
                  "expected all");
  expect_refused (cdi_gpus_option (f->reg, "bogus=1", &names, &err), &err, EINVAL, "`bogus=1`");
  expect_refused (cdi_gpus_option (f->reg, "device=", &names, &err), &err, EINVAL, "--gpus device=");
  expect_refused (cdi_gpus_option (f->reg, "0", &names, &err), &err, EINVAL, "--gpus 0");
  snprintf (path, sizeof path, "%s/gpu.json", f->dir);
  assert_int_equal (unlink (path), 0);
  expect_refused (cdi_gpus_option (f->reg, "all", &names, &err), &err, ENOENT, "no nvidia.com/gpu devices");
  assert_null (names);
}

static void
test_numa_nodes (void **state)
{
  struct fixture *f = *state;
  struct husk_error *err = NULL;
  char *mems = NULL;
  const char *gpus01[] = { "nvidia.com/gpu=1", "nvidia.com/gpu=0", "nvidia.com/gpu=2", NULL };
  const char *gpu0uuid[] = { "nvidia.com/gpu=0", "nvidia.com/gpu=GPU-6f1e2d3c", NULL };
  const char *none[] = { "nvidia.com/gpu=10", "nvidia.com/gpu=all", NULL };
  const char *bad[] = { "nvidia.com/gpu=0", "example.com/fpga=0", NULL };
  const char *unknown[] = { "nvidia.com/gpu=9", NULL };

  assert_int_equal (cdi_numa_nodes (f->reg, gpus01, &mems, &err), 0);
  assert_string_equal (mems, "0,1");
  free (mems);
  assert_int_equal (cdi_numa_nodes (f->reg, gpu0uuid, &mems, &err), 0);
  assert_string_equal (mems, "0");
  free (mems);
  assert_int_equal (cdi_numa_nodes (f->reg, none, &mems, &err), 0);
  assert_null (mems);
  expect_refused (cdi_numa_nodes (f->reg, bad, &mems, &err), &err, EINVAL,
                  "example.com/fpga=0: annotation husk/numa-node");
  expect_refused (cdi_numa_nodes (f->reg, unknown, &mems, &err), &err, ENOENT, "nvidia.com/gpu=9");
  json_t *annotations = cdi_registry_annotations (f->reg, "nvidia.com/gpu=1", &err);
  assert_non_null (annotations);
  assert_string_equal (json_string_value (json_object_get (annotations, CDI_NUMA_ANNOTATION)), "1");
  assert_null (cdi_registry_annotations (f->reg, "nvidia.com/gpu=10", &err));
  assert_null (err);
  expect_refused (cdi_registry_annotations (f->reg, "nvidia.com/gpu=9", &err) ? 0 : -1, &err, ENOENT,
                  "gpu=9");
}

/* An OCI config of the size huskd builds: env, a dozen mounts, the
 * default device rules, and the RuntimeDefault seccomp profile. */
static json_t *
huskd_like_config (void)
{
  json_t *config = json_pack ("{s:{s:[], s:[s,s]}, s:[], s:{s:{s:[]}, s:[]}}", "process", "env", "args",
                              "sleep", "3600", "mounts", "linux", "resources", "devices", "devices");
  json_t *env = json_object_get (json_object_get (config, "process"), "env");
  json_t *linux_obj = json_object_get (config, "linux");
  json_t *rules = json_object_get (json_object_get (linux_obj, "resources"), "devices");
  for (int i = 0; i < 20; i++)
    json_array_append_new (env, json_sprintf ("VAR_%d=value-%d", i, i));
  for (int i = 0; i < 12; i++)
    json_array_append_new (json_object_get (config, "mounts"),
                           json_pack ("{s:s, s:s, s:s, s:[s,s,s]}", "destination",
                                      i % 2 ? "/etc/hosts" : "/dev/shm", "source", "/run/x", "type", "bind",
                                      "options", "rbind", "ro", "nosuid"));
  json_array_append_new (rules, json_pack ("{s:b, s:s}", "allow", 0, "access", "rwm"));
  for (int i = 0; i < 10; i++)
    json_array_append_new (rules, json_pack ("{s:b, s:s, s:i, s:i, s:s}", "allow", 1, "type", "c", "major", 1,
                                             "minor", i, "access", "rwm"));
  json_object_set_new (linux_obj, "seccomp", seccomp_default_profile (UINT64_C (0xa80425fb)));
  return config;
}

static int
double_cmp (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

/* What CreateContainer adds for 8 CDI devices (the NVIDIA_VISIBLE_DEVICES
 * check of an unset env, the registry's change check, resolving, the copy
 * of the config and the edits: a node and an env entry per device, a node
 * and two mounts spec-wide), median of 200 runs: the budget is
 * 1 ms. */
static void
test_apply_cost (void **state)
{
  struct fixture *f = *state;
  static const char *const names[] = { "0", "1", "2", "3", "4", "5", "6", "7", NULL };
  char spec[8192], *p = spec;
  double us[200];

  p += sprintf (
      p, "{\"cdiVersion\":\"0.6.0\",\"kind\":\"nvidia.com/gpu\",\"containerEdits\":{\"deviceNodes\":"
         "[{\"path\":\"/dev/nvidiactl\",\"hostPath\":\"/dev/zero\"}],\"mounts\":["
         "{\"hostPath\":\"/etc/hostname\",\"containerPath\":\"/usr/lib/libcuda.so.1\",\"options\":[\"ro\","
         "\"bind\"]},{\"hostPath\":\"/etc/hostname\",\"containerPath\":\"/usr/bin/nvidia-smi\",\"options\":"
         "[\"ro\",\"bind\"]}]},\"devices\":[");
  for (int i = 0; names[i]; i++)
    p += sprintf (p,
                  "%s{\"name\":\"%s\",\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/nvidia%d\","
                  "\"hostPath\":\"/dev/null\"}],\"env\":[\"GPU%d=1\"]}}",
                  i ? "," : "", names[i], i, i);
  strcpy (p, "]}");
  write_spec (f->dir, "gpu.json", spec);
  const char *devices[9];
  char full[8][32];
  for (int i = 0; i < 8; i++)
    {
      snprintf (full[i], sizeof full[i], "nvidia.com/gpu=%d", i);
      devices[i] = full[i];
    }
  devices[8] = NULL;
  for (size_t run = 0; run < sizeof us / sizeof us[0]; run++)
    {
      json_t *config = huskd_like_config ();
      cleanup_strv char **found = NULL;
      struct husk_error *err = NULL;
      struct timespec t0, t1;
      clock_gettime (CLOCK_MONOTONIC, &t0);
      assert_int_equal (cdi_nvidia_visible_devices (f->reg, NULL, &found, &err), 0);
      assert_int_equal (cdi_apply (f->reg, config, devices, &err), 0);
      clock_gettime (CLOCK_MONOTONIC, &t1);
      us[run] = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3;
      assert_int_equal (json_array_size (json_object_get (json_object_get (config, "linux"), "devices")), 9);
      json_decref (config);
    }
  qsort (us, sizeof us / sizeof us[0], sizeof us[0], double_cmp);
  print_message ("CDI for 8 devices on a huskd-sized config: median %.1f us, p90 %.1f us\n", us[100],
                 us[180]);
#ifdef __SANITIZE_ADDRESS__
  assert_true (us[100] < 5000); /* ~7x slower under ASan (~800 us) */
#else
  assert_true (us[100] < 1000);
#endif
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_visible_devices, setup, teardown),
    cmocka_unit_test_setup_teardown (test_visible_devices_refused, setup, teardown),
    cmocka_unit_test_setup_teardown (test_visible_devices_without_all_or_spec, setup, teardown),
    cmocka_unit_test_setup_teardown (test_merge_keeps_each_once, setup, teardown),
    cmocka_unit_test (test_env_modes),
    cmocka_unit_test_setup_teardown (test_gpus_option, setup, teardown),
    cmocka_unit_test_setup_teardown (test_numa_nodes, setup, teardown),
    cmocka_unit_test_setup_teardown (test_apply_cost, setup, teardown),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
