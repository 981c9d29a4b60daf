/* `husk create`: validates everything it can before touching the system,
 * then clones the container's init into its namespaces and drives the
 * handshake of sync.h.  On any failure everything created so far (init
 * process, cgroup, state dir) is removed again. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/idmap.h"
#include "husk/unix_socket.h"
#include "husk/util.h"
#include "runtime/lsm/apparmor.h"
#include "runtime/cgroup/cgroup.h"
#include "runtime/container.h"
#include "runtime/create.h"
#include "runtime/hooks.h"
#include "runtime/init.h"
#include "runtime/sync.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

/* Everything create has made so far, so that a failure can undo it. */
struct create_job
{
  const struct runtime_ctx *ctx;
  const char *id;
  const struct create_options *opts;
  struct spec *spec;
  struct seccomp_program seccomp;
  struct container_state state;
  bool state_dir_made;
  int cgroup_fd;
  int sync_fd;               /* parent's end */
  int ns_fds[SPEC_NS_COUNT]; /* the namespaces given by path, opened before the clone; -1: none */
  int console_fd;            /* our end of an internal console pair, for run */
  bool start_now;            /* no exec fifo: the init execs once ready (run) */
};

static const struct
{
  enum spec_ns_type type;
  unsigned long long flag;
} clone_ns[] = {
  { SPEC_NS_USER, CLONE_NEWUSER },   { SPEC_NS_MOUNT, CLONE_NEWNS }, { SPEC_NS_PID, CLONE_NEWPID },
  { SPEC_NS_NETWORK, CLONE_NEWNET }, { SPEC_NS_IPC, CLONE_NEWIPC },  { SPEC_NS_UTS, CLONE_NEWUTS },
};

static bool
ns_new (const struct spec *spec, enum spec_ns_type type)
{
  return spec->namespaces[type].present && spec->namespaces[type].path == NULL;
}

static unsigned long long
clone_flags_of (const struct spec *spec)
{
  unsigned long long flags = 0;

  for (size_t i = 0; i < sizeof clone_ns / sizeof clone_ns[0]; i++)
    if (ns_new (spec, clone_ns[i].type))
      flags |= clone_ns[i].flag;
  return flags;
}

static int
validate_spec (const struct spec *spec, struct husk_error **err)
{
  if (!spec->has_process)
    return husk_error_make (err, 0, "config.json: process: required to create a container");
  /* Without a mount namespace the container shares the runtime's, as the
   * spec allows: its mounts are made there and it is chroot'ed into its
   * root.  Masks and a read-only root would change the host's mounts. */
  if (!spec->namespaces[SPEC_NS_MOUNT].present
      && ((spec->masked_paths && spec->masked_paths[0]) || (spec->readonly_paths && spec->readonly_paths[0])))
    return husk_error_make (err, 0,
                            "config.json: linux.maskedPaths/readonlyPaths need a mount namespace "
                            "(linux.namespaces has none)");
  if (!spec->namespaces[SPEC_NS_MOUNT].present && spec->root_readonly)
    return husk_error_make (err, 0,
                            "config.json: root.readonly needs a mount namespace (linux.namespaces has none)");
  return 0;
}

static bool
joins_user_ns (const struct spec *spec)
{
  return spec->namespaces[SPEC_NS_USER].present && spec->namespaces[SPEC_NS_USER].path != NULL;
}

static struct husk_id_map *
to_id_maps (const struct spec_id_mapping *maps, size_t n)
{
  struct husk_id_map *out = xcalloc (n + 1, sizeof *out);

  for (size_t i = 0; i < n; i++)
    out[i] = (struct husk_id_map){ maps[i].container_id, maps[i].host_id, maps[i].size };
  return out;
}

static bool
same_mappings (const struct spec_mount *a, const struct spec_mount *b)
{
  return a->n_uid_mappings == b->n_uid_mappings && a->n_gid_mappings == b->n_gid_mappings
         && memcmp (a->uid_mappings, b->uid_mappings, a->n_uid_mappings * sizeof *a->uid_mappings) == 0
         && memcmp (a->gid_mappings, b->gid_mappings, a->n_gid_mappings * sizeof *a->gid_mappings) == 0;
}

static bool
in_user_ns (const struct spec *spec)
{
  return spec->namespaces[SPEC_NS_USER].present;
}

