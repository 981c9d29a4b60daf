/* CNI network configs: parsing and validating a conflist (or a legacy
 * single-plugin .conf wrapped into one), picking the first usable file of a
 * conf dir, and finding plugin binaries for huskd's NetworkReady. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cri/cni/internal.h"
#include "husk/cleanup.h"
#include "husk/util.h"

static const char *const supported_versions[] = { "0.3.0", "0.3.1", "0.4.0", "1.0.0" };

bool
cni_version_is_supported (const char *version)
{
  for (size_t i = 0; i < sizeof supported_versions / sizeof supported_versions[0]; i++)
    if (strcmp (version, supported_versions[i]) == 0)
      return true;
  return false;
}

bool
cni_version_at_least (const char *version, int major, int minor)
{
  int have_major = 0, have_minor = 0;

  if (version == NULL || sscanf (version, "%d.%d", &have_major, &have_minor) != 2)
    return false;
  return have_major > major || (have_major == major && have_minor >= minor);
}

static bool
is_alnum (char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool
cni_name_is_valid (const char *name)
{
  if (name == NULL || !is_alnum (name[0]))
    return false;
  for (const char *c = name + 1; *c; c++)
    if (!is_alnum (*c) && *c != '_' && *c != '.' && *c != '-')
      return false;
  return true;
}

void
cni_network_free (struct cni_network *net)
{
  if (net == NULL)
    return;
  for (size_t i = 0; i < net->n_plugins; i++)
    free (net->plugins[i].type);
  free (net->plugins);
  free (net->path);
  free (net->name);
  free (net->cni_version);
  json_decref (net->conflist);
  husk_strvfreep (&net->skipped);
  free (net);
}

/* A plugin type is a file name inside a bin dir, nothing more. */
static bool
type_is_valid (const char *type)
{
  return type[0] != '\0' && strchr (type, '/') == NULL && strcmp (type, ".") != 0 && strcmp (type, "..") != 0;
}

static int
check_plugin (json_t *plugin, size_t index, struct husk_error **err)
{
  json_t *type = json_object_get (plugin, "type");
  json_t *ipam = json_object_get (plugin, "ipam");
  json_t *caps = json_object_get (plugin, "capabilities");

  if (!json_is_object (plugin))
    return husk_error_make (err, 0, "plugins[%zu] is not an object", index);
  if (type == NULL)
    return husk_error_make (err, 0, "plugins[%zu]: missing `type`", index);
  if (!json_is_string (type) || !type_is_valid (json_string_value (type)))
    return husk_error_make (err, 0, "plugins[%zu]: `type` must name a plugin binary", index);
  if (caps != NULL && !json_is_object (caps))
    return husk_error_make (err, 0, "plugins[%zu] (%s): `capabilities` is not an object", index,
                            json_string_value (type));
  if (ipam != NULL && json_object_get (ipam, "type") != NULL)
    {
      json_t *ipam_type = json_object_get (ipam, "type");
      if (!json_is_string (ipam_type) || !type_is_valid (json_string_value (ipam_type)))
        return husk_error_make (err, 0, "plugins[%zu] (%s): `ipam.type` must name a plugin binary", index,
                                json_string_value (type));
    }
  return 0;
}

/* disableCheck is a string in the spec's text and a boolean in libcni. */
static int
parse_disable_check (json_t *value, bool *out, struct husk_error **err)
{
  const char *text = json_string_value (value);

  *out = false;
  if (value == NULL)
    return 0;
  if (json_is_boolean (value))
    *out = json_is_true (value);
  else if (text != NULL && (strcmp (text, "true") == 0 || strcmp (text, "false") == 0))
    *out = strcmp (text, "true") == 0;
  else
    return husk_error_make (err, 0, "`disableCheck` must be true or false");
  return 0;
}

static int
check_header (json_t *conflist, struct husk_error **err)
{
  json_t *version = json_object_get (conflist, "cniVersion");
  json_t *name = json_object_get (conflist, "name");
  json_t *plugins = json_object_get (conflist, "plugins");

  if (!json_is_object (conflist))
    return husk_error_make (err, 0, "not a JSON object");
  if (!json_is_string (version))
    return husk_error_make (err, 0, "missing `cniVersion`");
  if (!cni_version_is_supported (json_string_value (version)))
    return husk_error_make (err, 0, "unsupported cniVersion `%s` (supported: 0.3.0, 0.3.1, 0.4.0, 1.0.0)",
                            json_string_value (version));
  if (!json_is_string (name))
    return husk_error_make (err, 0, "missing `name`");
  if (!cni_name_is_valid (json_string_value (name)))
    return husk_error_make (err, 0, "invalid network name `%s` (letters, digits, `_`, `.`, `-`)",
                            json_string_value (name));
  if (!json_is_array (plugins) || json_array_size (plugins) == 0)
    return husk_error_make (err, 0, "`plugins` must be a non-empty list");
  return 0;
}

