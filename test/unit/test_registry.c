/* Tests of the registry client.  Pure parts first (WWW-Authenticate,
 * platform selection, hosts config, URLs, error documents); then pulls from
 * real registries started with hack/registry.sh (plain and htpasswd) holding
 * the images of hack/test-images.sh, and from test/fake-registry.py, which
 * misbehaves on purpose (corrupt blobs, 503, 429, cut connections, tokens). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/digest.h"
#include "image/hosts.h"
#include "image/reference.h"
#include "image/registry.h"
#include "image/registry_internal.h"

/* --- helpers ----------------------------------------------------------- */

static void
assert_ok (int rc, struct husk_error *err)
{
  if (rc < 0)
    fail_msg ("unexpected error: %s", err ? err->msg : "(none)");
}

static void
assert_contains (const char *haystack, const char *needle)
{
  if (haystack == NULL || strstr (haystack, needle) == NULL)
    fail_msg ("`%s` does not contain `%s`", haystack ? haystack : "(null)", needle);
}

static struct reference *
parse_ref (const char *text)
{
  struct husk_error *err = NULL;
  struct reference *ref = NULL;

  assert_ok (reference_parse (text, &ref, &err), err);
  return ref;
}

static struct reference *parse_reff (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
static struct reference *
parse_reff (const char *fmt, ...)
{
  cleanup_free char *text = NULL;
  va_list ap;

  va_start (ap, fmt);
  if (vasprintf (&text, fmt, ap) < 0)
    abort ();
  va_end (ap);
  return parse_ref (text);
}

/* --- WWW-Authenticate -------------------------------------------------- */

static void
test_auth_bearer (void **state)
{
  struct registry_challenge *c = NULL;
  size_t n = 0;
  struct husk_error *err = NULL;

  assert_ok (
      registry_parse_www_authenticate ("Bearer realm=\"https://auth.docker.io/token\",service=\"registry."
                                       "docker.io\",scope=\"repository:library/busybox:pull\"",
                                       &c, &n, &err),
      err);
  assert_int_equal (1, n);
  assert_string_equal ("bearer", c[0].scheme);
  assert_int_equal (3, c[0].n_params);
  assert_string_equal ("https://auth.docker.io/token", registry_challenge_param (&c[0], "realm"));
  assert_string_equal ("registry.docker.io", registry_challenge_param (&c[0], "SERVICE"));
  assert_string_equal ("repository:library/busybox:pull", registry_challenge_param (&c[0], "scope"));
  assert_null (registry_challenge_param (&c[0], "error"));
  registry_challenges_free (c, n);
}

static void
test_auth_quoting (void **state)
{
  struct registry_challenge *c = NULL;
  size_t n = 0;
  struct husk_error *err = NULL;

  /* Commas and '=' inside quotes, escapes, spaces around '=', bare tokens. */
  assert_ok (registry_parse_www_authenticate ("BEARER  realm = \"https://a.example/t?x=1,y=2\" ,  "
                                              "scope=\"repository:a/b:pull,push\",error=insufficient_scope, "
                                              "msg=\"say \\\"hi\\\", ok\"",
                                              &c, &n, &err),
             err);
  assert_int_equal (1, n);
  assert_string_equal ("bearer", c[0].scheme);
  assert_int_equal (4, c[0].n_params);
  assert_string_equal ("https://a.example/t?x=1,y=2", registry_challenge_param (&c[0], "realm"));
  assert_string_equal ("repository:a/b:pull,push", registry_challenge_param (&c[0], "scope"));
  assert_string_equal ("insufficient_scope", registry_challenge_param (&c[0], "error"));
  assert_string_equal ("say \"hi\", ok", registry_challenge_param (&c[0], "msg"));
  registry_challenges_free (c, n);
}

static void
test_auth_several_challenges (void **state)
{
  struct registry_challenge *c = NULL;
  size_t n = 0;
  struct husk_error *err = NULL;

  assert_ok (registry_parse_www_authenticate ("Negotiate abc/+9==, Basic realm=\"Registry Realm\", "
                                              "Bearer realm=\"https://t.example/token\",service=s",
                                              &c, &n, &err),
             err);
  assert_int_equal (3, n);
  assert_string_equal ("negotiate", c[0].scheme);
  assert_string_equal ("abc/+9==", registry_challenge_param (&c[0], "token68"));
  assert_string_equal ("basic", c[1].scheme);
  assert_string_equal ("Registry Realm", registry_challenge_param (&c[1], "realm"));
  assert_string_equal ("bearer", c[2].scheme);
  assert_string_equal ("s", registry_challenge_param (&c[2], "service"));
  registry_challenges_free (c, n);

  assert_ok (registry_parse_www_authenticate ("Basic", &c, &n, &err), err);
  assert_int_equal (1, n);
  assert_int_equal (0, c[0].n_params);
  registry_challenges_free (c, n);
}

static void
test_auth_errors (void **state)
{
  static const struct
  {
    const char *header, *message;
  } cases[] = {
    { "Bearer realm=\"https://x", "WWW-Authenticate `Bearer realm=\"https://x`: unterminated quoted string" },
    { "", "WWW-Authenticate ``: no challenge" },
    { " , ,", "WWW-Authenticate ` , ,`: no challenge" },
    { "realm=\"x\"", "WWW-Authenticate `realm=\"x\"`: parameter before any scheme" },
    { "Bearer service=x, realm=", "WWW-Authenticate `Bearer service=x, realm=`: missing parameter value" },
    { "Bearer realm=\"x\", (bad)",
      "WWW-Authenticate `Bearer realm=\"x\", (bad)`: unexpected `(` at offset 18" },
  };

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      struct registry_challenge *c = NULL;
      size_t n = 0;
      struct husk_error *err = NULL;

      assert_int_equal (-1, registry_parse_www_authenticate (cases[i].header, &c, &n, &err));
      assert_string_equal (cases[i].message, err->msg);
      husk_error_free (&err);
    }
}

/* --- platforms --------------------------------------------------------- */

#define D(c)                                                                                                 \
  "sha256:" c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c  \
      c c c c c c c c c c c c c c c c

static const char sample_index[]
    = "{\"schemaVersion\":2,\"manifests\":["
      "{\"digest\":\"" D (
          "1") "\",\"platform\":{\"os\":\"linux\",\"architecture\":"
               "\"amd64\"}},"
               "{\"digest\":\"" D (
                   "2") "\",\"platform\":{\"os\":\"linux\",\"architecture\":"
                        "\"arm64\",\"variant\":\"v8\"}},"
                        "{\"digest\":\"" D (
                            "3") "\",\"platform\":{\"os\":\"linux\",\"architecture\":"
                                 "\"arm\",\"variant\":\"v6\"}},"
                                 "{\"digest\":\"" D (
                                     "4") "\",\"platform\":{\"os\":\"linux\",\"architecture\":"
                                          "\"arm\",\"variant\":\"v7\"}},"
                                          "{\"digest\":\"" D (
                                              "5") "\",\"platform\":{\"os\":\"unknown\",\"architecture\":"
                                                   "\"unknown\"}},"
                                                   "{\"digest\":\"" D (
                                                       "6") "\",\"platform\":{\"os\":\"windows\","
                                                            "\"architecture\":"
                                                            "\"amd64\"}},"
                                                            "{\"digest\":\"" D (
                                                                "7") "\",\"platform\":{\"os\":\"linux\","
                                                                     "\"architecture\":"
                                                                     "\"amd64\",\"variant\":\"v3\"}}]}";

static void
expect_platform (const char *index, const char *platform, const char *want)
{
  char digest[DIGEST_STR_SIZE];
  struct husk_error *err = NULL;

  if (registry_select_platform (index, platform, digest, &err) < 0)
    fail_msg ("%s: %s", platform ? platform : "(default)", err->msg);
  assert_string_equal (want, digest);
}

