/* Unit tests for image records (config and manifest parsing, add, lookup
 * by name/ID/prefix, tag moves, docker and CRI removal, GC of blobs and
 * snapshots, concurrent writers), user lookup in a synthetic rootfs, and
 * OCI layout import/export round trips. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/images.h"
#include "image/layout.h"
#include "image/passwd.h"
#include "image/snapshot.h"
#include "image/store.h"

#define MEDIA_TAR "application/vnd.oci.image.layer.v1.tar"

struct fixture
{
  char *root;
  struct store *store;
  struct fixture *other; /* a second root for imports, torn down with this one */
};

/* An image built in the test: layers stored, manifest and config in memory. */
struct test_image
{
  char layer_digests[2][DIGEST_STR_SIZE];
  char config_digest[DIGEST_STR_SIZE];
  char manifest_digest[DIGEST_STR_SIZE];
  char *config;
  char *manifest;
};

static int
setup (void **state)
{
  struct fixture *f = calloc (1, sizeof *f);
  char tmpl[] = "/tmp/husk-test-images-XXXXXX";

  if (f == NULL || mkdtemp (tmpl) == NULL)
    return -1;
  f->root = xstrdup (tmpl);
  if (store_open (f->root, &f->store, NULL) < 0)
    return -1;
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *f = *state;

  if (f->other)
    teardown ((void **) &f->other);
  husk_rm_rf (f->root, NULL);
  store_free (f->store);
  free (f->root);
  free (f);
  return 0;
}

static void
test_image_clear (struct test_image *t)
{
  free (t->config);
  free (t->manifest);
}

/* A one-file plain tar layer, stored; its digest is its diffID. */
static void
make_layer (struct fixture *f, const char *file_name, char digest[DIGEST_STR_SIZE])
{
  cleanup_free char *path = xasprintf ("%s/layer.tar", f->root);
  cleanup_close int fd = -1;
  struct archive *a = archive_write_new ();
  struct archive_entry *entry = archive_entry_new ();

  archive_write_set_format_pax_restricted (a);
  assert_int_equal (archive_write_open_filename (a, path), ARCHIVE_OK);
  archive_entry_set_pathname (entry, file_name);
  archive_entry_set_filetype (entry, AE_IFREG);
  archive_entry_set_perm (entry, 0644);
  archive_entry_set_size (entry, 4);
  assert_int_equal (archive_write_header (a, entry), ARCHIVE_OK);
  assert_int_equal (archive_write_data (a, "data", 4), 4);
  archive_entry_free (entry);
  assert_int_equal (archive_write_close (a), ARCHIVE_OK);
  archive_write_free (a);
  assert_int_equal (digest_of_file (path, digest, NULL, NULL), 0);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  assert_int_equal (store_put_file (f->store, digest, -1, fd, NULL), 0);
  unlink (path);
}

static int64_t
blob_size (struct fixture *f, const char *digest)
{
  int64_t size = -1;
  assert_true (store_has_blob (f->store, digest, &size));
  return size;
}

/* Two layers: a shared base ("base") and one of LABEL's own. */
static void
make_image (struct fixture *f, const char *label, struct test_image *t)
{
  cleanup_free char *own = xasprintf ("%s-file", label);

  make_layer (f, "base", t->layer_digests[0]);
  make_layer (f, own, t->layer_digests[1]);
  t->config = xasprintf (
      "{\"architecture\":\"amd64\",\"os\":\"linux\",\"created\":\"2024-01-01T00:00:00Z\","
      "\"config\":{\"User\":\"app\",\"Env\":[\"PATH=/bin\",\"LABEL=%s\"],\"Entrypoint\":[\"/bin/sh\"],"
      "\"Cmd\":[\"-c\",\"echo hi\"],\"WorkingDir\":\"/w\",\"ExposedPorts\":{\"80/tcp\":{},\"53/udp\":{}},"
      "\"Volumes\":{\"/data\":{}},\"Labels\":{\"org.example\":\"%s\"},\"StopSignal\":\"SIGQUIT\"},"
      "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"%s\",\"%s\"]},\"history\":[]}",
      label, label, t->layer_digests[0], t->layer_digests[1]);
  digest_of_buffer (t->config, strlen (t->config), t->config_digest);
  t->manifest
      = xasprintf ("{\"schemaVersion\":2,\"mediaType\":\"%s\","
                   "\"config\":{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":%zu},"
                   "\"layers\":[{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":%lld},"
                   "{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":%lld}]}",
                   IMAGE_MEDIA_OCI_MANIFEST, IMAGE_MEDIA_OCI_CONFIG, t->config_digest, strlen (t->config),
                   MEDIA_TAR, t->layer_digests[0], (long long) blob_size (f, t->layer_digests[0]), MEDIA_TAR,
                   t->layer_digests[1], (long long) blob_size (f, t->layer_digests[1]));
  digest_of_buffer (t->manifest, strlen (t->manifest), t->manifest_digest);
}

static void
add_image (struct fixture *f, const struct test_image *t, const char *name)
{
  struct images_add_request req = {
    .name = name,
    .manifest_digest = t->manifest_digest,
    .manifest = t->manifest,
    .manifest_len = strlen (t->manifest),
    .config = t->config,
    .config_len = strlen (t->config),
  };
  struct husk_error *err = NULL;

  if (images_add (f->store, &req, NULL, &err) < 0)
    fail_msg ("add %s: %s", name ? name : "(untagged)", err->msg);
}

