/* huskd's configuration file (see config.h). */
#include <errno.h>
#include <stdbool.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cri/cdi/cdi.h"
#include "cri/config/config.h"
#include "cri/config/self_exe.h"
#include "cri/spec/cri_spec.h"
#include "cri/spec/ocispec.h"
#include "husk/cleanup.h"
#include "husk/util.h"

static void
add_runtime (struct huskd_config *cfg, const char *name, const char *path, const char *root)
{
  if (huskd_config_runtime (cfg, name) != NULL)
    return; /* the config file named it already */
  cfg->runtimes = xrealloc (cfg->runtimes, (cfg->n_runtimes + 1) * sizeof *cfg->runtimes);
  cfg->runtimes[cfg->n_runtimes++] = (struct huskd_runtime){ .name = xstrdup (name),
                                                             .path = xstrdup (path),
                                                             .root = xstrdup (root),
                                                             .args = xcalloc (1, sizeof (char *)) };
}

/* husk itself, next to huskd (build tree) or on PATH; runc and crun when
 * installed. */
static void
default_runtimes (struct huskd_config *cfg)
{
  static const char *const peers[] = { "runc", "crun" };
  cleanup_free char *self = cri_self_exe ();
  cleanup_free char *husk = NULL;

  if (self)
    {
      char *slash = strrchr (self, '/');
      if (slash)
        {
          *slash = '\0';
          husk = xasprintf ("%s/husk", self);
        }
    }
  if (husk == NULL || access (husk, X_OK) < 0)
    {
      free (husk);
      husk = xstrdup ("husk");
    }
  {
    cleanup_free char *root = xasprintf ("%s/runtime", cfg->state);
    add_runtime (cfg, "husk", husk, root);
  }
  for (size_t i = 0; i < 2; i++)
    {
      const char *dirs[] = { "/usr/bin", "/usr/sbin", "/usr/local/bin" };
      for (size_t d = 0; d < 3; d++)
        {
          cleanup_free char *path = xasprintf ("%s/%s", dirs[d], peers[i]);
          cleanup_free char *root = xasprintf ("%s/%s", cfg->state, peers[i]);
          if (access (path, X_OK) == 0)
            {
              add_runtime (cfg, peers[i], path, root);
              break;
            }
        }
    }
}

static void
set_defaults (struct huskd_config *cfg)
{
  memset (cfg, 0, sizeof *cfg);
  cfg->listen = xstrdup (HUSKD_DEFAULT_LISTEN);
  cfg->root = xstrdup (HUSKD_DEFAULT_ROOT);
  cfg->state = xstrdup (HUSKD_DEFAULT_STATE);
  cfg->default_runtime = xstrdup ("husk");
  cfg->cni_conf_dir = xstrdup ("/etc/cni/net.d");
  cfg->cni_bin_dirs = xstrdup ("/usr/lib/cni:/opt/cni/bin");
  cfg->log_level = xstrdup ("info");
  cfg->log_format = xstrdup ("text");
  cfg->stream_address = xstrdup ("127.0.0.1");
  cfg->stream_port = xstrdup ("0");
  cfg->stream_token_ttl_s = 60;
  cfg->stats_collect_period_s = 10;
  cfg->max_image_bytes = UINT64_C (32) << 30;
  cfg->pull_min_bytes_per_s = 1024;
  cfg->pull_stall_timeout_s = 60;
  for (size_t i = 0; ocispec_default_caps[i]; i++)
    cfg->default_capabilities = husk_strv_append (cfg->default_capabilities, ocispec_default_caps[i]);
  cfg->cdi_spec_dirs = husk_strv_append (NULL, "/etc/cdi");
  cfg->cdi_spec_dirs = husk_strv_append (cfg->cdi_spec_dirs, "/var/run/cdi");
  cfg->nvidia_visible_devices = CDI_NVIDIA_ENV_CONTAINER;
  /* As sd_booted(): kubelet on a systemd node uses (and kubeadm sets) the
   * systemd driver; without systemd it cannot. */
  cfg->cgroup_driver = xstrdup (access ("/run/systemd/system", F_OK) == 0 ? "systemd" : "cgroupfs");
}

