/* husk container inspect|stats|top: what a container is and does, in
 * podman's shapes (inspect's essential fields, stats' and top's columns). */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cri/cli/cli.h"
#include "husk/cgroup_stats.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/container.h"
#include "runtime/state.h"

/* ---------------------------------------------------------------- inspect */

#define INSPECT_USAGE                                                                                        \
  "usage: husk container inspect [-f TEMPLATE] CONTAINER...\n"                                               \
  "  -f, --format TEMPLATE  each container as TEMPLATE: text with {{.Path.To.Field}}\n"                      \
  "                         (a string as it is, anything else as JSON), e.g. {{.State.Pid}}\n"               \
  "  -h, --help             this text\n"

/* "80/tcp": [{"HostIp": "", "HostPort": "8080"}], as podman's Ports. */
static json_t *
ports_object (const struct container_record *rec)
{
  json_t *ports = json_object ();

  for (size_t i = 0; i < rec->n_ports; i++)
    {
      const struct cni_port_mapping *p = &rec->ports[i];
      char key[32], host[16];
      json_t *list;

      snprintf (key, sizeof key, "%d/%s", p->container_port, p->protocol);
      snprintf (host, sizeof host, "%d", p->host_port);
      list = json_object_get (ports, key);
      if (list == NULL)
        json_object_set_new (ports, key, list = json_array ());
      json_array_append_new (list, json_pack ("{s:s, s:s}", "HostIp", p->host_ip ?: "", "HostPort", host));
    }
  return ports;
}

static json_t *
state_object (const struct container_cli_env *env, const struct container_record *rec)
{
  struct container_state *state = NULL;
  struct husk_error *ignored = NULL;
  cleanup_free char *status = containers_status (&env->containers, rec);
  cleanup_free char *finished = NULL;
  int code = 0;
  bool running = strcmp (status, "running") == 0 || strcmp (status, "paused") == 0;
  pid_t pid = 0;

  if (running && state_load (env->containers.runtime_root, rec->id, &state, &ignored) == 0)
    pid = state->pid;
  husk_error_free (&ignored);
  state_free (state);
  containers_exit_code (&env->containers, rec, &code, &finished);
  if (husk_str_has_prefix (status, "exited"))
    status[6] = '\0';
  return json_pack ("{s:s, s:b, s:b, s:i, s:i, s:s, s:s}", "Status", status, "Running", running, "Paused",
                    strcmp (status, "paused") == 0, "Pid", (int) pid, "ExitCode", code, "StartedAt",
                    rec->started ?: "", "FinishedAt", finished ?: rec->finished ?: "");
}

static json_t *
config_object (const struct container_record *rec, json_t *spec)
{
  json_t *process = json_object_get (spec, "process");
  json_t *user = json_object_get (process, "user");
  char user_text[32];

  snprintf (user_text, sizeof user_text, "%lld:%lld", json_integer_value (json_object_get (user, "uid")),
            json_integer_value (json_object_get (user, "gid")));
  return json_pack ("{s:O?, s:s, s:O?, s:O?, s:O?, s:b, s:s?, s:s}", "Hostname",
                    json_object_get (spec, "hostname"), "User", user_text, "Env",
                    json_object_get (process, "env"), "Cmd", json_object_get (process, "args"), "WorkingDir",
                    json_object_get (process, "cwd"), "Tty", rec->tty, "StopSignal", rec->stop_signal,
                    "Image", rec->image);
}

static json_t *
host_config_object (const struct container_record *rec, json_t *spec)
{
  json_t *resources = json_object_get (json_object_get (spec, "linux"), "resources");
  json_t *cpu = json_object_get (resources, "cpu");
  json_int_t quota = json_integer_value (json_object_get (cpu, "quota"));
  json_int_t period = json_integer_value (json_object_get (cpu, "period"));

  return json_pack ("{s:s, s:b, s:o, s:I, s:I, s:I, s:b}", "NetworkMode", rec->network ?: "none",
                    "AutoRemove", rec->auto_remove, "PortBindings", ports_object (rec), "Memory",
                    json_integer_value (json_object_get (json_object_get (resources, "memory"), "limit")),
                    "NanoCpus", period > 0 ? quota * 1000000000 / period : 0, "PidsLimit",
                    json_integer_value (json_object_get (json_object_get (resources, "pids"), "limit")),
                    "ReadonlyRootfs",
                    json_is_true (json_object_get (json_object_get (spec, "root"), "readonly")));
}