static struct image *
lookup (struct fixture *f, const char *name)
{
  struct image *image = NULL;
  struct husk_error *err = NULL;

  if (images_lookup (f->root, name, &image, &err) < 0)
    fail_msg ("lookup %s: %s", name, err->msg);
  return image;
}

static void
assert_not_found (struct fixture *f, const char *name)
{
  struct image *image = NULL;
  struct husk_error *err = NULL;

  assert_int_equal (images_lookup (f->root, name, &image, &err), -1);
  assert_int_equal (err->errnum, ENOENT);
  husk_error_free (&err);
}

static void
test_config_parse (void **state)
{
  /* Shaped like a real docker-built config (busybox-ish). */
  static const char config[]
      = "{\"architecture\":\"amd64\",\"config\":{\"Hostname\":\"\",\"User\":\"1000:1000\",\"Env\":[\"PATH=/"
        "usr/"
        "local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"],\"Cmd\":[\"sh\"],\"Entrypoint\":null,"
        "\"WorkingDir\":\"\",\"ExposedPorts\":{\"8080/tcp\":{}},\"Volumes\":null,\"Labels\":{\"maintainer\":"
        "\"husk\",\"version\":\"1\"},\"OnBuild\":null,\"StopSignal\":\"SIGRTMIN+3\"},\"created\":\"2023-05-"
        "19T20:"
        "19:21.233276462Z\",\"os\":\"linux\",\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:"
        "3d24ee258efc3bfe4066a1a9fb83febf6dc0b1548dfe896161533668281c9f4f\"]}}";
  struct image_config c;
  char **diff_ids = NULL;
  struct husk_error *err = NULL;

  if (image_config_parse (config, strlen (config), &c, &diff_ids, &err) < 0)
    fail_msg ("parse: %s", err->msg);
  assert_string_equal (c.user, "1000:1000");
  assert_int_equal (husk_strv_len (c.env), 1);
  assert_true (husk_str_has_prefix (c.env[0], "PATH=/usr/local/sbin"));
  assert_null (c.entrypoint);
  assert_int_equal (husk_strv_len (c.cmd), 1);
  assert_string_equal (c.cmd[0], "sh");
  assert_null (c.working_dir); /* "" means unset */
  assert_int_equal (husk_strv_len (c.exposed_ports), 1);
  assert_string_equal (c.exposed_ports[0], "8080/tcp");
  assert_int_equal (husk_strv_len (c.volumes), 0);
  assert_int_equal (c.n_labels, 2);
  assert_string_equal (image_config_label (&c, "maintainer"), "husk");
  assert_null (image_config_label (&c, "nope"));
  assert_string_equal (c.stop_signal, "SIGRTMIN+3");
  assert_string_equal (c.os, "linux");
  assert_string_equal (c.architecture, "amd64");
  assert_int_equal (husk_strv_len (diff_ids), 1);
  image_config_clear (&c);
  husk_strvfreep (&diff_ids);

  static const struct
  {
    const char *json, *message;
  } bad[] = {
    { "{\"config\":{\"Env\":\"PATH=/bin\"},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}",
      "`image config: Env` is not an array of strings" },
    { "{\"config\":{\"Cmd\":[1]},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}",
      "Cmd[0]` is not a string" },
    { "{\"config\":{}}", "`rootfs` must be" },
    { "{\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:abc\"]}}", "not a valid sha256 digest" },
    { "{\"config\":{\"Labels\":{\"a\":1}},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}",
      "label `a` is not a string" },
    { "[1,2]", "not a JSON object" },
    { "{\"config\":", "invalid JSON at line 1" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      assert_int_equal (image_config_parse (bad[i].json, strlen (bad[i].json), &c, NULL, &err), -1);
      if (strstr (err->msg, bad[i].message) == NULL)
        fail_msg ("`%s`: error `%s` lacks `%s`", bad[i].json, err->msg, bad[i].message);
      husk_error_free (&err);
    }
}

static void
test_manifest_parse (void **state)
{
  static const char docker[]
      = "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution.manifest.v2+json\","
        "\"config\":{\"mediaType\":\"application/"
        "vnd.docker.container.image.v1+json\",\"size\":1469,\"digest\":"
        "\"sha256:bf9bd5b4bc2a1fd5b3f1bd5e0a8a2d3f0c8fd8a7f5d8a0b1c3e4f5a6b7c8d9e0\"},\"layers\":[{"
        "\"mediaType\":"
        "\"application/vnd.docker.image.rootfs.diff.tar.gzip\",\"size\":772788,\"digest\":\"sha256:"
        "4b35f584bb4f5c9b3d8a1f0e2c6d7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f\"}]}";
  static const char index[]
      = "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
        "\"manifests\":[]}";
  static const char no_size[]
      = "{\"schemaVersion\":2,\"config\":{\"digest\":\"sha256:"
        "bf9bd5b4bc2a1fd5b3f1bd5e0a8a2d3f0c8fd8a7f5d8a0b1c3e4f5a6b7c8d9e0\"},\"layers\":[]}";
  struct image_manifest m;
  struct husk_error *err = NULL;

  if (image_manifest_parse (docker, strlen (docker), &m, &err) < 0)
    fail_msg ("parse: %s", err->msg);
  assert_string_equal (m.media_type, IMAGE_MEDIA_DOCKER_MANIFEST);
  assert_int_equal (m.config.size, 1469);
  assert_int_equal (m.n_layers, 1);
  assert_string_equal (m.layers[0].media_type, "application/vnd.docker.image.rootfs.diff.tar.gzip");
  assert_int_equal (m.layers[0].size, 772788);
  image_manifest_clear (&m);
  assert_int_equal (image_manifest_parse (index, strlen (index), &m, &err), -1);
  assert_non_null (strstr (err->msg, "is an index"));
  husk_error_free (&err);
  assert_int_equal (image_manifest_parse (no_size, strlen (no_size), &m, &err), -1);
  assert_non_null (strstr (err->msg, "`size` is missing"));
  husk_error_free (&err);
}

