/* Unit tests for image references: docker's normalisation, the grammar's
 * edge cases, the canonical and familiar forms, and the error lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/reference.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define DIGEST "sha256:" HEX64

struct good_case
{
  const char *text;
  const char *domain, *path, *tag, *digest;
  const char *canonical, *familiar;
};

static const struct good_case good_cases[] = {
  { "busybox", "docker.io", "library/busybox", "latest", NULL, "docker.io/library/busybox:latest",
    "busybox:latest" },
  { "library/busybox", "docker.io", "library/busybox", "latest", NULL, "docker.io/library/busybox:latest",
    "busybox:latest" },
  { "docker.io/library/busybox:latest", "docker.io", "library/busybox", "latest", NULL,
    "docker.io/library/busybox:latest", "busybox:latest" },
  { "docker.io/busybox", "docker.io", "library/busybox", "latest", NULL, "docker.io/library/busybox:latest",
    "busybox:latest" },
  { "index.docker.io/busybox:1.36", "docker.io", "library/busybox", "1.36", NULL,
    "docker.io/library/busybox:1.36", "busybox:1.36" },
  { "127.0.0.1:5000/x/y:tag", "127.0.0.1:5000", "x/y", "tag", NULL, "127.0.0.1:5000/x/y:tag",
    "127.0.0.1:5000/x/y:tag" },
  { "localhost/x", "localhost", "x", "latest", NULL, "localhost/x:latest", "localhost/x:latest" },
  { "localhost:5000/a/b/c:1.0", "localhost:5000", "a/b/c", "1.0", NULL, "localhost:5000/a/b/c:1.0",
    "localhost:5000/a/b/c:1.0" },
  { "busybox@" DIGEST, "docker.io", "library/busybox", NULL, DIGEST, "docker.io/library/busybox@" DIGEST,
    "busybox@" DIGEST },
  { "busybox:1.36@" DIGEST, "docker.io", "library/busybox", "1.36", DIGEST,
    "docker.io/library/busybox:1.36@" DIGEST, "busybox:1.36@" DIGEST },
  { "foo/bar", "docker.io", "foo/bar", "latest", NULL, "docker.io/foo/bar:latest", "foo/bar:latest" },
  { "quay.io/coreos/etcd:v3.5.0", "quay.io", "coreos/etcd", "v3.5.0", NULL, "quay.io/coreos/etcd:v3.5.0",
    "quay.io/coreos/etcd:v3.5.0" },
  { "registry.example.com/team/app-name_v2:rc.1-x_Y", "registry.example.com", "team/app-name_v2", "rc.1-x_Y",
    NULL, "registry.example.com/team/app-name_v2:rc.1-x_Y",
    "registry.example.com/team/app-name_v2:rc.1-x_Y" },
  /* docker: no slash means docker.io, so the ":5000" is a tag */
  { "example.com:5000", "docker.io", "library/example.com", "5000", NULL,
    "docker.io/library/example.com:5000", "example.com:5000" },
  { "localhost", "docker.io", "library/localhost", "latest", NULL, "docker.io/library/localhost:latest",
    "localhost:latest" },
  { "[::1]:5000/foo:bar", "[::1]:5000", "foo", "bar", NULL, "[::1]:5000/foo:bar", "[::1]:5000/foo:bar" },
  { "FOO.example/bar", "FOO.example", "bar", "latest", NULL, "FOO.example/bar:latest",
    "FOO.example/bar:latest" },
  { "docker.io/library/a/b", "docker.io", "library/a/b", "latest", NULL, "docker.io/library/a/b:latest",
    "library/a/b:latest" },
  { "a__b/c--d/e.f", "docker.io", "a__b/c--d/e.f", "latest", NULL, "docker.io/a__b/c--d/e.f:latest",
    "a__b/c--d/e.f:latest" },
  { "busybox:Latest", "docker.io", "library/busybox", "Latest", NULL, "docker.io/library/busybox:Latest",
    "busybox:Latest" },
  { "my-registry:8443/ns/img@" DIGEST, "my-registry:8443", "ns/img", NULL, DIGEST,
    "my-registry:8443/ns/img@" DIGEST, "my-registry:8443/ns/img@" DIGEST },
};

