/* husk-monitor's entry: options, detaching from the starter (double fork,
 * setsid: it survives huskd being killed), the {"pid"} / {"error"} report
 * on the sync fd, then the run phase and the exit file.  The protocol with
 * huskd is in the usage text below. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "cri/monitor/monitor.h"

static const char usage_text[]
    = "usage: husk-monitor --id ID --bundle DIR --log-path FILE --exit-dir DIR [options]\n"
      "\n"
      "Runs `RUNTIME --root DIR create` for one container and stays with it, detached\n"
      "from its starter: writes the container's output to FILE in the CRI log format,\n"
      "and EXIT_DIR/ID ({\"exit_code\",\"signal\",\"oom_killed\",\"finished_at\"}) when\n"
      "its init exits.  Once the container is created it writes one line to the sync\n"
      "fd, {\"pid\": N, \"monitor_pid\": M}, or {\"error\": \"...\"} if creating failed,\n"
      "and closes it.  The starter then runs `RUNTIME start ID` itself.\n"
      "SIGUSR1 reopens FILE (after it was moved away), then answers in\n"
      "EXIT_DIR/ID.reopen: {\"monotonic_ns\": N} (CLOCK_MONOTONIC when the reopen\n"
      "began), with \"errno\" and \"error\" when it failed; the file is replaced\n"
      "atomically each time and removed at exit.  SIGTERM and SIGINT are passed on\n"
      "to the container's init.\n"
      "When FILE cannot take output (a full disk) whole records are dropped, never\n"
      "part of one; once it can, a stderr record says how many were dropped.\n"
      "\n"
      "Options:\n"
      "  --runtime PATH            runc-compatible runtime (default: husk next to husk-monitor)\n"
      "  --runtime-root DIR        the runtime's --root\n"
      "  --runtime-arg FLAG        a global flag of the runtime, after --root (repeat it)\n"
      "  --start-and-wait          run `RUNTIME start ID` with the container's stdio and learn\n"
      "                            its exit from `RUNTIME wait ID` (a runtime that owns the pod:\n"
      "                            runsc); the starter does not run `start`\n"
      "  --pid-file FILE           the container's pid file (default: a private one)\n"
      "  --terminal                the container has a terminal (--console-socket)\n"
      "  --restore DIR             `RUNTIME restore --detach --image-path DIR` instead of create\n"
      "  --stdin                   the container's stdin is a pipe the monitor holds\n"
      "  --stdin-fd N              copy fd N into that stdin; close it at N's EOF\n"
      "  --log-dir DIR             FILE lies under DIR (the pod's log dir) and is opened\n"
      "                            from it with no symlink followed below DIR\n"
      "  --log-max-size BYTES      truncate FILE when it would grow past BYTES\n"
      "  --sync-fd N               report on fd N (default: stdout)\n"
      "  --monitor-pid-file FILE   write the monitor's own pid here (removed at exit)\n"
      "  --monitor-log FILE        append the monitor's warnings here\n"
      "  --attach-socket PATH      listen for attach clients at PATH (SOCK_SEQPACKET, 0600,\n"
      "                            removed at exit): each gets [1|2]+output (stdout, stderr)\n"
      "                            and at the end 3+\"exit code\"; each may send 0+stdin,\n"
      "                            1 (close stdin; ^D on a terminal), 2+rows+cols (uint16\n"
      "                            LE: the terminal's size).  A client that cannot take\n"
      "                            output at once is dropped\n"
      "  --help, --version\n";

enum
{
  OPT_ID = 1000,
  OPT_BUNDLE,
  OPT_RUNTIME,
  OPT_RUNTIME_ROOT,
  OPT_LOG_PATH,
  OPT_EXIT_DIR,
  OPT_PID_FILE,
  OPT_MONITOR_PID_FILE,
  OPT_MONITOR_LOG,
  OPT_ATTACH_SOCKET,
  OPT_RESTORE,
  OPT_LOG_DIR,
  OPT_LOG_MAX_SIZE,
  OPT_STDIN,
  OPT_STDIN_FD,
  OPT_TERMINAL,
  OPT_SYNC_FD,
  OPT_RUNTIME_ARG,
  OPT_START_AND_WAIT,
  OPT_HELP,
  OPT_VERSION,
};

static const struct option long_options[] = {
  { "id", required_argument, NULL, OPT_ID },
  { "bundle", required_argument, NULL, OPT_BUNDLE },
  { "runtime", required_argument, NULL, OPT_RUNTIME },
  { "runtime-root", required_argument, NULL, OPT_RUNTIME_ROOT },
  { "log-path", required_argument, NULL, OPT_LOG_PATH },
  { "exit-dir", required_argument, NULL, OPT_EXIT_DIR },
  { "pid-file", required_argument, NULL, OPT_PID_FILE },
  { "monitor-pid-file", required_argument, NULL, OPT_MONITOR_PID_FILE },
  { "monitor-log", required_argument, NULL, OPT_MONITOR_LOG },
  { "attach-socket", required_argument, NULL, OPT_ATTACH_SOCKET },
  { "restore", required_argument, NULL, OPT_RESTORE },
  { "log-dir", required_argument, NULL, OPT_LOG_DIR },
  { "log-max-size", required_argument, NULL, OPT_LOG_MAX_SIZE },
  { "stdin", no_argument, NULL, OPT_STDIN },
  { "stdin-fd", required_argument, NULL, OPT_STDIN_FD },
  { "terminal", no_argument, NULL, OPT_TERMINAL },
  { "sync-fd", required_argument, NULL, OPT_SYNC_FD },
  { "runtime-arg", required_argument, NULL, OPT_RUNTIME_ARG },
  { "start-and-wait", no_argument, NULL, OPT_START_AND_WAIT },
  { "help", no_argument, NULL, OPT_HELP },
  { "version", no_argument, NULL, OPT_VERSION },
  { NULL, 0, NULL, 0 },
};

static int
parse_fd (const char *option, const char *value, int *fd, struct husk_error **err)
{
  long long n;

  if (husk_parse_int64 (value, 0, INT_MAX, &n) < 0 || fcntl ((int) n, F_GETFD) < 0)
    return husk_error_make (err, 0, "%s `%s`: not an open fd", option, value);
  *fd = (int) n;
  return 0;
}

static int
set_option (struct monitor_options *opts, int c, const char *value, struct husk_error **err)
{
  const char **strings[] = {
    [OPT_ID - OPT_ID] = &opts->id,
    [OPT_BUNDLE - OPT_ID] = &opts->bundle,
    [OPT_RUNTIME - OPT_ID] = &opts->runtime,
    [OPT_RUNTIME_ROOT - OPT_ID] = &opts->runtime_root,
    [OPT_LOG_PATH - OPT_ID] = &opts->log_path,
    [OPT_EXIT_DIR - OPT_ID] = &opts->exit_dir,
    [OPT_PID_FILE - OPT_ID] = &opts->pid_file,
    [OPT_MONITOR_PID_FILE - OPT_ID] = &opts->monitor_pid_file,
    [OPT_MONITOR_LOG - OPT_ID] = &opts->monitor_log,
    [OPT_ATTACH_SOCKET - OPT_ID] = &opts->attach_socket,
    [OPT_RESTORE - OPT_ID] = &opts->restore_dir,
    [OPT_LOG_DIR - OPT_ID] = &opts->log_dir,
  };

  if (c >= OPT_ID && c <= OPT_LOG_DIR)
    *strings[c - OPT_ID] = value;
  else if (c == OPT_LOG_MAX_SIZE)
    {
      if (husk_parse_int64 (value, 0, LLONG_MAX, &opts->log_max_size) < 0)
        return husk_error_make (err, 0, "--log-max-size `%s`: not a number of bytes", value);
    }
  else if (c == OPT_STDIN)
    opts->stdin_pipe = true;
  else if (c == OPT_TERMINAL)
    opts->terminal = true;
  else if (c == OPT_START_AND_WAIT)
    opts->start_and_wait = true;
  else if (c == OPT_RUNTIME_ARG)
    opts->runtime_args = husk_strv_append (opts->runtime_args, value);
  else if (c == OPT_STDIN_FD)
    return parse_fd ("--stdin-fd", value, &opts->stdin_fd, err);
  else if (c == OPT_SYNC_FD)
    return parse_fd ("--sync-fd", value, &opts->sync_fd, err);
  else
    return husk_error_make (err, 0, "unknown option `%s` (see --help)", value);
  return 0;
}

static char *
default_runtime (void)
{
  char self[PATH_MAX];
  ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);

  if (n < 0)
    return xstrdup ("husk");
  self[n] = '\0';
  return xasprintf ("%s/husk", dirname (self));
}

/* Whether RUNTIME is OURS, the husk installed beside us (the same file),
 * which create may exec from a private read-only overlay: husk then runs
 * sealed from the start and skips its own re-exec (runtime/cloned_binary.c). */
