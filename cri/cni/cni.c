/* CNI operations on a pod sandbox: ADD, CHECK and DEL through a whole
 * config list in the order the spec gives, with the plugin configs,
 * environment and runtimeConfig built here, the ADD result cached on disk,
 * and plugin errors turned into one line. */
#include <ctype.h>
#include <errno.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <stdio.h>
#include <time.h>

#include "cri/cni/internal.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
/* IFNAMSIZ - 1 */
#define MAX_IFNAME 15

static const char *
ctx_bin_dirs (const struct cni_ctx *ctx)
{
  return ctx && ctx->bin_dirs ? ctx->bin_dirs : CNI_DEFAULT_BIN_DIRS;
}

static const char *
ctx_cache_dir (const struct cni_ctx *ctx)
{
  return ctx && ctx->cache_dir ? ctx->cache_dir : CNI_DEFAULT_CACHE_DIR;
}

static int
ctx_timeout (const struct cni_ctx *ctx)
{
  return ctx && ctx->timeout_s > 0 ? ctx->timeout_s : CNI_DEFAULT_TIMEOUT_S;
}

/* ---------------------------------------------------------------- CNI_ARGS */

char *
cni_build_args (const struct cni_pod *pod, struct husk_error **err)
{
  const struct
  {
    const char *key, *value;
  } args[] = {
    { "K8S_POD_NAMESPACE", pod->pod_namespace },
    { "K8S_POD_NAME", pod->pod_name },
    { "K8S_POD_INFRA_CONTAINER_ID", pod->container_id },
    { "K8S_POD_UID", pod->pod_uid },
  };
  cleanup_free char *joined = xstrdup ("");

  for (size_t i = 0; i < sizeof args / sizeof args[0]; i++)
    {
      char *longer;

      if (args[i].value == NULL || args[i].value[0] == '\0')
        continue;
      if (strpbrk (args[i].value, ";=") != NULL)
        {
          husk_error_kind (err, EINVAL, "CNI_ARGS: %s `%s` holds `;` or `=`", args[i].key, args[i].value);
          return NULL;
        }
      longer = xasprintf ("%s%s=%s;", joined, args[i].key, args[i].value);
      free (joined);
      joined = longer;
    }
  return xasprintf ("%sIgnoreUnknown=1", joined);
}

/* ---------------------------------------------------------------- runtimeConfig */

static json_t *
lowercase_string (const char *text)
{
  cleanup_free char *lower = xstrdup (text);

  for (char *c = lower; *c; c++)
    *c = (char) tolower ((unsigned char) *c);
  return json_string (lower);
}

static json_t *
port_mappings_value (const struct cni_pod *pod)
{
  json_t *list = json_array ();

  for (size_t i = 0; i < pod->n_port_mappings; i++)
    {
      const struct cni_port_mapping *mapping = &pod->port_mappings[i];
      json_t *entry;

      if (mapping->host_port <= 0)
        continue;
      entry = json_pack ("{s:i,s:i,s:o}", "hostPort", mapping->host_port, "containerPort",
                         mapping->container_port, "protocol",
                         lowercase_string (mapping->protocol ? mapping->protocol : "tcp"));
      if (mapping->host_ip && mapping->host_ip[0])
        json_object_set_new (entry, "hostIP", json_string (mapping->host_ip));
      json_array_append_new (list, entry);
    }
  if (json_array_size (list) == 0)
    {
      json_decref (list);
      return NULL;
    }
  return list;
}

static void
set_nonzero (json_t *object, const char *key, uint64_t value)
{
  if (value > 0)
    json_object_set_new (object, key, json_integer ((json_int_t) value));
}

static json_t *
bandwidth_value (const struct cni_pod *pod)
{
  json_t *bandwidth;

  if (pod->bandwidth == NULL)
    return NULL;
  bandwidth = json_object ();
  set_nonzero (bandwidth, "ingressRate", pod->bandwidth->ingress_rate);
  set_nonzero (bandwidth, "ingressBurst", pod->bandwidth->ingress_burst);
  set_nonzero (bandwidth, "egressRate", pod->bandwidth->egress_rate);
  set_nonzero (bandwidth, "egressBurst", pod->bandwidth->egress_burst);
  return bandwidth;
}

