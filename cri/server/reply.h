/* What every handler of cri/server/ replies with (reply.c): unpack a
 * request, pack a reply, fail a call with the grpc status of a husk error,
 * match label selectors.  Knows no handler and no service state. */
#ifndef HUSK_CRI_SERVER_REPLY_H
#define HUSK_CRI_SERVER_REPLY_H

#include <grpc/status.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>

#include "cri/rpc/server.h"
#include "husk/error.h"

/* Packs MSG and replies OK (frees nothing). */
void cri_reply (struct rpc_call *call, const ProtobufCMessage *msg);

/* Unpacks the request of a handler, or fails the call with
 * INVALID_ARGUMENT and returns NULL. */
void *cri_unpack (struct rpc_call *call, const ProtobufCMessageDescriptor *desc, const void *req, size_t len);

/* Every string-to-string map entry protobuf-c generates (labels,
 * annotations, label selectors) has this layout. */
struct cri_string_entry
{
  ProtobufCMessage base;
  char *key;
  char *value;
};

/* True when every SELECTOR entry is in LABELS (for a key given twice in
 * LABELS, the last one counts, as in a map).  Pass the generated entry
 * arrays cast to struct cri_string_entry *const *. */
bool cri_labels_match (struct cri_string_entry *const *labels, size_t n_labels,
                       struct cri_string_entry *const *selector, size_t n_selector);

/* Fails the call with cri_status_of (*ERR) and its message; frees *ERR. */
void cri_fail (struct rpc_call *call, struct husk_error **err);

/* Set and not empty: how kubelet leaves an optional string out. */
static inline bool
cri_nonempty (const char *s)
{
  return s && s[0];
}

/* grpc status for a husk error: ENOENT -> NOT_FOUND, EEXIST ->
 * ALREADY_EXISTS, EINVAL -> INVALID_ARGUMENT, EAGAIN (the object is not
 * in the state the call needs: a pod not ready, a container not running)
 * and ENONET (no CNI network config) -> FAILED_PRECONDITION, otherwise
 * UNKNOWN. */
grpc_status_code cri_status_of (const struct husk_error *err);

#endif
