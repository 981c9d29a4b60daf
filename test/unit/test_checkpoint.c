/* Unit tests for checkpoint/restore's pure parts: the criu command lines
 * (runtime/criu.c), criu's log and descriptors.json, and the checkpoint
 * archive in CRI-O's layout built from a fake checkpoint and upper dir
 * (cri/container/checkpoint_archive.c), read back with libarchive. */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "cri/container/checkpoint_archive.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/criu.h"
#include "runtime/spec/spec.h"

static const char *config_json
    = "{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"/tmp\"},"
      "\"process\":{\"args\":[\"sh\"],\"cwd\":\"/\"},"
      "\"mounts\":[{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\"},"
      "{\"destination\":\"/data\",\"type\":\"bind\",\"source\":\"/host/data\",\"options\":[\"rbind\"]},"
      "{\"destination\":\"/etc/hosts\",\"source\":\"/pod/hosts\",\"options\":[\"bind\",\"ro\"]}],"
      "\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"mount\"},"
      "{\"type\":\"network\",\"path\":\"/run/netns/pod\"}]}}";

static struct spec *
load_spec (void)
{
  struct husk_error *err = NULL;
  struct spec *spec = NULL;

  if (spec_parse (config_json, strlen (config_json), "config.json", "/", &spec, &err) < 0)
    fail_msg ("%s", err->msg);
  return spec;
}

/* Paths built for one test, freed together at its end. */
static char *pool[32];
static size_t n_pool;

static const char *
P (const char *fmt, const char *a, const char *b)
{
  assert_true (n_pool < sizeof pool / sizeof pool[0]);
  pool[n_pool] = xasprintf (fmt, a, b);
  return pool[n_pool++];
}

static void
pool_free (void)
{
  while (n_pool > 0)
    free (pool[--n_pool]);
}

/* ARGV holds A immediately followed by B. */
static bool
has_pair (char **argv, const char *a, const char *b)
{
  for (size_t i = 0; argv[i] && argv[i + 1]; i++)
    if (strcmp (argv[i], a) == 0 && strcmp (argv[i + 1], b) == 0)
      return true;
  return false;
}

static void
test_dump_argv (void **state)
{
  struct criu_options opts = { .image_path = "/img", .leave_running = true, .tcp_established = true };
  struct spec *spec = load_spec ();
  char **argv = criu_dump_argv ("/usr/sbin/criu", spec, 1234, "/r", 4026532000ULL, &opts);

  (void) state;
  assert_string_equal (argv[0], "/usr/sbin/criu");
  assert_string_equal (argv[1], "dump");
  assert_true (has_pair (argv, "--tree", "1234"));
  assert_true (has_pair (argv, "--images-dir", "/img"));
  assert_true (has_pair (argv, "--work-dir", "/img"));
  assert_true (has_pair (argv, "--root", "/r"));
  assert_true (husk_strv_contains (argv, "--leave-running"));
  assert_true (husk_strv_contains (argv, "--tcp-established"));
  assert_false (husk_strv_contains (argv, "--file-locks"));
  assert_true (husk_strv_contains (argv, "--manage-cgroups=ignore"));
  /* Bind mounts are external, keyed by their destination; proc is not. */
  assert_true (has_pair (argv, "--external", "mnt[/data]:/data"));
  assert_true (has_pair (argv, "--external", "mnt[/etc/hosts]:/etc/hosts"));
  assert_false (has_pair (argv, "--external", "mnt[/proc]:/proc"));
  assert_true (has_pair (argv, "--external", "net[4026532000]:" CRIU_NETNS_KEY));
  husk_strvfreep (&argv);
  spec_free (spec);
}

static void
test_restore_argv (void **state)
{
  struct criu_options opts
      = { .image_path = "/img", .work_path = "/work", .file_locks = true, .manage_cgroups_mode = "soft" };
  char *keys[3] = { "pipe:[11]", NULL, "pipe:[13]" };
  struct spec *spec = load_spec ();
  char **argv = criu_restore_argv ("criu", spec, "/state/criu-root", "/state/pid", 7, keys, &opts);

  (void) state;
  assert_string_equal (argv[1], "restore");
  assert_true (has_pair (argv, "--work-dir", "/work"));
  assert_true (has_pair (argv, "--root", "/state/criu-root"));
  assert_true (has_pair (argv, "--pidfile", "/state/pid"));
  assert_true (husk_strv_contains (argv, "--restore-detached"));
  assert_true (husk_strv_contains (argv, "--restore-sibling"));
  assert_true (husk_strv_contains (argv, "--file-locks"));
  assert_true (husk_strv_contains (argv, "--manage-cgroups=soft"));
  /* The external mounts come back from the spec's sources. */
  assert_true (has_pair (argv, "--external", "mnt[/data]:/host/data"));
  assert_true (has_pair (argv, "--external", "mnt[/etc/hosts]:/pod/hosts"));
  assert_true (has_pair (argv, "--inherit-fd", "fd[7]:" CRIU_NETNS_KEY));
  assert_true (has_pair (argv, "--inherit-fd", "fd[0]:pipe:[11]"));
  assert_true (has_pair (argv, "--inherit-fd", "fd[2]:pipe:[13]"));
  assert_false (has_pair (argv, "--inherit-fd", "fd[1]:pipe:[12]"));
  husk_strvfreep (&argv);
  spec_free (spec);
}

