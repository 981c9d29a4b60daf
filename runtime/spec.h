/* The OCI runtime configuration (config.json, runtime-spec 1.0-1.2) as husk
 * uses it: parsed and validated once, before anything is created, into plain
 * C data.  Mount options are already turned into flags here, so the code
 * that sets a container up only executes decisions. */
#ifndef HUSK_RUNTIME_SPEC_H
#define HUSK_RUNTIME_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "husk/error.h"

enum spec_ns_type
{
  SPEC_NS_PID,
  SPEC_NS_NETWORK,
  SPEC_NS_MOUNT,
  SPEC_NS_IPC,
  SPEC_NS_UTS,
  SPEC_NS_USER,
  SPEC_NS_CGROUP,
  SPEC_NS_TIME,
  SPEC_NS_COUNT
};

struct spec_namespace
{
  bool present; /* listed in linux.namespaces */
  char *path;   /* join this one; NULL = create a new one */
};

struct spec_id_mapping
{
  uint32_t container_id, host_id, size;
};

struct spec_mount
{
  char *destination; /* absolute, cleaned (no "..", no "//") */
  char *source;      /* may be NULL (tmpfs, proc...) */
  char *type;        /* may be NULL: then bind if options say so */
  /* From options: */
  unsigned long flags;       /* MS_* set by options (MS_BIND, MS_REC, MS_RDONLY, ...) */
  unsigned long propagation; /* MS_PRIVATE/MS_SLAVE/MS_SHARED/MS_UNBINDABLE (| MS_REC), or 0 */
  bool bind;                 /* bind or rbind */
  /* Recursive options ("rro", "rnoexec", "rnoatime", ...): MOUNT_ATTR_* to
   * set and clear with mount_setattr(AT_RECURSIVE) once the mount exists. */
  uint64_t rec_attr_set, rec_attr_clr;
  char *data; /* unrecognised options joined with ',' (fs data), or NULL */
  /* uidMappings/gidMappings: an idmapped bind mount (both or neither). */
  struct spec_id_mapping *uid_mappings, *gid_mappings;
  size_t n_uid_mappings, n_gid_mappings;
  /* Not from config.json: the detached clone of the source create made
   * in the runtime's namespaces (idmapped when the mount has mappings),
   * which the init attaches; valid when PREPARED. */
  bool prepared;
  int prepared_fd;
};

struct spec_device
{
  char *path; /* absolute path in the container */
  char type;  /* 'c', 'b', 'u' or 'p' */
  int64_t major, minor;
  bool has_mode, has_uid, has_gid;
  mode_t file_mode; /* permission bits only */
  uid_t uid;
  gid_t gid;
};

struct spec_rlimit
{
  int resource; /* RLIMIT_* */
  uint64_t soft, hard;
};

/* A capability set is a bitmask of CAP_* numbers (0..63). */
struct spec_capabilities
{
  uint64_t bounding, effective, inheritable, permitted, ambient;
};

struct spec_user
{
  uid_t uid;
  gid_t gid;
  bool has_umask;
  mode_t umask;
  gid_t *additional_gids;
  size_t n_additional_gids;
};

struct spec_process
{
  bool terminal;
  unsigned console_height, console_width;
  char **args; /* NULL-terminated, at least one */
  char **env;  /* NULL-terminated, may be empty */
  char *cwd;   /* absolute */
  struct spec_user user;
  bool has_capabilities;
  struct spec_capabilities caps;
  struct spec_rlimit *rlimits;
  size_t n_rlimits;
  bool no_new_privileges;
  bool has_oom_score_adj;
  int oom_score_adj;
  char *apparmor_profile; /* applied at execve (runtime/apparmor.c) */
  char *selinux_label;
};

struct spec_seccomp_arg
{
  unsigned index;
  uint64_t value, value_two;
  int op; /* enum scmp_compare */
};

struct spec_seccomp_rule
{
  char **names;    /* NULL-terminated */
  uint32_t action; /* SCMP_ACT_* value, errno folded in for ERRNO/TRACE */
  struct spec_seccomp_arg *args;
  size_t n_args;
};

struct spec_seccomp
{
  uint32_t default_action; /* SCMP_ACT_* with errno folded in */
  uint32_t *archs;         /* SCMP_ARCH_* */
  size_t n_archs;
  unsigned flags;      /* SECCOMP_FILTER_FLAG_* */
  char *listener_path; /* not supported: rejected if set */
  struct spec_seccomp_rule *rules;
  size_t n_rules;
};

