/* Unit tests for AppArmor under CRI (cri/apparmor.c and its step in
 * cri_spec.c) and the runtime's checks (runtime/apparmor.c): every
 * SecurityProfile and old string form to process.apparmorProfile on a
 * host with AppArmor (simulated by the struct huskd fills at start, and a
 * profiles list in a temp file) and without, the field precedence, the
 * refusals naming the profile; husk-default compiles with apparmor_parser.
 * Needs no root and no AppArmor. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

/* Built with -I$(BUILD)/gen -Ulinux, as every test_cri_*.c. */
#include "cri/proto/api.pb-c.h"

#include "cri/apparmor.h"
#include "cri/cri_spec.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/apparmor.h"

#define ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

struct fixture
{
  char dir[64];
  char *profiles_file;
  struct cri_apparmor on;  /* AppArmor host, husk-default loaded */
  struct cri_apparmor off; /* no AppArmor */
  struct image_config image;
  Runtime__V1__ContainerConfig config;
  Runtime__V1__LinuxContainerConfig linux_config;
  Runtime__V1__LinuxContainerSecurityContext sc;
  Runtime__V1__SecurityProfile profile;
  struct cri_spec_input in;
  json_t *spec;
  struct husk_error *err;
};

static char *image_cmd[] = { "sleep", "1", NULL };

static void
write_text (const char *path, const char *text)
{
  struct husk_error *err = NULL;

  assert_int_equal (husk_write_file_replace (path, text, strlen (text), 0644, &err), 0);
}

static int
setup (void **state)
{
  struct fixture *f = xcalloc (1, sizeof *f);

  strcpy (f->dir, "/tmp/test_cri_apparmor.XXXXXX");
  assert_non_null (mkdtemp (f->dir));
  f->profiles_file = xasprintf ("%s/profiles", f->dir);
  write_text (f->profiles_file,
              "husk-default (enforce)\nnode-profile (enforce)\n/usr/bin/thing (complain)\n");
  f->on = (struct cri_apparmor){ .enabled = true, .default_loaded = true, .profiles_file = f->profiles_file };
  f->image.cmd = image_cmd;
  runtime__v1__container_config__init (&f->config);
  runtime__v1__linux_container_config__init (&f->linux_config);
  runtime__v1__linux_container_security_context__init (&f->sc);
  runtime__v1__security_profile__init (&f->profile);
  f->linux_config.security_context = &f->sc;
  f->config.linux = &f->linux_config;
  f->in = (struct cri_spec_input){
    .container_id = ID,
    .config = &f->config,
    .sandbox = { .id = "sandbox1" },
    .image = &f->image,
    .rootfs = f->dir,
    .apparmor = &f->on,
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
  free (f->profiles_file);
  free (f);
  return 0;
}

/* process.apparmorProfile of the built config, NULL when absent. */
static const char *
built_profile (struct fixture *f)
{
  json_decref (f->spec);
  f->spec = NULL;
  if (cri_spec_build (&f->in, &f->spec, &f->err) < 0)
    fail_msg ("cri_spec_build: %s", f->err->msg);
  return json_string_value (json_object_get (json_object_get (f->spec, "process"), "apparmorProfile"));
}

static void
build_fails (struct fixture *f, int errnum, const char *needle)
{
  json_t *spec = NULL;

  husk_error_free (&f->err);
  assert_int_equal (cri_spec_build (&f->in, &spec, &f->err), -1);
  assert_null (spec);
  if (strstr (f->err->msg, needle) == NULL)
    fail_msg ("`%s` does not contain `%s`", f->err->msg, needle);
  assert_int_equal (f->err->errnum, errnum);
}

static void
use_profile (struct fixture *f, Runtime__V1__SecurityProfile__ProfileType type, const char *ref)
{
  f->profile.profile_type = type;
  f->profile.localhost_ref = (char *) (ref ? ref : "");
  f->sc.apparmor = &f->profile;
}

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static void
test_default_is_husk_default (void **state)
{
  struct fixture *f = *state;

  /* Nothing asked: RuntimeDefault, as containerd for non-privileged. */
  assert_string_equal (built_profile (f), CRI_APPARMOR_DEFAULT);
  use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault, NULL);
  assert_string_equal (built_profile (f), CRI_APPARMOR_DEFAULT);
  f->sc.apparmor = NULL;
  f->sc.apparmor_profile = "runtime/default";
  assert_string_equal (built_profile (f), CRI_APPARMOR_DEFAULT);
}

static void
test_privileged_unconfined (void **state)
{
  struct fixture *f = *state;

  f->sc.privileged = true;
  assert_null (built_profile (f));
  use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault, NULL);
  assert_null (built_profile (f));
  /* An explicit Localhost still applies, as containerd. */
  use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost, "node-profile");
  assert_string_equal (built_profile (f), "node-profile");
}

static void
test_unconfined (void **state)
{
  struct fixture *f = *state;

  use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined, NULL);
  assert_null (built_profile (f));
  f->sc.apparmor = NULL;
  f->sc.apparmor_profile = "unconfined";
  assert_null (built_profile (f));
}

