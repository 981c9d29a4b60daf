/* The container store's answers to damage: a cri.json emptied, garbled or
 * holding another document is rebuilt from config.pb, the bundle's
 * annotations and the rebuild hook, saved in place (the damaged file kept
 * beside it) and warned about once; an exit file written for a lost
 * monitor carries its reason and message into the record. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cri/container/container_store.h"
#include "cri/proto/api.pb-c.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define ID_A "aaaa000000000000000000000000000000000000000000000000000000000001"
#define ID_B "bbbb000000000000000000000000000000000000000000000000000000000002"
#define POD "5555000000000000000000000000000000000000000000000000000000000005"

struct fixture
{
  char dir[64];
  char *root, *state;
  struct container_store *store;
  int hook_calls;
};

static int
setup (void **state)
{
  struct fixture *f = xcalloc (1, sizeof *f);
  struct husk_error *err = NULL;

  strcpy (f->dir, "/tmp/test_cri_store.XXXXXX");
  assert_non_null (mkdtemp (f->dir));
  f->root = xasprintf ("%s/root", f->dir);
  f->state = xasprintf ("%s/state", f->dir);
  assert_int_equal (container_store_open (f->root, f->state, &f->store, &err), 0);
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *f = *state;
  struct husk_error *err = NULL;

  container_store_free (f->store);
  husk_rm_rf (f->dir, &err);
  husk_error_free (&err);
  free (f->root);
  free (f->state);
  free (f);
  return 0;
}

static char *
file_in (struct fixture *f, const char *id, const char *name)
{
  cleanup_free char *dir = container_store_dir (f->store, id);

  return xasprintf ("%s/%s", dir, name);
}

static void
put (const char *path, const char *text)
{
  struct husk_error *err = NULL;
  cleanup_free char *dir = xstrdup (path);

  *strrchr (dir, '/') = '\0';
  assert_int_equal (husk_mkdir_p (dir, 0700, &err), 0);
  if (husk_write_file_replace (path, text, strlen (text), 0600, &err) < 0)
    fail_msg ("%s", err->msg);
}

/* A running container as CreateContainer and StartContainer leave it, with
 * the bundle config.json whose annotations cri_spec.c writes. */
static void
save_running (struct fixture *f, const char *id, const char *name)
{
  Runtime__V1__ContainerConfig config = RUNTIME__V1__CONTAINER_CONFIG__INIT;
  Runtime__V1__ContainerMetadata meta = RUNTIME__V1__CONTAINER_METADATA__INIT;
  Runtime__V1__ImageSpec image = RUNTIME__V1__IMAGE_SPEC__INIT;
  struct cri_container c = {
    .id = (char *) id,
    .sandbox_id = POD,
    .name = (char *) name,
    .attempt = 3,
    .image = "busybox",
    .image_id = "sha256:1234",
    .image_ref = "busybox@sha256:5678",
    .runtime_handler = "",
    .log_path = "/logs/x.log",
    .state = CRI_CONTAINER_RUNNING,
    .created_at = 11,
    .started_at = 22,
    .pid = 1234,
    .monitor_pid = 1233,
    .pid_start = 987654321,
    .monitor_start = 987654300,
    .config = &config,
  };
  struct husk_error *err = NULL;
  cleanup_free char *bundle = file_in (f, id, "bundle/config.json");
  cleanup_free char *annotations = xasprintf (
      "{\"ociVersion\": \"1.2.0\", \"annotations\": {\"io.kubernetes.cri.sandbox-id\": \"%s\", "
      "\"io.kubernetes.cri.container-name\": \"%s\", \"io.kubernetes.cri.image-name\": \"busybox\", "
      "\"io.kubernetes.container.hash\": \"abc\"}}",
      POD, name);

  meta.name = (char *) name;
  meta.attempt = 3;
  image.image = "busybox";
  config.metadata = &meta;
  config.image = &image;
  if (container_save (f->store, &c, true, &err) < 0)
    fail_msg ("container_save: %s", err->msg);
  put (bundle, annotations);
}

static struct cri_container *
listed (struct fixture *f, const char *id, size_t *n_out)
{
  struct cri_container **list = NULL, *found = NULL;
  struct husk_error *err = NULL;
  size_t n = 0;

  assert_int_equal (container_list (f->store, &list, &n, &err), 0);
  for (size_t i = 0; i < n; i++)
    if (strcmp (list[i]->id, id) == 0)
      {
        found = list[i];
        list[i] = NULL;
      }
  cri_containers_free (list, n);
  if (n_out)
    *n_out = n;
  return found;
}

