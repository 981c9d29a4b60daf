/* huskd: the CRI server.  kubelet, crictl or critest talk runtime.v1 gRPC
 * to it on a unix socket (default unix:///run/husk/husk.sock). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cri/config/config.h"
#include "cri/rpc/server.h"
#include "cri/server/service.h"
#include "cri/config/runtime_probe.h"
#include "cri/config/self_exe.h"
#include "cri/container/exec_helper.h"
#include "husk/cleanup.h"
#include "husk/sd_notify.h"
#include "husk/util.h"
#include "runtime/container.h"

struct huskd_args
{
  const char *config, *listen, *root, *state, *log_level, *log_format;
  bool print_config;
};

static void
usage (FILE *out)
{
  fprintf (out, "usage: huskd [options]\n\n"
                "husk's CRI server (runtime.v1 RuntimeService and ImageService).\n\n"
                "  --listen ADDR      unix socket to serve (default " HUSKD_DEFAULT_LISTEN ")\n"
                "  --root DIR         persistent state: images, containers (default " HUSKD_DEFAULT_ROOT ")\n"
                "  --state DIR        volatile state: runtime, sockets (default " HUSKD_DEFAULT_STATE ")\n"
                "  --config FILE      JSON configuration (runtimes, CNI dirs, registries, ...);\n"
                "                     default " HUSKD_DEFAULT_CONFIG " when it exists\n"
                "  --log-level LEVEL  error, warning, info or debug (default info; debug logs every RPC)\n"
                "  --log-format FMT   text or json, one object per line (default text)\n"
                "  --print-config     print the effective configuration (defaults, file, flags) as\n"
                "                     JSON and exit\n"
                "  --help, --version\n");
}

static int
parse_args (int argc, char **argv, struct huskd_args *args, struct husk_error **err)
{
  static const struct option options[] = {
    { "config", required_argument, NULL, 'c' },    { "listen", required_argument, NULL, 'l' },
    { "root", required_argument, NULL, 'r' },      { "state", required_argument, NULL, 's' },
    { "log-level", required_argument, NULL, 'L' }, { "log-format", required_argument, NULL, 'F' },
    { "print-config", no_argument, NULL, 'P' },    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, 'v' },         { NULL, 0, NULL, 0 },
  };
  int c;

  opterr = 0;
  while ((c = getopt_long (argc, argv, ":hv", options, NULL)) != -1)
    switch (c)
      {
      case 'c':
        args->config = optarg;
        break;
      case 'l':
        args->listen = optarg;
        break;
      case 'r':
        args->root = optarg;
        break;
      case 's':
        args->state = optarg;
        break;
      case 'L':
        args->log_level = optarg;
        break;
      case 'F':
        args->log_format = optarg;
        break;
      case 'P':
        args->print_config = true;
        break;
      case 'h':
        usage (stdout);
        exit (0);
      case 'v':
        printf ("huskd version %s\nCRI API v1\n", HUSK_VERSION);
        exit (0);
      case ':':
        return husk_error_make (err, 0, "option `%s` needs a value (see huskd --help)", argv[optind - 1]);
      default:
        return husk_error_make (err, 0, "unknown option `%s` (see huskd --help)", argv[optind - 1]);
      }
  if (optind < argc)
    return husk_error_make (err, 0, "unexpected argument `%s` (see huskd --help)", argv[optind]);
  return 0;
}

static void
override (char **field, const char *value)
{
  if (value == NULL)
    return;
  free (*field);
  *field = xstrdup (value);
}

/* SOURCE names where the value came from: the flag or the config file. */
static int
set_log_level (const char *level, const char *source, struct husk_error **err)
{
  static const struct
  {
    const char *name;
    enum husk_log_level level;
  } levels[] = {
    { "error", HUSK_LOG_ERROR },
    { "warning", HUSK_LOG_WARNING },
    { "info", HUSK_LOG_INFO },
    { "debug", HUSK_LOG_DEBUG },
  };
  for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
    if (strcmp (levels[i].name, level) == 0)
      {
        husk_log_set_level (levels[i].level);
        return 0;
      }
  return husk_error_make (err, 0, "%s `%s`: must be error, warning, info or debug", source, level);
}