/* The bind mounts the user asked for (-v), not the standard ones. */
static json_t *
mounts_array (json_t *spec)
{
  json_t *mounts = json_array ();
  size_t i, j;
  json_t *m, *o;

  json_array_foreach (json_object_get (spec, "mounts"), i, m)
  {
    bool ro = false;
    const char *source = json_string_value (json_object_get (m, "source"));

    if (strcmp (json_string_value (json_object_get (m, "type")) ?: "", "bind") != 0 || source == NULL)
      continue;
    json_array_foreach (json_object_get (m, "options"), j, o) ro
        |= strcmp (json_string_value (o) ?: "", "ro") == 0;
    json_array_append_new (mounts, json_pack ("{s:s, s:s, s:O, s:b}", "Type", "bind", "Source", source,
                                              "Destination", json_object_get (m, "destination"), "RW", !ro));
  }
  return mounts;
}

static int
inspect_one (const struct container_cli_env *env, const struct container_record *rec, json_t **out,
             struct husk_error **err)
{
  cleanup_free char *bundle = containers_bundle_dir (env->containers.image_root, rec->id);
  cleanup_free char *config_path = xasprintf ("%s/config.json", bundle);
  cleanup_free char *log = containers_log_path (&env->containers, rec->id);
  cleanup_free char *path = NULL;
  json_error_t jerr;
  json_t *spec = json_load_file (config_path, 0, &jerr);
  json_t *args;

  if (spec == NULL)
    return husk_error_make (err, 0, "%s: %s", config_path, jerr.text);
  args = json_deep_copy (json_object_get (json_object_get (spec, "process"), "args"));
  path = xstrdup (json_string_value (json_array_get (args, 0)) ?: "");
  json_array_remove (args, 0);
  *out = json_pack ("{s:s, s:s, s:s, s:o, s:o, s:s, s:s, s:s, s:i, s:o, s:{s:s?, s:s?, s:o, s:s?}, s:o, s:o,"
                    " s:s}",
                    "Id", rec->id, "Created", rec->created ?: "", "Path", path, "Args", args, "State",
                    state_object (env, rec), "Image", rec->image_id ?: "", "ImageName", rec->image ?: "",
                    "Name", rec->name, "RestartCount", 0, "Config", config_object (rec, spec),
                    "NetworkSettings", "IPAddress", rec->ip, "SandboxKey", rec->netns, "Ports",
                    ports_object (rec), "Network", rec->network, "HostConfig", host_config_object (rec, spec),
                    "Mounts", mounts_array (spec), "LogPath", rec->detached ? log : "");
  json_decref (spec);
  if (*out == NULL)
    return husk_error_make (err, 0, "inspect %s: could not build the document", rec->id);
  return 0;
}

/* {{.A.B}} in TEMPLATE replaced by DOC's A.B. */
static int
print_template (const char *template, json_t *doc, struct husk_error **err)
{
  const char *p = template;

  while (*p)
    {
      const char *open = strstr (p, "{{"), *close;
      cleanup_free char *path = NULL;
      json_t *v = doc;
      char *save = NULL;

      if (open == NULL)
        {
          fputs (p, stdout);
          break;
        }
      fwrite (p, 1, (size_t) (open - p), stdout);
      close = strstr (open, "}}");
      if (close == NULL)
        return husk_error_make (err, 0, "container inspect: --format `%s`: `{{` without `}}`", template);
      path = xasprintf ("%.*s", (int) (close - open - 2), open + 2);
      {
        char *start = path + strspn (path, " ");
        size_t l = strcspn (start, " ");
        memmove (path, start, l);
        path[l] = '\0';
      }
      if (path[0] != '.')
        return husk_error_make (err, 0, "container inspect: --format: `%s` is not a .Field path", path);
      for (char *key = strtok_r (path + 1, ".", &save); key && v; key = strtok_r (NULL, ".", &save))
        v = json_object_get (v, key);
      if (v == NULL)
        return husk_error_make (err, 0, "container inspect: --format: no field `%.*s`",
                                (int) (close - open - 2), open + 2);
      if (json_is_string (v))
        fputs (json_string_value (v), stdout);
      else
        {
          cleanup_free char *text = json_dumps (v, JSON_COMPACT | JSON_ENCODE_ANY);
          fputs (text, stdout);
        }
      p = close + 2;
    }
  putchar ('\n');
  return 0;
}