static void
test_cgroups_mode (void **state)
{
  (void) state;
  assert_true (criu_valid_cgroups_mode ("soft"));
  assert_true (criu_valid_cgroups_mode ("ignore"));
  assert_false (criu_valid_cgroups_mode ("bogus"));
  assert_false (criu_valid_cgroups_mode (""));
}

static void
test_log_first_error (void **state)
{
  const char *log = "(00.001) Version: 3.17.1\n"
                    "(00.002) Error (criu/vdso.c:381): vdso: Unexpected rt vDSO area bounds\n"
                    "(00.003) Error (criu/crtools.c:260): Could not initialize kernel features detection.\n";
  cleanup_free char *first = criu_log_first_error (log);

  (void) state;
  assert_string_equal (first, "Error (criu/vdso.c:381): vdso: Unexpected rt vDSO area bounds");
  assert_null (criu_log_first_error ("(00.001) all fine\n"));
  assert_null (criu_log_first_error (""));
}

static void
test_descriptors (void **state)
{
  struct husk_error *err = NULL;
  char *keys[3];

  (void) state;
  assert_int_equal (
      criu_parse_descriptors ("[\"pipe:[5]\",\"/dev/null\",\"pipe:[7]\"]", "d.json", keys, &err), 0);
  assert_string_equal (keys[0], "pipe:[5]");
  assert_null (keys[1]);
  assert_string_equal (keys[2], "pipe:[7]");
  free (keys[0]);
  free (keys[2]);
  assert_int_equal (criu_parse_descriptors ("{}", "d.json", keys, &err), -1);
  assert_non_null (strstr (err->msg, "d.json: not a JSON array"));
  husk_error_free (&err);
  assert_int_equal (criu_parse_descriptors ("[1]", "d.json", keys, &err), -1);
  assert_string_equal (err->msg, "d.json: [0]: not a string");
  husk_error_free (&err);
}

static void
test_config_dump (void **state)
{
  struct checkpoint_meta meta = { .id = "abc",
                                  .name = "counter",
                                  .image = "sha256:1",
                                  .image_ref = "r@sha256:2",
                                  .image_name = "r/busybox:latest",
                                  .runtime = "/usr/bin/husk",
                                  .created_ns = 1700000000123456789LL,
                                  .checkpointed_ns = 1700000001000000000LL };
  cleanup_free char *text = checkpoint_config_dump (&meta);
  char *id = NULL, *name = NULL, *image = NULL;
  struct husk_error *err = NULL;

  (void) state;
  assert_non_null (strstr (text, "\"rootfsImageRef\": \"r@sha256:2\""));
  assert_non_null (strstr (text, "\"createdTime\": \"2023-11-14T22:13:20.123456789Z\""));
  assert_non_null (strstr (text, "\"checkpointedTime\": \"2023-11-14T22:13:21.000000000Z\""));
  assert_int_equal (checkpoint_config_parse (text, "config.dump", &id, &name, &image, &err), 0);
  assert_string_equal (id, "abc");
  assert_string_equal (name, "counter");
  assert_string_equal (image, "r/busybox:latest");
  free (id), free (name), free (image);
  assert_int_equal (checkpoint_config_parse ("{\"id\":\"x\"}", "config.dump", &id, &name, &image, &err), -1);
  assert_string_equal (err->msg, "config.dump: `name`: a non-empty string is required");
  assert_null (id);
  husk_error_free (&err);
}

static void
write_file (const char *path, const char *text)
{
  struct husk_error *err = NULL;
  assert_int_equal (husk_write_file_replace (path, text, strlen (text), 0644, &err), 0);
}

/* Every entry name of the tar PATH, newline separated. */
static char *
tar_names (const char *path)
{
  struct archive *a = archive_read_new ();
  struct archive_entry *entry;
  char *names = xstrdup ("");

  archive_read_support_format_tar (a);
  assert_int_equal (archive_read_open_filename (a, path, 10240), ARCHIVE_OK);
  while (archive_read_next_header (a, &entry) == ARCHIVE_OK)
    {
      char *more = xasprintf ("%s%s\n", names, archive_entry_pathname (entry));
      free (names);
      names = more;
    }
  archive_read_free (a);
  return names;
}

