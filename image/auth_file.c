/* containers-auth.json: read, update atomically, remove entries. */
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/auth_file.h"

char *
auth_file_default_path (void)
{
  const char *explicit_path = getenv ("REGISTRY_AUTH_FILE");
  const char *runtime_dir = getenv ("XDG_RUNTIME_DIR");

  if (explicit_path && *explicit_path)
    return xstrdup (explicit_path);
  if (runtime_dir && *runtime_dir)
    return xasprintf ("%s/containers/auth.json", runtime_dir);
  return xasprintf ("/run/containers/%u/auth.json", (unsigned) getuid ());
}

char *
auth_file_encode (const char *user, const char *password)
{
  cleanup_free char *plain = xasprintf ("%s:%s", user, password);
  size_t len = strlen (plain);
  char *out = xmalloc (4 * ((len + 2) / 3) + 1);

  EVP_EncodeBlock ((unsigned char *) out, (const unsigned char *) plain, (int) len);
  return out;
}

int
auth_file_decode (const char *text, char **user, char **password)
{
  size_t in = strlen (text);
  cleanup_free char *plain = xcalloc (in + 1, 1);
  int n;
  char *colon;

  if (in == 0 || in % 4 != 0)
    return -1;
  n = EVP_DecodeBlock ((unsigned char *) plain, (const unsigned char *) text, (int) in);
  if (n < 0)
    return -1;
  /* EVP_DecodeBlock counts the padding as zero bytes. */
  for (size_t i = in; i > 0 && text[i - 1] == '=' && n > 0; i--)
    n--;
  plain[n] = '\0';
  if (strlen (plain) != (size_t) n || (colon = strchr (plain, ':')) == NULL)
    return -1;
  *user = strndup (plain, (size_t) (colon - plain));
  *password = xstrdup (colon + 1);
  return 0;
}

/* The file's JSON, an empty object when it is not there. */
static int
load (const char *path, json_t **out, struct husk_error **err)
{
  json_error_t jerr;
  json_t *doc;

  if (access (path, F_OK) < 0 && errno == ENOENT)
    {
      *out = json_object ();
      return 0;
    }
  doc = json_load_file (path, 0, &jerr);
  if (doc == NULL)
    return husk_error_make (err, 0, "auth file %s: line %d column %d: %s", path, jerr.line, jerr.column,
                            jerr.text);
  if (!json_is_object (doc)
      || (json_object_get (doc, "auths") && !json_is_object (json_object_get (doc, "auths"))))
    {
      json_decref (doc);
      return husk_error_make (err, 0, "auth file %s: expected an object with an \"auths\" object", path);
    }
  *out = doc;
  return 0;
}

/* "https://index.docker.io/v1/" → "index.docker.io": docker's keys. */
static char *
key_host (const char *key)
{
  const char *start = key;

  if (husk_str_has_prefix (key, "https://"))
    start += 8;
  else if (husk_str_has_prefix (key, "http://"))
    start += 7;
  else
    return xstrdup (key); /* a HOST or a HOST/NAMESPACE key: taken as is */
  return strndup (start, strcspn (start, "/"));
}

static bool
same_registry (const char *key, const char *host)
{
  cleanup_free char *key_only = key_host (key);

  if (strcmp (key_only, host) == 0)
    return true;
  /* docker.io is written in several ways. */
  return strcmp (host, "docker.io") == 0
         && (strcmp (key_only, "index.docker.io") == 0 || strcmp (key_only, "registry-1.docker.io") == 0);
}

int
auth_file_lookup (const char *path, const char *host, char **user, char **password, struct husk_error **err)
{
  json_t *doc = NULL, *auths, *entry;
  const char *key;
  int ret = 0;

  if (load (path, &doc, err) < 0)
    return -1;
  auths = json_object_get (doc, "auths");
  json_object_foreach (auths, key, entry)
  {
    const char *auth = json_string_value (json_object_get (entry, "auth"));

    if (!same_registry (key, host) || auth == NULL || *auth == '\0')
      continue;
    if (ret == 1)
      {
        /* a docker spelling came first; this key is exact */
        free (*user);
        free (*password);
        *user = *password = NULL;
      }
    if (auth_file_decode (auth, user, password) < 0)
      ret = husk_error_make (err, 0, "auth file %s: auths.\"%s\".auth: not base64 of USER:PASSWORD", path,
                             key);
    else
      ret = 1;
    /* an exact key wins over docker's spellings */
    if (ret < 0 || strcmp (key, host) == 0)
      break;
  }
  json_decref (doc);
  return ret;
}