static void
test_localhost (void **state)
{
  struct fixture *f = *state;

  use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost, "node-profile");
  assert_string_equal (built_profile (f), "node-profile");
  /* A "localhost/" prefix in the new field is forgiven (containerd). */
  use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost, "localhost/node-profile");
  assert_string_equal (built_profile (f), "node-profile");
  f->sc.apparmor = NULL;
  f->sc.apparmor_profile = "localhost/node-profile";
  assert_string_equal (built_profile (f), "node-profile");
  /* A name with a space before "(" in the list is a different profile. */
  f->sc.apparmor_profile = "localhost//usr/bin/thing";
  assert_string_equal (built_profile (f), "/usr/bin/thing");
}

static void
test_localhost_missing (void **state)
{
  struct fixture *f = *state;

  use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost, "no-such-profile");
  build_fails (f, EAGAIN,
               "AppArmor profile `no-such-profile` (linux.security_context.apparmor, Localhost) is "
               "not loaded on this host");
  /* A prefix of a loaded name is not that name. */
  use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost, "node");
  build_fails (f, EAGAIN, "`node`");
  use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost, "");
  build_fails (f, EINVAL, "linux.security_context.apparmor.localhost_ref: required for Localhost");
  use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost, "bad\nname");
  build_fails (f, EINVAL, "control character 0x0a");
  {
    cleanup_free char *huge = xcalloc (1, 1 << 20);
    memset (huge, 'a', (1 << 20) - 1);
    use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost, huge);
    build_fails (f, EINVAL, "localhost_ref: 1048575 bytes (a profile name has at most 4000)");
    assert_true (strlen (f->err->msg) < 200);
    f->sc.apparmor = NULL;
    f->sc.apparmor_profile = huge;
    build_fails (f, EINVAL, "apparmor_profile: 1048575 bytes");
    assert_true (strlen (f->err->msg) < 200);
    f->sc.apparmor_profile = NULL;
  }
  /* The list cannot be read (no securityfs): the runtime decides. */
  cleanup_free char *missing = xasprintf ("%s/missing", f->dir);
  f->on.profiles_file = missing;
  use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost, "no-such-profile");
  assert_string_equal (built_profile (f), "no-such-profile");
  f->on.profiles_file = f->profiles_file;
}

static void
test_new_field_wins (void **state)
{
  struct fixture *f = *state;

  f->sc.apparmor_profile = "localhost/no-such-profile";
  use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined, NULL);
  assert_null (built_profile (f));
  f->sc.apparmor_profile = "unconfined";
  use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost, "node-profile");
  assert_string_equal (built_profile (f), "node-profile");
}

static void
test_bad_old_string (void **state)
{
  struct fixture *f = *state;

  f->sc.apparmor_profile = "docker-default";
  build_fails (
      f, EINVAL,
      "linux.security_context.apparmor_profile `docker-default`: expected runtime/default, unconfined or "
      "localhost/NAME");
  f->sc.apparmor_profile = "localhost/";
  build_fails (f, EINVAL, "apparmor_profile `localhost/`");
  f->sc.apparmor_profile = NULL;
  use_profile (f, (Runtime__V1__SecurityProfile__ProfileType) 7, NULL);
  build_fails (f, EINVAL, "linux.security_context.apparmor.profile_type: unknown value 7");
}

static void
test_host_without_apparmor (void **state)
{
  struct fixture *f = *state;

  f->in.apparmor = &f->off;
  assert_null (built_profile (f));
  use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__RuntimeDefault, NULL);
  assert_null (built_profile (f));
  use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Localhost, "node-profile");
  build_fails (f, EAGAIN,
               "AppArmor profile `node-profile` (linux.security_context.apparmor, Localhost): AppArmor "
               "is not enabled on this host");
  f->sc.apparmor = NULL;
  f->sc.apparmor_profile = "localhost/node-profile";
  build_fails (f, EAGAIN, "`node-profile`");
  /* The debug CLI builds without huskd's struct: the same as off. */
  f->in.apparmor = NULL;
  f->sc.apparmor_profile = NULL;
  assert_null (built_profile (f));
}

static void
test_default_failed_to_load (void **state)
{
  struct fixture *f = *state;

  f->on.default_loaded = false;
  f->on.default_error = xstrdup ("load AppArmor profile `husk-default`: parser said no");
  build_fails (f, EAGAIN,
               "linux.security_context.apparmor: RuntimeDefault: load AppArmor profile `husk-default`: "
               "parser said no");
  /* Unconfined and privileged containers do not need it. */
  use_profile (f, RUNTIME__V1__SECURITY_PROFILE__PROFILE_TYPE__Unconfined, NULL);
  assert_null (built_profile (f));
  free (f->on.default_error);
  f->on.default_error = NULL;
}

/* husk-default is valid policy for Debian's parser (compiled, not loaded:
 * -Q; -K: no cache).  Skipped where apparmor_parser is not installed. */
