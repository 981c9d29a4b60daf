/* What registry.c (transfers) and registry_auth.c (challenges, tokens)
 * share: the client's state and a few helpers (registry_http.c).  Private
 * to image/. */
#ifndef HUSK_IMAGE_REGISTRY_INTERNAL_H
#define HUSK_IMAGE_REGISTRY_INTERNAL_H

#include <curl/curl.h>
#include <pthread.h>

#include "image/registry/registry.h"

struct registry_credential
{
  char *host;
  char *username;
  char *password;
};

/* An Authorization header value that worked for one endpoint and scope. */
struct registry_token
{
  char *key; /* "BASE_URL SCOPE" */
  char *authorization;
  long long expires_ms; /* monotonic; 0: never */
};

struct registry_client
{
  struct registry_options opts;
  char *user_agent;
  pthread_mutex_t lock; /* guards creds and tokens: pulls may run in threads */
  struct registry_credential *creds;
  size_t n_creds;
  struct registry_token *tokens;
  size_t n_tokens;
};

long long registry_now_ms (void);
/* Backoff before retry ATTEMPT (1-based), honouring a Retry-After. */
unsigned registry_retry_delay_ms (const struct registry_client *client, unsigned attempt, long retry_after_s);
/* An easy handle with the client's agent, timeouts, protocols and TLS
 * policy; TIMEOUT_MS 0 means no limit on the whole transfer. */
CURL *registry_easy_new (const struct registry_client *client, const char *url, bool insecure,
                         long timeout_ms);
/* "unauthorized: authentication required" from the registry's JSON error
 * document, or FALLBACK when the body has none. */
char *registry_error_from_body (const char *body, size_t len, const char *fallback);
/* A short text for a curl transport failure: "connect: Connection refused". */
int registry_transport_error (CURL *easy, CURLcode code, const char *errbuf, struct husk_error **err);
bool registry_transport_error_is_retryable (CURLcode code);

/* The Authorization header value cached for EP and SCOPE, or NULL. */
char *registry_auth_lookup (struct registry_client *client, const char *base_url, const char *scope);
void registry_auth_forget (struct registry_client *client, const char *base_url, const char *scope);
/* Answers a 401 carrying WWW_AUTHENTICATE: Bearer (fetch a token from the
 * realm) or Basic (with credentials for EP's host).  Returns 1 with
 * *AUTHORIZATION set and cached, 0 when there is nothing to try (no
 * challenge husk can answer, or Basic without credentials), -1 on error. */
int registry_auth_answer (struct registry_client *client, const struct hosts_endpoint *ep, const char *scope,
                          const char *www_authenticate, char **authorization, struct husk_error **err);

#endif
