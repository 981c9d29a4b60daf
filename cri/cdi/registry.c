/* The CDI registry: every spec file of a list of dirs, loaded into one
 * table of fully-qualified devices.  A later dir wins over an earlier one
 * for the same device; the same device twice in one dir is dropped with an
 * error naming both files.  Changes are picked up by comparing a stamp of
 * the dirs' and files' mtime, size, inode, owner and mode on each lookup
 * (no inotify: huskd has no event loop to hang it on, and a stat per file
 * is cheap).  A spec's hooks run as root on the host and its mounts reach
 * the host's files, so a spec file or dir that anyone but root (or the
 * user running husk) owns or may write is refused with a warning. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cri/cdi/cdi.h"
#include "cri/cdi/cdi_internal.h"
#include "husk/cleanup.h"
#include "husk/util.h"

const char *const cdi_default_dirs[] = { "/etc/cdi", "/var/run/cdi", NULL };

/* Spec files larger than this are refused unread. */
#define CDI_MAX_SPEC_SIZE (16u << 20)

static int
spec_ext (const char *name)
{
  size_t len = strlen (name);
  if (len > 5 && !strcmp (name + len - 5, ".json"))
    return 1;
  if ((len > 5 && !strcmp (name + len - 5, ".yaml")) || (len > 4 && !strcmp (name + len - 4, ".yml")))
    return 2;
  return 0;
}

static int
name_cmp (const void *a, const void *b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* The spec files of DIR, sorted, as full paths (NULL-terminated; an
 * absent dir has none). */
static char **
list_specs (const char *dir)
{
  cleanup_dir DIR *d = opendir (dir);
  size_t n = 0, cap = 8;
  char **out = calloc (cap + 1, sizeof (char *));
  struct dirent *de;
  while (d && out && (de = readdir (d)))
    {
      if (de->d_name[0] == '.' || !spec_ext (de->d_name))
        continue;
      if (n == cap)
        {
          char **grown = realloc (out, (2 * cap + 1) * sizeof (char *));
          if (!grown)
            break;
          out = grown, cap *= 2;
        }
      if (asprintf (&out[n], "%s/%s", dir, de->d_name) < 0)
        break;
      out[++n] = NULL;
    }
  if (out)
    {
      out[n] = NULL;
      qsort (out, n, sizeof (char *), name_cmp);
    }
  return out;
}

static void
stamp_add (FILE *out, const char *path)
{
  struct stat st;

  if (stat (path, &st) < 0)
    st = (struct stat){ 0 };
  fprintf (out, "%s:%lld.%ld:%lld:%llu:%o:%u\n", path, (long long) st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
           (long long) st.st_size, (unsigned long long) st.st_ino, (unsigned) st.st_mode,
           (unsigned) st.st_uid);
}

/* What the dirs hold now, as one string to compare (one line per dir and
 * spec file, written to a growing buffer: linear in their number). */
static char *
make_stamp (char *const *dirs)
{
  char *stamp = NULL;
  size_t len = 0;
  FILE *out = open_memstream (&stamp, &len);

  if (out == NULL)
    return NULL;
  for (size_t i = 0; dirs[i]; i++)
    {
      stamp_add (out, dirs[i]);
      cleanup_strv char **files = list_specs (dirs[i]);
      for (size_t j = 0; files && files[j]; j++)
        stamp_add (out, files[j]);
    }
  if (fclose (out) != 0)
    {
      free (stamp);
      return NULL;
    }
  return stamp;
}

static void
add_error (struct cdi_registry *reg, const char *file, const char *msg)
{
  struct cdi_spec_error *grown = realloc (reg->errors, (reg->n_errors + 1) * sizeof (*grown));
  if (!grown)
    return;
  reg->errors = grown;
  reg->errors[reg->n_errors].file = strdup (file);
  reg->errors[reg->n_errors].msg = strdup (msg);
  reg->n_errors++;
}

/* WHAT (a spec file or dir) at PATH with ST may be trusted: owned by root
 * or by whoever runs husk, writable by nobody else. */
static int
check_trusted (const char *what, const char *path, const struct stat *st, struct husk_error **err)
{
  if (st->st_uid != 0 && st->st_uid != geteuid ())
    return husk_error_kind (err, EPERM, "CDI %s %s: owned by uid %u, not root: refused", what, path,
                            (unsigned) st->st_uid);
  if (st->st_mode & (S_IWGRP | S_IWOTH))
    return husk_error_kind (err, EPERM, "CDI %s %s: writable by group or others (mode %04o): refused", what,
                            path, (unsigned) (st->st_mode & 07777));
  return 0;
}

static json_t *
load_file (const char *path, struct husk_error **err)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  if (fd < 0 || fstat (fd, &st) < 0)
    return husk_error_make (err, errno, "CDI spec %s: open", path), NULL;
  if (!S_ISREG (st.st_mode) || st.st_size > CDI_MAX_SPEC_SIZE)
    return husk_error_kind (err, EINVAL, "CDI spec %s: not a regular file of at most 16 MiB", path), NULL;
  if (check_trusted ("spec", path, &st, err) < 0)
    return NULL;
  cleanup_free char *text = malloc (st.st_size + 1);
  size_t got = 0;
  while (text && got < (size_t) st.st_size)
    {
      ssize_t r = read (fd, text + got, st.st_size - got);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        break;
      got += r;
    }
  if (!text)
    return husk_error_make (err, ENOMEM, "CDI spec %s: read", path), NULL;
  text[got] = '\0';
  return cdi_spec_parse (text, got, spec_ext (path) == 2, path, err);
}