/* Bind mounts are cloned here, in the runtime's namespaces, and the init
 * attaches the detached clones: an idmapped one needs CAP_SYS_ADMIN over
 * the filesystem, and in a user namespace the init could not even reach
 * a source under a directory only host root may search (the pod's files,
 * kubelet's volumes).  One user namespace serves each run of equal
 * mappings. */
static int
prepare_bind_mounts (struct spec *spec, struct husk_error **err)
{
  const struct spec_mount *userns_for = NULL;
  cleanup_close int userns_fd = -1;

  for (size_t i = 0; i < spec->n_mounts; i++)
    {
      struct spec_mount *mnt = &spec->mounts[i];
      bool idmapped = mnt->n_uid_mappings > 0;

      if (!idmapped && !(mnt->bind && in_user_ns (spec) && mnt->source))
        continue;
      if (idmapped && (userns_for == NULL || !same_mappings (userns_for, mnt)))
        {
          cleanup_free struct husk_id_map *uids = to_id_maps (mnt->uid_mappings, mnt->n_uid_mappings);
          cleanup_free struct husk_id_map *gids = to_id_maps (mnt->gid_mappings, mnt->n_gid_mappings);

          husk_closep (&userns_fd);
          userns_fd = husk_userns_open (uids, mnt->n_uid_mappings, gids, mnt->n_gid_mappings, err);
          if (userns_fd < 0)
            return husk_error_wrap (err, "config.json: mounts[%zu]", i);
          userns_for = mnt;
        }
      mnt->prepared_fd = idmapped ? husk_idmap_clone (mnt->source, (mnt->flags & MS_REC) != 0, userns_fd, err)
                                  : husk_mount_clone (mnt->source, (mnt->flags & MS_REC) != 0, err);
      if (mnt->prepared_fd < 0)
        return husk_error_wrap (err, "config.json: mounts[%zu] (destination `%s`)", i, mnt->destination);
      mnt->prepared = true;
    }
  return 0;
}

/* The namespaces to join are opened here, as the runtime: after joining a
 * user namespace the init could not open a path under a directory only
 * host root may search (a pod's pins).  pid and time are joined before
 * the clone, by path. */
static int
open_namespaces (struct create_job *job, struct husk_error **err)
{
  for (int type = 0; type < SPEC_NS_COUNT; type++)
    {
      const struct spec_namespace *ns = &job->spec->namespaces[type];

      if (!ns->present || ns->path == NULL || type == SPEC_NS_PID || type == SPEC_NS_TIME)
        continue;
      job->ns_fds[type] = open (ns->path, O_RDONLY | O_CLOEXEC);
      if (job->ns_fds[type] < 0)
        return husk_error_make (err, errno, "open %s namespace `%s`", spec_ns_name ((enum spec_ns_type) type),
                                ns->path);
    }
  return 0;
}

static void
close_prepared_mounts (struct spec *spec)
{
  for (size_t i = 0; spec && i < spec->n_mounts; i++)
    if (spec->mounts[i].prepared)
      husk_closep (&spec->mounts[i].prepared_fd);
}

/* The pid and time namespaces apply to children only, so the parent joins
 * (or creates) them before clone; it exits soon after, or in `run` only
 * waits. */
static int
prepare_parent_namespaces (const struct spec *spec, struct husk_error **err)
{
  const struct spec_namespace *pid_ns = &spec->namespaces[SPEC_NS_PID];
  const struct spec_namespace *time_ns = &spec->namespaces[SPEC_NS_TIME];

  if (pid_ns->present && pid_ns->path)
    {
      cleanup_close int fd = open (pid_ns->path, O_RDONLY | O_CLOEXEC);
      if (fd < 0 || setns (fd, CLONE_NEWPID) < 0)
        return husk_error_make (err, errno, "join pid namespace `%s`", pid_ns->path);
    }
  if (time_ns->present && time_ns->path)
    {
      cleanup_close int fd = open (time_ns->path, O_RDONLY | O_CLOEXEC);
      if (fd < 0 || setns (fd, CLONE_NEWTIME) < 0)
        return husk_error_make (err, errno, "join time namespace `%s`", time_ns->path);
    }
  else if (time_ns->present)
    {
      char offsets[128];
      int n;

      if (unshare (CLONE_NEWTIME) < 0)
        return husk_error_make (err, errno, "create time namespace");
      n = snprintf (offsets, sizeof offsets, "monotonic %lld %u\nboottime %lld %u\n",
                    (long long) spec->time_offset_secs[0], spec->time_offset_nanosecs[0],
                    (long long) spec->time_offset_secs[1], spec->time_offset_nanosecs[1]);
      if (spec->has_time_offsets
          && husk_write_file ("/proc/self/timens_offsets", offsets, (size_t) n, err) < 0)
        return husk_error_wrap (err, "linux.timeOffsets");
    }
  return 0;
}

