/* AppArmor for huskd: husk-default's text and its loading with Debian's
 * apparmor_parser, and CRI's SecurityProfile turned into an OCI
 * process.apparmorProfile (cri_spec.c for containers, the pause process
 * for pods).  The switch itself is the runtime's (runtime/apparmor.c). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cri/apparmor.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/apparmor.h"

extern char **environ;

/* apparmor_parser compiles husk-default in well under a second; a parser
 * that hangs must not hold huskd's start forever. */
#define PARSER_TIMEOUT_S 60
/* How much of its stderr is kept for the error (its last line is used). */
#define STDERR_KEEP 4096
/* The runtime's limit on a profile name (runtime/apparmor.c). */
#define NAME_MAX_LEN 4000

/* husk's own text, with the intent of containerd's and CRI-O's defaults:
 * what a program does inside its own root stays allowed (the namespaces,
 * capability sets and seccomp filter bound it already); what reaches the
 * host kernel's global knobs through /proc and /sys, new mounts, and
 * tracing or signalling processes outside the profile is denied.  The
 * globs say "every name but X" the only way AppArmor can: one character
 * position at a time. */
static const char default_text[] = "# husk-default: the AppArmor profile of containers that ask huskd for\n"
                                   "# RuntimeDefault (or for no profile).  Loaded by huskd at start.\n"
                                   "abi <abi/3.0>,\n"
                                   "\n"
                                   "profile husk-default flags=(attach_disconnected,mediate_deleted) {\n"
                                   "  # The container's own world: its files, sockets and capabilities.\n"
                                   "  file,\n"
                                   "  network,\n"
                                   "  capability,\n"
                                   "  umount,\n"
                                   "\n"
                                   "  # No new mounts and no new root.\n"
                                   "  deny mount,\n"
                                   "  deny pivot_root,\n"
                                   "\n"
                                   "  # Signals from the host's runtime, monitor and kubelet (unconfined,\n"
                                   "  # or under the profiles some distributions give runtimes), and\n"
                                   "  # among processes of this profile; tracing only among them too.\n"
                                   "  signal (receive) peer=unconfined,\n"
                                   "  signal (receive) peer={husk,huskd,husk-monitor,runc,crun},\n"
                                   "  signal (send, receive) peer=husk-default,\n"
                                   "  ptrace (trace, read, tracedby, readby) peer=husk-default,\n"
                                   "\n"
                                   "  # /proc: no writes to its top-level files, nor below any directory\n"
                                   "  # but a process's own (/proc/PID) and /proc/sys.\n"
                                   "  deny /proc/* w,\n"
                                   "  deny /proc/[^0-9s]*/** w,\n"
                                   "  deny /proc/[0-9]*[^0-9]*/** w,\n"
                                   "  deny /proc/{s,sy,s[^y]*,sy[^s]*,sys?*}/** w,\n"
                                   "  # /proc/sys: only kernel/shm*, which the IPC namespace holds.\n"
                                   "  deny /proc/sys/{[^k],k[^e],ke[^r],ker[^n],kern[^e],kerne[^l]}** w,\n"
                                   "  deny /proc/sys/kernel?** w,\n"
                                   "  deny /proc/sys/kernel/{[^s],s[^h],sh[^m]}** w,\n"
                                   "  deny /proc/sys/kernel/shm*/** w,\n"
                                   "  # The host's memory and its magic keys, not even for reading.\n"
                                   "  deny /proc/kcore rwklx,\n"
                                   "  deny /proc/sysrq-trigger rwklx,\n"
                                   "  deny /proc/kmsg rwklx,\n"
                                   "\n"
                                   "  # /sys: no writes but to the container's cgroup files.\n"
                                   "  deny /sys/{[^f],f[^s],fs/[^c],fs/c[^g],fs/cg[^r]}** wklx,\n"
                                   "  # Firmware, LSM policy and energy counters (a side channel): nothing.\n"
                                   "  deny /sys/firmware/** rwklx,\n"
                                   "  deny /sys/kernel/security/** rwklx,\n"
                                   "  deny /sys/devices/virtual/powercap/** rwklx,\n"
                                   "}\n";

const char *
cri_apparmor_default_text (void)
{
  return default_text;
}

static const char *
find_parser (void)
{
  static const char *const paths[] = { "/usr/sbin/apparmor_parser", "/sbin/apparmor_parser" };

  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
    if (access (paths[i], X_OK) == 0)
      return paths[i];
  return "apparmor_parser";
}

/* The last non-empty line of TEXT (in place). */
static const char *
last_line (char *text)
{
  char *end = text + strlen (text), *start;

  while (end > text && (end[-1] == '\n' || end[-1] == ' '))
    *--end = '\0';
  start = strrchr (text, '\n');
  return start ? start + 1 : text;
}

static int
spawn_parser (const char *parser, const char *args, int in_fd, int err_fd, pid_t *pid,
              struct husk_error **err)
{
  char *const argv[] = { (char *) parser, (char *) args, NULL };
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  sigset_t none;
  int ret;

