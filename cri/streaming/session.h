/* Inside the streaming server: one upgraded SPDY connection, run to its
 * end on the connection's thread (session.c). */
#ifndef HUSK_CRI_STREAMING_SESSION_H
#define HUSK_CRI_STREAMING_SESSION_H

#include "cri/streaming/server.h"

/* The channel protocol the handshake chose. */
enum streaming_protocol
{
  PROTO_V1 = 1, /* channel.k8s.io */
  PROTO_V2,
  PROTO_V3, /* + resize */
  PROTO_V4, /* + the error stream's JSON status */
  PROTO_V5, /* WebSocket only: + closing a channel (stdin) */
  PROTO_PORTFORWARD,
};

struct streaming_session_args
{
  int fd;      /* the upgraded connection; closed by session_run */
  int stop_fd; /* readable when the server stops */
  enum streaming_protocol protocol;
  bool websocket; /* WebSocket channel frames instead of SPDY */
  const struct streaming_request *req;
  const struct streaming_callbacks *cb;
  int64_t stream_wait_ms;
};

void streaming_session_run (const struct streaming_session_args *args);

/* The status the error stream carries for EXIT_CODE or, when MESSAGE is
 * not NULL, a failure (malloc'd, JSON for v4 and plain text before). */
char *streaming_exit_status (enum streaming_protocol protocol, int exit_code, const char *message);

#endif