static void
set_string_list (json_t *object, const char *key, char *const *list)
{
  json_t *array;

  if (list == NULL || list[0] == NULL)
    return;
  array = json_array ();
  for (size_t i = 0; list[i]; i++)
    json_array_append_new (array, json_string (list[i]));
  json_object_set_new (object, key, array);
}

static json_t *
dns_value (const struct cni_pod *pod)
{
  json_t *dns = json_object ();

  set_string_list (dns, "servers", pod->dns_servers);
  set_string_list (dns, "searches", pod->dns_searches);
  set_string_list (dns, "options", pod->dns_options);
  if (json_object_size (dns) == 0)
    {
      json_decref (dns);
      return NULL;
    }
  return dns;
}

/* The capabilities (CNI CONVENTIONS.md) husk can fill in. */
static const struct
{
  const char *name;
  json_t *(*value) (const struct cni_pod *pod);
} capabilities[] = {
  { "portMappings", port_mappings_value },
  { "bandwidth", bandwidth_value },
  { "dns", dns_value },
};

json_t *
cni_runtime_config (const struct cni_pod *pod)
{
  json_t *config = json_object ();

  for (size_t i = 0; i < sizeof capabilities / sizeof capabilities[0]; i++)
    {
      json_t *value = capabilities[i].value (pod);
      if (value != NULL)
        json_object_set_new (config, capabilities[i].name, value);
    }
  return config;
}

json_t *
cni_plugin_stdin (const struct cni_network *net, size_t index, json_t *prev_result, json_t *runtime_config)
{
  json_t *conf = json_deep_copy (net->plugins[index].conf);
  json_t *declared = json_object_get (conf, "capabilities");
  json_t *injected = json_object ();
  const char *capability;
  json_t *enabled;

  json_object_set_new (conf, "name", json_string (net->name));
  json_object_set_new (conf, "cniVersion", json_string (net->cni_version));
  if (prev_result != NULL)
    json_object_set (conf, "prevResult", prev_result);
  else
    json_object_del (conf, "prevResult");
  json_object_foreach (declared, capability, enabled)
  {
    json_t *value = json_object_get (runtime_config, capability);
    if (json_is_true (enabled) && value != NULL)
      json_object_set (injected, capability, value);
  }
  if (json_object_size (injected) > 0)
    json_object_set (conf, "runtimeConfig", injected);
  json_decref (injected);
  return conf;
}

/* ---------------------------------------------------------------- running plugins */

enum cni_command
{
  CNI_ADD,
  CNI_CHECK,
  CNI_DEL,
};

static const char *const command_names[] = { [CNI_ADD] = "ADD", [CNI_CHECK] = "CHECK", [CNI_DEL] = "DEL" };

/* One attachment of a pod to a network, as one list operation sees it. */
struct attachment
{
  const struct cni_network *net;
  const char *container_id, *netns, *ifname, *cni_args;
  json_t *runtime_config; /* may be NULL */
  json_t *cached_result;  /* for CHECK and DEL; may be NULL */
};

/* Our environment without CNI_*, then the CNI variables: the same for
 * every plugin of the list, as the spec wants.  PATH matters: portmap and
 * bridge run iptables. */
static char **
plugin_env (const struct cni_ctx *ctx, const struct attachment *att, enum cni_command command)
{
  extern char **environ;
  size_t n_environ = husk_strv_len (environ), n = 0;
  char **env = xcalloc (n_environ + 8, sizeof (char *));
  bool has_path = false;

  for (size_t i = 0; i < n_environ; i++)
    {
      if (husk_str_has_prefix (environ[i], "CNI_"))
        continue;
      has_path = has_path || husk_str_has_prefix (environ[i], "PATH=");
      env[n++] = xstrdup (environ[i]);
    }
  if (!has_path)
    env[n++] = xstrdup ("PATH=" DEFAULT_PATH);
  env[n++] = xasprintf ("CNI_COMMAND=%s", command_names[command]);
  env[n++] = xasprintf ("CNI_CONTAINERID=%s", att->container_id);
  env[n++] = xasprintf ("CNI_NETNS=%s", att->netns ? att->netns : "");
  env[n++] = xasprintf ("CNI_IFNAME=%s", att->ifname);
  env[n++] = xasprintf ("CNI_ARGS=%s", att->cni_args);
  env[n++] = xasprintf ("CNI_PATH=%s", ctx_bin_dirs (ctx));
  return env;
}