static void
test_add_and_lookup (void **state)
{
  struct fixture *f = *state;
  struct test_image t;
  struct image *image;
  cleanup_free char *repo_digest = NULL, *prefix = NULL;
  char chain[2][DIGEST_STR_SIZE];
  char *diff_ids[2];

  make_image (f, "one", &t);
  add_image (f, &t, "busybox");
  image = lookup (f, "busybox");
  assert_string_equal (image->id, t.config_digest);
  assert_string_equal (image->manifest_digest, t.manifest_digest);
  assert_string_equal (image->media_type, IMAGE_MEDIA_OCI_MANIFEST);
  assert_int_equal (husk_strv_len (image->repo_tags), 1);
  assert_string_equal (image->repo_tags[0], "docker.io/library/busybox:latest");
  repo_digest = xasprintf ("docker.io/library/busybox@%s", t.manifest_digest);
  assert_string_equal (image->repo_digests[0], repo_digest);
  assert_int_equal (image->size, (int64_t) strlen (t.config) + blob_size (f, t.layer_digests[0])
                                     + blob_size (f, t.layer_digests[1]));
  assert_int_equal (image->n_layers, 2);
  diff_ids[0] = t.layer_digests[0];
  diff_ids[1] = t.layer_digests[1];
  snapshot_chain_ids (diff_ids, 2, chain);
  assert_string_equal (image->layers[1].chain_id, chain[1]);
  assert_string_equal (image->layers[1].diff_id, t.layer_digests[1]);
  assert_string_equal (image->config.user, "app");
  assert_string_equal (image->config.working_dir, "/w");
  assert_string_equal (image->config.env[1], "LABEL=one");
  assert_string_equal (image->config.entrypoint[0], "/bin/sh");
  assert_string_equal (image->config.cmd[1], "echo hi");
  assert_int_equal (husk_strv_len (image->config.exposed_ports), 2);
  assert_string_equal (image->config.volumes[0], "/data");
  assert_string_equal (image_config_label (&image->config, "org.example"), "one");
  assert_string_equal (image->config.stop_signal, "SIGQUIT");
  image_free (image);

  /* The same image by every name it has. */
  prefix = xasprintf ("%.12s", digest_hex (t.config_digest));
  const char *names[] = { "busybox:latest", "docker.io/library/busybox:latest", "docker.io/library/busybox",
                          t.config_digest,  digest_hex (t.config_digest),       prefix,
                          repo_digest };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    {
      image = lookup (f, names[i]);
      assert_string_equal (image->id, t.config_digest);
      image_free (image);
    }
  assert_true (store_has_blob (f->store, t.manifest_digest, NULL)); /* added by images_add */
  assert_true (store_has_blob (f->store, t.config_digest, NULL));
  assert_not_found (f, "busybox:other");
  assert_not_found (f, "alpine");
  assert_not_found (f, "ffffffffffff");
  test_image_clear (&t);
}

