/* The HTTP/1.1 request head (see http_head.h). */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "cri/streaming/http_head.h"

size_t
http_head_end (const char *buf, size_t len)
{
  for (size_t i = 1; i < len; i++)
    if (buf[i] == '\n')
      {
        if (buf[i - 1] == '\n')
          return i + 1;
        if (i >= 3 && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
          return i + 1;
      }
  return 0;
}

/* The next line of *CURSOR without its "\r\n" or "\n" (NUL-terminated in
 * place); NULL at the end. */
static char *
next_line (char **cursor)
{
  char *line = *cursor, *nl;

  if (line == NULL || *line == '\0')
    return NULL;
  nl = strchr (line, '\n');
  if (nl == NULL)
    {
      *cursor = line + strlen (line);
      return line;
    }
  *nl = '\0';
  *cursor = nl + 1;
  if (nl > line && nl[-1] == '\r')
    nl[-1] = '\0';
  return line;
}

/* The next word of *CURSOR, ended by a single space (or the end for the
 * last); NULL when empty. */
static char *
next_word (char **cursor, bool last)
{
  char *word = *cursor, *sp = strchr (word, ' ');

  if (last)
    return *word && sp == NULL ? word : NULL;
  if (sp == NULL || sp == word)
    return NULL;
  *sp = '\0';
  *cursor = sp + 1;
  return word;
}

static int
parse_request_line (char *line, struct http_head *out)
{
  out->method = next_word (&line, false);
  out->target = out->method ? next_word (&line, false) : NULL;
  out->version = out->target ? next_word (&line, true) : NULL;
  if (out->version == NULL || strncmp (out->version, "HTTP/1.", 7) != 0 || strlen (out->version) != 8)
    return -1;
  return 0;
}

static int
parse_field (char *line, struct http_head *out)
{
  char *colon = strchr (line, ':'), *value, *end;

  if (colon == NULL || colon == line || strcspn (line, " \t") < (size_t) (colon - line)
      || out->n_headers == HTTP_HEADERS_MAX)
    return -1;
  *colon = '\0';
  value = colon + 1 + strspn (colon + 1, " \t");
  end = value + strlen (value);
  while (end > value && (end[-1] == ' ' || end[-1] == '\t'))
    *--end = '\0';
  out->headers[out->n_headers++] = (struct http_header){ .name = line, .value = value };
  return 0;
}

int
http_head_parse (char *head, struct http_head *out)
{
  char *cursor = head, *line;

  memset (out, 0, sizeof *out);
  line = next_line (&cursor);
  if (line == NULL || parse_request_line (line, out) < 0)
    return -1;
  while ((line = next_line (&cursor)) != NULL && *line != '\0')
    if (parse_field (line, out) < 0)
      return -1;
  return 0;
}

const char *
http_head_get (const struct http_head *h, const char *name)
{
  for (size_t i = 0; i < h->n_headers; i++)
    if (strcasecmp (h->headers[i].name, name) == 0)
      return h->headers[i].value;
  return NULL;
}