/* Newlines and tabs of plugin text would break the one-line rule. */
static char *
one_line (const char *text)
{
  char *line = xstrdup (text ? text : "");
  size_t len;

  for (char *c = line; *c; c++)
    if (*c == '\n' || *c == '\r' || *c == '\t')
      *c = ' ';
  len = strlen (line);
  while (len > 0 && line[len - 1] == ' ')
    line[--len] = '\0';
  return line;
}

static char *
describe_exit (int status)
{
  if (WIFEXITED (status))
    return xasprintf ("exited with status %d", WEXITSTATUS (status));
  if (WIFSIGNALED (status))
    return xasprintf ("killed by signal %d", WTERMSIG (status));
  return xasprintf ("ended with wait status 0x%x", status);
}

/* A plugin that failed: its JSON error {code, msg, details} when it
 * printed one, else its exit status and what it wrote. */
static int
plugin_failure (const char *type, const char *command, const struct cni_exec_output *output,
                struct husk_error **err)
{
  json_t *error = json_loads (output->out, 0, NULL);
  const char *msg = json_string_value (json_object_get (error, "msg"));
  const char *details = json_string_value (json_object_get (error, "details"));
  cleanup_free char *how = describe_exit (output->status);
  cleanup_free char *what = NULL, *more = NULL;

  if (msg == NULL)
    {
      what = one_line (output->err_len > 0 ? output->errout : output->out);
      json_decref (error);
      return husk_error_make (err, 0, "cni plugin %s %s: %s%s%s", type, command, how, what[0] ? ": " : "",
                              what);
    }
  what = one_line (msg);
  more = one_line (details);
  json_decref (error);
  return husk_error_make (err, 0, "cni plugin %s %s: %s%s%s", type, command, what, more[0] ? ": " : "", more);
}

static void
log_plugin_stderr (const char *type, const char *command, const struct cni_exec_output *output)
{
  cleanup_free char *text = NULL;

  if (output->err_len == 0)
    return;
  text = one_line (output->errout);
  husk_debug ("cni plugin %s %s stderr: %s", type, command, text);
}

/* ADD output: the plugin's result, or NULL when it printed nothing (then
 * the previous result stands). */
static int
parse_add_output (const char *type, const struct cni_exec_output *output, json_t **result,
                  struct husk_error **err)
{
  json_error_t json_err;

  *result = NULL;
  if (output->out[strspn (output->out, " \t\r\n")] == '\0')
    return 0;
  *result = json_loads (output->out, 0, &json_err);
  if (*result == NULL)
    return husk_error_make (err, 0, "cni plugin %s ADD: bad result:%d:%d: %s", type, json_err.line,
                            json_err.column, json_err.text);
  if (!json_is_object (*result))
    {
      json_decref (*result);
      *result = NULL;
      return husk_error_make (err, 0, "cni plugin %s ADD: the result is not a JSON object", type);
    }
  return 0;
}

struct plugin_call
{
  const struct cni_ctx *ctx;
  const struct attachment *att;
  char *const *env;
  enum cni_command command;
};

static int
run_plugin (const struct plugin_call *call, size_t index, json_t *prev_result, json_t **result,
            struct husk_error **err)
{
  const char *type = call->att->net->plugins[index].type;
  const char *command = command_names[call->command];
  cleanup_free char *path = NULL;
  cleanup_free char *input = NULL;
  struct cni_exec_output output;
  json_t *conf;
  int ret;