static void
test_add_rejects (void **state)
{
  struct fixture *f = *state;
  struct test_image t;
  struct husk_error *err = NULL;
  char other[DIGEST_STR_SIZE];
  cleanup_free char *wrong_digest_name = NULL;
  cleanup_free char *short_config = NULL;

  make_image (f, "rej", &t);
  digest_of_buffer ("other", 5, other);
  wrong_digest_name = xasprintf ("x@%s", other);
  short_config = xstrdup (t.config);
  short_config[strlen (short_config) - 1] = ' ';
  struct
  {
    struct images_add_request req;
    const char *message;
  } cases[] = {
    { { "x", other, t.manifest, strlen (t.manifest), t.config, strlen (t.config), NULL },
      "manifest has digest" },
    { { "x", t.manifest_digest, t.manifest, strlen (t.manifest), short_config, strlen (short_config), NULL },
      "image config has digest" },
    { { wrong_digest_name, t.manifest_digest, t.manifest, strlen (t.manifest), t.config, strlen (t.config),
        NULL },
      "but the manifest is" },
    { { "Not A Name", t.manifest_digest, t.manifest, strlen (t.manifest), t.config, strlen (t.config), NULL },
      "invalid reference" },
    { { "x", t.manifest_digest, t.manifest, strlen (t.manifest), NULL, 0, NULL }, "read blob" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      assert_int_equal (images_add (f->store, &cases[i].req, NULL, &err), -1);
      if (strstr (err->msg, cases[i].message) == NULL)
        fail_msg ("case %zu: `%s` lacks `%s`", i, err->msg, cases[i].message);
      husk_error_free (&err);
    }
  /* A layer that is not in the store. */
  cleanup_free char *layer_path = store_blob_path (f->store, t.layer_digests[1]);
  assert_int_equal (unlink (layer_path), 0);
  assert_int_equal (
      images_add (f->store,
                  &(struct images_add_request){ "x", t.manifest_digest, t.manifest, strlen (t.manifest),
                                                t.config, strlen (t.config), NULL },
                  NULL, &err),
      -1);
  assert_non_null (strstr (err->msg, "is not in the content store"));
  husk_error_free (&err);
  assert_not_found (f, "x");
  test_image_clear (&t);
}

static void
test_tags_and_remove (void **state)
{
  struct fixture *f = *state;
  struct test_image a, b, c;
  struct image *image;
  struct husk_error *err = NULL;
  char *deleted = NULL;

  make_image (f, "a", &a);
  make_image (f, "b", &b);
  add_image (f, &a, "app:1");
  add_image (f, &a, "app:2");
  add_image (f, &a, "app:latest");
  add_image (f, &b, "app:latest"); /* the tag moves to b */
  image = lookup (f, "app");
  assert_string_equal (image->id, b.config_digest);
  image_free (image);
  image = lookup (f, "app:1");
  assert_int_equal (husk_strv_len (image->repo_tags), 2);
  image_free (image);

  /* docker: a tag that is not the last one only untags... */
  assert_int_equal (images_remove (f->store, "app:1", 0, &deleted, &err), 0);
  assert_null (deleted);
  assert_not_found (f, "app:1");
  image = lookup (f, "app:2");
  assert_string_equal (image->id, a.config_digest);
  image_free (image);
  /* ...the last one removes the image. */
  assert_int_equal (images_remove (f->store, "app:2", 0, &deleted, &err), 0);
  assert_string_equal (deleted, a.config_digest);
  free (deleted);
  assert_not_found (f, a.config_digest);

  /* CRI: every tag goes. */
  add_image (f, &b, "other:1");
  assert_int_equal (images_remove (f->store, "other:1", IMAGES_REMOVE_ALL_TAGS, &deleted, &err), 0);
  assert_string_equal (deleted, b.config_digest);
  free (deleted);
  assert_not_found (f, "app:latest");

  /* By ID, untagged (a's layer went with it: a new image). */
  make_image (f, "c", &c);
  add_image (f, &c, NULL);
  image = lookup (f, c.config_digest);
  assert_int_equal (husk_strv_len (image->repo_tags), 0);
  image_free (image);
  assert_int_equal (images_remove (f->store, digest_hex (c.config_digest), 0, &deleted, &err), 0);
  assert_string_equal (deleted, c.config_digest);
  free (deleted);
  assert_int_equal (images_remove (f->store, "app:2", 0, NULL, &err), -1);
  assert_int_equal (err->errnum, ENOENT);
  husk_error_free (&err);
  test_image_clear (&a);
  test_image_clear (&b);
  test_image_clear (&c);
}

/* 17 images: two IDs must share a first hex digit. */
static void
test_ambiguous_prefix (void **state)
{
  struct fixture *f = *state;
  struct test_image t[17];
  int first_seen[16];
  struct image *image = NULL;
  struct husk_error *err = NULL;

  memset (first_seen, -1, sizeof first_seen);
  for (int i = 0; i < 17; i++)
    {
      char label[16];
      snprintf (label, sizeof label, "p%d", i);
      make_image (f, label, &t[i]);
      add_image (f, &t[i], NULL);
    }
  for (int i = 0; i < 17; i++)
    {
      char c = digest_hex (t[i].config_digest)[0];
      int slot = c <= '9' ? c - '0' : c - 'a' + 10;
      if (first_seen[slot] >= 0)
        {
          char prefix[2] = { c, '\0' };
          assert_int_equal (images_lookup (f->root, prefix, &image, &err), -1);
          assert_non_null (strstr (err->msg, "matches"));
          husk_error_free (&err);
          break;
        }
      first_seen[slot] = i;
    }
  for (int i = 0; i < 17; i++)
    test_image_clear (&t[i]);
}

static void
prepare_snapshots (struct fixture *f, const char *name)
{
  struct image *image = lookup (f, name);
  struct snapshot_layer layers[2];
  struct husk_error *err = NULL;

  for (size_t i = 0; i < image->n_layers; i++)
    layers[i] = (struct snapshot_layer){ image->layers[i].digest, image->layers[i].media_type,
                                         image->layers[i].diff_id };
  if (snapshot_prepare_layers (f->store, layers, image->n_layers, NULL, &err) < 0)
    fail_msg ("prepare %s: %s", name, err->msg);
  image_free (image);
}

static void
test_remove_collects_garbage (void **state)
{
  struct fixture *f = *state;
  struct test_image a, b;
  struct image *image_a;
  struct images_gc_stats stats;
  struct husk_error *err = NULL;
  int pull_lock;

  make_image (f, "gc-a", &a);
  make_image (f, "gc-b", &b);
  add_image (f, &a, "a");
  add_image (f, &b, "b");
  prepare_snapshots (f, "a");
  prepare_snapshots (f, "b");
  image_a = lookup (f, "a");
  assert_int_equal (images_remove (f->store, "a", 0, NULL, &err), 0);
  /* a's own layer, config and manifest are gone; the shared base stays. */
  assert_false (store_has_blob (f->store, a.layer_digests[1], NULL));
  assert_false (store_has_blob (f->store, a.config_digest, NULL));
  assert_false (store_has_blob (f->store, a.manifest_digest, NULL));
  assert_true (store_has_blob (f->store, a.layer_digests[0], NULL));
  assert_false (snapshot_exists (f->root, image_a->layers[1].chain_id));
  assert_true (snapshot_exists (f->root, image_a->layers[0].chain_id));
  assert_true (store_has_blob (f->store, b.layer_digests[1], NULL));
  assert_true (store_has_blob (f->store, b.manifest_digest, NULL));
  image_free (image_a);

  /* While a pull holds the GC lock, GC defers instead of waiting. */
  pull_lock = store_gc_lock (f->root, false, true, &err);
  assert_true (pull_lock >= 0);
  assert_int_equal (images_remove (f->store, "b", 0, NULL, &err), 0);
  assert_true (store_has_blob (f->store, b.layer_digests[1], NULL));
  assert_int_equal (images_gc (f->store, &stats, &err), 0);
  assert_true (stats.deferred);
  close (pull_lock);
  assert_int_equal (images_gc (f->store, &stats, &err), 0);
  assert_false (stats.deferred);
  assert_int_equal (stats.blobs_removed, 4); /* both layers, config, manifest */
  assert_int_equal (stats.snapshots_removed, 2);
  test_image_clear (&a);
  test_image_clear (&b);
}

/* A GC that had to defer (images_gc_soon: a failed pull) is wanted
 * (ROOT/gc.wanted) until images_gc_if_wanted - the pull that held the
 * lock, when it ends - runs it; without one wanted, that is a no-op. */
static void
test_gc_wanted_after_deferral (void **state)
{
  struct fixture *f = *state;
  struct images_gc_stats stats;
  struct husk_error *err = NULL;
  cleanup_free char *wanted = xasprintf ("%s/gc.wanted", f->root);
  char digest[DIGEST_STR_SIZE];
  const char *junk = "a blob a failed pull left\n";
  int pull_lock;

  digest_of_buffer (junk, strlen (junk), digest);
  assert_int_equal (store_put_blob (f->store, digest, junk, strlen (junk), &err), 0);
  assert_int_equal (images_gc_if_wanted (f->store, &stats, &err), 0);
  assert_true (store_has_blob (f->store, digest, NULL));

  pull_lock = store_gc_lock (f->root, false, true, &err);
  assert_true (pull_lock >= 0);
  assert_int_equal (images_gc_soon (f->store, &stats, &err), 0);
  assert_true (stats.deferred);
  assert_int_equal (access (wanted, F_OK), 0);
  assert_true (store_has_blob (f->store, digest, NULL));
  close (pull_lock);

  assert_int_equal (images_gc_if_wanted (f->store, &stats, &err), 0);
  assert_false (stats.deferred);
  assert_int_equal (stats.blobs_removed, 1);
  assert_false (store_has_blob (f->store, digest, NULL));
  assert_int_equal (access (wanted, F_OK), -1);

  /* Not deferred: it runs at once and leaves nothing wanted. */
  assert_int_equal (store_put_blob (f->store, digest, junk, strlen (junk), &err), 0);
  assert_int_equal (images_gc_soon (f->store, &stats, &err), 0);
  assert_int_equal (stats.blobs_removed, 1);
  assert_int_equal (access (wanted, F_OK), -1);
}

/* Two processes add images at once; neither record may be lost. */
static void
test_concurrent_add (void **state)
{
  struct fixture *f = *state;
  struct test_image t[2];
  struct image **list = NULL;
  size_t n = 0;
  pid_t pids[2];

  make_image (f, "c0", &t[0]);
  make_image (f, "c1", &t[1]);
  for (int p = 0; p < 2; p++)
    {
      pids[p] = fork ();
      assert_true (pids[p] >= 0);
      if (pids[p] == 0)
        {
          for (int i = 0; i < 20; i++)
            {
              char name[32];
              snprintf (name, sizeof name, "c%d:%d", p, i);
              struct images_add_request req
                  = { name,        t[p].manifest_digest, t[p].manifest, strlen (t[p].manifest),
                      t[p].config, strlen (t[p].config), NULL };
              if (images_add (f->store, &req, NULL, NULL) < 0)
                _exit (1);
            }
          _exit (0);
        }
    }
  for (int p = 0; p < 2; p++)
    {
      int status = 0;
      assert_int_equal (waitpid (pids[p], &status, 0), pids[p]);
      assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    }
  assert_int_equal (images_list (f->root, &list, &n, NULL), 0);
  assert_int_equal (n, 2);
  assert_int_equal (husk_strv_len (list[0]->repo_tags), 20);
  assert_int_equal (husk_strv_len (list[1]->repo_tags), 20);
  images_free (list, n);
  test_image_clear (&t[0]);
  test_image_clear (&t[1]);
}

/* passwd */

static void
write_file_len (const char *base, const char *name, const char *content, size_t len)
{
  cleanup_free char *path = xasprintf ("%s/%s", base, name);
  cleanup_free char *dir = xstrdup (path);

  *strrchr (dir, '/') = '\0';
  assert_int_equal (husk_mkdir_p (dir, 0755, NULL), 0);
  assert_int_equal (husk_write_file_atomic (path, content, len, 0644, NULL), 0);
}

static void
write_rootfs_file (const char *rootfs, const char *name, const char *content)
{
  write_file_len (rootfs, name, content, strlen (content));
}

static void
test_passwd (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *rootfs = xasprintf ("%s/rootfs", f->root);
  struct
  {
    const char *spec;
    unsigned uid, gid;
    const char *name, *home;
    size_t n_groups;
    unsigned groups[2];
  } cases[] = {
    { "", 0, 0, "root", "/root", 0, { 0 } },
    { "app", 1000, 1000, "app", "/home/app", 2, { 10, 50 } },
    { "1000", 1000, 1000, "app", "/home/app", 2, { 10, 50 } },
    { "app:staff", 1000, 50, "app", "/home/app", 1, { 10 } },
    { "1000:10", 1000, 10, "app", "/home/app", 1, { 50 } },
    { "4242", 4242, 0, NULL, "/", 0, { 0 } },
    { "4242:4343", 4242, 4343, NULL, "/", 0, { 0 } },
    { ":audio", 0, 29, "root", "/root", 0, { 0 } },
    { "daemon", 1, 1, "daemon", "/usr/sbin", 0, { 0 } },
  };
  static const char *const bad[][2] = {
    { "nobody", "user `nobody` not found in the image's /etc/passwd" },
    { "app:nogroup", "group `nogroup` not found in the image's /etc/group" },
    { "99999999999", "uid out of range" },
    { "1:4294967295", "gid out of range" },
  };
  struct passwd_user user;
  struct husk_error *err = NULL;

  write_rootfs_file (rootfs, "etc/passwd",
                     "root:x:0:0:root:/root:/bin/sh\n"
                     "daemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n"
                     "# a comment\n"
                     "broken line\n"
                     "+nis::::::\n"
                     "app:x:1000:1000:App User:/home/app:/bin/sh\n"
                     "bad:x:notanumber:1::/:/bin/sh\n");
  write_rootfs_file (
      rootfs, "etc/group",
      "root:x:0:\nwheel:x:10:app,other\nstaff:x:50:other,app\napp:x:1000:\naudio:x:29:other\n");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      if (passwd_resolve (rootfs, cases[i].spec, &user, &err) < 0)
        fail_msg ("`%s`: %s", cases[i].spec, err->msg);
      assert_int_equal (user.uid, cases[i].uid);
      assert_int_equal (user.gid, cases[i].gid);
      if (cases[i].name)
        assert_string_equal (user.name, cases[i].name);
      else
        assert_null (user.name);
      assert_string_equal (user.home, cases[i].home);
      assert_int_equal (user.n_additional_gids, cases[i].n_groups);
      for (size_t g = 0; g < cases[i].n_groups; g++)
        assert_int_equal (user.additional_gids[g], cases[i].groups[g]);
      passwd_user_clear (&user);
    }
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    {
      assert_int_equal (passwd_resolve (rootfs, bad[i][0], &user, &err), -1);
      if (strstr (err->msg, bad[i][1]) == NULL)
        fail_msg ("`%s`: `%s` lacks `%s`", bad[i][0], err->msg, bad[i][1]);
      husk_error_free (&err);
    }
}

