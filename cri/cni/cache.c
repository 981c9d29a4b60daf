/* The CNI result cache: one JSON file per attachment,
 * CACHE_DIR/<network>-<containerID>.json, written atomically before ADD
 * (config and port mappings) and after it (the result), so a DEL after a
 * huskd restart can give plugins what ADD gave them. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cri/cni/internal.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define CACHE_KIND "husk-cni-cache"
#define CACHE_VERSION 1

void
cni_cache_entry_free (struct cni_cache_entry *entry)
{
  if (entry == NULL)
    return;
  free (entry->network);
  free (entry->container_id);
  free (entry->ifname);
  free (entry->netns);
  free (entry->cni_args);
  json_decref (entry->config);
  json_decref (entry->runtime_config);
  json_decref (entry->result);
  free (entry);
}

char *
cni_cache_path (const char *cache_dir, const char *network, const char *container_id)
{
  return xasprintf ("%s/%s-%s.json", cache_dir, network, container_id);
}

int
cni_cache_write (const char *cache_dir, const struct cni_cache_entry *entry, bool durable,
                 struct husk_error **err)
{
  cleanup_free char *path = cni_cache_path (cache_dir, entry->network, entry->container_id);
  cleanup_free char *text = NULL;
  json_t *json;

  if (husk_mkdir_p (cache_dir, 0700, err) < 0)
    return husk_error_wrap (err, "create the CNI cache dir");
  json = json_pack ("{s:s,s:i,s:s,s:s,s:s,s:s,s:s,s:O,s:O*,s:O*}", "kind", CACHE_KIND, "version",
                    CACHE_VERSION, "network", entry->network, "containerId", entry->container_id, "ifName",
                    entry->ifname, "netns", entry->netns ? entry->netns : "", "cniArgs", entry->cni_args,
                    "config", entry->config, "runtimeConfig", entry->runtime_config, "result", entry->result);
  if (json == NULL)
    return husk_error_make (err, EINVAL, "encode the CNI cache entry `%s`", path);
  if (entry->del_started)
    json_object_set_new (json, "delStarted", json_true ());
  text = json_dumps (json, JSON_COMPACT);
  json_decref (json);
  if (text == NULL)
    return husk_error_make (err, ENOMEM, "encode the CNI cache entry `%s`", path);
  if (durable)
    return husk_write_file_atomic (path, text, strlen (text), 0600, err);
  return husk_write_file_replace (path, text, strlen (text), 0600, err);
}

static char *
string_field (json_t *json, const char *key)
{
  return xstrdup (json_string_value (json_object_get (json, key)));
}

static json_t *
object_field (json_t *json, const char *key)
{
  json_t *value = json_object_get (json, key);
  return json_is_object (value) ? json_incref (value) : NULL;
}

static int
entry_from_json (json_t *json, const char *path, struct cni_cache_entry **out, struct husk_error **err)
{
  struct cni_cache_entry *entry;

  if (!json_is_object (json) || json_integer_value (json_object_get (json, "version")) != CACHE_VERSION
      || strcmp (json_string_value (json_object_get (json, "kind")) ?: "", CACHE_KIND) != 0)
    return husk_error_make (err, 0, "`%s` is not a husk CNI cache entry (version %d)", path, CACHE_VERSION);
  entry = xcalloc (1, sizeof *entry);
  entry->network = string_field (json, "network");
  entry->container_id = string_field (json, "containerId");
  entry->ifname = string_field (json, "ifName");
  entry->netns = string_field (json, "netns");
  entry->cni_args = string_field (json, "cniArgs");
  entry->config = object_field (json, "config");
  entry->runtime_config = object_field (json, "runtimeConfig");
  entry->result = object_field (json, "result");
  entry->del_started = json_is_true (json_object_get (json, "delStarted"));
  if (!entry->network || !entry->container_id || !entry->ifname || !entry->netns || !entry->cni_args
      || !entry->config)
    {
      cni_cache_entry_free (entry);
      return husk_error_make (err, 0, "CNI cache entry `%s` lacks a field", path);
    }
  *out = entry;
  return 0;
}

int
cni_cache_read (const char *path, struct cni_cache_entry **out, struct husk_error **err)
{
  cleanup_free char *text = NULL;
  json_error_t json_err;
  json_t *json;
  size_t len = 0;
  int ret;

  *out = NULL;
  if (access (path, F_OK) < 0 && errno == ENOENT)
    return 0;
  if (husk_read_file (path, &text, &len, err) < 0)
    return husk_error_wrap (err, "read CNI cache");
  json = json_loadb (text, len, 0, &json_err);
  if (json == NULL)
    return husk_error_make (err, 0, "parse CNI cache entry %s:%d:%d: %s", path, json_err.line,
                            json_err.column, json_err.text);
  ret = entry_from_json (json, path, out, err);
  json_decref (json);
  return ret;
}

int
cni_cache_remove (const char *path, struct husk_error **err)
{
  if (unlink (path) < 0 && errno != ENOENT)
    return husk_error_make (err, errno, "remove CNI cache entry `%s`", path);
  return 0;
}

struct found_entries
{
  struct cni_cache_entry **entries;
  char **paths;
  size_t n;
};

static void
found_add (struct found_entries *found, struct cni_cache_entry *entry, char *path)
{
  found->entries = xrealloc (found->entries, (found->n + 1) * sizeof *found->entries);
  found->paths = xrealloc (found->paths, (found->n + 2) * sizeof *found->paths);
  found->entries[found->n] = entry;
  found->paths[found->n++] = path;
  found->paths[found->n] = NULL;
}

/* Names alone are ambiguous (both network names and ids may hold '-'), so
 * each candidate's containerId decides. */
