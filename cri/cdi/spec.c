/* Reading one CDI spec: YAML (libyaml) is turned into the same jansson
 * tree as JSON, then the tree is checked against the CDI schema: known
 * fields only, the right types, a supported cdiVersion, a valid kind and
 * valid device names.  Every error names the field and the file. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "cri/cdi/cdi.h"
#include "husk/cleanup.h"

/* A YAML document nested deeper than this, or expanding (through aliases)
 * to more nodes than this, is refused rather than walked. */
#define YAML_MAX_DEPTH 64
#define YAML_MAX_NODES 200000

static int
is_letter (char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int
is_alnum (char c)
{
  return is_letter (c) || (c >= '0' && c <= '9');
}

/* NAME is WHAT ("vendor", "class", "device name"): FIRST_LETTER says
 * whether it must begin with a letter (else a letter or digit), EXTRA the
 * punctuation allowed between; it must end with a letter or digit. */
static int
check_part (const char *name, size_t len, const char *what, int first_letter, const char *extra,
            const char *whole, struct husk_error **err)
{
  if (len == 0)
    return husk_error_kind (err, EINVAL, "CDI device name %s: empty %s", whole, what);
  if (first_letter ? !is_letter (name[0]) : !is_alnum (name[0]))
    return husk_error_kind (err, EINVAL, "CDI device name %s: %s %.*s must begin with a letter%s", whole,
                            what, (int) len, name, first_letter ? "" : " or digit");
  if (!is_alnum (name[len - 1]))
    return husk_error_kind (err, EINVAL, "CDI device name %s: %s %.*s must end with a letter or digit", whole,
                            what, (int) len, name);
  for (size_t i = 0; i < len; i++)
    if (!is_alnum (name[i]) && (name[i] == '\0' || !strchr (extra, name[i])))
      return husk_error_kind (err, EINVAL, "CDI device name %s: %s %.*s has an invalid character '%c'", whole,
                              what, (int) len, name, name[i]);
  return 0;
}

/* KIND "vendor/class" checked; WHOLE is what errors quote. */
static int
check_kind (const char *kind, size_t len, const char *whole, struct husk_error **err)
{
  const char *slash = memchr (kind, '/', len);
  if (slash == NULL)
    return husk_error_kind (err, EINVAL, "CDI device name %s: kind %.*s is not vendor/class", whole,
                            (int) len, kind);
  size_t class_len = len - (slash + 1 - kind);
  if (slash - kind > 253 || class_len > 63)
    return husk_error_kind (err, EINVAL,
                            "CDI device name %s: kind %.*s too long (vendor 253, class 63 at most)", whole,
                            (int) len, kind);
  if (check_part (kind, slash - kind, "vendor", 1, "-_.", whole, err) < 0)
    return -1;
  return check_part (slash + 1, len - (slash + 1 - kind), "class", 1, "-_", whole, err);
}

int
cdi_parse_name (const char *name, char **kind, char **device, struct husk_error **err)
{
  const char *eq = strchr (name, '=');
  if (eq == NULL)
    return husk_error_kind (err, EINVAL, "CDI device name %s: not vendor/class=name", name);
  if (check_kind (name, eq - name, name, err) < 0)
    return -1;
  if (check_part (eq + 1, strlen (eq + 1), "device", 0, "-_.:", name, err) < 0)
    return -1;
  if (kind)
    *kind = strndup (name, eq - name);
  if (device)
    *device = strdup (eq + 1);
  return 0;
}

/* ---- YAML to jansson ---- */

struct yaml_walk
{
  yaml_document_t *doc;
  size_t nodes;
};

/* A plain (unquoted) scalar as YAML 1.1 core types read it. */
static json_t *
yaml_plain_scalar (const char *s)
{
  if (*s == '\0' || !strcmp (s, "~") || !strcmp (s, "null") || !strcmp (s, "Null") || !strcmp (s, "NULL"))
    return json_null ();
  if (!strcmp (s, "true") || !strcmp (s, "True") || !strcmp (s, "TRUE"))
    return json_true ();
  if (!strcmp (s, "false") || !strcmp (s, "False") || !strcmp (s, "FALSE"))
    return json_false ();
  int negative = *s == '-';
  const char *digits = (*s == '-' || *s == '+') ? s + 1 : s;
  int base = 10;
  if (digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X'))
    base = 16, digits += 2;
  else if (digits[0] == '0' && digits[1] == 'o')
    base = 8, digits += 2;
  else if (digits[0] == '0' && digits[1] != '\0')
    base = 8;
  if (isxdigit ((unsigned char) *digits))
    {
      char *end;
      errno = 0;
      long long v = strtoll (digits, &end, base);
      if (errno == 0 && *end == '\0')
        return json_integer (negative ? -v : v);
      errno = 0;
      double d = strtod (s, &end);
      if (errno == 0 && *end == '\0' && isdigit ((unsigned char) *digits))
        return json_real (d);
    }
  return json_string (s);
}

static json_t *yaml_node_to_json (struct yaml_walk *w, yaml_node_t *node, int depth, const char *file,
                                  struct husk_error **err);

static json_t *
yaml_mapping_to_json (struct yaml_walk *w, yaml_node_t *node, int depth, const char *file,
                      struct husk_error **err)
{
  json_t *obj = json_object ();
  for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top; p++)
    {
      yaml_node_t *key = yaml_document_get_node (w->doc, p->key);
      yaml_node_t *val = yaml_document_get_node (w->doc, p->value);
      if (key == NULL || val == NULL || key->type != YAML_SCALAR_NODE)
        {
          json_decref (obj);
          husk_error_kind (err, EINVAL, "CDI spec %s: line %zu: a mapping key is not a string", file,
                           (key ? key->start_mark.line : node->start_mark.line) + 1);
          return NULL;
        }
      if (json_object_get (obj, (const char *) key->data.scalar.value))
        {
          husk_error_kind (err, EINVAL, "CDI spec %s: line %zu: duplicate key %s", file,
                           key->start_mark.line + 1, (const char *) key->data.scalar.value);
          json_decref (obj);
          return NULL;
        }
      json_t *v = yaml_node_to_json (w, val, depth + 1, file, err);
      if (v == NULL || json_object_set_new (obj, (const char *) key->data.scalar.value, v) < 0)
        {
          if (v != NULL)
            husk_error_kind (err, EINVAL, "CDI spec %s: line %zu: key is not valid UTF-8", file,
                             key->start_mark.line + 1);
          json_decref (obj);
          return NULL;
        }
    }
  return obj;
}

static json_t *
yaml_node_to_json (struct yaml_walk *w, yaml_node_t *node, int depth, const char *file,
                   struct husk_error **err)
{
  if (depth > YAML_MAX_DEPTH || ++w->nodes > YAML_MAX_NODES)
    {
      husk_error_kind (err, EINVAL, "CDI spec %s: line %zu: document nested too deep or too large", file,
                       node->start_mark.line + 1);
      return NULL;
    }
  switch (node->type)
    {
    case YAML_SCALAR_NODE:
      {
        const char *s = (const char *) node->data.scalar.value;
        json_t *v
            = node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? yaml_plain_scalar (s) : json_string (s);
        if (v == NULL)
          husk_error_kind (err, EINVAL, "CDI spec %s: line %zu: a string is not valid UTF-8", file,
                           node->start_mark.line + 1);
        return v;
      }
    case YAML_SEQUENCE_NODE:
      {
        json_t *arr = json_array ();
        for (yaml_node_item_t *i = node->data.sequence.items.start; i < node->data.sequence.items.top; i++)
          {
            yaml_node_t *item = yaml_document_get_node (w->doc, *i);
            json_t *v = item ? yaml_node_to_json (w, item, depth + 1, file, err) : NULL;
            if (v == NULL)
              {
                if (item == NULL)
                  husk_error_kind (err, EINVAL, "CDI spec %s: a broken sequence", file);
                json_decref (arr);
                return NULL;
              }
            json_array_append_new (arr, v);
          }
        return arr;
      }
    case YAML_MAPPING_NODE:
      return yaml_mapping_to_json (w, node, depth, file, err);
    default:
      husk_error_kind (err, EINVAL, "CDI spec %s: an empty YAML node", file);
      return NULL;
    }
}

static json_t *
yaml_to_json (const char *text, size_t len, const char *file, struct husk_error **err)
{
  yaml_parser_t parser;
  yaml_document_t doc;
  if (!yaml_parser_initialize (&parser))
    {
      husk_error_make (err, ENOMEM, "CDI spec %s: start the YAML parser", file);
      return NULL;
    }
  yaml_parser_set_input_string (&parser, (const unsigned char *) text, len);
  if (!yaml_parser_load (&parser, &doc))
    {
      husk_error_kind (err, EINVAL, "CDI spec %s: line %zu: %s", file, parser.problem_mark.line + 1,
                       parser.problem ? parser.problem : "invalid YAML");
      yaml_parser_delete (&parser);
      return NULL;
    }
  json_t *out = NULL;
  yaml_node_t *root = yaml_document_get_root_node (&doc);
  if (root == NULL)
    husk_error_kind (err, EINVAL, "CDI spec %s: empty document", file);
  else
    {
      struct yaml_walk w = { .doc = &doc };
      out = yaml_node_to_json (&w, root, 0, file, err);
    }
  yaml_document_delete (&doc);
  yaml_parser_delete (&parser);
  return out;
}

/* ---- the schema ---- */

enum field_type
{
  F_STRING,
  F_INT,
  F_UINT,
  F_BOOL,
  F_STRINGS, /* array of strings */
  F_UINTS,   /* array of non-negative integers */
  F_ANNOT,   /* object of string values */
  F_EDITS,   /* containerEdits */
  F_NODES,   /* array of deviceNode */
  F_MOUNTS,  /* array of mount */
  F_HOOKS,   /* array of hook */
  F_RDT,     /* intelRdt */
  F_DEVICES, /* array of device */
};

struct field
{
  const char *name;
  enum field_type type;
  int required;
};

#define END_FIELDS                                                                                           \
  {                                                                                                          \
    NULL, 0, 0                                                                                               \
  }

static const struct field spec_fields[] = {
  { "cdiVersion", F_STRING, 1 }, { "kind", F_STRING, 1 },          { "annotations", F_ANNOT, 0 },
  { "devices", F_DEVICES, 1 },   { "containerEdits", F_EDITS, 0 }, END_FIELDS,
};
static const struct field device_fields[] = {
  { "name", F_STRING, 1 },
  { "annotations", F_ANNOT, 0 },
  { "containerEdits", F_EDITS, 1 },
  END_FIELDS,
};
static const struct field edits_fields[] = {
  { "env", F_STRINGS, 0 },
  { "deviceNodes", F_NODES, 0 },
  { "hooks", F_HOOKS, 0 },
  { "mounts", F_MOUNTS, 0 },
  { "intelRdt", F_RDT, 0 },
  { "additionalGids", F_UINTS, 0 },
  END_FIELDS,
};
static const struct field node_fields[] = {
  { "path", F_STRING, 1 },        { "hostPath", F_STRING, 0 },
  { "type", F_STRING, 0 },        { "major", F_INT, 0 },
  { "minor", F_INT, 0 },          { "fileMode", F_UINT, 0 },
  { "permissions", F_STRING, 0 }, { "uid", F_UINT, 0 },
  { "gid", F_UINT, 0 },           END_FIELDS,
};
static const struct field mount_fields[] = {
  { "hostPath", F_STRING, 1 },
  { "containerPath", F_STRING, 1 },
  { "options", F_STRINGS, 0 },
  { "type", F_STRING, 0 },
  END_FIELDS,
};
static const struct field hook_fields[] = {
  { "hookName", F_STRING, 1 }, { "path", F_STRING, 1 }, { "args", F_STRINGS, 0 },
  { "env", F_STRINGS, 0 },     { "timeout", F_INT, 0 }, END_FIELDS,
};
static const struct field rdt_fields[] = {
  { "closID", F_STRING, 0 },
  { "l3CacheSchema", F_STRING, 0 },
  { "memBwSchema", F_STRING, 0 },
  { "schemata", F_STRINGS, 0 },
  { "enableCMT", F_BOOL, 0 },
  { "enableMBM", F_BOOL, 0 },
  END_FIELDS,
};

static int check_object (json_t *obj, const struct field *fields, const char *where, const char *file,
                         struct husk_error **err);

static int
check_array_of (json_t *v, const struct field *fields, const char *where, const char *file,
                struct husk_error **err)
{
  size_t i;
  json_t *item;
  json_array_foreach (v, i, item)
  {
    cleanup_free char *at = NULL;
    if (asprintf (&at, "%s[%zu]", where, i) < 0)
      return husk_error_make (err, ENOMEM, "CDI spec %s", file);
    if (check_object (item, fields, at, file, err) < 0)
      return -1;
  }
  return 0;
}

static int
check_strings (json_t *v, int want_uint, const char *where, const char *file, struct husk_error **err)
{
  size_t i;
  json_t *item;
  json_array_foreach (v, i, item)
  {
    int ok = want_uint ? json_is_integer (item) && json_integer_value (item) >= 0
                             && json_integer_value (item) <= 0xffffffffLL
                       : json_is_string (item);
    if (!ok)
      return husk_error_kind (err, EINVAL, "CDI spec %s: %s[%zu] is not %s", file, where, i,
                              want_uint ? "a non-negative integer" : "a string");
  }
  return 0;
}

static int
type_ok (json_t *v, enum field_type type)
{
  switch (type)
    {
    case F_STRING:
      return json_is_string (v);
    case F_INT:
      return json_is_integer (v);
    case F_UINT:
      return json_is_integer (v) && json_integer_value (v) >= 0 && json_integer_value (v) <= 0xffffffffLL;
    case F_BOOL:
      return json_is_boolean (v);
    case F_ANNOT:
    case F_EDITS:
    case F_RDT:
      return json_is_object (v);
    default:
      return json_is_array (v);
    }
}

static int
check_annotations (json_t *v, const char *where, const char *file, struct husk_error **err)
{
  const char *key;
  json_t *val;
  json_object_foreach (v, key, val)
  {
    if (!json_is_string (val))
      return husk_error_kind (err, EINVAL, "CDI spec %s: %s.%s is not a string", file, where, key);
  }
  return 0;
}

static int
check_value (json_t *v, enum field_type type, const char *where, const char *file, struct husk_error **err)
{
  static const char *const type_names[] = {
    [F_STRING] = "a string", [F_INT] = "an integer",  [F_UINT] = "a non-negative integer",
    [F_BOOL] = "a boolean",  [F_STRINGS] = "a list",  [F_UINTS] = "a list",
    [F_ANNOT] = "a mapping", [F_EDITS] = "a mapping", [F_NODES] = "a list",
    [F_MOUNTS] = "a list",   [F_HOOKS] = "a list",    [F_RDT] = "a mapping",
    [F_DEVICES] = "a list",
  };
  if (!type_ok (v, type))
    return husk_error_kind (err, EINVAL, "CDI spec %s: %s is not %s", file, where, type_names[type]);
  switch (type)
    {
    case F_STRINGS:
      return check_strings (v, 0, where, file, err);
    case F_UINTS:
      return check_strings (v, 1, where, file, err);
    case F_EDITS:
      return check_object (v, edits_fields, where, file, err);
    case F_RDT:
      return check_object (v, rdt_fields, where, file, err);
    case F_NODES:
      return check_array_of (v, node_fields, where, file, err);
    case F_MOUNTS:
      return check_array_of (v, mount_fields, where, file, err);
    case F_HOOKS:
      return check_array_of (v, hook_fields, where, file, err);
    case F_DEVICES:
      return check_array_of (v, device_fields, where, file, err);
    case F_ANNOT:
      return check_annotations (v, where, file, err);
    default:
      return 0;
    }
}

static int
check_object (json_t *obj, const struct field *fields, const char *where, const char *file,
              struct husk_error **err)
{
  if (!json_is_object (obj))
    return husk_error_kind (err, EINVAL, "CDI spec %s: %s is not a mapping", file, where);
  const char *key;
  json_t *val;
  json_object_foreach (obj, key, val)
  {
    const struct field *f = fields;
    while (f->name && strcmp (f->name, key) != 0)
      f++;
    if (f->name == NULL)
      return husk_error_kind (err, EINVAL, "CDI spec %s: unknown field %s%s%s", file, where,
                              *where ? "." : "", key);
    cleanup_free char *at = NULL;
    if (asprintf (&at, "%s%s%s", where, *where ? "." : "", key) < 0)
      return husk_error_make (err, ENOMEM, "CDI spec %s", file);
    if (check_value (val, f->type, at, file, err) < 0)
      return -1;
  }
  for (const struct field *f = fields; f->name; f++)
    if (f->required && json_object_get (obj, f->name) == NULL)
      return husk_error_kind (err, EINVAL, "CDI spec %s: %s%s%s is missing", file, where, *where ? "." : "",
                              f->name);
  return 0;
}

/* cdiVersion 0.3.0 up to any 1.0.x. */
static int
check_version (const char *version, const char *file, struct husk_error **err)
{
  unsigned major, minor, patch;
  char tail;
  if (sscanf (version, "%u.%u.%u%c", &major, &minor, &patch, &tail) != 3
      || !((major == 0 && minor >= 3) || (major == 1 && minor == 0)))
    return husk_error_kind (err, EINVAL, "CDI spec %s: cdiVersion %s is not supported (0.3.0 to 1.0.x)", file,
                            version);
  return 0;
}

static int
check_names (json_t *spec, const char *file, struct husk_error **err)
{
  const char *kind = json_string_value (json_object_get (spec, "kind"));
  cleanup_free char *kind_where = NULL;
  if (asprintf (&kind_where, "%s=<device>", kind) < 0)
    return husk_error_make (err, ENOMEM, "CDI spec %s", file);
  if (check_kind (kind, strlen (kind), kind_where, err) < 0)
    return husk_error_wrap (err, "CDI spec %s: kind", file);
  size_t i;
  json_t *dev;
  json_array_foreach (json_object_get (spec, "devices"), i, dev)
  {
    const char *name = json_string_value (json_object_get (dev, "name"));
    if (check_part (name, strlen (name), "device", 0, "-_.:", name, err) < 0)
      return husk_error_wrap (err, "CDI spec %s: devices[%zu]", file, i);
  }
  return 0;
}

/* What the schema cannot say: env entries are KEY=VALUE, hook names and
 * node types and permissions come from fixed sets, container paths are
 * absolute.  WHERE names the containerEdits in errors. */
static int
check_edits_values (json_t *edits, const char *where, const char *file, struct husk_error **err)
{
  static const char *const hooks[]
      = { "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop", NULL };
  size_t i;
  json_t *v;
  json_array_foreach (json_object_get (edits, "env"), i, v)
  {
    const char *kv = json_string_value (v);
    if (kv[0] == '=' || !strchr (kv, '='))
      return husk_error_kind (err, EINVAL, "CDI spec %s: %s.env[%zu] %s is not KEY=VALUE", file, where, i,
                              kv);
  }
  json_array_foreach (json_object_get (edits, "hooks"), i, v)
  {
    const char *name = json_string_value (json_object_get (v, "hookName"));
    size_t k = 0;
    while (hooks[k] && strcmp (hooks[k], name))
      k++;
    if (!hooks[k])
      return husk_error_kind (err, EINVAL, "CDI spec %s: %s.hooks[%zu].hookName %s is unknown", file, where,
                              i, name);
  }
  json_array_foreach (json_object_get (edits, "deviceNodes"), i, v)
  {
    const char *type = json_string_value (json_object_get (v, "type"));
    const char *perm = json_string_value (json_object_get (v, "permissions"));
    const char *path = json_string_value (json_object_get (v, "path"));
    if (type && strcmp (type, "b") && strcmp (type, "c") && strcmp (type, "u") && strcmp (type, "p"))
      return husk_error_kind (err, EINVAL, "CDI spec %s: %s.deviceNodes[%zu].type %s is not b, c, u or p",
                              file, where, i, type);
    if (perm && perm[strspn (perm, "rwm")])
      return husk_error_kind (err, EINVAL,
                              "CDI spec %s: %s.deviceNodes[%zu].permissions %s is not of r, w, m", file,
                              where, i, perm);
    if (path[0] == '\0')
      return husk_error_kind (err, EINVAL, "CDI spec %s: %s.deviceNodes[%zu].path is empty", file, where, i);
  }
  json_array_foreach (json_object_get (edits, "mounts"), i, v)
  {
    const char *dest = json_string_value (json_object_get (v, "containerPath"));
    if (dest[0] != '/')
      return husk_error_kind (err, EINVAL, "CDI spec %s: %s.mounts[%zu].containerPath %s is not absolute",
                              file, where, i, dest);
  }
  return 0;
}

static int
check_all_edits (json_t *spec, const char *file, struct husk_error **err)
{
  json_t *edits = json_object_get (spec, "containerEdits");
  if (edits && check_edits_values (edits, "containerEdits", file, err) < 0)
    return -1;
  size_t i;
  json_t *dev;
  json_array_foreach (json_object_get (spec, "devices"), i, dev)
  {
    char where[64];
    snprintf (where, sizeof where, "devices[%zu].containerEdits", i);
    if (check_edits_values (json_object_get (dev, "containerEdits"), where, file, err) < 0)
      return -1;
  }
  return 0;
}

json_t *
cdi_spec_parse (const char *text, size_t len, int is_yaml, const char *file, struct husk_error **err)
{
  json_t *spec;
  if (is_yaml)
    spec = yaml_to_json (text, len, file, err);
  else
    {
      json_error_t jerr;
      spec = json_loadb (text, len, JSON_REJECT_DUPLICATES, &jerr);
      if (spec == NULL)
        husk_error_kind (err, EINVAL, "CDI spec %s: line %d: %s", file, jerr.line, jerr.text);
    }
  if (spec == NULL)
    return NULL;
  if (check_object (spec, spec_fields, "", file, err) < 0
      || check_version (json_string_value (json_object_get (spec, "cdiVersion")), file, err) < 0
      || check_names (spec, file, err) < 0 || check_all_edits (spec, file, err) < 0)
    {
      json_decref (spec);
      return NULL;
    }
  return spec;
}
