/* `husk cdi generate nvidia`: finds the GPUs, MIG devices and user-space
 * driver of a host (or of a fake tree: every root is a parameter) and
 * builds the CDI spec that nvidia-ctk would, without NVML: GPUs from
 * /proc/driver/nvidia/gpus/x/information (else the /dev/nvidiaN nodes),
 * MIG devices from /proc/driver/nvidia/capabilities, libraries from the
 * driver root's ld.so.cache.  Discovery fills a scan struct; the spec is
 * built from it in one pass. */
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cri/cdi/nvidia.h"
#include "husk/cleanup.h"
#include "husk/util.h"

/* The user-space libraries of the "compute" and "utility" driver
 * capabilities (what NVIDIA's container toolkit injects by default);
 * the first is required. */
static const char *const driver_libraries[] = {
  "libcuda",
  "libcudadebugger",
  "libnvidia-ml",
  "libnvidia-cfg",
  "libnvidia-ptxjitcompiler",
  "libnvidia-nvvm",
  "libnvidia-opencl",
  "libnvidia-gpucomp",
  "libnvidia-allocator",
  "libnvidia-compiler",
  "libnvidia-fatbinaryloader",
  "libnvidia-pkcs11",
  "libnvidia-pkcs11-openssl3",
  NULL,
};

static const char *const driver_binaries[] = {
  "nvidia-smi",
  "nvidia-debugdump",
  "nvidia-persistenced",
  "nvidia-cuda-mps-control",
  "nvidia-cuda-mps-server",
  NULL,
};
static const char *const binary_dirs[] = { "/usr/bin", "/usr/sbin", "/bin", "/sbin", NULL };
static const char *const control_nodes[] = {
  "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset", NULL,
};
static const char *const mount_options[] = { "ro", "nosuid", "nodev", "bind", NULL };

#define NVIDIA_MAJOR 195
#define MAX_SPEC_FILE (1u << 20)

struct gpu
{
  struct nvidia_gpu_info info;
  int numa_node; /* -1: unknown */
  size_t index;  /* NVML's index: the place in bus-id order, GPUs left out counted */
};

struct mig
{
  size_t gpu;   /* index into scan.gpus */
  size_t index; /* among its GPU's MIG devices */
  unsigned gi_minor, ci_minor;
};

struct scan
{
  struct nvidia_roots roots;
  struct gpu *gpus;
  size_t n_gpus;
  struct mig *migs;
  size_t n_migs;
  struct nvidia_mig_minor *mig_table; /* mig-minors, when readable */
  size_t n_mig_table;
  char *version;     /* the driver version from libcuda's file name, or NULL */
  json_t *mounts;    /* spec-level mounts */
  json_t *folders;   /* library dirs for update-ldcache (container paths) */
  json_t *links;     /* TARGET::LINK for create-symlinks */
  json_t *libraries; /* container paths mounted, to mount each once */
};

/* ROOT joined with the absolute PATH ("/" adds nothing). */
static char *
in_root (const char *root, const char *path)
{
  size_t len = strlen (root);
  while (len > 0 && root[len - 1] == '/')
    len--;
  return xasprintf ("%.*s%s", (int) len, root, path);
}

static int
read_small (const char *path, char **text, struct husk_error **err)
{
  struct stat st;
  size_t len;

  if (stat (path, &st) == 0 && S_ISREG (st.st_mode) && st.st_size > (off_t) MAX_SPEC_FILE)
    return husk_error_kind (err, EFBIG, "%s: larger than %u bytes", path, MAX_SPEC_FILE);
  return husk_read_file (path, text, &len, err);
}

static int
is_char_node (const char *path, struct stat *st)
{
  struct stat local;
  struct stat *s = st ? st : &local;
  return lstat (path, s) == 0 && S_ISCHR (s->st_mode);
}

static void
scan_clear (struct scan *scan)
{
  for (size_t i = 0; i < scan->n_gpus; i++)
    nvidia_gpu_info_clear (&scan->gpus[i].info);
  free (scan->gpus);
  free (scan->migs);
  free (scan->mig_table);
  free (scan->version);
  json_decref (scan->mounts);
  json_decref (scan->folders);
  json_decref (scan->links);
  json_decref (scan->libraries);
}

