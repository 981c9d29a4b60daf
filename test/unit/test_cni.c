/* Unit tests for husk's CNI client (cri/cni*.c): config loading and
 * validation, the bin dir lookup, result parsing, CNI_ARGS, runtimeConfig
 * injection, the result cache, and whole ADD/CHECK/DEL runs against fake
 * plugins (shell scripts in a temp bin dir) that record what they got. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "cri/cni/internal.h"
#include "husk/cleanup.h"
#include "husk/util.h"

struct fixture
{
  char dir[64];
  char *conf_dir, *bin_dir, *cache_dir, *log_dir;
  struct cni_ctx ctx;
};

static int
setup (void **state)
{
  struct fixture *fx = xcalloc (1, sizeof *fx);

  strcpy (fx->dir, "/tmp/husk-cni-XXXXXX");
  if (mkdtemp (fx->dir) == NULL)
    return -1;
  fx->conf_dir = xasprintf ("%s/net.d", fx->dir);
  fx->bin_dir = xasprintf ("%s/bin", fx->dir);
  fx->cache_dir = xasprintf ("%s/cache", fx->dir);
  fx->log_dir = xasprintf ("%s/log", fx->dir);
  if (mkdir (fx->conf_dir, 0755) < 0 || mkdir (fx->bin_dir, 0755) < 0 || mkdir (fx->log_dir, 0755) < 0)
    return -1;
  fx->ctx.bin_dirs = fx->bin_dir;
  fx->ctx.cache_dir = fx->cache_dir;
  fx->ctx.timeout_s = 10;
  /* iptables-save/-restore: only the fakes a test writes, never the host's. */
  fx->ctx.tools_path = fx->bin_dir;
  *state = fx;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *fx = *state;

  husk_rm_rf (fx->dir, NULL);
  free (fx->conf_dir);
  free (fx->bin_dir);
  free (fx->cache_dir);
  free (fx->log_dir);
  free (fx);
  return 0;
}

static void
write_text (const char *path, const char *text, mode_t mode)
{
  struct husk_error *err = NULL;

  assert_int_equal (husk_write_file_replace (path, text, strlen (text), mode, &err), 0);
  assert_int_equal (chmod (path, mode), 0);
}

static void
write_conf (struct fixture *fx, const char *name, const char *text)
{
  cleanup_free char *path = xasprintf ("%s/%s", fx->conf_dir, name);
  write_text (path, text, 0644);
}

static char *
read_text (const char *path)
{
  char *text = NULL;
  struct husk_error *err = NULL;

  if (husk_read_file (path, &text, NULL, &err) < 0)
    {
      husk_error_free (&err);
      return NULL;
    }
  return text;
}

/* A fake plugin: logs "NAME COMMAND" to log/calls, its stdin to
 * log/NAME.COMMAND.stdin and its CNI_* environment to log/NAME.COMMAND.env,
 * then runs BODY (which may print a result or fail). */
static void
write_plugin (struct fixture *fx, const char *name, const char *body_fmt, ...)
{
  cleanup_free char *path = xasprintf ("%s/%s", fx->bin_dir, name);
  cleanup_free char *body = NULL;
  cleanup_free char *script = NULL;
  va_list ap;

  va_start (ap, body_fmt);
  if (vasprintf (&body, body_fmt, ap) < 0)
    abort ();
  va_end (ap);
  script = xasprintf ("#!/bin/sh\n"
                      "log=%s\n"
                      "echo \"%s $CNI_COMMAND\" >> $log/calls\n"
                      "cat > $log/%s.$CNI_COMMAND.stdin\n"
                      "env | grep '^CNI_' | sort > $log/%s.$CNI_COMMAND.env\n"
                      "%s\n",
                      fx->log_dir, name, name, name, body);
  write_text (path, script, 0755);
}

/* A plugin that is exactly TEXT. */
static void
write_script (struct fixture *fx, const char *name, const char *text)
{
  cleanup_free char *path = xasprintf ("%s/%s", fx->bin_dir, name);
  write_text (path, text, 0755);
}

static char *
log_file (struct fixture *fx, const char *name)
{
  cleanup_free char *path = xasprintf ("%s/%s", fx->log_dir, name);
  return read_text (path);
}

static json_t *
log_json (struct fixture *fx, const char *name)
{
  cleanup_free char *text = log_file (fx, name);
  assert_non_null (text);
  return json_loads (text, 0, NULL);
}

static struct cni_network *
parse_ok (const char *text, bool legacy)
{
  struct cni_network *net = NULL;
  struct husk_error *err = NULL;

  if (cni_config_parse (text, strlen (text), "test.conflist", legacy, &net, &err) < 0)
    fail_msg ("parse failed: %s", err->msg);
  return net;
}

static char *
parse_error (const char *text, bool legacy)
{
  struct cni_network *net = NULL;
  struct husk_error *err = NULL;
  char *msg;

  assert_int_equal (cni_config_parse (text, strlen (text), "/etc/cni/net.d/x.conf", legacy, &net, &err), -1);
  assert_null (net);
  msg = xstrdup (err->msg);
  husk_error_free (&err);
  return msg;
}

#define ASSERT_CONTAINS(haystack, needle)                                                                    \
  do                                                                                                         \
    {                                                                                                        \
      if (strstr ((haystack), (needle)) == NULL)                                                             \
        fail_msg ("`%s` does not contain `%s`", (haystack), (needle));                                       \
    }                                                                                                        \
  while (0)

/* ---------------------------------------------------------------- config */

static const char conflist_text[]
    = "{\"cniVersion\":\"1.0.0\",\"name\":\"podnet\",\"disableCheck\":true,\"plugins\":["
      "{\"type\":\"bridge\",\"bridge\":\"cni0\",\"ipam\":{\"type\":\"host-local\"}},"
      "{\"type\":\"portmap\",\"capabilities\":{\"portMappings\":true}}]}";

static void
test_parse_conflist (void **state)
{
  struct cni_network *net = parse_ok (conflist_text, false);

  assert_string_equal (net->name, "podnet");
  assert_string_equal (net->cni_version, "1.0.0");
  assert_string_equal (net->path, "test.conflist");
  assert_true (net->disable_check);
  assert_int_equal (net->n_plugins, 2);
  assert_string_equal (net->plugins[0].type, "bridge");
  assert_string_equal (net->plugins[1].type, "portmap");
  assert_string_equal (json_string_value (json_object_get (net->plugins[0].conf, "bridge")), "cni0");
  assert_non_null (net->skipped);
  assert_null (net->skipped[0]);
  cni_network_free (net);

  /* 0.4.0 with disableCheck as the spec's string. */
  net = parse_ok ("{\"cniVersion\":\"0.4.0\",\"name\":\"a.b_c-1\",\"disableCheck\":\"false\","
                  "\"plugins\":[{\"type\":\"loopback\"}]}",
                  false);
  assert_string_equal (net->cni_version, "0.4.0");
  assert_false (net->disable_check);
  cni_network_free (net);
}

static void
test_parse_legacy_conf (void **state)
{
  struct cni_network *net = parse_ok ("{\"cniVersion\":\"0.4.0\",\"name\":\"old\",\"type\":\"bridge\","
                                      "\"bridge\":\"cni0\",\"isGateway\":true}",
                                      true);

  assert_string_equal (net->name, "old");
  assert_string_equal (net->cni_version, "0.4.0");
  assert_int_equal (net->n_plugins, 1);
  assert_string_equal (net->plugins[0].type, "bridge");
  assert_true (json_is_true (json_object_get (net->plugins[0].conf, "isGateway")));
  assert_int_equal (json_array_size (json_object_get (net->conflist, "plugins")), 1);
  cni_network_free (net);
}

static void
test_parse_bad_json_has_line_and_column (void **state)
{
  cleanup_free char *msg
      = parse_error ("{\n  \"cniVersion\": \"1.0.0\",\n  \"name\": \"x\"\n  \"plugins\": []\n}", false);

  assert_string_equal (msg, "parse CNI config /etc/cni/net.d/x.conf:4:11: '}' expected near '\"plugins\"'");
  assert_null (strchr (msg, '\n'));
}

