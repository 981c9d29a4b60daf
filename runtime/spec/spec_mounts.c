/* config.json "mounts", and the mount options ("nosuid", "rbind",
 * "rprivate"...) that become flags, propagation and data here. */
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include <jansson.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/spec/spec_internal.h"

static const struct mount_option mount_options[] = {
  { "defaults", MOUNT_OPT_FLAGS, 0, 0 },
  { "ro", MOUNT_OPT_FLAGS, MS_RDONLY, 0 },
  { "rw", MOUNT_OPT_FLAGS, 0, MS_RDONLY },
  { "suid", MOUNT_OPT_FLAGS, 0, MS_NOSUID },
  { "nosuid", MOUNT_OPT_FLAGS, MS_NOSUID, 0 },
  { "dev", MOUNT_OPT_FLAGS, 0, MS_NODEV },
  { "nodev", MOUNT_OPT_FLAGS, MS_NODEV, 0 },
  { "exec", MOUNT_OPT_FLAGS, 0, MS_NOEXEC },
  { "noexec", MOUNT_OPT_FLAGS, MS_NOEXEC, 0 },
  { "sync", MOUNT_OPT_FLAGS, MS_SYNCHRONOUS, 0 },
  { "async", MOUNT_OPT_FLAGS, 0, MS_SYNCHRONOUS },
  { "dirsync", MOUNT_OPT_FLAGS, MS_DIRSYNC, 0 },
  { "remount", MOUNT_OPT_FLAGS, MS_REMOUNT, 0 },
  { "mand", MOUNT_OPT_FLAGS, MS_MANDLOCK, 0 },
  { "nomand", MOUNT_OPT_FLAGS, 0, MS_MANDLOCK },
  { "atime", MOUNT_OPT_FLAGS, 0, MS_NOATIME },
  { "noatime", MOUNT_OPT_FLAGS, MS_NOATIME, 0 },
  { "diratime", MOUNT_OPT_FLAGS, 0, MS_NODIRATIME },
  { "nodiratime", MOUNT_OPT_FLAGS, MS_NODIRATIME, 0 },
  { "relatime", MOUNT_OPT_FLAGS, MS_RELATIME, 0 },
  { "norelatime", MOUNT_OPT_FLAGS, 0, MS_RELATIME },
  { "strictatime", MOUNT_OPT_FLAGS, MS_STRICTATIME, 0 },
  { "nostrictatime", MOUNT_OPT_FLAGS, 0, MS_STRICTATIME },
  { "nosymfollow", MOUNT_OPT_FLAGS, MS_NOSYMFOLLOW, 0 },
  { "symfollow", MOUNT_OPT_FLAGS, 0, MS_NOSYMFOLLOW },
  { "bind", MOUNT_OPT_BIND, MS_BIND, 0 },
  { "rbind", MOUNT_OPT_BIND, MS_BIND | MS_REC, 0 },
  { "private", MOUNT_OPT_PROPAGATION, MS_PRIVATE, 0 },
  { "rprivate", MOUNT_OPT_PROPAGATION, MS_PRIVATE | MS_REC, 0 },
  { "shared", MOUNT_OPT_PROPAGATION, MS_SHARED, 0 },
  { "rshared", MOUNT_OPT_PROPAGATION, MS_SHARED | MS_REC, 0 },
  { "slave", MOUNT_OPT_PROPAGATION, MS_SLAVE, 0 },
  { "rslave", MOUNT_OPT_PROPAGATION, MS_SLAVE | MS_REC, 0 },
  { "unbindable", MOUNT_OPT_PROPAGATION, MS_UNBINDABLE, 0 },
  { "runbindable", MOUNT_OPT_PROPAGATION, MS_UNBINDABLE | MS_REC, 0 },
  /* The recursive forms, as runc and crun take them.  An atime option sets
   * the whole atime mode (the kernel wants MOUNT_ATTR__ATIME cleared with
   * it): "ratime", "rnostrictatime" = relatime, "rnorelatime" = strictatime. */
  { "rro", MOUNT_OPT_RECURSIVE, MOUNT_ATTR_RDONLY, 0 },
  { "rrw", MOUNT_OPT_RECURSIVE, 0, MOUNT_ATTR_RDONLY },
  { "rnosuid", MOUNT_OPT_RECURSIVE, MOUNT_ATTR_NOSUID, 0 },
  { "rsuid", MOUNT_OPT_RECURSIVE, 0, MOUNT_ATTR_NOSUID },
  { "rnodev", MOUNT_OPT_RECURSIVE, MOUNT_ATTR_NODEV, 0 },
  { "rdev", MOUNT_OPT_RECURSIVE, 0, MOUNT_ATTR_NODEV },
  { "rnoexec", MOUNT_OPT_RECURSIVE, MOUNT_ATTR_NOEXEC, 0 },
  { "rexec", MOUNT_OPT_RECURSIVE, 0, MOUNT_ATTR_NOEXEC },
  { "rnodiratime", MOUNT_OPT_RECURSIVE, MOUNT_ATTR_NODIRATIME, 0 },
  { "rdiratime", MOUNT_OPT_RECURSIVE, 0, MOUNT_ATTR_NODIRATIME },
  { "rrelatime", MOUNT_OPT_RECURSIVE, MOUNT_ATTR_RELATIME, MOUNT_ATTR__ATIME },
  { "rnorelatime", MOUNT_OPT_RECURSIVE, MOUNT_ATTR_STRICTATIME, MOUNT_ATTR__ATIME },
  { "rnoatime", MOUNT_OPT_RECURSIVE, MOUNT_ATTR_NOATIME, MOUNT_ATTR__ATIME },
  { "ratime", MOUNT_OPT_RECURSIVE, MOUNT_ATTR_RELATIME, MOUNT_ATTR__ATIME },
  { "rstrictatime", MOUNT_OPT_RECURSIVE, MOUNT_ATTR_STRICTATIME, MOUNT_ATTR__ATIME },
  { "rnostrictatime", MOUNT_OPT_RECURSIVE, MOUNT_ATTR_RELATIME, MOUNT_ATTR__ATIME },
  { "rnosymfollow", MOUNT_OPT_RECURSIVE, MOUNT_ATTR_NOSYMFOLLOW, 0 },
  { "rsymfollow", MOUNT_OPT_RECURSIVE, 0, MOUNT_ATTR_NOSYMFOLLOW },
  { "tmpcopyup", MOUNT_OPT_IGNORED, 0, 0 },
  /* The mappings come from uidMappings/gidMappings; these only say
   * whether submounts are idmapped too, which an rbind's always are. */
  { "idmap", MOUNT_OPT_IGNORED_QUIET, 0, 0 },
  { "ridmap", MOUNT_OPT_IGNORED_QUIET, 0, 0 },
};