static void
test_platform_selection (void **state)
{
  /* NULL is the host's platform */
#if defined(__x86_64__)
  expect_platform (sample_index, NULL, D ("1"));
  assert_string_equal ("linux/amd64", registry_default_platform ());
#elif defined(__aarch64__)
  expect_platform (sample_index, NULL, D ("2"));
  assert_string_equal ("linux/arm64/v8", registry_default_platform ());
#endif
  expect_platform (sample_index, "linux/amd64", D ("1"));
  expect_platform (sample_index, "linux/x86_64", D ("1"));
  expect_platform (sample_index, "linux/amd64/v3", D ("7"));
  expect_platform (sample_index, "linux/arm64", D ("2"));
  expect_platform (sample_index, "linux/arm64/v8", D ("2"));
  expect_platform (sample_index, "linux/aarch64", D ("2"));
  expect_platform (sample_index, "linux/arm", D ("4")); /* v7 is what "arm" means */
  expect_platform (sample_index, "linux/arm/v6", D ("3"));
  expect_platform (sample_index, "windows/amd64", D ("6"));
  /* arm64 without a variant in the index still matches arm64/v8 */
  expect_platform (
      "{\"manifests\":[{\"digest\":\"" D ("9") "\",\"platform\":{\"os\":\"linux\",\"architecture\":"
                                               "\"arm64\"}}]}",
      "linux/arm64/v8", D ("9"));
}

static void
test_platform_errors (void **state)
{
  static const struct
  {
    const char *index, *platform, *message;
  } cases[] = {
    { sample_index, "linux/s390x",
      "no manifest for platform linux/s390x in the index (available: linux/amd64, linux/arm64/v8, "
      "linux/arm/v6, "
      "linux/arm/v7, windows/amd64, linux/amd64/v3)" },
    { sample_index, "linux/arm/v5", NULL },
    { sample_index, "linux", "platform `linux`: want os/arch or os/arch/variant" },
    { sample_index, "linux/arm/v7/x", "platform `linux/arm/v7/x`: want os/arch or os/arch/variant" },
    { "{\"manifests\": [", "linux/amd64", NULL },
    { "{\"schemaVersion\":2}", "linux/amd64", "index has no `manifests` array" },
    { "{\"manifests\":[]}", "linux/amd64",
      "no manifest for platform linux/amd64 in the index (available: none)" },
    { "{\"manifests\":[{\"digest\":\"sha256:12\",\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}}]"
      "}",
      "linux/amd64",
      "index: manifests[0].digest: `sha256:12` is not a valid sha256 digest (want 64 lowercase hex "
      "digits)" },
  };

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      char digest[DIGEST_STR_SIZE];
      struct husk_error *err = NULL;

      assert_int_equal (-1, registry_select_platform (cases[i].index, cases[i].platform, digest, &err));
      if (cases[i].message)
        assert_string_equal (cases[i].message, err->msg);
      husk_error_free (&err);
    }
  {
    char digest[DIGEST_STR_SIZE];
    struct husk_error *err = NULL;
    assert_int_equal (-1, registry_select_platform ("{\"manifests\": [", "linux/amd64", digest, &err));
    assert_contains (err->msg, "index: invalid JSON at line 1 column");
    husk_error_free (&err);
  }
}

/* --- hosts config ------------------------------------------------------ */

static struct hosts_config *
parse_hosts (const char *json)
{
  struct hosts_config *cfg = NULL;
  struct husk_error *err = NULL;

  assert_ok (hosts_config_parse (json, "test.json", &cfg, &err), err);
  return cfg;
}

static void
expect_endpoint (const struct hosts_endpoint *ep, const char *base_url, const char *host, bool insecure,
                 bool mirror)
{
  assert_string_equal (base_url, ep->base_url);
  assert_string_equal (host, ep->host);
  assert_int_equal (insecure, ep->insecure);
  assert_int_equal (mirror, ep->is_mirror);
}

static void
test_hosts_endpoints (void **state)
{
  struct hosts_config *cfg = parse_hosts (
      "{\"registries\": {"
      " \"docker.io\": {\"mirrors\": [\"http://127.0.0.1:5000\", \"https://mirror.example/v2/\", "
      "   \"localhost:5002/prefix/\", {\"url\": \"https://self-signed.example\", \"insecure\": true},"
      "   \"secure.example:8443\", \"insecure.example\"], \"insecure\": false},"
      " \"127.0.0.1:5001\": {\"insecure\": true},"
      " \"insecure.example\": {\"insecure\": true},"
      " \"reg.example\": {\"insecure\": true},"
      " \"only.example\": {\"mirrors\": [\"https://m.example\"], \"mirrorsOnly\": true},"
      " \"server.example\": {\"server\": \"https://10.0.0.1:8443/\", \"insecure\": true}}}");
  struct hosts_endpoint *eps = NULL;
  size_t n;

  n = hosts_config_endpoints (cfg, "docker.io", &eps);
  assert_int_equal (7, n);
  expect_endpoint (&eps[0], "http://127.0.0.1:5000", "127.0.0.1:5000", false, true);
  expect_endpoint (&eps[1], "https://mirror.example", "mirror.example", false, true);
  expect_endpoint (&eps[2], "http://localhost:5002/prefix", "localhost:5002", false, true);
  expect_endpoint (&eps[3], "https://self-signed.example", "self-signed.example", true, true);
  expect_endpoint (&eps[4], "https://secure.example:8443", "secure.example:8443", false, true);
  expect_endpoint (&eps[5], "http://insecure.example", "insecure.example", true, true);
  expect_endpoint (&eps[6], "https://registry-1.docker.io", "docker.io", false, false);
  hosts_endpoints_free (eps, n);

  n = hosts_config_endpoints (cfg, "127.0.0.1:5001", &eps);
  assert_int_equal (1, n);
  expect_endpoint (&eps[0], "http://127.0.0.1:5001", "127.0.0.1:5001", true, false);
  hosts_endpoints_free (eps, n);

  n = hosts_config_endpoints (cfg, "reg.example", &eps);
  assert_int_equal (1, n);
  expect_endpoint (&eps[0], "http://reg.example", "reg.example", true, false);
  hosts_endpoints_free (eps, n);

  n = hosts_config_endpoints (cfg, "only.example", &eps);
  assert_int_equal (1, n);
  expect_endpoint (&eps[0], "https://m.example", "m.example", false, true);
  hosts_endpoints_free (eps, n);

  n = hosts_config_endpoints (cfg, "server.example", &eps);
  assert_int_equal (1, n);
  expect_endpoint (&eps[0], "https://10.0.0.1:8443", "server.example", true, false);
  hosts_endpoints_free (eps, n);

  assert_true (hosts_config_is_insecure (cfg, "127.0.0.1:5001"));
  assert_false (hosts_config_is_insecure (cfg, "docker.io"));
  hosts_config_free (cfg);
}

static void
test_hosts_defaults (void **state)
{
  static const struct
  {
    const char *domain, *base_url;
  } cases[] = {
    { "docker.io", "https://registry-1.docker.io" }, { "quay.io", "https://quay.io" },
    { "127.0.0.1:5000", "http://127.0.0.1:5000" },   { "127.1.2.3", "http://127.1.2.3" },
    { "localhost:5000", "http://localhost:5000" },   { "[::1]:5000", "http://[::1]:5000" },
    { "128.0.0.1:5000", "https://128.0.0.1:5000" },  { "localhost.example", "https://localhost.example" },
  };
  struct hosts_config *empty = parse_hosts ("{}");

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int with_cfg = 0; with_cfg < 2; with_cfg++)
      {
        struct hosts_endpoint *eps = NULL;
        size_t n = hosts_config_endpoints (with_cfg ? empty : NULL, cases[i].domain, &eps);
        assert_int_equal (1, n);
        expect_endpoint (&eps[0], cases[i].base_url, cases[i].domain, false, false);
        hosts_endpoints_free (eps, n);
      }
  hosts_config_free (empty);
  assert_true (hosts_is_loopback ("localhost"));
  assert_true (hosts_is_loopback ("LOCALHOST:80"));
  assert_true (hosts_is_loopback ("127.0.0.1"));
  assert_true (hosts_is_loopback ("[::1]"));
  assert_false (hosts_is_loopback ("10.0.0.1"));
  assert_false (hosts_is_loopback ("[::2]:5000"));
  assert_false (hosts_is_loopback ("127.example"));
}