static void
test_parse_rejects_invalid (void **state)
{
  static const struct
  {
    const char *text;
    bool legacy;
    const char *expected;
  } cases[] = {
    { "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"plugins\":[{\"type\":\"bridge\"},{\"mtu\":1400}]}", false,
      "plugins[1]: missing `type`" },
    { "{\"cniVersion\":\"2.0.0\",\"name\":\"n\",\"plugins\":[{\"type\":\"bridge\"}]}", false,
      "unsupported cniVersion `2.0.0`" },
    { "{\"cniVersion\":\"0.2.0\",\"name\":\"n\",\"type\":\"bridge\"}", true,
      "unsupported cniVersion `0.2.0`" },
    { "{\"name\":\"n\",\"plugins\":[{\"type\":\"bridge\"}]}", false, "missing `cniVersion`" },
    { "{\"cniVersion\":\"1.0.0\",\"plugins\":[{\"type\":\"bridge\"}]}", false, "missing `name`" },
    { "{\"cniVersion\":\"1.0.0\",\"name\":\"../etc\",\"plugins\":[{\"type\":\"bridge\"}]}", false,
      "invalid network name `../etc`" },
    { "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"plugins\":[]}", false,
      "`plugins` must be a non-empty list" },
    { "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"plugins\":[{\"type\":\"../../bin/sh\"}]}", false,
      "plugins[0]: `type` must name a plugin binary" },
    { "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"plugins\":[{\"type\":\"b\",\"ipam\":{\"type\":\"/x\"}}]}",
      false, "`ipam.type` must name a plugin binary" },
    { "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"plugins\":[{\"type\":\"b\"}],\"disableCheck\":1}", false,
      "`disableCheck` must be true or false" },
    { "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"plugins\":[{\"type\":\"b\"}]}", true,
      "missing `type` (a config list? name the file *.conflist)" },
    { "[1,2]", false, "not a JSON object" },
    { "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"name\":\"m\",\"type\":\"b\"}", true,
      "duplicate object key" },
  };

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      cleanup_free char *msg = parse_error (cases[i].text, cases[i].legacy);
      ASSERT_CONTAINS (msg, cases[i].expected);
      ASSERT_CONTAINS (msg, "/etc/cni/net.d/x.conf");
    }
}

static void
test_load_dir_picks_first_usable (void **state)
{
  struct fixture *fx = *state;
  struct cni_network *net = NULL;
  struct husk_error *err = NULL;

  write_conf (fx, "30-legacy.conf", "{\"cniVersion\":\"1.0.0\",\"name\":\"legacy\",\"type\":\"bridge\"}");
  write_conf (fx, "20-good.conflist",
              "{\"cniVersion\":\"1.0.0\",\"name\":\"good\",\"plugins\":[{\"type\":\"bridge\"}]}");
  write_conf (fx, "10-broken.conflist", "{\"cniVersion\": \"1.0.0\",");
  write_conf (fx, "00-notes.txt", "{\"cniVersion\":\"1.0.0\",\"name\":\"txt\",\"type\":\"bridge\"}");
  write_conf (fx, ".05-hidden.conf", "{\"cniVersion\":\"1.0.0\",\"name\":\"hidden\",\"type\":\"bridge\"}");

  assert_int_equal (cni_config_load_dir (fx->conf_dir, &net, &err), 0);
  assert_string_equal (net->name, "good");
  ASSERT_CONTAINS (net->path, "/20-good.conflist");
  assert_non_null (net->skipped[0]);
  ASSERT_CONTAINS (net->skipped[0], "10-broken.conflist:1:");
  assert_null (net->skipped[1]);
  cni_network_free (net);

  /* A legacy file sorted first wins over a later list. */
  write_conf (fx, "15-first.json", "{\"cniVersion\":\"0.4.0\",\"name\":\"first\",\"type\":\"ptp\"}");
  assert_int_equal (cni_config_load_dir (fx->conf_dir, &net, &err), 0);
  assert_string_equal (net->name, "first");
  assert_string_equal (net->plugins[0].type, "ptp");
  cni_network_free (net);
}

static void
test_load_dir_without_usable_config (void **state)
{
  struct fixture *fx = *state;
  struct cni_network *net = NULL;
  struct husk_error *err = NULL;
  cleanup_free char *missing = xasprintf ("%s/nope", fx->dir);

  assert_int_equal (cni_config_load_dir (fx->conf_dir, &net, &err), -1);
  ASSERT_CONTAINS (err->msg, "no CNI network config in");
  husk_error_free (&err);
  assert_int_equal (cni_config_load_dir (missing, &net, &err), -1);
  ASSERT_CONTAINS (err->msg, "no CNI network config in");
  husk_error_free (&err);

  write_conf (fx, "10-a.conflist",
              "{\"cniVersion\":\"9.9.9\",\"name\":\"a\",\"plugins\":[{\"type\":\"b\"}]}");
  write_conf (fx, "20-b.conf", "not json");
  assert_int_equal (cni_config_load_dir (fx->conf_dir, &net, &err), -1);
  assert_null (net);
  ASSERT_CONTAINS (err->msg, "no usable CNI network config in");
  ASSERT_CONTAINS (err->msg, "10-a.conflist: unsupported cniVersion `9.9.9`");
  ASSERT_CONTAINS (err->msg, "(and 1 more)");
  husk_error_free (&err);
}

static void
test_find_plugin_in_bin_dirs (void **state)
{
  struct fixture *fx = *state;
  cleanup_free char *first = xasprintf ("%s/first", fx->dir);
  cleanup_free char *second = xasprintf ("%s/second", fx->dir);
  cleanup_free char *dirs = xasprintf ("%s/absent::%s:%s", fx->dir, first, second);
  cleanup_free char *not_exec = xasprintf ("%s/bridge", first);
  cleanup_free char *in_second = xasprintf ("%s/bridge", second);
  cleanup_free char *found = NULL;
  struct husk_error *err = NULL;

  assert_int_equal (mkdir (first, 0755), 0);
  assert_int_equal (mkdir (second, 0755), 0);
  write_text (not_exec, "#!/bin/sh\n", 0644);
  write_text (in_second, "#!/bin/sh\n", 0755);

  assert_int_equal (cni_find_plugin (dirs, "bridge", &found, &err), 0);
  assert_string_equal (found, in_second);
  assert_int_equal (cni_find_plugin (dirs, "portmap", &found, &err), -1);
  ASSERT_CONTAINS (err->msg, "CNI plugin `portmap` not found in ");
  ASSERT_CONTAINS (err->msg, dirs);
  husk_error_free (&err);
  assert_int_equal (cni_find_plugin (dirs, "../second/bridge", &found, &err), -1);
  husk_error_free (&err);
}

static void
test_network_ready (void **state)
{
  struct fixture *fx = *state;
  struct husk_error *err = NULL;

  assert_int_equal (cni_network_ready (fx->conf_dir, fx->bin_dir, &err), -1);
  ASSERT_CONTAINS (err->msg, "no CNI network config");
  husk_error_free (&err);

  write_conf (fx, "10-net.conflist", conflist_text);
  write_plugin (fx, "bridge", "true");
  write_plugin (fx, "portmap", "true");
  assert_int_equal (cni_network_ready (fx->conf_dir, fx->bin_dir, &err), -1);
  ASSERT_CONTAINS (err->msg, "network `podnet` (");
  ASSERT_CONTAINS (err->msg, "CNI plugin `host-local` not found");
  husk_error_free (&err);

  write_plugin (fx, "host-local", "true");
  assert_int_equal (cni_network_ready (fx->conf_dir, fx->bin_dir, &err), 0);
  assert_null (err);
}

/* ---------------------------------------------------------------- results */

static const char result_100[]
    = "{\"cniVersion\":\"1.0.0\","
      "\"interfaces\":[{\"name\":\"cni0\",\"mac\":\"aa:bb:cc:dd:ee:01\"},"
      "{\"name\":\"veth1\",\"mac\":\"aa:bb:cc:dd:ee:02\"},"
      "{\"name\":\"eth0\",\"mac\":\"aa:bb:cc:dd:ee:03\",\"sandbox\":\"/run/netns/p\"}],"
      "\"ips\":[{\"address\":\"fd00::5/64\",\"gateway\":\"fd00::1\",\"interface\":2},"
      "{\"address\":\"10.88.0.5/16\",\"gateway\":\"10.88.0.1\",\"interface\":2},"
      "{\"address\":\"10.88.0.1/16\",\"interface\":0}],"
      "\"routes\":[{\"dst\":\"0.0.0.0/0\",\"gw\":\"10.88.0.1\"},{\"dst\":\"::/0\"}],"
      "\"dns\":{\"nameservers\":[\"10.96.0.10\"],\"domain\":\"cluster.local\",\"search\":[\"a.svc\",\"svc\"],"
      "\"options\":[\"ndots:5\"]}}";