static void
expect_str (const char *want, const char *got)
{
  if (want == NULL)
    assert_null (got);
  else
    assert_string_equal (want, got);
}

static void
test_good_references (void **state)
{
  for (size_t i = 0; i < sizeof good_cases / sizeof good_cases[0]; i++)
    {
      const struct good_case *c = &good_cases[i];
      struct husk_error *err = NULL;
      struct reference *ref = NULL;
      cleanup_free char *canonical = NULL, *familiar = NULL;

      if (reference_parse (c->text, &ref, &err) < 0)
        fail_msg ("%s: %s", c->text, err->msg);
      expect_str (c->domain, ref->domain);
      expect_str (c->path, ref->path);
      expect_str (c->tag, ref->tag);
      expect_str (c->digest, ref->digest);
      canonical = reference_string (ref);
      familiar = reference_familiar (ref);
      assert_string_equal (c->canonical, canonical);
      assert_string_equal (c->familiar, familiar);
      reference_free (ref);
    }
}

struct bad_case
{
  const char *text;
  const char *message; /* the whole error line */
};

static const struct bad_case bad_cases[] = {
  { "Busybox", "invalid reference \"Busybox\": repository name must be lowercase" },
  { "docker.io/Library/busybox",
    "invalid reference \"docker.io/Library/busybox\": repository name must be lowercase" },
  { "a:b:c",
    "invalid reference \"a:b:c\": path component \"a:b\" must be lowercase letters and digits, separated "
    "by '.', '_', '__' or dashes" },
  { "", "invalid reference \"\": empty reference" },
  { "busybox:", "invalid reference \"busybox:\": empty tag" },
  { ":tag", "invalid reference \":tag\": empty repository name" },
  { "busybox:-x",
    "invalid reference \"busybox:-x\": tag must be at most 128 letters, digits, '_', '.' or '-', not "
    "starting with '.' or '-'" },
  { "busybox:.x", NULL },
  { "busybox:a b", NULL },
  { "busybox@", "invalid reference \"busybox@\": digest: `` is not a digest (want sha256:<64 hex digits>)" },
  { "busybox@sha256:abc",
    "invalid reference \"busybox@sha256:abc\": digest: `sha256:abc` is not a valid sha256 "
    "digest (want 64 lowercase hex digits)" },
  { "busybox@md5:0123",
    "invalid reference \"busybox@md5:0123\": digest: digest algorithm `md5` is not supported "
    "(only sha256)" },
  { "busybox@sha256:" HEX64 "@x", NULL },
  { HEX64, "invalid reference \"" HEX64 "\": a 64-character hex string is an image ID, not a reference" },
  { "foo//bar", "invalid reference \"foo//bar\": repository name has an empty path component" },
  { "/foo", "invalid reference \"/foo\": repository name has an empty path component" },
  { "foo/", "invalid reference \"foo/\": repository name has an empty path component" },
  { "a..b", NULL },
  { "a___b", NULL },
  { "-a", NULL },
  { "a-", NULL },
  { "a.", NULL },
  { " busybox", NULL },
  { "a/b:c/d", NULL },
  { "example.com:port/foo", "invalid reference \"example.com:port/foo\": \"example.com:port\" is not a valid "
                            "registry host" },
  { "-bad.example/foo", NULL },
  { "bad-.example/foo", NULL },
  { "[::1/foo", NULL },
  { "exa_mple.com/foo", NULL },
};

static void
test_bad_references (void **state)
{
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++)
    {
      const struct bad_case *c = &bad_cases[i];
      struct husk_error *err = NULL;
      struct reference *ref = NULL;
      cleanup_free char *prefix = xasprintf ("invalid reference \"%s\": ", c->text);

      if (reference_parse (c->text, &ref, &err) == 0)
        fail_msg ("`%s` parsed but must not", c->text);
      assert_null (ref);
      assert_non_null (err);
      if (c->message)
        assert_string_equal (c->message, err->msg);
      else
        assert_true (husk_str_has_prefix (err->msg, prefix));
      assert_null (strchr (err->msg, '\n'));
      husk_error_free (&err);
    }
}