/* /etc pointing at the host's files must not read them; a FIFO must not hang. */
static void
test_passwd_stays_in_rootfs (void **state)
{
  struct fixture *f = *state;
  cleanup_free char *host = xasprintf ("%s/host-etc", f->root);
  cleanup_free char *rootfs = xasprintf ("%s/evil", f->root);
  cleanup_free char *etc = xasprintf ("%s/etc", rootfs);
  cleanup_free char *fifo_rootfs = xasprintf ("%s/fifo", f->root);
  cleanup_free char *fifo = xasprintf ("%s/etc/group", fifo_rootfs);
  struct passwd_user user;
  struct husk_error *err = NULL;

  write_rootfs_file (host, "passwd", "hostuser:x:777:777::/:/bin/sh\n");
  assert_int_equal (husk_mkdir_p (rootfs, 0755, NULL), 0);
  assert_int_equal (symlink (host, etc), 0);
  assert_int_equal (passwd_resolve (rootfs, "hostuser", &user, &err), -1);
  assert_non_null (strstr (err->msg, "not found"));
  husk_error_free (&err);

  write_rootfs_file (fifo_rootfs, "etc/passwd", "root:x:0:0::/root:/bin/sh\n");
  assert_int_equal (mkfifo (fifo, 0644), 0);
  assert_int_equal (passwd_resolve (fifo_rootfs, "root", &user, &err), -1);
  assert_non_null (strstr (err->msg, "not a regular file"));
  husk_error_free (&err);
}