static void
test_result_100 (void **state)
{
  struct cni_result *result = NULL;
  struct husk_error *err = NULL;
  cleanup_strv char **ips = NULL;

  assert_int_equal (cni_result_parse (result_100, strlen (result_100), &result, &err), 0);
  assert_string_equal (result->cni_version, "1.0.0");
  assert_int_equal (result->n_interfaces, 3);
  assert_string_equal (result->interfaces[2].name, "eth0");
  assert_string_equal (result->interfaces[2].sandbox, "/run/netns/p");
  assert_null (result->interfaces[0].sandbox);
  assert_int_equal (result->n_ips, 3);
  assert_int_equal (result->ips[0].family, 6);
  assert_string_equal (result->ips[1].address, "10.88.0.5/16");
  assert_string_equal (result->ips[1].gateway, "10.88.0.1");
  assert_int_equal (result->ips[1].interface, 2);
  assert_null (result->ips[2].gateway);
  assert_int_equal (result->n_routes, 2);
  assert_string_equal (result->routes[0].gw, "10.88.0.1");
  assert_null (result->routes[1].gw);
  assert_string_equal (result->dns.nameservers[0], "10.96.0.10");
  assert_null (result->dns.nameservers[1]);
  assert_string_equal (result->dns.domain, "cluster.local");
  assert_string_equal (result->dns.search[1], "svc");
  assert_string_equal (result->dns.options[0], "ndots:5");

  /* The bridge's own address (interface 0) is not the pod's; IPv4 first. */
  ips = cni_result_pod_ips (result, NULL);
  assert_string_equal (ips[0], "10.88.0.5");
  assert_string_equal (ips[1], "fd00::5");
  assert_null (ips[2]);
  cni_result_free (result);
}

static void
test_result_040 (void **state)
{
  static const char text[] = "{\"cniVersion\":\"0.4.0\","
                             "\"interfaces\":[{\"name\":\"eth0\",\"sandbox\":\"/proc/1/ns/net\"}],"
                             "\"ips\":[{\"version\":\"6\",\"address\":\"2001:db8::9/64\",\"interface\":0},"
                             "{\"version\":\"4\",\"address\":\"192.168.5.9/24\",\"gateway\":\"192.168.5.1\","
                             "\"interface\":0}],"
                             "\"routes\":[{\"dst\":\"0.0.0.0/0\",\"gw\":\"192.168.5.1\"}]}";
  static const char no_interfaces[] = "{\"cniVersion\":\"0.3.1\",\"ips\":[{\"version\":\"4\","
                                      "\"address\":\"10.1.2.3/8\",\"gateway\":\"10.0.0.1\"}],\"dns\":{}}";
  struct cni_result *result = NULL;
  struct husk_error *err = NULL;
  cleanup_strv char **ips = NULL;
  cleanup_strv char **bare_ips = NULL;

  assert_int_equal (cni_result_parse (text, strlen (text), &result, &err), 0);
  assert_string_equal (result->cni_version, "0.4.0");
  assert_int_equal (result->ips[0].family, 6);
  assert_int_equal (result->ips[1].family, 4);
  assert_string_equal (result->ips[1].gateway, "192.168.5.1");
  assert_int_equal (result->n_routes, 1);
  assert_null (result->dns.nameservers[0]);
  assert_null (result->dns.domain);
  ips = cni_result_pod_ips (result, "eth0");
  assert_string_equal (ips[0], "192.168.5.9");
  assert_string_equal (ips[1], "2001:db8::9");
  assert_null (ips[2]);
  cni_result_free (result);

  /* Without interface indexes every address is the pod's. */
  assert_int_equal (cni_result_parse (no_interfaces, strlen (no_interfaces), &result, &err), 0);
  bare_ips = cni_result_pod_ips (result, NULL);
  assert_string_equal (bare_ips[0], "10.1.2.3");
  assert_null (bare_ips[1]);
  cni_result_free (result);
}

static void
test_result_rejects_invalid (void **state)
{
  static const struct
  {
    const char *text, *expected;
  } cases[] = {
    { "{\"ips\":[{\"address\":\"10.0.0.1\"}]}", "ips[0]: `address` must be ADDRESS/PREFIX" },
    { "{\"ips\":[{\"address\":\"10.0.0.1/33\"}]}", "ips[0]: `address` must be ADDRESS/PREFIX" },
    { "{\"ips\":[{\"version\":\"6\",\"address\":\"10.0.0.1/8\"}]}", "version 6 does not match" },
    { "{\"ips\":[{\"address\":\"10.0.0.1/8\",\"gateway\":\"fd00::1\"}]}", "ips[0]: bad `gateway`" },
    { "{\"interfaces\":[{\"name\":\"eth0\"}],\"ips\":[{\"address\":\"10.0.0.1/8\",\"interface\":1}]}",
      "`interface` is not an index" },
    { "{\"interfaces\":[{\"mac\":\"x\"}]}", "interfaces[0]: missing `name`" },
    { "{\"routes\":[{\"gw\":\"10.0.0.1\"}]}", "routes[0]: `dst` must be ADDRESS/PREFIX" },
    { "{\"ips\":{}}", "`ips` is not a list" },
    { "{\"ips\":[", "parse CNI result:1:" },
  };

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      struct cni_result *result = NULL;
      struct husk_error *err = NULL;

      assert_int_equal (cni_result_parse (cases[i].text, strlen (cases[i].text), &result, &err), -1);
      assert_null (result);
      ASSERT_CONTAINS (err->msg, cases[i].expected);
      husk_error_free (&err);
    }
}

/* ---------------------------------------------------------------- args and stdin */

static void
test_build_args (void **state)
{
  struct cni_pod pod = { .container_id = "abc123", .pod_namespace = "kube-system", .pod_name = "dns-1" };
  struct husk_error *err = NULL;
  char *args = cni_build_args (&pod, &err);

  assert_string_equal (args, "K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=dns-1;"
                             "K8S_POD_INFRA_CONTAINER_ID=abc123;IgnoreUnknown=1");
  free (args);
  pod.pod_uid = "5e1f-uid";
  args = cni_build_args (&pod, &err);
  assert_string_equal (args, "K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=dns-1;"
                             "K8S_POD_INFRA_CONTAINER_ID=abc123;K8S_POD_UID=5e1f-uid;IgnoreUnknown=1");
  free (args);
  pod.pod_name = "evil;K8S_POD_NAME=other";
  assert_null (cni_build_args (&pod, &err));
  ASSERT_CONTAINS (err->msg, "K8S_POD_NAME");
  husk_error_free (&err);
}

static void
test_runtime_config_only_for_declared_capabilities (void **state)
{
  const struct cni_port_mapping ports[] = {
    { .host_port = 8080, .container_port = 80, .protocol = "TCP", .host_ip = "127.0.0.1" },
    { .host_port = 0, .container_port = 81 }, /* not published: dropped */
    { .host_port = 5353, .container_port = 53, .protocol = "UDP", .host_ip = "" },
  };
  const struct cni_bandwidth bandwidth = { .ingress_rate = 1000000, .ingress_burst = 4000000 };
  struct cni_pod pod
      = { .container_id = "c1", .port_mappings = ports, .n_port_mappings = 3, .bandwidth = &bandwidth };
  struct cni_network *net
      = parse_ok ("{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"plugins\":["
                  "{\"type\":\"bridge\",\"name\":\"ignored\",\"cniVersion\":\"0.3.1\",\"prevResult\":{}},"
                  "{\"type\":\"portmap\",\"capabilities\":{\"portMappings\":true,\"bandwidth\":false}},"
                  "{\"type\":\"dnsy\",\"capabilities\":{\"dns\":true}},"
                  "{\"type\":\"bandwidth\",\"capabilities\":{\"bandwidth\":true}}]}",
                  false);
  json_t *runtime_config = cni_runtime_config (&pod);
  json_t *prev = json_pack ("{s:s}", "cniVersion", "1.0.0");
  json_t *conf, *mappings;

  /* No capabilities: no runtimeConfig, the list's name and version, no
   * stale prevResult of its own. */
  conf = cni_plugin_stdin (net, 0, NULL, runtime_config);
  assert_null (json_object_get (conf, "runtimeConfig"));
  assert_null (json_object_get (conf, "prevResult"));
  assert_string_equal (json_string_value (json_object_get (conf, "name")), "n");
  assert_string_equal (json_string_value (json_object_get (conf, "cniVersion")), "1.0.0");
  json_decref (conf);

  conf = cni_plugin_stdin (net, 1, prev, runtime_config);
  assert_ptr_equal (json_object_get (conf, "prevResult"), prev);
  assert_int_equal (json_object_size (json_object_get (conf, "runtimeConfig")), 1);
  mappings = json_object_get (json_object_get (conf, "runtimeConfig"), "portMappings");
  assert_int_equal (json_array_size (mappings), 2);
  assert_int_equal (json_integer_value (json_object_get (json_array_get (mappings, 0), "hostPort")), 8080);
  assert_int_equal (json_integer_value (json_object_get (json_array_get (mappings, 0), "containerPort")), 80);
  assert_string_equal (json_string_value (json_object_get (json_array_get (mappings, 0), "protocol")), "tcp");
  assert_string_equal (json_string_value (json_object_get (json_array_get (mappings, 0), "hostIP")),
                       "127.0.0.1");
  assert_string_equal (json_string_value (json_object_get (json_array_get (mappings, 1), "protocol")), "udp");
  assert_null (json_object_get (json_array_get (mappings, 1), "hostIP"));
  json_decref (conf);

  /* Declared, but the pod has no DNS settings: nothing to inject. */
  conf = cni_plugin_stdin (net, 2, prev, runtime_config);
  assert_null (json_object_get (conf, "runtimeConfig"));
  json_decref (conf);

  conf = cni_plugin_stdin (net, 3, prev, runtime_config);
  assert_int_equal (
      json_integer_value (json_object_get (
          json_object_get (json_object_get (conf, "runtimeConfig"), "bandwidth"), "ingressRate")),
      1000000);
  assert_null (
      json_object_get (json_object_get (json_object_get (conf, "runtimeConfig"), "bandwidth"), "egressRate"));
  json_decref (conf);

  /* The shared config was not touched. */
  assert_null (json_object_get (net->plugins[1].conf, "runtimeConfig"));
  json_decref (prev);
  json_decref (runtime_config);
  cni_network_free (net);
}

