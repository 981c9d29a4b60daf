/* Driving the `criu` binary (CRIU 3.x command line) for husk checkpoint
 * and restore.  The argument lists are built here as plain data from the
 * container's spec and the options, so tests can read them; running criu
 * and reading back the first error of its log is here too. */
#ifndef HUSK_RUNTIME_CRIU_H
#define HUSK_RUNTIME_CRIU_H

#include <stdbool.h>
#include <sys/types.h>

#include "husk/error.h"
#include "runtime/spec/spec.h"

/* The key under which a joined network namespace is external to the image
 * (runc uses the same one). */
#define CRIU_NETNS_KEY "extRootNetNS"
/* The stdio of the init at dump time (readlink of /proc/PID/fd/0..2), as
 * runc names it; restore gives pipes back through --inherit-fd. */
#define CRIU_DESCRIPTORS_FILE "descriptors.json"
#define CRIU_DUMP_LOG "dump.log"
#define CRIU_RESTORE_LOG "restore.log"

struct criu_options
{
  const char *image_path; /* absolute */
  const char *work_path;  /* absolute; NULL: the image dir */
  bool leave_running;
  bool tcp_established;
  bool file_locks;
  bool ext_unix_sk;
  bool shell_job;
  const char *manage_cgroups_mode; /* soft|full|strict|ignore; NULL: ignore (husk places the cgroup) */
};

/* Whether MODE is one criu's --manage-cgroups takes. */
bool criu_valid_cgroups_mode (const char *mode);

/* The criu binary: $HUSK_CRIU if set, else `criu` in PATH, /usr/sbin or
 * /sbin.  Newly allocated; a clear error naming what was tried if none. */
char *criu_find (struct husk_error **err);

/* argv (NULL-terminated, newly allocated) of `criu dump` for the tree of
 * PID.  NETNS_INO: the inode of a joined network namespace, 0 if the
 * container made its own. */
char **criu_dump_argv (const char *criu, const struct spec *spec, pid_t pid, const char *root,
                       unsigned long long netns_ino, const struct criu_options *opts);

/* argv of `criu restore` into ROOT (the rootfs bind-mounted for criu), the
 * restored init's pid going to PIDFILE.  NETNS_FD: an open fd of the
 * namespace to join, or -1.  STDIO_KEYS[i]: the dumped fd i's key
 * ("pipe:[123]") to hand criu's own fd i for, or NULL. */
char **criu_restore_argv (const char *criu, const struct spec *spec, const char *root, const char *pidfile,
                          int netns_fd, char *const stdio_keys[3], const struct criu_options *opts);

/* The first "Error (...)" line of a criu log without its timestamp, or
 * NULL if it has none (newly allocated): the cause, where the later ones
 * are its consequences ("Dumping FAILED."). */
char *criu_log_first_error (const char *log_text);

/* The fd keys worth inheriting on restore from descriptors.json's text:
 * pipes only (a path is reopened by criu itself).  KEYS[i] newly
 * allocated or NULL.  -1 with an error for a malformed file. */
int criu_parse_descriptors (const char *text, const char *file_name, char *keys[3], struct husk_error **err);

/* Runs ARGV; the child first enters CGROUP_PATH when not NULL.  Fails
 * with "criu ACTION failed (...): FIRST ERROR LINE (full log: LOG)". */
int criu_run (char **argv, const char *cgroup_path, const char *action, const char *log_path,
              struct husk_error **err);

/* In the container's init, after pivot_root: stdio that is the host's
 * /dev/null (a runtime's caller often gives that) is reopened as the
 * container's own, as runc does: criu cannot dump a file on a mount
 * outside the container. */
int criu_reopen_dev_null (struct husk_error **err);

#endif
