/* Sources of CDI names besides the plain fully-qualified ones: the
 * NVIDIA_VISIBLE_DEVICES env (device plugins set it; CUDA images set it to
 * `all`), docker's `--gpus`, and the NUMA nodes a container's devices
 * sit on.  Pure lookups in a registry: no CRI, no OCI config. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cri/cdi/cdi.h"
#include "cri/cdi/cdi_internal.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define NVIDIA_GPU_KIND "nvidia.com/gpu="

static const char *const nvidia_env_names[] = {
  [CDI_NVIDIA_ENV_OFF] = "off",
  [CDI_NVIDIA_ENV_CONTAINER] = "container-config",
  [CDI_NVIDIA_ENV_IMAGE_TOO] = "image-too",
};

int
cdi_nvidia_env_parse (const char *text, enum cdi_nvidia_env *mode)
{
  for (size_t i = 0; i < sizeof nvidia_env_names / sizeof nvidia_env_names[0]; i++)
    if (strcmp (text, nvidia_env_names[i]) == 0)
      {
        *mode = (enum cdi_nvidia_env) i;
        return 0;
      }
  return -1;
}

const char *
cdi_nvidia_env_name (enum cdi_nvidia_env mode)
{
  return nvidia_env_names[mode];
}

const char *
cdi_env_lookup (char *const *env, const char *key)
{
  size_t len = strlen (key);
  const char *found = NULL;

  for (; env && *env; env++)
    if (strncmp (*env, key, len) == 0 && (*env)[len] == '=')
      found = *env + len + 1;
  return found;
}

const char *
cdi_nvidia_env_value (enum cdi_nvidia_env mode, const char *config_value, char *const *image_env)
{
  if (mode == CDI_NVIDIA_ENV_OFF)
    return NULL;
  if (config_value || mode == CDI_NVIDIA_ENV_CONTAINER)
    return config_value;
  return cdi_env_lookup (image_env, "NVIDIA_VISIBLE_DEVICES");
}

void
cdi_names_add (char ***names, const char *name)
{
  if (!husk_strv_contains (*names, name))
    *names = husk_strv_append (*names, name);
}

/* The registry's nvidia.com/gpu devices (one refresh), sorted by name. */
static const struct cdi_device_info *
gpu_devices (struct cdi_registry *reg, size_t *n)
{
  size_t all = 0, first = 0;
  const struct cdi_device_info *infos = cdi_registry_list (reg, &all);

  while (first < all && strncmp (infos[first].name, NVIDIA_GPU_KIND, strlen (NVIDIA_GPU_KIND)) < 0)
    first++;
  *n = 0;
  while (first + *n < all && strncmp (infos[first + *n].name, NVIDIA_GPU_KIND, strlen (NVIDIA_GPU_KIND)) == 0)
    (*n)++;
  return infos + first;
}

static bool
is_index (const char *s)
{
  if (*s == '\0')
    return false;
  for (; *s; s++)
    if (*s < '0' || *s > '9')
      return false;
  return true;
}

static int
index_cmp (const void *a, const void *b)
{
  const char *x = *(const char *const *) a, *y = *(const char *const *) b;
  size_t lx = strlen (x), ly = strlen (y);

  return lx != ly ? (lx < ly ? -1 : 1) : strcmp (x, y);
}

/* The device names of GPUS (N of them) that are whole-GPU indices, in
 * numeric order: "0", "1", ... (MIG "0:1" and UUID names left out). */
static char **
gpu_indices (const struct cdi_device_info *gpus, size_t n)
{
  char **out = xcalloc (1, sizeof *out);

  for (size_t i = 0; i < n; i++)
    if (is_index (gpus[i].name + strlen (NVIDIA_GPU_KIND)))
      out = husk_strv_append (out, gpus[i].name + strlen (NVIDIA_GPU_KIND));
  qsort (out, husk_strv_len (out), sizeof *out, index_cmp);
  return out;
}

static bool
has_gpu (const struct cdi_device_info *gpus, size_t n, const char *name)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp (gpus[i].name + strlen (NVIDIA_GPU_KIND), name) == 0)
      return true;
  return false;
}

/* All GPUs: the spec's own `all` device, or else every index. */
static void
add_all (const struct cdi_device_info *gpus, size_t n, char ***names)
{
  cleanup_strv char **indices = NULL;

  if (has_gpu (gpus, n, "all"))
    {
      cdi_names_add (names, NVIDIA_GPU_KIND "all");
      return;
    }
  indices = gpu_indices (gpus, n);
  for (size_t i = 0; indices[i]; i++)
    {
      cleanup_free char *name = xasprintf (NVIDIA_GPU_KIND "%s", indices[i]);
      cdi_names_add (names, name);
    }
}

