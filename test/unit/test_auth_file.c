/* Unit tests for the containers-auth.json file (image/auth_file.h): the
 * base64 "auth" field, mode 0600 and a 0700 directory, an atomic rewrite
 * that keeps other keys, docker's key spellings, removal, the default
 * path, and one-line errors for broken files. */
#include <dirent.h>
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

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/auth_file.h"

static char dir[] = "/tmp/husk-test-auth.XXXXXX";

static int
setup (void **state)
{
  (void) state;
  strcpy (dir, "/tmp/husk-test-auth.XXXXXX");
  return mkdtemp (dir) ? 0 : -1;
}

static int
teardown (void **state)
{
  struct husk_error *err = NULL;

  (void) state;
  return husk_rm_rf (dir, &err);
}

static void
write_text (const char *path, const char *text)
{
  FILE *f = fopen (path, "w");

  assert_non_null (f);
  fputs (text, f);
  fclose (f);
}

static size_t
count_entries (const char *path)
{
  DIR *d = opendir (path);
  struct dirent *e;
  size_t n = 0;

  assert_non_null (d);
  while ((e = readdir (d)) != NULL)
    n += e->d_name[0] != '.';
  closedir (d);
  return n;
}

static void
test_encode_decode (void **state)
{
  cleanup_free char *enc = auth_file_encode ("alice", "s3:cret");
  char *user = NULL, *pass = NULL;

  (void) state;
  assert_string_equal ("YWxpY2U6czM6Y3JldA==", enc);
  assert_int_equal (0, auth_file_decode (enc, &user, &pass));
  assert_string_equal ("alice", user);
  assert_string_equal ("s3:cret", pass); /* the password may hold colons */
  free (user);
  free (pass);
  assert_int_equal (-1, auth_file_decode ("bm9jb2xvbg==", &user, &pass)); /* "nocolon" */
  assert_int_equal (-1, auth_file_decode ("!!!!", &user, &pass));
  assert_int_equal (-1, auth_file_decode ("abc", &user, &pass));
  assert_int_equal (-1, auth_file_decode ("", &user, &pass));
}

static void
test_store_and_lookup (void **state)
{
  cleanup_free char *path = xasprintf ("%s/containers/auth.json", dir);
  cleanup_free char *sub = xasprintf ("%s/containers", dir);
  cleanup_free char *text = NULL;
  char *user = NULL, *pass = NULL;
  struct husk_error *err = NULL;
  struct stat st;
  size_t len;

  (void) state;
  assert_int_equal (0, auth_file_lookup (path, "reg:5000", &user, &pass, &err)); /* no file yet */
  assert_int_equal (0, auth_file_store (path, "reg:5000", "alice", "s3cret", &err));
  assert_int_equal (0, stat (path, &st));
  assert_int_equal (0600, st.st_mode & 07777);
  assert_int_equal (0, stat (sub, &st));
  assert_int_equal (0700, st.st_mode & 07777);
  assert_int_equal (0, husk_read_file (path, &text, &len, &err));
  assert_non_null (strstr (text, "\"auths\""));
  assert_non_null (strstr (text, "\"reg:5000\""));
  assert_non_null (strstr (text, "\"auth\": \"YWxpY2U6czNjcmV0\""));
  assert_int_equal (1, auth_file_lookup (path, "reg:5000", &user, &pass, &err));
  assert_string_equal ("alice", user);
  assert_string_equal ("s3cret", pass);
  free (user);
  free (pass);
  assert_int_equal (0, auth_file_lookup (path, "other:5000", &user, &pass, &err));
  /* a second login replaces the entry by a rename (a reader sees the old
   * file or the new one, never half of one); nothing but the file is left */
  assert_int_equal (0, stat (path, &st));
  ino_t before = st.st_ino;
  assert_int_equal (0, auth_file_store (path, "reg:5000", "bob", "pw", &err));
  assert_int_equal (0, stat (path, &st));
  assert_true (st.st_ino != before);
  assert_int_equal (1, auth_file_lookup (path, "reg:5000", &user, &pass, &err));
  assert_string_equal ("bob", user);
  free (user);
  free (pass);
  assert_int_equal (1, count_entries (sub));
  assert_int_equal (-1, auth_file_store (path, "reg:5000", "a:b", "pw", &err));
  assert_non_null (strstr (err->msg, "a:b"));
  husk_error_free (&err);
}