int
container_cli_inspect (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = { { "format", required_argument, NULL, 'f' },
                                           { "help", no_argument, NULL, 'h' },
                                           { NULL, 0, NULL, 0 } };
  static const struct cli_verb verb = { "inspect", INSPECT_USAGE, "f:", options };
  const char *format = NULL;
  json_t *all;
  int c, ret = 0;

  optind = 1;
  while ((c = cli_getopt (&verb, argc, argv, err)) >= 0)
    format = optarg;
  if (c != -1)
    return c == CLI_HELP ? 0 : -1;
  if (optind >= argc)
    return husk_error_make (err, 0,
                            "container inspect: expected a container (see husk container inspect --help)");
  all = json_array ();
  for (int i = optind; i < argc && ret == 0; i++)
    {
      struct container_record *rec = NULL;
      json_t *doc = NULL;

      ret = containers_lookup (&env->containers, argv[i], &rec, err);
      if (ret == 0)
        ret = inspect_one (env, rec, &doc, err);
      container_record_free (rec);
      if (ret == 0 && format)
        ret = print_template (format, doc, err);
      if (ret == 0)
        json_array_append (all, doc);
      json_decref (doc);
    }
  if (ret == 0 && format == NULL)
    {
      cleanup_free char *text = json_dumps (all, JSON_INDENT (4));
      puts (text);
    }
  json_decref (all);
  return ret;
}

/* ---------------------------------------------------------------- stats */

#define STATS_USAGE                                                                                          \
  "usage: husk container stats [--no-stream] [CONTAINER...]\n"                                               \
  "      --no-stream  one sample (over half a second), then exit; default: one a second\n"                   \
  "  -h, --help       this text\n"                                                                           \
  "  Every running container when none is named.  CPU % is of one cpu, as podman's.\n"

static void
human_bytes (uint64_t bytes, char out[16])
{
  static const char *const units[] = { "B", "kB", "MB", "GB", "TB" };
  double v = (double) bytes;
  size_t u = 0;

  while (v >= 1000 && u + 1 < sizeof units / sizeof units[0])
    v /= 1000, u++;
  snprintf (out, 16, u ? "%.4g%s" : "%.0f%s", v, units[u]);
}

struct stats_target
{
  char *id, *name;
  uint64_t cpu_usec, at_ns;
};

/* 1.57%, as podman prints it. */
static const char *
percent (double v, char out[16])
{
  snprintf (out, 16, "%.2f%%", v);
  return out;
}

static void
print_stats_row (struct stats_target *t, const struct husk_cgroup_stats *s)
{
  char usage[16], limit[16], both[40], cpu_text[16], mem_text[16];
  double cpu = 0, mem = 0;
  uint64_t mem_limit = s->memory.limit;

  if (t->at_ns && s->timestamp_ns > t->at_ns)
    cpu = 100.0 * (double) (s->cpu.usage_usec - t->cpu_usec) * 1000.0 / (double) (s->timestamp_ns - t->at_ns);
  if (mem_limit == HUSK_CGROUP_UNLIMITED || mem_limit == 0)
    mem_limit = (uint64_t) sysconf (_SC_PHYS_PAGES) * (uint64_t) sysconf (_SC_PAGESIZE);
  mem = 100.0 * (double) s->memory.usage / (double) mem_limit;
  human_bytes (s->memory.usage, usage);
  human_bytes (mem_limit, limit);
  snprintf (both, sizeof both, "%s / %s", usage, limit);
  printf ("%-14.12s %-20.20s %-8s %-20s %-8s %llu\n", t->id, t->name, percent (cpu, cpu_text), both,
          percent (mem, mem_text), (unsigned long long) s->pids.current);
}

static int
sample (const struct container_cli_env *env, struct stats_target *t, bool print, struct husk_error **err)
{
  struct husk_cgroup_stats s = { 0 };

  if (husk_container_stats (env->containers.runtime_root, t->id, &s, err) < 0)
    return husk_error_wrap (err, "container stats: %s", t->name);
  if (print)
    print_stats_row (t, &s);
  t->cpu_usec = s.cpu.usage_usec;
  t->at_ns = s.timestamp_ns;
  husk_cgroup_stats_clear (&s);
  return 0;
}

static int
stats_targets (const struct container_cli_env *env, char **names, struct stats_target **out, size_t *n,
               struct husk_error **err)
{
  struct container_record **recs = NULL;
  size_t count = 0;

