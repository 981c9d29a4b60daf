/* Unit tests for the CDI library (cri/cdi/): spec parsing (JSON and YAML),
 * version and name rules, unknown fields, the registry over temp dirs
 * (bad files, duplicates, later dir wins, refresh on change), applying
 * edits to an OCI config, and a mutation fuzz loop over the parser. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "cri/cdi/cdi.h"
#include "husk/cleanup.h"

struct fixture
{
  char root[64];
  char dir1[96], dir2[96];
};

static int
setup (void **state)
{
  struct fixture *f = calloc (1, sizeof (*f));
  strcpy (f->root, "/tmp/husk-test-cdi-XXXXXX");
  assert_non_null (mkdtemp (f->root));
  snprintf (f->dir1, sizeof f->dir1, "%s/etc", f->root);
  snprintf (f->dir2, sizeof f->dir2, "%s/run", f->root);
  assert_int_equal (mkdir (f->dir1, 0755), 0);
  assert_int_equal (mkdir (f->dir2, 0755), 0);
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *f = *state;
  char cmd[128];
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", f->root);
  assert_int_equal (system (cmd), 0);
  free (f);
  return 0;
}

static void
write_file (const char *dir, const char *name, const char *text)
{
  char path[256];
  snprintf (path, sizeof path, "%s/%s", dir, name);
  FILE *fp = fopen (path, "w");
  assert_non_null (fp);
  fputs (text, fp);
  fclose (fp);
  assert_int_equal (chmod (path, 0644), 0);
}

#define JSON_SPEC(kind, dev, env)                                                                            \
  "{\"cdiVersion\":\"0.6.0\",\"kind\":\"" kind "\",\"devices\":[{\"name\":\"" dev                            \
  "\",\"containerEdits\":{\"env\":[\"" env "\"]}}]}"

static const char yaml_spec[] = "cdiVersion: \"1.0.0\"\n"
                                "kind: example.com/gpu\n"
                                "annotations:\n  note: hi\n"
                                "containerEdits:\n  env: [SPEC=1]\n"
                                "devices:\n"
                                "- name: \"0\"\n"
                                "  containerEdits:\n"
                                "    env:\n    - GPU=0\n"
                                "    deviceNodes:\n"
                                "    - path: /dev/gpu0\n      hostPath: /dev/null\n      permissions: rw\n"
                                "      fileMode: 0666\n"
                                "    additionalGids: [44, 44, 0]\n";

static json_t *
parse (const char *text, int yaml, struct husk_error **err)
{
  return cdi_spec_parse (text, strlen (text), yaml, "t.spec", err);
}

static void
test_parse_json_and_yaml (void **state)
{
  struct husk_error *err = NULL;
  json_t *j = parse (JSON_SPEC ("a.b/c", "x", "A=1"), 0, &err);
  assert_non_null (j);
  json_decref (j);
  json_t *y = parse (yaml_spec, 1, &err);
  assert_non_null (y);
  json_t *node = json_array_get (
      json_object_get (json_object_get (json_array_get (json_object_get (y, "devices"), 0), "containerEdits"),
                       "deviceNodes"),
      0);
  assert_int_equal (json_integer_value (json_object_get (node, "fileMode")), 0666);
  assert_string_equal (
      json_string_value (json_object_get (json_array_get (json_object_get (y, "devices"), 0), "name")), "0");
  json_decref (y);
}

static void
test_versions (void **state)
{
  static const char *const good[] = { "0.3.0", "0.5.0", "0.8.0", "1.0.0", "1.0.7" };
  static const char *const bad[] = { "0.2.0", "1.1.0", "2.0.0", "1.0", "x" };
  char text[256];
  struct husk_error *err = NULL;
  for (size_t i = 0; i < 5; i++)
    {
      snprintf (text, sizeof text, "{\"cdiVersion\":\"%s\",\"kind\":\"a.b/c\",\"devices\":[]}", good[i]);
      json_t *s = parse (text, 0, &err);
      assert_non_null (s);
      json_decref (s);
      snprintf (text, sizeof text, "{\"cdiVersion\":\"%s\",\"kind\":\"a.b/c\",\"devices\":[]}", bad[i]);
      assert_null (parse (text, 0, &err));
      assert_non_null (strstr (err->msg, bad[i]));
      assert_non_null (strstr (err->msg, "t.spec"));
      husk_error_free (&err);
    }
}

static void
test_names (void **state)
{
  static const char *const good[]
      = { "nvidia.com/gpu=0", "a/b=c", "vendor-x.io/class_1=dev:1.a", "v/c=GPU-1234-abcd" };
  static const char *const bad[] = { "nvidia.com/gpu", "nvidia.com=0",  "1vendor/gpu=0", "vendor./gpu=0",
                                     "vendor/gp.u=0",  "vendor/-gpu=0", "vendor/gpu=-0", "vendor/gpu=0-",
                                     "vendor/gpu=a b", "vendor/gpu=",   "/gpu=0",        "vendor/gpu=a/b" };
  struct husk_error *err = NULL;
  for (size_t i = 0; i < sizeof good / sizeof *good; i++)
    {
      char *kind = NULL, *dev = NULL;
      assert_int_equal (cdi_parse_name (good[i], &kind, &dev, &err), 0);
      assert_non_null (strchr (kind, '/'));
      free (kind), free (dev);
    }
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    {
      assert_int_equal (cdi_parse_name (bad[i], NULL, NULL, &err), -1);
      assert_int_equal (err->errnum, EINVAL);
      assert_non_null (strstr (err->msg, bad[i]));
      husk_error_free (&err);
    }
  char long_class[128];
  snprintf (long_class, sizeof long_class, "v.com/%064d=0", 0);
  long_class[6] = 'c';
  assert_int_equal (cdi_parse_name (long_class, NULL, NULL, &err), -1);
  assert_non_null (strstr (err->msg, "too long"));
  husk_error_free (&err);
  long_class[6 + 63] = '=';
  long_class[6 + 64] = '0';
  long_class[6 + 65] = '\0';
  assert_int_equal (cdi_parse_name (long_class, NULL, NULL, &err), 0);
  /* in a spec: bad kind and bad device names are refused */
  assert_null (parse (JSON_SPEC ("a.b", "x", "A=1"), 0, &err));
  assert_non_null (strstr (err->msg, "kind"));
  husk_error_free (&err);
  assert_null (parse (JSON_SPEC ("a.b/c", "x!", "A=1"), 0, &err));
  assert_non_null (strstr (err->msg, "devices[0]"));
  husk_error_free (&err);
}

