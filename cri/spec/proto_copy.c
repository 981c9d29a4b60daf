/* A deep copy of a protobuf-c message (proto_copy.h).  It must allocate
 * exactly what protobuf_c_message_free_unpacked frees: the message, each
 * non-default string, bytes' data and submessage, each repeated field's
 * array and the strings, bytes and messages in it, the unknown fields and
 * their data; scalars, enums, has_ flags and oneof cases come with the
 * message's own bytes. */
#include <stdint.h>
#include <string.h>

#include "cri/spec/proto_copy.h"
#include "husk/util.h"

static void *
dup_bytes (const void *data, size_t len)
{
  void *copy = xmalloc (len ? len : 1);

  memcpy (copy, data, len);
  return copy;
}

size_t
cri_proto_element_size (const ProtobufCFieldDescriptor *f)
{
  switch (f->type)
    {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
      return 8;
    case PROTOBUF_C_TYPE_BOOL:
      return sizeof (protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
      return sizeof (void *);
    case PROTOBUF_C_TYPE_BYTES:
      return sizeof (ProtobufCBinaryData);
    default: /* the 32-bit integers, float, enum */
      return 4;
    }
}

/* The element at MEMBER (a field's place, or one of a repeated field's
 * elements) made its own; DEFAULT: the field's default value. */
static void
own_value (const ProtobufCFieldDescriptor *f, void *member, const void *default_value)
{
  switch (f->type)
    {
    case PROTOBUF_C_TYPE_STRING:
      {
        char **s = member;
        if (*s && *s != default_value)
          *s = xstrdup (*s);
        break;
      }
    case PROTOBUF_C_TYPE_BYTES:
      {
        ProtobufCBinaryData *b = member;
        const ProtobufCBinaryData *def = default_value;
        if (b->data && !(def && b->data == def->data))
          b->data = dup_bytes (b->data, b->len);
        break;
      }
    case PROTOBUF_C_TYPE_MESSAGE:
      {
        ProtobufCMessage **m = member;
        if (*m && *m != default_value)
          *m = cri_message_copy (*m);
        break;
      }
    default:
      break;
    }
}

static void
own_repeated (const ProtobufCFieldDescriptor *f, void *member, size_t n)
{
  void **array = member;
  size_t size = cri_proto_element_size (f);

  if (*array == NULL || n == 0)
    {
      *array = NULL;
      return;
    }
  *array = dup_bytes (*array, n * size);
  for (size_t j = 0; j < n; j++)
    own_value (f, (char *) *array + j * size, NULL);
}

ProtobufCMessage *
cri_message_copy (const ProtobufCMessage *msg)
{
  const ProtobufCMessageDescriptor *desc;
  ProtobufCMessage *copy;

  if (msg == NULL)
    return NULL;
  desc = msg->descriptor;
  copy = dup_bytes (msg, desc->sizeof_message);
  for (unsigned i = 0; i < desc->n_fields; i++)
    {
      const ProtobufCFieldDescriptor *f = &desc->fields[i];
      char *member = (char *) copy + f->offset;
      const char *quantifier = (const char *) copy + f->quantifier_offset;

      if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && *(const uint32_t *) quantifier != f->id)
        continue;
      if (f->label == PROTOBUF_C_LABEL_REPEATED)
        own_repeated (f, member, *(const size_t *) quantifier);
      else
        own_value (f, member, f->default_value);
    }
  if (copy->n_unknown_fields == 0 || copy->unknown_fields == NULL)
    {
      copy->n_unknown_fields = 0;
      copy->unknown_fields = NULL;
      return copy;
    }
  copy->unknown_fields = dup_bytes (msg->unknown_fields, msg->n_unknown_fields * sizeof *msg->unknown_fields);
  for (unsigned i = 0; i < copy->n_unknown_fields; i++)
    copy->unknown_fields[i].data = dup_bytes (msg->unknown_fields[i].data, msg->unknown_fields[i].len);
  return copy;
}
