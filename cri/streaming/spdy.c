/* SPDY/3.1 frames and zlib header blocks (see spdy.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cri/streaming/spdy.h"
#include "husk/util.h"

/* The dictionary of the SPDY/3 draft: these names, each after its length
 * as 4 bytes big endian, then the text of COMMON_TAIL. */
static const char *const dictionary_words[] = {
  "options",
  "head",
  "post",
  "put",
  "delete",
  "trace",
  "accept",
  "accept-charset",
  "accept-encoding",
  "accept-language",
  "accept-ranges",
  "age",
  "allow",
  "authorization",
  "cache-control",
  "connection",
  "content-base",
  "content-encoding",
  "content-language",
  "content-length",
  "content-location",
  "content-md5",
  "content-range",
  "content-type",
  "date",
  "etag",
  "expect",
  "expires",
  "from",
  "host",
  "if-match",
  "if-modified-since",
  "if-none-match",
  "if-range",
  "if-unmodified-since",
  "last-modified",
  "location",
  "max-forwards",
  "pragma",
  "proxy-authenticate",
  "proxy-authorization",
  "range",
  "referer",
  "retry-after",
  "server",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "user-agent",
  "vary",
  "via",
  "warning",
  "www-authenticate",
  "method",
  "get",
  "status",
  "200 OK",
  "version",
  "HTTP/1.1",
  "url",
  "public",
  "set-cookie",
  "keep-alive",
  "origin",
};

static const char common_tail[]
    = "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
      "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 "
      "Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 "
      "Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, "
      "Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,"
      "application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,deflate,"
      "sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.";

static uint8_t dictionary[1536];
static size_t dictionary_len;
static pthread_once_t dictionary_once = PTHREAD_ONCE_INIT;

static void
put32 (uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t) (v >> 24), p[1] = (uint8_t) (v >> 16), p[2] = (uint8_t) (v >> 8), p[3] = (uint8_t) v;
}

static uint32_t
get32 (const uint8_t *p)
{
  return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | p[3];
}

static void
build_dictionary (void)
{
  size_t len = 0;

  for (size_t i = 0; i < sizeof dictionary_words / sizeof dictionary_words[0]; i++)
    {
      size_t n = strlen (dictionary_words[i]);
      put32 (dictionary + len, (uint32_t) n);
      memcpy (dictionary + len + 4, dictionary_words[i], n);
      len += 4 + n;
    }
  memcpy (dictionary + len, common_tail, sizeof common_tail - 1);
  dictionary_len = len + sizeof common_tail - 1;
}

const uint8_t *
spdy_dictionary (size_t *len)
{
  pthread_once (&dictionary_once, build_dictionary);
  *len = dictionary_len;
  return dictionary;
}

/* ------------------------------------------------------------------ */
/* Parsing                                                             */

/* Fixed fields before the payload, per control type; -1: unknown type
 * (ignored, as the draft says). */
static int
fixed_len (enum spdy_type type)
{
  switch (type)
    {
    case SPDY_SYN_STREAM:
      return 10;
    case SPDY_SYN_REPLY:
    case SPDY_HEADERS:
    case SPDY_PING:
      return 4;
    case SPDY_RST_STREAM:
    case SPDY_GOAWAY:
    case SPDY_WINDOW_UPDATE:
      return 8;
    case SPDY_SETTINGS:
      return 4;
    default:
      return -1;
    }
}

static int
parse_control (const uint8_t *buf, size_t len, struct spdy_frame *frame, struct husk_error **err)
{
  int fixed = fixed_len (frame->type);

  if (fixed < 0)
    {
      frame->payload = buf + SPDY_HEADER_LEN, frame->payload_len = len;
      return 0;
    }
  if (len < (size_t) fixed)
    return husk_error_make (err, 0, "SPDY control frame type %d: %zu bytes, expected at least %d",
                            frame->type, len, fixed);
  const uint8_t *p = buf + SPDY_HEADER_LEN;
  switch (frame->type)
    {
    case SPDY_PING:
    case SPDY_SETTINGS:
      frame->value = get32 (p);
      break;
    case SPDY_RST_STREAM:
    case SPDY_GOAWAY:
    case SPDY_WINDOW_UPDATE:
      frame->stream_id = get32 (p) & 0x7fffffff;
      frame->value = get32 (p + 4) & (frame->type == SPDY_WINDOW_UPDATE ? 0x7fffffff : 0xffffffff);
      break;
    default:
      frame->stream_id = get32 (p) & 0x7fffffff;
      break;
    }
  frame->payload = p + fixed;
  frame->payload_len = len - (size_t) fixed;
  return 0;
}

