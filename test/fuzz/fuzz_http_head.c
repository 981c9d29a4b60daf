/* libFuzzer target: the HTTP/1.1 request head as huskd's streaming server
 * and metrics endpoint read it (cri/streaming/http_head.c): where the head
 * ends, then its request line and fields, as the front door hands them
 * over.  Built by `make fuzz` (clang, ASan, UBSan); run for a bounded time
 * by test/integration/test_fuzz.sh:
 *
 *   build/test/fuzz/fuzz_http_head -max_total_time=60 DIR  (seeds: test/fuzz/corpus/http_head) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cri/streaming/http_head.h"

/* A string the parser gave must lie inside the head it parsed. */
static void
check_inside (const char *s, const char *head, size_t len)
{
  if (s == NULL || s < head || s > head + len || strlen (s) > (size_t) (head + len - s))
    __builtin_trap ();
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *head;
  size_t end;
  struct http_head h;

  if (size > HTTP_HEAD_MAX)
    size = HTTP_HEAD_MAX; /* the front door never reads more */
  head = malloc (size + 1);
  memcpy (head, data, size);
  head[size] = '\0';
  end = http_head_end (head, size);
  if (end > size || (end > 0 && head[end - 1] != '\n'))
    __builtin_trap ();
  if (end > 0)
    head[end] = '\0';
  if (http_head_parse (head, &h) == 0)
    {
      check_inside (h.method, head, size);
      check_inside (h.target, head, size);
      check_inside (h.version, head, size);
      if (h.n_headers > HTTP_HEADERS_MAX)
        __builtin_trap ();
      for (size_t i = 0; i < h.n_headers; i++)
        {
          check_inside (h.headers[i].name, head, size);
          check_inside (h.headers[i].value, head, size);
          if (h.headers[i].name[0] == '\0')
            __builtin_trap ();
        }
      (void) http_head_get (&h, "Upgrade");
    }
  free (head);
  return 0;
}
