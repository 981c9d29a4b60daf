/* The container's cgroup and what is written into it: one interface over
 * cgroup v2 and v1, chosen per controller (hybrid hosts: the unified
 * hierarchy for what it holds, v1 for the rest).  Created in every
 * hierarchy before clone, given the limits of linux.resources and the
 * device rules, frozen, updated and removed.  A limit whose controller is
 * missing is a clear error naming the controller, never a silent no-op.
 *
 * A container cgroup is named by one path (state's cgroup_path): its
 * directory in the unified hierarchy, or on a host without one in its
 * first v1 hierarchy.  The part below the mount is its name, the same in
 * every hierarchy.  A path under no cgroup mount is a plain v2 directory. */
#ifndef HUSK_RUNTIME_CGROUP_H
#define HUSK_RUNTIME_CGROUP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "husk/error.h"
#include "runtime/spec/spec.h"

/* ------------------------------------------------------- cgroup_v1.c */

enum cgroup_version
{
  CGROUP_NONE,
  CGROUP_V1,
  CGROUP_V2,
};

/* Where CONTROLLER (v2 name: "io", "cpu", ...; v1-only ones by their own)
 * is on this host: v2 when the unified hierarchy's root lists it, else v1
 * when a v1 hierarchy holds it.  "devices" and "freezer" are v2 wherever a
 * unified hierarchy exists and no v1 one holds them. */
enum cgroup_version cgroup_controller_version (const char *controller);
/* The mount of the v1 hierarchy holding CONTROLLER, NULL if none. */
const char *cgroup_v1_mount (const char *controller);
/* Each v1 hierarchy's mount once, NULL-terminated. */
char *const *cgroup_v1_hierarchies (void);
/* Where container paths live: the unified mount, else a v1 one. */
const char *cgroup_primary_mount (void);
/* PATH's name below its mount ("/husk/ID"), NULL if under no mount. */
const char *cgroup_name (const char *path);
/* The directory of container cgroup PATH with CONTROLLER's files in *DIR
 * (newly allocated) and its hierarchy's version; CGROUP_NONE, *DIR NULL,
 * where no hierarchy has it. */
enum cgroup_version cgroup_locate (const char *path, const char *controller, char **dir);
/* Every directory of the container cgroup, unified first (NULL-terminated). */
char **cgroup_dirs (const char *path);
/* True if DIR lies in a v1 hierarchy. */
bool cgroup_is_v1_dir (const char *dir);
/* mkdir -p in a v1 hierarchy (a new cpuset level gets its parent's cpus and mems). */
int cgroup_v1_create (const char *dir, struct husk_error **err);
/* freezer.state: writes FROZEN or THAWED and waits until it reads back. */
int cgroup_v1_freeze (const char *dir, bool frozen, struct husk_error **err);
bool cgroup_v1_frozen (const char *dir);

/* ------------------------------------------------------------ cgroup.c */

/* Mount point of the unified (v2) hierarchy: /sys/fs/cgroup, or
 * /sys/fs/cgroup/unified on hybrid hosts; NULL if there is none. */
const char *cgroup_unified_mount (void);

/* Maps linux.cgroupsPath to an absolute directory in the cgroup fs:
 * "/a/b" -> MOUNT/a/b; "a/b" -> under the runtime's own cgroup;
 * "slice:prefix:name" (systemd form, also with SYSTEMD) ->
 * MOUNT/a.slice/a-b.slice/prefix-name.scope for slice "a-b.slice";
 * NULL -> MOUNT/husk/ID.  ".." anywhere is refused. */
int cgroup_resolve (const char *cgroups_path, const char *id, bool systemd, char **out,
                    struct husk_error **err);

/* systemd's directory of SLICE below the mount: "/a.slice/a-b.slice" for
 * "a-b.slice", "" for the root "-.slice".  A name systemd would refuse
 * (no ".slice", a "/", a leading, trailing or doubled "-") is an error. */
int cgroup_slice_dir (const char *slice, char **out, struct husk_error **err);

/* Creates the cgroup (and parents) in every hierarchy, enabling every
 * available v2 controller in the subtree_control of each parent; returns an
 * O_DIRECTORY fd of PATH for clone3(CLONE_INTO_CGROUP).  On an error
 * (naming the path) nothing new is left. */
int cgroup_create (const char *path, struct husk_error **err);

/* True if PATH's cgroup.controllers lists CONTROLLER. */
bool cgroup_has_controller (const char *path, const char *controller);
/* DIR/NAME's whole content, NULL when it cannot be read (a controller's
 * file that does not exist). */
char *cgroup_read_file (const char *dir, const char *name);

/* The error for a limit (FIELD) that needs CONTROLLER, missing in PATH. */
int cgroup_controller_error (const char *path, const char *field, const char *controller,
                             struct husk_error **err);