/* Layouts */

static struct fixture *
second_root (struct fixture *f)
{
  void *state = NULL;
  assert_int_equal (setup (&state), 0);
  f->other = state;
  return state;
}

static void
check_imported (struct fixture *g, const struct test_image *t, const char *name)
{
  struct image *image = lookup (g, name);

  assert_string_equal (image->id, t->config_digest);
  assert_string_equal (image->manifest_digest, t->manifest_digest);
  assert_int_equal (image->n_layers, 2);
  for (size_t i = 0; i < 2; i++)
    assert_true (store_has_blob (g->store, t->layer_digests[i], NULL));
  image_free (image);
}

static void
test_layout_round_trip (void **state)
{
  struct fixture *f = *state;
  struct fixture *g = second_root (f);
  cleanup_free char *tar = xasprintf ("%s/export.tar", f->root);
  cleanup_free char *dir = xasprintf ("%s/export-dir", f->root);
  cleanup_free char *index = NULL;
  struct test_image t;
  struct image **images = NULL;
  size_t n = 0;
  struct husk_error *err = NULL;
  struct layout_import_options renamed = { .name = "renamed:v1" };

  make_image (f, "rt", &t);
  add_image (f, &t, "127.0.0.1:5000/team/app:1.0");
  if (layout_export (f->store, "127.0.0.1:5000/team/app:1.0", tar, true, &err) < 0)
    fail_msg ("export tar: %s", err->msg);
  if (layout_export (f->store, t.config_digest, dir, false, &err) < 0)
    fail_msg ("export dir: %s", err->msg);
  cleanup_free char *index_path = xasprintf ("%s/index.json", dir);
  assert_int_equal (husk_read_file (index_path, &index, NULL, NULL), 0);
  assert_non_null (strstr (index, "\"org.opencontainers.image.ref.name\":\"1.0\""));
  assert_non_null (strstr (index, "\"io.containerd.image.name\":\"127.0.0.1:5000/team/app:1.0\""));
  assert_int_equal (layout_export (f->store, t.config_digest, dir, false, &err), -1); /* not empty */
  husk_error_free (&err);

  if (layout_import (g->store, tar, NULL, &images, &n, &err) < 0)
    fail_msg ("import tar: %s", err->msg);
  assert_int_equal (n, 1);
  assert_string_equal (images[0]->repo_tags[0], "127.0.0.1:5000/team/app:1.0");
  images_free (images, n);
  check_imported (g, &t, "127.0.0.1:5000/team/app:1.0");
  if (layout_import (g->store, dir, &renamed, NULL, NULL, &err) < 0)
    fail_msg ("import dir: %s", err->msg);
  check_imported (g, &t, "renamed:v1");
  test_image_clear (&t);
}