static void
test_unknown_fields (void **state)
{
  struct husk_error *err = NULL;
  assert_null (parse ("{\"cdiVersion\":\"0.6.0\",\"kind\":\"a/b\",\"devices\":[],\"bogus\":1}", 0, &err));
  assert_non_null (strstr (err->msg, "unknown field bogus"));
  assert_non_null (strstr (err->msg, "t.spec"));
  husk_error_free (&err);
  assert_null (parse ("cdiVersion: 0.6.0\nkind: a/b\ndevices:\n- name: x\n  containerEdits:\n"
                      "    mounts:\n    - hostPath: /a\n      containerPath: /b\n      extra: 1\n",
                      1, &err));
  assert_non_null (strstr (err->msg, "unknown field devices[0].containerEdits.mounts[0].extra"));
  husk_error_free (&err);
  assert_null (parse ("cdiVersion: 0.6.0\nkind: a/b\nkind: c/d\ndevices: []\n", 1, &err));
  assert_non_null (strstr (err->msg, "line 3: duplicate key kind"));
  husk_error_free (&err);
  assert_null (
      parse ("{\"cdiVersion\":\"0.6.0\",\"kind\":\"a/b\",\"kind\":\"c/d\",\"devices\":[]}", 0, &err));
  assert_non_null (strstr (err->msg, "duplicate"));
  husk_error_free (&err);
  assert_null (parse ("{\"cdiVersion\":\"0.6.0\",\"kind\":\"a/b\",\"devices\":[{\"name\":\"x\"}]}", 0, &err));
  assert_non_null (strstr (err->msg, "containerEdits is missing"));
  husk_error_free (&err);
  assert_null (parse ("{\"cdiVersion\":\"0.6.0\",\"kind\":\"a/b\",\"devices\":[{\"name\":\"x\","
                      "\"containerEdits\":{\"env\":[1]}}]}",
                      0, &err));
  assert_non_null (strstr (err->msg, "env[0] is not a string"));
  husk_error_free (&err);
  static const char *const bad_values[][2] = {
    { "\"env\":[\"NOEQUALS\"]", "env[0] NOEQUALS is not KEY=VALUE" },
    { "\"hooks\":[{\"hookName\":\"later\",\"path\":\"/x\"}]", "hooks[0].hookName later is unknown" },
    { "\"deviceNodes\":[{\"path\":\"/dev/x\",\"permissions\":\"rx\"}]", "permissions rx" },
    { "\"deviceNodes\":[{\"path\":\"/dev/x\",\"type\":\"z\"}]", "type z" },
    { "\"mounts\":[{\"hostPath\":\"/a\",\"containerPath\":\"rel\"}]", "containerPath rel is not absolute" },
  };
  for (size_t i = 0; i < sizeof bad_values / sizeof *bad_values; i++)
    {
      char text[512];
      snprintf (text, sizeof text,
                "{\"cdiVersion\":\"0.6.0\",\"kind\":\"a/"
                "b\",\"devices\":[{\"name\":\"x\",\"containerEdits\":{%s}}]}",
                bad_values[i][0]);
      assert_null (parse (text, 0, &err));
      assert_non_null (strstr (err->msg, bad_values[i][1]));
      assert_non_null (strstr (err->msg, "devices[0].containerEdits"));
      husk_error_free (&err);
    }
}