/* Moves PID (0: the caller) into the cgroup in every hierarchy. */
int cgroup_enter (const char *path, pid_t pid, struct husk_error **err);
/* Moves PID into the cgroup in the hierarchies that are not v1 (the
 * unified one); cgroup_enter_v1_self does the rest. */
int cgroup_enter_unified (const char *path, pid_t pid, struct husk_error **err);
/* Moves the calling thread into the cgroup in every v1 hierarchy, through
 * each directory's `tasks` file.  For single-threaded callers only: it
 * moves one thread.  Unlike a cgroup.procs write it does not take the
 * kernel's global threadgroup lock, whose first writer waits for an RCU
 * grace period (1-20 ms on a busy 2-CPU host, every container start). */
int cgroup_enter_v1_self (const char *path, struct husk_error **err);
/* True if the cgroup exists in some hierarchy. */
bool cgroup_exists (const char *path);
/* Every pid in the cgroup (cgroup.procs). */
int cgroup_pids (const char *path, pid_t **pids, size_t *n, struct husk_error **err);
/* Signals every process: SIGKILL through cgroup.kill where the kernel has
 * it; else frozen (v1 freezer), signalled, thawed, so none escapes by
 * forking.  A cgroup that was paused stays paused. */
int cgroup_kill_all (const char *path, int sig, struct husk_error **err);
/* Freezes or thaws: cgroup.freeze (waiting for cgroup.events) on v2,
 * freezer.state on v1. */
int cgroup_freeze (const char *path, bool frozen, struct husk_error **err);
bool cgroup_is_frozen (const char *path);
/* rmdir in every hierarchy, waiting briefly for exiting processes; a
 * missing dir is fine. */
int cgroup_destroy (const char *path, struct husk_error **err);
/* One rmdir in every hierarchy; true if none is left (the kernel refuses
 * to remove a cgroup that holds a process or a child cgroup). */
bool cgroup_remove_if_empty (const char *path);

/* ------------------------------------------------- cgroup_resources.c */

/* An optional integer from linux.resources. */
struct cgroup_value
{
  bool set;
  int64_t value;
};

struct cgroup_device_rule
{
  bool allow;
  char type;            /* 'a', 'c' or 'b' */
  int64_t major, minor; /* -1 = any */
  unsigned access;      /* CGROUP_DEV_* bits */
};

enum
{
  CGROUP_DEV_MKNOD = 1,
  CGROUP_DEV_READ = 2,
  CGROUP_DEV_WRITE = 4,
  CGROUP_DEV_ALL = 7,
};

struct cgroup_io_device
{
  int64_t major, minor;
  uint64_t value; /* weight, or a rate (0 = no limit) */
};

enum cgroup_io_throttle
{
  CGROUP_THROTTLE_READ_BPS,
  CGROUP_THROTTLE_WRITE_BPS,
  CGROUP_THROTTLE_READ_IOPS,
  CGROUP_THROTTLE_WRITE_IOPS,
  CGROUP_THROTTLE_COUNT
};

struct cgroup_hugepage_limit
{
  char *page_size; /* "2MB" */
  uint64_t limit;
};

struct cgroup_rdma_limit
{
  char *device;
  struct cgroup_value handles, objects;
};

struct cgroup_net_priority
{
  char *interface;
  uint32_t priority;
};

struct cgroup_unified_entry
{
  char *key, *value;
};

/* linux.resources, parsed once for either cgroup version.  Every field is
 * optional: update writes only what is set. */
struct cgroup_resources
{
  char *where; /* field prefix for messages, e.g. "linux.resources" */
  struct
  {
    struct cgroup_value limit, reservation, swap;
    /* cgroup v1 only (v2 warns and goes on without them) */
    struct cgroup_value kernel, kernel_tcp, swappiness;
    bool disable_oom_killer;
    bool check_before_update;
  } memory;
  struct
  {
    struct cgroup_value shares, weight, quota, period, burst, idle;
    struct cgroup_value rt_runtime, rt_period; /* cgroup v1 only */
    char *cpus, *mems;
  } cpu;
  struct
  {
    struct cgroup_value class_id;           /* net_cls, cgroup v1 only */
    struct cgroup_net_priority *priorities; /* net_prio, cgroup v1 only */
    size_t n_priorities;
  } network;
  struct cgroup_value pids_limit;
  struct
  {
    struct cgroup_value weight;
    struct cgroup_io_device *weight_devices;
    size_t n_weight_devices;
    struct cgroup_io_device *throttle[CGROUP_THROTTLE_COUNT];
    size_t n_throttle[CGROUP_THROTTLE_COUNT];
  } io;
  struct cgroup_hugepage_limit *hugepages;
  size_t n_hugepages;
  struct cgroup_rdma_limit *rdma;
  size_t n_rdma;
  struct cgroup_unified_entry *unified;
  size_t n_unified;
  bool has_devices; /* "devices" was given (update replaces the filter) */
  struct cgroup_device_rule *devices;
  size_t n_devices;
};