static int
check_root (const char *what, const char *path, struct husk_error **err)
{
  struct stat st;

  if (*path != '/')
    return husk_error_kind (err, EINVAL, "%s `%s` is not an absolute path", what, path);
  if (stat (path, &st) < 0)
    return husk_error_make (err, errno, "%s `%s`", what, path);
  if (!S_ISDIR (st.st_mode))
    return husk_error_kind (err, ENOTDIR, "%s `%s` is not a directory", what, path);
  return 0;
}

static int
scan_roots (struct scan *scan, const struct nvidia_roots *roots, struct husk_error **err)
{
  scan->roots.dev_root = roots->dev_root ?: "/";
  scan->roots.proc_root = roots->proc_root ?: "/proc";
  scan->roots.sys_root = roots->sys_root ?: "/sys";
  scan->roots.driver_root = roots->driver_root ?: "/";
  scan->roots.hook_path = roots->hook_path;
  if (check_root ("dev root", scan->roots.dev_root, err) < 0
      || check_root ("proc root", scan->roots.proc_root, err) < 0
      || check_root ("sys root", scan->roots.sys_root, err) < 0
      || check_root ("driver root", scan->roots.driver_root, err) < 0)
    return -1;
  if (scan->roots.hook_path && *scan->roots.hook_path != '/')
    return husk_error_kind (err, EINVAL, "hook path `%s` is not an absolute path", scan->roots.hook_path);
  return 0;
}

/* ------------------------------------------------------------------ GPUs */

static int
gpu_by_bus (const void *a, const void *b)
{
  return strcmp (((const struct gpu *) a)->info.bus_id, ((const struct gpu *) b)->info.bus_id);
}

static void
add_gpu (struct scan *scan, struct nvidia_gpu_info *info)
{
  scan->gpus = xrealloc (scan->gpus, (scan->n_gpus + 1) * sizeof *scan->gpus);
  scan->gpus[scan->n_gpus++] = (struct gpu){ .info = *info, .numa_node = -1 };
  *info = (struct nvidia_gpu_info){ .minor = -1 };
}

/* GPUs from PROC_ROOT/driver/nvidia/gpus/x/information, by bus id. */
static int
scan_proc_gpus (struct scan *scan, struct husk_error **err)
{
  cleanup_free char *dir_path = xasprintf ("%s/driver/nvidia/gpus", scan->roots.proc_root);
  cleanup_dir DIR *dir = opendir (dir_path);
  struct dirent *de;

  if (dir == NULL)
    return errno == ENOENT ? 0 : husk_error_make (err, errno, "open %s", dir_path);
  while ((de = readdir (dir)))
    {
      cleanup_free char *path = NULL, *text = NULL;
      struct nvidia_gpu_info info;

      if (de->d_name[0] == '.')
        continue;
      path = xasprintf ("%s/%s/information", dir_path, de->d_name);
      if (read_small (path, &text, err) < 0 || nvidia_parse_information (text, path, &info, err) < 0)
        return -1;
      add_gpu (scan, &info);
    }
  qsort (scan->gpus, scan->n_gpus, sizeof *scan->gpus, gpu_by_bus);
  return 0;
}

/* Without /proc/driver/nvidia: the DEV_ROOT/dev/nvidiaN nodes, by minor. */
static int
scan_dev_gpus (struct scan *scan, struct husk_error **err)
{
  cleanup_free char *dev = in_root (scan->roots.dev_root, "/dev");
  cleanup_dir DIR *dir = opendir (dev);
  struct dirent *de;
  unsigned char seen[256] = { 0 };

  if (dir == NULL)
    return errno == ENOENT ? 0 : husk_error_make (err, errno, "open %s", dev);
  while ((de = readdir (dir)))
    {
      long long minor;
      if (strncmp (de->d_name, "nvidia", 6) != 0 || husk_parse_int64 (de->d_name + 6, 0, 254, &minor) < 0)
        continue;
      seen[minor] = 1;
    }
  for (int minor = 0; minor < 255; minor++)
    {
      cleanup_free char *path = xasprintf ("%s/nvidia%d", dev, minor);
      struct nvidia_gpu_info info = { .minor = minor, .bus_id = xasprintf ("minor-%03d", minor) };
      if (!seen[minor] || !is_char_node (path, NULL))
        {
          free (info.bus_id);
          continue;
        }
      add_gpu (scan, &info);
    }
  return 0;
}

