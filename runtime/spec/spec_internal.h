/* Private to the config.json parser (runtime/spec*.c): the parse context,
 * the field tables objects are read by, and the helpers and section parsers
 * the parts share.  Nothing outside runtime/spec*.c includes this. */
#ifndef HUSK_RUNTIME_SPEC_INTERNAL_H
#define HUSK_RUNTIME_SPEC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "husk/error.h"
#include "runtime/spec/spec.h"

#define N_ELEMENTS(a) (sizeof (a) / sizeof ((a)[0]))

/* ------------------------------------------------------------------ */
/* Parse context: the file name and the path of the field being read,  */
/* so that any error can say exactly where it is.                       */

struct parse_ctx
{
  const char *file;
  const char *bundle_dir;
  struct husk_error **err;
  size_t path_len;
  char path[512];
};

int parse_id_mapping_item (struct parse_ctx *ctx, json_t *item, void *elem);
int ctx_fail (struct parse_ctx *ctx, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
int ctx_fail_errno (struct parse_ctx *ctx, int errnum, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
void ctx_warn (struct parse_ctx *ctx, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
size_t path_push_key (struct parse_ctx *ctx, const char *key);
size_t path_push_index (struct parse_ctx *ctx, size_t index);
void path_pop (struct parse_ctx *ctx, size_t mark);

/* Typed access to one JSON value (the path already points at it). */
int want_string (struct parse_ctx *ctx, json_t *value, const char **out);
int want_bool (struct parse_ctx *ctx, json_t *value, bool *out);
int want_int (struct parse_ctx *ctx, json_t *value, long long min, long long max, long long *out);
int want_uint32 (struct parse_ctx *ctx, json_t *value, uint32_t *out);
int want_object (struct parse_ctx *ctx, json_t *value);
int check_absolute (struct parse_ctx *ctx, const char *path);

typedef int (*string_check_fn) (struct parse_ctx *ctx, const char *s);
int want_strv (struct parse_ctx *ctx, json_t *value, string_check_fn check, char ***out);

typedef int (*item_parse_fn) (struct parse_ctx *ctx, json_t *item, void *elem);
int want_array_of (struct parse_ctx *ctx, json_t *value, size_t elem_size, void **items, size_t *n_items,
                   item_parse_fn parse_item);

/* ------------------------------------------------------------------ */
/* Field tables: an object is read by walking a table of its keys.      */

struct field
{
  const char *key;
  int (*parse) (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field);
  size_t offset; /* of the member the generic parsers write */
  bool required;
};

#define FIELD(key, fn)                                                                                       \
  {                                                                                                          \
    key, fn, 0, false                                                                                        \
  }
#define REQUIRED(key, fn)                                                                                    \
  {                                                                                                          \
    key, fn, 0, true                                                                                         \
  }
#define MEMBER(key, fn, type, member)                                                                        \
  {                                                                                                          \
    key, fn, offsetof (type, member), false                                                                  \
  }
#define REQUIRED_MEMBER(key, fn, type, member)                                                               \
  {                                                                                                          \
    key, fn, offsetof (type, member), true                                                                   \
  }
#define MEMBER_PTR(target, field, type) ((type *) ((char *) (target) + (field)->offset))

int parse_fields (struct parse_ctx *ctx, json_t *object, const struct field *fields, size_t n_fields,
                  void *target);
int parse_string_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field);
int parse_abs_path_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field);
int parse_bool_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field);
int parse_uint32_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field);
int parse_uint64_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field);
int parse_strv_member (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field);
int parse_abs_path_list_member (struct parse_ctx *ctx, json_t *value, void *target,
                                const struct field *field);

char *path_clean (const char *path);

/* ------------------------------------------------------------------ */
/* Name tables: NAMED (RLIMIT_NOFILE) is { "RLIMIT_NOFILE", RLIMIT_NOFILE }. */

struct named_value
{
  const char *name;
  long value;
};

#define NAMED(v)                                                                                             \
  {                                                                                                          \
#v, v                                                                                                    \
  }

int lookup_name (const struct named_value *table, size_t n, const char *name, long *out);

/* Mount options (spec_mounts.c); linux.rootfsPropagation reads them too. */
enum mount_option_kind
{
  MOUNT_OPT_FLAGS,         /* sets SET, clears CLEAR in mount->flags */
  MOUNT_OPT_BIND,          /* also marks the mount as a bind mount */
  MOUNT_OPT_PROPAGATION,   /* SET goes to mount->propagation */
  MOUNT_OPT_RECURSIVE,     /* SET/CLEAR are MOUNT_ATTR_* for mount_setattr(AT_RECURSIVE) later */
  MOUNT_OPT_IGNORED,       /* known, no effect in husk: warn */
  MOUNT_OPT_UNSUPPORTED,   /* known, cannot be honoured: error */
  MOUNT_OPT_IGNORED_QUIET, /* known, what it asks for happens anyway */
};

struct mount_option
{
  const char *name;
  enum mount_option_kind kind;
  unsigned long set, clear;
};

const struct mount_option *find_mount_option (const char *name);

/* ------------------------------------------------------------------ */
/* The sections, each a member parser of struct spec (spec_<section>.c). */

int parse_process_object (struct parse_ctx *ctx, json_t *value, struct spec_process *process);
int parse_process (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field);
int parse_mounts (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field);
int parse_hooks (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field);
int parse_annotations (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field);
int parse_linux (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field);
int parse_cgroups_path (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field);
int parse_resources (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field);
int parse_seccomp (struct parse_ctx *ctx, json_t *value, void *target, const struct field *field);

#endif