/* Parses a linux.resources object (NULL = nothing set).  WHERE prefixes
 * messages: "linux.resources.memory.limit: must be >= -1".  Validates
 * everything that can be checked without the cgroup. */
int cgroup_resources_parse (json_t *resources, const char *where, struct cgroup_resources *out,
                            struct husk_error **err);
void cgroup_resources_clear (struct cgroup_resources *res);
/* True if RES sets any limit (devices aside). */
bool cgroup_resources_has_limits (const struct cgroup_resources *res);

/* Writes RES into the container cgroup PATH, each controller's values
 * into the hierarchy that holds it (v2 files, or v1's).  Every value is
 * checked first (controller available, file present,
 * memory.checkBeforeUpdate), so a refused request changes nothing; a
 * write the kernel refuses restores what was already written.  Device
 * rules go to the BPF filter (v2) or devices.allow/deny (v1); where
 * neither exists, rules that are not "allow all" are an error. */
int cgroup_resources_write (const char *path, const struct cgroup_resources *res, struct husk_error **err);

/* Create time: parses SPEC's linux.resources and writes it into PATH,
 * before the container's process enters.  PATH NULL (no cgroup hierarchy
 * at all): an error unless SPEC asks for no limit and no device rule. */
int cgroup_apply_resources (const struct spec *spec, const char *path, struct husk_error **err);

/* Create and restore: the container's cgroup (linux.cgroupsPath, or
 * husk/ID) resolved into *PATH, made (*FD: an fd of it, for
 * CLONE_INTO_CGROUP; the caller closes it) and given SPEC's limits and
 * device rules before any process enters.  No cgroup hierarchy mounted at
 * all: *PATH NULL, *FD -1, and an error only if SPEC asks for limits or
 * device rules.  On failure *FD >= 0 means the cgroup was made (the
 * caller removes it). */
int cgroup_setup_container (const struct spec *spec, const char *id, bool systemd, char **path, int *fd,
                            struct husk_error **err);

/* ------------------------------------------------------ cgroup_bpf.c */

struct bpf_insn;

/* The rules the container gets after its own, as runc and crun add them:
 * mknod of anything, and the standard nodes (null, zero, full, random,
 * urandom, tty, console, ptmx, pts/N, net/tun). */
extern const struct cgroup_device_rule cgroup_default_device_rules[];
extern const size_t cgroup_n_default_device_rules;

/* Compiles RULES (the last matching rule wins; a rule for all devices and
 * all access resets the default) into a BPF_PROG_TYPE_CGROUP_DEVICE
 * program.  *ALLOW_ALL is set when the result allows everything: then no
 * program is needed and *INSNS is NULL. */
void cgroup_device_program (const struct cgroup_device_rule *rules, size_t n_rules, struct bpf_insn **insns,
                            size_t *n_insns, bool *allow_all);

/* Evaluates RULES for one access the way the program does (tests). */
bool cgroup_device_allowed (const struct cgroup_device_rule *rules, size_t n_rules, char type, uint32_t major,
                            uint32_t minor, unsigned access);

/* Loads the program into the kernel (the verifier checks it); returns its
 * fd.  A refusal carries the verifier's last line. */
int cgroup_device_program_load (const struct bpf_insn *insns, size_t n_insns, struct husk_error **err);

/* RULES followed by the default rules (newly allocated, *N_ALL entries). */
struct cgroup_device_rule *cgroup_device_rules_with_defaults (const struct cgroup_device_rule *rules,
                                                              size_t n_rules, size_t *n_all);
/* The first rule that matters (those before the last "all devices, all
 * access" rule cannot), and in *DEFAULT_ALLOW the verdict without a match. */
size_t cgroup_device_rules_start (const struct cgroup_device_rule *rules, size_t n_rules,
                                  bool *default_allow);

/* Compiles RULES followed by the default rules and loads the program;
 * *PROG_FD is -1 when the rules allow everything (nothing to attach). */
int cgroup_devices_prepare (const struct cgroup_device_rule *rules, size_t n_rules, int *prog_fd,
                            struct husk_error **err);
/* Attaches PROG_FD to the cgroup at PATH (BPF_F_ALLOW_MULTI) and detaches
 * the device programs attached there before, so an update replaces the
 * filter.  PROG_FD -1 only detaches. */
int cgroup_devices_attach (const char *path, int prog_fd, struct husk_error **err);

#endif