int
cni_network_from_json (json_t *conflist, const char *path, struct cni_network **out, struct husk_error **err)
{
  struct cni_network *net;
  json_t *plugins = json_object_get (conflist, "plugins");
  bool disable_check;

  if (check_header (conflist, err) < 0)
    return -1;
  for (size_t i = 0; i < json_array_size (plugins); i++)
    if (check_plugin (json_array_get (plugins, i), i, err) < 0)
      return -1;
  if (parse_disable_check (json_object_get (conflist, "disableCheck"), &disable_check, err) < 0)
    return -1;

  net = xcalloc (1, sizeof *net);
  net->path = xstrdup (path);
  net->name = xstrdup (json_string_value (json_object_get (conflist, "name")));
  net->cni_version = xstrdup (json_string_value (json_object_get (conflist, "cniVersion")));
  net->disable_check = disable_check;
  net->conflist = json_incref (conflist);
  net->n_plugins = json_array_size (plugins);
  net->plugins = xcalloc (net->n_plugins, sizeof *net->plugins);
  for (size_t i = 0; i < net->n_plugins; i++)
    {
      net->plugins[i].conf = json_array_get (plugins, i);
      net->plugins[i].type = xstrdup (json_string_value (json_object_get (net->plugins[i].conf, "type")));
    }
  net->skipped = xcalloc (1, sizeof (char *));
  *out = net;
  return 0;
}

/* A legacy config is one plugin; the list around it gets its name and
 * version, and the plugin keeps them too, as libcni does. */
static int
wrap_legacy (json_t *conf, json_t **conflist, struct husk_error **err)
{
  if (!json_is_object (conf))
    return husk_error_make (err, 0, "not a JSON object");
  if (json_object_get (conf, "type") == NULL && json_object_get (conf, "plugins") != NULL)
    return husk_error_make (err, 0, "missing `type` (a config list? name the file *.conflist)");
  if (json_object_get (conf, "type") == NULL)
    return husk_error_make (err, 0, "missing `type`");
  *conflist = json_pack ("{s:O*,s:O*,s:[O]}", "cniVersion", json_object_get (conf, "cniVersion"), "name",
                         json_object_get (conf, "name"), "plugins", conf);
  return 0;
}

int
cni_config_parse (const char *text, size_t len, const char *path, bool legacy, struct cni_network **out,
                  struct husk_error **err)
{
  const char *name = path ? path : "<string>";
  json_error_t json_err;
  json_t *parsed = json_loadb (text, len, JSON_REJECT_DUPLICATES, &json_err);
  json_t *conflist = NULL;
  int ret;

  if (parsed == NULL)
    return husk_error_make (err, 0, "parse CNI config %s:%d:%d: %s", name, json_err.line, json_err.column,
                            json_err.text);
  if (legacy)
    ret = wrap_legacy (parsed, &conflist, err);
  else
    ret = cni_network_from_json (parsed, path, out, err);
  json_decref (parsed);
  if (ret == 0 && legacy)
    {
      ret = cni_network_from_json (conflist, path, out, err);
      json_decref (conflist);
    }
  if (ret < 0)
    return husk_error_wrap (err, "CNI config %s", name);
  return 0;
}

int
cni_config_load_file (const char *path, struct cni_network **out, struct husk_error **err)
{
  cleanup_free char *text = NULL;
  size_t len = 0;

  if (husk_read_file (path, &text, &len, err) < 0)
    return husk_error_wrap (err, "read CNI config");
  return cni_config_parse (text, len, path, !husk_str_has_suffix (path, ".conflist"), out, err);
}

static bool
is_config_name (const char *name)
{
  return name[0] != '.'
         && (husk_str_has_suffix (name, ".conflist") || husk_str_has_suffix (name, ".conf")
             || husk_str_has_suffix (name, ".json"));
}

