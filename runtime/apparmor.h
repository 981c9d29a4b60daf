/* AppArmor for process.apparmorProfile, as runc applies it: the profile
 * is named for the next execve ("exec NAME" written to the process's
 * attr file), so the container's program starts confined and nothing of
 * husk's own code runs under the profile.  Shared by create, exec and
 * huskd's pause process. */
#ifndef HUSK_RUNTIME_APPARMOR_H
#define HUSK_RUNTIME_APPARMOR_H

#include <stdbool.h>

#include "husk/error.h"

/* The file the kernel says "Y" in when AppArmor is the (or a) running LSM. */
#define APPARMOR_ENABLED_FILE "/sys/module/apparmor/parameters/enabled"

/* True when ENABLED_FILE (APPARMOR_ENABLED_FILE, or a test's) starts with
 * "Y"; false when it is missing or says anything else. */
bool apparmor_enabled_at (const char *enabled_file);
bool apparmor_enabled (void);

/* Checks *PROFILE (the spec's process.apparmorProfile; NULL or "" is
 * none) before anything is made: a name the kernel cannot take (control
 * characters, too long) is refused; so is any profile but "unconfined"
 * when AppArmor is not enabled on this host, naming the profile.  A
 * profile that changes nothing ("", or "unconfined" without AppArmor) is
 * freed and set to NULL, so the process writes no attr file.  WHAT names
 * the field in the message. */
int apparmor_check_profile (char **profile, const char *what, struct husk_error **err);

/* The profile switch: asks the kernel to move the calling process into
 * PROFILE at its next execve (/proc/self/attr/apparmor/exec, or
 * /proc/self/attr/exec on kernels before 5.8).  The file must be on
 * procfs: a regular file of an image at /proc would take the write and
 * leave the process unconfined.  NULL or "" does nothing.  A profile the
 * kernel does not know fails here, naming it. */
int apparmor_exec_profile (const char *profile, struct husk_error **err);
/* The same without allocating (for a child forked from threads): 0 or
 * -errno: -ENOENT no such profile, -ENOSYS no attr file, -EXDEV the attr
 * file is not procfs's. */
int apparmor_exec_profile_raw (const char *profile);

#endif
