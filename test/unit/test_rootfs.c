/* Unit tests for runtime/rootfs.c and rootfs_dev.c: rootfs_open_in_root on a
 * temp tree (symlinks, "..", creation), then whole rootfs_prepare and
 * rootfs_finalize runs in a forked child with its own mount namespace (and
 * once in a user namespace), which reports back over a pipe. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/rootfs.h"

#define TMPFS_MAGIC_ 0x01021994
#define PROC_MAGIC_ 0x9fa0
#define SYSFS_MAGIC_ 0x62656572
#define DEVPTS_MAGIC_ 0x1cd1
#define MQUEUE_MAGIC_ 0x19800202
#define CGROUP2_MAGIC_ 0x63677270
#define CGROUP_MAGIC_ 0x27e0eb

#define HOST_TEXT "hello from the host\n"

struct fixture
{
  char base[64];   /* holds rootfs/ and the host-side bind sources */
  char marker[64]; /* a host dir the image's `evil` symlink names */
  char rootfs[128];
  int root_fd;
};

/* ---- fixture ------------------------------------------------------------ */

static char *
under (const char *dir, const char *rel)
{
  return xasprintf ("%s/%s", dir, rel);
}

/* Fixture builders: 0 or -1, so a failed setup can clean up (cmocka runs
 * no teardown after it). */
static int
make_dir (const char *dir, const char *rel)
{
  cleanup_free char *path = under (dir, rel);
  return husk_mkdir_p (path, 0755, NULL);
}

static int
make_file (const char *dir, const char *rel, const char *text)
{
  cleanup_free char *path = under (dir, rel);
  cleanup_free char *parent = xstrdup (path);

  *strrchr (parent, '/') = '\0';
  if (husk_mkdir_p (parent, 0755, NULL) < 0)
    return -1;
  return husk_write_file_atomic (path, text, strlen (text), 0644, NULL);
}

static int
make_link (const char *dir, const char *rel, const char *target)
{
  cleanup_free char *path = under (dir, rel);
  return symlink (target, path);
}

