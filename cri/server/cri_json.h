/* A protobuf-c message as JSON, the way a Go CRI runtime marshals the
 * generated structs (containerd's verbose ContainerStatus "config"): the
 * .proto field names, zero values and empty lists left out, enums as
 * numbers, maps (repeated *Entry {key, value}) as objects with the last
 * key winning, 64-bit integers as numbers, bytes as base64. */
#ifndef HUSK_CRI_CRI_JSON_H
#define HUSK_CRI_CRI_JSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

/* A new object; never NULL for a non-NULL MSG (NULL gives json null). */
json_t *cri_message_json (const ProtobufCMessage *msg);

#endif
