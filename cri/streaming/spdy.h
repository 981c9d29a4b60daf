/* SPDY/3.1 framing: the frame layout, and the zlib header blocks with the
 * SPDY/3 dictionary.  One codec per connection and direction (the zlib
 * streams carry their state from one header block to the next).
 *
 *   control:  1 | version(15)=3 | type(16) | flags(8) | length(24) | payload
 *   data:     0 | stream-id(31)            | flags(8) | length(24) | payload
 *
 * Knows nothing of exec or port-forward: the server gives the streams
 * their meaning from their headers. */
#ifndef HUSK_CRI_STREAMING_SPDY_H
#define HUSK_CRI_STREAMING_SPDY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "husk/error.h"

#define SPDY_VERSION 3
#define SPDY_HEADER_LEN 8
/* What husk accepts in one frame: more than any client of ours sends. */
#define SPDY_MAX_FRAME 1048576
#define SPDY_INITIAL_WINDOW 65536

enum spdy_type
{
  SPDY_DATA = 0, /* not a control type: a data frame */
  SPDY_SYN_STREAM = 1,
  SPDY_SYN_REPLY = 2,
  SPDY_RST_STREAM = 3,
  SPDY_SETTINGS = 4,
  SPDY_PING = 6,
  SPDY_GOAWAY = 7,
  SPDY_HEADERS = 8,
  SPDY_WINDOW_UPDATE = 9,
};

enum
{
  SPDY_FLAG_FIN = 0x01,
  SPDY_FLAG_UNIDIRECTIONAL = 0x02,
};

/* RST_STREAM status codes. */
enum
{
  SPDY_PROTOCOL_ERROR = 1,
  SPDY_INVALID_STREAM = 2,
  SPDY_REFUSED_STREAM = 3,
  SPDY_CANCEL = 5,
  SPDY_INTERNAL_ERROR = 6,
  SPDY_STREAM_IN_USE = 8,
  SPDY_STREAM_ALREADY_CLOSED = 9,
};

#define SPDY_SETTINGS_INITIAL_WINDOW_SIZE 7

struct spdy_frame
{
  enum spdy_type type;
  uint8_t flags;
  uint32_t stream_id;     /* data, SYN_*, RST, HEADERS, WINDOW_UPDATE; GOAWAY: last good */
  uint32_t value;         /* RST/GOAWAY status, PING id, WINDOW_UPDATE delta */
  const uint8_t *payload; /* the bytes after the fixed fields (data, header block, settings) */
  size_t payload_len;
};

/* Parses the frame at BUF (LEN bytes available): 0 and *USED = 0 when it
 * is not complete yet, 0 and *USED = its size when it is, -1 when it is
 * malformed (a control frame of another version, a frame over
 * SPDY_MAX_FRAME, fixed fields cut short).  FRAME points into BUF. */
int spdy_parse (const uint8_t *buf, size_t len, struct spdy_frame *frame, size_t *used,
                struct husk_error **err);

/* A growing byte buffer the encoders append to. */
struct spdy_buf
{
  uint8_t *data;
  size_t len, cap;
};

void spdy_buf_append (struct spdy_buf *buf, const void *bytes, size_t len);
void spdy_buf_consume (struct spdy_buf *buf, size_t len); /* drops LEN bytes at the front */
void spdy_buf_clear (struct spdy_buf *buf);

void spdy_put_data (struct spdy_buf *out, uint32_t stream_id, uint8_t flags, const void *data, size_t len);
void spdy_put_rst (struct spdy_buf *out, uint32_t stream_id, uint32_t status);
void spdy_put_ping (struct spdy_buf *out, uint32_t id);
void spdy_put_goaway (struct spdy_buf *out, uint32_t last_good, uint32_t status);
void spdy_put_window_update (struct spdy_buf *out, uint32_t stream_id, uint32_t delta);

/* A name/value header list (names lower case, as SPDY/3 wants them). */
struct spdy_headers
{
  char **names, **values;
  size_t n;
};

void spdy_headers_add (struct spdy_headers *h, const char *name, const char *value);
const char *spdy_headers_get (const struct spdy_headers *h, const char *name);
void spdy_headers_clear (struct spdy_headers *h);

/* The zlib state of one connection: one deflate stream for what we send,
 * one inflate stream for what we receive. */
struct spdy_zlib;

struct spdy_zlib *spdy_zlib_new (void);
void spdy_zlib_free (struct spdy_zlib *z);

/* Appends a compressed header block for H to OUT. */
int spdy_headers_pack (struct spdy_zlib *z, const struct spdy_headers *h, struct spdy_buf *out,
                       struct husk_error **err);
/* Decompresses and parses the header block BLOCK into H (cleared first). */
int spdy_headers_unpack (struct spdy_zlib *z, const uint8_t *block, size_t len, struct spdy_headers *h,
                         struct husk_error **err);

/* SYN_STREAM (associated 0, priority 0) and SYN_REPLY with H. */
int spdy_put_syn_stream (struct spdy_zlib *z, struct spdy_buf *out, uint32_t stream_id, uint8_t flags,
                         const struct spdy_headers *h, struct husk_error **err);
int spdy_put_syn_reply (struct spdy_zlib *z, struct spdy_buf *out, uint32_t stream_id, uint8_t flags,
                        const struct spdy_headers *h, struct husk_error **err);

/* The SPDY/3 header dictionary (draft 3, section 2.6.10.1). */
const uint8_t *spdy_dictionary (size_t *len);

#endif
