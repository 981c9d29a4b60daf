/* Unit tests for husk's CDI hooks (cri/cdi/hook.c): option parsing, path
 * resolution inside a root (`..`, absolute symlinks, loops; with openat2
 * and with the user-space walk), and the three hooks over temp rootfs
 * trees, among them one whose /etc is a symlink to a host directory. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "cri/cdi/hook.h"
#include "husk/in_root.h"
#include "husk/cleanup.h"
#include "husk/util.h"

struct fixture
{
  char top[64];
  char root[96]; /* the rootfs */
  char host[96]; /* a "host" dir outside it, which must stay empty */
  int root_fd;
};

static int
setup (void **state)
{
  struct fixture *f = calloc (1, sizeof (*f));
  strcpy (f->top, "/tmp/husk-test-cdi-hook-XXXXXX");
  assert_non_null (mkdtemp (f->top));
  snprintf (f->root, sizeof f->root, "%s/rootfs", f->top);
  snprintf (f->host, sizeof f->host, "%s/host", f->top);
  assert_int_equal (mkdir (f->root, 0755), 0);
  assert_int_equal (mkdir (f->host, 0755), 0);
  f->root_fd = open (f->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true (f->root_fd >= 0);
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *f = *state;
  char cmd[128];
  close (f->root_fd);
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", f->top);
  assert_int_equal (system (cmd), 0);
  free (f);
  return 0;
}

/* Makes FMT (a path under the rootfs) with its parents, as a directory. */
static void
root_mkdir (struct fixture *f, const char *rel)
{
  char cmd[512];
  snprintf (cmd, sizeof cmd, "mkdir -p '%s/%s'", f->root, rel);
  assert_int_equal (system (cmd), 0);
}

static void
root_symlink (struct fixture *f, const char *target, const char *rel)
{
  char path[512];
  snprintf (path, sizeof path, "%s/%s", f->root, rel);
  assert_int_equal (symlink (target, path), 0);
}

static void
root_write (struct fixture *f, const char *rel, const char *text)
{
  char path[512];
  snprintf (path, sizeof path, "%s/%s", f->root, rel);
  FILE *fp = fopen (path, "w");
  assert_non_null (fp);
  fputs (text, fp);
  fclose (fp);
}

static char *
root_read (struct fixture *f, const char *rel)
{
  char path[512];
  char *text = NULL;
  size_t len;
  snprintf (path, sizeof path, "%s/%s", f->root, rel);
  if (husk_read_file (path, &text, &len, NULL) < 0)
    return NULL;
  return text;
}

static bool
dir_is_empty (const char *path)
{
  char cmd[256];
  snprintf (cmd, sizeof cmd, "[ -z \"$(ls -A '%s')\" ]", path);
  return system (cmd) == 0;
}

/* ---- arguments ---------------------------------------------------------- */

static void
test_parse_link (void **state)
{
  static const char *const bad[] = {
    "libcuda.so.1",                     /* no :: */
    "::/usr/lib/libcuda.so",            /* empty target */
    "libcuda.so.1::",                   /* empty link */
    "a::b::/c",                         /* two separators */
    "libcuda.so.1::usr/lib/libcuda.so", /* relative link */
    "x::/usr/../../etc/passwd",         /* .. */
    "x::/",                             /* the root itself */
  };
  struct husk_error *err = NULL;
  char *target = NULL, *link = NULL;

  assert_int_equal (
      cdi_hook_parse_link ("libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so", &target, &link, &err), 0);
  assert_string_equal (target, "libcuda.so.1");
  assert_string_equal (link, "/usr/lib/x86_64-linux-gnu/libcuda.so");
  free (target), free (link);
  assert_int_equal (cdi_hook_parse_link ("/abs/target::/l", &target, &link, &err), 0);
  assert_string_equal (target, "/abs/target");
  free (target), free (link);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    {
      assert_int_equal (cdi_hook_parse_link (bad[i], &target, &link, &err), -1);
      assert_non_null (err);
      assert_non_null (strstr (err->msg, "--link"));
      assert_int_equal (err->errnum, EINVAL);
      husk_error_free (&err);
    }
}

static void
test_parse_mode (void **state)
{
  static const char *const bad[] = { "", "8", "0o755", "-1", "+7", "17777", "755 ", "0x1ff", "777777" };
  struct husk_error *err = NULL;
  mode_t mode = 0;

  assert_int_equal (cdi_hook_parse_mode ("755", &mode, &err), 0);
  assert_int_equal (mode, 0755);
  assert_int_equal (cdi_hook_parse_mode ("0640", &mode, &err), 0);
  assert_int_equal (mode, 0640);
  assert_int_equal (cdi_hook_parse_mode ("7777", &mode, &err), 0);
  assert_int_equal (mode, 07777);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    {
      assert_int_equal (cdi_hook_parse_mode (bad[i], &mode, &err), -1);
      assert_non_null (strstr (err->msg, "--mode"));
      husk_error_free (&err);
    }
}

static void
test_check_path (void **state)
{
  struct husk_error *err = NULL;

  assert_int_equal (cdi_hook_check_path ("--path", "/dev/dri", true, &err), 0);
  assert_int_equal (cdi_hook_check_path ("--path", "/a/..b/c..", true, &err), 0);
  assert_int_equal (cdi_hook_check_path ("--folder", "/", false, &err), 0);
  assert_int_equal (cdi_hook_check_path ("--path", "/", true, &err), -1);
  husk_error_free (&err);
  assert_int_equal (cdi_hook_check_path ("--path", "/./", true, &err), -1);
  husk_error_free (&err);
  assert_int_equal (cdi_hook_check_path ("--path", "dev/dri", true, &err), -1);
  assert_non_null (strstr (err->msg, "not an absolute"));
  husk_error_free (&err);
  assert_int_equal (cdi_hook_check_path ("--folder", "/usr/../../host", false, &err), -1);
  assert_non_null (strstr (err->msg, "`..`"));
  assert_non_null (strstr (err->msg, "/usr/../../host"));
  husk_error_free (&err);
  assert_int_equal (cdi_hook_check_path ("--path", "/..", true, &err), -1);
  husk_error_free (&err);
}

/* ---- resolution inside a root ------------------------------------------- */

typedef int (*open_fn) (int root_fd, const char *path, int flags);

/* Both resolvers must agree on every case. */
static const open_fn resolvers[] = { husk_open_in_root, husk_open_in_root_walk };

/* The inode PATH resolves to under ROOT_FD, compared with the one the
 * plain path REL under the root has. */
static void
assert_resolves_to (struct fixture *f, open_fn resolve, const char *path, int flags, const char *rel)
{
  struct stat got, want;
  int fd = resolve (f->root_fd, path, flags);

  if (fd < 0)
    fail_msg ("`%s` did not resolve: %s", path, strerror (errno));
  assert_int_equal (fstat (fd, &got), 0);
  close (fd);
  assert_int_equal (fstatat (f->root_fd, rel, &want, AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH), 0);
  if (got.st_ino != want.st_ino || got.st_dev != want.st_dev)
    fail_msg ("`%s` resolved to another inode than `%s`", path, rel);
}

static void
assert_fails_with (struct fixture *f, open_fn resolve, const char *path, int flags, int errnum)
{
  int fd = resolve (f->root_fd, path, flags);
  if (fd >= 0)
    {
      close (fd);
      fail_msg ("`%s` resolved, expected errno %d", path, errnum);
    }
  assert_int_equal (errno, errnum);
}

static void
test_open_in_root (void **state)
{
  struct fixture *f = *state;
  char host_etc[128];

  root_mkdir (f, "a/b");
  root_mkdir (f, "etc");
  root_write (f, "a/b/file", "x");
  root_write (f, "etc/marker", "inside");
  root_symlink (f, "/a/b", "abs");              /* absolute: the root's /a/b */
  root_symlink (f, "../../../../../etc", "up"); /* climbs past the root: its /etc */
  root_symlink (f, "/../../..", "a/top");       /* absolute and above the root */
  root_symlink (f, "b/file", "a/rel");          /* relative, inside */
  root_symlink (f, "loop2", "loop1");           /* a loop */
  root_symlink (f, "loop1", "loop2");
  root_symlink (f, "/nowhere", "dangling");
  snprintf (host_etc, sizeof host_etc, "%s", f->host);
  root_symlink (f, host_etc, "hostlink"); /* the host dir's name, taken inside */

  for (size_t i = 0; i < sizeof resolvers / sizeof *resolvers; i++)
    {
      open_fn r = resolvers[i];
      assert_resolves_to (f, r, "/", O_PATH, "");
      assert_resolves_to (f, r, "/a/b/file", O_PATH, "a/b/file");
      assert_resolves_to (f, r, "a/b/file", O_RDONLY, "a/b/file");
      assert_resolves_to (f, r, "/../../a/./b/../b/file", O_PATH, "a/b/file");
      assert_resolves_to (f, r, "/abs/file", O_PATH, "a/b/file");
      assert_resolves_to (f, r, "/up/marker", O_RDONLY, "etc/marker");
      assert_resolves_to (f, r, "/a/top", O_PATH | O_DIRECTORY, "");
      assert_resolves_to (f, r, "/a/top/a/top/etc", O_PATH, "etc");
      assert_resolves_to (f, r, "/a/rel", O_RDONLY, "a/b/file");
      assert_resolves_to (f, r, "/a/rel", O_PATH | O_NOFOLLOW, "a/rel");
      assert_fails_with (f, r, "/a/rel", O_RDONLY | O_NOFOLLOW, ELOOP);
      assert_resolves_to (f, r, "/abs/", O_PATH | O_NOFOLLOW, "a/b"); /* a trailing slash follows */
      assert_fails_with (f, r, "/a/b/file/", O_PATH, ENOTDIR);
      assert_fails_with (f, r, "/loop1", O_PATH, ELOOP);
      assert_fails_with (f, r, "/loop1/x", O_PATH, ELOOP);
      assert_fails_with (f, r, "/dangling", O_PATH, ENOENT);
      assert_fails_with (f, r, "/hostlink", O_PATH, ENOENT); /* not the host's dir */
      assert_fails_with (f, r, "/a/b/file/x", O_PATH, ENOTDIR);
      assert_fails_with (f, r, "/missing", O_PATH, ENOENT);
    }
}

static void
test_open_parent (void **state)
{
  struct fixture *f = *state;
  struct husk_error *err = NULL;
  char *name = NULL;
  int fd;

  root_symlink (f, f->host, "hostdir");
  fd = husk_open_parent_in_root (f->root_fd, "/hostdir/x/y/name", true, &name, &err);
  assert_true (fd >= 0);
  assert_string_equal (name, "name");
  close (fd);
  free (name);
  /* The dirs went to <root><host path>, the host dir is untouched. */
  assert_true (dir_is_empty (f->host));
  {
    char inside[256];
    struct stat st;
    snprintf (inside, sizeof inside, "%s%s/x/y", f->root, f->host);
    assert_int_equal (stat (inside, &st), 0);
    assert_true (S_ISDIR (st.st_mode));
  }
  assert_int_equal (husk_open_parent_in_root (f->root_fd, "/nothere/name", false, &name, &err), -1);
  assert_non_null (strstr (err->msg, "/nothere/name"));
  husk_error_free (&err);
  /* A dangling symlink is created through, inside the root: absolute,
   * relative and climbing past the root. */
  root_symlink (f, "/gone/deeper", "dang");
  root_symlink (f, "../../../../rel/target", "dang2");
  fd = husk_open_parent_in_root (f->root_fd, "/dang/name", true, &name, &err);
  assert_true (fd >= 0);
  close (fd);
  free (name);
  fd = husk_open_parent_in_root (f->root_fd, "/dang2/sub/name", true, &name, &err);
  assert_true (fd >= 0);
  close (fd);
  free (name);
  assert_int_equal (faccessat (f->root_fd, "gone/deeper", F_OK, 0), 0);
  assert_int_equal (faccessat (f->root_fd, "rel/target/sub", F_OK, 0), 0);
  /* A loop is not. */
  root_symlink (f, "/loopb", "loopa");
  root_symlink (f, "/loopa", "loopb");
  assert_int_equal (husk_open_parent_in_root (f->root_fd, "/loopa/name", true, &name, &err), -1);
  assert_non_null (strstr (err->msg, "/loopa"));
  husk_error_free (&err);
}

/* ---- create-symlinks ---------------------------------------------------- */

static void
test_create_symlink (void **state)
{
  struct fixture *f = *state;
  struct husk_error *err = NULL;
  char target[64];
  char path[512];
  ssize_t n;

  assert_int_equal (
      cdi_hook_create_symlink (f->root_fd, "libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so", &err), 0);
  snprintf (path, sizeof path, "%s/usr/lib/x86_64-linux-gnu/libcuda.so", f->root);
  n = readlink (path, target, sizeof target - 1);
  assert_true (n > 0);
  target[n] = '\0';
  assert_string_equal (target, "libcuda.so.1");
  /* The same link again is fine; another target or a file is not. */
  assert_int_equal (
      cdi_hook_create_symlink (f->root_fd, "libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so", &err), 0);
  assert_int_equal (
      cdi_hook_create_symlink (f->root_fd, "libcuda.so.2", "/usr/lib/x86_64-linux-gnu/libcuda.so", &err), -1);
  assert_non_null (strstr (err->msg, "links to `libcuda.so.1`, not `libcuda.so.2`"));
  husk_error_free (&err);
  root_write (f, "usr/lib/plain", "x");
  assert_int_equal (cdi_hook_create_symlink (f->root_fd, "t", "/usr/lib/plain", &err), -1);
  assert_non_null (strstr (err->msg, "/usr/lib/plain` exists and is a regular file"));
  husk_error_free (&err);
  /* A parent that is a symlink to a host path stays inside the root. */
  root_symlink (f, f->host, "hostlink");
  assert_int_equal (cdi_hook_create_symlink (f->root_fd, "/etc/shadow", "/hostlink/sub/l", &err), 0);
  assert_true (dir_is_empty (f->host));
  snprintf (path, sizeof path, "%s%s/sub/l", f->root, f->host);
  n = readlink (path, target, sizeof target - 1);
  assert_true (n > 0);
  target[n] = '\0';
  assert_string_equal (target, "/etc/shadow");
  /* A file in the way of a parent. */
  assert_int_equal (cdi_hook_create_symlink (f->root_fd, "t", "/usr/lib/plain/l", &err), -1);
  assert_non_null (strstr (err->msg, "/usr/lib/plain"));
  husk_error_free (&err);
}

/* ---- chmod -------------------------------------------------------------- */

static mode_t
root_mode (struct fixture *f, const char *rel)
{
  struct stat st;
  assert_int_equal (fstatat (f->root_fd, rel, &st, AT_SYMLINK_NOFOLLOW), 0);
  return st.st_mode & 07777;
}

static void
test_chmod (void **state)
{
  struct fixture *f = *state;
  struct husk_error *err = NULL;
  bool skipped = true;
  struct stat st;

  root_mkdir (f, "dev/dri");
  assert_int_equal (chmod (f->host, 0700), 0);
  assert_int_equal (cdi_hook_chmod (f->root_fd, "/dev/dri", 0751, &skipped, &err), 0);
  assert_false (skipped);
  assert_int_equal (root_mode (f, "dev/dri"), 0751);
  assert_int_equal (cdi_hook_chmod (f->root_fd, "/dev/none", 0755, &skipped, &err), 0);
  assert_true (skipped);
  /* The last component is never followed; parents resolve inside. */
  root_symlink (f, f->host, "dev/hostlink");
  assert_int_equal (cdi_hook_chmod (f->root_fd, "/dev/hostlink", 0777, &skipped, &err), -1);
  assert_non_null (strstr (err->msg, "/dev/hostlink` is a symlink"));
  husk_error_free (&err);
  assert_int_equal (cdi_hook_chmod (f->root_fd, "/dev/hostlink/", 0777, &skipped, &err), 0);
  assert_true (skipped); /* <root><host> does not exist */
  assert_int_equal (stat (f->host, &st), 0);
  assert_int_equal (st.st_mode & 07777, 0700);
}

/* ---- update-ldcache ----------------------------------------------------- */

/* A real shared library with a soname, copied from the host. */
static void
put_library (struct fixture *f, const char *dir)
{
  char cmd[512];
  root_mkdir (f, dir);
  snprintf (cmd, sizeof cmd, "cp \"$(readlink -f /lib/x86_64-linux-gnu/libz.so.1)\" '%s/%s/libz.so.1.2.3'",
            f->root, dir);
  assert_int_equal (system (cmd), 0);
}

static bool
cache_names (struct fixture *f, const char *text)
{
  char cmd[512];
  snprintf (cmd, sizeof cmd, "grep -qaF '%s' '%s/etc/ld.so.cache'", text, f->root);
  return system (cmd) == 0;
}

static void
test_update_ldcache (void **state)
{
  struct fixture *f = *state;
  struct husk_error *err = NULL;
  char *folders[] = { "/opt/fake/lib", "/missing/lib", "/opt/fake/lib" };
  char *more[] = { "/opt/other" };
  cleanup_free char *conf = NULL;
  cleanup_free char *top = NULL;
  cleanup_free char *again = NULL;
  char link[256];

  put_library (f, "opt/fake/lib");
  /* No /etc at all: it is made, with an ld.so.conf that includes the drop-ins. */
  if (cdi_hook_update_ldcache (f->root, f->root_fd, folders, 3, NULL, &err) < 0)
    fail_msg ("update-ldcache: %s", err->msg);
  top = root_read (f, "etc/ld.so.conf");
  assert_non_null (top);
  assert_string_equal (top, "include /etc/ld.so.conf.d/*.conf\n");
  conf = root_read (f, "etc/ld.so.conf.d/00-husk-cdi.conf");
  assert_non_null (conf);
  assert_string_equal (conf, "/opt/fake/lib\n"); /* once; the missing folder skipped */
  assert_int_equal (root_mode (f, "etc/ld.so.conf.d/00-husk-cdi.conf"), 0644);
  assert_true (cache_names (f, "/opt/fake/lib/libz.so.1"));
  /* ldconfig made the soname link, inside the root. */
  snprintf (link, sizeof link, "%s/opt/fake/lib/libz.so.1", f->root);
  assert_int_equal (access (link, F_OK), 0);
  /* A second hook adds its folders to the first one's. */
  put_library (f, "opt/other");
  assert_int_equal (cdi_hook_update_ldcache (f->root, f->root_fd, more, 1, NULL, &err), 0);
  again = root_read (f, "etc/ld.so.conf.d/00-husk-cdi.conf");
  assert_string_equal (again, "/opt/fake/lib\n/opt/other\n");
  assert_true (cache_names (f, "/opt/other/libz.so.1"));
}

static void
test_update_ldcache_keeps_ldso_conf (void **state)
{
  struct fixture *f = *state;
  struct husk_error *err = NULL;
  char *folders[] = { "/opt/fake" };
  cleanup_free char *top = NULL;

  root_mkdir (f, "etc");
  root_write (f, "etc/ld.so.conf", "/opt/fake\n");
  put_library (f, "opt/fake");
  assert_int_equal (cdi_hook_update_ldcache (f->root, f->root_fd, folders, 1, NULL, &err), 0);
  top = root_read (f, "etc/ld.so.conf");
  assert_string_equal (top, "/opt/fake\n");
  assert_true (cache_names (f, "/opt/fake/libz.so.1"));
}

/* A rootfs whose /etc points at a host dir: every write lands inside. */
static void
test_update_ldcache_etc_symlink_attack (void **state)
{
  struct fixture *f = *state;
  struct husk_error *err = NULL;
  char *folders[] = { "/opt/fake" };
  char inside[256];

  root_symlink (f, f->host, "etc");
  put_library (f, "opt/fake");
  if (cdi_hook_update_ldcache (f->root, f->root_fd, folders, 1, NULL, &err) < 0)
    fail_msg ("update-ldcache: %s", err->msg);
  assert_true (dir_is_empty (f->host));
  snprintf (inside, sizeof inside, "%s%s/ld.so.conf.d/00-husk-cdi.conf", f->root, f->host);
  assert_int_equal (access (inside, F_OK), 0);
  snprintf (inside, sizeof inside, "%s%s/ld.so.cache", f->root, f->host);
  assert_int_equal (access (inside, F_OK), 0);
  /* A planted symlink at our own conf file is replaced, not followed. */
  assert_int_equal (unlink (inside), 0);
  snprintf (inside, sizeof inside, "%s%s/ld.so.conf.d/00-husk-cdi.conf", f->root, f->host);
  assert_int_equal (unlink (inside), 0);
  {
    char victim[160];
    snprintf (victim, sizeof victim, "%s/victim", f->host);
    assert_int_equal (symlink (victim, inside), 0);
    assert_int_equal (cdi_hook_update_ldcache (f->root, f->root_fd, folders, 1, NULL, &err), 0);
    assert_int_equal (access (victim, F_OK), -1);
    assert_true (dir_is_empty (f->host));
  }
}

static void
test_update_ldcache_ldconfig_fails (void **state)
{
  struct fixture *f = *state;
  struct husk_error *err = NULL;
  char script[160];
  FILE *fp;

  snprintf (script, sizeof script, "%s/fake-ldconfig", f->top);
  fp = fopen (script, "w");
  assert_non_null (fp);
  fputs ("#!/bin/sh\necho 'warning: noise'\necho 'ldconfig: cannot write the cache' >&2\nexit 3\n", fp);
  fclose (fp);
  assert_int_equal (chmod (script, 0755), 0);
  assert_int_equal (cdi_hook_update_ldcache (f->root, f->root_fd, NULL, 0, script, &err), -1);
  assert_non_null (strstr (err->msg, "exited with status 3: ldconfig: cannot write the cache"));
  assert_non_null (strstr (err->msg, f->root));
  husk_error_free (&err);
}

/* ---- the state and the rootfs ------------------------------------------- */

static void
test_rootfs_from_state (void **state)
{
  struct fixture *f = *state;
  struct husk_error *err = NULL;
  char state_json[256], config[256];
  char *rootfs = NULL;
  FILE *fp;

  snprintf (config, sizeof config, "%s/config.json", f->top);
  fp = fopen (config, "w");
  assert_non_null (fp);
  fputs ("{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"rootfs\"}}", fp);
  fclose (fp);
  snprintf (state_json, sizeof state_json,
            "{\"ociVersion\":\"1.0.2\",\"id\":\"c\",\"pid\":1,\"bundle\":\"%s\"}", f->top);
  assert_int_equal (cdi_hook_rootfs_from_state (state_json, strlen (state_json), &rootfs, &err), 0);
  assert_string_equal (rootfs, f->root);
  free (rootfs);

  fp = fopen (config, "w");
  fputs ("{\"root\":{\"path\":\"/abs/root\"}}", fp);
  fclose (fp);
  assert_int_equal (cdi_hook_rootfs_from_state (state_json, strlen (state_json), &rootfs, &err), 0);
  assert_string_equal (rootfs, "/abs/root");
  free (rootfs);

  fp = fopen (config, "w");
  fputs ("{\"process\":{}}", fp);
  fclose (fp);
  assert_int_equal (cdi_hook_rootfs_from_state (state_json, strlen (state_json), &rootfs, &err), -1);
  assert_non_null (strstr (err->msg, "no root.path"));
  husk_error_free (&err);

  assert_int_equal (cdi_hook_rootfs_from_state ("not json", 8, &rootfs, &err), -1);
  assert_non_null (strstr (err->msg, "OCI state on stdin"));
  husk_error_free (&err);
  assert_int_equal (cdi_hook_rootfs_from_state ("{\"bundle\":\"rel\"}", 16, &rootfs, &err), -1);
  assert_non_null (strstr (err->msg, "bundle"));
  husk_error_free (&err);
  assert_int_equal (cdi_hook_rootfs_from_state ("{\"bundle\":\"/nonexistent-bundle\"}", 32, &rootfs, &err),
                    -1);
  assert_non_null (strstr (err->msg, "/nonexistent-bundle/config.json"));
  husk_error_free (&err);

  assert_int_equal (cdi_hook_open_root ("/", &err), -1);
  assert_non_null (strstr (err->msg, "host's /"));
  husk_error_free (&err);
  assert_int_equal (cdi_hook_open_root ("/nonexistent-root", &err), -1);
  husk_error_free (&err);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_parse_link),
    cmocka_unit_test (test_parse_mode),
    cmocka_unit_test (test_check_path),
    cmocka_unit_test_setup_teardown (test_open_in_root, setup, teardown),
    cmocka_unit_test_setup_teardown (test_open_parent, setup, teardown),
    cmocka_unit_test_setup_teardown (test_create_symlink, setup, teardown),
    cmocka_unit_test_setup_teardown (test_chmod, setup, teardown),
    cmocka_unit_test_setup_teardown (test_update_ldcache, setup, teardown),
    cmocka_unit_test_setup_teardown (test_update_ldcache_keeps_ldso_conf, setup, teardown),
    cmocka_unit_test_setup_teardown (test_update_ldcache_etc_symlink_attack, setup, teardown),
    cmocka_unit_test_setup_teardown (test_update_ldcache_ldconfig_fails, setup, teardown),
    cmocka_unit_test_setup_teardown (test_rootfs_from_state, setup, teardown),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
