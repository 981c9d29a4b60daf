/* The cgroup driver's pure parts: a systemd slice nested by its dashes as
 * systemd does, a pod's cgroup parent mapped to its name below the cgroup
 * mount, the parent's form checked against the configured driver (the
 * error names the parent and the driver), and the cgroup_driver key. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cri/config/config.h"
#include "cri/pod/sandbox.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"

#define assert_error_contains(err, needle)                                                                   \
  do                                                                                                         \
    {                                                                                                        \
      assert_non_null (err);                                                                                 \
      if (strstr ((err)->msg, needle) == NULL)                                                               \
        fail_msg ("error `%s` does not contain `%s`", (err)->msg, needle);                                   \
    }                                                                                                        \
  while (0)

static void
expect_slice (const char *slice, const char *expected)
{
  struct husk_error *err = NULL;
  cleanup_free char *dir = NULL;

  if (cgroup_slice_dir (slice, &dir, &err) < 0)
    fail_msg ("%s: %s", slice, err->msg);
  assert_string_equal (dir, expected);
}

static void
test_slice_dir (void **state)
{
  static const char *const refused[]
      = { "a--b.slice", "-a.slice", "a-.slice", "a.scope", "a/b.slice", ".slice", "kubepods", "a-b-.slice" };
  (void) state;

  expect_slice ("kubepods-burstable-pod1_2.slice",
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice");
  expect_slice ("kubepods.slice", "/kubepods.slice");
  expect_slice ("-.slice", "");
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    {
      struct husk_error *err = NULL;
      char *dir = NULL;

      if (cgroup_slice_dir (refused[i], &dir, &err) == 0)
        fail_msg ("%s: accepted as %s", refused[i], dir);
      assert_null (dir);
      assert_error_contains (err, "invalid systemd slice");
      assert_non_null (strstr (err->msg, refused[i]));
      husk_error_free (&err);
    }
}

static void
expect_name (const char *parent, const char *expected)
{
  struct husk_error *err = NULL;
  cleanup_free char *name = NULL;

  if (sandbox_cgroup_name (parent, &name, &err) < 0)
    fail_msg ("%s: %s", parent, err->msg);
  if (expected == NULL)
    assert_null (name);
  else
    assert_string_equal (name, expected);
}

static void
test_pod_cgroup_name (void **state)
{
  (void) state;
  /* kubelet's systemd form: the last component is the slice. */
  expect_name ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podab_cd.slice",
               "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podab_cd.slice");
  expect_name ("kubepods-besteffort-pod1.slice", "/kubepods.slice/kubepods-besteffort.slice/"
                                                 "kubepods-besteffort-pod1.slice");
  /* cgroupfs: the path, tidied. */
  expect_name ("/kubepods/burstable/podab-cd", "/kubepods/burstable/podab-cd");
  expect_name ("/kubepods//burstable/pod1/", "/kubepods/burstable/pod1");
  expect_name ("/", "");
  expect_name (NULL, NULL);
  expect_name ("", NULL);
}

static void
expect_refused (const char *parent, bool systemd, const char *needle)
{
  struct husk_error *err = NULL;

  assert_int_equal (sandbox_cgroup_check (parent, systemd, &err), -1);
  assert_error_contains (err, needle);
  assert_non_null (strstr (err->msg, parent));
  assert_int_equal (err->errnum, EINVAL);
  husk_error_free (&err);
}

static void
test_parent_against_driver (void **state)
{
  struct husk_error *err = NULL;
  (void) state;

  assert_int_equal (sandbox_cgroup_check ("/kubepods.slice/kubepods-pod1.slice", true, &err), 0);
  assert_int_equal (sandbox_cgroup_check ("/kubepods/pod1", false, &err), 0);
  assert_int_equal (sandbox_cgroup_check (NULL, true, &err), 0);
  assert_int_equal (sandbox_cgroup_check ("", false, &err), 0);
  assert_null (err);
  expect_refused ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice", false,
                  "is a systemd slice, but huskd's cgroup_driver is cgroupfs");
  expect_refused ("/kubepods/burstable/pod1", true,
                  "is not a systemd slice (NAME.slice), but huskd's cgroup_driver is systemd");
  expect_refused ("kubepods--pod1.slice", true, "invalid systemd slice");
  expect_refused ("/kubepods/../etc", false, "must not contain `..`");
}

static void
load_config (const char *text, struct huskd_config *cfg, struct husk_error **err, int expected)
{
  char path[] = "/tmp/husk-cgdrv-XXXXXX";
  int fd = mkstemp (path);

  assert_true (fd >= 0);
  assert_int_equal (husk_write_all (fd, text, strlen (text)), 0);
  close (fd);
  assert_int_equal (huskd_config_load (path, cfg, err), expected);
  unlink (path);
}

static void
test_config_key (void **state)
{
  struct huskd_config cfg;
  struct husk_error *err = NULL;
  (void) state;

  load_config ("{}", &cfg, &err, 0);
  assert_string_equal (cfg.cgroup_driver, access ("/run/systemd/system", F_OK) == 0 ? "systemd" : "cgroupfs");
  huskd_config_clear (&cfg);
  load_config ("{\"cgroup_driver\": \"systemd\"}", &cfg, &err, 0);
  assert_true (huskd_config_systemd_cgroup (&cfg));
  huskd_config_clear (&cfg);
  load_config ("{\"cgroup_driver\": \"cgroupfs\"}", &cfg, &err, 0);
  assert_false (huskd_config_systemd_cgroup (&cfg));
  huskd_config_clear (&cfg);
  load_config ("{\"cgroup_driver\": \"Systemd\"}", &cfg, &err, -1);
  assert_error_contains (err, "cgroup_driver: must be cgroupfs or systemd, not `Systemd`");
  husk_error_free (&err);
  huskd_config_clear (&cfg);
  load_config ("{\"cgroup_driver\": 1}", &cfg, &err, -1);
  assert_error_contains (err, "cgroup_driver: must be a string");
  husk_error_free (&err);
  huskd_config_clear (&cfg);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_slice_dir),
    cmocka_unit_test (test_pod_cgroup_name),
    cmocka_unit_test (test_parent_against_driver),
    cmocka_unit_test (test_config_key),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