/* A list of absolute dirs; [] means no CDI specs at all. */
static int
take_cdi_dirs (json_t *doc, struct huskd_config *cfg, const char *path, struct husk_error **err)
{
  json_t *dirs = json_object_get (doc, "cdi_spec_dirs"), *dir;
  size_t i;

  if (dirs == NULL || json_is_null (dirs))
    return 0;
  if (!json_is_array (dirs))
    return husk_error_make (err, 0, "%s: cdi_spec_dirs: must be a list of absolute directories", path);
  json_array_foreach (dirs, i, dir)
  {
    if (!json_is_string (dir) || json_string_value (dir)[0] != '/')
      return husk_error_make (err, 0, "%s: cdi_spec_dirs[%zu]: must be an absolute directory", path, i);
  }
  husk_strvfreep (&cfg->cdi_spec_dirs);
  cfg->cdi_spec_dirs = xcalloc (1, sizeof (char *));
  json_array_foreach (dirs, i, dir) cfg->cdi_spec_dirs
      = husk_strv_append (cfg->cdi_spec_dirs, json_string_value (dir));
  return 0;
}

/* nvidia_visible_devices and cdi_numa_align. */
static int
take_cdi_options (json_t *doc, struct huskd_config *cfg, const char *path, struct husk_error **err)
{
  json_t *mode = json_object_get (doc, "nvidia_visible_devices");
  json_t *align = json_object_get (doc, "cdi_numa_align");
  enum cdi_nvidia_env parsed;

  if (mode && !json_is_null (mode))
    {
      if (!json_is_string (mode) || cdi_nvidia_env_parse (json_string_value (mode), &parsed) < 0)
        return husk_error_make (
            err, 0, "%s: nvidia_visible_devices: must be off, container-config or image-too", path);
      cfg->nvidia_visible_devices = parsed;
    }
  if (align && !json_is_null (align))
    {
      if (!json_is_boolean (align))
        return husk_error_make (err, 0, "%s: cdi_numa_align: must be true or false", path);
      cfg->cdi_numa_align = json_is_true (align);
    }
  return 0;
}

static int
take_string (json_t *doc, const char *key, char **field, const char *path, struct husk_error **err)
{
  json_t *v = json_object_get (doc, key);

  if (v == NULL || json_is_null (v))
    return 0;
  if (!json_is_string (v))
    return husk_error_make (err, 0, "%s: %s: must be a string", path, key);
  free (*field);
  *field = xstrdup (json_string_value (v));
  return 0;
}

static int
take_count (json_t *doc, const char *key, unsigned long long max, unsigned long long *field, const char *path,
            struct husk_error **err)
{
  json_t *v = json_object_get (doc, key);

  if (v == NULL || json_is_null (v))
    return 0;
  if (!json_is_integer (v) || json_integer_value (v) < 1 || (unsigned long long) json_integer_value (v) > max)
    return husk_error_make (err, 0, "%s: %s: must be a whole number from 1 to %llu", path, key, max);
  *field = (unsigned long long) json_integer_value (v);
  return 0;
}

static int
take_counts (json_t *doc, struct huskd_config *cfg, const char *path, struct husk_error **err)
{
  if (take_count (doc, "max_image_bytes", INT64_MAX, &cfg->max_image_bytes, path, err) < 0
      || take_count (doc, "pull_min_bytes_per_s", UINT_MAX, &cfg->pull_min_bytes_per_s, path, err) < 0
      || take_count (doc, "pull_stall_timeout_s", UINT_MAX, &cfg->pull_stall_timeout_s, path, err) < 0
      || take_count (doc, "stream_token_ttl_s", 86400, &cfg->stream_token_ttl_s, path, err) < 0
      || take_count (doc, "stats_collect_period_s", 3600, &cfg->stats_collect_period_s, path, err) < 0)
    return -1;
  return 0;
}

/* A runtime entry's keys besides path and root: "sandbox" ("husk": the
 * pod is husk's, the default; "runtime": the handler owns it) and "args"
 * (the handler's global flags, each one word starting with '-'). */
static int
take_runtime_extras (json_t *entry, struct huskd_runtime *rt, const char *path, const char *name,
                     struct husk_error **err)
{
  static const char *const known[] = { "path", "root", "sandbox", "args" };
  json_t *sandbox = json_object_get (entry, "sandbox"), *args = json_object_get (entry, "args"), *arg;
  const char *key;
  json_t *value;
  size_t i;