  posix_spawn_file_actions_init (&actions);
  posix_spawn_file_actions_adddup2 (&actions, in_fd, 0);
  posix_spawn_file_actions_addopen (&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2 (&actions, err_fd, 2);
  /* huskd blocks signals for its threads; the parser must not inherit that. */
  posix_spawnattr_init (&attr);
  sigemptyset (&none);
  posix_spawnattr_setsigmask (&attr, &none);
  posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETSIGMASK);
  ret = strchr (parser, '/') ? posix_spawn (pid, parser, &actions, &attr, argv, environ)
                             : posix_spawnp (pid, parser, &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy (&actions);
  posix_spawnattr_destroy (&attr);
  if (ret != 0)
    return husk_error_make (err, ret, "run `%s`", parser);
  return 0;
}

/* The profile text as the parser's stdin: a memfd, so a parser that exits
 * without reading cannot make us block or raise SIGPIPE. */
static int
text_fd (const char *text, struct husk_error **err)
{
  int fd = memfd_create ("husk-apparmor-profile", MFD_CLOEXEC);

  if (fd < 0)
    return husk_error_make (err, errno, "memfd_create");
  if (husk_write_all (fd, text, strlen (text)) < 0 || lseek (fd, 0, SEEK_SET) < 0)
    {
      husk_error_make (err, errno, "write the profile to a memfd");
      close (fd);
      return -1;
    }
  return fd;
}

/* Appends DATA (N < CAP bytes) to the LEN bytes of TAIL, keeping the
 * last CAP bytes. */
static size_t
keep_tail (char *tail, size_t len, size_t cap, const char *data, size_t n)
{
  if (len + n > cap)
    {
      memmove (tail, tail + (len + n - cap), cap - n);
      len = cap - n;
    }
  memcpy (tail + len, data, n);
  return len + n;
}

/* Reads the parser's stderr until EOF, keeping its last STDERR_KEEP bytes,
 * for PARSER_TIMEOUT_S at most; then kills it.  Returns its wait status. */
static int
collect_parser (pid_t pid, int err_fd, char *tail, size_t tail_size, bool *timed_out)
{
  struct timespec deadline;
  size_t len = 0;
  int status = 0;

  *timed_out = false;
  clock_gettime (CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += PARSER_TIMEOUT_S;
  for (;;)
    {
      struct pollfd pfd = { .fd = err_fd, .events = POLLIN };
      int left = husk_ms_until (&deadline);
      char buf[1024];
      ssize_t n;
      int ready;

      if (left <= 0)
        {
          *timed_out = true;
          kill (pid, SIGKILL);
          break;
        }
      ready = poll (&pfd, 1, left);
      if (ready < 0 && errno != EINTR)
        break;
      if (ready <= 0)
        continue;
      n = read (err_fd, buf, sizeof buf);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
        break;
      if (n < 0)
        continue;
      len = keep_tail (tail, len, tail_size - 1, buf, (size_t) n);
    }
  tail[len] = '\0';
  while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
    ;
  return status;
}

int
cri_apparmor_parse (const char *parser, const char *args, const char *text, struct husk_error **err)
{
  char tail[STDERR_KEEP];
  cleanup_close int in_fd = -1;
  int errp[2];
  bool timed_out;
  int status, ret;
  pid_t pid;

  if (parser == NULL)
    parser = find_parser ();
  in_fd = text_fd (text, err);
  if (in_fd < 0)
    return -1;
  if (pipe2 (errp, O_CLOEXEC) < 0)
    return husk_error_make (err, errno, "pipe");
  ret = spawn_parser (parser, args, in_fd, errp[1], &pid, err);
  close (errp[1]);
  if (ret < 0)
    {
      close (errp[0]);
      return -1;
    }
  status = collect_parser (pid, errp[0], tail, sizeof tail, &timed_out);
  close (errp[0]);
  if (timed_out)
    return husk_error_make (err, 0, "`%s %s` did not finish in %d s", parser, args, PARSER_TIMEOUT_S);
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    return husk_error_make (err, 0, "`%s %s` failed (status %d): %s", parser, args,
                            WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status),
                            *tail ? last_line (tail) : "no message");
  return 0;
}

void
cri_apparmor_init (struct cri_apparmor *aa)
{
  struct husk_error *err = NULL;

  memset (aa, 0, sizeof *aa);
  aa->profiles_file = xstrdup (CRI_APPARMOR_PROFILES_FILE);
  aa->enabled = apparmor_enabled ();
  if (!aa->enabled)
    {
      husk_log (HUSK_LOG_INFO, "AppArmor is not enabled on this host: RuntimeDefault confines nothing");
      return;
    }
  if (cri_apparmor_parse (NULL, "-Kr", default_text, &err) < 0)
    {
      aa->default_error = xasprintf ("load AppArmor profile `%s`: %s", CRI_APPARMOR_DEFAULT, err->msg);
      husk_warn ("%s; containers asking for RuntimeDefault will fail", aa->default_error);
      husk_error_free (&err);
      return;
    }
  aa->default_loaded = true;
  husk_log (HUSK_LOG_INFO, "AppArmor profile `%s` loaded", CRI_APPARMOR_DEFAULT);
}

void
cri_apparmor_clear (struct cri_apparmor *aa)
{
  free (aa->default_error);
  free (aa->profiles_file);
  memset (aa, 0, sizeof *aa);
}

int
cri_apparmor_profile_loaded (const char *profiles_file, const char *name)
{
  cleanup_free char *list = NULL;
  struct husk_error *err = NULL;
  size_t name_len = strlen (name);

  if (husk_read_file (profiles_file, &list, NULL, &err) < 0)
    {
      husk_error_free (&err);
      return -1;
    }
  for (char *line = list; line && *line; line = strchr (line, '\n') ? strchr (line, '\n') + 1 : NULL)
    if (strncmp (line, name, name_len) == 0 && strncmp (line + name_len, " (", 2) == 0)
      return 1;
  return 0;
}

enum
{
  AA_RUNTIME_DEFAULT = 0,
  AA_UNCONFINED = 1,
  AA_LOCALHOST = 2,
};

/* The deprecated string form, as containerd reads it. */
static int
parse_old (const struct cri_apparmor_choice *c, int *type, const char **ref, struct husk_error **err)
{
  const char *old = c->old ? c->old : "";

  *ref = NULL;
  if (strlen (old) > NAME_MAX_LEN + strlen ("localhost/"))
    return husk_error_kind (err, EINVAL, "%s.apparmor_profile: %zu bytes (a profile name has at most %d)",
                            c->field, strlen (old), NAME_MAX_LEN);
  if (*old == '\0' || strcmp (old, "runtime/default") == 0)
    *type = AA_RUNTIME_DEFAULT;
  else if (strcmp (old, "unconfined") == 0)
    *type = AA_UNCONFINED;
  else if (husk_str_has_prefix (old, "localhost/") && old[strlen ("localhost/")] != '\0')
    {
      *type = AA_LOCALHOST;
      *ref = old + strlen ("localhost/");
    }
  else
    return husk_error_kind (
        err, EINVAL, "%s.apparmor_profile `%s`: expected runtime/default, unconfined or localhost/NAME",
        c->field, old);
  return 0;
}

static int
resolve_localhost (const struct cri_apparmor *aa, const struct cri_apparmor_choice *c, const char *ref,
                   char **out, struct husk_error **err)
{
  /* As containerd: a "localhost/" prefix in the new field is forgiven. */
  if (ref && husk_str_has_prefix (ref, "localhost/"))
    ref += strlen ("localhost/");
  if (ref == NULL || *ref == '\0')
    return husk_error_kind (err, EINVAL, "%s.apparmor.localhost_ref: required for Localhost", c->field);
  if (strlen (ref) > NAME_MAX_LEN)
    return husk_error_kind (err, EINVAL,
                            "%s.apparmor.localhost_ref: %zu bytes (a profile name has at most %d)", c->field,
                            strlen (ref), NAME_MAX_LEN);
  for (const char *ch = ref; *ch; ch++)
    if ((unsigned char) *ch < 0x20 || *ch == 0x7f)
      return husk_error_kind (err, EINVAL, "%s.apparmor.localhost_ref: control character 0x%02x in the name",
                              c->field, (unsigned) (unsigned char) *ch);
  if (aa == NULL || !aa->enabled)
    return husk_error_kind (err, EAGAIN,
                            "AppArmor profile `%s` (%s.apparmor, Localhost): AppArmor is not enabled on "
                            "this host",
                            ref, c->field);
  /* Names of a policy namespace or a stack are left to the kernel. */
  if (ref[0] != ':' && strstr (ref, "//") == NULL && aa->profiles_file
      && cri_apparmor_profile_loaded (aa->profiles_file, ref) == 0)
    return husk_error_kind (err, EAGAIN,
                            "AppArmor profile `%s` (%s.apparmor, Localhost) is not loaded on this host", ref,
                            c->field);
  *out = xstrdup (ref);
  return 0;
}

int
cri_apparmor_resolve (const struct cri_apparmor *aa, const struct cri_apparmor_choice *c, char **out,
                      struct husk_error **err)
{
  const char *ref = c->localhost_ref;
  int type = c->type;

  *out = NULL;
  if (!c->has_profile && parse_old (c, &type, &ref, err) < 0)
    return -1;
  switch (type)
    {
    case AA_UNCONFINED:
      return 0;
    case AA_RUNTIME_DEFAULT:
      /* As containerd: a privileged container runs unconfined. */
      if (c->privileged || aa == NULL || !aa->enabled)
        return 0;
      if (!aa->default_loaded)
        return husk_error_kind (err, EAGAIN, "%s.apparmor: RuntimeDefault: %s", c->field,
                                aa->default_error ? aa->default_error : "husk-default is not loaded");
      *out = xstrdup (CRI_APPARMOR_DEFAULT);
      return 0;
    case AA_LOCALHOST:
      return resolve_localhost (aa, c, ref, out, err);
    default:
      return husk_error_kind (err, EINVAL, "%s.apparmor.profile_type: unknown value %d", c->field, type);
    }
}
