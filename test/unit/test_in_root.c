/* common/in_root.c's "beneath, no symlinks" half: husk_open_beneath (openat2)
 * and its user-space walk answer the same for symlinks planted on the way,
 * at the end, climbing out, and for plain paths; husk_mkdir_beneath makes
 * directories and refuses a symlink among them.  (The in-root half is
 * tested in test_cdi_hook.) */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "husk/cleanup.h"
#include "husk/in_root.h"
#include "husk/util.h"

struct fixture
{
  char top[64];
  char *dir;  /* the trusted dir */
  char *host; /* outside it: must stay empty */
  int dir_fd;
};

static int
setup (void **state)
{
  struct fixture *f = xcalloc (1, sizeof *f);

  strcpy (f->top, "/tmp/husk-test-in-root-XXXXXX");
  assert_non_null (mkdtemp (f->top));
  f->dir = xasprintf ("%s/logs", f->top);
  f->host = xasprintf ("%s/host", f->top);
  assert_int_equal (mkdir (f->dir, 0755), 0);
  assert_int_equal (mkdir (f->host, 0755), 0);
  f->dir_fd = open (f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  assert_true (f->dir_fd >= 0);
  assert_int_equal (mkdirat (f->dir_fd, "sub", 0755), 0);
  assert_int_equal (symlinkat (f->host, f->dir_fd, "abs"), 0);
  assert_int_equal (symlinkat ("../host", f->dir_fd, "climb"), 0);
  assert_int_equal (symlinkat ("sub", f->dir_fd, "inside"), 0);
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *f = *state;

  close (f->dir_fd);
  husk_rm_rf (f->top, NULL);
  free (f->dir);
  free (f->host);
  free (f);
  return 0;
}

typedef int (*open_fn) (int, const char *, int, mode_t);

static void
test_open_beneath (void **state)
{
  struct fixture *f = *state;
  const open_fn fns[] = { husk_open_beneath, husk_open_beneath_walk };
  static const struct
  {
    const char *rel;
    int want_errno; /* 0: opens */
  } cases[] = {
    { "sub/a.log", 0 },     { "b.log", 0 }, { "abs/x.log", -1 },        { "climb/x.log", -1 },
    { "inside/x.log", -1 }, { "abs", -1 },  { "../host/x.log", EXDEV }, { "sub/../../host/y.log", EXDEV },
  };

  for (size_t k = 0; k < 2; k++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
      {
        int fd = fns[k](f->dir_fd, cases[i].rel, O_WRONLY | O_CREAT | O_APPEND, 0640);
        if (cases[i].want_errno == 0)
          {
            if (fd < 0)
              fail_msg ("%s `%s`: %s", k ? "walk" : "openat2", cases[i].rel, strerror (errno));
            close (fd);
            continue;
          }
        if (fd >= 0)
          fail_msg ("%s `%s`: opened", k ? "walk" : "openat2", cases[i].rel);
        /* A symlink: ELOOP (openat2) or ELOOP/ENOTDIR (the walk's O_NOFOLLOW). */
        if (cases[i].want_errno > 0)
          assert_int_equal (errno, cases[i].want_errno);
        else
          assert_true (errno == ELOOP || errno == ENOTDIR);
      }
  assert_int_equal (rmdir (f->host), 0); /* still empty */
}

static void
test_mkdir_beneath (void **state)
{
  struct fixture *f = *state;
  struct husk_error *err = NULL;
  struct stat st;

  assert_int_equal (husk_mkdir_beneath (f->dir_fd, "new/deeper", 0750, &err), 0);
  assert_int_equal (fstatat (f->dir_fd, "new/deeper", &st, AT_SYMLINK_NOFOLLOW), 0);
  assert_true (S_ISDIR (st.st_mode));
  assert_int_equal (husk_mkdir_beneath (f->dir_fd, "new/deeper", 0750, &err), 0); /* again: fine */
  const char *bad[] = { "abs/made", "climb/made", "inside/made", "sub/../../host/made" };
  for (size_t i = 0; i < 4; i++)
    {
      assert_int_equal (husk_mkdir_beneath (f->dir_fd, bad[i], 0755, &err), -1);
      assert_non_null (err);
      husk_error_free (&err);
    }
  assert_int_equal (rmdir (f->host), 0); /* nothing was made in it */
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_open_beneath, setup, teardown),
    cmocka_unit_test_setup_teardown (test_mkdir_beneath, setup, teardown),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
