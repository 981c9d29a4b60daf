/* Applying CDI containerEdits to an OCI config (a jansson document), with
 * the CDI spec's semantics: env replaces the same key, device nodes take
 * what is missing from the host node and get a cgroup allow rule, a mount
 * replaces one at the same containerPath and mounts are then sorted by
 * depth, hooks are appended to their list, gids added once.  cdi_apply
 * works on a copy so that a failure leaves the caller's config as it was. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "cri/cdi/cdi.h"
#include "cri/cdi/cdi_internal.h"
#include "husk/cleanup.h"

/* OBJ[KEY], created as an empty object or array when absent. */
static json_t *
child (json_t *obj, const char *key, int array)
{
  json_t *v = json_object_get (obj, key);
  if (v == NULL || (array ? !json_is_array (v) : !json_is_object (v)))
    {
      v = array ? json_array () : json_object ();
      json_object_set_new (obj, key, v);
    }
  return v;
}

static int
apply_env (json_t *config, json_t *env, struct husk_error **err)
{
  json_t *list = child (child (config, "process", 0), "env", 1);
  size_t i, j;
  json_t *e, *old;
  json_array_foreach (env, i, e)
  {
    const char *kv = json_string_value (e);
    const char *eq = strchr (kv, '=');
    if (eq == NULL || eq == kv)
      return husk_error_kind (err, EINVAL, "CDI env %s: not KEY=VALUE", kv);
    size_t keylen = eq - kv + 1;
    int replaced = 0;
    json_array_foreach (list, j, old)
    {
      const char *s = json_string_value (old);
      if (s && !strncmp (s, kv, keylen))
        {
          json_array_set_new (list, j, json_string (kv));
          replaced = 1;
          break;
        }
    }
    if (!replaced)
      json_array_append_new (list, json_string (kv));
  }
  return 0;
}

static const char *
node_type (mode_t mode)
{
  return S_ISCHR (mode) ? "c" : S_ISBLK (mode) ? "b" : S_ISFIFO (mode) ? "p" : NULL;
}

/* What a device node takes from its host node when the spec leaves it
 * out: the host's stat, when there is one. */
struct host_node
{
  struct stat st;
  bool found;
};

/* Type, major and minor of node N from its host node when not given, as
 * the CDI spec says: a given type with a major (or a fifo) is taken as is.
 * HOST gets the host node's stat (when it is there) for the mode and
 * owner. */
static int
fill_node (json_t *n, char **type, long long *major, long long *minor, struct host_node *host_node,
           struct husk_error **err)
{
  const char *path = json_string_value (json_object_get (n, "path"));
  const char *host = json_string_value (json_object_get (n, "hostPath"));
  const char *given = json_string_value (json_object_get (n, "type"));
  *major = json_integer_value (json_object_get (n, "major"));
  *minor = json_integer_value (json_object_get (n, "minor"));
  if (given && strcmp (given, "c") && strcmp (given, "b") && strcmp (given, "p") && strcmp (given, "u"))
    return husk_error_kind (err, EINVAL, "CDI device node %s: invalid type %s", path, given);
  host = host ? host : path;
  int stat_errno = stat (host, &host_node->st) == 0 ? 0 : errno;
  const struct stat *st = &host_node->st;
  host_node->found = stat_errno == 0 && node_type (st->st_mode) != NULL;
  if (given && (*major != 0 || !strcmp (given, "p")))
    {
      *type = strdup (given);
      return 0;
    }
  if (stat_errno != 0)
    return husk_error_make (err, stat_errno, "CDI device node %s: stat %s", path, host);
  const char *found = node_type (st->st_mode);
  if (found == NULL)
    return husk_error_kind (err, EINVAL, "CDI device node %s: %s is not a device node", path, host);
  if (given && strcmp (given, found) && !(given[0] == 'u' && found[0] == 'c'))
    return husk_error_kind (err, EINVAL, "CDI device node %s: type %s given, but %s is of type %s", path,
                            given, host, found);
  *type = strdup (given ? given : found);
  if (*major == 0)
    {
      *major = major (st->st_rdev);
      *minor = minor (st->st_rdev);
    }
  return 0;
}