static void
free_contents (struct cdi_registry *reg)
{
  for (size_t i = 0; i < reg->n_specs; i++)
    {
      json_decref (reg->specs[i].spec);
      free (reg->specs[i].file);
    }
  for (size_t i = 0; i < reg->n_devices; i++)
    free ((char *) reg->devices[i].info.name);
  for (size_t i = 0; i < reg->n_errors; i++)
    {
      free ((char *) reg->errors[i].file);
      free ((char *) reg->errors[i].msg);
    }
  free (reg->specs);
  free (reg->devices);
  free (reg->errors);
  free (reg->infos);
  reg->specs = NULL, reg->devices = NULL, reg->errors = NULL, reg->infos = NULL;
  reg->n_specs = reg->n_devices = reg->n_errors = 0;
}

static struct cdi_dev *
find_device (struct cdi_registry *reg, const char *name)
{
  for (size_t i = 0; i < reg->n_devices; i++)
    if (!strcmp (reg->devices[i].info.name, name))
      return &reg->devices[i];
  return NULL;
}

static void
drop_device (struct cdi_registry *reg, struct cdi_dev *dev)
{
  free ((char *) dev->info.name);
  *dev = reg->devices[--reg->n_devices];
}

/* Adds the devices of spec S (of dir DIR_INDEX); DUPS collects names seen
 * twice in this dir, so that a third copy is dropped too. */
static void
add_spec_devices (struct cdi_registry *reg, struct cdi_spec_file *s, char ***dups, size_t *n_dups)
{
  const char *kind = json_string_value (json_object_get (s->spec, "kind"));
  size_t i;
  json_t *dev;
  json_array_foreach (json_object_get (s->spec, "devices"), i, dev)
  {
    cleanup_free char *name = NULL;
    if (asprintf (&name, "%s=%s", kind, json_string_value (json_object_get (dev, "name"))) < 0)
      return;
    int dup = 0;
    for (size_t k = 0; k < *n_dups; k++)
      dup |= !strcmp ((*dups)[k], name);
    struct cdi_dev *old = find_device (reg, name);
    if (old && old->dir_index == s->dir_index)
      {
        cleanup_free char *msg = NULL;
        if (asprintf (&msg, "CDI device %s is defined in both %s and %s: both dropped", name, old->info.file,
                      s->file)
            >= 0)
          add_error (reg, s->file, msg);
        drop_device (reg, old);
        dup = 1;
        char **grown = realloc (*dups, (*n_dups + 1) * sizeof (char *));
        if (grown)
          *dups = grown, (*dups)[(*n_dups)++] = strdup (name);
      }
    if (dup)
      continue;
    if (old)
      drop_device (reg, old);
    struct cdi_dev *grown = realloc (reg->devices, (reg->n_devices + 1) * sizeof (*grown));
    if (!grown)
      return;
    reg->devices = grown;
    reg->devices[reg->n_devices++] = (struct cdi_dev){
      .info = { .name = steal_pointer (&name), .file = s->file },
      .edits = json_object_get (dev, "containerEdits"),
      .device = dev,
      .spec = s->spec,
      .dir_index = s->dir_index,
    };
  }
}

static int
info_cmp (const void *a, const void *b)
{
  return strcmp (((const struct cdi_device_info *) a)->name, ((const struct cdi_device_info *) b)->name);
}

/* Records and logs a file refused: the warning names it. */
static void
refuse_file (struct cdi_registry *reg, const char *file, struct husk_error **err)
{
  const char *msg = *err ? (*err)->msg : "out of memory";

  husk_warn ("%s", msg);
  add_error (reg, file, msg);
  husk_error_free (err);
}