static int
check_log_format (const char *format, const char *source, struct husk_error **err)
{
  if (strcmp (format, "text") == 0 || strcmp (format, "json") == 0)
    return 0;
  return husk_error_make (err, 0, "%s `%s`: must be text or json", source, format);
}

/* From here on every line carries its time; json lines are objects. */
static void
start_logging (const struct huskd_config *cfg)
{
  husk_log_set_file (2, strcmp (cfg->log_format, "json") == 0);
  husk_log_set_timestamps (1);
}

static void
print_config (const struct huskd_config *cfg)
{
  json_t *doc = huskd_config_to_json (cfg);
  cleanup_free char *text = json_dumps (doc, JSON_INDENT (2) | JSON_SORT_KEYS);

  json_decref (doc);
  printf ("%s\n", text);
}

/* --config, or the default file when it is there. */
static const char *
config_path (const struct huskd_args *args)
{
  if (args->config)
    return args->config;
  return access (HUSKD_DEFAULT_CONFIG, F_OK) == 0 ? HUSKD_DEFAULT_CONFIG : NULL;
}

/* Two daemons on one root or state would each roll back what they take
 * for the other's unfinished work: the first holds an flock on
 * DIR/huskd.lock for its whole life (close-on-exec, so no monitor or
 * plugin keeps it) and a second one stops at start. */
/* DIR made by hand (0755, 0777) keeps its mode through mkdir -p: it is
 * tightened to what huskd creates, group and others passing through
 * (0711), never listing or writing.  Tightened rather than refused: the
 * mode huskd wants is known and nothing else needs the wider one. */
static int
tighten_dir (const char *dir, const char *what, struct husk_error **err)
{
  struct stat st;

  if (stat (dir, &st) < 0)
    return husk_error_make (err, errno, "%s %s: stat", what, dir);
  if ((st.st_mode & 066) == 0)
    return 0;
  if (chmod (dir, st.st_mode & 07711) < 0)
    return husk_error_make (err, errno, "%s %s: tighten mode %04o to %04o", what, dir,
                            (unsigned) (st.st_mode & 07777), (unsigned) (st.st_mode & 07711));
  husk_warn ("%s %s was mode %04o, readable or writable by group or others: tightened to %04o", what, dir,
             (unsigned) (st.st_mode & 07777), (unsigned) (st.st_mode & 07711));
  return 0;
}

static int
lock_dir (const char *dir, const char *what, struct husk_error **err)
{
  char *path;
  int fd;

  if (husk_mkdir_p (dir, 0711, err) < 0 || tighten_dir (dir, what, err) < 0)
    return -1;
  path = xasprintf ("%s/huskd.lock", dir);
  fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  free (path);
  if (fd < 0)
    return husk_error_make (err, errno, "%s %s: open huskd.lock", what, dir);
  if (flock (fd, LOCK_EX | LOCK_NB) < 0)
    {
      int flock_errno = errno;
      close (fd);
      if (flock_errno == EWOULDBLOCK)
        return husk_error_make (err, 0, "%s %s is in use by another huskd", what, dir);
      return husk_error_make (err, flock_errno, "%s %s: lock huskd.lock", what, dir);
    }
  return 0; /* the fd stays open: the lock lives as long as huskd */
}

/* What writes cut short by a crash left: the temp files of atomic writes
 * whose writer is gone, where huskd, its monitors and the runtime write
 * (records of pods, containers and images, the CNI cache, runtime state
 * and exit files), two levels below --root and --state: never inside a
 * container's or a layer's files. */
static void
sweep_stale_tmp (const struct huskd_config *cfg)
{
  const char *dirs[] = { cfg->root, cfg->state };

  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
    {
      cleanup_strv char **removed = NULL;
      struct husk_error *err = NULL;

      if (husk_remove_stale_tmp (dirs[i], 2, &removed, &err) < 0)
        {
          husk_warn ("sweep temp files under %s: %s", dirs[i], err->msg);
          husk_error_free (&err);
        }
      for (size_t j = 0; removed && removed[j]; j++)
        husk_log (HUSK_LOG_INFO, "removed `%s`: a write cut short (its writer is gone)", removed[j]);
    }
}