static int
write_id_map (pid_t pid, const char *file, const struct spec_id_mapping *maps, size_t n,
              struct husk_error **err)
{
  cleanup_free char *path = xasprintf ("/proc/%d/%s", (int) pid, file);
  cleanup_free char *text = xstrdup ("");

  for (size_t i = 0; i < n; i++)
    {
      char *line = xasprintf ("%s%u %u %u\n", text, maps[i].container_id, maps[i].host_id, maps[i].size);
      free (text);
      text = line;
    }
  if (husk_write_file (path, text, strlen (text), err) < 0)
    return husk_error_wrap (err, "linux.%s", strcmp (file, "uid_map") == 0 ? "uidMappings" : "gidMappings");
  return 0;
}

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* Whether FD is a cgroup2 directory: CLONE_INTO_CGROUP takes no other. */
static bool
is_cgroup2_fd (int fd)
{
  struct statfs sfs;

  return fstatfs (fd, &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC;
}

/* clone3 with CLONE_INTO_CGROUP puts the init in its cgroup atomically;
 * older kernels get plain clone and an explicit cgroup.procs write.  A v1
 * directory (the cgroup of a v1-only host) is not tried: the kernel checks
 * the cgroup only after it has made the new namespaces, so the failed call
 * would build and tear down a whole network namespace. */
static pid_t
clone_init (unsigned long long flags, int cgroup_fd, bool *in_cgroup)
{
  struct clone_args args = { .flags = flags, .exit_signal = SIGCHLD };
  pid_t pid;

  fflush (NULL);
  if (cgroup_fd >= 0 && is_cgroup2_fd (cgroup_fd))
    {
      args.flags |= CLONE_INTO_CGROUP;
      args.cgroup = (unsigned long long) cgroup_fd;
      pid = (pid_t) syscall (SYS_clone3, &args, sizeof args);
      if (pid >= 0)
        {
          *in_cgroup = true;
          return pid;
        }
      args.flags = flags;
    }
  *in_cgroup = false;
  pid = (pid_t) syscall (SYS_clone3, &args, sizeof args);
  if (pid < 0 && errno == ENOSYS)
    pid = (pid_t) syscall (SYS_clone, (unsigned long) flags | SIGCHLD, NULL, NULL, NULL, NULL);
  return pid;
}

/* The state JSON hooks get on stdin. */
static char *
hook_state_json (const struct create_job *job, enum container_status status)
{
  return state_oci_json (&job->state, status, false);
}

static int
run_runtime_hooks (struct create_job *job, struct husk_error **err)
{
  cleanup_free char *json = hook_state_json (job, STATUS_CREATING);

  if (sync_expect (job->sync_fd, SYNC_CHILD_RUN_RUNTIME_HOOKS, NULL, err) < 0)
    return -1;
  if (hooks_run (&job->spec->hooks, SPEC_HOOK_PRESTART, json, err) < 0
      || hooks_run (&job->spec->hooks, SPEC_HOOK_CREATE_RUNTIME, json, err) < 0)
    return -1;
  return sync_send (job->sync_fd, SYNC_PARENT_HOOKS_DONE, NULL, 0, err);
}

static int
write_pid_file (const char *path, pid_t pid, struct husk_error **err)
{
  char buf[32];
  int n = snprintf (buf, sizeof buf, "%d", (int) pid);

  if (path == NULL)
    return 0;
  return husk_write_file_replace (path, buf, (size_t) n, 0644, err);
}

/* Without a user namespace the init joins the v1 hierarchies itself, as its
 * first step after PARENT_GO (cgroup_enter_v1_self: no global lock, no RCU
 * grace period); it still runs husk's code then, and a failure fails the
 * create.  In a user namespace it may not write the host's cgroup files. */
static bool
init_joins_v1 (const struct create_job *job)
{
  return job->state.cgroup_path && cgroup_v1_hierarchies ()[0]
         && !job->spec->namespaces[SPEC_NS_USER].present;
}

static int
enter_cgroup (const struct create_job *job, bool in_cgroup, struct husk_error **err)
{
  if (job->state.cgroup_path == NULL)
    return 0;
  if (init_joins_v1 (job))
    return in_cgroup ? 0 : cgroup_enter_unified (job->state.cgroup_path, job->state.pid, err);
  /* clone3 put it in the cgroup of one hierarchy at most: the v1 ones too. */
  if (in_cgroup && !cgroup_v1_hierarchies ()[0])
    return 0;
  return cgroup_enter (job->state.cgroup_path, job->state.pid, err);
}

/* After clone: id maps, cgroup, then the handshake up to CHILD_READY. */
static int
drive_child (struct create_job *job, bool in_cgroup, struct husk_error **err)
{
  const struct spec *spec = job->spec;
  pid_t pid = job->state.pid;
  cleanup_free char *json = NULL;

  if (ns_new (spec, SPEC_NS_USER)
      && (write_id_map (pid, "uid_map", spec->uid_mappings, spec->n_uid_mappings, err) < 0
          || write_id_map (pid, "gid_map", spec->gid_mappings, spec->n_gid_mappings, err) < 0))
    return -1;
  if (enter_cgroup (job, in_cgroup, err) < 0)
    return -1;
  job->state.pid_start = state_proc_start_time (pid);
  job->state.creating = true;
  if (state_write (&job->state, err) < 0)
    return -1;
  json = hook_state_json (job, STATUS_CREATING);
  if (sync_send (job->sync_fd, SYNC_PARENT_GO, json, strlen (json), err) < 0)
    {
      /* An init that goes late may have failed its setup and gone before
       * the go: the error it left in the socket is the one to report. */
      struct husk_error *child_err = NULL;

      if (sync_expect (job->sync_fd, SYNC_CHILD_READY, NULL, &child_err) < 0 && child_err)
        {
          husk_error_free (err);
          *err = child_err;
        }
      else
        husk_error_free (&child_err);
      return -1;
    }
  if ((spec->hooks.count[SPEC_HOOK_PRESTART] || spec->hooks.count[SPEC_HOOK_CREATE_RUNTIME])
      && run_runtime_hooks (job, err) < 0)
    return -1;
  if (sync_expect (job->sync_fd, SYNC_CHILD_READY, NULL, err) < 0)
    return -1;
  job->state.creating = false;
  if (state_write (&job->state, err) < 0)
    return -1;
  return write_pid_file (job->opts->pid_file, pid, err);
}

static int
open_console (struct create_job *job, int *child_console, struct husk_error **err)
{
  int pair[2];

  *child_console = -1;
  if (!job->spec->process.terminal)
    return 0;
  if (job->opts->console_socket)
    {
      *child_console = terminal_connect (job->opts->console_socket, err);
      return *child_console < 0 ? -1 : 0;
    }
  if (job->console_fd == -2)
    return husk_error_make (err, 0, "process.terminal is set: --console-socket is required when detached");
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
    return husk_error_make (err, errno, "socketpair for the terminal");
  job->console_fd = pair[0];
  *child_console = pair[1];
  return 0;
}

static void
send_pidfd (int sock, int pidfd)
{
  char byte = 0;

  (void) husk_unix_send_fd (sock, pidfd, &byte, 1);
}

/* The helper's answer: a pidfd, or (no fd) the errno it failed with. */
static int
recv_pidfd (int sock, int *errnum)
{
  int value = 0, fd;
  ssize_t got;

  if ((fd = husk_unix_recv_fd (sock, &value, sizeof value, &got)) >= 0)
    return fd;
  *errnum = got == (ssize_t) sizeof value ? value : EIO;
  return -1;
}

/* Whether the init may set itself up before the parent's go (it still
 * waits for it before it reports ready, so before it can exec): only when
 * the go brings nothing the setup needs.  It does not when there is a
 * user namespace (the parent writes the id maps), a cgroup namespace (its
 * root is the cgroup the init is in when it unshares), a hook that runs
 * before ready (createRuntime and prestart run in the parent between go
 * and ready, createContainer in the init's setup with the state the go
 * carries), or a cgroup the parent must move the init
 * into for its controllers: the init joins the v1 hierarchies itself and
 * clone3 put it in a v2 cgroup; what is left is the hybrid host's unified
 * hierarchy, which holds no controller then.  It saves a wake-up of the
 * init, ~0.5 ms of `run` on this 2-CPU machine. */
static bool
init_may_go_late (const struct create_job *job, bool in_cgroup)
{
  const struct spec *spec = job->spec;

  if (spec->hooks.count[SPEC_HOOK_PRESTART] || spec->hooks.count[SPEC_HOOK_CREATE_RUNTIME]
      || spec->hooks.count[SPEC_HOOK_CREATE_CONTAINER])
    return false;
  if (spec->namespaces[SPEC_NS_USER].present || ns_new (spec, SPEC_NS_CGROUP))
    return false;
  return job->state.cgroup_path == NULL || in_cgroup || init_joins_v1 (job);
}

/* The cloned init: runs container_init, never returns. */
static void __attribute__ ((noreturn)) init_child (struct create_job *job, int sync_fd, int other_sync_fd,
                                                   int fifo_fd, int child_console, bool go_late)
{
  struct init_config cfg = {
    .spec = job->spec,
    .opts = job->opts,
    .seccomp = &job->seccomp,
    .sync_fd = sync_fd,
    .fifo_fd = fifo_fd,
    .console_fd = child_console,
    .new_user_ns = ns_new (job->spec, SPEC_NS_USER),
    .joined_user_ns = joins_user_ns (job->spec),
    .new_net_ns = ns_new (job->spec, SPEC_NS_NETWORK),
    .new_cgroup_ns = ns_new (job->spec, SPEC_NS_CGROUP),
    .cgroup_path = job->state.cgroup_path,
    .join_cgroup_v1 = init_joins_v1 (job),
    .ns_fds = job->ns_fds,
    .go_late = go_late,
  };
  close (other_sync_fd);
  if (job->console_fd >= 0)
    close (job->console_fd);
  container_init (&cfg);
}

/* The helper that joins the user namespace: the namespaces the init
 * creates must belong to it (mount, pid, cgroup: or root in the container
 * could not mount /proc or a tmpfs), so they are made from inside it.  It
 * clones the init as a sibling (CLONE_PARENT: our child, for waitpid and
 * the parent-death signal) and sends back its pidfd. */
static void __attribute__ ((noreturn))
userns_helper (struct create_job *job, unsigned long long flags, int report_fd, int sync_fd,
               int other_sync_fd, int fifo_fd, int child_console)
{
  const char *path = job->spec->namespaces[SPEC_NS_USER].path;
  /* clone3 wants exit_signal 0 with CLONE_PARENT: the init gets ours (SIGCHLD). */
  struct clone_args args = { .flags = flags | CLONE_PARENT | CLONE_PIDFD };
  int userns_fd = open (path, O_RDONLY | O_CLOEXEC);
  int pidfd = -1, result = 0;
  pid_t pid;

  if (userns_fd < 0 || setns (userns_fd, CLONE_NEWUSER) < 0 || setresgid (0, 0, 0) < 0
      || setresuid (0, 0, 0) < 0)
    result = errno ? errno : EPERM;
  if (result == 0)
    {
      args.pidfd = (unsigned long long) (uintptr_t) &pidfd;
      fflush (NULL);
      pid = (pid_t) syscall (SYS_clone3, &args, sizeof args);
      if (pid == 0)
        {
          close (report_fd);
          init_child (job, sync_fd, other_sync_fd, fifo_fd, child_console, false);
        }
      if (pid < 0)
        result = errno;
    }
  if (result != 0)
    (void) !write (report_fd, &result, sizeof result);
  else
    send_pidfd (report_fd, pidfd);
  _exit (0);
}

/* The pid (in our pid namespace) of the process PIDFD refers to. */
static pid_t
pid_of_pidfd (int pidfd)
{
  cleanup_free char *path = xasprintf ("/proc/self/fdinfo/%d", pidfd);
  cleanup_free char *text = NULL;
  struct husk_error *ignored = NULL;
  const char *line;
  int pid = -1;

  if (husk_read_file (path, &text, NULL, &ignored) < 0)
    {
      husk_error_free (&ignored);
      return -1;
    }
  line = strstr (text, "\nPid:");
  if (line == NULL || sscanf (line + 5, "%d", &pid) != 1)
    return -1;
  return pid;
}

static pid_t
clone_init_in_userns (struct create_job *job, unsigned long long flags, int sync_fd, int other_sync_fd,
                      int fifo_fd, int child_console, struct husk_error **err)
{
  const char *path = job->spec->namespaces[SPEC_NS_USER].path;
  cleanup_close int pidfd = -1;
  int report[2], result = 0;
  pid_t helper, pid;

  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, report) < 0)
    return husk_error_make (err, errno, "socketpair");
  fflush (NULL);
  helper = fork ();
  if (helper == 0)
    {
      close (report[0]);
      userns_helper (job, flags, report[1], sync_fd, other_sync_fd, fifo_fd, child_console);
    }
  close (report[1]);
  if (helper < 0)
    {
      close (report[0]);
      return husk_error_make (err, errno, "fork to join the user namespace `%s`", path);
    }
  pidfd = recv_pidfd (report[0], &result);
  close (report[0]);
  while (waitpid (helper, NULL, 0) < 0 && errno == EINTR)
    ;
  if (pidfd < 0)
    return husk_error_make (err, result, "join user namespace `%s` and clone the init", path);
  pid = pid_of_pidfd (pidfd);
  if (pid <= 0)
    return husk_error_make (err, EIO, "join user namespace `%s`: find the init's pid", path);
  return pid;
}