/* Drops GPUs whose /dev/nvidiaN is missing (a warning: the node may be
 * made later by nvidia-modprobe, and the rest is still usable).  The
 * others keep their index, as nvidia-smi and NVIDIA_VISIBLE_DEVICES
 * number them. */
static void
keep_gpus_with_nodes (struct scan *scan)
{
  size_t kept = 0;

  for (size_t i = 0; i < scan->n_gpus; i++)
    {
      struct gpu *gpu = &scan->gpus[i];
      cleanup_free char *rel = NULL, *node = NULL;
      struct stat st;

      gpu->index = i;
      if (gpu->info.minor < 0)
        gpu->info.minor = (int) i;
      rel = xasprintf ("/dev/nvidia%d", gpu->info.minor);
      node = in_root (scan->roots.dev_root, rel);
      if (!is_char_node (node, &st) || major (st.st_rdev) != NVIDIA_MAJOR)
        {
          husk_warn ("GPU %s: %s is not a character device of major %d: left out", gpu->info.bus_id, node,
                     NVIDIA_MAJOR);
          nvidia_gpu_info_clear (&gpu->info);
          continue;
        }
      scan->gpus[kept++] = *gpu;
    }
  scan->n_gpus = kept;
}

static void
scan_numa (struct scan *scan)
{
  for (size_t i = 0; i < scan->n_gpus; i++)
    {
      cleanup_free char *path
          = xasprintf ("%s/bus/pci/devices/%s/numa_node", scan->roots.sys_root, scan->gpus[i].info.bus_id);
      cleanup_free char *text = NULL;
      struct husk_error *err = NULL;
      long long node;
      size_t len;

      if (husk_read_file (path, &text, &len, &err) < 0)
        {
          husk_error_free (&err);
          continue;
        }
      text[strcspn (text, "\n")] = '\0';
      if (husk_parse_int64 (text, 0, 1 << 16, &node) == 0)
        scan->gpus[i].numa_node = (int) node;
    }
}

static int
scan_gpus (struct scan *scan, struct husk_error **err)
{
  if (scan_proc_gpus (scan, err) < 0)
    return -1;
  if (scan->n_gpus == 0 && scan_dev_gpus (scan, err) < 0)
    return -1;
  keep_gpus_with_nodes (scan);
  if (scan->n_gpus == 0)
    {
      cleanup_free char *dev = in_root (scan->roots.dev_root, "/dev");
      return husk_error_kind (
          err, ENODEV,
          "no NVIDIA GPU found under %s (no nvidia[0-9]* character device; %s/driver/nvidia/gpus lists none)",
          dev, scan->roots.proc_root);
    }
  scan_numa (scan);
  return 0;
}

/* ------------------------------------------------------------ MIG devices */

static int
numbered (const char *name, const char *prefix, long long *out)
{
  size_t len = strlen (prefix);
  return strncmp (name, prefix, len) == 0 && husk_parse_int64 (name + len, 0, 1 << 16, out) == 0;
}

/* The numbers N of the entries PREFIX<N> of DIR, sorted (*n of them). */
static long long *
numbered_entries (const char *dir_path, const char *prefix, size_t *n)
{
  cleanup_dir DIR *dir = opendir (dir_path);
  long long *list = NULL, value;
  struct dirent *de;

  *n = 0;
  while (dir && (de = readdir (dir)))
    {
      if (!numbered (de->d_name, prefix, &value))
        continue;
      list = xrealloc (list, (*n + 1) * sizeof *list);
      size_t at = (*n)++;
      while (at > 0 && list[at - 1] > value)
        {
          list[at] = list[at - 1];
          at--;
        }
      list[at] = value;
    }
  return list;
}

/* The device minor of a MIG capability: its access file, else mig-minors. */
static long
cap_minor (struct scan *scan, const char *access, int gpu, int gi, int ci)
{
  cleanup_free char *text = NULL;
  struct husk_error *err = NULL;
  size_t len;
  long minor = -1;

  if (husk_read_file (access, &text, &len, &err) == 0)
    minor = nvidia_parse_cap_minor (text);
  husk_error_free (&err);
  for (size_t i = 0; minor < 0 && i < scan->n_mig_table; i++)
    if (scan->mig_table[i].gpu == gpu && scan->mig_table[i].gi == gi && scan->mig_table[i].ci == ci)
      minor = scan->mig_table[i].minor;
  return minor;
}

