/* The file formats NVIDIA GPU discovery reads: the driver's per-GPU
 * information file, its MIG minor table and capability files, and glibc's
 * ld.so.cache.  Pure parsers over text or bytes, for unit tests. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cri/cdi/nvidia.h"
#include "husk/cleanup.h"
#include "husk/util.h"

static char *
trimmed (const char *start, const char *end)
{
  while (start < end && isspace ((unsigned char) *start))
    start++;
  while (end > start && isspace ((unsigned char) end[-1]))
    end--;
  return strndup (start, end - start) ?: (abort (), NULL);
}

void
nvidia_gpu_info_clear (struct nvidia_gpu_info *info)
{
  free (info->model);
  free (info->uuid);
  free (info->bus_id);
  *info = (struct nvidia_gpu_info){ .minor = -1 };
}

static int
information_field (struct nvidia_gpu_info *info, const char *key, char *value, const char *file,
                   struct husk_error **err)
{
  char **slot = NULL;
  long long minor;

  if (strcmp (key, "Model") == 0)
    slot = &info->model;
  else if (strcmp (key, "GPU UUID") == 0)
    slot = &info->uuid;
  else if (strcmp (key, "Bus Location") == 0)
    {
      for (char *c = value; *c; c++)
        *c = (char) tolower ((unsigned char) *c);
      slot = &info->bus_id;
    }
  else if (strcmp (key, "Device Minor") == 0)
    {
      int ok = husk_parse_int64 (value, 0, 255, &minor) == 0;
      if (!ok)
        husk_error_kind (err, EINVAL, "%s: Device Minor `%s` is not a number from 0 to 255", file, value);
      free (value);
      if (!ok)
        return -1;
      info->minor = (int) minor;
      return 0;
    }
  if (slot == NULL)
    {
      free (value);
      return 0;
    }
  free (*slot);
  *slot = value;
  return 0;
}

int
nvidia_parse_information (const char *text, const char *file, struct nvidia_gpu_info *out,
                          struct husk_error **err)
{
  struct nvidia_gpu_info info = { .minor = -1 };
  const char *line = text;

  while (*line)
    {
      const char *eol = strchrnul (line, '\n');
      const char *colon = memchr (line, ':', eol - line);
      if (colon)
        {
          cleanup_free char *key = trimmed (line, colon);
          if (information_field (&info, key, trimmed (colon + 1, eol), file, err) < 0)
            {
              nvidia_gpu_info_clear (&info);
              return -1;
            }
        }
      line = *eol ? eol + 1 : eol;
    }
  if (info.bus_id == NULL || *info.bus_id == '\0')
    {
      nvidia_gpu_info_clear (&info);
      return husk_error_kind (err, EINVAL, "%s: no `Bus Location:` line", file);
    }
  *out = info;
  return 0;
}

long
nvidia_parse_cap_minor (const char *text)
{
  const char *p = strstr (text, "DeviceFileMinor:");
  long long minor;
  char buf[32];
  size_t len = 0;

  if (p == NULL)
    return -1;
  p += strlen ("DeviceFileMinor:");
  while (*p == ' ' || *p == '\t')
    p++;
  while (isdigit ((unsigned char) p[len]) && len < sizeof buf - 1)
    len++;
  memcpy (buf, p, len);
  buf[len] = '\0';
  if (husk_parse_int64 (buf, 0, 1 << 20, &minor) < 0)
    return -1;
  return (long) minor;
}

/* "gpuN/giG/access" or "gpuN/giG/ciC/access" into *M; 0 when NAME is
 * another capability. */
static int
mig_name (const char *name, struct nvidia_mig_minor *m)
{
  int used = 0;

  m->ci = -1;
  if (sscanf (name, "gpu%d/gi%d/access%n", &m->gpu, &m->gi, &used) == 2 && name[used] == '\0')
    return 1;
  used = 0;
  if (sscanf (name, "gpu%d/gi%d/ci%d/access%n", &m->gpu, &m->gi, &m->ci, &used) == 3 && name[used] == '\0')
    return 1;
  return 0;
}

int
nvidia_parse_mig_minors (const char *text, const char *file, struct nvidia_mig_minor **out, size_t *n,
                         struct husk_error **err)
{
  cleanup_free struct nvidia_mig_minor *list = NULL;
  size_t count = 0;
  const char *line = text;

  for (int lineno = 1; *line; lineno++)
    {
      const char *eol = strchrnul (line, '\n');
      cleanup_free char *text_line = trimmed (line, eol);
      char name[128], extra;
      unsigned minor;
      struct nvidia_mig_minor m;

      line = *eol ? eol + 1 : eol;
      if (*text_line == '\0')
        continue;
      if (sscanf (text_line, "%127s %u %c", name, &minor, &extra) != 2)
        return husk_error_kind (err, EINVAL, "%s:%d: `%s` is not `NAME MINOR`", file, lineno, text_line);
      if (!mig_name (name, &m))
        continue;
      m.minor = minor;
      list = xrealloc (list, (count + 1) * sizeof *list);
      list[count++] = m;
    }
  *out = list;
  list = NULL;
  *n = count;
  return 0;
}