/* ---------------------------------------------------------------- cache */

static void
test_cache_round_trip (void **state)
{
  struct fixture *fx = *state;
  json_t *config = json_loads (conflist_text, 0, NULL);
  json_t *runtime_config = json_pack ("{s:[{s:i}]}", "portMappings", "hostPort", 8080);
  json_t *result = json_loads (result_100, 0, NULL);
  struct cni_cache_entry entry = { .network = "podnet",
                                   .container_id = "c",
                                   .ifname = "eth0",
                                   .netns = "/run/husk/netns/c",
                                   .cni_args = "IgnoreUnknown=1",
                                   .config = config,
                                   .runtime_config = runtime_config,
                                   .result = result };
  struct cni_cache_entry other = entry, *back = NULL, **found = NULL;
  cleanup_free char *path = cni_cache_path (fx->cache_dir, "podnet", "c");
  cleanup_strv char **paths = NULL;
  struct cni_result *cached = NULL;
  struct husk_error *err = NULL;
  struct stat st;
  size_t n = 0;

  assert_int_equal (cni_cache_write (fx->cache_dir, &entry, true, &err), 0);
  assert_int_equal (stat (path, &st), 0);
  assert_int_equal (st.st_mode & 0777, 0600);
  assert_int_equal (cni_cache_read (path, &back, &err), 0);
  assert_string_equal (back->network, "podnet");
  assert_string_equal (back->container_id, "c");
  assert_string_equal (back->ifname, "eth0");
  assert_string_equal (back->netns, "/run/husk/netns/c");
  assert_string_equal (back->cni_args, "IgnoreUnknown=1");
  assert_true (json_equal (back->config, config));
  assert_true (json_equal (back->runtime_config, runtime_config));
  assert_true (json_equal (back->result, result));
  cni_cache_entry_free (back);

  /* "podnet-b-c.json" also ends in "-c.json": its containerId tells. */
  other.container_id = "b-c";
  other.result = NULL;
  assert_int_equal (cni_cache_write (fx->cache_dir, &other, true, &err), 0);
  assert_int_equal (cni_cache_find (fx->cache_dir, "c", &found, &paths, &n, &err), 0);
  assert_int_equal (n, 1);
  assert_string_equal (paths[0], path);
  assert_string_equal (found[0]->container_id, "c");
  cni_cache_entry_free (found[0]);
  free (found);

  assert_int_equal (cni_cached_result (&fx->ctx, "podnet", "c", &cached, &err), 0);
  assert_int_equal (cached->n_ips, 3);
  cni_result_free (cached);
  assert_int_equal (cni_cached_result (&fx->ctx, "podnet", "b-c", &cached, &err), 0);
  assert_null (cached);
  assert_int_equal (cni_cached_result (&fx->ctx, "podnet", "never", &cached, &err), 0);
  assert_null (cached);

  assert_int_equal (cni_cache_remove (path, &err), 0);
  assert_int_equal (cni_cache_remove (path, &err), 0);
  assert_int_equal (cni_cache_read (path, &back, &err), 0);
  assert_null (back);
  json_decref (config);
  json_decref (runtime_config);
  json_decref (result);
}

/* ---------------------------------------------------------------- operations with fake plugins */

#define RESULT_A                                                                                             \
  "{\"cniVersion\":\"1.0.0\",\"interfaces\":[{\"name\":\"eth0\",\"sandbox\":\"/proc/self/ns/net\"}],"        \
  "\"ips\":[{\"address\":\"10.99.0.7/24\",\"gateway\":\"10.99.0.1\",\"interface\":0}]}"
#define RESULT_B                                                                                             \
  "{\"cniVersion\":\"1.0.0\",\"interfaces\":[{\"name\":\"eth0\",\"sandbox\":\"/proc/self/ns/net\"}],"        \
  "\"ips\":[{\"address\":\"10.99.0.7/24\",\"interface\":0},{\"address\":\"fd99::7/64\",\"interface\":0}]}"

static const char chain_conflist[] = "{\"cniVersion\":\"1.0.0\",\"name\":\"chain\",\"plugins\":["
                                     "{\"type\":\"alpha\",\"ipam\":{\"type\":\"host-local\"}},"
                                     "{\"type\":\"beta\",\"capabilities\":{\"portMappings\":true}},"
                                     "{\"type\":\"gamma\"}]}";

static const struct cni_port_mapping chain_ports[] = {
  { .host_port = 8080, .container_port = 80, .protocol = "tcp", .host_ip = "127.0.0.1" },
};

static struct cni_pod
chain_pod (const char *id)
{
  struct cni_pod pod = { .container_id = id,
                         .netns = "/proc/self/ns/net",
                         .pod_namespace = "default",
                         .pod_name = "web",
                         .port_mappings = chain_ports,
                         .n_port_mappings = 1 };
  return pod;
}

/* alpha prints a result, beta another, gamma prints nothing (so beta's
 * stands). */
static struct cni_network *
chain_setup (struct fixture *fx)
{
  write_plugin (fx, "alpha", "[ $CNI_COMMAND = ADD ] && printf '%%s' '%s'; exit 0", RESULT_A);
  write_plugin (fx, "beta", "[ $CNI_COMMAND = ADD ] && printf '%%s' '%s'; exit 0", RESULT_B);
  write_plugin (fx, "gamma", "exit 0");
  return parse_ok (chain_conflist, false);
}