struct spec_hook
{
  char *path;  /* absolute */
  char **args; /* NULL-terminated; may be NULL (then argv = {path}) */
  char **env;  /* NULL-terminated; may be NULL */
  int timeout; /* seconds; 0 = none */
};

enum spec_hook_kind
{
  SPEC_HOOK_PRESTART,
  SPEC_HOOK_CREATE_RUNTIME,
  SPEC_HOOK_CREATE_CONTAINER,
  SPEC_HOOK_START_CONTAINER,
  SPEC_HOOK_POSTSTART,
  SPEC_HOOK_POSTSTOP,
  SPEC_HOOK_KIND_COUNT
};

struct spec_hooks
{
  struct spec_hook *list[SPEC_HOOK_KIND_COUNT];
  size_t count[SPEC_HOOK_KIND_COUNT];
};

struct spec_sysctl
{
  char *key, *value;
};

struct spec_resources
{
  /* Until the cgroup manager lands, the parser only records whether any
   * limit was asked for; the runtime then refuses it clearly. */
  bool has_limits;
  char *first_limit; /* name of the first limit seen, e.g. "memory.limit" */
  /* linux.resources.devices is kept raw for the device controller. */
  void *raw; /* json_t *, borrowed from spec->json */
};

struct spec
{
  char *oci_version;
  char *bundle_dir; /* absolute */
  char *root_path;  /* absolute (resolved against the bundle) */
  bool root_readonly;
  char *hostname, *domainname;
  struct spec_process process;
  bool has_process;
  struct spec_mount *mounts;
  size_t n_mounts;
  struct spec_hooks hooks;
  /* annotations as a NULL-terminated flat list: k0, v0, k1, v1, ... */
  char **annotations;

  /* linux */
  struct spec_namespace namespaces[SPEC_NS_COUNT];
  struct spec_id_mapping *uid_mappings, *gid_mappings;
  size_t n_uid_mappings, n_gid_mappings;
  struct spec_device *devices;
  size_t n_devices;
  char *cgroups_path; /* NULL = default */
  struct spec_resources resources;
  unsigned long rootfs_propagation; /* MS_* or 0 = default (MS_REC|MS_PRIVATE) */
  char **masked_paths;
  char **readonly_paths;
  struct spec_sysctl *sysctls;
  size_t n_sysctls;
  bool has_seccomp;
  struct spec_seccomp seccomp;
  char *mount_label;
  /* linux.timeOffsets: boottime/monotonic seconds and nanoseconds */
  bool has_time_offsets;
  int64_t time_offset_secs[2];
  uint32_t time_offset_nanosecs[2];

  void *json; /* json_t * of the whole document, owned */
};

/* Parses and validates BUNDLE_DIR/config.json.  Errors name the file, the
 * field (e.g. "mounts[2].destination") and, for bad JSON, line and column. */
int spec_load (const char *bundle_dir, struct spec **out, struct husk_error **err);

/* The same from a string (FILE_NAME is used in messages only); tests use it.
 * BUNDLE_DIR resolves a relative root.path. */
int spec_parse (const char *text, size_t len, const char *file_name, const char *bundle_dir,
                struct spec **out, struct husk_error **err);

/* Parses a process object alone, as `husk exec --process FILE` takes. */
int spec_parse_process (const char *text, size_t len, const char *file_name, struct spec_process *out,
                        struct husk_error **err);

void spec_free (struct spec *spec);
void spec_process_clear (struct spec_process *process);

/* Turns one mount's option list into flags; exposed for unit tests and for
 * `husk exec`.  Returns -1 with an error naming the option on a bad one. */
int spec_mount_parse_options (struct spec_mount *mount, char *const *options, const char *field,
                              struct husk_error **err);

/* Capability name ("CAP_SYS_ADMIN") to number, -1 if unknown. */
int spec_capability_from_name (const char *name);
const char *spec_capability_name (int cap);
/* Highest capability the running kernel knows (from /proc/sys/kernel/cap_last_cap). */
int spec_cap_last_cap (void);

/* Name of a hook kind as in config.json ("prestart", "createRuntime", ...). */
const char *spec_hook_kind_name (enum spec_hook_kind kind);

/* Name of a namespace type as in config.json ("pid", "network", ...). */
const char *spec_ns_name (enum spec_ns_type type);

/* The default config.json `husk spec` writes (rootless = user namespace with
 * the caller's ids mapped). Returns a newly allocated JSON text. */
char *spec_default_json (bool rootless);

/* The runtime-spec features document `husk features` prints. */
char *spec_features_json (void);

#endif
