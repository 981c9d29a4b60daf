/* WebSocket framing (see ws.h). */
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <string.h>

#include "cri/streaming/ws.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

void
ws_accept_key (const char *key, char out[29])
{
  cleanup_free char *joined = xasprintf ("%s%s", key, WS_GUID);
  unsigned char digest[SHA_DIGEST_LENGTH];

  SHA1 ((const unsigned char *) joined, strlen (joined), digest);
  EVP_EncodeBlock ((unsigned char *) out, digest, sizeof digest);
}

int
ws_parse (uint8_t *buf, size_t len, struct ws_frame *frame, size_t *used, struct husk_error **err)
{
  size_t header = 2, payload_len;
  uint8_t *mask;

  *used = 0;
  if (len < 2)
    return 0;
  if (buf[0] & 0x70)
    return husk_error_make (err, 0, "WebSocket frame with reserved bits set (no extension was agreed)");
  if (!(buf[1] & 0x80))
    return husk_error_make (err, 0, "WebSocket frame from the client not masked");
  payload_len = buf[1] & 0x7f;
  if (payload_len == 126)
    {
      if (len < 4)
        return 0;
      payload_len = (size_t) buf[2] << 8 | buf[3];
      header = 4;
    }
  else if (payload_len == 127)
    {
      if (len < 10)
        return 0;
      payload_len = 0;
      for (int i = 2; i < 10; i++)
        {
          if (payload_len > WS_MAX_MESSAGE)
            break;
          payload_len = payload_len << 8 | buf[i];
        }
      header = 10;
    }
  if (payload_len > WS_MAX_MESSAGE)
    return husk_error_make (err, 0, "WebSocket frame over %d bytes", WS_MAX_MESSAGE);
  frame->fin = (buf[0] & 0x80) != 0;
  frame->opcode = (enum ws_opcode) (buf[0] & 0x0f);
  if ((frame->opcode & 0x8) && (payload_len > 125 || !frame->fin))
    return husk_error_make (err, 0, "WebSocket control frame fragmented or over 125 bytes");
  if (len < header + 4 + payload_len)
    return 0;
  mask = buf + header;
  frame->payload = buf + header + 4;
  frame->payload_len = payload_len;
  for (size_t i = 0; i < payload_len; i++)
    frame->payload[i] ^= mask[i % 4];
  *used = header + 4 + payload_len;
  return 0;
}

static void
put_header (struct spdy_buf *out, enum ws_opcode opcode, size_t len)
{
  uint8_t h[10] = { (uint8_t) (0x80 | opcode) };
  size_t n = 2;

  if (len < 126)
    h[1] = (uint8_t) len;
  else if (len <= 0xffff)
    {
      h[1] = 126, h[2] = (uint8_t) (len >> 8), h[3] = (uint8_t) len;
      n = 4;
    }
  else
    {
      h[1] = 127;
      for (int i = 0; i < 8; i++)
        h[9 - i] = (uint8_t) ((uint64_t) len >> (8 * i));
      n = 10;
    }
  spdy_buf_append (out, h, n);
}

void
ws_put (struct spdy_buf *out, enum ws_opcode opcode, const void *data, size_t len)
{
  put_header (out, opcode, len);
  spdy_buf_append (out, data, len);
}

void
ws_put_channel (struct spdy_buf *out, uint8_t channel, const void *data, size_t len)
{
  put_header (out, WS_BINARY, len + 1);
  spdy_buf_append (out, &channel, 1);
  spdy_buf_append (out, data, len);
}

void
ws_put_close (struct spdy_buf *out, uint16_t code)
{
  uint8_t body[2] = { (uint8_t) (code >> 8), (uint8_t) code };

  ws_put (out, WS_CLOSE, body, sizeof body);
}