/* fileMode, uid and gid of node N onto DEV: as the spec gives them, else
 * the host node's, so the container's node is never more open than the
 * host's (a runtime's default is 0666 root; the container user as owner
 * would let it write what only root may on the host). */
static void
fill_mode_owner (json_t *dev, json_t *n, const struct host_node *host_node)
{
  static const char *const keys[] = { "fileMode", "uid", "gid" };
  for (size_t i = 0; i < 3; i++)
    {
      json_t *v = json_object_get (n, keys[i]);
      if (v)
        json_object_set (dev, keys[i], v);
      else if (host_node->found)
        json_object_set_new (dev, keys[i],
                             json_integer (i == 0   ? (json_int_t) (host_node->st.st_mode & 07777)
                                           : i == 1 ? (json_int_t) host_node->st.st_uid
                                                    : (json_int_t) host_node->st.st_gid));
    }
}

static void
remove_by (json_t *list, const char *key, const char *value)
{
  for (size_t i = json_array_size (list); i-- > 0;)
    {
      const char *s = json_string_value (json_object_get (json_array_get (list, i), key));
      if (s && !strcmp (s, value))
        json_array_remove (list, i);
    }
}

static int
apply_node (json_t *config, json_t *n, struct husk_error **err)
{
  cleanup_free char *type = NULL;
  struct host_node host_node;
  long long major, minor;
  if (fill_node (n, &type, &major, &minor, &host_node, err) < 0)
    return -1;
  const char *path = json_string_value (json_object_get (n, "path"));
  json_t *linux_ = child (config, "linux", 0);
  json_t *devices = child (linux_, "devices", 1);
  json_t *dev = json_pack ("{s:s, s:s, s:I, s:I}", "path", path, "type", type, "major", (json_int_t) major,
                           "minor", (json_int_t) minor);
  fill_mode_owner (dev, n, &host_node);
  remove_by (devices, "path", path);
  json_array_append_new (devices, dev);
  if (strcmp (type, "p") == 0)
    return 0;
  const char *access = json_string_value (json_object_get (n, "permissions"));
  access = access && *access ? access : "rwm";
  if (access[strspn (access, "rwm")] != '\0')
    return husk_error_kind (err, EINVAL, "CDI device node %s: invalid permissions %s (r, w, m)", path,
                            access);
  json_t *rules = child (child (linux_, "resources", 0), "devices", 1);
  json_array_append_new (rules, json_pack ("{s:b, s:s, s:I, s:I, s:s}", "allow", 1, "type",
                                           type[0] == 'u' ? "c" : type, "major", (json_int_t) major, "minor",
                                           (json_int_t) minor, "access", access));
  return 0;
}

static size_t
path_depth (const char *path)
{
  size_t depth = 0;
  for (const char *p = path; *p; p++)
    if (*p != '/' && (p == path || p[-1] == '/'))
      depth++;
  return depth;
}

/* Stable insertion sort by the depth of the destination. */
static void
sort_mounts (json_t *mounts)
{
  size_t n = json_array_size (mounts);
  for (size_t i = 1; i < n; i++)
    {
      json_t *m = json_incref (json_array_get (mounts, i));
      size_t d = path_depth (json_string_value (json_object_get (m, "destination")) ?: "");
      size_t j = i;
      while (j > 0
             && path_depth (
                    json_string_value (json_object_get (json_array_get (mounts, j - 1), "destination")) ?: "")
                    > d)
        j--;
      if (j != i)
        {
          json_array_remove (mounts, i);
          json_array_insert (mounts, j, m);
        }
      json_decref (m);
    }
}

static int
apply_mounts (json_t *config, json_t *list, struct husk_error **err)
{
  json_t *mounts = child (config, "mounts", 1);
  size_t i;
  json_t *m;
  json_array_foreach (list, i, m)
  {
    const char *dest = json_string_value (json_object_get (m, "containerPath"));
    if (dest[0] != '/')
      return husk_error_kind (err, EINVAL, "CDI mount %s: containerPath is not absolute", dest);
    remove_by (mounts, "destination", dest);
    json_t *oci = json_pack ("{s:s, s:O}", "destination", dest, "source", json_object_get (m, "hostPath"));
    if (json_object_get (m, "type"))
      json_object_set (oci, "type", json_object_get (m, "type"));
    if (json_object_get (m, "options"))
      json_object_set_new (oci, "options", json_deep_copy (json_object_get (m, "options")));
    json_array_append_new (mounts, oci);
  }
  if (json_array_size (list))
    sort_mounts (mounts);
  return 0;
}

