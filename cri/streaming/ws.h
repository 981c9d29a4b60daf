/* WebSocket (RFC 6455) framing for the k8s channel protocols: the
 * handshake's accept key, frames parsed from a client (always masked) and
 * frames built by the server (never masked).  A k8s message is one binary
 * message whose first byte is the channel (0 stdin, 1 stdout, 2 stderr,
 * 3 error, 4 resize; v5: 255 closes the channel in its second byte). */
#ifndef HUSK_CRI_STREAMING_WS_H
#define HUSK_CRI_STREAMING_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cri/streaming/spdy.h"
#include "husk/error.h"

enum ws_opcode
{
  WS_CONTINUATION = 0x0,
  WS_TEXT = 0x1,
  WS_BINARY = 0x2,
  WS_CLOSE = 0x8,
  WS_PING = 0x9,
  WS_PONG = 0xa,
};

#define WS_MAX_MESSAGE SPDY_MAX_FRAME

struct ws_frame
{
  bool fin;
  enum ws_opcode opcode;
  uint8_t *payload; /* unmasked in place, inside the parsed buffer */
  size_t payload_len;
};

/* Sec-WebSocket-Accept for KEY (base64 of SHA-1 of KEY and the RFC's
 * GUID), into OUT (at least 29 bytes). */
void ws_accept_key (const char *key, char out[29]);

/* Like spdy_parse: 0 with *USED = 0 when BUF holds no whole frame yet,
 * 0 and the frame's size, or -1 for a frame a server must refuse (not
 * masked, reserved bits, a control frame over 125 bytes, over
 * WS_MAX_MESSAGE).  Unmasks the payload in BUF. */
int ws_parse (uint8_t *buf, size_t len, struct ws_frame *frame, size_t *used, struct husk_error **err);

/* Appends one unmasked frame with FIN set. */
void ws_put (struct spdy_buf *out, enum ws_opcode opcode, const void *data, size_t len);
/* A binary message: CHANNEL, then DATA. */
void ws_put_channel (struct spdy_buf *out, uint8_t channel, const void *data, size_t len);
/* A close frame with CODE (1000: normal). */
void ws_put_close (struct spdy_buf *out, uint16_t code);

#endif
