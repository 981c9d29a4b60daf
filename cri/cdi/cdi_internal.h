/* The registry's tables, shared by registry.c and apply.c only. */
#ifndef HUSK_CRI_CDI_INTERNAL_H
#define HUSK_CRI_CDI_INTERNAL_H

#include "cri/cdi/cdi.h"

struct cdi_spec_file
{
  char *file;
  json_t *spec;
  int dir_index;
};

struct cdi_dev
{
  struct cdi_device_info info; /* name owned, file borrowed from its spec */
  json_t *edits;               /* borrowed from spec */
  json_t *device;              /* the spec's device entry, borrowed */
  json_t *spec;
  int dir_index;
};

struct cdi_registry
{
  char **dirs;
  char *where; /* "the CDI specs in DIR, DIR", for errors */
  char *stamp;
  struct cdi_spec_file *specs;
  size_t n_specs;
  struct cdi_dev *devices;
  size_t n_devices;
  struct cdi_device_info *infos;
  struct cdi_spec_error *errors;
  size_t n_errors;
};

/* Device NAME, without refreshing; NULL with *err set. */
struct cdi_dev *cdi_registry_find (struct cdi_registry *reg, const char *name, struct husk_error **err);

#endif