static bool
is_husk_beside_us (const char *runtime, const char *ours)
{
  struct stat a, b;

  return stat (ours, &a) == 0 && stat (runtime, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static int
check_options (struct monitor_options *opts, struct husk_error **err)
{
  const char *required[] = { opts->id, opts->bundle, opts->log_path, opts->exit_dir };
  const char *names[] = { "--id", "--bundle", "--log-path", "--exit-dir" };

  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
    if (required[i] == NULL || *required[i] == '\0')
      return husk_error_make (err, 0, "%s is required (see --help)", names[i]);
  if (strchr (opts->id, '/') || strcmp (opts->id, ".") == 0 || strcmp (opts->id, "..") == 0)
    return husk_error_make (err, 0, "--id `%s`: not a container id", opts->id);
  /* We chdir to / before making it. */
  if (opts->attach_socket && opts->attach_socket[0] != '/')
    return husk_error_make (err, 0, "--attach-socket `%s`: not an absolute path", opts->attach_socket);
  if (opts->stdin_fd >= 0 && !opts->stdin_pipe)
    return husk_error_make (err, 0, "--stdin-fd needs --stdin");
  if (opts->start_and_wait && opts->restore_dir)
    return husk_error_make (err, 0, "--start-and-wait does not take --restore");
  if (access (opts->runtime, X_OK) < 0)
    return husk_error_make (err, errno, "--runtime `%s`", opts->runtime);
  return 0;
}

static int
parse_options (int argc, char **argv, struct monitor_options *opts, char **runtime_storage,
               struct husk_error **err)
{
  int c;

  opterr = 0;
  while ((c = getopt_long (argc, argv, "+", long_options, NULL)) != -1)
    {
      if (c == OPT_HELP || c == OPT_VERSION)
        {
          fputs (c == OPT_HELP ? usage_text : "husk-monitor " HUSK_VERSION "\n", stdout);
          exit (0);
        }
      if (set_option (opts, c, c == '?' || c == ':' ? argv[optind - 1] : optarg, err) < 0)
        return -1;
    }
  if (optind < argc)
    return husk_error_make (err, 0, "unexpected argument `%s` (see --help)", argv[optind]);
  *runtime_storage = default_runtime ();
  if (opts->runtime == NULL)
    opts->runtime = *runtime_storage;
  if (check_options (opts, err) < 0)
    return -1;
  opts->runtime_is_ours = is_husk_beside_us (opts->runtime, *runtime_storage);
  return 0;
}

/* ------------------------------------------------------------ detaching */

/* Moves FD above stdio with FD_CLOEXEC, so that no runtime inherits it. */
static int
move_fd_up (int fd)
{
  int moved = fcntl (fd, F_DUPFD_CLOEXEC, 3);

  if (moved >= 0 && fd > 2)
    close (fd);
  return moved;
}

static int
compare_ints (const void *a, const void *b)
{
  return *(const int *) a - *(const int *) b;
}

/* Nothing of the starter's survives but the fds we were told about:
 * signal mask and dispositions (huskd blocks some for gRPC), other fds. */
static void
reset_inherited_state (struct monitor_options *opts)
{
  int keep[5] = { 0, 1, 2 };
  size_t n_keep = 3;
  sigset_t none;

  sigemptyset (&none);
  sigprocmask (SIG_SETMASK, &none, NULL);
  for (int sig = 1; sig < NSIG; sig++)
    signal (sig, SIG_DFL);
  opts->sync_fd = move_fd_up (opts->sync_fd >= 0 ? opts->sync_fd : 1);
  keep[n_keep++] = opts->sync_fd;
  if (opts->stdin_fd >= 0)
    keep[n_keep++] = opts->stdin_fd = move_fd_up (opts->stdin_fd);
  qsort (keep, n_keep, sizeof keep[0], compare_ints);
  for (size_t i = 0; i + 1 < n_keep; i++)
    if (keep[i + 1] > keep[i] + 1)
      close_range ((unsigned) keep[i] + 1, (unsigned) keep[i + 1] - 1, 0);
  close_range ((unsigned) keep[n_keep - 1] + 1, ~0U, 0);
}

/* Returns in the grandchild only: a new session, not a child of the
 * starter, so a SIGKILL of huskd (or of its process group) leaves it be.
 * The starter's child exits 0 once the grandchild exists. */
static void
detach (void)
{
  int status;
  pid_t child = fork ();

  if (child < 0)
    {
      perror ("husk-monitor: fork");
      exit (1);
    }
  if (child > 0)
    exit (waitpid (child, &status, 0) == child && WIFEXITED (status) ? WEXITSTATUS (status) : 1);
  if (setsid () < 0)
    _exit (1);
  child = fork ();
  if (child != 0)
    _exit (child < 0 ? 1 : 0);
}

static int
redirect_stdio (const struct monitor_options *opts, struct husk_error **err)
{
  const char *targets[3] = { "/dev/null", "/dev/null", opts->monitor_log ? opts->monitor_log : "/dev/null" };

  for (int fd = 0; fd < 3; fd++)
    {
      int flags = fd == 0 ? O_RDONLY : O_WRONLY | O_APPEND | O_CREAT;
      int opened = open (targets[fd], flags | O_CLOEXEC | O_NOCTTY, 0640);

      if (opened < 0)
        return husk_error_make (err, errno, "open `%s`", targets[fd]);
      if (dup2 (opened, fd) < 0)
        return husk_error_make (err, errno, "dup2 onto fd %d", fd);
      close (opened);
    }
  if (chdir ("/") < 0)
    return husk_error_make (err, errno, "chdir /");
  return 0;
}

static int
setup_signals (struct monitor *monitor, struct husk_error **err)
{
  static const int handled[] = { SIGCHLD, SIGUSR1, SIGTERM, SIGINT, SIGHUP, SIGQUIT };
  sigset_t set;

  sigemptyset (&set);
  for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++)
    sigaddset (&set, handled[i]);
  if (sigprocmask (SIG_BLOCK, &set, NULL) < 0)
    return husk_error_make (err, errno, "block signals");
  monitor->signal_fd = signalfd (-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (monitor->signal_fd < 0)
    return husk_error_make (err, errno, "signalfd");
  signal (SIGPIPE, SIG_IGN);
  /* The container's init is re-parented to us when `create` exits. */
  if (prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
    return husk_error_make (err, errno, "become a child subreaper");
  return 0;
}

/* ------------------------------------------------------------ the report */

static void
report (int *sync_fd, json_t *doc)
{
  char *text = json_dumps (doc, JSON_COMPACT);

  /* The starter may be gone (huskd killed): the container goes on. */
  if (text && husk_write_all (*sync_fd, text, strlen (text)) == 0)
    husk_write_all (*sync_fd, "\n", 1);
  free (text);
  json_decref (doc);
  husk_closep (sync_fd);
}

static int
write_monitor_pid (const char *path, struct husk_error **err)
{
  cleanup_free char *text = xasprintf ("%d", (int) getpid ());

  if (path == NULL)
    return 0;
  return husk_write_file_replace (path, text, strlen (text), 0644, err);
}

/* Everything up to the report: any failure is the {"error"} line. */
static int
start_container (struct monitor *monitor, struct husk_error **err)
{
  const struct monitor_options *opts = monitor->opts;

  if (redirect_stdio (opts, err) < 0 || setup_signals (monitor, err) < 0)
    return -1;
  if (husk_mkdir_p (opts->exit_dir, 0755, err) < 0)
    return husk_error_wrap (err, "create the exit dir");
  /* Before the report: huskd may attach as soon as it has it. */
  if (opts->attach_socket && attach_listen (&monitor->attach, opts->attach_socket, err) < 0)
    return -1;
  if (log_file_open (&monitor->log, opts->log_dir, opts->log_path, opts->log_max_size, err) < 0
      || write_monitor_pid (opts->monitor_pid_file, err) < 0)
    return -1;
  log_stream_init (&monitor->streams[MONITOR_STDOUT], "stdout");
  log_stream_init (&monitor->streams[MONITOR_STDERR], "stderr");
  if (monitor_create_container (monitor, err) < 0)
    return -1;
  /* For a container inside a handler's sandbox (runsc) CONTAINER_PID is
   * the sandbox's: its cgroup holds the whole pod, and an OOM kill there
   * takes the sentry, so every container of the pod was OOM killed. */
  monitor->oom_events_path = monitor_oom_events_path (monitor->container_pid);
  monitor->oom_kills_at_start = monitor_oom_kills (monitor->oom_events_path);
  return 0;
}

/* Before the exit file: once huskd sees that, nothing of ours is left. */
static void
remove_reopen_answer (const struct monitor_options *opts)
{
  cleanup_free char *path = monitor_reopen_answer_path (opts->exit_dir, opts->id);

  if (unlink (path) < 0 && errno != ENOENT)
    husk_warn ("remove `%s`: %s", path, strerror (errno));
}

static int
run_monitor (struct monitor_options *opts)
{
  cleanup_free struct monitor *monitor = xcalloc (1, sizeof *monitor);
  struct husk_error *err = NULL;
  struct monitor_exit exit_status;
  int rc = 0;

  monitor->opts = opts;
  monitor->signal_fd = monitor->stdin_target_fd = monitor->wait_fd = -1;
  monitor->output_fd[MONITOR_STDOUT] = monitor->output_fd[MONITOR_STDERR] = -1;
  monitor->log.fd = -1;
  monitor->attach.listen_fd = -1;
  if (start_container (monitor, &err) < 0)
    {
      report (&opts->sync_fd, json_pack ("{s:s}", "error", err->msg));
      husk_error_report (&err, "husk-monitor");
      attach_close (&monitor->attach);
      if (monitor->log.path)
        log_file_close (&monitor->log);
      if (opts->monitor_pid_file)
        unlink (opts->monitor_pid_file);
      return 1;
    }
  report (&opts->sync_fd,
          json_pack ("{s:i, s:i}", "pid", (int) monitor->container_pid, "monitor_pid", (int) getpid ()));
  rc = monitor_run (monitor, &exit_status, &err);
  attach_close (&monitor->attach);
  remove_reopen_answer (opts);
  if (rc < 0 || monitor_exit_write (opts->exit_dir, opts->id, &exit_status, &err) < 0)
    {
      husk_error_report (&err, "husk-monitor");
      rc = 1;
    }
  /* A client that does not get the exit code sees an error (cri/attach.h). */
  if (rc == 0)
    attach_finish (&monitor->attach, exit_status.exit_code);
  log_file_close (&monitor->log);
  free (monitor->oom_events_path);
  if (opts->monitor_pid_file)
    unlink (opts->monitor_pid_file);
  return rc;
}

int
main (int argc, char **argv)
{
  struct monitor_options opts = { .sync_fd = -1, .stdin_fd = -1 };
  cleanup_free char *runtime = NULL;
  struct husk_error *err = NULL;
  int rc;

  husk_log_set_prog ("husk-monitor");
  if (parse_options (argc, argv, &opts, &runtime, &err) < 0)
    {
      husk_strvfreep (&opts.runtime_args);
      husk_error_report (&err, "husk-monitor");
      return 2;
    }
  reset_inherited_state (&opts);
  detach ();
  rc = run_monitor (&opts);
  husk_strvfreep (&opts.runtime_args);
  return rc;
}