/* A comma list of indices, UUIDs (GPU-..., MIG-...), MIG "gpu:mig" ids or
 * `all`, each the name of an nvidia.com/gpu device.  WHAT names the
 * source in errors. */
static int
add_list (const struct cdi_device_info *gpus, size_t n, const char *where, const char *what, const char *list,
          char ***names, struct husk_error **err)
{
  cleanup_free char *copy = xstrdup (list);
  char *save = NULL;

  for (char *item = strtok_r (copy, ",", &save); item; item = strtok_r (NULL, ",", &save))
    {
      cleanup_free char *name = NULL;

      item += strspn (item, " \t");
      for (size_t len = strlen (item); len > 0 && (item[len - 1] == ' ' || item[len - 1] == '\t'); len--)
        item[len - 1] = '\0';
      if (*item == '\0')
        continue;
      if (strcmp (item, "all") == 0)
        {
          add_all (gpus, n, names);
          continue;
        }
      name = xasprintf (NVIDIA_GPU_KIND "%s", item);
      if (cdi_parse_name (name, NULL, NULL, err) < 0)
        return husk_error_wrap (err, "%s", what);
      if (!has_gpu (gpus, n, item))
        return husk_error_kind (err, ENOENT, "%s: GPU `%s`: no CDI device %s in %s", what, item, name, where);
      cdi_names_add (names, name);
    }
  return 0;
}

int
cdi_nvidia_visible_devices (struct cdi_registry *reg, const char *value, char ***names,
                            struct husk_error **err)
{
  cleanup_free char *what = NULL;
  const struct cdi_device_info *gpus;
  size_t n;

  if (value == NULL || value[strspn (value, " \t")] == '\0' || strcmp (value, "none") == 0
      || strcmp (value, "void") == 0)
    return 0;
  gpus = gpu_devices (reg, &n);
  /* No NVIDIA spec on this node: the env is not ours to act on. */
  if (n == 0)
    return 0;
  what = xasprintf ("NVIDIA_VISIBLE_DEVICES=%s", value);
  return add_list (gpus, n, cdi_registry_where (reg), what, value, names, err);
}

/* --gpus N: the first N GPUs by index. */
static int
add_first (const struct cdi_device_info *gpus, size_t n, const char *value, long long count, char ***names,
           struct husk_error **err)
{
  cleanup_strv char **indices = gpu_indices (gpus, n);
  size_t have = husk_strv_len (indices);

  if ((unsigned long long) count > have)
    return husk_error_kind (err, ENOENT,
                            "--gpus %s: only %zu GPU%s in the CDI specs (nvidia.com/gpu=<index>)", value,
                            have, have == 1 ? "" : "s");
  for (long long i = 0; i < count; i++)
    {
      cleanup_free char *name = xasprintf (NVIDIA_GPU_KIND "%s", indices[i]);
      cdi_names_add (names, name);
    }
  return 0;
}

/* Docker's --gpus value is CSV: fields split at commas outside double
 * quotes, the quotes dropped ("device=0,1",capabilities=utility). */
static char **
csv_fields (const char *value)
{
  char **fields = xcalloc (1, sizeof *fields);
  cleanup_free char *field = xcalloc (strlen (value) + 1, 1);
  size_t len = 0;
  bool quoted = false;

  for (const char *p = value;; p++)
    {
      if (*p == '"')
        quoted = !quoted;
      else if (*p == '\0' || (*p == ',' && !quoted))
        {
          field[len] = '\0';
          fields = husk_strv_append (fields, field);
          len = 0;
          if (*p == '\0')
            break;
        }
      else
        field[len++] = *p;
    }
  return fields;
}

/* capabilities=...: what the generated spec gives every GPU (the compute
 * and utility libraries and binaries); graphics, video and display need
 * files it does not mount, so asking for them is an error, not a silent
 * container without them. */
static int
check_capabilities (const char *what, const char *list, struct husk_error **err)
{
  cleanup_free char *copy = xstrdup (list);
  char *save = NULL;

  for (char *cap = strtok_r (copy, ",", &save); cap; cap = strtok_r (NULL, ",", &save))
    if (strcmp (cap, "compute") != 0 && strcmp (cap, "utility") != 0 && strcmp (cap, "gpu") != 0
        && strcmp (cap, "all") != 0)
      return husk_error_kind (
          err, EINVAL, "%s: capability `%s`: husk's spec gives compute and utility (and gpu, all) only", what,
          cap);
  return 0;
}

