/* A deep copy of a protobuf-c message, field by field from its descriptor:
 * what a pack and an unpack make, without the encoding and the parse
 * (the stores copy a pod's or a container's config for every lookup, and
 * its labels for every pod at every stats list). */
#ifndef HUSK_CRI_PROTO_COPY_H
#define HUSK_CRI_PROTO_COPY_H

#include <protobuf-c/protobuf-c.h>

/* A copy of MSG that protobuf_c_message_free_unpacked (allocator NULL)
 * frees: every string, bytes, submessage, array and unknown field its
 * own.  Strings and submessages that are their field's default stay the
 * default (shared, never freed); an empty repeated field is NULL.  NULL
 * for NULL; aborts only out of memory. */
ProtobufCMessage *cri_message_copy (const ProtobufCMessage *msg);

/* The size of one element in the array of a repeated field F. */
size_t cri_proto_element_size (const ProtobufCFieldDescriptor *f);

#endif