int
spdy_parse (const uint8_t *buf, size_t len, struct spdy_frame *frame, size_t *used, struct husk_error **err)
{
  size_t body;

  *used = 0;
  if (len < SPDY_HEADER_LEN)
    return 0;
  body = (size_t) buf[5] << 16 | (size_t) buf[6] << 8 | buf[7];
  if (body > SPDY_MAX_FRAME)
    return husk_error_make (err, 0, "SPDY frame of %zu bytes (at most %d)", body, SPDY_MAX_FRAME);
  if (len < SPDY_HEADER_LEN + body)
    return 0;
  memset (frame, 0, sizeof *frame);
  frame->flags = buf[4];
  if (buf[0] & 0x80)
    {
      unsigned version = ((unsigned) buf[0] & 0x7f) << 8 | buf[1];
      if (version != SPDY_VERSION)
        return husk_error_make (err, 0, "SPDY control frame of version %u (only 3 is spoken)", version);
      frame->type = (enum spdy_type) ((unsigned) buf[2] << 8 | buf[3]);
      if (frame->type == SPDY_DATA)
        return husk_error_make (err, 0, "SPDY control frame of type 0");
      if (parse_control (buf, body, frame, err) < 0)
        return -1;
    }
  else
    {
      frame->type = SPDY_DATA;
      frame->stream_id = get32 (buf) & 0x7fffffff;
      frame->payload = buf + SPDY_HEADER_LEN;
      frame->payload_len = body;
    }
  *used = SPDY_HEADER_LEN + body;
  return 0;
}

/* ------------------------------------------------------------------ */
/* Encoding                                                            */

void
spdy_buf_append (struct spdy_buf *buf, const void *bytes, size_t len)
{
  if (buf->len + len > buf->cap)
    {
      buf->cap = buf->cap ? buf->cap : 4096;
      while (buf->len + len > buf->cap)
        buf->cap *= 2;
      buf->data = xrealloc (buf->data, buf->cap);
    }
  if (len)
    memcpy (buf->data + buf->len, bytes, len);
  buf->len += len;
}

void
spdy_buf_consume (struct spdy_buf *buf, size_t len)
{
  if (len >= buf->len)
    {
      buf->len = 0;
      return;
    }
  memmove (buf->data, buf->data + len, buf->len - len);
  buf->len -= len;
}

void
spdy_buf_clear (struct spdy_buf *buf)
{
  free (buf->data);
  memset (buf, 0, sizeof *buf);
}

static void
put_control_header (struct spdy_buf *out, enum spdy_type type, uint8_t flags, size_t len)
{
  uint8_t h[SPDY_HEADER_LEN]
      = { 0x80 | (SPDY_VERSION >> 8), SPDY_VERSION & 0xff, (uint8_t) (type >> 8), (uint8_t) type };

  put32 (h + 4, (uint32_t) len);
  h[4] = flags;
  spdy_buf_append (out, h, sizeof h);
}

void
spdy_put_data (struct spdy_buf *out, uint32_t stream_id, uint8_t flags, const void *data, size_t len)
{
  uint8_t h[SPDY_HEADER_LEN];

  put32 (h, stream_id & 0x7fffffff);
  put32 (h + 4, (uint32_t) len);
  h[4] = flags;
  spdy_buf_append (out, h, sizeof h);
  spdy_buf_append (out, data, len);
}

static void
put_two (struct spdy_buf *out, enum spdy_type type, uint32_t first, uint32_t second)
{
  uint8_t p[8];

  put32 (p, first);
  put32 (p + 4, second);
  put_control_header (out, type, 0, sizeof p);
  spdy_buf_append (out, p, sizeof p);
}

void
spdy_put_rst (struct spdy_buf *out, uint32_t stream_id, uint32_t status)
{
  put_two (out, SPDY_RST_STREAM, stream_id & 0x7fffffff, status);
}