static void
test_tag_length (void **state)
{
  char text[8 + 130];
  struct husk_error *err = NULL;
  struct reference *ref = NULL;

  strcpy (text, "busybox:");
  memset (text + 8, 'a', 128);
  text[8 + 128] = '\0';
  assert_int_equal (0, reference_parse (text, &ref, &err));
  assert_int_equal (128, strlen (ref->tag));
  reference_free (ref);
  ref = NULL;
  strcat (text, "a");
  assert_int_equal (-1, reference_parse (text, &ref, &err));
  assert_non_null (strstr (err->msg, "tag must be at most 128"));
  husk_error_free (&err);
}

static void
test_name_length (void **state)
{
  char text[300];
  struct husk_error *err = NULL;
  struct reference *ref = NULL;

  /* "docker.io/" + 245 = 255: the longest name allowed. */
  memset (text, 'a', 245);
  text[245] = '\0';
  memcpy (text, "x/", 2);
  assert_int_equal (0, reference_parse (text, &ref, &err));
  reference_free (ref);
  ref = NULL;
  strcat (text, "b");
  assert_int_equal (-1, reference_parse (text, &ref, &err));
  assert_non_null (strstr (err->msg, "must not be longer than 255 characters"));
  husk_error_free (&err);
}

static void
test_dup_and_repository (void **state)
{
  struct husk_error *err = NULL;
  struct reference *ref = NULL, *copy;
  cleanup_free char *repo = NULL, *copy_text = NULL;

  assert_int_equal (0, reference_parse ("127.0.0.1:5000/x/y:t@" DIGEST, &ref, &err));
  copy = reference_dup (ref);
  reference_free (ref);
  repo = reference_repository (copy);
  copy_text = reference_string (copy);
  assert_string_equal ("127.0.0.1:5000/x/y", repo);
  assert_string_equal ("127.0.0.1:5000/x/y:t@" DIGEST, copy_text);
  reference_free (copy);
  reference_free (NULL);
}

static void
test_domain_validation (void **state)
{
  assert_true (reference_domain_is_valid ("docker.io"));
  assert_true (reference_domain_is_valid ("127.0.0.1:5000"));
  assert_true (reference_domain_is_valid ("localhost"));
  assert_true (reference_domain_is_valid ("[::1]"));
  assert_true (reference_domain_is_valid ("[fe80::1]:443"));
  assert_true (reference_domain_is_valid ("a-b.c-d.example"));
  assert_false (reference_domain_is_valid (""));
  assert_false (reference_domain_is_valid ("a..b"));
  assert_false (reference_domain_is_valid ("host:"));
  assert_false (reference_domain_is_valid ("host:12a"));
  assert_false (reference_domain_is_valid ("[::1]x"));
  assert_false (reference_domain_is_valid ("-host"));
  assert_false (reference_domain_is_valid ("ho_st"));
}

/* Parsing the canonical form again gives the same reference. */
static void
test_round_trip (void **state)
{
  for (size_t i = 0; i < sizeof good_cases / sizeof good_cases[0]; i++)
    {
      struct husk_error *err = NULL;
      struct reference *ref = NULL;
      cleanup_free char *again = NULL;

      assert_int_equal (0, reference_parse (good_cases[i].canonical, &ref, &err));
      again = reference_string (ref);
      assert_string_equal (good_cases[i].canonical, again);
      reference_free (ref);
      ref = NULL;
      assert_int_equal (0, reference_parse (good_cases[i].familiar, &ref, &err));
      free (again);
      again = reference_string (ref);
      assert_string_equal (good_cases[i].canonical, again);
      reference_free (ref);
    }
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_good_references),    cmocka_unit_test (test_bad_references),
    cmocka_unit_test (test_tag_length),         cmocka_unit_test (test_name_length),
    cmocka_unit_test (test_dup_and_repository), cmocka_unit_test (test_domain_validation),
    cmocka_unit_test (test_round_trip),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