static int
spawn_init (struct create_job *job, struct husk_error **err)
{
  cleanup_free char *fifo = state_fifo_path (job->state.state_dir);
  cleanup_close int fifo_fd = -1;
  cleanup_close int child_console = -1;
  int pair[2];
  bool in_cgroup = false;
  pid_t pid;

  if (!job->start_now && mkfifo (fifo, 0600) < 0)
    return husk_error_make (err, errno, "mkfifo `%s`", fifo);
  /* O_RDWR never blocks; the init reads from it until start writes. */
  if (!job->start_now && (fifo_fd = open (fifo, O_RDWR | O_CLOEXEC)) < 0)
    return husk_error_make (err, errno, "open `%s`", fifo);
  if (open_console (job, &child_console, err) < 0)
    return -1;
  if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
    return husk_error_make (err, errno, "socketpair");
  if (prepare_parent_namespaces (job->spec, err) < 0)
    {
      close (pair[0]);
      close (pair[1]);
      return -1;
    }
  if (joins_user_ns (job->spec))
    {
      pid = clone_init_in_userns (job, clone_flags_of (job->spec), pair[1], pair[0], fifo_fd, child_console,
                                  err);
      if (pid < 0)
        {
          close (pair[0]);
          close (pair[1]);
          return -1;
        }
    }
  else
    {
      pid = clone_init (clone_flags_of (job->spec), job->cgroup_fd, &in_cgroup);
      if (pid < 0)
        {
          close (pair[0]);
          close (pair[1]);
          return husk_error_make (err, errno, "clone the container init");
        }
      if (pid == 0)
        init_child (job, pair[1], pair[0], fifo_fd, child_console, init_may_go_late (job, in_cgroup));
    }
  close (pair[1]);
  job->sync_fd = pair[0];
  job->state.pid = pid;
  return drive_child (job, in_cgroup, err);
}