  json_object_foreach (entry, key, value)
  {
    for (i = 0; i < sizeof known / sizeof known[0] && strcmp (known[i], key) != 0; i++)
      ;
    if (i == sizeof known / sizeof known[0])
      return husk_error_make (err, 0, "%s: runtimes.%s.%s: unknown key (known: path, root, sandbox, args)",
                              path, name, key);
  }
  if (sandbox
      && !(json_is_string (sandbox)
           && (strcmp (json_string_value (sandbox), "husk") == 0
               || strcmp (json_string_value (sandbox), "runtime") == 0)))
    return husk_error_make (err, 0, "%s: runtimes.%s.sandbox: must be \"husk\" or \"runtime\"", path, name);
  rt->owns_pod = sandbox && strcmp (json_string_value (sandbox), "runtime") == 0;
  if (args == NULL)
    return 0;
  if (!json_is_array (args) || json_array_size (args) > HUSKD_RUNTIME_MAX_ARGS)
    return husk_error_make (err, 0, "%s: runtimes.%s.args: must be an array of at most %d flags", path, name,
                            HUSKD_RUNTIME_MAX_ARGS);
  json_array_foreach (args, i, arg)
  {
    const char *flag = json_string_value (arg);
    if (flag == NULL || flag[0] != '-' || strlen (flag) > 4096)
      return husk_error_make (err, 0, "%s: runtimes.%s.args[%zu]: must be a flag string starting with '-'",
                              path, name, i);
  }
  husk_strvfreep (&rt->args);
  rt->args = xcalloc (json_array_size (args) + 1, sizeof (char *));
  json_array_foreach (args, i, arg) rt->args[i] = xstrdup (json_string_value (arg));
  return 0;
}

static int
take_runtimes (json_t *doc, struct huskd_config *cfg, const char *path, struct husk_error **err)
{
  json_t *runtimes = json_object_get (doc, "runtimes"), *rt;
  const char *name;

  if (runtimes == NULL)
    return 0;
  if (!json_is_object (runtimes))
    return husk_error_make (err, 0, "%s: runtimes: must be an object of name -> {path, root}", path);
  json_object_foreach (runtimes, name, rt)
  {
    json_t *bin = json_object_get (rt, "path"), *root = json_object_get (rt, "root");
    cleanup_free char *default_root = xasprintf ("%s/%s", cfg->state, name);

    if (!json_is_string (bin))
      return husk_error_make (err, 0, "%s: runtimes.%s.path: must be a string", path, name);
    struct huskd_runtime *existing = (struct huskd_runtime *) huskd_config_runtime (cfg, name);

    if (existing == NULL)
      {
        add_runtime (cfg, name, json_string_value (bin),
                     json_is_string (root) ? json_string_value (root) : default_root);
        existing = &cfg->runtimes[cfg->n_runtimes - 1];
      }
    else
      {
        free (existing->path);
        existing->path = xstrdup (json_string_value (bin));
      }
    if (take_runtime_extras (rt, existing, path, name, err) < 0)
      return -1;
  }
  return 0;
}

/* The string settings, read by apply_file. */
static const struct
{
  const char *key;
  size_t offset;
} string_keys[] = {
  { "listen", offsetof (struct huskd_config, listen) },
  { "root", offsetof (struct huskd_config, root) },
  { "state", offsetof (struct huskd_config, state) },
  { "default_runtime", offsetof (struct huskd_config, default_runtime) },
  { "cni_conf_dir", offsetof (struct huskd_config, cni_conf_dir) },
  { "cni_bin_dirs", offsetof (struct huskd_config, cni_bin_dirs) },
  { "registries", offsetof (struct huskd_config, registries_file) },
  { "seccomp_profile", offsetof (struct huskd_config, seccomp_profile) },
  { "log_level", offsetof (struct huskd_config, log_level) },
  { "log_format", offsetof (struct huskd_config, log_format) },
  { "stream_address", offsetof (struct huskd_config, stream_address) },
  { "stream_port", offsetof (struct huskd_config, stream_port) },
  { "metrics_address", offsetof (struct huskd_config, metrics_address) },
  { "cgroup_driver", offsetof (struct huskd_config, cgroup_driver) },
};