static void
test_start_times_kept (void **state)
{
  struct fixture *f = *state;
  struct cri_container *c = NULL;
  struct husk_error *err = NULL;

  save_running (f, ID_A, "web");
  assert_int_equal (container_lookup (f->store, ID_A, &c, &err), 0);
  assert_int_equal (c->pid_start, 987654321);
  assert_int_equal (c->monitor_start, 987654300);
  cri_container_free (c);
}

static void
test_damaged_record_rebuilt (void **state)
{
  struct fixture *f = *state;
  const char *damages[] = { "", "\x9f\x01garbage", "{\"id\": \"aaaa0", "{\"hello\": \"world\"}" };
  cleanup_free char *record = file_in (f, ID_A, "cri.json");
  cleanup_free char *kept = file_in (f, ID_A, "cri.json.damaged");

  for (size_t i = 0; i < sizeof damages / sizeof damages[0]; i++)
    {
      struct cri_container *c;
      cleanup_free char *text = NULL;
      struct husk_error *err = NULL;
      size_t n = 0;

      save_running (f, ID_A, "web");
      save_running (f, ID_B, "db");
      put (record, damages[i]);
      /* Damage is found when the records are read: at huskd's start. */
      container_store_reload (f->store);
      c = listed (f, ID_A, &n);
      assert_int_equal (n, 2);
      assert_non_null (c);
      assert_string_equal (c->sandbox_id, POD);
      assert_string_equal (c->name, "web");
      assert_int_equal (c->attempt, 3);
      assert_string_equal (c->image, "busybox");
      /* No hook: the disk alone cannot say it runs. */
      assert_int_equal (c->state, CRI_CONTAINER_CREATED);
      assert_non_null (strstr (c->message, "cri.json could not be read"));
      assert_string_equal (c->config->metadata->name, "web");
      assert_true (c->created_at > 0);
      cri_container_free (c);
      /* Saved in place, the damaged bytes kept beside it. */
      assert_int_equal (husk_read_file (kept, &text, NULL, &err), 0);
      assert_string_equal (text, damages[i]);
      assert_int_equal (container_lookup (f->store, ID_A, &c, &err), 0);
      assert_string_equal (c->sandbox_id, POD);
      cri_container_free (c);
    }
}

static void
hook (struct container_store *store, struct cri_container *c, void *user)
{
  struct fixture *f = user;

  (void) store;
  f->hook_calls++;
  c->state = CRI_CONTAINER_RUNNING;
  c->pid = 4321;
  free (c->runtime_handler);
  c->runtime_handler = xstrdup ("runc");
}

static void
test_hook_and_stand_in_config (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *record = file_in (f, ID_A, "cri.json");
  cleanup_free char *config = file_in (f, ID_A, "config.pb");
  struct cri_container *c;
  struct husk_error *err = NULL;

  container_store_set_rebuild (f->store, hook, f);
  save_running (f, ID_A, "web");
  put (record, "\x01\x02\x03");
  put (config, "\xff\xff\xff\xff");
  container_store_reload (f->store);
  c = listed (f, ID_A, NULL);
  assert_non_null (c);
  assert_int_equal (f->hook_calls, 1);
  assert_int_equal (c->state, CRI_CONTAINER_RUNNING);
  assert_int_equal (c->pid, 4321);
  assert_string_equal (c->runtime_handler, "runc");
  /* config.pb was garbage too: a stand-in from the bundle's annotations,
   * huskd's own left out. */
  assert_string_equal (c->config->metadata->name, "web");
  assert_string_equal (c->config->image->image, "busybox");
  assert_int_equal (c->config->n_annotations, 1);
  assert_string_equal (c->config->annotations[0]->key, "io.kubernetes.container.hash");
  cri_container_free (c);
  /* Rebuilt once: later reads find the saved record. */
  assert_int_equal (container_lookup (f->store, ID_A, &c, &err), 0);
  assert_int_equal (f->hook_calls, 1);
  assert_int_equal (c->state, CRI_CONTAINER_RUNNING);
  assert_string_equal (c->config->metadata->name, "web");
  cri_container_free (c);
}

static void
test_only_config_damaged (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *config = file_in (f, ID_A, "config.pb");
  struct cri_container *c;

  container_store_set_rebuild (f->store, hook, f);
  save_running (f, ID_A, "web");
  put (config, "");
  container_store_reload (f->store);
  c = listed (f, ID_A, NULL);
  assert_non_null (c);
  /* cri.json was fine: its facts stand, the hook is not asked. */
  assert_int_equal (f->hook_calls, 0);
  assert_int_equal (c->pid, 1234);
  assert_int_equal (c->state, CRI_CONTAINER_RUNNING);
  assert_string_equal (c->image_ref, "busybox@sha256:5678");
  assert_string_equal (c->config->metadata->name, "web");
  assert_int_equal (c->config->metadata->attempt, 3);
  cri_container_free (c);
}

