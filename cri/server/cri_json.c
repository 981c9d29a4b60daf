/* protobuf-c messages as JSON (see cri_json.h). */
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cri/server/cri_json.h"
#include "cri/spec/proto_copy.h"
#include "husk/util.h"

/* Where field F of MSG is stored, and how many values it holds (a
 * repeated field: its count; a singular one: 1 when it is set). */
static const void *
field_ptr (const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f)
{
  return (const char *) msg + f->offset;
}

static size_t
field_count (const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f)
{
  return *(const size_t *) ((const char *) msg + f->quantifier_offset);
}

static json_t *
bytes_json (const ProtobufCBinaryData *data)
{
  size_t cap = 4 * ((data->len + 2) / 3) + 1;
  char *text = xmalloc (cap);
  json_t *value;

  EVP_EncodeBlock ((unsigned char *) text, data->data, (int) data->len);
  value = json_string (text);
  free (text);
  return value;
}

/* One value of type F at P; NULL when it is the zero value (left out). */
static json_t *
value_json (const ProtobufCFieldDescriptor *f, const void *p, bool keep_zero)
{
  switch (f->type)
    {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM:
      return keep_zero || *(const int32_t *) p ? json_integer (*(const int32_t *) p) : NULL;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
      return keep_zero || *(const uint32_t *) p ? json_integer (*(const uint32_t *) p) : NULL;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
      return keep_zero || *(const int64_t *) p ? json_integer (*(const int64_t *) p) : NULL;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
      return keep_zero || *(const uint64_t *) p ? json_integer ((json_int_t) * (const uint64_t *) p) : NULL;
    case PROTOBUF_C_TYPE_FLOAT:
      return keep_zero || *(const float *) p ? json_real (*(const float *) p) : NULL;
    case PROTOBUF_C_TYPE_DOUBLE:
      return keep_zero || *(const double *) p ? json_real (*(const double *) p) : NULL;
    case PROTOBUF_C_TYPE_BOOL:
      return keep_zero || *(const protobuf_c_boolean *) p ? json_boolean (*(const protobuf_c_boolean *) p)
                                                          : NULL;
    case PROTOBUF_C_TYPE_STRING:
      {
        const char *s = *(char *const *) p;
        return s && (keep_zero || *s) ? json_string (s) : NULL;
      }
    case PROTOBUF_C_TYPE_BYTES:
      {
        const ProtobufCBinaryData *b = p;
        return keep_zero || b->len ? bytes_json (b) : NULL;
      }
    case PROTOBUF_C_TYPE_MESSAGE:
      {
        const ProtobufCMessage *m = *(ProtobufCMessage *const *) p;
        return m ? cri_message_json (m) : NULL;
      }
    }
  return NULL;
}

/* protobuf-c's map entries: a message named *Entry of key = 1, value = 2. */
static bool
is_map_entry (const ProtobufCFieldDescriptor *f)
{
  const ProtobufCMessageDescriptor *d = f->descriptor;
  size_t len;

  if (f->type != PROTOBUF_C_TYPE_MESSAGE || d->n_fields != 2)
    return false;
  len = strlen (d->name);
  return len > 5 && strcmp (d->name + len - 5, "Entry") == 0 && strcmp (d->fields[0].name, "key") == 0
         && strcmp (d->fields[1].name, "value") == 0;
}

static json_t *
map_json (const ProtobufCFieldDescriptor *f, ProtobufCMessage *const *entries, size_t n)
{
  json_t *obj = json_object ();

  for (size_t i = 0; i < n; i++)
    {
      const ProtobufCMessageDescriptor *d = entries[i]->descriptor;
      json_t *key = value_json (&d->fields[0], field_ptr (entries[i], &d->fields[0]), true);
      json_t *value = value_json (&d->fields[1], field_ptr (entries[i], &d->fields[1]), true);
      char *key_text
          = json_is_string (key) ? xstrdup (json_string_value (key)) : json_dumps (key, JSON_ENCODE_ANY);

      json_object_set_new (obj, key_text ? key_text : "", value ? value : json_null ());
      free (key_text);
      json_decref (key);
    }
  (void) f;
  return obj;
}

static json_t *
repeated_json (const ProtobufCFieldDescriptor *f, const void *p, size_t n)
{
  const char *values = *(const char *const *) p;
  json_t *list;

  if (n == 0)
    return NULL;
  if (is_map_entry (f))
    return map_json (f, (ProtobufCMessage *const *) values, n);
  list = json_array ();
  for (size_t i = 0; i < n; i++)
    {
      json_t *v = value_json (f, values + i * cri_proto_element_size (f), true);
      json_array_append_new (list, v ? v : json_null ());
    }
  return list;
}

json_t *
cri_message_json (const ProtobufCMessage *msg)
{
  const ProtobufCMessageDescriptor *d;
  json_t *obj;

  if (msg == NULL)
    return json_null ();
  d = msg->descriptor;
  obj = json_object ();
  for (unsigned i = 0; i < d->n_fields; i++)
    {
      const ProtobufCFieldDescriptor *f = &d->fields[i];
      const void *p = field_ptr (msg, f);
      json_t *v;

      if (f->label == PROTOBUF_C_LABEL_REPEATED)
        v = repeated_json (f, p, field_count (msg, f));
      else if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        v = *(const uint32_t *) ((const char *) msg + f->quantifier_offset) == f->id ? value_json (f, p, true)
                                                                                     : NULL;
      else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset
               && !*(const protobuf_c_boolean *) ((const char *) msg + f->quantifier_offset)
               && f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING)
        v = NULL;
      else
        v = value_json (f, p, false);
      if (v)
        json_object_set_new (obj, f->name, v);
    }
  return obj;
}