int
cni_cache_find (const char *cache_dir, const char *container_id, struct cni_cache_entry ***entries,
                char ***paths, size_t *n, struct husk_error **err)
{
  cleanup_dir DIR *dir = opendir (cache_dir);
  cleanup_free char *suffix = xasprintf ("-%s.json", container_id);
  struct found_entries found = { .paths = xcalloc (1, sizeof (char *)) };
  struct dirent *de;

  if (dir == NULL && errno != ENOENT)
    {
      free (found.paths);
      return husk_error_make (err, errno, "open the CNI cache dir `%s`", cache_dir);
    }
  while (dir != NULL && (de = readdir (dir)) != NULL)
    {
      struct cni_cache_entry *entry = NULL;
      struct husk_error *entry_err = NULL;
      char *path;

      if (!husk_str_has_suffix (de->d_name, suffix) || strlen (de->d_name) == strlen (suffix))
        continue;
      path = xasprintf ("%s/%s", cache_dir, de->d_name);
      if (cni_cache_read (path, &entry, &entry_err) < 0)
        {
          husk_warn ("skip CNI cache entry: %s", entry_err->msg);
          husk_error_free (&entry_err);
        }
      if (entry != NULL && strcmp (entry->container_id, container_id) == 0)
        {
          found_add (&found, entry, path);
          continue;
        }
      cni_cache_entry_free (entry);
      free (path);
    }
  *entries = found.entries;
  *paths = found.paths;
  *n = found.n;
  return 0;
}

static bool
is_entry_name (const char *name)
{
  return husk_str_has_suffix (name, ".json") && name[0] != '.';
}

int
cni_cached_ids (const struct cni_ctx *ctx, char ***ids, struct husk_error **err)
{
  const char *cache_dir = ctx && ctx->cache_dir ? ctx->cache_dir : CNI_DEFAULT_CACHE_DIR;
  cleanup_dir DIR *dir = opendir (cache_dir);
  char **found = xcalloc (1, sizeof *found);
  struct dirent *de;

  if (dir == NULL && errno != ENOENT)
    {
      free (found);
      return husk_error_make (err, errno, "open the CNI cache dir `%s`", cache_dir);
    }
  while (dir != NULL && (de = readdir (dir)) != NULL)
    {
      cleanup_free char *path = NULL;
      struct cni_cache_entry *entry = NULL;
      struct husk_error *entry_err = NULL;

      if (!is_entry_name (de->d_name))
        continue;
      path = xasprintf ("%s/%s", cache_dir, de->d_name);
      if (cni_cache_read (path, &entry, &entry_err) < 0)
        {
          husk_warn ("skip CNI cache entry: %s", entry_err->msg);
          husk_error_free (&entry_err);
          continue;
        }
      if (entry != NULL)
        {
          bool seen = false;
          for (size_t i = 0; found[i] && !seen; i++)
            seen = strcmp (found[i], entry->container_id) == 0;
          if (!seen)
            found = husk_strv_append (found, entry->container_id);
        }
      cni_cache_entry_free (entry);
    }
  *ids = found;
  return 0;
}