/* A misspelt key would otherwise be a setting silently not applied. */
static int
check_known_keys (json_t *doc, const char *path, struct husk_error **err)
{
  /* Besides string_keys: take_runtimes, take_counts, take_cdi_dirs,
   * default_capabilities. */
  static const char *const other_keys[] = {
    "runtimes",
    "default_capabilities",
    "max_image_bytes",
    "pull_min_bytes_per_s",
    "pull_stall_timeout_s",
    "stream_token_ttl_s",
    "stats_collect_period_s",
    "cdi_spec_dirs",
    "nvidia_visible_devices",
    "cdi_numa_align",
  };
  const char *key;
  json_t *value;

  json_object_foreach (doc, key, value)
  {
    bool known = false;

    for (size_t i = 0; !known && i < sizeof string_keys / sizeof string_keys[0]; i++)
      known = strcmp (string_keys[i].key, key) == 0;
    for (size_t i = 0; !known && i < sizeof other_keys / sizeof other_keys[0]; i++)
      known = strcmp (other_keys[i], key) == 0;
    if (!known)
      return husk_error_make (err, 0, "%s: unknown key `%s`", path, key);
  }
  return 0;
}

/* The set every container starts from: capability names ("CAP_CHOWN",
 * "chown" or "CHOWN"), kept as "CAP_X"; an unknown one stops huskd. */
static int
take_capabilities (json_t *caps, struct huskd_config *cfg, const char *path, struct husk_error **err)
{
  size_t i;
  json_t *cap;

  if (!json_is_array (caps))
    return husk_error_make (err, 0, "%s: default_capabilities: must be a list of capability names", path);
  husk_strvfreep (&cfg->default_capabilities);
  cfg->default_capabilities = xcalloc (1, sizeof (char *));
  json_array_foreach (caps, i, cap)
  {
    cleanup_free char *name
        = json_is_string (cap) ? cri_spec_capability_name (json_string_value (cap)) : NULL;
    if (name == NULL)
      return husk_error_make (err, 0, "%s: default_capabilities[%zu]: %s", path, i,
                              json_is_string (cap) ? "not a capability this kernel knows" : "must be a name");
    cfg->default_capabilities = husk_strv_append (cfg->default_capabilities, name);
  }
  return 0;
}

/* seccomp_profile: an OCI linux.seccomp object, read once at start so a
 * bad file stops huskd instead of failing every RuntimeDefault container. */
static int
load_seccomp_profile (struct huskd_config *cfg, const char *path, struct husk_error **err)
{
  json_error_t jerr;
  json_t *profile, *action;

  if (cfg->seccomp_profile[0] != '/')
    return husk_error_make (err, 0, "%s: seccomp_profile `%s`: must be an absolute path", path,
                            cfg->seccomp_profile);
  profile = json_load_file (cfg->seccomp_profile, 0, &jerr);
  if (profile == NULL)
    return husk_error_make (err, 0, "%s: seccomp_profile `%s`: %s", path, cfg->seccomp_profile, jerr.text);
  action = json_object_get (profile, "defaultAction");
  if (!json_is_object (profile) || !json_is_string (action))
    {
      json_decref (profile);
      return husk_error_make (err, 0,
                              "%s: seccomp_profile `%s`: not an OCI seccomp profile (no defaultAction)", path,
                              cfg->seccomp_profile);
    }
  json_decref (cfg->seccomp_default);
  cfg->seccomp_default = profile;
  return 0;
}

/* "HOST:PORT" or "[V6]:PORT", PORT 0-65535; "" turns metrics off. */
static int
check_metrics_address (const char *address, const char *path, struct husk_error **err)
{
  const char *colon = address ? strrchr (address, ':') : NULL;
  long long port;

  if (address == NULL || *address == '\0')
    return 0;
  if (colon == NULL || colon == address || husk_parse_int64 (colon + 1, 0, 65535, &port) < 0)
    return husk_error_make (err, 0, "%s: metrics_address `%s`: must be HOST:PORT (e.g. 127.0.0.1:9464)", path,
                            address);
  return 0;
}

