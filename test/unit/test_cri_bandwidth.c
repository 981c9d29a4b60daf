/* Kubernetes quantities and the pod bandwidth annotations huskd hands to
 * CNI's bandwidth capability. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cri/proto/api.pb-c.h"
#include "cri/pod/sandbox_internal.h"

static void
test_quantities (void **state)
{
  const struct
  {
    const char *text;
    double value;
  } good[] = {
    { "10M", 10e6 },  { "1Gi", 1073741824.0 }, { "500k", 500e3 }, { "1.5M", 1.5e6 },
    { "2048", 2048 }, { "1P", 1e15 },          { "1500m", 1.5 },  { "3Ki", 3072 },
  };
  const char *bad[] = { "", "M", "10 M", "-1M", "+1M", "1e6", "0x10", "inf", "1.M", "10MB", "1mi", NULL };
  double value;

  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    {
      assert_int_equal (sandbox_parse_quantity (good[i].text, &value), 0);
      assert_true (value == good[i].value);
    }
  for (size_t i = 0; bad[i]; i++)
    if (sandbox_parse_quantity (bad[i], &value) == 0)
      fail_msg ("`%s` parsed as %g", bad[i], value);
  assert_int_equal (sandbox_parse_quantity (NULL, &value), -1);
}

static Runtime__V1__PodSandboxConfig__AnnotationsEntry
entry (const char *key, const char *value)
{
  Runtime__V1__PodSandboxConfig__AnnotationsEntry e
      = RUNTIME__V1__POD_SANDBOX_CONFIG__ANNOTATIONS_ENTRY__INIT;

  e.key = (char *) key;
  e.value = (char *) value;
  return e;
}

static void
test_annotations (void **state)
{
  Runtime__V1__PodSandboxConfig config = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
  Runtime__V1__PodSandboxConfig__AnnotationsEntry entries[] = {
    entry ("other", "x"),
    entry ("kubernetes.io/ingress-bandwidth", "1M"),
    entry ("kubernetes.io/egress-bandwidth", "2M"),
    entry ("kubernetes.io/ingress-bandwidth", "10M"),
  };
  Runtime__V1__PodSandboxConfig__AnnotationsEntry *list[4]
      = { &entries[0], &entries[1], &entries[2], &entries[3] };
  struct cni_bandwidth bw;
  struct husk_error *err = NULL;
  bool limited = true;

  assert_int_equal (sandbox_bandwidth (&config, &bw, &limited, &err), 0);
  assert_false (limited);
  config.annotations = list;
  config.n_annotations = 4;
  assert_int_equal (sandbox_bandwidth (&config, &bw, &limited, &err), 0);
  assert_true (limited);
  /* The last of a duplicate key wins, as in a map. */
  assert_int_equal (bw.ingress_rate, 10000000);
  assert_int_equal (bw.egress_rate, 2000000);
  assert_int_equal (bw.ingress_burst, UINT32_MAX);
  assert_int_equal (bw.egress_burst, UINT32_MAX);

  entries[2].value = "fast";
  assert_int_equal (sandbox_bandwidth (&config, &bw, &limited, &err), -1);
  assert_int_equal (err->errnum, EINVAL);
  assert_non_null (strstr (err->msg, "kubernetes.io/egress-bandwidth"));
  assert_non_null (strstr (err->msg, "`fast`"));
  husk_error_free (&err);
  entries[2].value = "10";
  assert_int_equal (sandbox_bandwidth (&config, &bw, &limited, &err), -1);
  assert_non_null (strstr (err->msg, "between 1k and 1P"));
  husk_error_free (&err);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_quantities),
    cmocka_unit_test (test_annotations),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