static void
test_hosts_errors (void **state)
{
  static const struct
  {
    const char *json, *message;
  } cases[] = {
    { "{\"registries\": {\n  \"docker.io\": {\"mirrors\": [\"http://x\",]}}}",
      "parse registries config `test.json`: line 2 column 40: unexpected token near ']'" },
    { "[]", "registries config `test.json`: top level must be an object" },
    { "{\"mirrors\": []}", "registries config `test.json`: unknown key \"mirrors\" (known: registries)" },
    { "{\"registries\": []}",
      "registries config `test.json`: registries: must be an object keyed by registry host" },
    { "{\"registries\": {\"docker.io\": {\"mirrors\": \"http://x\"}}}",
      "registries config `test.json`: registries.\"docker.io\".mirrors: must be an array of URLs" },
    { "{\"registries\": {\"docker.io\": {\"mirrors\": [42]}}}",
      "registries config `test.json`: registries.\"docker.io\".mirrors[0]: must be a URL string or an object "
      "with "
      "\"url\"" },
    { "{\"registries\": {\"docker.io\": {\"mirrors\": [\"ftp://x\"]}}}",
      "registries config `test.json`: registries.\"docker.io\".mirrors[0]: \"ftp://x\": scheme must be http "
      "or "
      "https" },
    { "{\"registries\": {\"docker.io\": {\"mirrors\": [\"http://u:p@x\"]}}}",
      "registries config `test.json`: registries.\"docker.io\".mirrors[0]: \"http://u:p@x\": credentials, "
      "query "
      "and fragment are not allowed" },
    { "{\"registries\": {\"docker.io\": {\"insecure\": \"yes\"}}}",
      "registries config `test.json`: registries.\"docker.io\".insecure: must be true or false" },
    { "{\"registries\": {\"docker.io\": {\"mirrorOnly\": true}}}",
      "registries config `test.json`: registries.\"docker.io\": unknown key \"mirrorOnly\" (known: mirrors, "
      "mirrorsOnly, insecure, server)" },
    { "{\"registries\": {\"docker.io\": {\"mirrorsOnly\": true}}}",
      "registries config `test.json`: registries.\"docker.io\": mirrorsOnly needs at least one mirror" },
    { "{\"registries\": {\"bad host\": {}}}", "registries config `test.json`: registries.\"bad host\": not a "
                                              "registry host (want host or host:port)" },
    { "{\"registries\": {\"a\": {\"mirrors\": [{\"url\": \"http://m\", \"skip\": 1}]}}}",
      "registries config `test.json`: registries.\"a\".mirrors[0]: unknown key \"skip\"" },
    { "{\"registries\": {\"a\": {\"server\": 1}}}",
      "registries config `test.json`: registries.\"a\".server: must be a URL string" },
    { "{\"registries\": {\"a\": {}, \"a\": {}}}", NULL },
  };

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      struct hosts_config *cfg = NULL;
      struct husk_error *err = NULL;

      assert_int_equal (-1, hosts_config_parse (cases[i].json, "test.json", &cfg, &err));
      assert_null (cfg);
      if (cases[i].message)
        assert_string_equal (cases[i].message, err->msg);
      else
        assert_contains (err->msg, "test.json");
      husk_error_free (&err);
    }
}

static int
write_text (const char *path, const char *text, struct husk_error **err)
{
  return husk_write_file_atomic (path, text, strlen (text), 0644, err);
}

static char *
error_text (const char *body)
{
  return registry_error_from_body (body, strlen (body), "fallback");
}

static void
test_hosts_load_file (void **state)
{
  char dir[] = "/tmp/husk-test-hosts-XXXXXX";
  cleanup_free char *path = NULL;
  struct hosts_config *cfg = NULL;
  struct husk_error *err = NULL;
  struct hosts_endpoint *eps = NULL;
  size_t n;
  int rc;

  assert_non_null (mkdtemp (dir));
  path = xasprintf ("%s/registries.json", dir);
  assert_ok (
      write_text (path, "{\"registries\":{\"docker.io\":{\"mirrors\":[\"http://127.0.0.1:9\"]}}}", &err),
      err);
  rc = hosts_config_load (path, &cfg, &err);
  if (rc == 0)
    {
      n = hosts_config_endpoints (cfg, "docker.io", &eps);
      assert_int_equal (2, n);
      assert_string_equal ("http://127.0.0.1:9", eps[0].base_url);
      hosts_endpoints_free (eps, n);
      hosts_config_free (cfg);
      cfg = NULL;
      assert_ok (write_text (path, "{\n\n  \"registries\": x}", &err), err);
      rc = hosts_config_load (path, &cfg, &err) == -1 ? 0 : -2;
    }
  unlink (path);
  if (rc == 0)
    {
      cleanup_free char *want
          = xasprintf ("parse registries config `%s`: line 3 column 17: invalid token near 'x'", path);
      assert_string_equal (want, err->msg);
      husk_error_free (&err);
      assert_int_equal (-1, hosts_config_load (path, &cfg, &err));
      assert_int_equal (ENOENT, err->errnum);
      assert_contains (err->msg, path);
    }
  husk_error_free (&err);
  rmdir (dir);
  assert_int_equal (0, rc);
}

/* --- small pure helpers ------------------------------------------------ */

static void
test_url_and_errors (void **state)
{
  struct registry_options opts;
  struct registry_client *client;
  cleanup_free char *url = registry_url ("http://127.0.0.1:5000", "x/y", "manifests", "latest");
  cleanup_free char *url2
      = registry_url ("https://m.example/prefix", "library/busybox", "blobs", "sha256:ab");
  cleanup_free char *e1 = NULL, *e2 = NULL, *e3 = NULL, *e4 = NULL, *e5 = NULL;
  static const char two[]
      = "{\"errors\":[{\"code\":\"DENIED\",\"message\":\"requested access to the resource is "
        "denied\"},{\"code\":\"NAME_UNKNOWN\",\"message\":\"\"}]}";

  assert_string_equal ("http://127.0.0.1:5000/v2/x/y/manifests/latest", url);
  assert_string_equal ("https://m.example/prefix/v2/library/busybox/blobs/sha256:ab", url2);

  e1 = error_text ("{\"errors\":[{\"code\":\"UNAUTHORIZED\",\"message\":\"authentication required\","
                   "\"detail\":null}]}");
  e2 = error_text (two);
  e3 = registry_error_from_body ("<html>502 Bad Gateway</html>", 28, "HTTP status 502");
  e4 = registry_error_from_body (NULL, 0, "manifest unknown");
  e5 = error_text ("{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\",\"message\":\"manifest unknown\"}]}");
  assert_string_equal ("unauthorized: authentication required", e1);
  assert_string_equal ("denied: requested access to the resource is denied; name unknown", e2);
  assert_string_equal ("HTTP status 502", e3);
  assert_string_equal ("manifest unknown", e4);
  assert_string_equal ("manifest unknown", e5);

  registry_options_init (&opts);
  assert_int_equal (4, opts.parallelism);
  assert_int_equal (3, opts.retries);
  client = registry_client_new (&opts);
  assert_int_equal (200, registry_retry_delay_ms (client, 1, 0));
  assert_int_equal (400, registry_retry_delay_ms (client, 2, 0));
  assert_int_equal (800, registry_retry_delay_ms (client, 3, 0));
  assert_int_equal (3000, registry_retry_delay_ms (client, 1, 3));
  assert_int_equal (10000, registry_retry_delay_ms (client, 1, 3600));
  assert_string_equal ("husk/" HUSK_VERSION, client->user_agent);
  registry_client_free (client);

  assert_true (registry_media_type_is_index (REGISTRY_MEDIA_OCI_INDEX));
  assert_true (registry_media_type_is_index (REGISTRY_MEDIA_DOCKER_LIST));
  assert_false (registry_media_type_is_index (REGISTRY_MEDIA_OCI_MANIFEST));
  assert_false (registry_media_type_is_index (NULL));
}

/* --- live registries --------------------------------------------------- */

#define AUTH_USER "husk"
#define AUTH_PASS "s3cret"

struct live
{
  char *srcdir;
  char *tmp;
  char *images;
  char *addr;      /* plain docker-registry */
  char *auth_addr; /* docker-registry with htpasswd */
  char *fake_addr; /* test/fake-registry.py */
  char *tls_addr;  /* the same over HTTPS with a self-signed certificate */
  pid_t fake_pid;
  pid_t tls_pid;
};

