/* Parses and validates an OCI runtime config.json (runtime-spec 1.0 to 1.2)
 * into struct spec.  Every problem becomes one error line naming the file,
 * the field path ("mounts[2].destination") and what is wrong; nothing on the
 * host is touched here except stat() of the root filesystem. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/spec/spec_internal.h"

/* The sections live in spec_process.c, spec_mounts.c, spec_hooks.c,
 * spec_linux.c, spec_resources.c and spec_seccomp.c; the parser's machinery
 * in spec_json.c. */

/* ------------------------------------------------------------------ */
/* ociVersion and root                                                  */

static bool
oci_version_supported (const char *version)
{
  unsigned major, minor, patch;
  int consumed = 0;
  const char *rest;

  if (!isdigit ((unsigned char) version[0])
      || sscanf (version, "%u.%u.%u%n", &major, &minor, &patch, &consumed) != 3)
    return false;
  rest = version + consumed;
  if (*rest != '\0' && *rest != '-' && *rest != '+')
    return false;
  return major == 1 && minor <= 2;
}

static int
parse_oci_version (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;
  const char *version;

  if (want_string (ctx, value, &version) < 0)
    return -1;
  if (!oci_version_supported (version))
    {
      /* Says it as a sentence: "ociVersion "2.0.0" is not supported". */
      path_pop (ctx, 0);
      return ctx_fail (ctx, "ociVersion \"%s\" is not supported (husk supports 1.0.0 to 1.2.x)", version);
    }
  spec->oci_version = xstrdup (version);
  return 0;
}

static int
parse_root_path (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;
  cleanup_free char *joined = NULL;
  const char *path;
  struct stat st;

  if (want_string (ctx, value, &path) < 0)
    return -1;
  if (path[0] == '\0')
    return ctx_fail (ctx, "must not be empty");
  joined = path[0] == '/' ? xstrdup (path) : xasprintf ("%s/%s", ctx->bundle_dir, path);
  free (spec->root_path);
  spec->root_path = path_clean (joined);
  if (stat (spec->root_path, &st) < 0)
    return ctx_fail_errno (ctx, errno, "`%s`", spec->root_path);
  if (!S_ISDIR (st.st_mode))
    return ctx_fail_errno (ctx, ENOTDIR, "`%s`", spec->root_path);
  return 0;
}

static const struct field root_fields[] = {
  REQUIRED ("path", parse_root_path),
  MEMBER ("readonly", parse_bool_member, struct spec, root_readonly),
};

static int
parse_root (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  return parse_fields (ctx, value, root_fields, N_ELEMENTS (root_fields), target);
}

/* ------------------------------------------------------------------ */
/* The document                                                         */

static const struct field spec_fields[] = {
  REQUIRED ("ociVersion", parse_oci_version),
  REQUIRED ("root", parse_root),
  FIELD ("process", parse_process),
  MEMBER ("hostname", parse_string_member, struct spec, hostname),
  MEMBER ("domainname", parse_string_member, struct spec, domainname),
  FIELD ("mounts", parse_mounts),
  FIELD ("hooks", parse_hooks),
  FIELD ("annotations", parse_annotations),
  FIELD ("linux", parse_linux),
};

/* Rules that tie fields together, checked once everything is read. */
static int
check_consistency (struct parse_ctx *ctx, const struct spec *spec)
{
  const struct spec_namespace *userns = &spec->namespaces[SPEC_NS_USER];

  if (userns->present && userns->path == NULL)
    {
      if (spec->n_uid_mappings == 0)
        return ctx_fail (ctx, "linux.uidMappings: required for a new user namespace");
      if (spec->n_gid_mappings == 0)
        return ctx_fail (ctx, "linux.gidMappings: required for a new user namespace");
    }
  if (!userns->present && spec->n_uid_mappings > 0)
    return ctx_fail (ctx, "linux.uidMappings: set, but linux.namespaces has no user namespace");
  if (!userns->present && spec->n_gid_mappings > 0)
    return ctx_fail (ctx, "linux.gidMappings: set, but linux.namespaces has no user namespace");
  if (spec->has_time_offsets && !spec->namespaces[SPEC_NS_TIME].present)
    return ctx_fail (ctx, "linux.timeOffsets: set, but linux.namespaces has no time namespace");
  return 0;
}

static void
spec_freep (struct spec **spec)
{
  spec_free (*spec);
  *spec = NULL;
}

/* Integers above INT64_MAX (RLIM_INFINITY written as 18446744073709551615,
 * 64-bit seccomp masks) overflow jansson's integers; such a document is read
 * again with numbers as doubles, which want_int/want_uint64 accept. */
static json_t *
load_json (struct parse_ctx *ctx, const char *text, size_t len)
{
  json_error_t json_error;
  json_t *root = json_loadb (text, len, 0, &json_error);

  if (root == NULL && json_error_code (&json_error) == json_error_numeric_overflow)
    root = json_loadb (text, len, JSON_DECODE_INT_AS_REAL, &json_error);
  if (root == NULL)
    ctx_fail (ctx, "line %d column %d: %s", json_error.line, json_error.column, json_error.text);
  return root;
}