static int
make_state_dir (struct create_job *job, struct husk_error **err)
{
  if (husk_mkdir_p (job->ctx->root, 0700, err) < 0)
    return husk_error_wrap (err, "state root");
  if (mkdir (job->state.state_dir, 0700) < 0)
    {
      if (errno == EEXIST)
        return husk_error_make (err, 0, "container `%s` already exists", job->id);
      return husk_error_make (err, errno, "mkdir `%s`", job->state.state_dir);
    }
  job->state_dir_made = true;
  return 0;
}

/* Keeps the config as created: start, exec and delete read their hooks
 * and defaults from it even if the bundle changes. */
static int
save_config (struct create_job *job, struct husk_error **err)
{
  cleanup_free char *path = state_config_path (job->state.state_dir);
  cleanup_free char *text = json_dumps (job->spec->json, JSON_COMPACT);

  return husk_write_file_replace (path, text, strlen (text), 0600, err);
}

static int
setup_cgroup (struct create_job *job, struct husk_error **err)
{
  return cgroup_setup_container (job->spec, job->id, job->ctx->systemd_cgroup, &job->state.cgroup_path,
                                 &job->cgroup_fd, err);
}

static void
undo (struct create_job *job)
{
  struct husk_error *ignored = NULL;

  if (job->state.pid > 0)
    {
      kill (job->state.pid, SIGKILL);
      waitpid (job->state.pid, NULL, 0);
      job->state.pid = 0;
    }
  if (job->cgroup_fd >= 0 && job->state.cgroup_path)
    cgroup_destroy (job->state.cgroup_path, &ignored);
  husk_error_free (&ignored);
  if (job->state_dir_made)
    husk_rm_rf (job->state.state_dir, &ignored);
  husk_error_free (&ignored);
}