/* Keys and fields written by podman or docker survive a login here. */
static void
test_keeps_other_keys (void **state)
{
  cleanup_free char *path = xasprintf ("%s/auth.json", dir);
  cleanup_free char *text = NULL;
  struct husk_error *err = NULL;
  char *user = NULL, *pass = NULL;
  size_t len;

  (void) state;
  write_text (path, "{\"auths\": {\"quay.io\": {\"auth\": \"cTpx\"}, \"https://index.docker.io/v1/\": "
                    "{\"auth\": \"ZDpk\"}}, \"credHelpers\": {\"gcr.io\": \"gcloud\"}}");
  chmod (path, 0644);
  assert_int_equal (0, auth_file_store (path, "reg:5000", "alice", "s3cret", &err));
  assert_int_equal (0, husk_read_file (path, &text, &len, &err));
  assert_non_null (strstr (text, "\"credHelpers\""));
  assert_non_null (strstr (text, "\"quay.io\""));
  {
    struct stat st;
    assert_int_equal (0, stat (path, &st));
    assert_int_equal (0600, st.st_mode & 07777); /* narrowed */
  }
  /* docker's key for the hub */
  assert_int_equal (1, auth_file_lookup (path, "docker.io", &user, &pass, &err));
  assert_string_equal ("d", user);
  assert_string_equal ("d", pass);
  free (user);
  free (pass);
  /* an exact key wins over a docker spelling before it */
  write_text (path,
              "{\"auths\": {\"https://reg:1/v1/\": {\"auth\": \"ZDpk\"}, \"reg:1\": {\"auth\": \"cTpx\"}}}");
  assert_int_equal (1, auth_file_lookup (path, "reg:1", &user, &pass, &err));
  assert_string_equal ("q", user);
  assert_string_equal ("q", pass);
  free (user);
  free (pass);
}

static void
test_remove (void **state)
{
  cleanup_free char *path = xasprintf ("%s/auth.json", dir);
  cleanup_free char *absent = xasprintf ("%s/none.json", dir);
  struct husk_error *err = NULL;
  char *user = NULL, *pass = NULL;
  bool removed = true;

  (void) state;
  assert_int_equal (0, auth_file_store (path, "a:1", "u", "p", &err));
  assert_int_equal (0, auth_file_store (path, "b:2", "u", "p", &err));
  assert_int_equal (0, auth_file_remove (path, "a:1", &removed, &err));
  assert_true (removed);
  assert_int_equal (0, auth_file_lookup (path, "a:1", &user, &pass, &err));
  assert_int_equal (1, auth_file_lookup (path, "b:2", &user, &pass, &err));
  free (user);
  free (pass);
  assert_int_equal (0, auth_file_remove (path, "a:1", &removed, &err));
  assert_false (removed);
  assert_int_equal (0, auth_file_remove (path, NULL, &removed, &err));
  assert_true (removed);
  assert_int_equal (0, auth_file_lookup (path, "b:2", &user, &pass, &err));
  assert_int_equal (0, auth_file_remove (absent, "a:1", &removed, &err));
  assert_false (removed);
  assert_int_equal (-1, access (absent, F_OK)); /* logout creates nothing */
}