/* stream_port: a string ("10010") or a JSON number; 0 is a free port,
 * anything outside 0-65535 is refused (it used to wrap around). */
static int
take_stream_port (json_t *doc, struct huskd_config *cfg, const char *path, struct husk_error **err)
{
  json_t *port = json_object_get (doc, "stream_port");
  long long number;

  if (json_is_integer (port))
    {
      free (cfg->stream_port);
      cfg->stream_port = xasprintf ("%lld", (long long) json_integer_value (port));
      json_object_del (doc, "stream_port");
    }
  else if (port && !json_is_string (port) && !json_is_null (port))
    return husk_error_make (err, 0,
                            "%s: stream_port: must be a port number (0-65535) or a string holding one", path);
  else if (json_is_string (port))
    {
      free (cfg->stream_port);
      cfg->stream_port = xstrdup (json_string_value (port));
      json_object_del (doc, "stream_port");
    }
  if (husk_parse_int64 (cfg->stream_port, 0, 65535, &number) < 0)
    return husk_error_make (err, 0, "%s: stream_port `%s`: must be a port number 0-65535 (0: a free one)",
                            path, cfg->stream_port);
  return 0;
}

static int
apply_file (const char *path, struct huskd_config *cfg, struct husk_error **err)
{
  json_error_t jerr;
  json_t *doc = json_load_file (path, 0, &jerr), *caps;
  int ret = 0;

  if (doc == NULL)
    {
      if (access (path, F_OK) < 0)
        return husk_error_make (err, errno, "--config `%s`", path);
      return husk_error_make (err, 0, "%s: line %d column %d: %s", path, jerr.line, jerr.column, jerr.text);
    }
  if (!json_is_object (doc))
    ret = husk_error_make (err, 0, "%s: must be a JSON object", path);
  if (ret == 0)
    ret = check_known_keys (doc, path, err);
  if (ret == 0)
    ret = take_stream_port (doc, cfg, path, err);
  for (size_t i = 0; ret == 0 && i < sizeof string_keys / sizeof string_keys[0]; i++)
    ret = take_string (doc, string_keys[i].key, (char **) ((char *) cfg + string_keys[i].offset), path, err);
  if (ret == 0)
    ret = take_runtimes (doc, cfg, path, err);
  if (ret == 0)
    ret = take_counts (doc, cfg, path, err);
  if (ret == 0)
    ret = take_cdi_dirs (doc, cfg, path, err);
  if (ret == 0)
    ret = take_cdi_options (doc, cfg, path, err);
  if (ret == 0)
    ret = check_metrics_address (cfg->metrics_address, path, err);
  if (ret == 0 && strcmp (cfg->cgroup_driver, "cgroupfs") != 0 && strcmp (cfg->cgroup_driver, "systemd") != 0)
    ret = husk_error_make (err, 0, "%s: cgroup_driver: must be cgroupfs or systemd, not `%s`", path,
                           cfg->cgroup_driver);
  caps = json_object_get (doc, "default_capabilities");
  if (ret == 0 && caps)
    ret = take_capabilities (caps, cfg, path, err);
  if (ret == 0 && cfg->seccomp_profile)
    ret = load_seccomp_profile (cfg, path, err);
  json_decref (doc);
  return ret;
}

int
huskd_config_load (const char *path, struct huskd_config *cfg, struct husk_error **err)
{
  set_defaults (cfg);
  return path ? apply_file (path, cfg, err) : 0;
}

int
huskd_config_finish (struct huskd_config *cfg, const char *path, struct husk_error **err)
{
  default_runtimes (cfg);
  if (huskd_config_runtime (cfg, NULL) == NULL)
    return husk_error_make (err, 0, "%s: default_runtime `%s` is not configured", path ? path : "config",
                            cfg->default_runtime);
  return 0;
}

static json_t *
strv_json (char *const *strv)
{
  json_t *list = json_array ();

  for (size_t i = 0; strv && strv[i]; i++)
    json_array_append_new (list, json_string (strv[i]));
  return list;
}