static int
cap_node_ok (struct scan *scan, long minor)
{
  cleanup_free char *rel = xasprintf ("/dev/nvidia-caps/nvidia-cap%ld", minor);
  cleanup_free char *path = in_root (scan->roots.dev_root, rel);
  if (is_char_node (path, NULL))
    return 1;
  husk_warn ("MIG capability %s is not a character device: its MIG device is left out", path);
  return 0;
}

static void
scan_gpu_migs (struct scan *scan, size_t g)
{
  int minor = scan->gpus[g].info.minor;
  cleanup_free char *mig_dir
      = xasprintf ("%s/driver/nvidia/capabilities/gpu%d/mig", scan->roots.proc_root, minor);
  size_t n_gi, index = 0;
  cleanup_free long long *gis = numbered_entries (mig_dir, "gi", &n_gi);

  for (size_t i = 0; i < n_gi; i++)
    {
      cleanup_free char *gi_dir = xasprintf ("%s/gi%lld", mig_dir, gis[i]);
      cleanup_free char *gi_access = xasprintf ("%s/access", gi_dir);
      long gi_minor = cap_minor (scan, gi_access, minor, (int) gis[i], -1);
      size_t n_ci;
      cleanup_free long long *cis = numbered_entries (gi_dir, "ci", &n_ci);

      if (gi_minor < 0 || !cap_node_ok (scan, gi_minor))
        continue;
      for (size_t j = 0; j < n_ci; j++)
        {
          cleanup_free char *ci_access = xasprintf ("%s/ci%lld/access", gi_dir, cis[j]);
          long ci_minor = cap_minor (scan, ci_access, minor, (int) gis[i], (int) cis[j]);
          if (ci_minor < 0 || !cap_node_ok (scan, ci_minor))
            continue;
          scan->migs = xrealloc (scan->migs, (scan->n_migs + 1) * sizeof *scan->migs);
          scan->migs[scan->n_migs++] = (struct mig){
            .gpu = g, .index = index++, .gi_minor = (unsigned) gi_minor, .ci_minor = (unsigned) ci_minor
          };
        }
    }
}

static int
scan_migs (struct scan *scan, struct husk_error **err)
{
  cleanup_free char *table = xasprintf ("%s/driver/nvidia-caps/mig-minors", scan->roots.proc_root);
  cleanup_free char *text = NULL;

  if (access (table, F_OK) == 0
      && (read_small (table, &text, err) < 0
          || nvidia_parse_mig_minors (text, table, &scan->mig_table, &scan->n_mig_table, err) < 0))
    return -1;
  for (size_t g = 0; g < scan->n_gpus; g++)
    scan_gpu_migs (scan, g);
  return 0;
}

/* ---------------------------------------------------------------- driver */

static json_t *
mount_entry (const char *host, const char *container)
{
  json_t *options = json_array ();
  for (size_t i = 0; mount_options[i]; i++)
    json_array_append_new (options, json_string (mount_options[i]));
  return json_pack ("{s:s, s:s, s:o}", "hostPath", host, "containerPath", container, "options", options);
}

static void
add_mount (struct scan *scan, const char *container_path)
{
  cleanup_free char *host = in_root (scan->roots.driver_root, container_path);
  json_array_append_new (scan->mounts, mount_entry (host, container_path));
}

/* Appends VALUE to LIST unless there; 1 when it did. */
static int
add_unique (json_t *list, const char *value)
{
  size_t i;
  json_t *v;
  json_array_foreach (list, i, v)
  {
    if (strcmp (json_string_value (v), value) == 0)
      return 0;
  }
  json_array_append_new (list, json_string (value));
  return 1;
}

/* PATH (absolute, inside the driver root) with its symlinks followed
 * inside that root; stops at a link that climbs with "..". */
static char *
resolve_in_driver_root (const char *root, const char *path)
{
  char *cur = xstrdup (path);

  for (int hops = 0; hops < 16; hops++)
    {
      cleanup_free char *host = in_root (root, cur);
      char target[PATH_MAX];
      ssize_t n = readlink (host, target, sizeof target - 1);
      char *next;

      if (n <= 0)
        break;
      target[n] = '\0';
      if (strstr (target, "..") != NULL)
        break;
      if (target[0] == '/')
        next = xstrdup (target);
      else
        {
          cleanup_free char *copy = xstrdup (cur);
          next = xasprintf ("%s/%s", dirname (copy), target);
        }
      free (cur);
      cur = next;
    }
  return cur;
}