void
spdy_put_goaway (struct spdy_buf *out, uint32_t last_good, uint32_t status)
{
  put_two (out, SPDY_GOAWAY, last_good & 0x7fffffff, status);
}

void
spdy_put_window_update (struct spdy_buf *out, uint32_t stream_id, uint32_t delta)
{
  put_two (out, SPDY_WINDOW_UPDATE, stream_id & 0x7fffffff, delta & 0x7fffffff);
}

void
spdy_put_ping (struct spdy_buf *out, uint32_t id)
{
  uint8_t p[4];

  put32 (p, id);
  put_control_header (out, SPDY_PING, 0, sizeof p);
  spdy_buf_append (out, p, sizeof p);
}

/* ------------------------------------------------------------------ */
/* Header blocks                                                       */

void
spdy_headers_add (struct spdy_headers *h, const char *name, const char *value)
{
  h->names = xrealloc (h->names, (h->n + 1) * sizeof *h->names);
  h->values = xrealloc (h->values, (h->n + 1) * sizeof *h->values);
  h->names[h->n] = xstrdup (name);
  h->values[h->n] = xstrdup (value);
  h->n++;
}

const char *
spdy_headers_get (const struct spdy_headers *h, const char *name)
{
  for (size_t i = 0; i < h->n; i++)
    if (strcasecmp (h->names[i], name) == 0)
      return h->values[i];
  return NULL;
}

void
spdy_headers_clear (struct spdy_headers *h)
{
  for (size_t i = 0; i < h->n; i++)
    {
      free (h->names[i]);
      free (h->values[i]);
    }
  free (h->names);
  free (h->values);
  memset (h, 0, sizeof *h);
}

struct spdy_zlib
{
  z_stream out, in;
  bool in_dictionary_set;
};

struct spdy_zlib *
spdy_zlib_new (void)
{
  struct spdy_zlib *z = xcalloc (1, sizeof *z);
  size_t dict_len;
  const uint8_t *dict = spdy_dictionary (&dict_len);

  if (deflateInit (&z->out, Z_DEFAULT_COMPRESSION) != Z_OK || inflateInit (&z->in) != Z_OK)
    abort (); /* only out of memory */
  deflateSetDictionary (&z->out, dict, (uInt) dict_len);
  return z;
}

void
spdy_zlib_free (struct spdy_zlib *z)
{
  if (z == NULL)
    return;
  deflateEnd (&z->out);
  inflateEnd (&z->in);
  free (z);
}

int
spdy_headers_pack (struct spdy_zlib *z, const struct spdy_headers *h, struct spdy_buf *out,
                   struct husk_error **err)
{
  struct spdy_buf plain = { 0 };
  uint8_t n[4], chunk[4096];

  put32 (n, (uint32_t) h->n);
  spdy_buf_append (&plain, n, 4);
  for (size_t i = 0; i < h->n; i++)
    {
      put32 (n, (uint32_t) strlen (h->names[i]));
      spdy_buf_append (&plain, n, 4);
      spdy_buf_append (&plain, h->names[i], strlen (h->names[i]));
      put32 (n, (uint32_t) strlen (h->values[i]));
      spdy_buf_append (&plain, n, 4);
      spdy_buf_append (&plain, h->values[i], strlen (h->values[i]));
    }
  z->out.next_in = plain.data;
  z->out.avail_in = (uInt) plain.len;
  do
    {
      z->out.next_out = chunk;
      z->out.avail_out = sizeof chunk;
      if (deflate (&z->out, Z_SYNC_FLUSH) == Z_STREAM_ERROR)
        {
          spdy_buf_clear (&plain);
          return husk_error_make (err, 0, "compress a SPDY header block: zlib stream error");
        }
      spdy_buf_append (out, chunk, sizeof chunk - z->out.avail_out);
    }
  while (z->out.avail_out == 0);
  spdy_buf_clear (&plain);
  return 0;
}

static int
inflate_block (struct spdy_zlib *z, const uint8_t *block, size_t len, struct spdy_buf *plain,
               struct husk_error **err)
{
  uint8_t chunk[4096];