  if (cni_find_plugin (ctx_bin_dirs (call->ctx), type, &path, err) < 0)
    return -1;
  conf = cni_plugin_stdin (call->att->net, index, prev_result, call->att->runtime_config);
  input = json_dumps (conf, JSON_COMPACT);
  json_decref (conf);
  struct cni_exec exec = { .path = path,
                           .envp = call->env,
                           .input = input,
                           .input_len = strlen (input),
                           .timeout_s = ctx_timeout (call->ctx) };
  if (cni_exec_run (&exec, &output, err) < 0)
    {
      cni_exec_output_clear (&output);
      return husk_error_wrap (err, "cni plugin %s %s", type, command);
    }
  log_plugin_stderr (type, command, &output);
  if (!WIFEXITED (output.status) || WEXITSTATUS (output.status) != 0)
    ret = plugin_failure (type, command, &output, err);
  else
    ret = result ? parse_add_output (type, &output, result, err) : 0;
  cni_exec_output_clear (&output);
  return ret;
}

/* ADD runs the list in order, chaining each result into the next plugin;
 * CHECK in order and DEL in reverse, each with the cached result (DEL only
 * from 0.4.0, which brought prevResult to it).  The first failure stops
 * the list; *RESULT (ADD) then holds the last result there was, for the
 * DEL that undoes it. */
static double
ms_since (const struct timespec *start)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (double) (now.tv_sec - start->tv_sec) * 1e3 + (double) (now.tv_nsec - start->tv_nsec) / 1e6;
}

/* "10.88.0.5/16,fd00::5/64": the addresses of an ADD result. */
static char *
result_addresses (json_t *result)
{
  json_t *ips = json_object_get (result, "ips"), *ip;
  char *list = xstrdup ("");
  size_t i;

  json_array_foreach (ips, i, ip)
  {
    const char *address = json_string_value (json_object_get (ip, "address"));
    char *longer;

    if (address == NULL)
      continue;
    longer = xasprintf ("%s%s%s", list, *list ? "," : "", address);
    free (list);
    list = longer;
  }
  return list;
}

/* What a list operation did, for the node's log: ADD and DEL at info (a
 * failure at warning, with the plugin that failed and why), CHECK at debug.
 * PLUGINS: those that ran, in order. */
static void
log_list (const struct attachment *att, enum cni_command command, const char *plugins, double ms,
          json_t *result, const struct husk_error *failure)
{
  enum husk_log_level level = failure                ? HUSK_LOG_WARNING
                              : command == CNI_CHECK ? HUSK_LOG_DEBUG
                                                     : HUSK_LOG_INFO;
  cleanup_free char *addresses = NULL;
  char duration[32];

  if (!husk_log_enabled (level))
    return;
  snprintf (duration, sizeof duration, "%.3f", ms);
  if (command == CNI_ADD && failure == NULL && result)
    addresses = result_addresses (result);
  struct husk_log_field fields[] = {
    { "network", att->net->name, 0 },
    { "sandbox_id", att->container_id, 0 },
    { "netns", att->netns && *att->netns ? att->netns : NULL, 0 },
    { "ifname", att->ifname, 0 },
    { "plugins", plugins, 0 },
    { "duration_ms", duration, 1 },
    { "ips", addresses, 0 },
    { "error", failure ? failure->msg : NULL, 0 },
  };
  husk_log_fields (level, fields, sizeof fields / sizeof fields[0], "CNI %s %s", command_names[command],
                   failure ? "failed" : "done");
}

/* Hands ONE to *ERR (replacing whatever it held). */
static void
pass_first_error (struct husk_error **err, struct husk_error *one)
{
  husk_error_free (err);
  *err = one;
}

static int
run_list (const struct cni_ctx *ctx, const struct attachment *att, enum cni_command command, json_t **result,
          struct husk_error **err)
{
  cleanup_strv char **env = plugin_env (ctx, att, command);
  struct plugin_call call = { .ctx = ctx, .att = att, .env = env, .command = command };
  bool add = command == CNI_ADD, del = command == CNI_DEL;
  size_t n = att->net->n_plugins;
  cleanup_free char *plugins = xstrdup ("");
  struct husk_error *local_err = NULL;
  struct timespec start;
  json_t *prev = NULL;
  int ret = 0;

