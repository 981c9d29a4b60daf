/* AppArmor: whether the host has it, and the switch to a profile at the
 * next execve.  No libapparmor: the kernel interface is one line written
 * to a proc file. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/apparmor.h"

/* The kernel takes at most a page per write to the attr file. */
#define PROFILE_NAME_MAX 4000

bool
apparmor_enabled_at (const char *enabled_file)
{
  char buf[4] = { 0 };
  cleanup_close int fd = open (enabled_file, O_RDONLY | O_CLOEXEC);

  if (fd < 0 || read (fd, buf, sizeof buf - 1) < 1)
    return false;
  return buf[0] == 'Y';
}

bool
apparmor_enabled (void)
{
  return apparmor_enabled_at (APPARMOR_ENABLED_FILE);
}

static int
check_name (const char *profile, const char *what, struct husk_error **err)
{
  size_t len = strlen (profile);

  if (len > PROFILE_NAME_MAX)
    return husk_error_kind (err, EINVAL, "%s: profile name of %zu bytes (at most %d)", what, len,
                            PROFILE_NAME_MAX);
  for (const char *c = profile; *c; c++)
    if ((unsigned char) *c < 0x20 || *c == 0x7f)
      return husk_error_kind (err, EINVAL, "%s: control character 0x%02x in the profile name", what,
                              (unsigned) (unsigned char) *c);
  return 0;
}

int
apparmor_check_profile (char **profile, const char *what, struct husk_error **err)
{
  if (*profile == NULL)
    return 0;
  if (**profile != '\0' && check_name (*profile, what, err) < 0)
    return -1;
  if (**profile != '\0' && apparmor_enabled ())
    return 0;
  /* Nothing to be unconfined from: a no-op, not an error. */
  if (**profile == '\0' || strcmp (*profile, "unconfined") == 0)
    {
      free (*profile);
      *profile = NULL;
      return 0;
    }
  return husk_error_kind (
      err, EOPNOTSUPP, "%s `%s`: AppArmor is not enabled on this host (" APPARMOR_ENABLED_FILE " is not Y)",
      what, *profile);
}

/* The attr file of the running kernel, checked to be procfs's; -errno
 * (-ENOSYS: neither file exists, -EXDEV: not procfs). */
static int
open_exec_attr (void)
{
  static const char *const paths[] = { "/proc/self/attr/apparmor/exec", "/proc/self/attr/exec" };
  struct statfs fs;
  int fd = -ENOENT;

  for (size_t i = 0; i < sizeof paths / sizeof paths[0] && fd == -ENOENT; i++)
    {
      fd = open (paths[i], O_WRONLY | O_CLOEXEC | O_NOCTTY);
      if (fd < 0)
        fd = -errno;
    }
  if (fd < 0)
    return fd == -ENOENT ? -ENOSYS : fd;
  if (fstatfs (fd, &fs) < 0 || fs.f_type != PROC_SUPER_MAGIC)
    {
      close (fd);
      return -EXDEV;
    }
  return fd;
}

int
apparmor_exec_profile_raw (const char *profile)
{
  char line[PROFILE_NAME_MAX + 8];
  size_t len = strlen (profile);
  ssize_t wrote;
  int fd;

  if (len > PROFILE_NAME_MAX)
    return -ENAMETOOLONG;
  memcpy (line, "exec ", 5);
  memcpy (line + 5, profile, len);
  fd = open_exec_attr ();
  if (fd < 0)
    return fd;
  wrote = write (fd, line, len + 5);
  if (wrote < 0)
    wrote = -errno;
  close (fd);
  if (wrote >= 0 && (size_t) wrote != len + 5)
    return -EIO;
  return wrote < 0 ? (int) wrote : 0;
}

int
apparmor_exec_profile (const char *profile, struct husk_error **err)
{
  int ret;

  if (profile == NULL || *profile == '\0')
    return 0;
  if (check_name (profile, "AppArmor profile", err) < 0)
    return -1;
  ret = apparmor_exec_profile_raw (profile);
  if (ret == -EXDEV)
    return husk_error_make (err, 0,
                            "apply AppArmor profile `%s`: /proc/self/attr/exec is not on procfs (is /proc "
                            "mounted?)",
                            profile);
  if (ret == -ENOSYS)
    return husk_error_make (
        err, 0, "apply AppArmor profile `%s`: no /proc/self/attr/exec (is /proc mounted?)", profile);
  if (ret == -ENOENT)
    return husk_error_make (err, 0, "apply AppArmor profile `%s`: no such profile is loaded", profile);
  if (ret < 0)
    return husk_error_make (err, -ret, "apply AppArmor profile `%s`", profile);
  return 0;
}