  z->in.next_in = (uint8_t *) block;
  z->in.avail_in = (uInt) len;
  while (z->in.avail_in > 0)
    {
      z->in.next_out = chunk;
      z->in.avail_out = sizeof chunk;
      int rc = inflate (&z->in, Z_SYNC_FLUSH);
      if (rc == Z_NEED_DICT)
        {
          size_t dict_len;
          const uint8_t *dict = spdy_dictionary (&dict_len);
          if (inflateSetDictionary (&z->in, dict, (uInt) dict_len) != Z_OK)
            return husk_error_make (err, 0, "SPDY header block: not compressed with the SPDY/3 dictionary");
          continue;
        }
      if (rc != Z_OK && rc != Z_BUF_ERROR)
        return husk_error_make (err, 0, "SPDY header block: zlib: %s",
                                z->in.msg ? z->in.msg : "corrupt data");
      spdy_buf_append (plain, chunk, sizeof chunk - z->in.avail_out);
      if (plain->len > SPDY_MAX_FRAME)
        return husk_error_make (err, 0, "SPDY header block: over %d bytes decompressed", SPDY_MAX_FRAME);
      if (rc == Z_BUF_ERROR && z->in.avail_out != 0)
        break;
    }
  return 0;
}

/* The next length-prefixed string of PLAIN at *POS. */
static int
take_string (const struct spdy_buf *plain, size_t *pos, char **out, struct husk_error **err)
{
  uint32_t len;

  if (plain->len - *pos < 4)
    return husk_error_make (err, 0, "SPDY header block: cut short");
  len = get32 (plain->data + *pos);
  *pos += 4;
  if (plain->len - *pos < len)
    return husk_error_make (err, 0, "SPDY header block: a string of %u bytes past its end", len);
  *out = xmalloc (len + 1);
  memcpy (*out, plain->data + *pos, len);
  (*out)[len] = '\0';
  *pos += len;
  return 0;
}

int
spdy_headers_unpack (struct spdy_zlib *z, const uint8_t *block, size_t len, struct spdy_headers *h,
                     struct husk_error **err)
{
  struct spdy_buf plain = { 0 };
  size_t pos = 4;
  uint32_t count;
  int ret = 0;

  spdy_headers_clear (h);
  if (inflate_block (z, block, len, &plain, err) < 0)
    ret = -1;
  else if (plain.len < 4)
    ret = husk_error_make (err, 0, "SPDY header block: no header count");
  count = ret == 0 ? get32 (plain.data) : 0;
  if (ret == 0 && count > 1024)
    ret = husk_error_make (err, 0, "SPDY header block: %u headers (at most 1024)", count);
  for (uint32_t i = 0; ret == 0 && i < count; i++)
    {
      char *name = NULL, *value = NULL;
      if (take_string (&plain, &pos, &name, err) < 0 || take_string (&plain, &pos, &value, err) < 0)
        ret = -1;
      else
        spdy_headers_add (h, name, value);
      free (name);
      free (value);
    }
  spdy_buf_clear (&plain);
  return ret;
}

static int
put_headers_frame (struct spdy_zlib *z, struct spdy_buf *out, enum spdy_type type, uint32_t stream_id,
                   uint8_t flags, const struct spdy_headers *h, struct husk_error **err)
{
  struct spdy_buf block = { 0 };
  uint8_t fixed[10] = { 0 };
  size_t fixed_n = type == SPDY_SYN_STREAM ? 10 : 4;

  put32 (fixed, stream_id & 0x7fffffff);
  if (spdy_headers_pack (z, h, &block, err) < 0)
    {
      spdy_buf_clear (&block);
      return -1;
    }
  put_control_header (out, type, flags, fixed_n + block.len);
  spdy_buf_append (out, fixed, fixed_n);
  spdy_buf_append (out, block.data, block.len);
  spdy_buf_clear (&block);
  return 0;
}

int
spdy_put_syn_stream (struct spdy_zlib *z, struct spdy_buf *out, uint32_t stream_id, uint8_t flags,
                     const struct spdy_headers *h, struct husk_error **err)
{
  return put_headers_frame (z, out, SPDY_SYN_STREAM, stream_id, flags, h, err);
}

int
spdy_put_syn_reply (struct spdy_zlib *z, struct spdy_buf *out, uint32_t stream_id, uint8_t flags,
                    const struct spdy_headers *h, struct husk_error **err)
{
  return put_headers_frame (z, out, SPDY_SYN_REPLY, stream_id, flags, h, err);
}