static struct cdi_registry *
registry (struct fixture *f)
{
  const char *dirs[] = { f->dir1, f->dir2, NULL };
  struct cdi_registry *reg = cdi_registry_new (dirs);
  assert_non_null (reg);
  return reg;
}

static const char *
env_of (json_t *edits, size_t i)
{
  return json_string_value (json_array_get (json_object_get (edits, "env"), i));
}

static void
test_registry_bad_file_and_dups (void **state)
{
  struct fixture *f = *state;
  write_file (f->dir1, "good.json", JSON_SPEC ("a.com/x", "one", "A=1"));
  write_file (f->dir1, "gpu.yaml", yaml_spec);
  write_file (f->dir1, "bad.json", "{\"cdiVersion\": ");
  write_file (f->dir1, "dup1.json", JSON_SPEC ("a.com/x", "two", "A=2"));
  write_file (f->dir1, "dup2.yml",
              "cdiVersion: 0.5.0\nkind: a.com/x\ndevices:\n- name: two\n  containerEdits: {}\n");
  write_file (f->dir1, "ignored.txt", "nothing");
  char fifo[256];
  snprintf (fifo, sizeof fifo, "%s/fifo.json", f->dir1);
  assert_int_equal (mkfifo (fifo, 0600), 0); /* refused, without blocking the load */
  struct cdi_registry *reg = registry (f);
  size_t n;
  const struct cdi_device_info *devs = cdi_registry_list (reg, &n);
  assert_int_equal (n, 2);
  assert_string_equal (devs[0].name, "a.com/x=one");
  assert_non_null (strstr (devs[0].file, "good.json"));
  assert_string_equal (devs[1].name, "example.com/gpu=0");
  const struct cdi_spec_error *errs = cdi_registry_errors (reg, &n);
  assert_int_equal (n, 3);
  int saw_bad = 0, saw_dup = 0, saw_fifo = 0;
  for (size_t i = 0; i < n; i++)
    {
      saw_bad |= strstr (errs[i].file, "bad.json") && strstr (errs[i].msg, "bad.json");
      saw_fifo |= strstr (errs[i].msg, "fifo.json: not a regular file") != NULL;
      saw_dup |= strstr (errs[i].msg, "a.com/x=two") && strstr (errs[i].msg, "dup1.json")
                 && strstr (errs[i].msg, "dup2.yml");
    }
  assert_true (saw_bad);
  assert_true (saw_dup);
  assert_true (saw_fifo);
  struct husk_error *err = NULL;
  assert_null (cdi_registry_get (reg, "a.com/x=two", &err));
  assert_int_equal (err->errnum, ENOENT);
  husk_error_free (&err);
  assert_null (cdi_registry_get (reg, "a.com/x", &err));
  assert_int_equal (err->errnum, EINVAL);
  husk_error_free (&err);
  cdi_registry_free (reg);
}