  clock_gettime (CLOCK_MONOTONIC, &start);
  if (!add && (!del || cni_version_at_least (att->net->cni_version, 0, 4)))
    prev = json_incref (att->cached_result);
  /* ADD and CHECK stop at the first plugin that fails; DEL goes on to the
   * others (each DEL must tolerate what is already gone) and reports the
   * first failure, so that one missing or broken plugin does not leave the
   * rules, leases and links of all before it in the list. */
  for (size_t k = 0; k < n && (ret == 0 || del); k++)
    {
      size_t index = del ? n - 1 - k : k;
      char *longer = xasprintf ("%s%s%s", plugins, k ? "," : "", att->net->plugins[index].type);
      struct husk_error *one_err = NULL;
      json_t *out = NULL;

      free (plugins);
      plugins = longer;
      if (run_plugin (&call, index, prev, add ? &out : NULL, &one_err) < 0)
        {
          if (ret == 0)
            pass_first_error (err ? err : &local_err, one_err);
          else
            husk_error_free (&one_err);
          ret = -1;
        }
      if (out != NULL)
        {
          json_decref (prev);
          prev = out;
        }
    }
  log_list (att, command, plugins, ms_since (&start), prev, ret < 0 ? (err ? *err : local_err) : NULL);
  husk_error_free (&local_err);
  if (result)
    *result = prev;
  else
    json_decref (prev);
  return ret;
}

/* ---------------------------------------------------------------- operations */

static bool
ifname_is_valid (const char *ifname)
{
  return ifname[0] != '\0' && strlen (ifname) <= MAX_IFNAME && strpbrk (ifname, "/: \t\n") == NULL
         && strcmp (ifname, ".") != 0 && strcmp (ifname, "..") != 0;
}

static int
check_pod (const struct cni_pod *pod, bool need_netns, struct husk_error **err)
{
  const char *ifname = pod->ifname ? pod->ifname : CNI_DEFAULT_IFNAME;

  if (!cni_name_is_valid (pod->container_id))
    return husk_error_kind (err, EINVAL, "invalid CNI container id `%s`", pod->container_id ?: "");
  if (need_netns && (pod->netns == NULL || pod->netns[0] != '/'))
    return husk_error_kind (err, EINVAL, "sandbox %s: the netns must be an absolute path", pod->container_id);
  if (!ifname_is_valid (ifname))
    return husk_error_kind (err, EINVAL, "invalid interface name `%s`", ifname);
  return 0;
}

/* The spec lets DEL go without CNI_NETNS when there is none, and plugins
 * then free what they can (IPAM).  A pin that is no longer a namespace
 * (unmounted, or never made) would make them fail on every retry. */
static const char *
netns_for_del (const char *netns)
{
  struct statfs fs;

  if (netns == NULL || netns[0] == '\0' || statfs (netns, &fs) < 0 || fs.f_type != NSFS_MAGIC)
    return "";
  return netns;
}

/* DEL for the whole list.  SWEEP (or no netns to give the plugins): then
 * the rules the plugins tagged for the pod and left go too; a failure
 * there is only a warning, since it must not keep the pod forever. */
static int
del_list (const struct cni_ctx *ctx, const struct attachment *att, bool sweep, struct husk_error **err)
{
  struct husk_error *sweep_err = NULL;

  if (run_list (ctx, att, CNI_DEL, NULL, err) < 0)
    return -1;
  if ((sweep || att->netns[0] == '\0')
      && cni_rules_sweep (ctx, att->net->name, att->container_id, &sweep_err) < 0)
    {
      husk_warn ("%s", sweep_err->msg);
      husk_error_free (&sweep_err);
    }
  return 0;
}

/* After a failed ADD: DEL for the whole list, as the spec asks, and the
 * cache entry goes once that worked. */
static int
undo_add (const struct cni_ctx *ctx, const struct attachment *att, json_t *partial_result,
          const char *cache_path, struct husk_error **err)
{
  struct attachment undo = *att;
  struct husk_error *del_err = NULL;

  undo.cached_result = partial_result;
  undo.netns = netns_for_del (att->netns);
  if (del_list (ctx, &undo, false, &del_err) < 0)
    {
      if (err && *err)
        {
          cleanup_free char *add_msg = xstrdup ((*err)->msg);
          husk_error_make (err, 0, "%s (undoing it also failed: %s)", add_msg, del_err->msg);
        }
      husk_error_free (&del_err);
      return -1;
    }
  cni_cache_remove (cache_path, NULL);
  return -1;
}