/* The first native entry of the cache named LIB.so.*. */
static const struct nvidia_ldcache_entry *
find_library (const struct nvidia_ldcache_entry *entries, size_t n, const char *lib)
{
  size_t len = strlen (lib);
  for (size_t i = 0; i < n; i++)
    if (nvidia_ldcache_native (entries[i].flags) && strncmp (entries[i].name, lib, len) == 0
        && strncmp (entries[i].name + len, ".so.", 4) == 0 && entries[i].path[0] == '/')
      return &entries[i];
  return NULL;
}

static int
add_library (struct scan *scan, const char *lib, const struct nvidia_ldcache_entry *entry)
{
  cleanup_free char *real = resolve_in_driver_root (scan->roots.driver_root, entry->path);
  cleanup_free char *host = in_root (scan->roots.driver_root, real);
  cleanup_free char *dir_copy = xstrdup (real), *base_copy = xstrdup (real);
  const char *dir = dirname (dir_copy), *base = basename (base_copy);
  struct stat st;

  if (stat (host, &st) < 0 || !S_ISREG (st.st_mode))
    {
      husk_warn ("%s: %s (from the ldcache) is not a regular file: left out", lib, host);
      return 0;
    }
  if (!add_unique (scan->libraries, real))
    return 0;
  add_mount (scan, real);
  add_unique (scan->folders, dir);
  if (strcmp (base, entry->name) != 0)
    {
      cleanup_free char *link = xasprintf ("%s::%s/%s", base, dir, entry->name);
      add_unique (scan->links, link);
    }
  if (strcmp (lib, "libcuda") == 0)
    {
      cleanup_free char *dev_link = xasprintf ("%s::%s/libcuda.so", entry->name, dir);
      add_unique (scan->links, dev_link);
      if (husk_str_has_prefix (base, "libcuda.so.") && strcmp (base, entry->name) != 0)
        scan->version = xstrdup (base + strlen ("libcuda.so."));
    }
  return 1;
}

static int
scan_libraries (struct scan *scan, struct husk_error **err)
{
  cleanup_free char *cache = in_root (scan->roots.driver_root, "/etc/ld.so.cache");
  cleanup_free char *data = NULL;
  struct nvidia_ldcache_entry *entries = NULL;
  size_t len, n = 0;
  int ret = 0;

  if (husk_read_file (cache, &data, &len, err) < 0)
    return husk_error_wrap (err, "driver libraries");
  if (nvidia_ldcache_parse (data, len, cache, &entries, &n, err) < 0)
    return -1;
  for (size_t i = 0; driver_libraries[i] && ret == 0; i++)
    {
      const struct nvidia_ldcache_entry *entry = find_library (entries, n, driver_libraries[i]);
      if (entry)
        add_library (scan, driver_libraries[i], entry);
      else if (i == 0)
        ret = husk_error_kind (err, ENOENT,
                               "%s: no libcuda.so.* for this machine in the ldcache of driver root %s", cache,
                               scan->roots.driver_root);
    }
  nvidia_ldcache_free (entries, n);
  return ret;
}