static void
test_add_chains_results_and_caches (void **state)
{
  struct fixture *fx = *state;
  struct cni_network *net = chain_setup (fx);
  struct cni_pod pod = chain_pod ("pod1");
  struct cni_result *result = NULL, *cached = NULL;
  struct husk_error *err = NULL;
  cleanup_free char *calls = NULL;
  cleanup_free char *env = NULL;
  cleanup_free char *expected_env = NULL;
  cleanup_strv char **ips = NULL;
  json_t *alpha_in, *beta_in, *gamma_in, *result_a;

  /* Inherited CNI_* variables must not leak through. */
  setenv ("CNI_IFNAME", "bogus", 1);
  if (cni_add (&fx->ctx, net, &pod, &result, &err) < 0)
    fail_msg ("ADD failed: %s", err->msg);
  unsetenv ("CNI_IFNAME");

  calls = log_file (fx, "calls");
  assert_string_equal (calls, "alpha ADD\nbeta ADD\ngamma ADD\n");
  env = log_file (fx, "alpha.ADD.env");
  expected_env = xasprintf ("CNI_ARGS=K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;"
                            "K8S_POD_INFRA_CONTAINER_ID=pod1;IgnoreUnknown=1\n"
                            "CNI_COMMAND=ADD\nCNI_CONTAINERID=pod1\nCNI_IFNAME=eth0\n"
                            "CNI_NETNS=/proc/self/ns/net\nCNI_PATH=%s\n",
                            fx->bin_dir);
  assert_string_equal (env, expected_env);

  alpha_in = log_json (fx, "alpha.ADD.stdin");
  beta_in = log_json (fx, "beta.ADD.stdin");
  gamma_in = log_json (fx, "gamma.ADD.stdin");
  result_a = json_loads (RESULT_A, 0, NULL);
  assert_null (json_object_get (alpha_in, "prevResult"));
  assert_null (json_object_get (alpha_in, "runtimeConfig"));
  assert_string_equal (json_string_value (json_object_get (alpha_in, "name")), "chain");
  assert_true (json_equal (json_object_get (beta_in, "prevResult"), result_a));
  assert_non_null (json_object_get (json_object_get (beta_in, "runtimeConfig"), "portMappings"));
  assert_int_equal (json_array_size (json_object_get (json_object_get (gamma_in, "prevResult"), "ips")), 2);

  /* The final result is beta's: IPv4 first. */
  ips = cni_result_pod_ips (result, NULL);
  assert_string_equal (ips[0], "10.99.0.7");
  assert_string_equal (ips[1], "fd99::7");
  assert_int_equal (cni_cached_result (&fx->ctx, "chain", "pod1", &cached, &err), 0);
  assert_non_null (cached);
  assert_true (json_equal (cached->json, result->json));

  json_decref (alpha_in);
  json_decref (beta_in);
  json_decref (gamma_in);
  json_decref (result_a);
  cni_result_free (cached);
  cni_result_free (result);
  cni_network_free (net);
}

static void
test_del_reverse_with_cached_result (void **state)
{
  struct fixture *fx = *state;
  struct cni_network *net = chain_setup (fx);
  struct cni_network *changed = NULL;
  struct cni_pod pod = chain_pod ("pod2");
  struct cni_pod after_restart = { .container_id = "pod2", .netns = "/proc/self/ns/net" };
  struct cni_result *result = NULL;
  struct husk_error *err = NULL;
  cleanup_free char *calls = NULL;
  cleanup_free char *cache_path = cni_cache_path (fx->cache_dir, "chain", "pod2");
  json_t *beta_in, *alpha_in, *result_b;

  assert_int_equal (cni_add (&fx->ctx, net, &pod, &result, &err), 0);
  cni_result_free (result);
  assert_int_equal (access (cache_path, F_OK), 0);

  /* As after a restart with a changed config: the cache has what to undo,
   * port mappings included, though the caller knows none. */
  changed
      = parse_ok ("{\"cniVersion\":\"1.0.0\",\"name\":\"chain\",\"plugins\":[{\"type\":\"gamma\"}]}", false);
  if (cni_del (&fx->ctx, changed, &after_restart, &err) < 0)
    fail_msg ("DEL failed: %s", err->msg);
  calls = log_file (fx, "calls");
  assert_string_equal (calls, "alpha ADD\nbeta ADD\ngamma ADD\ngamma DEL\nbeta DEL\nalpha DEL\n");
  beta_in = log_json (fx, "beta.DEL.stdin");
  alpha_in = log_json (fx, "alpha.DEL.stdin");
  result_b = json_loads (RESULT_B, 0, NULL);
  assert_true (json_equal (json_object_get (beta_in, "prevResult"), result_b));
  assert_true (json_equal (json_object_get (alpha_in, "prevResult"), result_b));
  assert_int_equal (
      json_integer_value (json_object_get (
          json_array_get (json_object_get (json_object_get (beta_in, "runtimeConfig"), "portMappings"), 0),
          "hostPort")),
      8080);
  assert_int_equal (access (cache_path, F_OK), -1);
  json_decref (beta_in);
  json_decref (alpha_in);
  json_decref (result_b);
  cni_network_free (changed);
  cni_network_free (net);
}

static void
test_del_is_idempotent (void **state)
{
  struct fixture *fx = *state;
  struct cni_network *net = chain_setup (fx);
  struct cni_pod pod = chain_pod ("never-added");
  struct husk_error *err = NULL;
  cleanup_free char *calls = NULL;
  cleanup_free char *env = NULL;
  json_t *alpha_in;

  pod.netns = "/tmp"; /* not a namespace (any more): plugins get no CNI_NETNS */
  assert_int_equal (cni_del (&fx->ctx, net, &pod, &err), 0);
  assert_int_equal (cni_del (&fx->ctx, net, &pod, &err), 0);
  assert_int_equal (cni_del (&fx->ctx, NULL, &pod, &err), 0);
  calls = log_file (fx, "calls");
  assert_string_equal (calls, "gamma DEL\nbeta DEL\nalpha DEL\ngamma DEL\nbeta DEL\nalpha DEL\n");
  env = log_file (fx, "alpha.DEL.env");
  ASSERT_CONTAINS (env, "CNI_NETNS=\n");
  alpha_in = log_json (fx, "alpha.DEL.stdin");
  assert_null (json_object_get (alpha_in, "prevResult"));
  json_decref (alpha_in);
  cni_network_free (net);
}

static void
test_check_uses_cached_result (void **state)
{
  struct fixture *fx = *state;
  struct cni_network *net = chain_setup (fx);
  struct cni_network *old
      = parse_ok ("{\"cniVersion\":\"0.3.1\",\"name\":\"chain\",\"plugins\":[{\"type\":\"alpha\"}]}", false);
  struct cni_pod pod = chain_pod ("pod3");
  struct cni_result *result = NULL;
  struct husk_error *err = NULL;
  cleanup_free char *calls = NULL;
  json_t *gamma_in, *result_b;

  assert_int_equal (cni_check (&fx->ctx, net, &pod, &err), -1);
  ASSERT_CONTAINS (err->msg, "no cached ADD result");
  husk_error_free (&err);
  assert_int_equal (cni_add (&fx->ctx, net, &pod, &result, &err), 0);
  cni_result_free (result);
  assert_int_equal (cni_check (&fx->ctx, net, &pod, &err), 0);
  /* 0.3.x has no CHECK. */
  assert_int_equal (cni_check (&fx->ctx, old, &pod, &err), 0);
  calls = log_file (fx, "calls");
  assert_string_equal (calls, "alpha ADD\nbeta ADD\ngamma ADD\nalpha CHECK\nbeta CHECK\ngamma CHECK\n");
  gamma_in = log_json (fx, "gamma.CHECK.stdin");
  result_b = json_loads (RESULT_B, 0, NULL);
  assert_true (json_equal (json_object_get (gamma_in, "prevResult"), result_b));
  json_decref (gamma_in);
  json_decref (result_b);
  cni_network_free (old);
  cni_network_free (net);
}

static void
test_add_failure_is_undone (void **state)
{
  struct fixture *fx = *state;
  struct cni_network *net = chain_setup (fx);
  struct cni_pod pod = chain_pod ("pod4");
  struct cni_result *result = NULL;
  struct husk_error *err = NULL;
  cleanup_free char *calls = NULL;
  cleanup_free char *cache_path = cni_cache_path (fx->cache_dir, "chain", "pod4");
  json_t *alpha_in, *result_a;

  write_plugin (fx, "beta",
                "[ $CNI_COMMAND = ADD ] || exit 0\n"
                "printf '%%s' '{\"cniVersion\":\"1.0.0\",\"code\":7,\"msg\":\"failed to set up\","
                "\"details\":\"no\\nroute\"}'\nexit 1");
  assert_int_equal (cni_add (&fx->ctx, net, &pod, &result, &err), -1);
  assert_null (result);
  assert_string_equal (err->msg, "cni plugin beta ADD: failed to set up: no route");
  husk_error_free (&err);
  calls = log_file (fx, "calls");
  assert_string_equal (calls, "alpha ADD\nbeta ADD\ngamma DEL\nbeta DEL\nalpha DEL\n");
  /* The DEL that undid it had alpha's result. */
  alpha_in = log_json (fx, "alpha.DEL.stdin");
  result_a = json_loads (RESULT_A, 0, NULL);
  assert_true (json_equal (json_object_get (alpha_in, "prevResult"), result_a));
  assert_int_equal (access (cache_path, F_OK), -1);
  json_decref (alpha_in);
  json_decref (result_a);
  cni_network_free (net);
}

/* A plugin whose DEL fails (or that is missing) does not stop the DEL of
 * the others: each tolerates what is gone, and all before it in the list
 * would otherwise keep their rules, leases and links.  The first failure
 * is the one reported, and the cache entry stays for a retry. */