static int
add_and_cache (const struct cni_ctx *ctx, const struct attachment *att, struct cni_cache_entry *entry,
               json_t **final, struct cni_result **result, struct husk_error **err)
{
  if (run_list (ctx, att, CNI_ADD, final, err) < 0)
    return -1;
  if (*final == NULL)
    return husk_error_make (err, 0, "network `%s`: ADD gave no result", att->net->name);
  if (cni_result_from_json (*final, result, err) < 0)
    return husk_error_wrap (err, "network `%s`", att->net->name);
  entry->result = *final;
  if (cni_cache_write (ctx_cache_dir (ctx), entry, true, err) < 0)
    {
      cni_result_free (*result);
      *result = NULL;
      return -1;
    }
  return 0;
}

int
cni_add (const struct cni_ctx *ctx, const struct cni_network *net, const struct cni_pod *pod,
         struct cni_result **result, struct husk_error **err)
{
  cleanup_free char *cni_args = NULL;
  cleanup_free char *cache_path = NULL;
  json_t *runtime_config, *final = NULL;
  int ret;

  *result = NULL;
  if (check_pod (pod, true, err) < 0)
    return -1;
  cni_args = cni_build_args (pod, err);
  if (cni_args == NULL)
    return -1;
  runtime_config = cni_runtime_config (pod);
  struct attachment att = { .net = net,
                            .container_id = pod->container_id,
                            .netns = pod->netns,
                            .ifname = pod->ifname ? pod->ifname : CNI_DEFAULT_IFNAME,
                            .cni_args = cni_args,
                            .runtime_config = runtime_config };
  struct cni_cache_entry entry = { .network = net->name,
                                   .container_id = (char *) att.container_id,
                                   .ifname = (char *) att.ifname,
                                   .netns = (char *) pod->netns,
                                   .cni_args = cni_args,
                                   .config = net->conflist,
                                   .runtime_config = runtime_config };
  cache_path = cni_cache_path (ctx_cache_dir (ctx), net->name, pod->container_id);
  /* Written first, so a DEL after a crash mid-ADD still knows the ports. */
  ret = cni_cache_write (ctx_cache_dir (ctx), &entry, true, err);
  if (ret == 0 && add_and_cache (ctx, &att, &entry, &final, result, err) < 0)
    ret = undo_add (ctx, &att, final, cache_path, err);
  json_decref (final);
  json_decref (runtime_config);
  return ret;
}

int
cni_check (const struct cni_ctx *ctx, const struct cni_network *net, const struct cni_pod *pod,
           struct husk_error **err)
{
  cleanup_free char *cache_path = NULL;
  struct cni_cache_entry *entry = NULL;
  int ret;

  if (check_pod (pod, true, err) < 0)
    return -1;
  if (net->disable_check || !cni_version_at_least (net->cni_version, 0, 4))
    return 0;
  cache_path = cni_cache_path (ctx_cache_dir (ctx), net->name, pod->container_id);
  if (cni_cache_read (cache_path, &entry, err) < 0)
    return -1;
  if (entry == NULL || entry->result == NULL)
    {
      cni_cache_entry_free (entry);
      return husk_error_make (err, 0, "CHECK sandbox %s on network `%s`: no cached ADD result",
                              pod->container_id, net->name);
    }
  struct attachment att = { .net = net,
                            .container_id = pod->container_id,
                            .netns = pod->netns,
                            .ifname = entry->ifname,
                            .cni_args = entry->cni_args,
                            .runtime_config = entry->runtime_config,
                            .cached_result = entry->result };
  ret = run_list (ctx, &att, CNI_CHECK, NULL, err);
  cni_cache_entry_free (entry);
  return ret;
}

/* A DEL cut short (huskd killed, a plugin failing) may have deleted the
 * pod's interface already, and the bridge plugin's retry then leaves its
 * masquerade rules: the entry says a DEL began, so the retry sweeps them.
 * Not fsync'd: a power loss clears iptables too. */