static void
scan_binaries_and_firmware (struct scan *scan)
{
  for (size_t i = 0; driver_binaries[i]; i++)
    for (size_t d = 0; binary_dirs[d]; d++)
      {
        cleanup_free char *rel = xasprintf ("%s/%s", binary_dirs[d], driver_binaries[i]);
        cleanup_free char *host = in_root (scan->roots.driver_root, rel);
        struct stat st;
        if (lstat (host, &st) == 0 && S_ISREG (st.st_mode))
          {
            add_mount (scan, rel);
            break;
          }
      }
  /* The daemons' sockets where they run (as nvidia-ctk mounts them): the
   * persistence daemon, fabric manager (NVSwitch systems), and MPS's pipe
   * dir.  A read-only bind still lets the container connect. */
  {
    static const struct
    {
      const char *path;
      mode_t type;
    } ipc[] = {
      { "/run/nvidia-persistenced/socket", S_IFSOCK },
      { "/run/nvidia-fabricmanager/socket", S_IFSOCK },
      { "/tmp/nvidia-mps", S_IFDIR },
    };
    for (size_t i = 0; i < sizeof ipc / sizeof ipc[0]; i++)
      {
        cleanup_free char *host = in_root (scan->roots.driver_root, ipc[i].path);
        struct stat st;
        if (lstat (host, &st) == 0 && (st.st_mode & S_IFMT) == ipc[i].type)
          add_mount (scan, ipc[i].path);
      }
  }
  if (scan->version)
    {
      static const char *const firmware_dirs[] = { "/lib/firmware/nvidia", "/usr/lib/firmware/nvidia", NULL };
      for (size_t d = 0; firmware_dirs[d]; d++)
        {
          cleanup_free char *rel = xasprintf ("%s/%s", firmware_dirs[d], scan->version);
          cleanup_free char *host = in_root (scan->roots.driver_root, rel);
          struct stat st;
          if (lstat (host, &st) == 0 && S_ISDIR (st.st_mode))
            {
              add_mount (scan, rel);
              break;
            }
        }
    }
}

/* ------------------------------------------------------------------ spec */

static json_t *
node_entry (struct scan *scan, const char *path)
{
  cleanup_free char *host = in_root (scan->roots.dev_root, path);
  return json_pack ("{s:s, s:s}", "path", path, "hostPath", host);
}

static void
add_node (struct scan *scan, json_t *nodes, const char *fmt, unsigned minor)
{
  cleanup_free char *path = xasprintf (fmt, minor);
  size_t i;
  json_t *v;
  json_array_foreach (nodes, i, v)
  {
    if (strcmp (json_string_value (json_object_get (v, "path")), path) == 0)
      return;
  }
  json_array_append_new (nodes, node_entry (scan, path));
}

static json_t *
device (const char *name, json_t *nodes, int numa_node)
{
  json_t *dev = json_pack ("{s:s, s:{s:O}}", "name", name, "containerEdits", "deviceNodes", nodes);
  if (numa_node >= 0)
    {
      char text[16];
      snprintf (text, sizeof text, "%d", numa_node);
      json_object_set_new (dev, "annotations", json_pack ("{s:s}", NVIDIA_NUMA_ANNOTATION, text));
    }
  return dev;
}

static void
add_gpu_devices (struct scan *scan, json_t *devices, json_t *all_nodes)
{
  for (size_t i = 0; i < scan->n_gpus; i++)
    {
      const struct gpu *gpu = &scan->gpus[i];
      json_t *nodes = json_array ();
      char name[24];

      add_node (scan, nodes, "/dev/nvidia%u", (unsigned) gpu->info.minor);
      add_node (scan, all_nodes, "/dev/nvidia%u", (unsigned) gpu->info.minor);
      snprintf (name, sizeof name, "%zu", gpu->index);
      json_array_append_new (devices, device (name, nodes, gpu->numa_node));
      if (gpu->info.uuid && *gpu->info.uuid)
        json_array_append_new (devices, device (gpu->info.uuid, nodes, gpu->numa_node));
      json_decref (nodes);
    }
}

static void
add_mig_devices (struct scan *scan, json_t *devices, json_t *all_nodes)
{
  for (size_t i = 0; i < scan->n_migs; i++)
    {
      const struct mig *mig = &scan->migs[i];
      const struct gpu *gpu = &scan->gpus[mig->gpu];
      json_t *nodes = json_array ();
      char name[48];

      add_node (scan, nodes, "/dev/nvidia%u", (unsigned) gpu->info.minor);
      add_node (scan, nodes, "/dev/nvidia-caps/nvidia-cap%u", mig->gi_minor);
      add_node (scan, nodes, "/dev/nvidia-caps/nvidia-cap%u", mig->ci_minor);
      add_node (scan, all_nodes, "/dev/nvidia-caps/nvidia-cap%u", mig->gi_minor);
      add_node (scan, all_nodes, "/dev/nvidia-caps/nvidia-cap%u", mig->ci_minor);
      snprintf (name, sizeof name, "%zu:%zu", gpu->index, mig->index);
      json_array_append_new (devices, device (name, nodes, gpu->numa_node));
      json_decref (nodes);
    }
}