static void
test_nothing_to_rebuild_from (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *record = file_in (f, ID_B, "cri.json");
  struct cri_container *c;

  /* A lone garbled cri.json: still listed, so RemoveContainer can clean up. */
  put (record, "garbage");
  c = listed (f, ID_B, NULL);
  assert_non_null (c);
  assert_string_equal (c->sandbox_id, "");
  assert_string_equal (c->name, "unknown-bbbb00000000");
  assert_non_null (c->config->metadata);
  cri_container_free (c);
}

static void
test_lost_monitor_exit_file (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *exit_path = container_store_exit_path (f->store, ID_A);
  struct cri_container *c = NULL;
  struct husk_error *err = NULL;

  save_running (f, ID_A, "web");
  put (exit_path, "{\"exit_code\": 137, \"signal\": 9, \"oom_killed\": false, \"finished_at\": "
                  "\"2016-10-06T00:17:09.669794202Z\", \"reason\": \"MonitorLost\", \"message\": "
                  "\"husk-monitor (pid 1233) was lost\"}");
  assert_int_equal (container_lookup (f->store, ID_A, &c, &err), 0);
  assert_int_equal (c->state, CRI_CONTAINER_EXITED);
  assert_int_equal (c->exit_code, 137);
  assert_string_equal (c->reason, "MonitorLost");
  assert_string_equal (c->message, "husk-monitor (pid 1233) was lost");
  cri_container_free (c);
}

static void
test_forget_record_first (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *record = file_in (f, ID_A, "cri.json");
  cleanup_free char *config = file_in (f, ID_A, "config.pb");
  struct cri_container *c = NULL;
  struct husk_error *err = NULL;

  save_running (f, ID_A, "web");
  /* What a remove cut short between the two unlinks leaves: no record,
   * so no container (and nothing rebuilt). */
  assert_int_equal (unlink (record), 0);
  container_store_reload (f->store);
  assert_int_equal (container_lookup (f->store, ID_A, &c, &err), -1);
  assert_int_equal (err->errnum, ENOENT);
  husk_error_free (&err);
  assert_int_equal (access (config, F_OK), 0);
  assert_int_equal (container_forget (f->store, ID_A, &err), 0);
  assert_int_equal (access (config, F_OK), -1);
}

/* ------------------------------------------------------------------ */
/* the index                                                            */

#define ID_A2 "aaaa000000000000000000000000000000000000000000000000000000000003"

static void
expect_lookup (struct fixture *f, const char *id, int errnum, const char *want_id)
{
  struct cri_container *c = NULL;
  struct husk_error *err = NULL;

  if (errnum)
    {
      assert_int_equal (container_lookup (f->store, id, &c, &err), -1);
      assert_int_equal (err->errnum, errnum);
      husk_error_free (&err);
      return;
    }
  assert_int_equal (container_lookup (f->store, id, &c, &err), 0);
  assert_string_equal (c->id, want_id);
  cri_container_free (c);
}

static void
test_index_prefix_lookup (void **state)
{
  struct fixture *f = *state;

  save_running (f, ID_A, "web");
  save_running (f, ID_B, "db");
  /* Loaded now; what follows goes through the index. */
  expect_lookup (f, "bb", 0, ID_B);
  expect_lookup (f, "aaaa", 0, ID_A);
  save_running (f, ID_A2, "cache");
  expect_lookup (f, "aaaa", EINVAL, NULL);
  expect_lookup (f, ID_A, 0, ID_A);
  expect_lookup (f, ID_A2, 0, ID_A2);
  expect_lookup (f, "aaaa00000000000000000000000000000000000000000000000000000000000", EINVAL, NULL);
  expect_lookup (f, "c", ENOENT, NULL);
  expect_lookup (f, "", EINVAL, NULL);
  expect_lookup (f, "aaaa0000000000000000000000000000000000000000000000000000000000039", ENOENT, NULL);
}

static void
test_index_name_and_forget (void **state)
{
  struct fixture *f = *state;
  struct husk_error *err = NULL;
  cleanup_free char *dir = container_store_dir (f->store, ID_A);
  cleanup_free char *held = NULL;
  struct cri_container *c = NULL;
  size_t n = 0;

  save_running (f, ID_A, "web");
  held = container_store_find_name (f->store, POD, "web", 3);
  assert_string_equal (held, ID_A);
  assert_null (container_store_find_name (f->store, POD, "web", 4));
  assert_null (container_store_find_name (f->store, "other", "web", 3));
  assert_int_equal (container_lookup (f->store, ID_A, &c, &err), 0);
  assert_int_equal (container_forget (f->store, ID_A, &err), 0);
  assert_null (container_store_find_name (f->store, POD, "web", 3));
  expect_lookup (f, ID_A, ENOENT, NULL);
  /* An update racing the remove brings back neither record nor directory. */
  assert_int_equal (container_save (f->store, c, false, &err), -1);
  assert_int_equal (err->errnum, ENOENT);
  husk_error_free (&err);
  assert_null (listed (f, ID_A, &n));
  assert_int_equal (n, 0);
  cri_container_free (c);
  /* bundle/ is left by save_running: the directory stays, without records. */
  assert_int_equal (access (dir, F_OK), 0);
}

