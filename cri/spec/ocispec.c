/* Image config + request -> OCI runtime config (see ocispec.h). */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "cri/spec/ocispec.h"
#include "image/passwd.h"
#include "runtime/spec/spec.h"

/* Docker's (and containerd's) default capability set, which image authors
 * expect; huskd's default_capabilities starts from it. */
const char *const ocispec_default_caps[] = {
  "CAP_CHOWN",
  "CAP_DAC_OVERRIDE",
  "CAP_FSETID",
  "CAP_FOWNER",
  "CAP_MKNOD",
  "CAP_NET_RAW",
  "CAP_SETGID",
  "CAP_SETUID",
  "CAP_SETFCAP",
  "CAP_SETPCAP",
  "CAP_NET_BIND_SERVICE",
  "CAP_SYS_CHROOT",
  "CAP_KILL",
  "CAP_AUDIT_WRITE",
  NULL,
};

#define DEFAULT_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static size_t
key_len (const char *kv)
{
  const char *eq = strchr (kv, '=');
  return eq ? (size_t) (eq - kv) : strlen (kv);
}

char **
ocispec_merge_env (char *const *base, char *const *overrides)
{
  size_t n = husk_strv_len (base) + husk_strv_len (overrides), used = 0;
  char **out = xcalloc (n + 1, sizeof (char *));
  char *const *lists[] = { base, overrides };

  for (size_t l = 0; l < 2; l++)
    for (size_t i = 0; lists[l] && lists[l][i]; i++)
      {
        const char *kv = lists[l][i];
        size_t k = key_len (kv), j;

        for (j = 0; j < used; j++)
          if (key_len (out[j]) == k && strncmp (out[j], kv, k) == 0)
            break;
        if (j < used)
          free (out[j]);
        else
          used++;
        out[j] = xstrdup (kv);
      }
  return out;
}

static json_t *
strv_json (char *const *v)
{
  json_t *a = json_array ();

  for (size_t i = 0; v && v[i]; i++)
    json_array_append_new (a, json_string (v[i]));
  return a;
}

/* Entrypoint + Cmd, with the request's replacements (docker semantics: a
 * new entrypoint drops the image's Cmd; an empty one, podman's
 * `--entrypoint ""`, clears the Entrypoint and keeps the Cmd). */
static json_t *
process_args (const struct image_config *image, const struct ocispec_request *req, struct husk_error **err)
{
  char *const *entrypoint = req->entrypoint ? req->entrypoint : image->entrypoint;
  char *const *cmd = req->args ? req->args : (req->entrypoint && req->entrypoint[0] ? NULL : image->cmd);
  json_t *args = json_array ();

  for (size_t i = 0; entrypoint && entrypoint[i]; i++)
    json_array_append_new (args, json_string (entrypoint[i]));
  for (size_t i = 0; cmd && cmd[i]; i++)
    json_array_append_new (args, json_string (cmd[i]));
  if (json_array_size (args) == 0)
    {
      json_decref (args);
      husk_error_make (err, 0, "no command: the image has no Entrypoint or Cmd and none was given");
      return NULL;
    }
  return args;
}

static json_t *
user_json (const struct image_config *image, const struct ocispec_request *req, const char *rootfs,
           struct husk_error **err)
{
  const char *spec = req->user ? req->user : image->user;
  struct passwd_user user = { 0 };
  json_t *gids, *out;

  if (passwd_resolve (rootfs, spec, &user, err) < 0)
    {
      husk_error_wrap (err, "%s `%s`", req->user ? (req->user_field ?: "--user") : "image User",
                       spec ? spec : "");
      return NULL;
    }
  gids = json_array ();
  for (size_t i = 0; i < user.n_additional_gids; i++)
    json_array_append_new (gids, json_integer (user.additional_gids[i]));
  out = json_pack ("{s:I, s:I, s:o}", "uid", (json_int_t) user.uid, "gid", (json_int_t) user.gid,
                   "additionalGids", gids);
  passwd_user_clear (&user);
  return out;
}

static json_t *
caps_json (void)
{
  json_t *set = json_array (), *caps;

  for (size_t i = 0; ocispec_default_caps[i]; i++)
    json_array_append_new (set, json_string (ocispec_default_caps[i]));
  caps = json_pack ("{s:O, s:O, s:O, s:[]}", "bounding", set, "effective", set, "permitted", set, "ambient");

  /* Each "O" took its own reference. */
  json_decref (set);
  return caps;
}

static int
add_process (json_t *config, const struct image_config *image, const struct ocispec_request *req,
             const char *rootfs, struct husk_error **err)
{
  json_t *process = json_object_get (config, "process");
  json_t *args = process_args (image, req, err);
  json_t *user = args ? user_json (image, req, rootfs, err) : NULL;
  cleanup_strv char **env = NULL;
  json_t *caps;

  if (user == NULL)
    {
      json_decref (args);
      return -1;
    }
  {
    char *const path_only[] = { DEFAULT_PATH, NULL };
    cleanup_strv char **with_path = ocispec_merge_env (path_only, image->env);
    env = ocispec_merge_env (with_path, req->env);
  }
  caps = caps_json ();
  json_object_set_new (process, "args", args);
  json_object_set_new (process, "user", user);
  json_object_set_new (process, "env", strv_json (env));
  json_object_set_new (process, "cwd",
                       json_string (req->workdir         ? req->workdir
                                    : image->working_dir ? image->working_dir
                                                         : "/"));
  json_object_set_new (process, "terminal", json_boolean (req->terminal));
  json_object_set_new (process, "capabilities", caps);
  return 0;
}