static int
build_tree (struct fixture *fx)
{
  static const char *const rootfs_dirs[] = { "proc", "sys", "dev", "etc", "masked-dir", "rw-dir" };

  for (size_t i = 0; i < sizeof rootfs_dirs / sizeof rootfs_dirs[0]; i++)
    if (make_dir (fx->rootfs, rootfs_dirs[i]) < 0)
      return -1;
  if (make_dir (fx->marker, "x") < 0 || make_file (fx->rootfs, "I-am-rootfs", "rootfs\n") < 0
      || make_file (fx->rootfs, "masked-dir/secret", "secret\n") < 0
      || make_file (fx->rootfs, "rw-dir/file", "data\n") < 0
      || make_link (fx->rootfs, "evil", fx->marker) < 0)
    return -1;
  if (make_file (fx->base, "hostfile", HOST_TEXT) < 0 || make_link (fx->base, "hostlink", "hostfile") < 0
      || make_file (fx->base, "hostdir/inside", "inside\n") < 0 || make_dir (fx->base, "hostdir2/sub") < 0
      || make_dir (fx->base, "locked") < 0)
    return -1;
  fx->root_fd = open (fx->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
  return fx->root_fd < 0 ? -1 : 0;
}

static int
setup (void **state)
{
  struct fixture *fx = xcalloc (1, sizeof *fx);

  strcpy (fx->base, "/tmp/husk-rootfs-test-XXXXXX");
  strcpy (fx->marker, "/tmp/husk-marker-XXXXXX");
  fx->root_fd = -1;
  *state = fx;
  if (mkdtemp (fx->base) == NULL)
    return -1;
  if (mkdtemp (fx->marker) == NULL)
    {
      husk_rm_rf (fx->base, NULL);
      return -1;
    }
  snprintf (fx->rootfs, sizeof fx->rootfs, "%s/rootfs", fx->base);
  if (build_tree (fx) < 0)
    {
      husk_rm_rf (fx->base, NULL);
      husk_rm_rf (fx->marker, NULL);
      return -1;
    }
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *fx = *state;

  close (fx->root_fd);
  husk_rm_rf (fx->base, NULL);
  husk_rm_rf (fx->marker, NULL);
  free (fx);
  return 0;
}

static void
assert_same_inode (int fd, const char *path)
{
  struct stat by_fd, by_path;

  assert_int_equal (fstat (fd, &by_fd), 0);
  assert_int_equal (lstat (path, &by_path), 0);
  assert_true (by_fd.st_dev == by_path.st_dev && by_fd.st_ino == by_path.st_ino);
}

static int
open_checked (struct fixture *fx, const char *path, enum rootfs_create create, const char *expect_rel)
{
  struct husk_error *err = NULL;
  int fd = rootfs_open_in_root (fx->root_fd, path, create, &err);
  cleanup_free char *expect = under (fx->rootfs, expect_rel);

  if (fd < 0)
    fail_msg ("rootfs_open_in_root %s: %s", path, err->msg);
  assert_same_inode (fd, expect);
  return fd;
}

static void
expect_open_error (struct fixture *fx, const char *path, enum rootfs_create create, int errnum)
{
  struct husk_error *err = NULL;

  assert_int_equal (rootfs_open_in_root (fx->root_fd, path, create, &err), -1);
  assert_non_null (err);
  assert_int_equal (err->errnum, errnum);
  assert_non_null (strstr (err->msg, path));
  husk_error_free (&err);
}

static bool
exists (const char *dir, const char *rel)
{
  cleanup_free char *path = under (dir, rel);
  struct stat st;
  return lstat (path, &st) == 0;
}

/* ---- rootfs_open_in_root ------------------------------------------------ */

static void
test_open_existing (void **state)
{
  struct fixture *fx = *state;

  close (open_checked (fx, "/etc", ROOTFS_CREATE_NONE, "etc"));
  close (open_checked (fx, "etc//", ROOTFS_CREATE_DIR, "etc"));
  close (open_checked (fx, "/", ROOTFS_CREATE_NONE, "."));
  close (open_checked (fx, "/rw-dir/file", ROOTFS_CREATE_FILE, "rw-dir/file"));
}

static void
test_absolute_symlink_stays_inside (void **state)
{
  struct fixture *fx = *state;
  cleanup_free char *inside = xasprintf ("%s/x", fx->marker + 1);

  assert_int_equal (make_dir (fx->rootfs, inside), 0);
  close (open_checked (fx, "/evil/x", ROOTFS_CREATE_NONE, inside));
}

static void
test_dangling_symlink_created_inside (void **state)
{
  struct fixture *fx = *state;
  cleanup_free char *inside_dir = xasprintf ("%s/y/z", fx->marker + 1);
  cleanup_free char *inside_file = xasprintf ("%s/f", fx->marker + 1);
  cleanup_free char *host_file = xasprintf ("%s/f", fx->marker);

  /* rootfs/tmp does not exist: the link dangles inside the root, though
   * its target exists on the host. */
  close (open_checked (fx, "/evil/y/z", ROOTFS_CREATE_DIR, inside_dir));
  assert_false (exists (fx->marker, "y"));
  assert_int_equal (make_link (fx->rootfs, "evil-file", host_file), 0);
  close (open_checked (fx, "/evil-file", ROOTFS_CREATE_FILE, inside_file));
  assert_false (exists (fx->marker, "f"));
}

static void
test_relative_symlink_and_dotdot (void **state)
{
  struct fixture *fx = *state;

  assert_int_equal (make_dir (fx->rootfs, "a"), 0);
  assert_int_equal (make_link (fx->rootfs, "a/up", "../../../../.."), 0);
  close (open_checked (fx, "/a/up/etc", ROOTFS_CREATE_NONE, "etc"));
  close (open_checked (fx, "/../../../etc", ROOTFS_CREATE_NONE, "etc"));
  close (open_checked (fx, "/a/up/new/dir", ROOTFS_CREATE_DIR, "new/dir"));
  /* dangling and relative: "gone/../target" resolved from a/ */
  assert_int_equal (make_link (fx->rootfs, "a/rel", "gone/../target"), 0);
  close (open_checked (fx, "/a/rel/file", ROOTFS_CREATE_FILE, "a/target/file"));
}

static void
test_create_parents (void **state)
{
  struct fixture *fx = *state;
  cleanup_free char *file = under (fx->rootfs, "f/g/file");
  cleanup_free char *dir = under (fx->rootfs, "x/y");
  struct stat st;

  close (open_checked (fx, "/x/y/z", ROOTFS_CREATE_DIR, "x/y/z"));
  assert_int_equal (stat (dir, &st), 0);
  assert_true (S_ISDIR (st.st_mode));
  assert_int_equal (st.st_mode & 07777, 0755);
  close (open_checked (fx, "/f/g/file", ROOTFS_CREATE_FILE, "f/g/file"));
  assert_int_equal (stat (file, &st), 0);
  assert_true (S_ISREG (st.st_mode));
  assert_int_equal (st.st_size, 0);
}

static void
test_open_errors (void **state)
{
  struct fixture *fx = *state;

  expect_open_error (fx, "/nope/deeper", ROOTFS_CREATE_NONE, ENOENT);
  assert_false (exists (fx->rootfs, "nope"));
  expect_open_error (fx, "/I-am-rootfs/x", ROOTFS_CREATE_DIR, ENOTDIR);
  assert_int_equal (make_link (fx->rootfs, "loop1", "loop2"), 0);
  assert_int_equal (make_link (fx->rootfs, "loop2", "loop1"), 0);
  expect_open_error (fx, "/loop1/x", ROOTFS_CREATE_DIR, ELOOP);
  /* Dangling links that keep pointing to new dangling links. */
  for (int i = 0; i < 45; i++)
    {
      cleanup_free char *name = xasprintf ("chain%d", i);
      cleanup_free char *target = xasprintf ("/chain%d/d", i + 1);
      assert_int_equal (make_link (fx->rootfs, name, target), 0);
    }
  expect_open_error (fx, "/chain0", ROOTFS_CREATE_DIR, ELOOP);
}

/* ---- the child in a mount namespace ------------------------------------- */

static int report_fd = -1;

static void __attribute__ ((noreturn, format (printf, 2, 3))) child_fail (int line, const char *fmt, ...)
{
  int saved = errno;
  va_list ap;

  dprintf (report_fd, "test_rootfs.c:%d: ", line);
  va_start (ap, fmt);
  vdprintf (report_fd, fmt, ap);
  va_end (ap);
  dprintf (report_fd, " (errno: %s)\n", strerror (saved));
  _exit (1);
}

#define CHECK(cond)                                                                                          \
  do                                                                                                         \
    {                                                                                                        \
      if (!(cond))                                                                                           \
        child_fail (__LINE__, "%s", #cond);                                                                  \
    }                                                                                                        \
  while (0)

/* EXPR may use `err_`, a struct husk_error **. */
#define CHECK_OK(expr)                                                                                       \
  do                                                                                                         \
    {                                                                                                        \
      struct husk_error *error_ = NULL, **err_ = &error_;                                                    \
      if ((expr) < 0)                                                                                        \
        child_fail (__LINE__, "%s: %s", #expr, error_ ? error_->msg : "no message");                         \
    }                                                                                                        \
  while (0)

typedef void (*child_body) (struct fixture *fx);

/* Runs BODY in a child with a private mount namespace; fails the test with
 * the child's message unless it exits 0.  Its mounts die with it. */
static void
run_in_mount_ns (struct fixture *fx, child_body body)
{
  char message[4096] = "";
  size_t used = 0;
  ssize_t n;
  int pipe_fds[2], status;
  pid_t pid;

  assert_int_equal (pipe (pipe_fds), 0);
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0)
    {
      close (pipe_fds[0]);
      report_fd = pipe_fds[1];
      CHECK (unshare (CLONE_NEWNS) == 0);
      CHECK (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
      body (fx);
      _exit (0);
    }
  close (pipe_fds[1]);
  while (used < sizeof message - 1 && (n = read (pipe_fds[0], message + used, sizeof message - 1 - used)) > 0)
    used += (size_t) n;
  message[used] = '\0';
  close (pipe_fds[0]);
  assert_int_equal (waitpid (pid, &status, 0), pid);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    fail_msg ("child failed (status 0x%x): %s", status, message);
}

static unsigned long
fs_type (const char *path)
{
  struct statfs sfs;
  return statfs (path, &sfs) == 0 ? (unsigned long) sfs.f_type : 0;
}

static unsigned long
mount_flags (const char *path)
{
  struct statvfs sv;
  return statvfs (path, &sv) == 0 ? sv.f_flag : ~0UL;
}

static bool
has_text (const char *path, const char *text)
{
  cleanup_free char *content = NULL;
  return husk_read_file (path, &content, NULL, NULL) == 0 && strcmp (content, text) == 0;
}

static bool
is_node (const char *path, mode_t type, unsigned major, unsigned minor, mode_t mode)
{
  struct stat st;
  return lstat (path, &st) == 0 && (st.st_mode & S_IFMT) == type && major (st.st_rdev) == major
         && minor (st.st_rdev) == minor && (mode == 0 || (st.st_mode & 07777) == mode);
}

static bool
link_is (const char *path, const char *target)
{
  char buf[PATH_MAX];
  ssize_t len = readlink (path, buf, sizeof buf - 1);
  return len >= 0 && (buf[len] = '\0', strcmp (buf, target) == 0);
}

static bool
write_fails (const char *path, int errnum)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0)
    close (fd);
  return fd < 0 && errno == errnum;
}

/* The optional fields of the last /proc/self/mountinfo line whose mount
 * point is MOUNT_POINT ("" when it has none), or NULL when none matches. */
static char *
mountinfo_optional (const char *mount_point)
{
  cleanup_free char *text = NULL;
  char *found = NULL, *save = NULL;

  if (husk_read_file ("/proc/self/mountinfo", &text, NULL, NULL) < 0)
    return NULL;
  for (char *line = strtok_r (text, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      char point[PATH_MAX], optional[512] = "";
      if (sscanf (line, "%*s %*s %*s %*s %4095s %*s %511[^-]", point, optional) >= 1
          && strcmp (point, mount_point) == 0)
        {
          free (found);
          found = xstrdup (optional);
        }
    }
  return found;
}

static int
mountinfo_count (const char *mount_point)
{
  cleanup_free char *text = NULL;
  char *save = NULL;
  int count = 0;

  if (husk_read_file ("/proc/self/mountinfo", &text, NULL, NULL) < 0)
    return -1;
  for (char *line = strtok_r (text, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      char point[PATH_MAX];
      if (sscanf (line, "%*s %*s %*s %*s %4095s", point) == 1 && strcmp (point, mount_point) == 0)
        count++;
    }
  return count;
}

/* Whether any mount point (not a bind's source root) contains TEXT. */
static bool
mount_point_mentions (const char *text)
{
  cleanup_free char *content = NULL;
  char *save = NULL;

  if (husk_read_file ("/proc/self/mountinfo", &content, NULL, NULL) < 0)
    return true;
  for (char *line = strtok_r (content, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
    {
      char point[PATH_MAX];
      if (sscanf (line, "%*s %*s %*s %*s %4095s", point) == 1 && strstr (point, text) != NULL)
        return true;
    }
  return false;
}

static bool
can_write (const char *path)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0)
    close (fd);
  return fd >= 0;
}

static bool
same_device (const char *a, const char *b)
{
  struct stat sa, sb;
  return stat (a, &sa) == 0 && stat (b, &sb) == 0 && sa.st_dev == sb.st_dev;
}

static bool
has_shared_peer (const char *mount_point)
{
  const char *optional = mountinfo_optional (mount_point);
  return optional != NULL && strstr (optional, "shared:") != NULL;
}

/* A path in the child (leaked: the child exits soon). */
static const char *
P (const char *dir, const char *fmt, ...)
{
  cleanup_free char *rel = NULL;
  va_list ap;

  va_start (ap, fmt);
  if (vasprintf (&rel, fmt, ap) < 0)
    abort ();
  va_end (ap);
  return under (dir, rel);
}

#define MNT_FS(dst, src, fstype, mount_flags, fs_data)                                                       \
  (struct spec_mount)                                                                                        \
  {                                                                                                          \
    .destination = (dst), .source = (src), .type = (fstype), .flags = (mount_flags), .data = (fs_data)       \
  }
#define MNT_BIND(dst, src, mount_flags)                                                                      \
  (struct spec_mount)                                                                                        \
  {                                                                                                          \
    .destination = (dst), .source = (src), .type = "bind", .bind = true, .flags = MS_BIND | (mount_flags)    \
  }
#define KERNEL_FS_FLAGS (MS_NOSUID | MS_NOEXEC | MS_NODEV)

static struct spec
base_spec (struct fixture *fx)
{
  struct spec spec = { .root_path = fx->rootfs, .bundle_dir = fx->base };

  /* Each scenario runs in a mount namespace of its own (see run_in_child). */
  spec.namespaces[SPEC_NS_MOUNT].present = true;
  return spec;
}

/* ---- scenario: the full prepare + pivot ---------------------------------- */

static void
full_spec (struct fixture *fx, struct spec *spec)
{
  static struct spec_mount mounts[12];
  static struct spec_device devices[3];
  static char *masked[]
      = { "/proc/kcore", "/proc/keys", "/masked-dir", "/does-not-exist", "/proc/nothing-here", NULL };
  static char *readonly[] = { "/proc/sys", "/rw-dir", NULL };
  size_t n = 0;

  mounts[n++] = MNT_FS ("/proc", "proc", "proc", KERNEL_FS_FLAGS, NULL);
  mounts[n++] = MNT_FS ("/dev", "tmpfs", "tmpfs", MS_NOSUID | MS_STRICTATIME, "mode=755,size=65536k");
  mounts[n++] = MNT_FS ("/dev/mqueue", "mqueue", "mqueue", KERNEL_FS_FLAGS, NULL);
  mounts[n++] = MNT_FS ("/sys", "sysfs", "sysfs", KERNEL_FS_FLAGS | MS_RDONLY, NULL);
  mounts[n++] = MNT_FS ("/sys/fs/cgroup", "cgroup", "cgroup", KERNEL_FS_FLAGS | MS_RDONLY, NULL);
  mounts[n++] = MNT_BIND ("/etc/hostfile", (char *) P (fx->base, "hostfile"), 0);
  mounts[n++] = MNT_BIND ("/etc/linked", "hostlink", 0); /* relative to the bundle, a symlink */
  mounts[n++] = MNT_BIND ("/data/ro", (char *) P (fx->base, "hostdir"), MS_REC | MS_RDONLY);
  mounts[n] = MNT_BIND ("/data/rro", (char *) P (fx->base, "hostdir2"), MS_REC);
  mounts[n++].rec_attr_set = MOUNT_ATTR_RDONLY;
  mounts[n] = MNT_BIND ("/data/shared", (char *) P (fx->base, "hostdir"), 0);
  mounts[n++].propagation = MS_SHARED;
  mounts[n++] = MNT_FS ("/evil/x", "tmpfs", "tmpfs", 0, NULL);
  devices[0] = (struct spec_device){
    .path = "/dev/full", .type = 'c', .major = 1, .minor = 7, .has_mode = true, .file_mode = 0600
  };
  devices[1] = (struct spec_device){ .path = "/dev/net/tun",
                                     .type = 'c',
                                     .major = 10,
                                     .minor = 200,
                                     .has_mode = true,
                                     .file_mode = 0620,
                                     .has_uid = true,
                                     .uid = 1,
                                     .has_gid = true,
                                     .gid = 2 };
  devices[2] = (struct spec_device){ .path = "/dev/fifo0", .type = 'p', .has_mode = true, .file_mode = 0644 };
  *spec = base_spec (fx);
  spec->mounts = mounts;
  spec->n_mounts = n;
  spec->devices = devices;
  spec->n_devices = 3;
  spec->masked_paths = masked;
  spec->readonly_paths = readonly;
  spec->root_readonly = true;
  spec->has_process = true;
  spec->process.cwd = "/work/dir";
}

static void
check_full_dev (struct fixture *fx)
{
  const char *r = fx->rootfs;
  struct stat st;

  CHECK (fs_type (P (r, "dev")) == TMPFS_MAGIC_);
  CHECK (is_node (P (r, "dev/null"), S_IFCHR, 1, 3, 0666));
  CHECK (is_node (P (r, "dev/urandom"), S_IFCHR, 1, 9, 0666));
  CHECK (is_node (P (r, "dev/tty"), S_IFCHR, 5, 0, 0666));
  CHECK (is_node (P (r, "dev/full"), S_IFCHR, 1, 7, 0600));
  CHECK (is_node (P (r, "dev/net/tun"), S_IFCHR, 10, 200, 0620));
  CHECK (lstat (P (r, "dev/net/tun"), &st) == 0 && st.st_uid == 1 && st.st_gid == 2);
  CHECK (is_node (P (r, "dev/fifo0"), S_IFIFO, 0, 0, 0644));
  CHECK (link_is (P (r, "dev/ptmx"), "pts/ptmx"));
  CHECK (fs_type (P (r, "dev/pts")) == DEVPTS_MAGIC_);
  CHECK (is_node (P (r, "dev/pts/ptmx"), S_IFCHR, 5, 2, 0));
  CHECK (link_is (P (r, "dev/fd"), "/proc/self/fd"));
  CHECK (link_is (P (r, "dev/stdin"), "/proc/self/fd/0"));
  CHECK (link_is (P (r, "dev/stderr"), "/proc/self/fd/2"));
  /* Only where the kernel has /proc/kcore (this one may not). */
  if (lstat (P (r, "proc/kcore"), &st) == 0)
    CHECK (link_is (P (r, "dev/core"), "/proc/kcore"));
  else
    CHECK (lstat (P (r, "dev/core"), &st) < 0 && errno == ENOENT);
  CHECK (lstat (P (r, "dev/shm"), &st) == 0 && S_ISDIR (st.st_mode) && (st.st_mode & 07777) == 01777);
  CHECK (fs_type (P (r, "dev/mqueue")) == MQUEUE_MAGIC_);
}

static void
check_full_mounts (struct fixture *fx)
{
  const char *r = fx->rootfs;
  struct stat st;

  CHECK (fs_type (P (r, "proc")) == PROC_MAGIC_);
  CHECK (fs_type (P (r, "sys")) == SYSFS_MAGIC_ && (mount_flags (P (r, "sys")) & ST_RDONLY));
  if (cgroup_v1_hierarchies ()[0])
    {
      /* Controllers on v1: runc's layout, a read-only tmpfs holding each
       * hierarchy under its host name (no cgroup path: the host's root),
       * and links for co-mounted controllers. */
      const char *h = strrchr (cgroup_v1_hierarchies ()[0], '/') + 1;
      cleanup_free char *in = xasprintf ("sys/fs/cgroup/%s", h);
      CHECK (fs_type (P (r, "sys/fs/cgroup")) == TMPFS_MAGIC_);
      CHECK (fs_type (P (r, in)) == CGROUP_MAGIC_ && (mount_flags (P (r, in)) & ST_RDONLY));
      CHECK (write_fails (P (r, "sys/fs/cgroup/new"), EROFS));
    }
  else
    CHECK (fs_type (P (r, "sys/fs/cgroup")) == CGROUP2_MAGIC_);
  CHECK (mount_flags (P (r, "sys/fs/cgroup")) & ST_RDONLY);
  CHECK (has_text (P (r, "etc/hostfile"), HOST_TEXT));
  CHECK (lstat (P (r, "work/dir"), &st) == 0 && S_ISDIR (st.st_mode)); /* process.cwd */
  CHECK (lstat (P (r, "etc/linked"), &st) == 0 && S_ISREG (st.st_mode)
         && has_text (P (r, "etc/linked"), HOST_TEXT));
  CHECK (has_text (P (r, "data/ro/inside"), "inside\n"));
  CHECK ((mount_flags (P (r, "data/ro")) & ST_RDONLY) && write_fails (P (r, "data/ro/new"), EROFS));
  CHECK (!(mount_flags (P (fx->base, "hostdir")) & ST_RDONLY));
  CHECK (mount_flags (P (r, "data/rro")) & ST_RDONLY);
  CHECK (fs_type (P (r, "data/rro/sub")) == TMPFS_MAGIC_ && write_fails (P (r, "data/rro/sub/new"), EROFS));
  CHECK (can_write (P (fx->base, "hostdir2/sub/new"))); /* the source stays writable */
  CHECK (has_shared_peer (P (r, "data/shared")));
  /* The image's `evil -> /tmp/marker` link: the tmpfs went inside. */
  CHECK (fs_type (P (r, "%s/x", fx->marker + 1)) == TMPFS_MAGIC_);
  CHECK (mountinfo_optional (P (fx->marker, "x")) == NULL);
  CHECK (same_device (fx->marker, P (fx->marker, "x")));
}

static void
check_no_magic_links (struct fixture *fx)
{
  /* fx->root_fd predates the rootfs self-bind, so it sees no /proc. */
  int root_fd = open (fx->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct husk_error *err = NULL;

  CHECK (root_fd >= 0 && rootfs_open_in_root (root_fd, "/proc/self", ROOTFS_CREATE_NONE, &err) >= 0);
  CHECK (rootfs_open_in_root (root_fd, "/proc/self/root/etc", ROOTFS_CREATE_NONE, &err) < 0);
  CHECK (err->errnum == ELOOP);
  CHECK (rootfs_open_in_root (root_fd, "/proc/self/fd/0", ROOTFS_CREATE_FILE, &err) < 0);
  CHECK (err->errnum == ELOOP);
}

static void
check_full_finalized (struct fixture *fx, const struct stat *rootfs_marker)
{
  char cwd[PATH_MAX];
  struct stat st;
  char byte;
  int fd;

  CHECK (getcwd (cwd, sizeof cwd) && strcmp (cwd, "/") == 0);
  CHECK (stat ("/I-am-rootfs", &st) == 0 && st.st_ino == rootfs_marker->st_ino);
  CHECK (stat (fx->base, &st) < 0 && errno == ENOENT);
  CHECK (!mount_point_mentions ("husk-rootfs-test"));
  CHECK (mountinfo_optional ("/") != NULL && !has_shared_peer ("/"));
  CHECK ((fd = open ("/proc/keys", O_RDONLY)) >= 0 && read (fd, &byte, 1) == 0);
  CHECK (stat ("/masked-dir/secret", &st) < 0 && errno == ENOENT);
  CHECK (write_fails ("/masked-dir/new", EROFS));
  CHECK (stat ("/does-not-exist", &st) < 0);
  CHECK (write_fails ("/rw-dir/file", EROFS) && has_text ("/rw-dir/file", "data\n"));
  CHECK (write_fails ("/proc/sys/kernel/hostname", EROFS));
  CHECK (mkdir ("/newdir", 0755) < 0 && errno == EROFS);
  CHECK (can_write ("/dev/writable"));
  CHECK ((fd = open ("/dev/ptmx", O_RDWR | O_NOCTTY)) >= 0);
  CHECK (has_text ("/etc/hostfile", HOST_TEXT));
}

static void
child_full (struct fixture *fx)
{
  struct spec spec;
  struct stat rootfs_marker;

  full_spec (fx, &spec);
  CHECK (mount ("tmpfs", P (fx->base, "hostdir2/sub"), "tmpfs", 0, NULL) == 0);
  CHECK (stat (P (fx->rootfs, "I-am-rootfs"), &rootfs_marker) == 0);
  CHECK_OK (rootfs_prepare (&spec, NULL, err_));
  check_full_dev (fx);
  check_full_mounts (fx);
  check_no_magic_links (fx);
  CHECK_OK (rootfs_finalize (&spec, false, err_));
  check_full_finalized (fx, &rootfs_marker);
}

static void
test_prepare_and_pivot (void **state)
{
  run_in_mount_ns (*state, child_full);
}

/* ---- scenario: rootfsPropagation rshared, /dev/pts from the config ------- */

static void
child_shared_propagation (struct fixture *fx)
{
  static struct spec_mount mounts[3];
  struct spec spec = base_spec (fx);

  mounts[0] = MNT_FS ("/proc", "proc", "proc", KERNEL_FS_FLAGS, NULL);
  mounts[1] = MNT_FS ("/dev", "tmpfs", "tmpfs", MS_NOSUID, "mode=755");
  mounts[2]
      = MNT_FS ("/dev/pts", "devpts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620");
  spec.mounts = mounts;
  spec.n_mounts = 3;
  spec.rootfs_propagation = MS_REC | MS_SHARED;
  CHECK_OK (rootfs_prepare (&spec, NULL, err_));
  CHECK_OK (rootfs_finalize (&spec, false, err_));
  CHECK (has_text ("/I-am-rootfs", "rootfs\n"));
  CHECK (!mount_point_mentions ("husk-rootfs-test"));
  CHECK (has_shared_peer ("/"));
  CHECK (!has_shared_peer ("/dev"));         /* mounts below keep their own propagation */
  CHECK (mountinfo_count ("/dev/pts") == 1); /* the config's, none added */
  CHECK (link_is ("/dev/ptmx", "pts/ptmx"));
}

static void
test_shared_propagation (void **state)
{
  run_in_mount_ns (*state, child_shared_propagation);
}

/* ---- scenario: --no-pivot, the image's own /dev, no /proc --------------- */

static void
child_no_pivot (struct fixture *fx)
{
  static char *masked[] = { "/masked-dir", NULL };
  struct spec spec = base_spec (fx);
  char cwd[PATH_MAX];
  struct stat st;

  spec.masked_paths = masked;
  CHECK_OK (rootfs_prepare (&spec, NULL, err_));
  CHECK (is_node (P (fx->rootfs, "dev/null"), S_IFCHR, 1, 3, 0666));
  CHECK_OK (rootfs_finalize (&spec, true, err_));
  CHECK (getcwd (cwd, sizeof cwd) && strcmp (cwd, "/") == 0);
  CHECK (has_text ("/I-am-rootfs", "rootfs\n"));
  CHECK (stat (fx->base, &st) < 0 && errno == ENOENT);
  CHECK (is_node ("/dev/zero", S_IFCHR, 1, 5, 0666));
  CHECK (lstat ("/dev/core", &st) < 0 && errno == ENOENT); /* no /proc mounted */
  CHECK (link_is ("/dev/fd", "/proc/self/fd"));
  CHECK (fs_type ("/dev/pts") == DEVPTS_MAGIC_);
  CHECK (stat ("/masked-dir/secret", &st) < 0 && errno == ENOENT);
}

static void
test_no_pivot (void **state)
{
  run_in_mount_ns (*state, child_no_pivot);
}

/* ---- scenario: a user namespace (mknod EPERM, locked flags, sysfs) ------ */

static void
enter_user_namespace (void)
{
  CHECK (unshare (CLONE_NEWUSER | CLONE_NEWNS) == 0);
  CHECK (husk_write_file ("/proc/self/setgroups", "deny", 4, NULL) == 0);
  CHECK (husk_write_file ("/proc/self/uid_map", "0 0 1", 5, NULL) == 0);
  CHECK (husk_write_file ("/proc/self/gid_map", "0 0 1", 5, NULL) == 0);
}

static void
user_ns_spec (struct fixture *fx, struct spec *spec)
{
  static struct spec_mount mounts[5];
  static struct spec_device devices[2];
  static char *masked[] = { "/masked-dir", "/etc/hostfile", "/proc/kcore", NULL };
  static char *readonly[] = { "/rw-dir", NULL };

  mounts[0] = MNT_FS ("/dev", "tmpfs", "tmpfs", MS_NOSUID, "mode=755");
  mounts[1] = MNT_FS ("/sys", "sysfs", "sysfs", KERNEL_FS_FLAGS | MS_RDONLY, NULL);
  mounts[2] = MNT_FS ("/sys/fs/cgroup", "cgroup2", "cgroup2", KERNEL_FS_FLAGS | MS_RDONLY, NULL);
  mounts[3] = MNT_BIND ("/data/locked", (char *) P (fx->base, "locked"), MS_RDONLY);
  mounts[4] = MNT_BIND ("/etc/hostfile", (char *) P (fx->base, "hostfile"), 0);
  devices[0] = (struct spec_device){
    .path = "/dev/full", .type = 'c', .major = 1, .minor = 7, .has_mode = true, .file_mode = 0600
  };
  devices[1] = (struct spec_device){ .path = "/dev/fifo0", .type = 'p', .has_mode = true, .file_mode = 0644 };
  *spec = base_spec (fx);
  spec->mounts = mounts;
  spec->n_mounts = 5;
  spec->devices = devices;
  spec->n_devices = 2;
  spec->masked_paths = masked;
  spec->readonly_paths = readonly;
}

static void
child_user_namespace (struct fixture *fx)
{
  const unsigned long locked_flags = ST_RDONLY | ST_NOSUID | ST_NODEV | ST_NOEXEC;
  const char *r = fx->rootfs;
  struct spec spec;

  /* Flags set here, in the more privileged namespace, are locked below. */
  CHECK (mount ("tmpfs", P (fx->base, "locked"), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0);
  enter_user_namespace ();
  user_ns_spec (fx, &spec);
  CHECK_OK (rootfs_prepare (&spec, NULL, err_));
  CHECK (is_node (P (r, "dev/null"), S_IFCHR, 1, 3, 0)); /* the host's node, bound */
  CHECK (is_node (P (r, "dev/full"), S_IFCHR, 1, 7, 0));
  CHECK (is_node (P (r, "dev/fifo0"), S_IFIFO, 0, 0, 0644));
  CHECK (fs_type (P (r, "dev/pts")) == DEVPTS_MAGIC_); /* without gid=5 */
  CHECK (fs_type (P (r, "sys")) == SYSFS_MAGIC_ && (mount_flags (P (r, "sys")) & ST_RDONLY));
  CHECK (fs_type (P (r, "sys/fs/cgroup")) == CGROUP2_MAGIC_); /* cgroup2: the unified one */
  CHECK (mount_flags (P (r, "sys/fs/cgroup")) & ST_RDONLY);
  CHECK ((mount_flags (P (r, "data/locked")) & locked_flags) == locked_flags);
  CHECK_OK (rootfs_finalize (&spec, false, err_));
  CHECK (has_text ("/I-am-rootfs", "rootfs\n"));
  CHECK (write_fails ("/masked-dir/new", EROFS));
  CHECK (has_text ("/etc/hostfile", ""));
  CHECK (write_fails ("/rw-dir/file", EROFS));
  CHECK (can_write ("/dev/null"));
}

static void
test_user_namespace (void **state)
{
  run_in_mount_ns (*state, child_user_namespace);
}

/* ---- scenario: a bind-mounted /dev is left alone ------------------------ */

static void
child_dev_bind (struct fixture *fx)
{
  static struct spec_mount mounts[1];
  struct spec spec = base_spec (fx);
  struct stat st;

  mounts[0] = MNT_BIND ("/dev", (char *) P (fx->base, "fakedev"), MS_REC);
  spec.mounts = mounts;
  spec.n_mounts = 1;
  CHECK_OK (rootfs_prepare (&spec, NULL, err_));
  CHECK (has_text (P (fx->rootfs, "dev/ptmx"), "not a node\n"));
  CHECK (lstat (P (fx->base, "fakedev/null"), &st) < 0 && errno == ENOENT);
  CHECK (lstat (P (fx->base, "fakedev/fd"), &st) < 0 && errno == ENOENT);
}

static void
test_dev_bind_left_alone (void **state)
{
  struct fixture *fx = *state;

  /* A stand-in for the host's /dev, so a regression cannot touch the real one. */
  assert_int_equal (make_file (fx->base, "fakedev/ptmx", "not a node\n"), 0);
  run_in_mount_ns (fx, child_dev_bind);
}

/* ---- scenario: error messages name the config's mount ------------------- */

static void
expect_prepare_error (struct fixture *fx, struct spec_mount mnt, const char *expected)
{
  struct spec spec = base_spec (fx);
  struct husk_error *err = NULL;

  spec.mounts = &mnt;
  spec.n_mounts = 1;
  CHECK (rootfs_prepare (&spec, NULL, &err) < 0 && err != NULL);
  if (strcmp (err->msg, expected) != 0)
    child_fail (__LINE__, "got `%s`, want `%s`", err->msg, expected);
}

static void
child_errors (struct fixture *fx)
{
  const char *missing = P (fx->base, "does-not-exist");

  expect_prepare_error (fx, MNT_BIND ("/x", (char *) missing, 0),
                        xasprintf ("mount `%s` on `/x` (type bind): No such file or directory", missing));
  expect_prepare_error (fx, MNT_FS ("/t", "tmpfs", "tmpfs", 0, "bogus=1"),
                        "mount `tmpfs` on `/t` (type tmpfs): Invalid argument");
  expect_prepare_error (fx, MNT_FS ("/u", "none", "nosuchfs", 0, NULL),
                        "mount `none` on `/u` (type nosuchfs): No such device");
  expect_prepare_error (fx, MNT_FS ("/I-am-rootfs/x", "tmpfs", "tmpfs", 0, NULL),
                        "mount `tmpfs` on `/I-am-rootfs/x` (type tmpfs): resolve `/I-am-rootfs/x` inside the "
                        "rootfs: Not a directory");
}

static void
test_error_messages (void **state)
{
  run_in_mount_ns (*state, child_errors);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown (test_open_existing, setup, teardown),
    cmocka_unit_test_setup_teardown (test_absolute_symlink_stays_inside, setup, teardown),
    cmocka_unit_test_setup_teardown (test_dangling_symlink_created_inside, setup, teardown),
    cmocka_unit_test_setup_teardown (test_relative_symlink_and_dotdot, setup, teardown),
    cmocka_unit_test_setup_teardown (test_create_parents, setup, teardown),
    cmocka_unit_test_setup_teardown (test_open_errors, setup, teardown),
    cmocka_unit_test_setup_teardown (test_prepare_and_pivot, setup, teardown),
    cmocka_unit_test_setup_teardown (test_shared_propagation, setup, teardown),
    cmocka_unit_test_setup_teardown (test_no_pivot, setup, teardown),
    cmocka_unit_test_setup_teardown (test_user_namespace, setup, teardown),
    cmocka_unit_test_setup_teardown (test_dev_bind_left_alone, setup, teardown),
    cmocka_unit_test_setup_teardown (test_error_messages, setup, teardown),
  };

  umask (022);
  return cmocka_run_group_tests (tests, NULL, NULL);
}