int
spec_parse (const char *text, size_t len, const char *file_name, const char *bundle_dir, struct spec **out,
            struct husk_error **err)
{
  __attribute__ ((cleanup (spec_freep))) struct spec *spec = NULL;
  struct parse_ctx ctx = { .file = file_name, .err = err };
  char resolved[PATH_MAX];

  if (realpath (bundle_dir ? bundle_dir : ".", resolved) == NULL)
    return husk_error_make (err, errno, "bundle `%s`", bundle_dir ? bundle_dir : ".");
  spec = xcalloc (1, sizeof *spec);
  spec->bundle_dir = xstrdup (resolved);
  ctx.bundle_dir = spec->bundle_dir;
  spec->json = load_json (&ctx, text, len);
  if (spec->json == NULL)
    return -1;
  if (!json_is_object ((json_t *) spec->json))
    return ctx_fail (&ctx, "must be a JSON object");
  if (parse_fields (&ctx, spec->json, spec_fields, N_ELEMENTS (spec_fields), spec) < 0
      || check_consistency (&ctx, spec) < 0)
    return -1;
  *out = steal_pointer (&spec);
  return 0;
}

int
spec_load (const char *bundle_dir, struct spec **out, struct husk_error **err)
{
  cleanup_free char *config_path = xasprintf ("%s/config.json", bundle_dir);
  cleanup_free char *text = NULL;
  size_t len = 0;

  if (husk_read_file (config_path, &text, &len, err) < 0)
    return -1;
  return spec_parse (text, len, config_path, bundle_dir, out, err);
}

int
spec_parse_process (const char *text, size_t len, const char *file_name, struct spec_process *out,
                    struct husk_error **err)
{
  json_auto_t *root = NULL;
  struct parse_ctx ctx = { .file = file_name, .err = err };

  memset (out, 0, sizeof *out);
  root = load_json (&ctx, text, len);
  if (root == NULL)
    return -1;
  if (parse_process_object (&ctx, root, out) < 0)
    {
      spec_process_clear (out);
      return -1;
    }
  return 0;
}

/* ------------------------------------------------------------------ */
/* Freeing                                                              */

void
spec_process_clear (struct spec_process *process)
{
  husk_strvfreep (&process->args);
  husk_strvfreep (&process->env);
  free (process->cwd);
  free (process->user.additional_gids);
  free (process->rlimits);
  free (process->apparmor_profile);
  free (process->selinux_label);
  memset (process, 0, sizeof *process);
}

static void
seccomp_clear (struct spec_seccomp *seccomp)
{
  for (size_t i = 0; i < seccomp->n_rules; i++)
    {
      husk_strvfreep (&seccomp->rules[i].names);
      free (seccomp->rules[i].args);
    }
  free (seccomp->rules);
  free (seccomp->archs);
  free (seccomp->listener_path);
}

static void
mounts_free (struct spec_mount *mounts, size_t n_mounts)
{
  for (size_t i = 0; i < n_mounts; i++)
    {
      free (mounts[i].destination);
      free (mounts[i].source);
      free (mounts[i].type);
      free (mounts[i].data);
      free (mounts[i].uid_mappings);
      free (mounts[i].gid_mappings);
    }
  free (mounts);
}

static void
hooks_clear (struct spec_hooks *hooks)
{
  for (int kind = 0; kind < SPEC_HOOK_KIND_COUNT; kind++)
    {
      for (size_t i = 0; i < hooks->count[kind]; i++)
        {
          free (hooks->list[kind][i].path);
          husk_strvfreep (&hooks->list[kind][i].args);
          husk_strvfreep (&hooks->list[kind][i].env);
        }
      free (hooks->list[kind]);
    }
}

void
spec_free (struct spec *spec)
{
  if (spec == NULL)
    return;
  free (spec->oci_version);
  free (spec->bundle_dir);
  free (spec->root_path);
  free (spec->hostname);
  free (spec->domainname);
  spec_process_clear (&spec->process);
  mounts_free (spec->mounts, spec->n_mounts);
  hooks_clear (&spec->hooks);
  husk_strvfreep (&spec->annotations);
  for (int type = 0; type < SPEC_NS_COUNT; type++)
    free (spec->namespaces[type].path);
  free (spec->uid_mappings);
  free (spec->gid_mappings);
  for (size_t i = 0; i < spec->n_devices; i++)
    free (spec->devices[i].path);
  free (spec->devices);
  free (spec->cgroups_path);
  free (spec->resources.first_limit);
  husk_strvfreep (&spec->masked_paths);
  husk_strvfreep (&spec->readonly_paths);
  for (size_t i = 0; i < spec->n_sysctls; i++)
    {
      free (spec->sysctls[i].key);
      free (spec->sysctls[i].value);
    }
  free (spec->sysctls);
  seccomp_clear (&spec->seccomp);
  free (spec->mount_label);
  json_decref (spec->json);
  free (spec);
}