static struct live live = { .fake_pid = -1, .tls_pid = -1 };

/* Runs a shell command; returns its stdout (trimmed) or NULL if it failed. */
static char *
run_capture (const char *cmd)
{
  FILE *p = popen (cmd, "r");
  char *out = NULL;
  size_t len = 0;
  char buf[4096];
  size_t n;
  int status;

  if (p == NULL)
    return NULL;
  while ((n = fread (buf, 1, sizeof buf, p)) > 0)
    {
      out = xrealloc (out, len + n + 1);
      memcpy (out + len, buf, n);
      len += n;
    }
  status = pclose (p);
  if (status != 0)
    {
      fprintf (stderr, "test_registry: `%s` failed (status %d)\n", cmd, status);
      free (out);
      return NULL;
    }
  if (out == NULL)
    out = xstrdup ("");
  out[len] = '\0';
  while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' '))
    out[--len] = '\0';
  return out;
}

static int
run_ok (const char *cmd)
{
  cleanup_free char *out = run_capture (cmd);

  return out ? 0 : -1;
}

/* DIR or one of its parents that holds hack/registry.sh. */
static char *
srcdir_above (const char *dir)
{
  char path[4096];

  snprintf (path, sizeof path, "%s", dir);
  for (int up = 0; up < 6; up++)
    {
      cleanup_free char *probe = xasprintf ("%s/hack/registry.sh", path);
      char *slash;
      if (access (probe, X_OK) == 0)
        return xstrdup (path);
      slash = strrchr (path, '/');
      if (slash == NULL || slash == path)
        break;
      *slash = '\0';
    }
  return NULL;
}

/* $HUSK_SRCDIR, else above the working directory, else above the binary. */
static char *
find_srcdir (void)
{
  const char *env = getenv ("HUSK_SRCDIR");
  char cwd[4096];
  char exe[4096];
  ssize_t n;
  char *found = NULL;

  if (env)
    return xstrdup (env);
  if (getcwd (cwd, sizeof cwd) != NULL)
    found = srcdir_above (cwd);
  n = readlink ("/proc/self/exe", exe, sizeof exe - 1);
  if (found == NULL && n > 0)
    {
      exe[n] = '\0';
      found = srcdir_above (exe);
    }
  return found;
}

/* Starts test/fake-registry.py (over HTTPS when TLS); *ADDR gets its address. */
static int
start_fake_registry (bool tls, pid_t *pid, char **addr)
{
  cleanup_free char *script = xasprintf ("%s/test/fake-registry.py", live.srcdir);
  cleanup_free char *portfile = xasprintf ("%s/%s.port", live.tmp, tls ? "tls" : "fake");
  cleanup_free char *cert = xasprintf ("%s/cert.pem", live.tmp);
  cleanup_free char *key = xasprintf ("%s/key.pem", live.tmp);

  *pid = fork ();
  if (*pid < 0)
    return -1;
  if (*pid == 0)
    {
      if (tls)
        execlp ("python3", "python3", script, portfile, cert, key, (char *) NULL);
      else
        execlp ("python3", "python3", script, portfile, (char *) NULL);
      _exit (127);
    }
  for (int i = 0; i < 200; i++)
    {
      cleanup_free char *port = NULL;
      size_t len;
      struct husk_error *err = NULL;
      if (husk_read_file (portfile, &port, &len, &err) == 0)
        {
          port[strcspn (port, "\n")] = '\0';
          *addr = xasprintf ("127.0.0.1:%s", port);
          return 0;
        }
      husk_error_free (&err);
      if (waitpid (*pid, NULL, WNOHANG) != 0)
        return -1;
      usleep (25000);
    }
  return -1;
}

static void
stop_process (pid_t pid)
{
  if (pid > 0)
    {
      kill (pid, SIGTERM);
      waitpid (pid, NULL, 0);
    }
}

static int
live_teardown (void **state)
{
  if (live.tmp)
    {
      cleanup_free char *stop1 = xasprintf ("'%s/hack/registry.sh' stop '%s/plain'", live.srcdir, live.tmp);
      cleanup_free char *stop2 = xasprintf ("'%s/hack/registry.sh' stop '%s/auth'", live.srcdir, live.tmp);
      struct husk_error *err = NULL;
      run_ok (stop1);
      run_ok (stop2);
      if (husk_rm_rf (live.tmp, &err) < 0)
        husk_error_free (&err);
    }
  stop_process (live.fake_pid);
  stop_process (live.tls_pid);
  free (live.srcdir);
  free (live.tmp);
  free (live.images);
  free (live.addr);
  free (live.auth_addr);
  free (live.fake_addr);
  free (live.tls_addr);
  live = (struct live){ .fake_pid = -1, .tls_pid = -1 };
  return 0;
}

static int
live_setup_steps (void)
{
  const char *images_env = getenv ("HUSK_TEST_IMAGES");
  cleanup_free char *cmd = NULL;
  char tmpl[] = "/tmp/husk-test-registry-XXXXXX";

  live.srcdir = find_srcdir ();
  if (live.srcdir == NULL || mkdtemp (tmpl) == NULL)
    return -1;
  live.tmp = xstrdup (tmpl);
  if (images_env)
    live.images = xstrdup (images_env);
  else if (getenv ("BUILD_DIR")) /* set by test/run-all.sh */
    live.images = xasprintf ("%s/test-images", getenv ("BUILD_DIR"));
  else
    live.images = xasprintf ("%s/build/test-images", live.srcdir);
  cmd = xasprintf ("'%s/hack/registry.sh' start '%s/plain'", live.srcdir, live.tmp);
  if ((live.addr = run_capture (cmd)) == NULL)
    return -1;
  free (cmd);
  cmd = xasprintf ("'%s/hack/registry.sh' start '%s/auth' --htpasswd " AUTH_USER ":" AUTH_PASS, live.srcdir,
                   live.tmp);
  if ((live.auth_addr = run_capture (cmd)) == NULL)
    return -1;
  free (cmd);
  cmd = xasprintf ("'%s/hack/test-images.sh' '%s' --push '%s' busybox multiarch big", live.srcdir,
                   live.images, live.addr);
  if (run_ok (cmd) < 0)
    return -1;
  free (cmd);
  cmd = xasprintf ("'%s/hack/test-images.sh' '%s' --push '%s' --creds " AUTH_USER ":" AUTH_PASS " busybox",
                   live.srcdir, live.images, live.auth_addr);
  if (run_ok (cmd) < 0)
    return -1;
  free (cmd);
  cmd = xasprintf (
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
      "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout '%s/key.pem' -out '%s/cert.pem' "
      "2>/dev/null",
      live.tmp, live.tmp);
  if (run_ok (cmd) < 0)
    return -1;
  if (start_fake_registry (false, &live.fake_pid, &live.fake_addr) < 0)
    return -1;
  return start_fake_registry (true, &live.tls_pid, &live.tls_addr);
}

static int
live_setup (void **state)
{
  if (live_setup_steps () == 0)
    return 0;
  fprintf (stderr, "test_registry: could not set up the test registries\n");
  live_teardown (state);
  return -1;
}

static struct registry_client *
test_client (const struct hosts_config *hosts)
{
  struct registry_options opts;

  registry_options_init (&opts);
  opts.hosts = hosts;
  opts.retry_delay_ms = 20;
  opts.connect_timeout_ms = 5000;
  opts.request_timeout_ms = 20000;
  opts.stall_timeout_s = 10;
  return registry_client_new (&opts);
}

/* The digest index.json of layout NAME tags "latest". */
static char *
layout_digest (const char *name)
{
  cleanup_free char *path = xasprintf ("%s/%s/index.json", live.images, name);
  json_t *doc = json_load_file (path, 0, NULL);
  const char *digest = json_string_value (
      json_object_get (json_array_get (json_object_get (doc, "manifests"), 0), "digest"));
  char *copy;

  assert_non_null (digest);
  copy = xstrdup (digest);
  json_decref (doc);
  return copy;
}

