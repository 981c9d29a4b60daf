/* The machinery of the config.json parser: the parse context (file name and
 * field path for error messages), typed readers of JSON values, the field
 * tables objects are read by, and the generic member parsers. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/spec/spec_internal.h"

/* The generic member parsers below write through these types. */
_Static_assert(sizeof (uid_t) == sizeof (uint32_t), "uid_t is 32 bits");
_Static_assert(sizeof (gid_t) == sizeof (uint32_t), "gid_t is 32 bits");
_Static_assert(sizeof (unsigned) == sizeof (uint32_t), "unsigned is 32 bits");

int
lookup_name (const struct named_value *table, size_t n, const char *name, long *out)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp (table[i].name, name) == 0)
      {
        *out = table[i].value;
        return 0;
      }
  return -1;
}

/* ------------------------------------------------------------------ */
/* Parse context: the file name and the path of the field being read,  */
/* so that any error can say exactly where it is.                       */

static int
ctx_failv (struct parse_ctx *ctx, int errnum, const char *fmt, va_list ap)
{
  cleanup_free char *what = NULL;

  if (vasprintf (&what, fmt, ap) < 0)
    abort ();
  if (ctx->path_len == 0)
    return husk_error_make (ctx->err, errnum, "%s: %s", ctx->file, what);
  return husk_error_make (ctx->err, errnum, "%s: %s: %s", ctx->file, ctx->path, what);
}

int __attribute__ ((format (printf, 2, 3))) ctx_fail (struct parse_ctx *ctx, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  ctx_failv (ctx, 0, fmt, ap);
  va_end (ap);
  return -1;
}

int __attribute__ ((format (printf, 3, 4)))
ctx_fail_errno (struct parse_ctx *ctx, int errnum, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  ctx_failv (ctx, errnum, fmt, ap);
  va_end (ap);
  return -1;
}

void __attribute__ ((format (printf, 2, 3))) ctx_warn (struct parse_ctx *ctx, const char *fmt, ...)
{
  cleanup_free char *what = NULL;
  va_list ap;

  va_start (ap, fmt);
  if (vasprintf (&what, fmt, ap) < 0)
    abort ();
  va_end (ap);
  husk_warn ("%s: %s: %s", ctx->file, ctx->path, what);
}

static size_t __attribute__ ((format (printf, 2, 3)))
path_append (struct parse_ctx *ctx, const char *fmt, ...)
{
  size_t mark = ctx->path_len;
  size_t room = sizeof ctx->path - mark;
  va_list ap;
  int n;

  va_start (ap, fmt);
  n = vsnprintf (ctx->path + mark, room, fmt, ap);
  va_end (ap);
  if (n < 0)
    n = 0;
  ctx->path_len = (size_t) n < room ? mark + (size_t) n : sizeof ctx->path - 1;
  return mark;
}

size_t
path_push_key (struct parse_ctx *ctx, const char *key)
{
  return path_append (ctx, ctx->path_len ? ".%s" : "%s", key);
}

size_t
path_push_index (struct parse_ctx *ctx, size_t index)
{
  return path_append (ctx, "[%zu]", index);
}

void
path_pop (struct parse_ctx *ctx, size_t mark)
{
  ctx->path_len = mark;
  ctx->path[mark] = '\0';
}

/* ------------------------------------------------------------------ */
/* Typed access to one JSON value (the path already points at it).      */

int
want_string (struct parse_ctx *ctx, json_t *value, const char **out)
{
  *out = "";
  if (!json_is_string (value))
    return ctx_fail (ctx, "must be a string");
  *out = json_string_value (value);
  return 0;
}

int
want_bool (struct parse_ctx *ctx, json_t *value, bool *out)
{
  *out = false;
  if (!json_is_boolean (value))
    return ctx_fail (ctx, "must be true or false");
  *out = json_is_true (value);
  return 0;
}

/* Integers above INT64_MAX make us reload the document with every number
 * as a double (see load_json), so an integral real is an integer too. */