static void
test_del_goes_on_past_a_failure (void **state)
{
  struct fixture *fx = *state;
  struct cni_network *net = chain_setup (fx);
  struct cni_pod pod = chain_pod ("pod5");
  struct cni_result *result = NULL;
  struct husk_error *err = NULL;
  cleanup_free char *calls = NULL;
  cleanup_free char *cache_path = cni_cache_path (fx->cache_dir, "chain", "pod5");

  assert_int_equal (cni_add (&fx->ctx, net, &pod, &result, &err), 0);
  cni_result_free (result);
  write_plugin (
      fx, "beta",
      "[ $CNI_COMMAND = DEL ] && { echo '{\"code\":11,\"msg\":\"beta is stuck\"}'; exit 1; }; exit 0");
  write_plugin (
      fx, "gamma",
      "[ $CNI_COMMAND = DEL ] && { echo '{\"code\":11,\"msg\":\"gamma is stuck\"}'; exit 1; }; exit 0");
  assert_int_equal (cni_del (&fx->ctx, net, &pod, &err), -1);
  ASSERT_CONTAINS (err->msg, "gamma is stuck");
  husk_error_free (&err);
  calls = log_file (fx, "calls");
  assert_string_equal (calls, "alpha ADD\nbeta ADD\ngamma ADD\ngamma DEL\nbeta DEL\nalpha DEL\n");
  assert_int_equal (access (cache_path, F_OK), 0);
  cni_network_free (net);
}

static void
test_plugin_failures_are_one_line (void **state)
{
  struct fixture *fx = *state;
  static const struct
  {
    const char *body, *expected;
  } cases[] = {
    { "echo 'cannot open\nthe thing' >&2; exit 3",
      "cni plugin alpha DEL: exited with status 3: cannot open the thing" },
    { "printf '{\"code\":11,\"msg\":\"try again later\"}'; exit 1", "cni plugin alpha DEL: try again later" },
    { "kill -9 $$", "cni plugin alpha DEL: killed by signal 9" },
  };
  struct cni_network *net
      = parse_ok ("{\"cniVersion\":\"1.0.0\",\"name\":\"one\",\"plugins\":[{\"type\":\"alpha\"}]}", false);
  struct cni_pod pod = chain_pod ("pod5");

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      struct husk_error *err = NULL;

      write_plugin (fx, "alpha", "%s", cases[i].body);
      assert_int_equal (cni_del (&fx->ctx, net, &pod, &err), -1);
      assert_string_equal (err->msg, cases[i].expected);
      husk_error_free (&err);
    }
  cni_network_free (net);
}

static void
test_plugin_exec_errors (void **state)
{
  struct fixture *fx = *state;
  struct cni_network *net
      = parse_ok ("{\"cniVersion\":\"1.0.0\",\"name\":\"one\",\"plugins\":[{\"type\":\"alpha\"}]}", false);
  cleanup_free char *path = xasprintf ("%s/alpha", fx->bin_dir);
  struct cni_pod pod = chain_pod ("pod6");
  struct cni_result *result = NULL;
  struct husk_error *err = NULL;

  assert_int_equal (cni_add (&fx->ctx, net, &pod, &result, &err), -1);
  ASSERT_CONTAINS (err->msg, "CNI plugin `alpha` not found in");
  husk_error_free (&err);

  write_text (path, "#!/nonexistent/interpreter\n", 0755);
  assert_int_equal (cni_add (&fx->ctx, net, &pod, &result, &err), -1);
  ASSERT_CONTAINS (err->msg, "cni plugin alpha ADD: exec `");
  ASSERT_CONTAINS (err->msg, "No such file or directory");
  husk_error_free (&err);

  write_plugin (fx, "alpha", "[ $CNI_COMMAND = ADD ] && echo '{\"ips\": [' ; exit 0");
  assert_int_equal (cni_add (&fx->ctx, net, &pod, &result, &err), -1);
  ASSERT_CONTAINS (err->msg, "cni plugin alpha ADD: bad result:");
  husk_error_free (&err);

  write_plugin (fx, "alpha", "exit 0");
  assert_int_equal (cni_add (&fx->ctx, net, &pod, &result, &err), -1);
  ASSERT_CONTAINS (err->msg, "network `one`: ADD gave no result");
  husk_error_free (&err);

  pod.container_id = "../escape";
  assert_int_equal (cni_add (&fx->ctx, net, &pod, &result, &err), -1);
  ASSERT_CONTAINS (err->msg, "invalid CNI container id");
  husk_error_free (&err);
  cni_network_free (net);
}

/* With SIGCHLD ignored the kernel reaps the plugin: its status is lost,
 * and that must not read as success. */
static void
test_lost_exit_status_is_an_error (void **state)
{
  struct fixture *fx = *state;
  struct cni_network *net
      = parse_ok ("{\"cniVersion\":\"1.0.0\",\"name\":\"one\",\"plugins\":[{\"type\":\"alpha\"}]}", false);
  struct cni_pod pod = chain_pod ("pod9");
  struct husk_error *err = NULL;
  int ret;

  write_plugin (fx, "alpha", "exit 1");
  signal (SIGCHLD, SIG_IGN);
  ret = cni_del (&fx->ctx, net, &pod, &err);
  signal (SIGCHLD, SIG_DFL);
  assert_int_equal (ret, -1);
  ASSERT_CONTAINS (err->msg, "cni plugin alpha DEL: get the exit status of `");
  ASSERT_CONTAINS (err->msg, "No child processes");
  husk_error_free (&err);
  cni_network_free (net);
}

static bool
process_gone (pid_t pid)
{
  for (int i = 0; i < 200; i++)
    {
      cleanup_free char *stat_path = xasprintf ("/proc/%d/stat", (int) pid);
      cleanup_free char *stat = read_text (stat_path);
      const char *state_field = stat ? strrchr (stat, ')') : NULL;

      if (stat == NULL || (state_field && state_field[2] == 'Z'))
        return true;
      usleep (10000);
    }
  return false;
}

static void
test_timeout_kills_process_group (void **state)
{
  struct fixture *fx = *state;
  struct cni_network *net
      = parse_ok ("{\"cniVersion\":\"1.0.0\",\"name\":\"one\",\"plugins\":[{\"type\":\"alpha\"}]}", false);
  struct cni_pod pod = chain_pod ("pod7");
  struct cni_ctx ctx = fx->ctx;
  struct husk_error *err = NULL;
  struct timespec start, end;
  cleanup_free char *pids = NULL;
  int plugin_pid = 0, sleeper_pid = 0;

  write_plugin (fx, "alpha", "sleep 30 & echo \"$$ $!\" > $log/pids; wait");
  ctx.timeout_s = 1;
  clock_gettime (CLOCK_MONOTONIC, &start);
  assert_int_equal (cni_del (&ctx, net, &pod, &err), -1);
  clock_gettime (CLOCK_MONOTONIC, &end);
  assert_string_equal (err->msg, "cni plugin alpha DEL: timed out after 1s");
  husk_error_free (&err);
  assert_true (end.tv_sec - start.tv_sec < 5);
  pids = log_file (fx, "pids");
  assert_non_null (pids);
  assert_int_equal (sscanf (pids, "%d %d", &plugin_pid, &sleeper_pid), 2);
  assert_true (process_gone (plugin_pid));
  assert_true (process_gone (sleeper_pid));
  cni_network_free (net);
}

static int
count_fds (void)
{
  cleanup_dir DIR *dir = opendir ("/proc/self/fd");
  int n = 0;

  while (dir && readdir (dir))
    n++;
  return n;
}

/* Big stdin and stdout (more than a pipe holds), a plugin that never reads
 * its stdin, an fd of ours without O_CLOEXEC that the plugin must not see,
 * and no fd left open here afterwards. */
