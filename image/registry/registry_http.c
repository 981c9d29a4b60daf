/* What the transfers (registry.c) and the auth (registry_auth.c) both use
 * of HTTP: an easy handle set up the client's way, the clock and backoff of
 * retries, and errors from a transport failure or a registry's error body.
 * Under both, so they no longer call each other for it. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/registry/registry.h"
#include "image/registry/registry_internal.h"

#define RETRY_AFTER_MAX_S 10

long long
registry_now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

unsigned
registry_retry_delay_ms (const struct registry_client *client, unsigned attempt, long retry_after_s)
{
  unsigned delay = client->opts.retry_delay_ms;

  for (unsigned i = 1; i < attempt && delay < 60000; i++)
    delay *= 2;
  if (retry_after_s > 0)
    {
      unsigned asked
          = (unsigned) (retry_after_s > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : retry_after_s) * 1000;
      if (asked > delay)
        delay = asked;
    }
  return delay;
}

CURL *
registry_easy_new (const struct registry_client *client, const char *url, bool insecure, long timeout_ms)
{
  CURL *easy = curl_easy_init ();

  if (easy == NULL)
    abort ();
  curl_easy_setopt (easy, CURLOPT_URL, url);
  curl_easy_setopt (easy, CURLOPT_USERAGENT, client->user_agent);
  curl_easy_setopt (easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt (easy, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt (easy, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt (easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt (easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt (easy, CURLOPT_CONNECTTIMEOUT_MS, (long) client->opts.connect_timeout_ms);
  curl_easy_setopt (easy, CURLOPT_TIMEOUT_MS, timeout_ms);
  if (client->opts.stall_timeout_s > 0)
    {
      curl_easy_setopt (easy, CURLOPT_LOW_SPEED_LIMIT,
                        (long) (client->opts.low_speed_bytes ? client->opts.low_speed_bytes : 1));
      curl_easy_setopt (easy, CURLOPT_LOW_SPEED_TIME, (long) client->opts.stall_timeout_s);
    }
  if (insecure)
    {
      curl_easy_setopt (easy, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt (easy, CURLOPT_SSL_VERIFYHOST, 0L);
    }
  return easy;
}

/* "MANIFEST_UNKNOWN" -> "manifest unknown" */
static char *
code_words (const char *code)
{
  char *words = xstrdup (code);

  for (char *c = words; *c; c++)
    *c = *c == '_' ? ' ' : (char) (*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
  return words;
}

static char *
error_entry_text (json_t *entry)
{
  const char *code = json_string_value (json_object_get (entry, "code"));
  const char *message = json_string_value (json_object_get (entry, "message"));
  cleanup_free char *words = code ? code_words (code) : NULL;

  if (words && message && *message && strcasecmp (words, message) != 0)
    return xasprintf ("%s: %s", words, message);
  if (message && *message)
    return xstrdup (message);
  return words ? steal_pointer (&words) : NULL;
}

char *
registry_error_from_body (const char *body, size_t len, const char *fallback)
{
  json_t *doc = body ? json_loadb (body, len, 0, NULL) : NULL;
  json_t *errors = json_object_get (doc, "errors");
  char *text = NULL;
  size_t i;
  json_t *entry;

  json_array_foreach (errors, i, entry)
  {
    cleanup_free char *one = error_entry_text (entry);
    char *joined;
    if (one == NULL)
      continue;
    joined = text ? xasprintf ("%s; %s", text, one) : xstrdup (one);
    free (text);
    text = joined;
  }
  json_decref (doc);
  return text ? text : xstrdup (fallback);
}

bool
registry_transport_error_is_retryable (CURLcode code)
{
  switch (code)
    {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
    }
}

int
registry_transport_error (CURL *easy, CURLcode code, const char *errbuf, struct husk_error **err)
{
  const char *detail = errbuf && *errbuf ? errbuf : curl_easy_strerror (code);
  long os_errno = 0;

  curl_easy_getinfo (easy, CURLINFO_OS_ERRNO, &os_errno);
  switch (code)
    {
    case CURLE_COULDNT_CONNECT:
      if (os_errno != 0)
        return husk_error_make (err, (int) os_errno, "connect");
      return husk_error_make (err, 0, "connect: %s", detail);
    case CURLE_COULDNT_RESOLVE_HOST:
      return husk_error_make (err, 0, "lookup: %s", detail);
    case CURLE_OPERATION_TIMEDOUT:
      return husk_error_make (err, 0, "timeout: %s", detail);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
      return husk_error_make (err, 0, "tls: %s", detail);
    default:
      if (os_errno != 0 && code != CURLE_WRITE_ERROR)
        return husk_error_make (err, (int) os_errno, "%s", detail);
      return husk_error_make (err, 0, "%s", detail);
    }
}