static bool
real_is_integral (json_t *value)
{
  const double two_to_63 = 9223372036854775808.0;
  double d = json_real_value (value);

  if (d != d)
    return false;
  /* Every double this large is a whole number. */
  if (d >= two_to_63 || d <= -two_to_63)
    return true;
  return (double) (long long) d == d;
}

int
want_int (struct parse_ctx *ctx, json_t *value, long long min, long long max, long long *out)
{
  long long v;

  if (json_is_integer (value))
    v = json_integer_value (value);
  else if (json_is_real (value) && real_is_integral (value))
    {
      double d = json_real_value (value);
      if (d < (double) min || d > (double) max)
        return ctx_fail (ctx, "%.0f is out of range (%lld to %lld)", d, min, max);
      v = (long long) d;
    }
  else
    return ctx_fail (ctx, "must be an integer");
  if (v < min || v > max)
    return ctx_fail (ctx, "%lld is out of range (%lld to %lld)", v, min, max);
  *out = v;
  return 0;
}

static int
want_uint64 (struct parse_ctx *ctx, json_t *value, uint64_t *out)
{
  const double two_to_64 = 18446744073709551616.0;

  if (json_is_integer (value))
    {
      if (json_integer_value (value) < 0)
        return ctx_fail (ctx, "must not be negative");
      *out = (uint64_t) json_integer_value (value);
      return 0;
    }
  if (!json_is_real (value) || !real_is_integral (value))
    return ctx_fail (ctx, "must be an integer");
  if (json_real_value (value) < 0)
    return ctx_fail (ctx, "must not be negative");
  /* 18446744073709551615 (RLIM_INFINITY) rounds up to exactly 2^64. */
  if (json_real_value (value) > two_to_64)
    return ctx_fail (ctx, "is too large for 64 bits");
  *out = json_real_value (value) == two_to_64 ? UINT64_MAX : (uint64_t) json_real_value (value);
  return 0;
}

int
want_uint32 (struct parse_ctx *ctx, json_t *value, uint32_t *out)
{
  long long v;

  if (want_int (ctx, value, 0, UINT32_MAX, &v) < 0)
    return -1;
  *out = (uint32_t) v;
  return 0;
}

int
want_object (struct parse_ctx *ctx, json_t *value)
{
  return json_is_object (value) ? 0 : ctx_fail (ctx, "must be an object");
}

int
check_absolute (struct parse_ctx *ctx, const char *path)
{
  if (path[0] != '/')
    return ctx_fail (ctx, "must be an absolute path, not \"%s\"", path);
  return 0;
}

/* An array of strings into a NULL-terminated vector owned by *OUT (set
 * before the items are read, so a failure leaves it for the caller to free). */
int
want_strv (struct parse_ctx *ctx, json_t *value, string_check_fn check, char ***out)
{
  size_t i;
  json_t *item;

  if (!json_is_array (value))
    return ctx_fail (ctx, "must be an array of strings");
  husk_strvfreep (out);
  *out = xcalloc (json_array_size (value) + 1, sizeof (char *));
  json_array_foreach (value, i, item)
  {
    size_t mark = path_push_index (ctx, i);
    const char *s;

    if (want_string (ctx, item, &s) < 0 || (check && check (ctx, s) < 0))
      return -1;
    (*out)[i] = xstrdup (s);
    path_pop (ctx, mark);
  }
  return 0;
}

/* An array of objects into a zeroed C array of N elements of ELEM_SIZE,
 * handed to the caller before parsing so that spec_free can clean up a
 * half-parsed one. */