static void
write_blob (const char *dir, const char *content, size_t len, char digest[DIGEST_STR_SIZE])
{
  cleanup_free char *name = NULL;

  digest_of_buffer (content, len, digest);
  name = xasprintf ("blobs/sha256/%s", digest_hex (digest));
  write_file_len (dir, name, content, len);
}

static void
copy_store_blob (struct fixture *f, const char *dir, const char *digest)
{
  cleanup_free char *content = NULL;
  size_t len = 0;
  char check[DIGEST_STR_SIZE];
  cleanup_free char *src = store_blob_path (f->store, digest);

  assert_int_equal (husk_read_file (src, &content, &len, NULL), 0);
  write_blob (dir, content, len, check);
  assert_string_equal (check, digest);
}

/* A hand-written layout: index.json -> nested index -> amd64 and arm64
 * manifests (the arm64 one's blobs absent), and a bare "latest" ref.name. */
static void
test_layout_platform_index (void **state)
{
  struct fixture *f = *state;
  struct fixture *g = second_root (f);
  cleanup_free char *dir = xasprintf ("%s/layout", f->root);
  cleanup_free char *nested = NULL, *index = NULL, *layout_path = xasprintf ("%s/oci-layout", dir);
  char nested_digest[DIGEST_STR_SIZE], manifest_digest[DIGEST_STR_SIZE];
  const char *arm_digest = "sha256:5555555555555555555555555555555555555555555555555555555555555555";
  struct layout_import_options named = { .name = "multi:latest" };
  struct test_image t;
  struct image **images = NULL;
  size_t n = 0;
  struct husk_error *err = NULL;

  make_image (f, "plat", &t);
  for (int i = 0; i < 2; i++)
    copy_store_blob (f, dir, t.layer_digests[i]);
  write_blob (dir, t.config, strlen (t.config), t.config_digest);
  write_blob (dir, t.manifest, strlen (t.manifest), manifest_digest);
  nested = xasprintf ("{\"schemaVersion\":2,\"mediaType\":\"%s\",\"manifests\":["
                      "{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":10,\"platform\":{\"os\":\"linux\","
                      "\"architecture\":\"arm64\"}},"
                      "{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":%zu,\"platform\":{\"os\":\"linux\","
                      "\"architecture\":\"amd64\"}}]}",
                      IMAGE_MEDIA_OCI_INDEX, IMAGE_MEDIA_OCI_MANIFEST, arm_digest, IMAGE_MEDIA_OCI_MANIFEST,
                      manifest_digest, strlen (t.manifest));
  write_blob (dir, nested, strlen (nested), nested_digest);
  index
      = xasprintf ("{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":%zu,"
                   "\"annotations\":{\"org.opencontainers.image.ref.name\":\"latest\"}}]}",
                   IMAGE_MEDIA_OCI_INDEX, nested_digest, strlen (nested));
  write_rootfs_file (dir, "index.json", index);
  write_rootfs_file (dir, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}");

  /* Without a name the bare tag cannot name it: imported untagged. */
  if (layout_import (g->store, dir, &(struct layout_import_options){ .platform = "linux/amd64" }, &images, &n,
                     &err)
      < 0)
    fail_msg ("import: %s", err->msg);
  assert_int_equal (n, 1);
  assert_int_equal (husk_strv_len (images[0]->repo_tags), 0);
  assert_string_equal (images[0]->index_digest, nested_digest);
  images_free (images, n);
  if (layout_import (g->store, dir, &named, NULL, NULL, &err) < 0)
    fail_msg ("import named: %s", err->msg);
  check_imported (g, &t, "multi");
  /* arm64: its manifest is not in the layout. */
  assert_int_equal (layout_import (g->store, dir,
                                   &(struct layout_import_options){ .platform = "linux/arm64" }, NULL, NULL,
                                   &err),
                    -1);
  assert_non_null (strstr (err->msg, "missing from the layout"));
  husk_error_free (&err);
  /* Not a layout at all. */
  assert_int_equal (unlink (layout_path), 0);
  assert_int_equal (layout_import (g->store, dir, NULL, NULL, NULL, &err), -1);
  assert_non_null (strstr (err->msg, "not an OCI image layout"));
  husk_error_free (&err);
  test_image_clear (&t);
}