static void
test_broken_files (void **state)
{
  cleanup_free char *path = xasprintf ("%s/auth.json", dir);
  struct husk_error *err = NULL;
  char *user = NULL, *pass = NULL;
  bool removed;

  (void) state;
  write_text (path, "{\"auths\": {\n  \"reg\": }");
  assert_int_equal (-1, auth_file_lookup (path, "reg", &user, &pass, &err));
  assert_non_null (strstr (err->msg, path));
  assert_non_null (strstr (err->msg, "line 2"));
  husk_error_free (&err);
  /* a broken file is not overwritten by a login */
  assert_int_equal (-1, auth_file_store (path, "reg", "u", "p", &err));
  husk_error_free (&err);
  assert_int_equal (-1, auth_file_remove (path, "reg", &removed, &err));
  husk_error_free (&err);
  write_text (path, "{\"auths\": []}");
  assert_int_equal (-1, auth_file_lookup (path, "reg", &user, &pass, &err));
  assert_non_null (strstr (err->msg, "\"auths\" object"));
  husk_error_free (&err);
  write_text (path, "{\"auths\": {\"reg\": {\"auth\": \"bm9jb2xvbg==\"}}}");
  assert_int_equal (-1, auth_file_lookup (path, "reg", &user, &pass, &err));
  assert_non_null (strstr (err->msg, "auths.\"reg\".auth"));
  husk_error_free (&err);
  /* the credentials callback warns and goes on without */
  assert_false (auth_file_credentials ("reg", &user, &pass, path));
}

static void
test_default_path (void **state)
{
  cleanup_free char *expected = NULL;
  char *path;

  (void) state;
  setenv ("REGISTRY_AUTH_FILE", "/x/auth.json", 1);
  path = auth_file_default_path ();
  assert_string_equal ("/x/auth.json", path);
  free (path);
  unsetenv ("REGISTRY_AUTH_FILE");
  setenv ("XDG_RUNTIME_DIR", "/run/user/1000", 1);
  path = auth_file_default_path ();
  assert_string_equal ("/run/user/1000/containers/auth.json", path);
  free (path);
  unsetenv ("XDG_RUNTIME_DIR");
  expected = xasprintf ("/run/containers/%u/auth.json", (unsigned) getuid ());
  path = auth_file_default_path ();
  assert_string_equal (expected, path);
  free (path);
}

/* The fallbacks podman reads: ~/.config/containers/auth.json, then
 * ~/.docker/config.json. */
static void
test_fallbacks (void **state)
{
  cleanup_free char *home = xasprintf ("%s/home", dir);
  cleanup_free char *docker_dir = xasprintf ("%s/.docker", home);
  cleanup_free char *docker = xasprintf ("%s/config.json", docker_dir);
  cleanup_free char *primary = xasprintf ("%s/primary.json", dir);
  struct husk_error *err = NULL;
  char *user = NULL, *pass = NULL;

  (void) state;
  assert_int_equal (0, husk_mkdir_p (docker_dir, 0700, &err));
  write_text (docker, "{\"auths\": {\"reg:1\": {\"auth\": \"ZDpk\"}}}");
  setenv ("HOME", home, 1);
  setenv ("REGISTRY_AUTH_FILE", primary, 1);
  unsetenv ("XDG_CONFIG_HOME");
  assert_true (auth_file_credentials ("reg:1", &user, &pass, NULL));
  assert_string_equal ("d", user);
  free (user);
  free (pass);
  /* the primary file wins */
  assert_int_equal (0, auth_file_store (primary, "reg:1", "p", "p", &err));
  assert_true (auth_file_credentials ("reg:1", &user, &pass, NULL));
  assert_string_equal ("p", user);
  free (user);
  free (pass);
  /* an explicit file is the only one read */
  assert_false (auth_file_credentials ("reg:1", &user, &pass, docker_dir));
  unsetenv ("REGISTRY_AUTH_FILE");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_encode_decode),
    cmocka_unit_test_setup_teardown (test_store_and_lookup, setup, teardown),
    cmocka_unit_test_setup_teardown (test_keeps_other_keys, setup, teardown),
    cmocka_unit_test_setup_teardown (test_remove, setup, teardown),
    cmocka_unit_test_setup_teardown (test_broken_files, setup, teardown),
    cmocka_unit_test (test_default_path),
    cmocka_unit_test_setup_teardown (test_fallbacks, setup, teardown),
  };

  return cmocka_run_group_tests (tests, NULL, NULL);
}