json_t *
huskd_config_to_json (const struct huskd_config *cfg)
{
  json_t *doc = json_object (), *runtimes = json_object ();

  for (size_t i = 0; i < sizeof string_keys / sizeof string_keys[0]; i++)
    {
      const char *value = *(char *const *) ((const char *) cfg + string_keys[i].offset);
      json_object_set_new (doc, string_keys[i].key, value ? json_string (value) : json_null ());
    }
  for (size_t i = 0; i < cfg->n_runtimes; i++)
    json_object_set_new (runtimes, cfg->runtimes[i].name,
                         json_pack ("{s:s, s:s, s:s, s:o}", "path", cfg->runtimes[i].path, "root",
                                    cfg->runtimes[i].root, "sandbox",
                                    cfg->runtimes[i].owns_pod ? "runtime" : "husk", "args",
                                    strv_json (cfg->runtimes[i].args)));
  json_object_set_new (doc, "runtimes", runtimes);
  json_object_set_new (doc, "default_capabilities", strv_json (cfg->default_capabilities));
  json_object_set_new (doc, "max_image_bytes", json_integer ((json_int_t) cfg->max_image_bytes));
  json_object_set_new (doc, "pull_min_bytes_per_s", json_integer ((json_int_t) cfg->pull_min_bytes_per_s));
  json_object_set_new (doc, "pull_stall_timeout_s", json_integer ((json_int_t) cfg->pull_stall_timeout_s));
  json_object_set_new (doc, "stream_token_ttl_s", json_integer ((json_int_t) cfg->stream_token_ttl_s));
  json_object_set_new (doc, "stats_collect_period_s",
                       json_integer ((json_int_t) cfg->stats_collect_period_s));
  json_object_set_new (doc, "cdi_spec_dirs", strv_json (cfg->cdi_spec_dirs));
  json_object_set_new (doc, "nvidia_visible_devices",
                       json_string (cdi_nvidia_env_name ((enum cdi_nvidia_env) cfg->nvidia_visible_devices)));
  json_object_set_new (doc, "cdi_numa_align", json_boolean (cfg->cdi_numa_align));
  return doc;
}

bool
huskd_config_systemd_cgroup (const struct huskd_config *cfg)
{
  return cfg->cgroup_driver && strcmp (cfg->cgroup_driver, "systemd") == 0;
}

const struct huskd_runtime *
huskd_config_runtime (const struct huskd_config *cfg, const char *handler)
{
  const char *name = handler && *handler ? handler : cfg->default_runtime;

  for (size_t i = 0; i < cfg->n_runtimes; i++)
    if (strcmp (cfg->runtimes[i].name, name) == 0)
      return &cfg->runtimes[i];
  return NULL;
}

char *
huskd_config_runtime_names (const struct huskd_config *cfg)
{
  char *names = xstrdup (cfg->default_runtime ? cfg->default_runtime : "");

  for (size_t i = 0; i < cfg->n_runtimes; i++)
    if (!cfg->default_runtime || strcmp (cfg->runtimes[i].name, cfg->default_runtime) != 0)
      {
        char *longer = xasprintf ("%s%s%s", names, *names ? ", " : "", cfg->runtimes[i].name);
        free (names);
        names = longer;
      }
  return names;
}

void
huskd_config_clear (struct huskd_config *cfg)
{
  free (cfg->listen);
  free (cfg->root);
  free (cfg->state);
  free (cfg->default_runtime);
  for (size_t i = 0; i < cfg->n_runtimes; i++)
    {
      free (cfg->runtimes[i].name);
      free (cfg->runtimes[i].path);
      free (cfg->runtimes[i].root);
      husk_strvfreep (&cfg->runtimes[i].args);
      free (cfg->runtimes[i].unusable);
    }
  free (cfg->runtimes);
  free (cfg->cni_conf_dir);
  free (cfg->cni_bin_dirs);
  free (cfg->registries_file);
  husk_strvfreep (&cfg->default_capabilities);
  free (cfg->seccomp_profile);
  json_decref (cfg->seccomp_default);
  free (cfg->log_level);
  free (cfg->log_format);
  free (cfg->stream_address);
  free (cfg->stream_port);
  husk_strvfreep (&cfg->cdi_spec_dirs);
  free (cfg->metrics_address);
  free (cfg->cgroup_driver);
  memset (cfg, 0, sizeof *cfg);
}
