/* An HTTP/1.1 request head as the streaming server and the metrics
 * endpoint read it: where it ends, and its request line and header fields.
 * No allocation and no I/O, so that the fuzz target
 * (test/fuzz/fuzz_http_head.c) runs it alone. */
#ifndef HUSK_CRI_STREAMING_HTTP_HEAD_H
#define HUSK_CRI_STREAMING_HTTP_HEAD_H

#include <stddef.h>

#define HTTP_HEAD_MAX 8192   /* bytes of a head, its blank line included */
#define HTTP_HEADERS_MAX 100 /* header fields of a head */

struct http_header
{
  const char *name, *value;
};

struct http_head
{
  const char *method, *target, *version;
  struct http_header headers[HTTP_HEADERS_MAX];
  size_t n_headers;
};

/* The length of the head at the start of BUF[0..LEN), its blank line
 * ("\r\n\r\n" or "\n\n") included; 0 while it has not ended. */
size_t http_head_end (const char *buf, size_t len);

/* Splits HEAD (NUL-terminated, one head; changed in place) into OUT, whose
 * strings point into HEAD: 0, or -1 for a malformed request line (not
 * METHOD TARGET HTTP/1.x), a field without a colon or with an empty or
 * spaced name, or more than HTTP_HEADERS_MAX fields. */
int http_head_parse (char *head, struct http_head *out);

/* The value of the first field NAME (any case), or NULL. */
const char *http_head_get (const struct http_head *h, const char *name);

#endif