static void
tar_add_len (struct archive *a, const char *name, const char *content, size_t len)
{
  struct archive_entry *entry = archive_entry_new ();

  archive_entry_set_pathname (entry, name);
  archive_entry_set_filetype (entry, AE_IFREG);
  archive_entry_set_perm (entry, 0644);
  archive_entry_set_size (entry, (la_int64_t) len);
  assert_int_equal (archive_write_header (a, entry), ARCHIVE_OK);
  assert_int_equal (archive_write_data (a, content, len), (la_ssize_t) len);
  archive_entry_free (entry);
}

static void
tar_add (struct archive *a, const char *name, const char *content)
{
  tar_add_len (a, name, content, strlen (content));
}

/* A layout tar with hostile and stray entries: they are ignored, the blob
 * whose content does not match its name is refused, extras are collected. */
static void
test_layout_tar_hostile (void **state)
{
  struct fixture *f = *state;
  struct fixture *g = second_root (f);
  cleanup_free char *tar = xasprintf ("%s/hostile.tar", f->root);
  cleanup_free char *escaped = xasprintf ("%s/escaped", f->root);
  cleanup_free char *traversal = NULL;
  cleanup_free char *index = NULL;
  cleanup_free char *blobs = xasprintf ("%s/blobs/sha256", g->root);
  char stray[DIGEST_STR_SIZE];
  struct test_image t;
  struct archive *a = archive_write_new ();
  struct husk_error *err = NULL;
  size_t n_blobs = 0;
  struct dirent *de;
  DIR *d;

  make_image (f, "tar", &t);
  index
      = xasprintf ("{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":%zu,"
                   "\"annotations\":{\"io.containerd.image.name\":\"docker.io/library/fromtar:1\"}}]}",
                   IMAGE_MEDIA_OCI_MANIFEST, t.manifest_digest, strlen (t.manifest));
  traversal = xasprintf ("../../../../..%s", escaped);
  digest_of_buffer ("stray", 5, stray);
  archive_write_set_format_pax_restricted (a);
  assert_int_equal (archive_write_open_filename (a, tar), ARCHIVE_OK);
  tar_add (a, traversal, "pwned");
  tar_add (a, escaped, "pwned");
  tar_add (a, "./oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}");
  tar_add (a, "index.json", index);
  cleanup_free char *stray_name = xasprintf ("blobs/sha256/%s", digest_hex (stray));
  tar_add (a, stray_name, "stray");
  for (int i = 0; i < 2; i++)
    {
      cleanup_free char *name = xasprintf ("blobs/sha256/%s", digest_hex (t.layer_digests[i]));
      cleanup_free char *src = store_blob_path (f->store, t.layer_digests[i]);
      cleanup_free char *content = NULL;
      size_t len = 0;
      assert_int_equal (husk_read_file (src, &content, &len, NULL), 0);
      tar_add_len (a, name, content, len);
    }
  cleanup_free char *config_name = xasprintf ("blobs/sha256/%s", digest_hex (t.config_digest));
  cleanup_free char *manifest_name = xasprintf ("blobs/sha256/%s", digest_hex (t.manifest_digest));
  tar_add (a, config_name, t.config);
  tar_add (a, manifest_name, t.manifest);
  assert_int_equal (archive_write_close (a), ARCHIVE_OK);
  archive_write_free (a);

  if (layout_import (g->store, tar, NULL, NULL, NULL, &err) < 0)
    fail_msg ("import: %s", err->msg);
  check_imported (g, &t, "fromtar:1");
  assert_int_equal (access (escaped, F_OK), -1);
  assert_false (store_has_blob (g->store, stray, NULL)); /* collected */
  d = opendir (blobs);
  while ((de = readdir (d)) != NULL)
    n_blobs += de->d_name[0] != '.';
  closedir (d);
  assert_int_equal (n_blobs, 4);
  test_image_clear (&t);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_config_parse),
    cmocka_unit_test (test_manifest_parse),
    cmocka_unit_test_setup_teardown (test_add_and_lookup, setup, teardown),
    cmocka_unit_test_setup_teardown (test_add_rejects, setup, teardown),
    cmocka_unit_test_setup_teardown (test_tags_and_remove, setup, teardown),
    cmocka_unit_test_setup_teardown (test_ambiguous_prefix, setup, teardown),
    cmocka_unit_test_setup_teardown (test_remove_collects_garbage, setup, teardown),
    cmocka_unit_test_setup_teardown (test_gc_wanted_after_deferral, setup, teardown),
    cmocka_unit_test_setup_teardown (test_concurrent_add, setup, teardown),
    cmocka_unit_test_setup_teardown (test_passwd, setup, teardown),
    cmocka_unit_test_setup_teardown (test_passwd_stays_in_rootfs, setup, teardown),
    cmocka_unit_test_setup_teardown (test_layout_round_trip, setup, teardown),
    cmocka_unit_test_setup_teardown (test_layout_platform_index, setup, teardown),
    cmocka_unit_test_setup_teardown (test_layout_tar_hostile, setup, teardown),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
