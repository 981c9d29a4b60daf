/* The replies every handler sends: a request unpacked or refused, a reply
 * packed, a husk error turned into a grpc status, label selectors; the
 * floor of cri/server/ under the handlers and the method table. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cri/server/reply.h"
#include "husk/cleanup.h"
#include "husk/util.h"

/* A singular string field of MSG by name, or NULL when absent or "". */
static const char *
string_field (const ProtobufCMessage *msg, const char *name)
{
  const ProtobufCFieldDescriptor *field
      = protobuf_c_message_descriptor_get_field_by_name (msg->descriptor, name);
  const char *value;

  if (field == NULL || field->type != PROTOBUF_C_TYPE_STRING || field->label == PROTOBUF_C_LABEL_REPEATED)
    return NULL;
  value = *(const char *const *) ((const char *) msg + field->offset);
  return value && *value ? value : NULL;
}

static const ProtobufCMessage *
message_field (const ProtobufCMessage *msg, const char *name)
{
  const ProtobufCFieldDescriptor *field
      = protobuf_c_message_descriptor_get_field_by_name (msg->descriptor, name);

  if (field == NULL || field->type != PROTOBUF_C_TYPE_MESSAGE || field->label == PROTOBUF_C_LABEL_REPEATED)
    return NULL;
  return *(const ProtobufCMessage *const *) ((const char *) msg + field->offset);
}

/* What a request or reply names, for the call's log line: the ids, the
 * image, and the pod or container name a Run/Create asks for. */
static void
log_names (struct rpc_call *call, const ProtobufCMessage *msg)
{
  static const char *const id_fields[] = { "pod_sandbox_id", "container_id", "image_ref" };
  const ProtobufCMessage *image = message_field (msg, "image");
  const ProtobufCMessage *config = message_field (msg, "config");
  const ProtobufCMessage *metadata = config ? message_field (config, "metadata") : NULL;
  const char *value;

  for (size_t i = 0; i < sizeof id_fields / sizeof id_fields[0]; i++)
    if ((value = string_field (msg, id_fields[i])) != NULL)
      rpc_call_log_field (call, id_fields[i], value);
  if (image && (value = string_field (image, "image")) != NULL)
    rpc_call_log_field (call, "image", value);
  if (metadata && (value = string_field (metadata, "name")) != NULL)
    rpc_call_log_field (call, "name", value);
  if (metadata && (value = string_field (metadata, "namespace")) != NULL)
    rpc_call_log_field (call, "namespace", value);
}

void
cri_reply (struct rpc_call *call, const ProtobufCMessage *msg)
{
  size_t size = protobuf_c_message_get_packed_size (msg);
  cleanup_free uint8_t *buf = xmalloc (size ? size : 1);

  protobuf_c_message_pack (msg, buf);
  if (husk_log_enabled (HUSK_LOG_DEBUG))
    log_names (call, msg); /* the id a Run or Create made */
  rpc_reply (call, buf, size);
}

/* A varint at *POS of BUF[0..LEN); false when it runs off the end. */
static bool
wire_varint (const uint8_t *buf, size_t len, size_t *pos, uint64_t *value)
{
  *value = 0;
  for (unsigned shift = 0; shift < 64 && *pos < len; shift += 7)
    {
      uint8_t byte = buf[(*pos)++];
      *value |= (uint64_t) (byte & 0x7f) << shift;
      if (!(byte & 0x80))
        return true;
    }
  return false;
}

/* Skips the value of wire type WIRE at *POS; false on a type that has
 * none to skip (groups) or one that runs off the end. */
static bool
wire_skip (const uint8_t *buf, size_t len, size_t *pos, unsigned wire)
{
  uint64_t value;

  if (wire == 0)
    return wire_varint (buf, len, pos, &value);
  if (wire == 1 || wire == 5)
    {
      *pos += wire == 1 ? 8 : 4;
      return *pos <= len;
    }
  return false;
}