/* Tells systemd (Type=notify) how far huskd is; without NOTIFY_SOCKET a
 * no-op.  A failure is only a warning: systemd then reports the unit
 * itself. */
static void notify (struct sd_notifier *notifier, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

static void
notify (struct sd_notifier *notifier, const char *fmt, ...)
{
  struct husk_error *err = NULL;
  char state[1024];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (state, sizeof state, fmt, ap);
  va_end (ap);
  if (sd_notifier_send (notifier, state, &err) < 0)
    {
      husk_warn ("%s", err->msg);
      husk_error_free (&err);
    }
}

/* A NOTIFY_SOCKET huskd cannot use does not keep the node's runtime from
 * starting: systemd, if it is waiting, will say the start timed out. */
static void
open_notifier (struct sd_notifier *notifier)
{
  struct husk_error *err = NULL;

  if (sd_notifier_open (notifier, &err) < 0)
    {
      husk_warn ("%s: not notifying systemd", err->msg);
      husk_error_free (&err);
    }
}

static int
serve (struct huskd_config *cfg, struct sd_notifier *notifier, struct husk_error **err)
{
  struct cri_service svc;
  struct rpc_server_options opts = { .socket_path = cfg->listen };
  struct rpc_server *server = NULL;
  const struct rpc_method *methods;
  size_t n = 0;
  sigset_t stop_signals;
  int sig;

  /* Before any thread starts (the exit watcher, gRPC's): only
   * rpc_server_run waits for them, so a SIGTERM during the start-up
   * recovery ends huskd cleanly once it serves. */
  sigemptyset (&stop_signals);
  sigaddset (&stop_signals, SIGINT);
  sigaddset (&stop_signals, SIGTERM);
  /* SIGHUP (a closed terminal, a `systemctl reload`) must not kill the
   * node's runtime: huskd has nothing to reload, so it stays blocked and
   * pending, and children start with an empty mask. */
  sigaddset (&stop_signals, SIGHUP);
  pthread_sigmask (SIG_BLOCK, &stop_signals, NULL);
  if (lock_dir (cfg->root, "--root", err) < 0 || lock_dir (cfg->state, "--state", err) < 0)
    return -1;
  sweep_stale_tmp (cfg);
  /* While huskd is one small thread: the helper's forks stay cheap. */
  if (cri_exec_helper_start (err) < 0)
    {
      husk_warn ("%s: ExecSync forks from huskd itself", (*err)->msg);
      husk_error_free (err);
    }
  cri_runtime_probe_start (cfg);
  notify (notifier, "STATUS=recovering pods and containers under %s and %s", cfg->root, cfg->state);
  if (cri_service_init (&svc, cfg, err) < 0)
    {
      cri_runtime_probe_join ();
      return -1;
    }
  methods = cri_service_methods (&svc, &n);
  if (rpc_server_start (&opts, methods, n, &server, err) < 0)
    {
      cri_service_clear (&svc);
      cri_runtime_probe_join ();
      free ((void *) methods);
      return -1;
    }
  husk_log (HUSK_LOG_INFO, "serving CRI v1 on %s (root %s, state %s)", cfg->listen, cfg->root, cfg->state);
  notify (notifier, "READY=1\nSTATUS=serving CRI v1 on %s", cfg->listen);
  sig = rpc_server_run (server);
  husk_log (HUSK_LOG_INFO, "signal %d: shutting down", sig);
  notify (notifier, "STOPPING=1\nSTATUS=shutting down (signal %d)", sig);
  rpc_server_shutdown (server);
  cri_service_clear (&svc);
  cri_runtime_probe_join ();
  free ((void *) methods);
  return 0;
}

static int
load_config (const struct huskd_args *args, struct huskd_config *cfg, struct husk_error **err)
{
  const char *path = config_path (args);
  cleanup_free char *level_source = NULL, *format_source = NULL;

  if (huskd_config_load (path, cfg, err) < 0)
    return -1;
  override (&cfg->listen, args->listen);
  override (&cfg->root, args->root);
  override (&cfg->state, args->state);
  override (&cfg->log_level, args->log_level);
  override (&cfg->log_format, args->log_format);
  level_source = args->log_level ? xstrdup ("--log-level") : xasprintf ("%s: log_level", path);
  format_source = args->log_format ? xstrdup ("--log-format") : xasprintf ("%s: log_format", path);
  if (huskd_config_finish (cfg, path, err) < 0 || set_log_level (cfg->log_level, level_source, err) < 0)
    return -1;
  return check_log_format (cfg->log_format, format_source, err);
}

/* A client that hangs up must cost huskd a write error (EPIPE), never the
 * process: SIGPIPE is blocked in every thread (each inherits the mask from
 * this one, gRPC's too), rather than ignored, because an ignored signal
 * survives execve while a blocked one is cleared with the mask every
 * child of huskd resets: the monitor, the runtime and the containers get
 * SIGPIPE as usual.  The servers also send with MSG_NOSIGNAL. */
static void
block_sigpipe (void)
{
  sigset_t pipe_signal;

  sigemptyset (&pipe_signal);
  sigaddset (&pipe_signal, SIGPIPE);
  pthread_sigmask (SIG_BLOCK, &pipe_signal, NULL);
}

/* Mounts, namespaces, cgroups and CNI all need root: refused at start
 * (one line, like a bad config), not Ready and then failing every pod. */
static int
check_root (struct husk_error **err)
{
  if (geteuid () == 0)
    return 0;
  return husk_error_make (
      err, 0, "must run as root (it mounts, makes namespaces and cgroups, runs CNI plugins); euid is %d",
      (int) geteuid ());
}

/* huskd forks ExecSync's processes straight into containers (cri/container/
 * exec_sync.c): until their execve they are huskd, and a container binary
 * that is `#!/proc/self/exe` would run huskd's file inside the container,
 * which could then reopen and overwrite it (CVE-2019-5736).  So huskd runs
 * from a sealed copy of itself, as `husk create/exec` do; the path on disk
 * goes over the re-exec in HUSKD_EXE, to find husk and its helpers (after
 * it /proc/self/exe names the memfd, or the binary at the root of its
 * private overlay). */
static int
run_from_sealed_copy (char **argv, struct husk_error **err)
{
  if (!container_running_from_sealed_exe ())
    {
      char *on_disk = realpath ("/proc/self/exe", NULL);
      if (on_disk)
        setenv ("HUSKD_EXE", on_disk, 1);
      free (on_disk);
    }
  if (container_ensure_cloned_binary (argv, err) < 0)
    return husk_error_wrap (err, "huskd");
  cri_set_self_exe (getenv ("HUSKD_EXE"));
  unsetenv ("HUSKD_EXE");
  prctl (PR_SET_NAME, "huskd");
  return 0;
}

int
main (int argc, char **argv)
{
  struct huskd_args args = { 0 };
  struct huskd_config cfg = { 0 };
  struct sd_notifier notifier = { .fd = -1 };
  struct husk_error *err = NULL;
  int ret = 1;

  husk_log_set_prog ("huskd");
  husk_log_set_level (HUSK_LOG_INFO);
  if (run_from_sealed_copy (argv, &err) < 0)
    {
      husk_error_report (&err, "huskd");
      return 1;
    }
  block_sigpipe ();
  /* Started with SIGCHLD ignored, the kernel would reap the CNI plugins
   * and runtime processes before huskd could read their exit status. */
  signal (SIGCHLD, SIG_DFL);
  /* First, so that a bad config file is in `systemctl status` too. */
  open_notifier (&notifier);
  if (parse_args (argc, argv, &args, &err) == 0 && load_config (&args, &cfg, &err) == 0)
    {
      if (args.print_config)
        {
          print_config (&cfg);
          ret = 0;
        }
      else if (check_root (&err) == 0)
        {
          start_logging (&cfg);
          if (serve (&cfg, &notifier, &err) == 0)
            ret = 0;
        }
    }
  if (err)
    {
      /* systemctl status shows why, beside the journal's line. */
      if (notifier.fd >= 0)
        notify (&notifier, "STATUS=failed: %s", err->msg);
      husk_error_report (&err, "huskd");
    }
  sd_notifier_close (&notifier);
  huskd_config_clear (&cfg);
  return ret;
}