static void
test_index_follows_writes (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *record = file_in (f, ID_A, "cri.json");
  cleanup_free char *exit_path = container_store_exit_path (f->store, ID_A);
  struct cri_container *c = NULL;
  struct husk_error *err = NULL;
  size_t n = 0;

  save_running (f, ID_A, "web");
  assert_int_equal (container_lookup (f->store, ID_A, &c, &err), 0);
  c->exit_code = 7;
  free (c->message);
  c->message = xstrdup ("updated");
  assert_int_equal (container_save (f->store, c, false, &err), 0);
  cri_container_free (c);
  /* The index answers, not the file: a record taken away behind huskd's
   * back is still listed, with what was last written... */
  assert_int_equal (unlink (record), 0);
  c = listed (f, ID_A, &n);
  assert_non_null (c);
  assert_int_equal (n, 1);
  assert_int_equal (c->exit_code, 7);
  assert_string_equal (c->message, "updated");
  assert_string_equal (c->config->metadata->name, "web");
  cri_container_free (c);
  /* ...but an exit file the monitor wrote is folded into the list. */
  put (exit_path, "{\"exit_code\": 3, \"oom_killed\": false, \"finished_at\": "
                  "\"2016-10-06T00:17:09.669794202Z\"}");
  c = listed (f, ID_A, NULL);
  assert_int_equal (c->state, CRI_CONTAINER_EXITED);
  assert_int_equal (c->exit_code, 3);
  assert_string_equal (c->reason, "Error");
  cri_container_free (c);
  /* Folding wrote the record again: the disk holds the exit too. */
  container_store_reload (f->store);
  c = listed (f, ID_A, NULL);
  assert_non_null (c);
  assert_int_equal (c->state, CRI_CONTAINER_EXITED);
  assert_int_equal (c->exit_code, 3);
  cri_container_free (c);
}

static void
test_index_reload_from_disk (void **state)
{
  struct fixture *f = *state;
  struct container_store *other = NULL;
  struct cri_container **list = NULL;
  struct husk_error *err = NULL;
  size_t n = 0;

  save_running (f, ID_B, "db");
  save_running (f, ID_A, "web");
  save_running (f, ID_A2, "cache");
  assert_int_equal (container_forget (f->store, ID_A2, &err), 0);
  /* A second store on the same disk (a restarted huskd) sees the same. */
  assert_int_equal (container_store_open (f->root, f->state, &other, &err), 0);
  assert_int_equal (container_list (other, &list, &n, &err), 0);
  assert_int_equal (n, 2);
  /* Sorted by id. */
  assert_string_equal (list[0]->id, ID_A);
  assert_string_equal (list[1]->id, ID_B);
  assert_string_equal (list[1]->name, "db");
  assert_int_equal (list[1]->state, CRI_CONTAINER_RUNNING);
  assert_int_equal (list[1]->pid_start, 987654321);
  assert_string_equal (list[1]->image_ref, "busybox@sha256:5678");
  cri_containers_free (list, n);
  container_store_free (other);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_start_times_kept, setup, teardown),
    cmocka_unit_test_setup_teardown (test_damaged_record_rebuilt, setup, teardown),
    cmocka_unit_test_setup_teardown (test_hook_and_stand_in_config, setup, teardown),
    cmocka_unit_test_setup_teardown (test_only_config_damaged, setup, teardown),
    cmocka_unit_test_setup_teardown (test_nothing_to_rebuild_from, setup, teardown),
    cmocka_unit_test_setup_teardown (test_lost_monitor_exit_file, setup, teardown),
    cmocka_unit_test_setup_teardown (test_forget_record_first, setup, teardown),
    cmocka_unit_test_setup_teardown (test_index_prefix_lookup, setup, teardown),
    cmocka_unit_test_setup_teardown (test_index_name_and_forget, setup, teardown),
    cmocka_unit_test_setup_teardown (test_index_follows_writes, setup, teardown),
    cmocka_unit_test_setup_teardown (test_index_reload_from_disk, setup, teardown),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