/* The first string field of message DESC in wire bytes BUF that holds a
 * NUL byte, as "field.sub_field" in PATH (false when none).  protobuf-c
 * hands strings over NUL-terminated, so a NUL inside one would silently
 * cut it short (a log_path, a mount path) instead of being refused. */
static bool
find_nul_string (const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len, char *path,
                 size_t path_size, int depth)
{
  size_t pos = 0, path_len = strlen (path);
  uint64_t tag, size;

  while (depth < 32 && pos < len && wire_varint (buf, len, &pos, &tag))
    {
      const ProtobufCFieldDescriptor *field;

      if ((tag & 7) != 2)
        {
          if (!wire_skip (buf, len, &pos, (unsigned) (tag & 7)))
            return false;
          continue;
        }
      if (!wire_varint (buf, len, &pos, &size) || size > len - pos)
        return false;
      field = protobuf_c_message_descriptor_get_field (desc, (unsigned) (tag >> 3));
      if (field && (field->type == PROTOBUF_C_TYPE_STRING || field->type == PROTOBUF_C_TYPE_MESSAGE))
        {
          snprintf (path + path_len, path_size - path_len, "%s%s", path_len ? "." : "", field->name);
          if (field->type == PROTOBUF_C_TYPE_STRING
                  ? memchr (buf + pos, '\0', size) != NULL
                  : find_nul_string (field->descriptor, buf + pos, size, path, path_size, depth + 1))
            return true;
          path[path_len] = '\0';
        }
      pos += size;
    }
  return false;
}

void *
cri_unpack (struct rpc_call *call, const ProtobufCMessageDescriptor *desc, const void *req, size_t len)
{
  ProtobufCMessage *msg = protobuf_c_message_unpack (desc, NULL, len, req);
  char field[256] = "";

  if (msg == NULL)
    rpc_fail (call, GRPC_STATUS_INVALID_ARGUMENT, "malformed %s", desc->name);
  else if (find_nul_string (desc, req, len, field, sizeof field, 0))
    {
      rpc_fail (call, GRPC_STATUS_INVALID_ARGUMENT, "%s: holds a NUL byte", field);
      protobuf_c_message_free_unpacked (msg, NULL);
      msg = NULL;
    }
  else
    log_names (call, msg);
  return msg;
}

static const char *
label_value (struct cri_string_entry *const *labels, size_t n, const char *key)
{
  for (size_t i = n; i > 0; i--)
    if (strcmp (labels[i - 1]->key, key) == 0)
      return labels[i - 1]->value;
  return NULL;
}

bool
cri_labels_match (struct cri_string_entry *const *labels, size_t n_labels,
                  struct cri_string_entry *const *selector, size_t n_selector)
{
  for (size_t i = 0; i < n_selector; i++)
    {
      const char *value = label_value (labels, n_labels, selector[i]->key);
      if (value == NULL || strcmp (value, selector[i]->value) != 0)
        return false;
    }
  return true;
}

void
cri_fail (struct rpc_call *call, struct husk_error **err)
{
  rpc_fail (call, cri_status_of (*err), "%s", (*err)->msg);
  husk_error_free (err);
}

grpc_status_code
cri_status_of (const struct husk_error *err)
{
  switch (err ? err->errnum : 0)
    {
    case ENOENT:
      return GRPC_STATUS_NOT_FOUND;
    case EEXIST:
      return GRPC_STATUS_ALREADY_EXISTS;
    case EINVAL:
    case E2BIG: /* a command longer than exec takes */
      return GRPC_STATUS_INVALID_ARGUMENT;
    case EAGAIN:
    case ENONET:
      return GRPC_STATUS_FAILED_PRECONDITION;
    case ENOSYS:
      return GRPC_STATUS_UNIMPLEMENTED;
    default:
      return GRPC_STATUS_UNKNOWN;
    }
}