static void
test_archive_layout (void **state)
{
  char dir[] = "/tmp/husk-ut-ckpt.XXXXXX";
  cleanup_free char *work = NULL, *upper = NULL, *diff = NULL, *deleted = NULL, *names = NULL;
  cleanup_free char *diff_names = NULL, *out = NULL;
  struct husk_error *err = NULL;

  (void) state;
  assert_non_null (mkdtemp (dir));
  work = xasprintf ("%s/work", dir);
  upper = xasprintf ("%s/upper", dir);
  assert_int_equal (husk_mkdir_p (P ("%s/checkpoint", work, NULL), 0700, &err), 0);
  assert_int_equal (husk_mkdir_p (P ("%s/tmp", upper, NULL), 0755, &err), 0);
  write_file (P ("%s/checkpoint/inventory.img", work, NULL), "fake");
  write_file (P ("%s/config.dump", work, NULL), "{}");
  write_file (P ("%s/spec.dump", work, NULL), "{}");
  write_file (P ("%s/tmp/count", upper, NULL), "42\n");
  /* A whiteout: overlayfs's mark of /etc/gone deleted.  Root only. */
  if (getuid () == 0)
    {
      assert_int_equal (husk_mkdir_p (P ("%s/etc", upper, NULL), 0755, &err), 0);
      assert_int_equal (mknod (P ("%s/etc/gone", upper, NULL), S_IFCHR | 0, makedev (0, 0)), 0);
    }
  diff = xasprintf ("%s/rootfs-diff.tar", work);
  assert_int_equal (checkpoint_rootfs_diff (upper, diff, &deleted, &err), 0);
  assert_string_equal (deleted, getuid () == 0 ? "[\"etc/gone\"]" : "[]");
  diff_names = tar_names (diff);
  assert_non_null (strstr (diff_names, "tmp/count\n"));
  assert_null (strstr (diff_names, "gone"));
  out = xasprintf ("%s/out.tar", dir);
  assert_int_equal (checkpoint_tar_dir (work, out, &err), 0);
  names = tar_names (out);
  assert_non_null (strstr (names, "checkpoint/inventory.img\n"));
  assert_non_null (strstr (names, "config.dump\n"));
  assert_non_null (strstr (names, "spec.dump\n"));
  assert_non_null (strstr (names, "rootfs-diff.tar\n"));
  assert_null (strstr (names, dir)); /* paths are relative */
  /* Read back: config.dump "{}" has no id; a file that is no tar and a
   * tar without config.dump are refused naming what is wrong. */
  {
    struct checkpoint_archive_info info;
    assert_int_equal (checkpoint_archive_read (out, &info, &err), -1);
    assert_non_null (strstr (err->msg, "config.dump: `id`: a non-empty string is required"));
    husk_error_free (&err);
    write_file (P ("%s/config.dump", work, NULL),
                "{\"id\":\"abc\",\"name\":\"counter\",\"rootfsImageName\":\"busybox\"}");
    unlink (out);
    assert_int_equal (checkpoint_tar_dir (work, out, &err), 0);
    assert_int_equal (checkpoint_archive_read (out, &info, &err), 0);
    assert_string_equal (info.name, "counter");
    assert_string_equal (info.image_name, "busybox");
    assert_true (info.has_spec && info.has_images && info.has_rootfs_diff);
    checkpoint_archive_info_clear (&info);
    assert_int_equal (checkpoint_archive_read (P ("%s/spec.dump", work, NULL), &info, &err), -1);
    assert_non_null (strstr (err->msg, "spec.dump`: "));
    husk_error_free (&err);
    assert_int_equal (checkpoint_archive_read (diff, &info, &err), -1);
    assert_non_null (strstr (err->msg, "no config.dump: not a container checkpoint"));
    husk_error_free (&err);
  }
  /* A missing upper dir is an empty diff; an unwritable output an error
   * that leaves nothing. */
  free (deleted);
  assert_int_equal (checkpoint_rootfs_diff (P ("%s/none", dir, NULL), diff, &deleted, &err), 0);
  assert_int_equal (checkpoint_tar_dir (work, "/proc/husk-ut.tar", &err), -1);
  assert_non_null (strstr (err->msg, "create `/proc/husk-ut.tar`"));
  husk_error_free (&err);
  assert_int_equal (access ("/proc/husk-ut.tar", F_OK), -1);
  husk_rm_rf (dir, &err);
  pool_free ();
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_dump_argv),      cmocka_unit_test (test_restore_argv),
    cmocka_unit_test (test_cgroups_mode),   cmocka_unit_test (test_log_first_error),
    cmocka_unit_test (test_descriptors),    cmocka_unit_test (test_config_dump),
    cmocka_unit_test (test_archive_layout),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