static void
job_clear (struct create_job *job)
{
  if (job->cgroup_fd >= 0)
    close (job->cgroup_fd);
  if (job->sync_fd >= 0)
    close (job->sync_fd);
  seccomp_program_clear (&job->seccomp);
  close_prepared_mounts (job->spec);
  for (int type = 0; type < SPEC_NS_COUNT; type++)
    husk_closep (&job->ns_fds[type]);
  free (job->state.state_dir);
  free (job->state.bundle);
  free (job->state.rootfs);
  free (job->state.cgroup_path);
  free (job->state.created);
  spec_free (job->spec);
}

static int
create_steps (struct create_job *job, struct husk_error **err)
{
  char bundle_abs[4096];
  const char *bundle = job->opts->bundle ? job->opts->bundle : ".";

  if (state_validate_id (job->id, err) < 0)
    return -1;
  if (realpath (bundle, bundle_abs) == NULL)
    return husk_error_make (err, errno, "bundle `%s`", bundle);
  if (spec_load (bundle_abs, &job->spec, err) < 0 || validate_spec (job->spec, err) < 0
      || security_check_sysctls (job->spec, err) < 0
      || apparmor_check_profile (&job->spec->process.apparmor_profile, "config.json: process.apparmorProfile",
                                 err)
             < 0)
    return -1;
  job->start_now = job->start_now && job->spec->hooks.count[SPEC_HOOK_POSTSTART] == 0;
  if (job->spec->has_seccomp && seccomp_compile (&job->spec->seccomp, &job->seccomp, err) < 0)
    return -1;
  if (prepare_bind_mounts (job->spec, err) < 0 || open_namespaces (job, err) < 0)
    return -1;
  state_init_new (&job->state, job->ctx->root, job->id, bundle_abs, job->spec->root_path,
                  job->ctx->systemd_cgroup, job->spec->annotations);
  if (make_state_dir (job, err) < 0 || save_config (job, err) < 0 || setup_cgroup (job, err) < 0)
    return -1;
  return spawn_init (job, err);
}

int
create_container_job (const struct runtime_ctx *ctx, const char *id, const struct create_options *opts,
                      bool foreground, bool start_now, struct create_result *result, struct husk_error **err)
{
  struct create_job job = { .ctx = ctx,
                            .id = id,
                            .opts = opts,
                            .cgroup_fd = -1,
                            .sync_fd = -1,
                            .console_fd = foreground ? -1 : -2,
                            .start_now = start_now };
  int ret;

  for (int type = 0; type < SPEC_NS_COUNT; type++)
    job.ns_fds[type] = -1;
  ret = create_steps (&job, err);

  if (ret < 0)
    undo (&job);
  else if (result)
    {
      result->pid = job.state.pid;
      result->started = job.start_now;
      result->console_fd = job.console_fd >= 0 ? steal_fd (&job.console_fd) : -1;
    }
  if (job.console_fd >= 0)
    close (job.console_fd);
  job_clear (&job);
  return ret;
}

int
container_create (const struct runtime_ctx *ctx, const char *id, const struct create_options *opts,
                  struct husk_error **err)
{
  return create_container_job (ctx, id, opts, false, false, NULL, err);
}