/* ---------------------------------------------------------- ld.so.cache */

#define OLD_MAGIC "ld.so-1.7.0"
#define NEW_MAGIC "glibc-ld.so.cache"
#define NEW_VERSION "1.1"
/* The sizes of glibc's struct cache_file (magic[11] + nlibs), its
 * file_entry (flags, key, value), struct cache_file_new (magic[17],
 * version[3], nlibs, len_strings, flags, padding[3], extension_offset,
 * unused[3]) and file_entry_new (flags, key, value, osversion, hwcap). */
#define OLD_HEADER 16u
#define OLD_ENTRY 12u
#define NEW_HEADER 48u
#define NEW_ENTRY 24u

#define FLAG_TYPE_MASK 0x00ff
#define FLAG_ELF_LIBC6 0x0003
#define FLAG_ARCH_MASK 0xff00
#define FLAG_X8664_LIB64 0x0300
#define FLAG_AARCH64_LIB64 0x0a00

int
nvidia_ldcache_native (int32_t flags)
{
#if defined(__x86_64__)
  const int32_t arch = FLAG_X8664_LIB64;
#elif defined(__aarch64__)
  const int32_t arch = FLAG_AARCH64_LIB64;
#else
  const int32_t arch = 0;
#endif
  return (flags & FLAG_TYPE_MASK) == FLAG_ELF_LIBC6 && (flags & FLAG_ARCH_MASK) == arch;
}

void
nvidia_ldcache_free (struct nvidia_ldcache_entry *entries, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      free (entries[i].name);
      free (entries[i].path);
    }
  free (entries);
}

static uint32_t
u32_at (const unsigned char *p)
{
  uint32_t v;
  memcpy (&v, p, sizeof v);
  return v;
}

/* The NUL-terminated string at OFFSET of the table at BASE (LEN bytes). */
static char *
string_at (const unsigned char *base, size_t len, uint32_t offset)
{
  const unsigned char *end;

  if (offset >= len)
    return NULL;
  end = memchr (base + offset, '\0', len - offset);
  if (end == NULL || end == base + offset)
    return NULL;
  return xstrdup ((const char *) base + offset);
}

/* Where the new-format header starts: 0, or after the old table. */
static int
new_header_offset (const unsigned char *data, size_t len, const char *file, size_t *offset,
                   struct husk_error **err)
{
  size_t at;

  if (len >= strlen (NEW_MAGIC) && memcmp (data, NEW_MAGIC, strlen (NEW_MAGIC)) == 0)
    {
      *offset = 0;
      return 0;
    }
  if (len < OLD_HEADER || memcmp (data, OLD_MAGIC, strlen (OLD_MAGIC)) != 0)
    return husk_error_kind (err, EINVAL, "%s: not an ld.so.cache (no `%s` or `%s` magic)", file, NEW_MAGIC,
                            OLD_MAGIC);
  at = OLD_HEADER + (size_t) u32_at (data + 12) * OLD_ENTRY;
  at = (at + 7) & ~(size_t) 7;
  if (u32_at (data + 12) > len / OLD_ENTRY || at + NEW_HEADER > len
      || memcmp (data + at, NEW_MAGIC, strlen (NEW_MAGIC)) != 0)
    return husk_error_kind (err, EINVAL, "%s: an old-format ld.so.cache without the `%s` table", file,
                            NEW_MAGIC);
  *offset = at;
  return 0;
}

int
nvidia_ldcache_parse (const void *data, size_t len, const char *file, struct nvidia_ldcache_entry **out,
                      size_t *n, struct husk_error **err)
{
  const unsigned char *bytes = data, *base;
  struct nvidia_ldcache_entry *list;
  size_t at = 0, base_len;
  uint32_t nlibs;

  if (new_header_offset (bytes, len, file, &at, err) < 0)
    return -1;
  base = bytes + at;
  base_len = len - at;
  if (base_len < NEW_HEADER || memcmp (base + strlen (NEW_MAGIC), NEW_VERSION, strlen (NEW_VERSION)) != 0)
    return husk_error_kind (err, EINVAL, "%s: ld.so.cache version is not %s", file, NEW_VERSION);
  nlibs = u32_at (base + 20);
  if (nlibs > (base_len - NEW_HEADER) / NEW_ENTRY)
    return husk_error_kind (err, EINVAL, "%s: ld.so.cache claims %u libraries in %zu bytes", file, nlibs,
                            len);
  list = xcalloc (nlibs ?: 1, sizeof *list);
  for (uint32_t i = 0; i < nlibs; i++)
    {
      const unsigned char *e = base + NEW_HEADER + (size_t) i * NEW_ENTRY;
      list[i].flags = (int32_t) u32_at (e);
      list[i].name = string_at (base, base_len, u32_at (e + 4));
      list[i].path = string_at (base, base_len, u32_at (e + 8));
      if (list[i].name == NULL || list[i].path == NULL)
        {
          nvidia_ldcache_free (list, i + 1);
          return husk_error_kind (err, EINVAL, "%s: ld.so.cache entry %u points outside the file", file, i);
        }
    }
  *out = list;
  *n = nlibs;
  return 0;
}