const struct mount_option *
find_mount_option (const char *name)
{
  for (size_t i = 0; i < N_ELEMENTS (mount_options); i++)
    if (strcmp (mount_options[i].name, name) == 0)
      return &mount_options[i];
  return NULL;
}

/* ------------------------------------------------------------------ */
/* mounts                                                               */

static void
append_mount_data (char **data, const char *option)
{
  char *joined;

  if (*data == NULL)
    {
      *data = xstrdup (option);
      return;
    }
  joined = xasprintf ("%s,%s", *data, option);
  free (*data);
  *data = joined;
}

static int
apply_mount_option (struct spec_mount *mount, const struct mount_option *option, const char *field,
                    size_t index, struct husk_error **err)
{
  switch (option->kind)
    {
    case MOUNT_OPT_BIND:
      mount->bind = true;
      /* fallthrough */
    case MOUNT_OPT_FLAGS:
      mount->flags = (mount->flags | option->set) & ~option->clear;
      return 0;
    case MOUNT_OPT_PROPAGATION:
      mount->propagation = option->set;
      return 0;
    case MOUNT_OPT_RECURSIVE:
      /* A later option wins over an earlier one of the same attribute. */
      mount->rec_attr_clr = (mount->rec_attr_clr & ~option->set) | option->clear;
      mount->rec_attr_set = (mount->rec_attr_set & ~option->clear) | option->set;
      return 0;
    case MOUNT_OPT_IGNORED:
      husk_warn ("%s[%zu]: option \"%s\" is not supported, ignored", field, index, option->name);
      return 0;
    case MOUNT_OPT_IGNORED_QUIET:
      return 0;
    case MOUNT_OPT_UNSUPPORTED:
    default:
      return husk_error_make (err, 0, "%s[%zu]: option \"%s\" is not supported", field, index, option->name);
    }
}

int
spec_mount_parse_options (struct spec_mount *mount, char *const *options, const char *field,
                          struct husk_error **err)
{
  cleanup_free char *data = NULL;