static int
temp_file (const char *name)
{
  cleanup_free char *path = xasprintf ("%s/%s-XXXXXX", live.tmp, name);
  int fd = mkstemp (path);

  assert_true (fd >= 0);
  unlink (path);
  return fd;
}

static void
assert_fd_digest (int fd, const char *digest, uint64_t size)
{
  struct digest_ctx *ctx = digest_ctx_new ();
  char got[DIGEST_STR_SIZE];
  char buf[65536];
  uint64_t total = 0;
  ssize_t n;

  while ((n = pread (fd, buf, sizeof buf, (off_t) total)) > 0)
    {
      digest_ctx_update (ctx, buf, (size_t) n);
      total += (uint64_t) n;
    }
  digest_ctx_finish (ctx, got);
  assert_int_equal (size, total);
  assert_string_equal (digest, got);
}

/* The blobs a manifest names: config first, then layers. */
struct blob_list
{
  struct registry_blob_request blobs[16];
  char digests[16][DIGEST_STR_SIZE];
  size_t n;
};

static void
add_blob (struct blob_list *list, json_t *desc)
{
  const char *digest = json_string_value (json_object_get (desc, "digest"));

  assert_non_null (digest);
  assert_true (list->n < 16);
  snprintf (list->digests[list->n], DIGEST_STR_SIZE, "%s", digest);
  list->blobs[list->n] = (struct registry_blob_request){
    .digest = list->digests[list->n],
    .size = (uint64_t) json_integer_value (json_object_get (desc, "size")),
    .out_fd = temp_file ("blob"),
  };
  list->n++;
}

static void
blobs_of (const struct registry_manifest *m, struct blob_list *list)
{
  json_t *doc = json_loads (m->data, 0, NULL);
  size_t i;
  json_t *layer;

  assert_non_null (doc);
  list->n = 0;
  add_blob (list, json_object_get (doc, "config"));
  json_array_foreach (json_object_get (doc, "layers"), i, layer) add_blob (list, layer);
  json_decref (doc);
}

static void
blob_list_close (struct blob_list *list)
{
  for (size_t i = 0; i < list->n; i++)
    close (list->blobs[i].out_fd);
}

struct progress_seen
{
  uint64_t done[16];
  uint64_t total[16];
  size_t calls;
};

static void
record_progress (size_t index, uint64_t done, uint64_t total, void *user)
{
  struct progress_seen *seen = user;

  assert_true (index < 16);
  assert_true (done <= total);
  assert_true (done >= seen->done[index]);
  seen->done[index] = done;
  seen->total[index] = total;
  seen->calls++;
}

static void
test_live_manifest (void **state)
{
  struct registry_client *client = test_client (NULL);
  struct reference *ref = parse_reff ("%s/test/busybox:latest", live.addr);
  cleanup_free char *want = layout_digest ("busybox");
  struct registry_manifest *m = NULL, *again = NULL;
  struct husk_error *err = NULL;

  assert_ok (registry_fetch_manifest (client, ref, NULL, &m, &err), err);
  assert_string_equal (REGISTRY_MEDIA_OCI_MANIFEST, m->media_type);
  assert_string_equal (want, m->digest);
  assert_int_equal (strlen (m->data), m->size);
  assert_ok (registry_fetch_manifest (client, ref, want, &again, &err), err);
  assert_int_equal (m->size, again->size);
  assert_memory_equal (m->data, again->data, m->size);
  registry_manifest_free (m);
  registry_manifest_free (again);
  reference_free (ref);
  registry_client_free (client);
}

static void
test_live_blobs (void **state)
{
  struct registry_client *client = test_client (NULL);
  struct reference *ref
      = parse_reff ("%s/test/busybox@%s", live.addr,
                    "sha256:0000000000000000000000000000000000000000000000000000000000000000");
  struct registry_manifest *m = NULL;
  struct husk_error *err = NULL;
  struct blob_list list;
  struct progress_seen seen = { 0 };
  cleanup_free char *digest = layout_digest ("busybox");

  assert_int_equal (-1, registry_resolve (client, ref, NULL, &m, NULL, &err));
  assert_contains (err->msg, "/test/busybox@sha256:0000");
  assert_contains (err->msg, "manifest unknown");
  husk_error_free (&err);
  assert_ok (registry_fetch_manifest (client, ref, digest, &m, &err), err);
  blobs_of (m, &list);
  assert_int_equal (4, list.n);
  assert_ok (registry_fetch_blobs (client, ref, list.blobs, list.n, record_progress, &seen, &err), err);
  for (size_t i = 0; i < list.n; i++)
    {
      assert_fd_digest (list.blobs[i].out_fd, list.blobs[i].digest, list.blobs[i].size);
      assert_int_equal (list.blobs[i].size, seen.done[i]);
      assert_int_equal (list.blobs[i].size, seen.total[i]);
    }
  /* One blob on its own, into a fresh file. */
  {
    int fd = temp_file ("single");
    assert_ok (
        registry_fetch_blob (client, ref, list.blobs[1].digest, list.blobs[1].size, fd, NULL, NULL, &err),
        err);
    assert_fd_digest (fd, list.blobs[1].digest, list.blobs[1].size);
    close (fd);
  }
  blob_list_close (&list);
  registry_manifest_free (m);
  reference_free (ref);
  registry_client_free (client);
}

static void
test_live_big_parallel (void **state)
{
  struct registry_client *client = test_client (NULL);
  struct reference *ref = parse_reff ("%s/test/big:latest", live.addr);
  struct registry_manifest *m = NULL;
  struct husk_error *err = NULL;
  struct blob_list list;
  struct progress_seen seen = { 0 };
  uint64_t total = 0;

  assert_ok (registry_resolve (client, ref, "linux/amd64", &m, NULL, &err), err);
  blobs_of (m, &list);
  assert_int_equal (6, list.n);
  assert_ok (registry_fetch_blobs (client, ref, list.blobs, list.n, record_progress, &seen, &err), err);
  for (size_t i = 0; i < list.n; i++)
    {
      assert_fd_digest (list.blobs[i].out_fd, list.blobs[i].digest, list.blobs[i].size);
      total += list.blobs[i].size;
    }
  assert_true (total > 30u << 20);
  blob_list_close (&list);
  registry_manifest_free (m);
  reference_free (ref);
  registry_client_free (client);
}

static void
test_live_multiarch (void **state)
{
  struct registry_client *client = test_client (NULL);
  struct reference *ref = parse_reff ("%s/test/multiarch", live.addr);
  struct registry_manifest *amd64 = NULL, *arm64 = NULL, *index = NULL;
  struct husk_error *err = NULL;
  json_t *doc;
  const char *layer_type;

  assert_ok (registry_resolve (client, ref, NULL, &amd64, &index, &err), err);
  assert_non_null (index);
  assert_string_equal (REGISTRY_MEDIA_OCI_INDEX, index->media_type);
  registry_manifest_free (index);
  assert_ok (registry_resolve (client, ref, "linux/arm64", &arm64, NULL, &err), err);
  assert_string_equal (REGISTRY_MEDIA_OCI_MANIFEST, amd64->media_type);
  assert_string_not_equal (amd64->digest, arm64->digest);
  doc = json_loads (arm64->data, 0, NULL);
  layer_type = json_string_value (
      json_object_get (json_array_get (json_object_get (doc, "layers"), 0), "mediaType"));
  assert_string_equal ("application/vnd.oci.image.layer.v1.tar+gzip", layer_type);
  assert_int_equal (1, json_array_size (json_object_get (doc, "layers")));
  json_decref (doc);
  registry_manifest_free (amd64);
  registry_manifest_free (arm64);
  amd64 = NULL;
  assert_int_equal (-1, registry_resolve (client, ref, "linux/s390x", &amd64, NULL, &err));
  assert_string_equal ("no manifest for platform linux/s390x in the index (available: linux/amd64, "
                       "linux/arm64/v8)",
                       strstr (err->msg, "no manifest"));
  husk_error_free (&err);
  reference_free (ref);
  registry_client_free (client);
}