static void
test_exec_pipes_and_fds (void **state)
{
  struct fixture *fx = *state;
  size_t big = 300 * 1024;
  cleanup_free char *padding = xmalloc (big + 1);
  cleanup_free char *conf = NULL;
  cleanup_free char *seen = NULL;
  struct cni_network *net = NULL;
  struct cni_pod pod = chain_pod ("pod8");
  struct cni_result *result = NULL;
  struct husk_error *err = NULL;
  int before, leaked_fd;

  memset (padding, 'p', big);
  padding[big] = '\0';
  conf = xasprintf ("{\"cniVersion\":\"1.0.0\",\"name\":\"big\",\"plugins\":[{\"type\":\"alpha\","
                    "\"padding\":\"%s\"},{\"type\":\"deaf\"}]}",
                    padding);
  net = parse_ok (conf, false);
  write_plugin (fx, "alpha",
                "[ -e /proc/$$/fd/42 ] && echo leaked > $log/fd42\n"
                "[ $CNI_COMMAND = ADD ] || exit 0\n"
                "printf '{\"cniVersion\":\"1.0.0\",\"ips\":[{\"address\":\"10.9.9.9/8\"}],\"pad\":\"'\n"
                "head -c 400000 /dev/zero | tr '\\0' x\n"
                "printf '\"}'");
  /* deaf exits without reading: our write gets EPIPE, never SIGPIPE. */
  write_script (fx, "deaf", "#!/bin/sh\nexit 0\n");
  leaked_fd = open ("/dev/null", O_RDONLY);
  assert_true (leaked_fd >= 0);
  assert_int_equal (dup2 (leaked_fd, 42), 42);
  close (leaked_fd);
  before = count_fds ();

  if (cni_add (&fx->ctx, net, &pod, &result, &err) < 0)
    fail_msg ("ADD failed: %s", err->msg);
  assert_int_equal (result->n_ips, 1);
  assert_int_equal (strlen (json_string_value (json_object_get (result->json, "pad"))), 400000);
  cni_result_free (result);
  seen = log_file (fx, "alpha.ADD.stdin");
  assert_true (strlen (seen) > big);
  assert_int_equal (cni_del (&fx->ctx, net, &pod, &err), 0);

  assert_int_equal (count_fds (), before);
  close (42);
  assert_null (log_file (fx, "fd42"));
  cni_network_free (net);
}

struct parallel_job
{
  struct fixture *fx;
  const struct cni_network *net;
  char id[16];
  char *ip;
  int rc;
};

static void *
parallel_add (void *arg)
{
  struct parallel_job *job = arg;
  struct cni_pod pod = { .container_id = job->id, .netns = "/proc/self/ns/net" };
  struct cni_result *result = NULL;
  struct husk_error *err = NULL;

  job->rc = cni_add (&job->fx->ctx, job->net, &pod, &result, &err);
  if (job->rc == 0)
    {
      char **ips = cni_result_pod_ips (result, NULL);
      job->ip = xstrdup (ips[0]);
      husk_strvfreep (&ips);
      cni_result_free (result);
      job->rc = cni_del (&job->fx->ctx, job->net, &pod, &err);
    }
  husk_error_free (&err);
  return NULL;
}

/* Threads share one network and run their own pods at once. */
/* ---------------------------------------------------------------- leftover rules */

/* sha512("podnetc1") starts 1d96a4c7e0d1b705cc10f1f7: the plugins' chain
 * names for network podnet, container c1. */
#define C1_MASQ "CNI-1d96a4c7e0d1b705cc10f1f7"
#define C1_DNAT "CNI-DN-1d96a4c7e0d1b705cc10f"
#define C1_TAG "-m comment --comment \"name: \\\"podnet\\\" id: \\\"c1\\\"\""

static const char rules_dump[]
    = "# Generated by iptables-save v1.8.9\n"
      "*filter\n"
      ":INPUT ACCEPT [0:0]\n"
      ":CNI-FORWARD - [0:0]\n"
      "-A CNI-FORWARD -s 10.99.0.7/32 " C1_TAG " -j ACCEPT\n"
      "-A CNI-FORWARD -s 10.99.0.8/32 -j ACCEPT\n"
      "COMMIT\n"
      "*mangle\n"
      ":PREROUTING ACCEPT [0:0]\n"
      "COMMIT\n"
      "*nat\n"
      ":PREROUTING ACCEPT [0:0]\n"
      ":OUTPUT ACCEPT [0:0]\n"
      ":POSTROUTING ACCEPT [0:0]\n"
      ":CNI-HOSTPORT-DNAT - [0:0]\n"
      ":" C1_MASQ " - [0:0]\n"
      ":" C1_DNAT " - [0:0]\n"
      ":CNI-c10chain - [0:0]\n"
      ":CNI-shared - [0:0]\n"
      /* ours: the masquerade jump and its chain's two rules */
      "-A POSTROUTING -s 10.99.0.7/32 " C1_TAG " -j " C1_MASQ "\n"
      "-A " C1_MASQ " -d 10.99.0.0/24 " C1_TAG " -j ACCEPT\n"
      "-A " C1_MASQ " ! -d 224.0.0.0/4 " C1_TAG " -j MASQUERADE\n"
      /* portmap's jump (its comment starts "dnat "), its chain holds an
       * untagged rule */
      "-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment \"dnat name: \\\"podnet\\\" id: \\\"c1\\\"\" -m "
      "multiport "
      "--dports 8080 -j " C1_DNAT "\n"
      "-A " C1_DNAT " -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.99.0.7:80\n"
      /* id c10 is not c1 */
      "-A POSTROUTING -s 10.99.0.9/32 -m comment --comment \"name: \\\"podnet\\\" id: \\\"c10\\\"\" -j "
      "CNI-c10chain\n"
      /* a chain ours jumps to that someone else reaches too stays; a
       * comment naming our chain is not a jump to it */
      "-A PREROUTING " C1_TAG " -j CNI-shared\n"
      "-A OUTPUT -m comment --comment \"x -j " C1_MASQ " y\" -j CNI-shared\n"
      "COMMIT\n";

static void
test_rules_plan (void **state)
{
  size_t n_rules = 0, n_chains = 0;
  cleanup_free char *script = cni_rules_plan (rules_dump, "podnet", "c1", &n_rules, &n_chains);
  cleanup_free char *none = cni_rules_plan (rules_dump, "podnet", "c2", &n_rules, &n_chains);

  (void) state;
  assert_non_null (script);
  assert_string_equal (script,
                       "*filter\n"
                       "-D CNI-FORWARD -s 10.99.0.7/32 " C1_TAG " -j ACCEPT\n"
                       "COMMIT\n"
                       "*nat\n"
                       "-D POSTROUTING -s 10.99.0.7/32 " C1_TAG " -j " C1_MASQ "\n"
                       "-D " C1_MASQ " -d 10.99.0.0/24 " C1_TAG " -j ACCEPT\n"
                       "-D " C1_MASQ " ! -d 224.0.0.0/4 " C1_TAG " -j MASQUERADE\n"
                       "-D CNI-HOSTPORT-DNAT -p tcp -m comment --comment \"dnat name: \\\"podnet\\\" id: "
                       "\\\"c1\\\"\" -m multiport --dports 8080 -j " C1_DNAT "\n"
                       "-D PREROUTING " C1_TAG " -j CNI-shared\n"
                       "-F " C1_MASQ "\n-X " C1_MASQ "\n"
                       "-F " C1_DNAT "\n-X " C1_DNAT "\n"
                       "COMMIT\n");
  assert_null (none);
  assert_int_equal (n_rules, 0);
  assert_int_equal (n_chains, 0);
  free (script);
  /* What a DEL cut between -F and -X leaves: an empty, unreferenced chain
   * that only its name ties to the pod. */
  script = cni_rules_plan ("*nat\n:POSTROUTING ACCEPT [0:0]\n:" C1_MASQ " - [0:0]\nCOMMIT\n", "podnet", "c1",
                           &n_rules, &n_chains);
  assert_non_null (script);
  assert_string_equal (script, "*nat\n-F " C1_MASQ "\n-X " C1_MASQ "\nCOMMIT\n");
  assert_int_equal (n_rules, 0);
  assert_int_equal (n_chains, 1);
}

/* Fake iptables-save printing DUMP and iptables-restore saving what it
 * got; both log their calls. */
static void
write_fake_iptables (struct fixture *fx, const char *dump)
{
  cleanup_free char *dump_path = xasprintf ("%s/dump", fx->dir);
  cleanup_free char *save
      = xasprintf ("#!/bin/sh\necho iptables-save >> %s/calls\ncat %s\n", fx->log_dir, dump_path);
  cleanup_free char *restore = xasprintf (
      "#!/bin/sh\necho \"iptables-restore $*\" >> %s/calls\ncat > %s/restore.in\n", fx->log_dir, fx->log_dir);

  write_text (dump_path, dump, 0644);
  write_script (fx, "iptables-save", save);
  write_script (fx, "iptables-restore", restore);
}

/* A first DEL leaves iptables to the plugins; a DEL that failed (or was
 * cut short) is retried, and that retry removes what they left behind.
 * The cache entry stays until DEL worked. */