static int
compare_names (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The config file names of DIR, sorted; *N = 0 and no error when DIR does
 * not exist. */
static int
list_config_names (const char *dir, char ***names, size_t *n, struct husk_error **err)
{
  cleanup_dir DIR *d = opendir (dir);
  cleanup_strv char **found = xcalloc (1, sizeof (char *));
  struct dirent *de;

  *n = 0;
  if (d == NULL && errno == ENOENT)
    {
      *names = steal_pointer (&found);
      return 0;
    }
  if (d == NULL)
    return husk_error_make (err, errno, "open CNI config dir `%s`", dir);
  while ((de = readdir (d)) != NULL)
    {
      if (!is_config_name (de->d_name))
        continue;
      found = xrealloc (found, (*n + 2) * sizeof (char *));
      found[(*n)++] = xstrdup (de->d_name);
      found[*n] = NULL;
    }
  if (*n > 1) /* found is NULL in an empty dir */
    qsort (found, *n, sizeof (char *), compare_names);
  *names = steal_pointer (&found);
  return 0;
}

static int
no_usable_config (const char *dir, char **skipped, size_t n_skipped, struct husk_error **err)
{
  if (n_skipped == 0)
    return husk_error_make (err, 0, "no CNI network config in %s", dir);
  if (n_skipped == 1)
    return husk_error_make (err, 0, "no usable CNI network config in %s: %s", dir, skipped[0]);
  return husk_error_make (err, 0, "no usable CNI network config in %s: %s (and %zu more)", dir, skipped[0],
                          n_skipped - 1);
}

int
cni_config_load_dir (const char *dir, struct cni_network **out, struct husk_error **err)
{
  cleanup_strv char **names = NULL;
  cleanup_strv char **skipped = NULL;
  size_t n_names = 0, n_skipped = 0;

  if (dir == NULL)
    dir = CNI_DEFAULT_CONF_DIR;
  if (list_config_names (dir, &names, &n_names, err) < 0)
    return -1;
  skipped = xcalloc (n_names + 1, sizeof (char *));
  for (size_t i = 0; i < n_names; i++)
    {
      cleanup_free char *path = xasprintf ("%s/%s", dir, names[i]);
      struct husk_error *file_err = NULL;
      struct stat st;

      if (stat (path, &st) < 0 || !S_ISREG (st.st_mode))
        continue;
      if (cni_config_load_file (path, out, &file_err) == 0)
        {
          husk_strvfreep (&(*out)->skipped);
          (*out)->skipped = steal_pointer (&skipped);
          return 0;
        }
      skipped[n_skipped++] = steal_pointer (&file_err->msg);
      husk_error_free (&file_err);
    }
  return no_usable_config (dir, skipped, n_skipped, err);
}

static bool
is_executable_file (const char *path)
{
  struct stat st;

  return stat (path, &st) == 0 && S_ISREG (st.st_mode) && (st.st_mode & 0111) != 0;
}

int
cni_find_plugin (const char *bin_dirs, const char *type, char **path, struct husk_error **err)
{
  cleanup_free char *dirs = xstrdup (bin_dirs ? bin_dirs : CNI_DEFAULT_BIN_DIRS);
  char *saveptr = NULL;

  if (!type_is_valid (type))
    return husk_error_make (err, 0, "invalid CNI plugin name `%s`", type);
  for (char *dir = strtok_r (dirs, ":", &saveptr); dir; dir = strtok_r (NULL, ":", &saveptr))
    {
      cleanup_free char *candidate = xasprintf ("%s/%s", dir, type);

      if (is_executable_file (candidate))
        {
          *path = steal_pointer (&candidate);
          return 0;
        }
    }
  return husk_error_kind (err, ENOENT, "CNI plugin `%s` not found in %s", type,
                          bin_dirs ? bin_dirs : CNI_DEFAULT_BIN_DIRS);
}

int
cni_network_check_plugins (const struct cni_network *net, const char *bin_dirs, struct husk_error **err)
{
  for (size_t i = 0; i < net->n_plugins; i++)
    {
      const char *types[]
          = { net->plugins[i].type,
              json_string_value (json_object_get (json_object_get (net->plugins[i].conf, "ipam"), "type")) };

      for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        {
          cleanup_free char *path = NULL;

          if (types[t] != NULL && cni_find_plugin (bin_dirs, types[t], &path, err) < 0)
            return husk_error_wrap (err, "network `%s` (%s)", net->name, net->path ? net->path : "-");
        }
    }
  return 0;
}

int
cni_network_ready (const char *conf_dir, const char *bin_dirs, struct husk_error **err)
{
  struct cni_network *net = NULL;
  int ret;

  if (cni_config_load_dir (conf_dir, &net, err) < 0)
    return -1;
  ret = cni_network_check_plugins (net, bin_dirs, err);
  cni_network_free (net);
  return ret;
}