int
cdi_gpus_option (struct cdi_registry *reg, const char *value, char ***names, struct husk_error **err)
{
  cleanup_free char *what = xasprintf ("--gpus %s", value);
  cleanup_strv char **fields = csv_fields (value);
  const char *count_text = NULL;
  cleanup_free char *devices = NULL;
  size_t n;
  const struct cdi_device_info *gpus = gpu_devices (reg, &n);
  long long count;

  for (size_t i = 0; fields[i]; i++)
    {
      const char *f = fields[i];
      /* device=0,1 unquoted: the bare items after device= are its own. */
      if (devices && i > 0 && strchr (f, '=') == NULL && strcmp (f, "all") != 0
          && (strncmp (fields[i - 1], "device=", 7) == 0 || strchr (fields[i - 1], '=') == NULL))
        {
          char *longer = xasprintf ("%s,%s", devices, f);
          free (devices);
          devices = longer;
        }
      else if (strcmp (f, "all") == 0 || husk_parse_int64 (f, 0, LLONG_MAX, &count) == 0)
        count_text = f;
      else if (strncmp (f, "count=", 6) == 0)
        count_text = f + 6;
      else if (strncmp (f, "device=", 7) == 0)
        {
          free (devices);
          devices = xstrdup (f + 7);
        }
      else if (strncmp (f, "capabilities=", 13) == 0)
        {
          if (check_capabilities (what, f + 13, err) < 0)
            return -1;
        }
      else if (strncmp (f, "driver=", 7) == 0)
        {
          if (strcmp (f + 7, "nvidia") != 0)
            return husk_error_kind (err, EINVAL, "%s: driver `%s`: only nvidia", what, f + 7);
        }
      else
        return husk_error_kind (
            err, EINVAL,
            "%s: `%s`: expected all, a count, count=N|all, device=IDX|UUID[,...], capabilities=...", what, f);
    }
  if (count_text && devices)
    return husk_error_kind (err, EINVAL, "%s: a count and device= together", what);
  if (!count_text && !devices)
    return husk_error_kind (err, EINVAL, "%s: expected all, a count, or device=IDX|UUID[,...]", what);
  if (devices && *devices == '\0')
    return husk_error_kind (err, EINVAL, "%s: device= names no GPU", what);
  if (count_text && strcmp (count_text, "all") != 0 && husk_parse_int64 (count_text, 1, 1024, &count) < 0)
    return husk_error_kind (err, EINVAL, "%s: count `%s`: expected 1 to 1024 or all", what, count_text);
  if (n == 0)
    return husk_error_kind (err, ENOENT,
                            "%s: no nvidia.com/gpu devices in %s (husk cdi generate nvidia writes one)", what,
                            cdi_registry_where (reg));
  if (devices)
    return add_list (gpus, n, cdi_registry_where (reg), what, devices, names, err);
  if (strcmp (count_text, "all") == 0)
    return add_all (gpus, n, names), 0;
  return add_first (gpus, n, value, count, names, err);
}

json_t *
cdi_registry_annotations (struct cdi_registry *reg, const char *name, struct husk_error **err)
{
  struct cdi_dev *dev;

  cdi_registry_refresh (reg);
  dev = cdi_registry_find (reg, name, err);
  if (dev == NULL)
    return NULL;
  return json_object_get (dev->device, "annotations");
}

int
cdi_numa_nodes (struct cdi_registry *reg, const char *const *names, char **mems, struct husk_error **err)
{
  bool nodes[1024] = { false };
  char *out = NULL;

  *mems = NULL;
  cdi_registry_refresh (reg);
  for (size_t i = 0; names && names[i]; i++)
    {
      struct cdi_dev *dev = cdi_registry_find (reg, names[i], err);
      json_t *node;
      long long n;

      if (dev == NULL)
        return -1;
      node = json_object_get (json_object_get (dev->device, "annotations"), CDI_NUMA_ANNOTATION);
      if (node == NULL)
        continue;
      if (!json_is_string (node) || husk_parse_int64 (json_string_value (node), 0, 1023, &n) < 0)
        return husk_error_kind (err, EINVAL,
                                "CDI device %s: annotation %s: expected a NUMA node number (0-1023)",
                                names[i], CDI_NUMA_ANNOTATION);
      nodes[n] = true;
    }
  for (size_t n = 0; n < sizeof nodes / sizeof nodes[0]; n++)
    if (nodes[n])
      {
        char *next = xasprintf ("%s%s%zu", out ? out : "", out ? "," : "", n);
        free (out);
        out = next;
      }
  *mems = out;
  return 0;
}
