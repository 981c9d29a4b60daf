/* The Container Device Interface: a registry of CDI spec files (JSON or
 * YAML) from a list of dirs, and the application of a device's
 * containerEdits to an OCI config held as a jansson document.  Knows
 * nothing of CRI; huskd and `husk container run` hand it names. */
#ifndef HUSK_CRI_CDI_H
#define HUSK_CRI_CDI_H

#include <jansson.h>
#include <stddef.h>

#include "husk/error.h"

struct cdi_registry;

/* One device the registry knows, and the spec file it comes from. */
struct cdi_device_info
{
  const char *name; /* fully qualified: vendor/class=name */
  const char *file;
};

/* A spec file that was refused (or a device dropped), with why. */
struct cdi_spec_error
{
  const char *file;
  const char *msg;
};

/* The dirs the registry reads when given none: later ones win. */
extern const char *const cdi_default_dirs[];

/* A registry over DIRS (NULL-terminated; NULL: cdi_default_dirs), loaded
 * now.  Missing dirs hold no specs; bad files land in the error list.
 * Returns NULL only on allocation failure. */
struct cdi_registry *cdi_registry_new (const char *const *dirs);
void cdi_registry_free (struct cdi_registry *reg);

/* Reloads every spec when a dir or a spec file changed since the last
 * load (the dirs' and files' mtime and size are compared; no inotify).
 * Returns 1 when it reloaded, 0 when nothing changed.  cdi_registry_get,
 * _list, _errors and cdi_apply call it first. */
int cdi_registry_refresh (struct cdi_registry *reg);

/* The containerEdits of device NAME ("vendor/class=name") as a JSON
 * object (borrowed, valid until the next refresh), or NULL with *err set:
 * EINVAL for a malformed name, ENOENT for an unknown device. */
json_t *cdi_registry_get (struct cdi_registry *reg, const char *name, struct husk_error **err);

/* "the CDI specs in DIR, DIR": where REG looks, for error messages. */
const char *cdi_registry_where (const struct cdi_registry *reg);

/* All devices, sorted by name (borrowed, valid until the next refresh). */
const struct cdi_device_info *cdi_registry_list (struct cdi_registry *reg, size_t *n);

/* The files refused and devices dropped at the last load (borrowed). */
const struct cdi_spec_error *cdi_registry_errors (struct cdi_registry *reg, size_t *n);

/* Checks a fully-qualified name "vendor/class=name" by the CDI spec's
 * rules; returns -1 with an EINVAL error naming what is wrong. */
int cdi_parse_name (const char *name, char **kind, char **device, struct husk_error **err);

/* Parses one spec document (JSON, or YAML when IS_YAML) into a validated
 * JSON tree; FILE names it in errors.  Returns NULL with *err set. */
json_t *cdi_spec_parse (const char *text, size_t len, int is_yaml, const char *file, struct husk_error **err);

/* Resolves every name in NAMES (NULL-terminated) first, then applies to
 * OCI_CONFIG the spec-level containerEdits of each involved spec once and
 * each device's containerEdits, in order.  On an error OCI_CONFIG is left
 * as it was.  Returns 0 or -1 with *err set. */
int cdi_apply (struct cdi_registry *reg, json_t *oci_config, const char *const *names,
               struct husk_error **err);

/* Applies one containerEdits object to OCI_CONFIG (used by cdi_apply;
 * exposed for tests).  Returns 0 or -1 with *err set. */
int cdi_apply_edits (json_t *oci_config, json_t *edits, struct husk_error **err);

/* The device-level annotations of device NAME (a JSON object, borrowed,
 * valid until the next refresh; NULL when it has none, with *err unset),
 * or NULL with *err set as cdi_registry_get. */
json_t *cdi_registry_annotations (struct cdi_registry *reg, const char *name, struct husk_error **err);

/* The device annotation that names the NUMA node of a device (husk cdi
 * generate writes it from sysfs). */
#define CDI_NUMA_ANNOTATION "husk/numa-node"

/* The union of the NUMA nodes of devices NAMES as a cpuset list ("0,1"),
 * or NULL in *MEMS when none has the annotation.  An unknown name or an
 * annotation that is not a node number: -1 with *err set. */
int cdi_numa_nodes (struct cdi_registry *reg, const char *const *names, char **mems, struct husk_error **err);

/* Which NVIDIA_VISIBLE_DEVICES counts (huskd's `nvidia_visible_devices`,
 * `husk container run --nvidia-env`). */
enum cdi_nvidia_env
{
  CDI_NVIDIA_ENV_OFF,       /* "off": ignored */
  CDI_NVIDIA_ENV_CONTAINER, /* "container-config": the container's own env (CRI config, -e) */
  CDI_NVIDIA_ENV_IMAGE_TOO, /* "image-too": else also the image's ENV */
};
/* Returns 0, or -1 for a name that is none of the above. */
int cdi_nvidia_env_parse (const char *text, enum cdi_nvidia_env *mode);
const char *cdi_nvidia_env_name (enum cdi_nvidia_env mode);

/* The value of the last KEY=VALUE of ENV (borrowed), or NULL. */
const char *cdi_env_lookup (char *const *env, const char *key);

/* The NVIDIA_VISIBLE_DEVICES value that counts under MODE: CONFIG_VALUE
 * (the container's own, NULL when it sets none), or with image-too the
 * image's when the container sets none.  NULL: none. */
const char *cdi_nvidia_env_value (enum cdi_nvidia_env mode, const char *config_value, char *const *image_env);

/* Appends to *NAMES (a NULL-terminated list, may be NULL) the names
 * nvidia.com/gpu=X that VALUE, NVIDIA_VISIBLE_DEVICES's syntax, means:
 * a comma list of indices, UUIDs (GPU-..., MIG-...), MIG ids (0:1) or
 * `all` (the spec's `all` device, else every index).  NULL, empty,
 * `none` and `void` mean no device; so does any value when no spec has an
 * nvidia.com/gpu device.  An item no spec has: -1 with *err (ENOENT)
 * naming it.  Names already in *NAMES are not added twice. */
int cdi_nvidia_visible_devices (struct cdi_registry *reg, const char *value, char ***names,
                                struct husk_error **err);

/* The same for docker's `--gpus VALUE`: `all`, N (the first N GPUs by
 * index) or device=IDX|UUID[,...] (optionally in double quotes).  No
 * nvidia.com/gpu device at all is an error here. */
int cdi_gpus_option (struct cdi_registry *reg, const char *value, char ***names, struct husk_error **err);

/* Appends NAME to *NAMES unless it is there already. */
void cdi_names_add (char ***names, const char *name);

#endif