static void
test_registry_later_dir_wins_and_refresh (void **state)
{
  struct fixture *f = *state;
  write_file (f->dir1, "a.json", JSON_SPEC ("a.com/x", "one", "FROM=etc"));
  write_file (f->dir2, "b.json", JSON_SPEC ("a.com/x", "one", "FROM=run"));
  struct cdi_registry *reg = registry (f);
  struct husk_error *err = NULL;
  json_t *edits = cdi_registry_get (reg, "a.com/x=one", &err);
  assert_non_null (edits);
  assert_string_equal (env_of (edits, 0), "FROM=run");
  size_t n;
  cdi_registry_errors (reg, &n);
  assert_int_equal (n, 0);
  assert_int_equal (cdi_registry_refresh (reg), 0);
  /* a changed file (other size) is picked up without a restart */
  write_file (f->dir2, "b.json", JSON_SPEC ("a.com/x", "one", "FROM=run-changed"));
  edits = cdi_registry_get (reg, "a.com/x=one", &err);
  assert_string_equal (env_of (edits, 0), "FROM=run-changed");
  /* a removed file too: the earlier dir's device is back */
  char path[256];
  snprintf (path, sizeof path, "%s/b.json", f->dir2);
  assert_int_equal (unlink (path), 0);
  edits = cdi_registry_get (reg, "a.com/x=one", &err);
  assert_string_equal (env_of (edits, 0), "FROM=etc");
  /* and a new one */
  write_file (f->dir2, "c.yaml",
              "cdiVersion: 0.3.0\nkind: b.org/y\ndevices:\n- name: z\n  containerEdits: {}\n");
  assert_non_null (cdi_registry_get (reg, "b.org/y=z", &err));
  cdi_registry_free (reg);
}

/* The change check stats every dir and spec file on each lookup: with 16
 * spec files it must stay far below the 1 ms budget of a create. */
/* The attack: a spec anyone but root may write names a hook that runs as
 * root on the host.  Owned by nobody, mode 0666, or in a 0777 dir: not
 * loaded, a warning names the file, its devices do not resolve; a root
 * 0644 spec next to them still works. */
