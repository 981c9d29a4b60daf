/* config.json "hooks" (prestart, createRuntime... poststop) and
 * "annotations". */
#include <limits.h>

#include <jansson.h>

#include "husk/util.h"
#include "runtime/spec/spec_internal.h"

static const char *const hook_names[SPEC_HOOK_KIND_COUNT] = {
  [SPEC_HOOK_PRESTART] = "prestart",
  [SPEC_HOOK_CREATE_RUNTIME] = "createRuntime",
  [SPEC_HOOK_CREATE_CONTAINER] = "createContainer",
  [SPEC_HOOK_START_CONTAINER] = "startContainer",
  [SPEC_HOOK_POSTSTART] = "poststart",
  [SPEC_HOOK_POSTSTOP] = "poststop",
};

const char *
spec_hook_kind_name (enum spec_hook_kind kind)
{
  return (unsigned) kind < SPEC_HOOK_KIND_COUNT ? hook_names[kind] : "unknown";
}

/* ------------------------------------------------------------------ */
/* hooks and annotations                                                */

static int
parse_hook_timeout (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_hook *hook = target;
  long long timeout;

  if (want_int (ctx, value, LLONG_MIN, LLONG_MAX, &timeout) < 0)
    return -1;
  if (timeout <= 0 || timeout > INT_MAX)
    return ctx_fail (ctx, "must be a positive number of seconds, not %lld", timeout);
  hook->timeout = (int) timeout;
  return 0;
}

static const struct field hook_fields[] = {
  REQUIRED_MEMBER ("path", parse_abs_path_member, struct spec_hook, path),
  MEMBER ("args", parse_strv_member, struct spec_hook, args),
  MEMBER ("env", parse_strv_member, struct spec_hook, env),
  FIELD ("timeout", parse_hook_timeout),
};

static int
parse_hook_item (struct parse_ctx *ctx, json_t *item, void *elem)
{
  return parse_fields (ctx, item, hook_fields, N_ELEMENTS (hook_fields), elem);
}

int
parse_hooks (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec_hooks *hooks = &((struct spec *) target)->hooks;

  if (want_object (ctx, value) < 0)
    return -1;
  for (int kind = 0; kind < SPEC_HOOK_KIND_COUNT; kind++)
    {
      json_t *list = json_object_get (value, hook_names[kind]);
      size_t mark;

      if (list == NULL || json_is_null (list))
        continue;
      mark = path_push_key (ctx, hook_names[kind]);
      if (want_array_of (ctx, list, sizeof (struct spec_hook), (void **) &hooks->list[kind],
                         &hooks->count[kind], parse_hook_item)
          < 0)
        return -1;
      path_pop (ctx, mark);
    }
  return 0;
}

int
parse_annotations (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  struct spec *spec = target;
  const char *key;
  json_t *item;
  size_t n = 0;

  if (want_object (ctx, value) < 0)
    return -1;
  spec->annotations = xcalloc (2 * json_object_size (value) + 1, sizeof (char *));
  json_object_foreach (value, key, item)
  {
    size_t mark = path_push_key (ctx, key);
    const char *text;

    if (want_string (ctx, item, &text) < 0)
      return -1;
    spec->annotations[n++] = xstrdup (key);
    spec->annotations[n++] = xstrdup (text);
    path_pop (ctx, mark);
  }
  return 0;
}