int
want_array_of (struct parse_ctx *ctx, json_t *value, size_t elem_size, void **items, size_t *n_items,
               item_parse_fn parse_item)
{
  size_t i;
  json_t *item;

  if (!json_is_array (value))
    return ctx_fail (ctx, "must be an array");
  *items = xcalloc (json_array_size (value), elem_size);
  *n_items = json_array_size (value);
  json_array_foreach (value, i, item)
  {
    size_t mark = path_push_index (ctx, i);

    if (parse_item (ctx, item, (char *) *items + i * elem_size) < 0)
      return -1;
    path_pop (ctx, mark);
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* Field tables: an object is read by walking a table of its keys.      */

/* Keys that are absent or null are left alone (null is how Go encoders
 * write an unset pointer); unknown keys are ignored for forward
 * compatibility. */
int
parse_fields (struct parse_ctx *ctx, json_t *object, const struct field *fields, size_t n_fields,
              void *target)
{
  if (want_object (ctx, object) < 0)
    return -1;
  for (size_t i = 0; i < n_fields; i++)
    {
      json_t *value = json_object_get (object, fields[i].key);
      size_t mark;

      if ((value == NULL || json_is_null (value)) && !fields[i].required)
        continue;
      mark = path_push_key (ctx, fields[i].key);
      if (value == NULL || json_is_null (value))
        return ctx_fail (ctx, "required field is missing");
      if (fields[i].parse (ctx, value, target, &fields[i]) < 0)
        return -1;
      path_pop (ctx, mark);
    }
  return 0;
}

int
parse_string_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  char **slot = MEMBER_PTR (target, field, char *);
  const char *s;

  if (want_string (ctx, value, &s) < 0)
    return -1;
  free (*slot);
  *slot = xstrdup (s);
  return 0;
}

int
parse_abs_path_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  const char *s;

  if (want_string (ctx, value, &s) < 0 || check_absolute (ctx, s) < 0)
    return -1;
  return parse_string_member (ctx, value, target, field);
}

int
parse_bool_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  return want_bool (ctx, value, MEMBER_PTR (target, field, bool));
}

int
parse_uint32_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  return want_uint32 (ctx, value, MEMBER_PTR (target, field, uint32_t));
}

int
parse_uint64_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  return want_uint64 (ctx, value, MEMBER_PTR (target, field, uint64_t));
}

int
parse_strv_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  return want_strv (ctx, value, NULL, MEMBER_PTR (target, field, char **));
}

int
parse_abs_path_list_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field)
{
  return want_strv (ctx, value, check_absolute, MEMBER_PTR (target, field, char **));
}

/* Lexical cleaning of an absolute path: no "//", ".", ".." or trailing
 * "/" (".." at the root stays at the root, as the kernel does). */
char *
path_clean (const char *path)
{
  char *out = xmalloc (strlen (path) + 2);
  size_t len = 1;
  const char *p = path;

  out[0] = '/';
  while (*p)
    {
      const char *end;
      size_t n;

      while (*p == '/')
        p++;
      end = strchrnul (p, '/');
      n = (size_t) (end - p);
      if (n == 2 && p[0] == '.' && p[1] == '.')
        {
          while (len > 1 && out[len - 1] != '/')
            len--;
          if (len > 1)
            len--;
        }
      else if (n > 0 && !(n == 1 && p[0] == '.'))
        {
          if (len > 1)
            out[len++] = '/';
          memcpy (out + len, p, n);
          len += n;
        }
      p = end;
    }
  out[len] = '\0';
  return out;
}

/* A uidMappings or gidMappings item, read by linux (spec_linux.c) and
 * by mounts (spec_mounts.c). */
static const struct field id_mapping_fields[] = {
  REQUIRED_MEMBER ("containerID", parse_uint32_member, struct spec_id_mapping, container_id),
  REQUIRED_MEMBER ("hostID", parse_uint32_member, struct spec_id_mapping, host_id),
  REQUIRED_MEMBER ("size", parse_uint32_member, struct spec_id_mapping, size),
};

int
parse_id_mapping_item (struct parse_ctx *ctx, json_t *item, void *elem)
{
  return parse_fields (ctx, item, id_mapping_fields, N_ELEMENTS (id_mapping_fields), elem);
}