static int
add_mounts (json_t *config, const struct ocispec_request *req, struct husk_error **err)
{
  json_t *mounts = json_object_get (config, "mounts");

  for (size_t i = 0; i < req->n_mounts; i++)
    {
      const struct ocispec_mount *m = &req->mounts[i];
      struct stat st;

      if (m->destination == NULL || m->destination[0] != '/')
        return husk_error_make (err, 0, "--volume %s: the container path must be absolute", m->source);
      if (stat (m->source, &st) < 0)
        return husk_error_make (err, errno, "--volume `%s`", m->source);
      json_array_append_new (mounts, json_pack ("{s:s, s:s, s:s, s:[s,s]}", "destination", m->destination,
                                                "type", "bind", "source", m->source, "options", "rbind",
                                                m->readonly ? "ro" : "rw"));
    }
  return 0;
}

static int
add_devices (json_t *config, const struct ocispec_request *req, struct husk_error **err)
{
  json_t *linux_obj = json_object_get (config, "linux");
  json_t *devices = json_array ();
  json_t *rules = json_array ();

  for (size_t i = 0; req->devices && req->devices[i]; i++)
    {
      struct stat st;

      if (stat (req->devices[i], &st) < 0 || !(S_ISCHR (st.st_mode) || S_ISBLK (st.st_mode)))
        {
          json_decref (devices);
          json_decref (rules);
          return husk_error_make (err, errno ? errno : ENODEV, "--device `%s`: not a device",
                                  req->devices[i]);
        }
      json_array_append_new (
          devices, json_pack ("{s:s, s:s, s:I, s:I, s:i}", "path", req->devices[i], "type",
                              S_ISCHR (st.st_mode) ? "c" : "b", "major", (json_int_t) major (st.st_rdev),
                              "minor", (json_int_t) minor (st.st_rdev), "fileMode", st.st_mode & 07777));
      json_array_append_new (rules, json_pack ("{s:b, s:s, s:I, s:I, s:s}", "allow", 1, "type",
                                               S_ISCHR (st.st_mode) ? "c" : "b", "major",
                                               (json_int_t) major (st.st_rdev), "minor",
                                               (json_int_t) minor (st.st_rdev), "access", "rwm"));
    }
  json_object_set_new (linux_obj, "devices", devices);
  if (json_array_size (rules))
    {
      json_t *resources = json_object_get (linux_obj, "resources");
      if (resources == NULL)
        json_object_set_new (linux_obj, "resources", resources = json_object ());
      json_object_set_new (resources, "devices", rules);
    }
  else
    json_decref (rules);
  return 0;
}

static void
add_resources (json_t *config, const struct ocispec_request *req)
{
  json_t *linux_obj = json_object_get (config, "linux");
  json_t *resources = json_object_get (linux_obj, "resources");

  if (req->memory_limit <= 0 && req->cpus <= 0 && req->pids_limit <= 0)
    return;
  if (resources == NULL)
    json_object_set_new (linux_obj, "resources", resources = json_object ());
  if (req->memory_limit > 0)
    json_object_set_new (resources, "memory", json_pack ("{s:I}", "limit", (json_int_t) req->memory_limit));
  if (req->cpus > 0)
    json_object_set_new (
        resources, "cpu",
        json_pack ("{s:I, s:I}", "quota", (json_int_t) (req->cpus * 100000), "period", (json_int_t) 100000));
  if (req->pids_limit > 0)
    json_object_set_new (resources, "pids", json_pack ("{s:I}", "limit", (json_int_t) req->pids_limit));
}

static void
set_network (json_t *config, enum ocispec_network network)
{
  json_t *namespaces = json_object_get (json_object_get (config, "linux"), "namespaces");
  size_t i;
  json_t *ns;

  if (network != OCISPEC_NETWORK_HOST)
    return;
  json_array_foreach (namespaces, i, ns)
  {
    if (strcmp (json_string_value (json_object_get (ns, "type")) ?: "", "network") == 0)
      {
        json_array_remove (namespaces, i);
        break;
      }
  }
  {
    json_t *mounts = json_object_get (config, "mounts");
    static const char *const files[] = { "/etc/resolv.conf", "/etc/hosts" };
    for (size_t f = 0; f < 2; f++)
      if (access (files[f], R_OK) == 0)
        json_array_append_new (mounts, json_pack ("{s:s, s:s, s:s, s:[s,s]}", "destination", files[f], "type",
                                                  "bind", "source", files[f], "options", "rbind", "ro"));
  }
}

int
ocispec_build (const struct image_config *image, const struct ocispec_request *req, const char *rootfs,
               json_t **out, struct husk_error **err)
{
  cleanup_free char *text = spec_default_json (false);
  json_error_t jerr;
  json_t *config = json_loads (text, 0, &jerr);

  if (config == NULL)
    return husk_error_make (err, 0, "default spec: %s", jerr.text);
  json_object_set_new (config, "root",
                       json_pack ("{s:s, s:b}", "path", rootfs, "readonly", req->readonly_rootfs));
  if (req->hostname)
    json_object_set_new (config, "hostname", json_string (req->hostname));
  if (req->cgroups_path)
    json_object_set_new (json_object_get (config, "linux"), "cgroupsPath", json_string (req->cgroups_path));
  if (add_process (config, image, req, rootfs, err) < 0 || add_mounts (config, req, err) < 0
      || add_devices (config, req, err) < 0)
    {
      json_decref (config);
      return -1;
    }
  add_resources (config, req);
  set_network (config, req->network);
  *out = config;
  return 0;
}