static int
save (const char *path, json_t *doc, struct husk_error **err)
{
  cleanup_free char *dir = xstrdup (path);
  cleanup_free char *text = json_dumps (doc, JSON_INDENT (1) | JSON_SORT_KEYS);
  char *slash = strrchr (dir, '/');

  if (slash && slash != dir)
    {
      *slash = '\0';
      if (husk_mkdir_p (dir, 0700, err) < 0)
        return husk_error_wrap (err, "auth file %s", path);
    }
  if (husk_write_file_atomic (path, text, strlen (text), 0600, err) < 0)
    return husk_error_wrap (err, "auth file %s", path);
  /* an older file may have had a wider mode */
  if (chmod (path, 0600) < 0)
    return husk_error_make (err, errno, "auth file %s: chmod 0600", path);
  return 0;
}

int
auth_file_store (const char *path, const char *host, const char *user, const char *password,
                 struct husk_error **err)
{
  json_t *doc = NULL, *auths;
  cleanup_free char *auth = NULL;
  int ret;

  if (strchr (user, ':'))
    return husk_error_make (err, 0, "username `%s`: must not contain `:`", user);
  if (load (path, &doc, err) < 0)
    return -1;
  auths = json_object_get (doc, "auths");
  if (auths == NULL)
    json_object_set_new (doc, "auths", auths = json_object ());
  auth = auth_file_encode (user, password);
  json_object_set_new (auths, host, json_pack ("{s:s}", "auth", auth));
  ret = save (path, doc, err);
  json_decref (doc);
  return ret;
}

int
auth_file_remove (const char *path, const char *host, bool *removed, struct husk_error **err)
{
  json_t *doc = NULL, *auths;
  const char *key;
  json_t *entry;
  void *iter_tmp;
  int ret = 0;

  *removed = false;
  if (access (path, F_OK) < 0 && errno == ENOENT)
    return 0;
  if (load (path, &doc, err) < 0)
    return -1;
  auths = json_object_get (doc, "auths");
  json_object_foreach_safe (auths, iter_tmp, key, entry)
  {
    if (host == NULL || same_registry (key, host))
      {
        json_object_del (auths, key);
        *removed = true;
      }
  }
  if (*removed)
    ret = save (path, doc, err);
  json_decref (doc);
  return ret;
}

static bool
lookup_quietly (const char *path, const char *host, char **user, char **password)
{
  struct husk_error *err = NULL;
  int found = auth_file_lookup (path, host, user, password, &err);

  if (found < 0)
    {
      husk_warn ("registry credentials for %s: %s", host, err->msg);
      husk_error_free (&err);
    }
  return found > 0;
}

bool
auth_file_credentials (const char *host, char **user, char **password, void *path_or_null)
{
  const char *config_home = getenv ("XDG_CONFIG_HOME");
  const char *home = getenv ("HOME");
  cleanup_free char *primary = NULL;
  cleanup_free char *config = NULL;
  cleanup_free char *docker = NULL;

  if (path_or_null)
    return lookup_quietly (path_or_null, host, user, password);
  primary = auth_file_default_path ();
  if (lookup_quietly (primary, host, user, password))
    return true;
  if (config_home && *config_home)
    config = xasprintf ("%s/containers/auth.json", config_home);
  else if (home && *home)
    config = xasprintf ("%s/.config/containers/auth.json", home);
  if (config && lookup_quietly (config, host, user, password))
    return true;
  if (home && *home)
    docker = xasprintf ("%s/.docker/config.json", home);
  return docker && lookup_quietly (docker, host, user, password);
}