static void
test_del_retry_sweeps_rules (void **state)
{
  struct fixture *fx = *state;
  struct cni_network *net = parse_ok ("{\"cniVersion\":\"1.0.0\",\"name\":\"podnet\",\"plugins\":"
                                      "[{\"type\":\"alpha\",\"ipam\":{\"type\":\"host-local\"}}]}",
                                      false);
  struct cni_pod pod = chain_pod ("c1");
  cleanup_free char *cache_path = cni_cache_path (fx->cache_dir, "podnet", "c1");
  cleanup_free char *calls = NULL;
  cleanup_free char *restore_in = NULL;
  cleanup_free char *expected = NULL;
  cleanup_free char *calls_path = xasprintf ("%s/calls", fx->log_dir);
  struct cni_result *result = NULL;
  struct husk_error *err = NULL;
  size_t n_rules, n_chains;

  write_fake_iptables (fx, rules_dump);
  write_plugin (fx, "alpha", "[ $CNI_COMMAND = ADD ] && printf '%%s' '%s'; exit 0", RESULT_A);
  assert_int_equal (cni_add (&fx->ctx, net, &pod, &result, &err), 0);
  cni_result_free (result);
  write_plugin (fx, "alpha", "[ $CNI_COMMAND = DEL ] && exit 1; exit 0");
  assert_int_equal (cni_del (&fx->ctx, net, &pod, &err), -1);
  husk_error_free (&err);
  calls = log_file (fx, "calls");
  assert_string_equal (calls, "alpha ADD\nalpha DEL\n");
  assert_int_equal (access (cache_path, F_OK), 0);

  write_plugin (fx, "alpha", "exit 0");
  if (cni_del (&fx->ctx, net, &pod, &err) < 0)
    fail_msg ("DEL failed: %s", err->msg);
  free (calls);
  calls = log_file (fx, "calls");
  assert_string_equal (calls,
                       "alpha ADD\nalpha DEL\nalpha DEL\niptables-save\niptables-restore --noflush -w\n");
  restore_in = log_file (fx, "restore.in");
  expected = cni_rules_plan (rules_dump, "podnet", "c1", &n_rules, &n_chains);
  assert_string_equal (restore_in, expected);
  assert_int_equal (access (cache_path, F_OK), -1);

  /* A first DEL that works, with the netns there: no iptables at all. */
  unlink (calls_path);
  write_plugin (fx, "alpha", "[ $CNI_COMMAND = ADD ] && printf '%%s' '%s'; exit 0", RESULT_A);
  assert_int_equal (cni_add (&fx->ctx, net, &pod, &result, &err), 0);
  cni_result_free (result);
  assert_int_equal (cni_del (&fx->ctx, net, &pod, &err), 0);
  free (calls);
  calls = log_file (fx, "calls");
  assert_string_equal (calls, "alpha ADD\nalpha DEL\n");

  /* The netns gone: the plugins cannot find the interface, so sweep. */
  unlink (calls_path);
  assert_int_equal (cni_add (&fx->ctx, net, &pod, &result, &err), 0);
  cni_result_free (result);
  pod.netns = "/tmp";
  assert_int_equal (cni_del (&fx->ctx, net, &pod, &err), 0);
  free (calls);
  calls = log_file (fx, "calls");
  assert_string_equal (calls, "alpha ADD\nalpha DEL\niptables-save\niptables-restore --noflush -w\n");
  cni_network_free (net);
}

/* Every readable entry's id, once; unreadable ones are skipped. */
static void
test_cached_ids (void **state)
{
  struct fixture *fx = *state;
  struct cni_network *net = chain_setup (fx);
  struct cni_pod a = chain_pod ("ida"), b = chain_pod ("idb");
  cleanup_free char *junk = xasprintf ("%s/podnet-idc.json", fx->cache_dir);
  cleanup_free char *tmp = xasprintf ("%s/chain-idd.json.tmp.1.1", fx->cache_dir);
  cleanup_strv char **ids = NULL;
  struct cni_result *result = NULL;
  struct husk_error *err = NULL;

  assert_int_equal (cni_cached_ids (&fx->ctx, &ids, &err), 0);
  assert_null (ids[0]);
  husk_strvfreep (&ids);
  assert_int_equal (cni_add (&fx->ctx, net, &a, &result, &err), 0);
  cni_result_free (result);
  assert_int_equal (cni_add (&fx->ctx, net, &b, &result, &err), 0);
  cni_result_free (result);
  write_text (junk, "{\"kind\":", 0600);
  write_text (tmp, "{}", 0600);
  assert_int_equal (cni_cached_ids (&fx->ctx, &ids, &err), 0);
  assert_int_equal (husk_strv_len (ids), 2);
  assert_true ((strcmp (ids[0], "ida") == 0 && strcmp (ids[1], "idb") == 0)
               || (strcmp (ids[0], "idb") == 0 && strcmp (ids[1], "ida") == 0));
  cni_network_free (net);
}

static void
test_parallel_pods (void **state)
{
  struct fixture *fx = *state;
  struct cni_network *net = parse_ok ("{\"cniVersion\":\"1.0.0\",\"name\":\"par\",\"plugins\":"
                                      "[{\"type\":\"ipper\"},{\"type\":\"gamma\"}]}",
                                      false);
  struct parallel_job jobs[8];
  pthread_t threads[8];

  write_plugin (fx, "gamma", "exit 0");
  write_script (fx, "ipper",
                "#!/bin/sh\ncat >/dev/null\n[ $CNI_COMMAND = ADD ] || exit 0\n"
                "printf '{\"cniVersion\":\"1.0.0\",\"ips\":[{\"address\":\"10.7.0.%s/16\"}]}' "
                "${CNI_CONTAINERID#p}\n");
  for (int i = 0; i < 8; i++)
    {
      jobs[i] = (struct parallel_job){ .fx = fx, .net = net };
      snprintf (jobs[i].id, sizeof jobs[i].id, "p%d", i + 10);
      assert_int_equal (pthread_create (&threads[i], NULL, parallel_add, &jobs[i]), 0);
    }
  for (int i = 0; i < 8; i++)
    {
      cleanup_free char *expected = xasprintf ("10.7.0.%d", i + 10);

      pthread_join (threads[i], NULL);
      assert_int_equal (jobs[i].rc, 0);
      assert_string_equal (jobs[i].ip, expected);
      free (jobs[i].ip);
    }
  cni_network_free (net);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_parse_conflist),
    cmocka_unit_test (test_parse_legacy_conf),
    cmocka_unit_test (test_parse_bad_json_has_line_and_column),
    cmocka_unit_test (test_parse_rejects_invalid),
    cmocka_unit_test_setup_teardown (test_load_dir_picks_first_usable, setup, teardown),
    cmocka_unit_test_setup_teardown (test_load_dir_without_usable_config, setup, teardown),
    cmocka_unit_test_setup_teardown (test_find_plugin_in_bin_dirs, setup, teardown),
    cmocka_unit_test_setup_teardown (test_network_ready, setup, teardown),
    cmocka_unit_test (test_result_100),
    cmocka_unit_test (test_result_040),
    cmocka_unit_test (test_result_rejects_invalid),
    cmocka_unit_test (test_build_args),
    cmocka_unit_test (test_runtime_config_only_for_declared_capabilities),
    cmocka_unit_test_setup_teardown (test_cache_round_trip, setup, teardown),
    cmocka_unit_test_setup_teardown (test_add_chains_results_and_caches, setup, teardown),
    cmocka_unit_test_setup_teardown (test_del_reverse_with_cached_result, setup, teardown),
    cmocka_unit_test_setup_teardown (test_del_is_idempotent, setup, teardown),
    cmocka_unit_test_setup_teardown (test_check_uses_cached_result, setup, teardown),
    cmocka_unit_test_setup_teardown (test_add_failure_is_undone, setup, teardown),
    cmocka_unit_test_setup_teardown (test_del_goes_on_past_a_failure, setup, teardown),
    cmocka_unit_test_setup_teardown (test_plugin_failures_are_one_line, setup, teardown),
    cmocka_unit_test_setup_teardown (test_plugin_exec_errors, setup, teardown),
    cmocka_unit_test_setup_teardown (test_lost_exit_status_is_an_error, setup, teardown),
    cmocka_unit_test_setup_teardown (test_timeout_kills_process_group, setup, teardown),
    cmocka_unit_test_setup_teardown (test_exec_pipes_and_fds, setup, teardown),
    cmocka_unit_test_setup_teardown (test_parallel_pods, setup, teardown),
    cmocka_unit_test (test_rules_plan),
    cmocka_unit_test_setup_teardown (test_del_retry_sweeps_rules, setup, teardown),
    cmocka_unit_test_setup_teardown (test_cached_ids, setup, teardown),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