static void
test_default_text_compiles (void **state)
{
  struct husk_error *err = NULL;
  (void) state;

  if (access ("/usr/sbin/apparmor_parser", X_OK) != 0 && access ("/sbin/apparmor_parser", X_OK) != 0)
    skip ();
  if (cri_apparmor_parse (NULL, "-QK", cri_apparmor_default_text (), &err) < 0)
    fail_msg ("%s", err->msg);
  assert_non_null (strstr (cri_apparmor_default_text (), "profile " CRI_APPARMOR_DEFAULT " "));
  /* A broken text fails with the parser's own words. */
  assert_int_equal (cri_apparmor_parse (NULL, "-QK", "profile broken { deny mount\n", &err), -1);
  assert_non_null (strstr (err->msg, "-QK` failed (status"));
  husk_error_free (&err);
  assert_int_equal (cri_apparmor_parse ("/nonexistent/apparmor_parser", "-QK", "x", &err), -1);
  assert_non_null (strstr (err->msg, "/nonexistent/apparmor_parser"));
  husk_error_free (&err);
}

/* A parser that floods its stderr, or exits without reading its stdin:
 * the error keeps its last line, and nothing blocks or raises SIGPIPE. */
static void
test_parser_misbehaves (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *flood = xasprintf ("%s/flood", f->dir);
  cleanup_free char *deaf = xasprintf ("%s/deaf", f->dir);
  cleanup_free char *big = xcalloc (1, 4 << 20);
  struct husk_error *err = NULL;

  write_text (flood,
              "#!/bin/sh\n(head -c 3000000 /dev/zero | tr '\\0' x; echo) >&2\necho last words >&2\nexit 3\n");
  write_text (deaf, "#!/bin/sh\nexit 0\n");
  assert_int_equal (chmod (flood, 0755) | chmod (deaf, 0755), 0);
  assert_int_equal (cri_apparmor_parse (flood, "-Kr", "profile x {}\n", &err), -1);
  if (strstr (err->msg, "failed (status 3): last words") == NULL)
    fail_msg ("%s", err->msg);
  husk_error_free (&err);
  memset (big, '#', (4 << 20) - 1);
  assert_int_equal (cri_apparmor_parse (deaf, "-Kr", big, &err), 0);
}

static void
test_runtime_enabled_file (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *path = xasprintf ("%s/enabled", f->dir);

  write_text (path, "Y\n");
  assert_true (apparmor_enabled_at (path));
  write_text (path, "N\n");
  assert_false (apparmor_enabled_at (path));
  write_text (path, "");
  assert_false (apparmor_enabled_at (path));
  unlink (path);
  assert_false (apparmor_enabled_at (path));
}

static void
test_runtime_check_profile (void **state)
{
  struct husk_error *err = NULL;
  char *profile = xstrdup ("");
  (void) state;

  assert_int_equal (apparmor_check_profile (&profile, "process.apparmorProfile", &err), 0);
  assert_null (profile);
  profile = xstrdup ("a\x1b[0mb");
  assert_int_equal (apparmor_check_profile (&profile, "process.apparmorProfile", &err), -1);
  assert_string_equal (err->msg, "process.apparmorProfile: control character 0x1b in the profile name");
  husk_error_free (&err);
  free (profile);
  profile = NULL;
  assert_int_equal (apparmor_check_profile (&profile, "x", &err), 0);
  if (!apparmor_enabled ())
    {
      profile = xstrdup ("unconfined");
      assert_int_equal (apparmor_check_profile (&profile, "x", &err), 0);
      assert_null (profile);
      profile = xstrdup ("some-profile");
      assert_int_equal (apparmor_check_profile (&profile, "process.apparmorProfile", &err), -1);
      assert_non_null (strstr (err->msg, "process.apparmorProfile `some-profile`: AppArmor is not enabled"));
      husk_error_free (&err);
      free (profile);
    }
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_default_is_husk_default, setup, teardown),
    cmocka_unit_test_setup_teardown (test_privileged_unconfined, setup, teardown),
    cmocka_unit_test_setup_teardown (test_unconfined, setup, teardown),
    cmocka_unit_test_setup_teardown (test_localhost, setup, teardown),
    cmocka_unit_test_setup_teardown (test_localhost_missing, setup, teardown),
    cmocka_unit_test_setup_teardown (test_new_field_wins, setup, teardown),
    cmocka_unit_test_setup_teardown (test_bad_old_string, setup, teardown),
    cmocka_unit_test_setup_teardown (test_host_without_apparmor, setup, teardown),
    cmocka_unit_test_setup_teardown (test_default_failed_to_load, setup, teardown),
    cmocka_unit_test_setup_teardown (test_default_text_compiles, setup, teardown),
    cmocka_unit_test_setup_teardown (test_parser_misbehaves, setup, teardown),
    cmocka_unit_test_setup_teardown (test_runtime_enabled_file, setup, teardown),
    cmocka_unit_test_setup_teardown (test_runtime_check_profile, setup, teardown),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