static void
test_live_not_found (void **state)
{
  struct registry_client *client = test_client (NULL);
  struct reference *tag = parse_reff ("%s/test/busybox:nope", live.addr);
  struct reference *repo = parse_reff ("%s/x:nope", live.addr);
  struct registry_manifest *m = NULL;
  struct husk_error *err = NULL;
  cleanup_free char *want = xasprintf ("%s/test/busybox:nope: manifest unknown", live.addr);
  cleanup_free char *want_repo = xasprintf ("%s/x:nope: manifest unknown", live.addr);
  int fd = temp_file ("missing");

  assert_int_equal (-1, registry_fetch_manifest (client, tag, NULL, &m, &err));
  assert_string_equal (want, err->msg);
  assert_int_equal (-1, registry_fetch_manifest (client, repo, NULL, &m, &err));
  assert_string_equal (want_repo, err->msg);
  assert_int_equal (-1,
                    registry_fetch_blob (client, tag,
                                         "sha256:"
                                         "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                                         10, fd, NULL, NULL, &err));
  assert_contains (err->msg, "/test/busybox: blob sha256:0123456789abcdef");
  assert_contains (err->msg, ": blob unknown: blob unknown to registry");
  husk_error_free (&err);
  close (fd);
  reference_free (tag);
  reference_free (repo);
  registry_client_free (client);
}

static void
test_live_unreachable (void **state)
{
  struct registry_client *client = test_client (NULL);
  struct reference *ref = parse_ref ("127.0.0.1:1/x:y");
  struct registry_manifest *m = NULL;
  struct husk_error *err = NULL;
  long long start = registry_now_ms ();

  assert_int_equal (-1, registry_fetch_manifest (client, ref, NULL, &m, &err));
  assert_string_equal ("127.0.0.1:1/x:y: connect: Connection refused", err->msg);
  /* three retries with 20, 40 and 80 ms of backoff */
  assert_true (registry_now_ms () - start >= 140);
  husk_error_free (&err);
  reference_free (ref);
  registry_client_free (client);
}

static bool
test_credentials (const char *host, char **username, char **password, void *user)
{
  if (strcmp (host, live.auth_addr) != 0)
    return false;
  *username = xstrdup (AUTH_USER);
  *password = xstrdup (user);
  return true;
}

static void
test_live_basic_auth (void **state)
{
  struct reference *ref = parse_reff ("%s/test/busybox:latest", live.auth_addr);
  cleanup_free char *want_error
      = xasprintf ("%s/test/busybox:latest: unauthorized: authentication required", live.auth_addr);
  struct registry_manifest *m = NULL;
  struct husk_error *err = NULL;
  struct blob_list list;

  /* no credentials */
  {
    struct registry_client *client = test_client (NULL);
    assert_int_equal (-1, registry_fetch_manifest (client, ref, NULL, &m, &err));
    assert_string_equal (want_error, err->msg);
    registry_client_free (client);
  }
  /* wrong credentials */
  {
    struct registry_client *client = test_client (NULL);
    registry_client_add_credentials (client, live.auth_addr, AUTH_USER, "wrong");
    assert_int_equal (-1, registry_fetch_manifest (client, ref, NULL, &m, &err));
    assert_string_equal (want_error, err->msg);
    registry_client_free (client);
  }
  /* right credentials, static; the blobs reuse the cached Basic header */
  {
    struct registry_client *client = test_client (NULL);
    registry_client_add_credentials (client, live.auth_addr, AUTH_USER, AUTH_PASS);
    assert_ok (registry_fetch_manifest (client, ref, NULL, &m, &err), err);
    blobs_of (m, &list);
    assert_ok (registry_fetch_blobs (client, ref, list.blobs, list.n, NULL, NULL, &err), err);
    assert_fd_digest (list.blobs[0].out_fd, list.blobs[0].digest, list.blobs[0].size);
    blob_list_close (&list);
    registry_manifest_free (m);
    registry_client_free (client);
  }
  /* right credentials from the callback */
  {
    struct registry_options opts;
    struct registry_client *client;
    registry_options_init (&opts);
    opts.credentials = test_credentials;
    opts.credentials_user = (void *) AUTH_PASS;
    client = registry_client_new (&opts);
    assert_ok (registry_fetch_manifest (client, ref, NULL, &m, &err), err);
    registry_manifest_free (m);
    registry_client_free (client);
  }
  husk_error_free (&err);
  reference_free (ref);
}

/* Mirrors are tried in order, dead ones skipped; "server" redirects a name. */
static void
test_live_mirrors (void **state)
{
  cleanup_free char *json
      = xasprintf ("{\"registries\": {"
                   " \"docker.io\": {\"mirrors\": [\"http://127.0.0.1:1\", \"%s\"], "
                   "\"mirrorsOnly\": true},"
                   " \"dead.example\": {\"mirrors\": [\"http://127.0.0.1:1\"], \"mirrorsOnly\": true},"
                   " \"named.example\": {\"server\": \"http://%s\"}}}",
                   live.addr, live.addr);
  struct hosts_config *cfg = parse_hosts (json);
  struct registry_client *client = test_client (cfg);
  struct reference *hub = parse_ref ("test/busybox");
  struct reference *dead = parse_ref ("dead.example/test/busybox");
  struct reference *named = parse_ref ("named.example/test/busybox");
  cleanup_free char *want = layout_digest ("busybox");
  struct registry_manifest *m = NULL;
  struct husk_error *err = NULL;

  assert_ok (registry_fetch_manifest (client, hub, NULL, &m, &err), err);
  assert_string_equal (want, m->digest);
  registry_manifest_free (m);
  assert_ok (registry_fetch_manifest (client, named, NULL, &m, &err), err);
  assert_string_equal (want, m->digest);
  registry_manifest_free (m);
  assert_int_equal (-1, registry_fetch_manifest (client, dead, NULL, &m, &err));
  assert_string_equal (
      "dead.example/test/busybox:latest: mirror http://127.0.0.1:1: connect: Connection refused", err->msg);
  husk_error_free (&err);
  reference_free (hub);
  reference_free (dead);
  reference_free (named);
  registry_client_free (client);
  hosts_config_free (cfg);
}

/* --- the fake registry ------------------------------------------------- */

static char *
fake_blob (size_t *len)
{
  static const char line[] = "husk fake registry blob\n";
  size_t n = sizeof line - 1;
  char *blob = xmalloc (n * 4096);

  for (size_t i = 0; i < 4096; i++)
    memcpy (blob + i * n, line, n);
  *len = n * 4096;
  return blob;
}

static long
fake_count (const char *key)
{
  cleanup_free char *cmd = xasprintf ("curl -s http://%s/stats", live.fake_addr);
  cleanup_free char *out = run_capture (cmd);
  json_t *doc = out ? json_loads (out, 0, NULL) : NULL;
  long count = (long) json_integer_value (json_object_get (doc, key));

  json_decref (doc);
  return count;
}

/* Fetches the fake blob from REPO; returns rc, leaves the file in *FD_OUT. */
static int
fake_fetch_blob (struct registry_client *client, const char *repo, int fd, struct husk_error **err)
{
  size_t len;
  cleanup_free char *blob = fake_blob (&len);
  char digest[DIGEST_STR_SIZE];
  struct reference *ref = parse_reff ("%s/%s", live.fake_addr, repo);
  int rc;

  digest_of_buffer (blob, len, digest);
  rc = registry_fetch_blob (client, ref, digest, len, fd, NULL, NULL, err);
  if (rc == 0)
    assert_fd_digest (fd, digest, len);
  reference_free (ref);
  return rc;
}

static void
test_fake_corrupt_blob (void **state)
{
  struct registry_client *client = test_client (NULL);
  struct husk_error *err = NULL;
  size_t len;
  cleanup_free char *blob = fake_blob (&len);
  char digest[DIGEST_STR_SIZE];
  cleanup_free char *prefix = NULL;
  int fd = temp_file ("corrupt");

  digest_of_buffer (blob, len, digest);
  prefix = xasprintf ("%s/corrupt: blob %s: digest mismatch (got sha256:", live.fake_addr, digest);
  assert_int_equal (-1, fake_fetch_blob (client, "corrupt", fd, &err));
  assert_true (husk_str_has_prefix (err->msg, prefix));
  assert_int_equal (strlen (prefix) + 64 + 1, strlen (err->msg));
  husk_error_free (&err);
  /* a mismatch is not retried */
  {
    cleanup_free char *path = xasprintf ("/v2/corrupt/blobs/%s", digest);
    assert_int_equal (1, fake_count (path));
  }
  /* a short expected size is caught while streaming */
  {
    struct reference *ref = parse_reff ("%s/ok", live.fake_addr);
    cleanup_free char *want
        = xasprintf ("%s/ok: blob %s: size mismatch (got more than 100 bytes)", live.fake_addr, digest);
    assert_int_equal (-1, registry_fetch_blob (client, ref, digest, 100, fd, NULL, NULL, &err));
    assert_string_equal (want, err->msg);
    husk_error_free (&err);
    reference_free (ref);
  }
  close (fd);
  registry_client_free (client);
}

static void
test_fake_retries (void **state)
{
  struct registry_client *client = test_client (NULL);
  struct reference *ref = parse_reff ("%s/flaky", live.fake_addr);
  struct registry_manifest *m = NULL;
  struct husk_error *err = NULL;
  size_t len;
  cleanup_free char *blob = fake_blob (&len);
  char digest[DIGEST_STR_SIZE];
  cleanup_free char *blob_path = NULL, *rate_path = NULL, *partial_path = NULL, *range_key = NULL;
  int fd = temp_file ("flaky");

  digest_of_buffer (blob, len, digest);
  assert_ok (registry_fetch_manifest (client, ref, NULL, &m, &err), err);
  assert_int_equal (2, fake_count ("/v2/flaky/manifests/latest"));
  assert_ok (fake_fetch_blob (client, "flaky", fd, &err), err);
  blob_path = xasprintf ("/v2/flaky/blobs/%s", digest);
  assert_int_equal (2, fake_count (blob_path));
  /* 429 with Retry-After: 0 */
  assert_ok (ftruncate (fd, 0), NULL);
  assert_ok (fake_fetch_blob (client, "ratelimit", fd, &err), err);
  rate_path = xasprintf ("/v2/ratelimit/blobs/%s", digest);
  assert_int_equal (2, fake_count (rate_path));
  /* a connection cut halfway: the retry asks for the rest with Range */
  assert_ok (ftruncate (fd, 0), NULL);
  assert_ok (fake_fetch_blob (client, "partial", fd, &err), err);
  partial_path = xasprintf ("/v2/partial/blobs/%s", digest);
  range_key = xasprintf ("range %s", partial_path);
  assert_int_equal (2, fake_count (partial_path));
  assert_int_equal (1, fake_count (range_key));
  close (fd);
  registry_manifest_free (m);
  reference_free (ref);
  registry_client_free (client);
}

static long long
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool
past_deadline (void *deadline_ms)
{
  return now_ms () >= *(long long *) deadline_ms;
}

static struct registry_client *
trickle_client (unsigned stall_s, long long *cancel_at)
{
  struct registry_options opts;

  registry_options_init (&opts);
  opts.retries = 0;
  opts.connect_timeout_ms = 5000;
  opts.stall_timeout_s = stall_s;
  opts.low_speed_bytes = 1024;
  opts.cancelled = cancel_at ? past_deadline : NULL;
  opts.cancelled_user = cancel_at;
  return registry_client_new (&opts);
}

/* A registry that trickles a blob (5 bytes/s, forever for our purposes)
 * fails once the transfer stays under the minimum rate for the window, and
 * a caller that goes away stops it within a poll. */
static void
test_fake_trickle (void **state)
{
  struct registry_client *client = trickle_client (2, NULL);
  struct husk_error *err = NULL;
  long long start = now_ms (), cancel_at;
  int fd = temp_file ("trickle");

  assert_int_equal (fake_fetch_blob (client, "trickle", fd, &err), -1);
  assert_true (now_ms () - start < 10000);
  husk_error_free (&err);
  registry_client_free (client);

  cancel_at = now_ms () + 500;
  client = trickle_client (60, &cancel_at);
  start = now_ms ();
  assert_int_equal (fake_fetch_blob (client, "trickle", fd, &err), -1);
  assert_int_equal (err->errnum, ECANCELED);
  assert_true (now_ms () - start < 3000);
  husk_error_free (&err);
  /* Control: a registry that sends at speed passes the same limits. */
  assert_ok (ftruncate (fd, 0), NULL);
  cancel_at = now_ms () + 60000;
  assert_ok (fake_fetch_blob (client, "ok", fd, &err), err);
  registry_client_free (client);
  close (fd);
}

/* A registry that answers an error with a body that never ends (fast, one
 * byte every 0.5 s, or none at all after the headers): the pull fails on
 * the status, quoting it, rather
 * than reading until the request deadline (a manifest) or forever (a
 * blob, which has none).  The client here gives up at 30 s: before the
 * cut, that deadline was the error. */
static void
test_fake_endless_error_body (void **state)
{
  struct registry_options opts;
  struct husk_error *err = NULL;
  struct registry_manifest *m = NULL;
  long long give_up;
  int fd = temp_file ("endless");
  static const struct
  {
    const char *repo;
    bool blob;
    const char *want;
  } cases[] = {
    { "endless", false, "HTTP status 404: manifest unknown (error body cut: over 64 KiB or 5 s)" },
    { "endless", true, "HTTP status 500: HTTP status 500 (error body cut: over 64 KiB or 5 s)" },
    { "drip", false, "HTTP status 404: manifest unknown (error body cut: over 64 KiB or 5 s)" },
    { "silent", false, "HTTP status 404: manifest unknown (error body cut: over 64 KiB or 5 s)" },
    { "silent", true, "HTTP status 500: HTTP status 500 (error body cut: over 64 KiB or 5 s)" },
  };

  registry_options_init (&opts);
  opts.retries = 0;
  opts.connect_timeout_ms = 5000;
  opts.request_timeout_ms = 30000;
  opts.cancelled = past_deadline;
  opts.cancelled_user = &give_up;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      struct registry_client *client = registry_client_new (&opts);
      struct reference *ref = parse_reff ("%s/%s", live.fake_addr, cases[i].repo);
      int rc;

      give_up = now_ms () + 30000;
      rc = cases[i].blob ? fake_fetch_blob (client, cases[i].repo, fd, &err)
                         : registry_fetch_manifest (client, ref, NULL, &m, &err);
      assert_int_equal (rc, -1);
      if (strstr (err->msg, cases[i].want) == NULL)
        fail_msg ("%s %s: `%s` lacks `%s`", cases[i].repo, cases[i].blob ? "blob" : "manifest", err->msg,
                  cases[i].want);
      husk_error_free (&err);
      reference_free (ref);
      registry_client_free (client);
    }
  close (fd);
}

/* Bytes already in the file are kept when right, dropped when wrong. */
static void
test_fake_resume_existing (void **state)
{
  struct registry_client *client = test_client (NULL);
  struct husk_error *err = NULL;
  size_t len;
  cleanup_free char *blob = fake_blob (&len);
  char digest[DIGEST_STR_SIZE];
  cleanup_free char *path = NULL, *range_key = NULL;
  int fd = temp_file ("resume");
  long before, ranges_before;

  digest_of_buffer (blob, len, digest);
  path = xasprintf ("/v2/ok/blobs/%s", digest);
  range_key = xasprintf ("range %s", path);
  before = fake_count (path);
  ranges_before = fake_count (range_key);
  assert_int_equal (len / 2, pwrite (fd, blob, len / 2, 0));
  assert_ok (fake_fetch_blob (client, "ok", fd, &err), err);
  assert_int_equal (before + 1, fake_count (path));
  assert_int_equal (ranges_before + 1, fake_count (range_key));
  /* complete already: no request at all */
  assert_ok (fake_fetch_blob (client, "ok", fd, &err), err);
  assert_int_equal (before + 1, fake_count (path));
  /* wrong bytes: resumed, found wrong, fetched whole */
  assert_ok (ftruncate (fd, 0), NULL);
  assert_int_equal (10, pwrite (fd, "0123456789", 10, 0));
  assert_ok (fake_fetch_blob (client, "ok", fd, &err), err);
  assert_int_equal (before + 3, fake_count (path));
  close (fd);
  registry_client_free (client);
}

static void
test_fake_bearer (void **state)
{
  struct reference *anon_ref = parse_reff ("%s/bearer", live.fake_addr);
  struct reference *private_ref = parse_reff ("%s/private", live.fake_addr);
  struct registry_manifest *m = NULL;
  struct husk_error *err = NULL;
  long tokens_before;
  int fd = temp_file ("bearer");

  /* anonymous token; the blob reuses it from the cache */
  {
    struct registry_client *client = test_client (NULL);
    tokens_before = fake_count ("/token?service=fake-registry&scope=repository%3Abearer%3Apull");
    assert_ok (registry_fetch_manifest (client, anon_ref, NULL, &m, &err), err);
    registry_manifest_free (m);
    assert_ok (fake_fetch_blob (client, "bearer", fd, &err), err);
    assert_int_equal (tokens_before + 1,
                      fake_count ("/token?service=fake-registry&scope=repository%3Abearer%3Apull"));
    /* an anonymous token does not open the private repository */
    assert_int_equal (-1, registry_fetch_manifest (client, private_ref, NULL, &m, &err));
    assert_contains (err->msg, "/private:latest: unauthorized: authentication required");
    registry_client_free (client);
  }
  /* credentials get an access_token */
  {
    struct registry_client *client = test_client (NULL);
    registry_client_add_credentials (client, live.fake_addr, "alice", "secret");
    assert_ok (registry_fetch_manifest (client, private_ref, NULL, &m, &err), err);
    registry_manifest_free (m);
    registry_client_free (client);
  }
  /* wrong credentials: the token server's own message */
  {
    struct registry_client *client = test_client (NULL);
    cleanup_free char *want = xasprintf (
        "%s/private:latest: fetch token from http://%s/token: unauthorized: incorrect username or "
        "password",
        live.fake_addr, live.fake_addr);
    registry_client_add_credentials (client, live.fake_addr, "alice", "guess");
    assert_int_equal (-1, registry_fetch_manifest (client, private_ref, NULL, &m, &err));
    assert_string_equal (want, err->msg);
    registry_client_free (client);
  }
  husk_error_free (&err);
  close (fd);
  reference_free (anon_ref);
  reference_free (private_ref);
}

static void
test_fake_manifest_types (void **state)
{
  struct registry_client *client = test_client (NULL);
  struct reference *schema1 = parse_reff ("%s/schema1", live.fake_addr);
  struct reference *notype = parse_reff ("%s/notype", live.fake_addr);
  struct reference *baddigest = parse_reff ("%s/baddigest", live.fake_addr);
  struct reference *index = parse_reff ("%s/index", live.fake_addr);
  struct registry_manifest *m = NULL, *list = NULL;
  struct husk_error *err = NULL;
  cleanup_free char *want = xasprintf ("%s/schema1:latest: unsupported media type "
                                       "application/vnd.docker.distribution.manifest.v1+prettyjws",
                                       live.fake_addr);

  assert_int_equal (-1, registry_fetch_manifest (client, schema1, NULL, &m, &err));
  assert_string_equal (want, err->msg);
  assert_ok (registry_fetch_manifest (client, notype, NULL, &m, &err), err);
  assert_string_equal (REGISTRY_MEDIA_OCI_MANIFEST, m->media_type);
  registry_manifest_free (m);
  assert_int_equal (-1, registry_fetch_manifest (client, baddigest, NULL, &m, &err));
  assert_contains (err->msg, "/baddigest:latest: registry says the digest is sha256:1111");
  assert_ok (registry_resolve (client, index, "linux/arm64/v8", &m, &list, &err), err);
  assert_string_equal (REGISTRY_MEDIA_DOCKER_LIST, list->media_type);
  assert_contains (m->data, "\"schemaVersion\":  2");
  registry_manifest_free (m);
  registry_manifest_free (list);
  /* a repository the registry does not know */
  {
    struct reference *unknown = parse_reff ("%s/a/b", live.fake_addr);
    cleanup_free char *want_unknown
        = xasprintf ("%s/a/b:latest: manifest unknown (name unknown: repository name "
                     "not known to registry)",
                     live.fake_addr);
    assert_int_equal (-1, registry_fetch_manifest (client, unknown, NULL, &m, &err));
    assert_string_equal (want_unknown, err->msg);
    reference_free (unknown);
  }
  /* a digest the registry does not have */
  assert_int_equal (
      -1, registry_fetch_manifest (client, index,
                                   "sha256:"
                                   "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                                   &m, &err));
  assert_contains (err->msg, "manifest unknown");
  husk_error_free (&err);
  reference_free (schema1);
  reference_free (notype);
  reference_free (baddigest);
  reference_free (index);
  registry_client_free (client);
}

/* "insecure" skips TLS verification on https; without it the
 * self-signed certificate is refused. */
static void
test_fake_tls_insecure (void **state)
{
  cleanup_free char *json = xasprintf ("{\"registries\": {"
                                       " \"tls.example\": {\"server\": \"https://%s\", \"insecure\": true},"
                                       " \"strict.example\": {\"server\": \"https://%s\"},"
                                       " \"mirrored.example\": {\"mirrors\": [{\"url\": \"https://%s\", "
                                       "\"insecure\": true}], \"mirrorsOnly\": true}}}",
                                       live.tls_addr, live.tls_addr, live.tls_addr);
  struct hosts_config *cfg = parse_hosts (json);
  struct registry_client *client = test_client (cfg);
  struct reference *insecure = parse_ref ("tls.example/bearer");
  struct reference *strict = parse_ref ("strict.example/ok");
  struct reference *mirrored = parse_ref ("mirrored.example/ok");
  struct registry_manifest *m = NULL;
  struct husk_error *err = NULL;

  /* the token realm is the same insecure host: not verified either */
  assert_ok (registry_fetch_manifest (client, insecure, NULL, &m, &err), err);
  registry_manifest_free (m);
  assert_ok (registry_fetch_manifest (client, mirrored, NULL, &m, &err), err);
  registry_manifest_free (m);
  assert_int_equal (-1, registry_fetch_manifest (client, strict, NULL, &m, &err));
  assert_contains (err->msg, "strict.example/ok:latest: tls: ");
  assert_contains (err->msg, "certificate");
  husk_error_free (&err);
  reference_free (insecure);
  reference_free (strict);
  reference_free (mirrored);
  registry_client_free (client);
  hosts_config_free (cfg);
}

int
main (void)
{
  const struct CMUnitTest pure[] = {
    cmocka_unit_test (test_auth_bearer),
    cmocka_unit_test (test_auth_quoting),
    cmocka_unit_test (test_auth_several_challenges),
    cmocka_unit_test (test_auth_errors),
    cmocka_unit_test (test_platform_selection),
    cmocka_unit_test (test_platform_errors),
    cmocka_unit_test (test_hosts_endpoints),
    cmocka_unit_test (test_hosts_defaults),
    cmocka_unit_test (test_hosts_errors),
    cmocka_unit_test (test_hosts_load_file),
    cmocka_unit_test (test_url_and_errors),
  };
  const struct CMUnitTest registries[] = {
    cmocka_unit_test (test_live_manifest),        cmocka_unit_test (test_live_blobs),
    cmocka_unit_test (test_live_big_parallel),    cmocka_unit_test (test_live_multiarch),
    cmocka_unit_test (test_live_not_found),       cmocka_unit_test (test_live_unreachable),
    cmocka_unit_test (test_live_basic_auth),      cmocka_unit_test (test_live_mirrors),
    cmocka_unit_test (test_fake_corrupt_blob),    cmocka_unit_test (test_fake_retries),
    cmocka_unit_test (test_fake_trickle),         cmocka_unit_test (test_fake_endless_error_body),
    cmocka_unit_test (test_fake_resume_existing), cmocka_unit_test (test_fake_bearer),
    cmocka_unit_test (test_fake_manifest_types),  cmocka_unit_test (test_fake_tls_insecure),
  };
  int failed = cmocka_run_group_tests_name ("registry (pure)", pure, NULL, NULL);

  failed += cmocka_run_group_tests_name ("registry (live)", registries, live_setup, live_teardown);
  return failed;
}