  mount->flags = 0;
  mount->propagation = 0;
  mount->bind = false;
  mount->rec_attr_set = mount->rec_attr_clr = 0;
  for (size_t i = 0; options && options[i]; i++)
    {
      const struct mount_option *option = find_mount_option (options[i]);

      if (options[i][0] == '\0')
        continue;
      if (option == NULL)
        append_mount_data (&data, options[i]);
      else if (apply_mount_option (mount, option, field, i, err) < 0)
        return -1;
    }
  if (mount->type && strcmp (mount->type, "bind") == 0)
    {
      mount->bind = true;
      mount->flags |= MS_BIND;
    }
  free (mount->data);
  mount->data = steal_pointer (&data);
  return 0;
}

static int
parse_mount_destination (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_mount *mount = target;
  const char *destination;

  if (want_string (ctx, value, &destination) < 0 || check_absolute (ctx, destination) < 0)
    return -1;
  mount->destination = path_clean (destination);
  return 0;
}

static int
parse_mount_uid_mappings (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_mount *mount = target;

  return want_array_of (ctx, value, sizeof (struct spec_id_mapping), (void **) &mount->uid_mappings,
                        &mount->n_uid_mappings, parse_id_mapping_item);
}

static int
parse_mount_gid_mappings (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_mount *mount = target;

  return want_array_of (ctx, value, sizeof (struct spec_id_mapping), (void **) &mount->gid_mappings,
                        &mount->n_gid_mappings, parse_id_mapping_item);
}

/* An idmapped mount is a bind mount with both mappings, each non-empty. */
static int
check_idmapped_mount (struct parse_ctx *ctx, const struct spec_mount *mount)
{
  if (mount->n_uid_mappings == 0 && mount->n_gid_mappings == 0)
    return 0;
  if (mount->n_uid_mappings == 0)
    return ctx_fail (ctx, "uidMappings: required with gidMappings (an idmapped mount needs both)");
  if (mount->n_gid_mappings == 0)
    return ctx_fail (ctx, "gidMappings: required with uidMappings (an idmapped mount needs both)");
  if (!mount->bind)
    return ctx_fail (ctx, "uidMappings: only a bind mount can be idmapped (type `%s`)",
                     mount->type ? mount->type : "none");
  for (size_t i = 0; i < mount->n_uid_mappings; i++)
    if (mount->uid_mappings[i].size == 0)
      return ctx_fail (ctx, "uidMappings[%zu].size: must not be 0", i);
  for (size_t i = 0; i < mount->n_gid_mappings; i++)
    if (mount->gid_mappings[i].size == 0)
      return ctx_fail (ctx, "gidMappings[%zu].size: must not be 0", i);
  return 0;
}

static const struct field mount_fields[] = {
  REQUIRED ("destination", parse_mount_destination),
  MEMBER ("type", parse_string_member, struct spec_mount, type),
  MEMBER ("source", parse_string_member, struct spec_mount, source),
  FIELD ("uidMappings", parse_mount_uid_mappings),
  FIELD ("gidMappings", parse_mount_gid_mappings),
};

static int
parse_mount_options_of (struct parse_ctx *ctx, json_t *item, struct spec_mount *mount)
{
  json_t *value = json_object_get (item, "options");
  cleanup_strv char **options = NULL;
  size_t mark = path_push_key (ctx, "options");

  if (value && !json_is_null (value) && want_strv (ctx, value, NULL, &options) < 0)
    return -1;
  if (spec_mount_parse_options (mount, options, ctx->path, ctx->err) < 0)
    return husk_error_wrap (ctx->err, "%s", ctx->file);
  path_pop (ctx, mark);
  return 0;
}

static int
parse_mount_item (struct parse_ctx *ctx, json_t *item, void *elem)
{
  struct spec_mount *mount = elem;

  mount->prepared_fd = -1;
  if (parse_fields (ctx, item, mount_fields, N_ELEMENTS (mount_fields), mount) < 0
      || parse_mount_options_of (ctx, item, mount) < 0 || check_idmapped_mount (ctx, mount) < 0)
    return -1;
  /* A relative bind source means a path in the bundle, as runc reads it
   * from the bundle directory. */
  if (mount->bind && mount->source && mount->source[0] != '/')
    {
      char *in_bundle = xasprintf ("%s/%s", ctx->bundle_dir, mount->source);
      free (mount->source);
      mount->source = in_bundle;
    }
  return 0;
}

int
parse_mounts (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;

  return want_array_of (ctx, value, sizeof (struct spec_mount), (void **) &spec->mounts, &spec->n_mounts,
                        parse_mount_item);
}