static void
mark_del_started (const struct cni_ctx *ctx, struct cni_cache_entry *entry)
{
  struct husk_error *err = NULL;

  entry->del_started = true;
  if (cni_cache_write (ctx_cache_dir (ctx), entry, false, &err) < 0)
    {
      husk_warn ("%s", err->msg);
      husk_error_free (&err);
    }
}

/* DEL with what ADD cached: its config, interface, args, port mappings and
 * result.  The entry goes only once DEL worked, so a retry has it too. */
static int
del_cached (const struct cni_ctx *ctx, const struct cni_pod *pod, struct cni_cache_entry *entry,
            const char *path, struct husk_error **err)
{
  struct cni_network *cached_net = NULL;
  bool retry = entry->del_started;
  int ret;

  if (cni_network_from_json (entry->config, path, &cached_net, err) < 0)
    return husk_error_wrap (err, "CNI cache entry `%s`", path);
  struct attachment att = { .net = cached_net,
                            .container_id = entry->container_id,
                            .netns = netns_for_del (pod->netns ? pod->netns : entry->netns),
                            .ifname = entry->ifname,
                            .cni_args = entry->cni_args,
                            .runtime_config = entry->runtime_config,
                            .cached_result = entry->result };
  if (!retry)
    mark_del_started (ctx, entry);
  ret = del_list (ctx, &att, retry, err);
  cni_network_free (cached_net);
  if (ret < 0)
    return -1;
  return cni_cache_remove (path, err);
}

/* Nothing cached for NET (never added, deleted already, or cache lost):
 * plugins still get a DEL, which frees what they hold for the id. */
static int
del_uncached (const struct cni_ctx *ctx, const struct cni_network *net, const struct cni_pod *pod,
              struct husk_error **err)
{
  cleanup_free char *cni_args = cni_build_args (pod, err);
  json_t *runtime_config;
  int ret;

  if (cni_args == NULL)
    return -1;
  runtime_config = cni_runtime_config (pod);
  struct attachment att = { .net = net,
                            .container_id = pod->container_id,
                            .netns = netns_for_del (pod->netns),
                            .ifname = pod->ifname ? pod->ifname : CNI_DEFAULT_IFNAME,
                            .cni_args = cni_args,
                            .runtime_config = runtime_config };
  ret = del_list (ctx, &att, false, err);
  json_decref (runtime_config);
  return ret;
}

int
cni_del (const struct cni_ctx *ctx, const struct cni_network *net, const struct cni_pod *pod,
         struct husk_error **err)
{
  struct cni_cache_entry **entries = NULL;
  cleanup_strv char **paths = NULL;
  bool net_cached = false;
  size_t n = 0;
  int ret = 0;

  if (check_pod (pod, false, err) < 0)
    return -1;
  if (cni_cache_find (ctx_cache_dir (ctx), pod->container_id, &entries, &paths, &n, err) < 0)
    return -1;
  for (size_t i = 0; i < n; i++)
    {
      net_cached = net_cached || (net && strcmp (entries[i]->network, net->name) == 0);
      if (del_cached (ctx, pod, entries[i], paths[i], ret < 0 ? NULL : err) < 0)
        ret = -1;
      cni_cache_entry_free (entries[i]);
    }
  free (entries);
  if (net != NULL && !net_cached && ret == 0)
    ret = del_uncached (ctx, net, pod, err);
  return ret;
}

int
cni_cached_result (const struct cni_ctx *ctx, const char *network, const char *container_id,
                   struct cni_result **result, struct husk_error **err)
{
  cleanup_free char *path = NULL;
  struct cni_cache_entry *entry = NULL;
  int ret = 0;

  *result = NULL;
  if (!cni_name_is_valid (network) || !cni_name_is_valid (container_id))
    return husk_error_kind (err, EINVAL, "invalid CNI network `%s` or container id `%s`", network ?: "",
                            container_id ?: "");
  path = cni_cache_path (ctx_cache_dir (ctx), network, container_id);
  if (cni_cache_read (path, &entry, err) < 0)
    return -1;
  if (entry != NULL && entry->result != NULL)
    ret = cni_result_from_json (entry->result, result, err);
  cni_cache_entry_free (entry);
  return ret;
}