static int
apply_hooks (json_t *config, json_t *list, struct husk_error **err)
{
  static const char *const names[]
      = { "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop" };
  size_t i;
  json_t *h;
  json_array_foreach (list, i, h)
  {
    const char *name = json_string_value (json_object_get (h, "hookName"));
    size_t k = 0;
    while (k < 6 && strcmp (names[k], name))
      k++;
    if (k == 6)
      return husk_error_kind (err, EINVAL, "CDI hook %s: unknown hookName", name);
    json_t *oci = json_pack ("{s:O}", "path", json_object_get (h, "path"));
    static const char *const copied[] = { "args", "env", "timeout" };
    for (size_t c = 0; c < 3; c++)
      if (json_object_get (h, copied[c]))
        json_object_set_new (oci, copied[c], json_deep_copy (json_object_get (h, copied[c])));
    json_array_append_new (child (child (config, "hooks", 0), name, 1), oci);
  }
  return 0;
}

static void
apply_gids (json_t *config, json_t *gids)
{
  json_t *list = child (child (child (config, "process", 0), "user", 0), "additionalGids", 1);
  size_t i, j;
  json_t *g, *old;
  json_array_foreach (gids, i, g)
  {
    int seen = json_integer_value (g) == 0; /* the CDI spec skips gid 0 */
    json_array_foreach (list, j, old) seen |= json_integer_value (old) == json_integer_value (g);
    if (!seen)
      json_array_append_new (list, json_integer (json_integer_value (g)));
  }
}

int
cdi_apply_edits (json_t *config, json_t *edits, struct husk_error **err)
{
  if (edits == NULL)
    return 0;
  json_t *v;
  if ((v = json_object_get (edits, "env")) && apply_env (config, v, err) < 0)
    return -1;
  size_t i;
  json_t *n;
  json_array_foreach (json_object_get (edits, "deviceNodes"), i,
                      n) if (apply_node (config, n, err) < 0) return -1;
  if ((v = json_object_get (edits, "mounts")) && apply_mounts (config, v, err) < 0)
    return -1;
  if ((v = json_object_get (edits, "hooks")) && apply_hooks (config, v, err) < 0)
    return -1;
  /* The CDI spec replaces intelRdt whole. */
  if ((v = json_object_get (edits, "intelRdt")))
    json_object_set_new (child (config, "linux", 0), "intelRdt", json_deep_copy (v));
  if ((v = json_object_get (edits, "additionalGids")))
    apply_gids (config, v);
  return 0;
}

int
cdi_apply (struct cdi_registry *reg, json_t *config, const char *const *names, struct husk_error **err)
{
  cdi_registry_refresh (reg);
  size_t n = 0;
  while (names && names[n])
    n++;
  cleanup_free struct cdi_dev **devs = calloc (n + 1, sizeof (*devs));
  if (!devs)
    return husk_error_make (err, ENOMEM, "CDI apply");
  for (size_t i = 0; i < n; i++)
    if ((devs[i] = cdi_registry_find (reg, names[i], err)) == NULL)
      return -1;
  json_t *work = json_deep_copy (config);
  if (!work)
    return husk_error_make (err, ENOMEM, "CDI apply");
  /* Each spec's own edits once, in the order its devices are first named. */
  for (size_t i = 0; i < n; i++)
    {
      size_t k = 0;
      while (k < i && devs[k]->spec != devs[i]->spec)
        k++;
      if (k == i && cdi_apply_edits (work, json_object_get (devs[i]->spec, "containerEdits"), err) < 0)
        goto fail;
    }
  for (size_t i = 0; i < n; i++)
    {
      size_t k = 0;
      while (k < i && devs[k] != devs[i])
        k++;
      if (k == i && cdi_apply_edits (work, devs[i]->edits, err) < 0)
        {
          husk_error_wrap (err, "CDI device %s", devs[i]->info.name);
          goto fail;
        }
    }
  json_object_clear (config);
  json_object_update (config, work);
  json_decref (work);
  return 0;
fail:
  json_decref (work);
  return -1;
}
