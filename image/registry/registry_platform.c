/* Picking one manifest out of an OCI index or Docker manifest list for a
 * platform.  Pure: JSON text in, digest out, so it is tested on text.
 * Names are normalised as containerd does (x86_64 = amd64, aarch64 = arm64,
 * arm64 means arm64/v8, arm means arm/v7). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/registry/registry.h"

struct platform
{
  char os[32];
  char arch[32];
  char variant[32];
  bool has_variant; /* the user asked for a variant: it must match */
};

static const struct
{
  const char *from, *arch, *variant;
} arch_aliases[] = {
  { "x86_64", "amd64", "" }, { "x86-64", "amd64", "" }, { "aarch64", "arm64", "" }, { "armhf", "arm", "v7" },
  { "armel", "arm", "v6" },  { "i386", "386", "" },     { "i686", "386", "" },
};

static void
copy_field (char *dst, size_t size, const char *src)
{
  snprintf (dst, size, "%s", src ? src : "");
}

static void
normalise (struct platform *p)
{
  for (size_t i = 0; i < sizeof arch_aliases / sizeof arch_aliases[0]; i++)
    if (strcmp (p->arch, arch_aliases[i].from) == 0)
      {
        copy_field (p->arch, sizeof p->arch, arch_aliases[i].arch);
        if (p->variant[0] == '\0')
          copy_field (p->variant, sizeof p->variant, arch_aliases[i].variant);
      }
  /* The variant everyone means when they write none. */
  if (p->variant[0] == '\0' && strcmp (p->arch, "arm64") == 0)
    copy_field (p->variant, sizeof p->variant, "v8");
  if (p->variant[0] == '\0' && strcmp (p->arch, "arm") == 0)
    copy_field (p->variant, sizeof p->variant, "v7");
  if (strcmp (p->arch, "amd64") == 0 && strcmp (p->variant, "v1") == 0)
    p->variant[0] = '\0';
}

const char *
registry_default_platform (void)
{
#if defined(__x86_64__)
  return "linux/amd64";
#elif defined(__aarch64__)
  return "linux/arm64/v8";
#elif defined(__arm__)
  return "linux/arm/v7";
#elif defined(__i386__)
  return "linux/386";
#elif defined(__s390x__)
  return "linux/s390x";
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return "linux/ppc64le";
#elif defined(__riscv) && __riscv_xlen == 64
  return "linux/riscv64";
#else
  return "linux/amd64";
#endif
}

static int
parse_platform (const char *text, struct platform *p, struct husk_error **err)
{
  cleanup_free char *copy = xstrdup (text);
  char *parts[4] = { NULL };
  size_t n = 0;
  char *save = NULL;

  for (char *tok = strtok_r (copy, "/", &save); tok && n < 4; tok = strtok_r (NULL, "/", &save))
    parts[n++] = tok;
  if (n < 2 || n > 3 || strlen (parts[0]) >= sizeof p->os || strlen (parts[1]) >= sizeof p->arch
      || (n == 3 && strlen (parts[2]) >= sizeof p->variant))
    return husk_error_make (err, 0, "platform `%s`: want os/arch or os/arch/variant", text);
  *p = (struct platform){ .has_variant = n == 3 };
  copy_field (p->os, sizeof p->os, parts[0]);
  copy_field (p->arch, sizeof p->arch, parts[1]);
  copy_field (p->variant, sizeof p->variant, parts[2]);
  normalise (p);
  return 0;
}

static void
entry_platform (json_t *platform, struct platform *p)
{
  *p = (struct platform){ 0 };
  copy_field (p->os, sizeof p->os, json_string_value (json_object_get (platform, "os")));
  copy_field (p->arch, sizeof p->arch, json_string_value (json_object_get (platform, "architecture")));
  copy_field (p->variant, sizeof p->variant, json_string_value (json_object_get (platform, "variant")));
  normalise (p);
}

static char *
platform_text (const struct platform *p)
{
  return xasprintf ("%s/%s%s%s", p->os, p->arch, p->variant[0] ? "/" : "", p->variant);
}

/* 2: exact (variant too), 1: os and arch (variant not asked for), 0: no. */
static int
match_rank (const struct platform *want, const struct platform *have)
{
  if (strcmp (want->os, have->os) != 0 || strcmp (want->arch, have->arch) != 0)
    return 0;
  if (strcmp (want->variant, have->variant) == 0)
    return 2;
  return want->has_variant ? 0 : 1;
}

static void
append_available (char **list, const struct platform *have)
{
  cleanup_free char *text = platform_text (have);
  cleanup_free char *needle = xasprintf (", %s, ", text);
  cleanup_free char *haystack = xasprintf (", %s, ", *list ? *list : "");
  char *joined;

  if (strstr (haystack, needle))
    return;
  joined = *list ? xasprintf ("%s, %s", *list, text) : xstrdup (text);
  free (*list);
  *list = joined;
}

static int
select_from (json_t *manifests, const struct platform *want, const char *platform_name,
             char out_digest[DIGEST_STR_SIZE], struct husk_error **err)
{
  cleanup_free char *available = NULL;
  const char *best = NULL;
  int best_rank = 0;
  size_t i;
  json_t *entry;

  json_array_foreach (manifests, i, entry)
  {
    json_t *platform = json_object_get (entry, "platform");
    const char *digest = json_string_value (json_object_get (entry, "digest"));
    struct platform have;
    int rank;
    if (!json_is_object (platform))
      continue;
    entry_platform (platform, &have);
    if (strcmp (have.os, "unknown") == 0) /* attestations, signatures */
      continue;
    append_available (&available, &have);
    rank = match_rank (want, &have);
    if (rank > best_rank)
      {
        cleanup_free char *where = xasprintf ("manifests[%zu].digest", i);
        if (digest_validate (digest, where, err) < 0)
          return husk_error_wrap (err, "index");
        best = digest;
        best_rank = rank;
      }
  }
  if (best == NULL)
    return husk_error_make (err, 0, "no manifest for platform %s in the index (available: %s)", platform_name,
                            available ? available : "none");
  memcpy (out_digest, best, DIGEST_STR_SIZE);
  return 0;
}

int
registry_select_platform (const char *index_json, const char *platform, char out_digest[DIGEST_STR_SIZE],
                          struct husk_error **err)
{
  const char *platform_name = platform ? platform : registry_default_platform ();
  struct platform want;
  json_error_t jerr;
  json_t *doc;
  json_t *manifests;
  int rc;

  if (parse_platform (platform_name, &want, err) < 0)
    return -1;
  doc = json_loads (index_json, 0, &jerr);
  if (doc == NULL)
    return husk_error_make (err, 0, "index: invalid JSON at line %d column %d: %s", jerr.line, jerr.column,
                            jerr.text);
  manifests = json_object_get (doc, "manifests");
  if (!json_is_array (manifests))
    rc = husk_error_make (err, 0, "index has no `manifests` array");
  else
    rc = select_from (manifests, &want, platform_name, out_digest, err);
  json_decref (doc);
  return rc;
}