  *out = NULL;
  *n = 0;
  if (names[0] == NULL && containers_list (&env->containers, &recs, &count, err) < 0)
    return -1;
  for (size_t i = 0; names[0] == NULL && i < count; i++)
    if (containers_running (&env->containers, recs[i]->id))
      {
        *out = xrealloc (*out, (*n + 1) * sizeof **out);
        (*out)[(*n)++]
            = (struct stats_target){ .id = xstrdup (recs[i]->id), .name = xstrdup (recs[i]->name) };
      }
  container_records_free (recs, count);
  for (; *names; names++)
    {
      struct container_record *rec = NULL;

      if (containers_lookup (&env->containers, *names, &rec, err) < 0)
        return -1;
      if (!containers_running (&env->containers, rec->id))
        {
          husk_error_make (err, 0, "container stats: %s is not running", *names);
          container_record_free (rec);
          return -1;
        }
      *out = xrealloc (*out, (*n + 1) * sizeof **out);
      (*out)[(*n)++] = (struct stats_target){ .id = xstrdup (rec->id), .name = xstrdup (rec->name) };
      container_record_free (rec);
    }
  return 0;
}

int
container_cli_stats (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[]
      = { { "no-stream", no_argument, NULL, 'N' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
  static const struct cli_verb verb = { "stats", STATS_USAGE, "", options };
  struct stats_target *targets = NULL;
  bool stream = true;
  size_t n = 0;
  int c, ret;

  optind = 1;
  while ((c = cli_getopt (&verb, argc, argv, err)) >= 0)
    stream = false;
  if (c != -1)
    return c == CLI_HELP ? 0 : -1;
  ret = stats_targets (env, argv + optind, &targets, &n, err);
  for (size_t i = 0; ret == 0 && i < n; i++)
    ret = sample (env, &targets[i], false, err);
  for (bool first = true; ret == 0 && (first || stream); first = false)
    {
      poll (NULL, 0, first && !stream ? 500 : 1000);
      if (stream && isatty (STDOUT_FILENO))
        fputs ("\033[2J\033[H", stdout);
      printf ("%-14s %-20s %-8s %-20s %-8s %s\n", "ID", "NAME", "CPU %", "MEM USAGE / LIMIT", "MEM %",
              "PIDS");
      for (size_t i = 0; ret == 0 && i < n; i++)
        ret = sample (env, &targets[i], true, err);
      fflush (stdout);
    }
  for (size_t i = 0; i < n; i++)
    {
      free (targets[i].id);
      free (targets[i].name);
    }
  free (targets);
  return ret;
}

/* ---------------------------------------------------------------- top */

#define TOP_USAGE                                                                                            \
  "usage: husk container top CONTAINER\n"                                                                    \
  "  The container's processes: USER PID PPID %CPU ELAPSED TTY TIME COMMAND, as podman top\n"                \
  "  (pids as the container sees them; PPID 0: a parent outside it).\n"                                      \
  "  -h, --help  this text\n"

/* The name of UID in the container's /etc/passwd, else the number. */
static char *
user_name (const char *rootfs, unsigned uid)
{
  cleanup_free char *path = xasprintf ("%s/etc/passwd", rootfs);
  cleanup_free char *text = NULL;
  struct husk_error *ignored = NULL;
  size_t len;
  char *save = NULL;

  if (rootfs && husk_read_file (path, &text, &len, &ignored) == 0)
    for (char *line = strtok_r (text, "\n", &save); line; line = strtok_r (NULL, "\n", &save))
      {
        char *name_end = strchr (line, ':'), *uid_field = name_end ? strchr (name_end + 1, ':') : NULL;
        if (uid_field && strtoul (uid_field + 1, NULL, 10) == uid)
          return xasprintf ("%.*s", (int) (name_end - line), line);
      }
  husk_error_free (&ignored);
  return xasprintf ("%u", uid);
}

static void
format_seconds (long long s, char out[32])
{
  if (s >= 3600)
    snprintf (out, 32, "%lldh%02lldm%02llds", s / 3600, s / 60 % 60, s % 60);
  else if (s >= 60)
    snprintf (out, 32, "%lldm%02llds", s / 60, s % 60);
  else
    snprintf (out, 32, "%llds", s);
}

/* PID as the container sees it: the last NSpid of /proc/PID/status; 0
 * for a process outside the container (init's parent, the monitor). */
static long
ns_pid (pid_t pid, const pid_t *members, size_t n)
{
  cleanup_free char *path = xasprintf ("/proc/%d/status", (int) pid);
  cleanup_free char *status = NULL;
  struct husk_error *ignored = NULL;
  long last;
  size_t len;
  bool member = false;

  for (size_t i = 0; i < n; i++)
    member |= members[i] == pid;
  if (!member || husk_read_file (path, &status, &len, &ignored) < 0)
    {
      husk_error_free (&ignored);
      return 0;
    }
  last = husk_status_ns_pid (status);
  return last ? last : (long) pid;
}

static void
print_process (pid_t pid, const char *rootfs, const pid_t *members, size_t n_members)
{
  cleanup_free char *stat_path = xasprintf ("/proc/%d/stat", (int) pid);
  cleanup_free char *status_path = xasprintf ("/proc/%d/status", (int) pid);
  cleanup_free char *cmd_path = xasprintf ("/proc/%d/cmdline", (int) pid);
  cleanup_free char *stat = NULL, *status = NULL, *cmd = NULL, *user = NULL;
  struct husk_error *ignored = NULL;
  unsigned long long utime, stime, start;
  long hz = sysconf (_SC_CLK_TCK);
  double uptime = 0;
  char elapsed[32], cputime[32], tty_name[16] = "?";
  int ppid, tty;
  size_t len = 0;
  FILE *f;
  const char *uid_line, *after_comm;

  if (husk_read_file (stat_path, &stat, &len, &ignored) < 0
      || husk_read_file (status_path, &status, &len, &ignored) < 0)
    {
      husk_error_free (&ignored);
      return; /* gone meanwhile */
    }
  if (husk_read_file (cmd_path, &cmd, &len, &ignored) < 0)
    husk_error_free (&ignored), len = 0;
  for (size_t i = 0; cmd && i + 1 < len; i++)
    if (cmd[i] == '\0')
      cmd[i] = ' ';
  after_comm = strrchr (stat, ')');
  if (after_comm == NULL
      || sscanf (after_comm + 2,
                 "%*c %d %*d %*d %d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu", &ppid,
                 &tty, &utime, &stime, &start)
             != 5)
    return;
  f = fopen ("/proc/uptime", "re");
  if (f)
    {
      if (fscanf (f, "%lf", &uptime) != 1)
        uptime = 0;
      fclose (f);
    }
  uid_line = strstr (status, "\nUid:");
  user = user_name (rootfs, uid_line ? (unsigned) strtoul (uid_line + 5, NULL, 10) : 0);
  {
    double age = uptime - (double) start / (double) hz;
    double cpu_s = (double) (utime + stime) / (double) hz;

    format_seconds ((long long) age, elapsed);
    format_seconds ((long long) cpu_s, cputime);
    if (tty)
      snprintf (tty_name, sizeof tty_name, "pts/%d", tty & 0xff);
    printf ("%-10s %-8ld %-8ld %-6.3f %-12s %-6s %-10s %s\n", user, ns_pid (pid, members, n_members),
            ns_pid (ppid, members, n_members), age > 0 ? 100.0 * cpu_s / age : 0.0, elapsed, tty_name,
            cputime, cmd && cmd[0] ? cmd : "");
  }
}

int
container_cli_top (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = { { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
  static const struct cli_verb verb = { "top", TOP_USAGE, "", options };
  struct runtime_ctx rt = { .root = env->containers.runtime_root };
  struct container_state *state = NULL;
  struct container_record *rec = NULL;
  pid_t *pids = NULL;
  size_t n = 0;
  int c;

  optind = 1;
  while ((c = cli_getopt (&verb, argc, argv, err)) >= 0)
    ;
  if (c != -1)
    return c == CLI_HELP ? 0 : -1;
  if (argc - optind != 1)
    return husk_error_make (err, 0, "container top: expected one container (see husk container top --help)");
  if (containers_lookup (&env->containers, argv[optind], &rec, err) < 0)
    return -1;
  if (!containers_running (&env->containers, rec->id))
    {
      husk_error_make (err, 0, "container top: %s is not running", argv[optind]);
      container_record_free (rec);
      return -1;
    }
  if (container_pids (&rt, rec->id, &pids, &n, err) < 0
      || state_load (env->containers.runtime_root, rec->id, &state, err) < 0)
    {
      free (pids);
      container_record_free (rec);
      return -1;
    }
  printf ("%-10s %-8s %-8s %-6s %-12s %-6s %-10s %s\n", "USER", "PID", "PPID", "%CPU", "ELAPSED", "TTY",
          "TIME", "COMMAND");
  for (size_t i = 0; i < n; i++)
    print_process (pids[i], state->rootfs, pids, n);
  state_free (state);
  free (pids);
  container_record_free (rec);
  return 0;
}