static void
test_registry_untrusted_specs (void **state)
{
  struct fixture *f = *state;
  char path[256], log_path[160], log_text[4096] = "";
  struct husk_error *err = NULL;
  size_t n;

  write_file (f->dir1, "root.json", JSON_SPEC ("a.com/x", "root", "A=1"));
  write_file (f->dir1, "nobody.json", JSON_SPEC ("a.com/x", "nobody", "A=2"));
  snprintf (path, sizeof path, "%s/nobody.json", f->dir1);
  assert_int_equal (chown (path, 65534, 65534), 0);
  write_file (f->dir1, "loose.json", JSON_SPEC ("a.com/x", "loose", "A=3"));
  snprintf (path, sizeof path, "%s/loose.json", f->dir1);
  assert_int_equal (chmod (path, 0666), 0);
  write_file (f->dir2, "in-loose-dir.json", JSON_SPEC ("a.com/x", "dir", "A=4"));
  assert_int_equal (chmod (f->dir2, 0777), 0);
  snprintf (log_path, sizeof log_path, "%s/warnings.log", f->root);
  int log_fd = open (log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true (log_fd >= 0);
  husk_log_set_file (log_fd, 0);

  struct cdi_registry *reg = registry (f);
  husk_log_set_file (2, 0);
  close (log_fd);
  json_t *edits = cdi_registry_get (reg, "a.com/x=root", &err);
  assert_non_null (edits);
  assert_string_equal (env_of (edits, 0), "A=1");
  const char *refused[] = { "a.com/x=nobody", "a.com/x=loose", "a.com/x=dir" };
  for (size_t i = 0; i < 3; i++)
    {
      assert_null (cdi_registry_get (reg, refused[i], &err));
      assert_non_null (strstr (err->msg, "no such device"));
      husk_error_free (&err);
    }
  const struct cdi_spec_error *errs = cdi_registry_errors (reg, &n);
  assert_int_equal (n, 3);
  int fd = open (log_path, O_RDONLY | O_CLOEXEC);
  assert_true (fd >= 0);
  assert_true (read (fd, log_text, sizeof log_text - 1) > 0);
  close (fd);
  for (size_t i = 0; i < n; i++)
    {
      /* One warning per refused file, naming it. */
      assert_non_null (strstr (errs[i].msg, errs[i].file));
      assert_non_null (strstr (log_text, errs[i].msg));
    }
  assert_non_null (strstr (log_text, "nobody.json: owned by uid 65534, not root: refused"));
  assert_non_null (strstr (log_text, "loose.json: writable by group or others (mode 0666): refused"));
  assert_non_null (strstr (log_text, "/run: writable by group or others (mode 0777): refused"));

  /* Tightened: picked up on the next lookup (the stamp holds the mode). */
  assert_int_equal (chmod (path, 0644), 0);
  assert_int_equal (chmod (f->dir2, 0755), 0);
  assert_non_null (cdi_registry_get (reg, "a.com/x=loose", &err));
  assert_non_null (cdi_registry_get (reg, "a.com/x=dir", &err));
  cdi_registry_free (reg);
}

static void
test_registry_refresh_cost (void **state)
{
  struct fixture *f = *state;
  for (int i = 0; i < 16; i++)
    {
      char name[32];
      snprintf (name, sizeof name, "s%02d.json", i);
      write_file (i % 2 ? f->dir1 : f->dir2, name, JSON_SPEC ("a.com/x", "one", "A=1"));
    }
  struct cdi_registry *reg = registry (f);
  struct timespec t0, t1;
  clock_gettime (CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < 1000; i++)
    assert_int_equal (cdi_registry_refresh (reg), 0);
  clock_gettime (CLOCK_MONOTONIC, &t1);
  double us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1000 / 1e3;
  /* Printed, not asserted: timing is never asserted in a unit test (a
   * loaded machine or a sanitizer build went past any fixed bound). */
  print_message ("refresh check with 16 spec files: %.1f us\n", us);
  cdi_registry_free (reg);
}

static json_t *
base_config (void)
{
  json_error_t jerr;
  json_t *c = json_loads ("{\"ociVersion\":\"1.0.2\",\"process\":{\"user\":{\"uid\":0,\"gid\":0},"
                          "\"env\":[\"PATH=/bin\",\"A=old\"]},"
                          "\"mounts\":[{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\"},"
                          "{\"destination\":\"/usr/lib/x\",\"source\":\"/old\"},"
                          "{\"destination\":\"/dev\",\"type\":\"tmpfs\",\"source\":\"tmpfs\"}],"
                          "\"linux\":{\"resources\":{\"devices\":[{\"allow\":false,\"access\":\"rwm\"}]}}}",
                          0, &jerr);
  assert_non_null (c);
  return c;
}

static const char apply_spec[]
    = "{\"cdiVersion\":\"0.6.0\",\"kind\":\"example.com/dev\","
      "\"containerEdits\":{\"env\":[\"SPEC=1\"],\"hooks\":[{\"hookName\":\"createContainer\",\"path\":\"/bin/"
      "hook\","
      "\"args\":[\"hook\",\"ldcache\"],\"env\":[\"X=1\"],\"timeout\":5}]},"
      "\"devices\":["
      "{\"name\":\"null\",\"containerEdits\":{\"env\":[\"A=new\",\"B=1\"],"
      "\"deviceNodes\":[{\"path\":\"/dev/mynull\",\"hostPath\":\"/dev/null\",\"permissions\":\"rw\","
      "\"uid\":1000,\"gid\":1000,\"fileMode\":432}],"
      "\"mounts\":[{\"hostPath\":\"/host/lib\",\"containerPath\":\"/usr/lib/"
      "x\",\"options\":[\"ro\",\"bind\"]},"
      "{\"hostPath\":\"/host/a\",\"containerPath\":\"/a\",\"type\":\"bind\"}],"
      "\"additionalGids\":[44,45,0]}},"
      "{\"name\":\"explicit\",\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/fake\",\"type\":\"c\","
      "\"major\":195,\"minor\":7}],\"additionalGids\":[44],"
      "\"hooks\":[{\"hookName\":\"poststop\",\"path\":\"/bin/done\"}],"
      "\"intelRdt\":{\"closID\":\"gpu\"}}},"
      "{\"name\":\"mismatch\",\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/"
      "null\",\"type\":\"b\"}]}},"
      "{\"name\":\"missing\",\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/nonexistent/node\"}]}}]}";

static json_t *
find_dest (json_t *config, const char *dest, size_t *index)
{
  size_t i;
  json_t *m;
  json_array_foreach (json_object_get (config, "mounts"), i,
                      m) if (!strcmp (json_string_value (json_object_get (m, "destination")), dest))
  {
    *index = i;
    return m;
  }
  return NULL;
}

static void
test_apply (void **state)
{
  struct fixture *f = *state;
  write_file (f->dir1, "dev.json", apply_spec);
  struct cdi_registry *reg = registry (f);
  json_t *c = base_config ();
  struct husk_error *err = NULL;
  const char *names[] = { "example.com/dev=null", "example.com/dev=explicit", "example.com/dev=null", NULL };
  assert_int_equal (cdi_apply (reg, c, names, &err), 0);
  json_t *env = json_object_get (json_object_get (c, "process"), "env");
  assert_int_equal (json_array_size (env), 4);
  assert_string_equal (json_string_value (json_array_get (env, 1)), "A=new");
  assert_string_equal (json_string_value (json_array_get (env, 2)), "SPEC=1");
  assert_string_equal (json_string_value (json_array_get (env, 3)), "B=1");
  json_t *devices = json_object_get (json_object_get (c, "linux"), "devices");
  assert_int_equal (json_array_size (devices), 2);
  json_t *d0 = json_array_get (devices, 0);
  assert_string_equal (json_string_value (json_object_get (d0, "path")), "/dev/mynull");
  assert_string_equal (json_string_value (json_object_get (d0, "type")), "c");
  assert_int_equal (json_integer_value (json_object_get (d0, "major")), 1);
  assert_int_equal (json_integer_value (json_object_get (d0, "minor")), 3);
  assert_int_equal (json_integer_value (json_object_get (d0, "uid")), 1000);
  assert_int_equal (json_integer_value (json_object_get (d0, "fileMode")), 432);
  json_t *d1 = json_array_get (devices, 1);
  assert_int_equal (json_integer_value (json_object_get (d1, "major")), 195);
  assert_int_equal (json_integer_value (json_object_get (d1, "minor")), 7);
  json_t *rules = json_object_get (json_object_get (json_object_get (c, "linux"), "resources"), "devices");
  assert_int_equal (json_array_size (rules), 3);
  assert_string_equal (json_string_value (json_object_get (json_array_get (rules, 1), "access")), "rw");
  assert_int_equal (json_integer_value (json_object_get (json_array_get (rules, 1), "major")), 1);
  assert_true (json_is_true (json_object_get (json_array_get (rules, 1), "allow")));
  assert_string_equal (json_string_value (json_object_get (json_array_get (rules, 2), "access")), "rwm");
  assert_int_equal (json_integer_value (json_object_get (json_array_get (rules, 2), "minor")), 7);
  /* mounts: /usr/lib/x replaced, then sorted by depth (stable) */
  json_t *mounts = json_object_get (c, "mounts");
  assert_int_equal (json_array_size (mounts), 4);
  size_t i_proc, i_dev, i_a, i_x;
  assert_non_null (find_dest (c, "/proc", &i_proc));
  assert_non_null (find_dest (c, "/dev", &i_dev));
  assert_non_null (find_dest (c, "/a", &i_a));
  json_t *x = find_dest (c, "/usr/lib/x", &i_x);
  assert_string_equal (json_string_value (json_object_get (x, "source")), "/host/lib");
  assert_string_equal (json_string_value (json_array_get (json_object_get (x, "options"), 1)), "bind");
  assert_true (i_proc == 0 && i_dev == 1 && i_a == 2 && i_x == 3);
  /* hooks: spec-level once although two devices of the spec are named */
  json_t *hooks = json_object_get (c, "hooks");
  json_t *cc = json_object_get (hooks, "createContainer");
  assert_int_equal (json_array_size (cc), 1);
  assert_string_equal (json_string_value (json_object_get (json_array_get (cc, 0), "path")), "/bin/hook");
  assert_int_equal (json_integer_value (json_object_get (json_array_get (cc, 0), "timeout")), 5);
  assert_int_equal (json_array_size (json_object_get (hooks, "poststop")), 1);
  json_t *gids = json_object_get (json_object_get (json_object_get (c, "process"), "user"), "additionalGids");
  assert_int_equal (json_array_size (gids), 2);
  assert_int_equal (json_integer_value (json_array_get (gids, 0)), 44);
  assert_int_equal (json_integer_value (json_array_get (gids, 1)), 45);
  assert_string_equal (json_string_value (json_object_get (
                           json_object_get (json_object_get (c, "linux"), "intelRdt"), "closID")),
                       "gpu");
  json_decref (c);
  cdi_registry_free (reg);
}

/* A node without fileMode, uid or gid takes them from its host node, never
 * the runtime's default 0666 nor the container user as owner: a host node
 * 0640 root:5 stays 0640 root:5 for a container running as 1000. */
static void
test_apply_mode_owner_from_host (void **state)
{
  struct fixture *f = *state;
  char node[160], spec[1024];
  struct husk_error *err = NULL;

  snprintf (node, sizeof node, "%s/hostnode", f->root);
  assert_int_equal (mknod (node, S_IFCHR | 0640, makedev (1, 11)), 0);
  assert_int_equal (chmod (node, 0640), 0);
  assert_int_equal (chown (node, 0, 5), 0);
  snprintf (
      spec, sizeof spec,
      "{\"cdiVersion\":\"0.6.0\",\"kind\":\"a.com/k\",\"devices\":["
      "{\"name\":\"bare\",\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/"
      "kmsg\",\"hostPath\":\"%s\"}]}},"
      "{\"name\":\"typed\",\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/t\",\"hostPath\":\"%s\","
      "\"type\":\"c\",\"major\":1,\"minor\":11,\"gid\":7}]}},"
      "{\"name\":\"given\",\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/g\",\"hostPath\":\"%s\","
      "\"fileMode\":384,\"uid\":3}]}}]}",
      node, node, node);
  write_file (f->dir1, "k.json", spec);
  struct cdi_registry *reg = registry (f);
  json_t *c = base_config ();
  json_t *user = json_object_get (json_object_get (c, "process"), "user");
  json_object_set_new (user, "uid", json_integer (1000));
  json_object_set_new (user, "gid", json_integer (1000));
  const char *names[] = { "a.com/k=bare", "a.com/k=typed", "a.com/k=given", NULL };
  assert_int_equal (cdi_apply (reg, c, names, &err), 0);
  json_t *devices = json_object_get (json_object_get (c, "linux"), "devices");
  assert_int_equal (json_array_size (devices), 3);
  /* { fileMode, uid, gid } expected for each node. */
  const json_int_t want[3][3] = { { 0640, 0, 5 }, { 0640, 0, 7 }, { 0600, 3, 5 } };
  for (size_t i = 0; i < 3; i++)
    {
      json_t *d = json_array_get (devices, i);
      assert_int_equal (json_integer_value (json_object_get (d, "fileMode")), want[i][0]);
      assert_int_equal (json_integer_value (json_object_get (d, "uid")), want[i][1]);
      assert_int_equal (json_integer_value (json_object_get (d, "gid")), want[i][2]);
    }
  assert_int_equal (json_integer_value (json_object_get (json_array_get (devices, 0), "major")), 1);
  assert_int_equal (json_integer_value (json_object_get (json_array_get (devices, 0), "minor")), 11);
  json_decref (c);
  cdi_registry_free (reg);
}

static void
test_apply_failure_leaves_config (void **state)
{
  struct fixture *f = *state;
  write_file (f->dir1, "dev.json", apply_spec);
  struct cdi_registry *reg = registry (f);
  json_t *c = base_config ();
  json_t *before = json_deep_copy (c);
  struct husk_error *err = NULL;
  const char *unknown[] = { "example.com/dev=null", "example.com/dev=nope", NULL };
  assert_int_equal (cdi_apply (reg, c, unknown, &err), -1);
  assert_int_equal (err->errnum, ENOENT);
  assert_non_null (strstr (err->msg, "example.com/dev=nope"));
  husk_error_free (&err);
  assert_true (json_equal (c, before));
  const char *malformed[] = { "example.com/dev=null", "no-kind", NULL };
  assert_int_equal (cdi_apply (reg, c, malformed, &err), -1);
  assert_int_equal (err->errnum, EINVAL);
  assert_non_null (strstr (err->msg, "no-kind"));
  husk_error_free (&err);
  assert_true (json_equal (c, before));
  /* a node whose host path does not exist fails after resolution: still untouched */
  const char *missing[] = { "example.com/dev=null", "example.com/dev=missing", NULL };
  assert_int_equal (cdi_apply (reg, c, missing, &err), -1);
  assert_non_null (strstr (err->msg, "/nonexistent/node"));
  assert_non_null (strstr (err->msg, "example.com/dev=missing"));
  husk_error_free (&err);
  assert_true (json_equal (c, before));
  const char *mismatch[] = { "example.com/dev=mismatch", NULL };
  assert_int_equal (cdi_apply (reg, c, mismatch, &err), -1);
  assert_non_null (strstr (err->msg, "type b given, but /dev/null is of type c"));
  husk_error_free (&err);
  assert_true (json_equal (c, before));
  json_decref (before);
  json_decref (c);
  cdi_registry_free (reg);
}

static void
fuzz_one (const char *seed, int yaml, unsigned *rng)
{
  size_t len = strlen (seed);
  char *buf = malloc (len * 2 + 16);
  memcpy (buf, seed, len);
  int edits = 1 + rand_r (rng) % 6;
  for (int e = 0; e < edits; e++)
    {
      int op = rand_r (rng) % 3;
      if (op == 0 && len > 0)
        len = rand_r (rng) % len;
      else if (op == 1 && len > 0)
        buf[rand_r (rng) % len] ^= (char) (1 << (rand_r (rng) % 8));
      else if (len < (size_t) (strlen (seed) * 2))
        {
          static const char chars[] = "{}[]:,\"'-&*!|>#\n \t\\0a9\xff";
          size_t at = len ? rand_r (rng) % len : 0;
          memmove (buf + at + 1, buf + at, len - at);
          buf[at] = chars[rand_r (rng) % (sizeof chars - 1)];
          len++;
        }
    }
  struct husk_error *err = NULL;
  json_t *spec = cdi_spec_parse (buf, len, yaml, "fuzz", &err);
  if (spec == NULL)
    assert_non_null (err);
  json_decref (spec);
  husk_error_free (&err);
  free (buf);
}

static void
test_fuzz_parser (void **state)
{
  unsigned rng = 12345;
  for (int i = 0; i < 1000; i++)
    {
      fuzz_one (apply_spec, 0, &rng);
      fuzz_one (yaml_spec, 1, &rng);
    }
  /* aliases that refer to themselves or blow up are bounded */
  struct husk_error *err = NULL;
  assert_null (parse ("a: &x [*x, *x]\n", 1, &err));
  husk_error_free (&err);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_parse_json_and_yaml),
    cmocka_unit_test (test_versions),
    cmocka_unit_test (test_names),
    cmocka_unit_test (test_unknown_fields),
    cmocka_unit_test_setup_teardown (test_registry_bad_file_and_dups, setup, teardown),
    cmocka_unit_test_setup_teardown (test_registry_later_dir_wins_and_refresh, setup, teardown),
    cmocka_unit_test_setup_teardown (test_registry_refresh_cost, setup, teardown),
    cmocka_unit_test_setup_teardown (test_registry_untrusted_specs, setup, teardown),
    cmocka_unit_test_setup_teardown (test_apply, setup, teardown),
    cmocka_unit_test_setup_teardown (test_apply_failure_leaves_config, setup, teardown),
    cmocka_unit_test_setup_teardown (test_apply_mode_owner_from_host, setup, teardown),
    cmocka_unit_test (test_fuzz_parser),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