static json_t *
hook (const char *path, const char *verb, const char *flag, json_t *values)
{
  json_t *args = json_pack ("[s, s, s]", "husk", "cdi-hook", verb);
  size_t i;
  json_t *v;
  json_array_foreach (values, i, v)
  {
    json_array_append_new (args, json_string (flag));
    json_array_append (args, v);
  }
  return json_pack ("{s:s, s:s, s:o}", "hookName", "createContainer", "path", path, "args", args);
}

static int
hook_path (const struct scan *scan, char **out, struct husk_error **err)
{
  char buf[PATH_MAX];

  if (scan->roots.hook_path)
    {
      *out = xstrdup (scan->roots.hook_path);
      return 0;
    }
  if (realpath ("/proc/self/exe", buf) == NULL)
    return husk_error_make (err, errno, "the path of the husk binary for the hooks (/proc/self/exe)");
  *out = xstrdup (buf);
  return 0;
}

static json_t *
spec_edits (struct scan *scan, struct husk_error **err)
{
  cleanup_free char *path = NULL;
  json_t *nodes = json_array (), *hooks = json_array ();

  if (hook_path (scan, &path, err) < 0)
    {
      json_decref (nodes);
      json_decref (hooks);
      return NULL;
    }
  for (size_t i = 0; control_nodes[i]; i++)
    {
      cleanup_free char *host = in_root (scan->roots.dev_root, control_nodes[i]);
      if (is_char_node (host, NULL))
        json_array_append_new (nodes, node_entry (scan, control_nodes[i]));
    }
  if (json_array_size (scan->links))
    json_array_append_new (hooks, hook (path, "create-symlinks", "--link", scan->links));
  if (json_array_size (scan->folders))
    json_array_append_new (hooks, hook (path, "update-ldcache", "--folder", scan->folders));
  return json_pack ("{s:o, s:O, s:o}", "deviceNodes", nodes, "mounts", scan->mounts, "hooks", hooks);
}

/* Whether the GPUs sit on two NUMA nodes or more: only then is there
 * anything for cdi_numa_align to choose, and only then does the spec carry
 * the husk/numa-node annotations — device annotations need cdiVersion
 * 0.6.0, which CDI libraries before v0.6 (podman 4.3, containerd 1.7)
 * refuse; without them the spec is 0.5.0 (node hostPath). */
static bool
gpus_span_numa_nodes (const struct scan *scan)
{
  for (size_t i = 0; i < scan->n_gpus; i++)
    for (size_t j = i + 1; j < scan->n_gpus; j++)
      if (scan->gpus[i].numa_node >= 0 && scan->gpus[j].numa_node >= 0
          && scan->gpus[i].numa_node != scan->gpus[j].numa_node)
        return true;
  return false;
}

static json_t *
build_spec (struct scan *scan, struct husk_error **err)
{
  json_t *devices = json_array (), *all_nodes = json_array (), *edits;
  bool numa = gpus_span_numa_nodes (scan);

  if (!numa)
    for (size_t i = 0; i < scan->n_gpus; i++)
      scan->gpus[i].numa_node = -1;
  add_gpu_devices (scan, devices, all_nodes);
  add_mig_devices (scan, devices, all_nodes);
  json_array_append_new (devices, device ("all", all_nodes, -1));
  json_decref (all_nodes);
  edits = spec_edits (scan, err);
  if (edits == NULL)
    {
      json_decref (devices);
      return NULL;
    }
  return json_pack ("{s:s, s:s, s:o, s:o}", "cdiVersion", numa ? "0.6.0" : "0.5.0", "kind", NVIDIA_CDI_KIND,
                    "devices", devices, "containerEdits", edits);
}

json_t *
nvidia_cdi_generate (const struct nvidia_roots *roots, struct husk_error **err)
{
  struct scan scan = {
    .mounts = json_array (),
    .folders = json_array (),
    .links = json_array (),
    .libraries = json_array (),
  };
  json_t *spec = NULL;

  if (scan_roots (&scan, roots, err) == 0 && scan_gpus (&scan, err) == 0 && scan_migs (&scan, err) == 0
      && scan_libraries (&scan, err) == 0)
    {
      scan_binaries_and_firmware (&scan);
      spec = build_spec (&scan, err);
    }
  scan_clear (&scan);
  return spec;
}
