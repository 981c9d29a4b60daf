/* NVIDIA GPUs for CDI: what the kernel driver shows (/dev, /proc/driver,
 * sysfs) and where the user-space driver lives (the driver root's
 * ld.so.cache), turned into the CDI spec `husk cdi generate nvidia`
 * writes.  No NVML, no NVIDIA tool: the files are read directly. */
#ifndef HUSK_CRI_CDI_NVIDIA_H
#define HUSK_CRI_CDI_NVIDIA_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "husk/error.h"

/* The CDI kind of the generated spec. */
#define NVIDIA_CDI_KIND "nvidia.com/gpu"
/* Device annotation holding a GPU's NUMA node (absent when unknown). */
#define NVIDIA_NUMA_ANNOTATION "husk/numa-node"

/* Where to look; NULL members take the defaults ("/", "/proc", "/sys", "/"
 * and the realpath of /proc/self/exe for HOOK_PATH). */
struct nvidia_roots
{
  const char *dev_root;    /* device nodes under DEV_ROOT/dev */
  const char *proc_root;   /* PROC_ROOT/driver/nvidia... */
  const char *sys_root;    /* SYS_ROOT/bus/pci/devices/BUS/numa_node */
  const char *driver_root; /* user-space driver: its etc/ld.so.cache, usr/bin, lib/firmware */
  const char *hook_path;   /* the husk binary the spec's hooks run */
};

/* One /proc/driver/nvidia/gpus/BUS/information file. */
struct nvidia_gpu_info
{
  char *model;  /* "Model:", or NULL */
  char *uuid;   /* "GPU UUID:", or NULL */
  char *bus_id; /* "Bus Location:", lower case */
  int minor;    /* "Device Minor:", or -1 */
};

/* Parses an information file's text; FILE names it in errors.  A file
 * without "Bus Location:" is refused. */
int nvidia_parse_information (const char *text, const char *file, struct nvidia_gpu_info *out,
                              struct husk_error **err);
void nvidia_gpu_info_clear (struct nvidia_gpu_info *info);

/* One library of an ld.so.cache: NAME (the soname or file name ld.so
 * looks up) => PATH, with glibc's flags (type and architecture). */
struct nvidia_ldcache_entry
{
  int32_t flags;
  char *name;
  char *path;
};

/* Parses an ld.so.cache image (the "glibc-ld.so.cache1.1" format, alone
 * or behind the old "ld.so-1.7.0" table), in the cache's order.  FILE
 * names it in errors. */
int nvidia_ldcache_parse (const void *data, size_t len, const char *file, struct nvidia_ldcache_entry **out,
                          size_t *n, struct husk_error **err);
void nvidia_ldcache_free (struct nvidia_ldcache_entry *entries, size_t n);
/* Whether FLAGS mark an ELF library for the machine husk runs on. */
int nvidia_ldcache_native (int32_t flags);

/* One line of /proc/driver/nvidia-caps/mig-minors: the device minor of a
 * MIG capability (CI is -1 for the GPU instance's own access). */
struct nvidia_mig_minor
{
  int gpu, gi, ci;
  unsigned minor;
};

/* Parses mig-minors ("config 1", "gpu0/gi1/access 12", "gpu0/gi1/ci0/access
 * 13"); lines naming other capabilities are skipped, a malformed line is
 * refused naming its number. */
int nvidia_parse_mig_minors (const char *text, const char *file, struct nvidia_mig_minor **out, size_t *n,
                             struct husk_error **err);

/* The "DeviceFileMinor:" of a capabilities access file, or -1. */
long nvidia_parse_cap_minor (const char *text);

/* The CDI spec (kind nvidia.com/gpu) for the GPUs and MIG devices found
 * under ROOTS: devices by index, UUID, "GPU:MIG" and "all"; spec-level
 * control nodes, driver library, binary and firmware mounts and hooks.
 * Fails when no GPU is found or the driver's libcuda is not in the
 * driver root's ld.so.cache.  Returns NULL with *err set. */
json_t *nvidia_cdi_generate (const struct nvidia_roots *roots, struct husk_error **err);

#endif