/* DIR may hold specs: absent (nothing to load) or trusted. */
static bool
dir_trusted (struct cdi_registry *reg, const char *dir)
{
  struct husk_error *err = NULL;
  struct stat st;

  if (stat (dir, &st) < 0)
    return true;
  if (check_trusted ("spec dir", dir, &st, &err) == 0)
    return true;
  refuse_file (reg, dir, &err);
  return false;
}

static void
load_all (struct cdi_registry *reg)
{
  free_contents (reg);
  for (size_t d = 0; reg->dirs[d]; d++)
    {
      cleanup_strv char **files = dir_trusted (reg, reg->dirs[d]) ? list_specs (reg->dirs[d]) : NULL;
      size_t first = reg->n_specs;
      for (size_t j = 0; files && files[j]; j++)
        {
          struct husk_error *err = NULL;
          json_t *spec = load_file (files[j], &err);
          if (spec == NULL)
            {
              refuse_file (reg, files[j], &err);
              continue;
            }
          struct cdi_spec_file *grown = realloc (reg->specs, (reg->n_specs + 1) * sizeof (*grown));
          if (!grown)
            {
              json_decref (spec);
              continue;
            }
          reg->specs = grown;
          reg->specs[reg->n_specs++]
              = (struct cdi_spec_file){ .file = strdup (files[j]), .spec = spec, .dir_index = (int) d };
        }
      cleanup_strv char **dups = NULL;
      size_t n_dups = 0;
      for (size_t k = first; k < reg->n_specs; k++)
        add_spec_devices (reg, &reg->specs[k], &dups, &n_dups);
      if (dups)
        dups = realloc (dups, (n_dups + 1) * sizeof (char *)), dups[n_dups] = NULL;
    }
  reg->infos = calloc (reg->n_devices + 1, sizeof (*reg->infos));
  for (size_t i = 0; reg->infos && i < reg->n_devices; i++)
    reg->infos[i] = reg->devices[i].info;
  if (reg->infos)
    qsort (reg->infos, reg->n_devices, sizeof (*reg->infos), info_cmp);
}

struct cdi_registry *
cdi_registry_new (const char *const *dirs)
{
  struct cdi_registry *reg = calloc (1, sizeof (*reg));
  if (!reg)
    return NULL;
  dirs = dirs ? dirs : cdi_default_dirs;
  size_t n = 0;
  while (dirs[n])
    n++;
  reg->dirs = calloc (n + 1, sizeof (char *));
  for (size_t i = 0; reg->dirs && i < n; i++)
    reg->dirs[i] = strdup (dirs[i]);
  if (!reg->dirs)
    {
      free (reg);
      return NULL;
    }
  reg->where = xstrdup ("the CDI specs in");
  for (size_t i = 0; i < n; i++)
    {
      char *longer = xasprintf ("%s%s %s", reg->where, i ? "," : "", reg->dirs[i]);
      free (reg->where);
      reg->where = longer;
    }
  cdi_registry_refresh (reg);
  return reg;
}

void
cdi_registry_free (struct cdi_registry *reg)
{
  if (!reg)
    return;
  free_contents (reg);
  husk_strvfreep (&reg->dirs);
  free (reg->where);
  free (reg->stamp);
  free (reg);
}

int
cdi_registry_refresh (struct cdi_registry *reg)
{
  char *stamp = make_stamp (reg->dirs);
  if (stamp && reg->stamp && !strcmp (stamp, reg->stamp))
    {
      free (stamp);
      return 0;
    }
  free (reg->stamp);
  reg->stamp = stamp;
  load_all (reg);
  return 1;
}

struct cdi_dev *
cdi_registry_find (struct cdi_registry *reg, const char *name, struct husk_error **err)
{
  if (cdi_parse_name (name, NULL, NULL, err) < 0)
    return NULL;
  struct cdi_dev *dev = find_device (reg, name);
  if (dev == NULL)
    husk_error_kind (err, ENOENT, "CDI device %s: no such device in %s", name, reg->where);
  return dev;
}

const char *
cdi_registry_where (const struct cdi_registry *reg)
{
  return reg->where;
}

json_t *
cdi_registry_get (struct cdi_registry *reg, const char *name, struct husk_error **err)
{
  cdi_registry_refresh (reg);
  struct cdi_dev *dev = cdi_registry_find (reg, name, err);
  return dev ? dev->edits : NULL;
}

const struct cdi_device_info *
cdi_registry_list (struct cdi_registry *reg, size_t *n)
{
  cdi_registry_refresh (reg);
  *n = reg->n_devices;
  return reg->infos;
}

const struct cdi_spec_error *
cdi_registry_errors (struct cdi_registry *reg, size_t *n)
{
  cdi_registry_refresh (reg);
  *n = reg->n_errors;
  return reg->errors;
}
