/* Registry authentication: the WWW-Authenticate parser, Basic credentials,
 * the Bearer token flow (GET realm?service=&scope=, optionally with Basic
 * credentials) and a cache of Authorization values per endpoint and scope. */
#include <ctype.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/registry/registry.h"
#include "image/registry/registry_internal.h"

#define TOKEN_RESPONSE_MAX (1u << 20)
#define TOKEN_DEFAULT_LIFETIME_S 60

/* --- WWW-Authenticate -------------------------------------------------- */

/* RFC 7230 tchar, plus '/' so token68 credentials read as one word. */
static bool
is_token_char (char c)
{
  return isalnum ((unsigned char) c) || (c != '\0' && strchr ("!#$%&'*+-.^_`|~/", c) != NULL);
}

static const char *
skip_space (const char *p)
{
  while (*p == ' ' || *p == '\t')
    p++;
  return p;
}

static char *
lower_dup (const char *s, size_t n)
{
  char *out = strndup (s, n);

  if (out == NULL)
    abort ();
  for (char *c = out; *c; c++)
    *c = (char) tolower ((unsigned char) *c);
  return out;
}

/* A quoted-string starting at *P (on the '"'); backslash escapes one char. */
static int
read_quoted (const char **p, char **out, const char *header, struct husk_error **err)
{
  const char *s = *p + 1;
  char *value = xmalloc (strlen (s) + 1);
  size_t n = 0;

  for (; *s && *s != '"'; s++)
    {
      if (*s == '\\' && s[1] != '\0')
        s++;
      value[n++] = *s;
    }
  if (*s != '"')
    {
      free (value);
      return husk_error_make (err, 0, "WWW-Authenticate `%s`: unterminated quoted string", header);
    }
  value[n] = '\0';
  *p = s + 1;
  *out = value;
  return 0;
}

static struct registry_challenge *
add_challenge (struct registry_challenge **list, size_t *n, const char *scheme, size_t len)
{
  struct registry_challenge *c;

  *list = xrealloc (*list, (*n + 1) * sizeof **list);
  c = &(*list)[(*n)++];
  *c = (struct registry_challenge){ .scheme = lower_dup (scheme, len) };
  return c;
}

static void
add_param (struct registry_challenge *c, char *key, char *value)
{
  c->params = xrealloc (c->params, (c->n_params + 1) * sizeof *c->params);
  c->params[c->n_params++] = (struct registry_auth_param){ .key = key, .value = value };
}

/* "abc==" right after a scheme, followed by the end or a comma. */
static bool
is_token68_tail (const struct registry_challenge *c, const char *eq)
{
  while (*eq == '=')
    eq++;
  eq = skip_space (eq);
  return c->n_params == 0 && (*eq == '\0' || *eq == ',');
}

static int
read_param_value (const char **p, char **value, const char *header, struct husk_error **err)
{
  const char *s = skip_space (*p);
  const char *start = s;

  if (*s == '"')
    {
      *p = s;
      return read_quoted (p, value, header, err);
    }
  while (is_token_char (*s))
    s++;
  if (s == start)
    return husk_error_make (err, 0, "WWW-Authenticate `%s`: missing parameter value", header);
  *value = strndup (start, (size_t) (s - start));
  if (*value == NULL)
    abort ();
  *p = s;
  return 0;
}

/* After a word: a parameter (`word = value`), a token68, or a new scheme. */
static int
parse_item (const char **p, const char *word, size_t len, struct registry_challenge **list, size_t *n,
            const char *header, struct husk_error **err)
{
  struct registry_challenge *current = *n > 0 ? &(*list)[*n - 1] : NULL;
  const char *after = skip_space (*p);
  char *value = NULL;

  if (*after == '=' && current != NULL && is_token68_tail (current, after))
    {
      size_t n_eq = 0;
      while (after[n_eq] == '=')
        n_eq++;
      value = xmalloc (len + n_eq + 1);
      memcpy (value, word, len);
      memset (value + len, '=', n_eq);
      value[len + n_eq] = '\0';
      add_param (current, xstrdup ("token68"), value);
      *p = after + n_eq;
      return 0;
    }
  if (*after == '=' && current != NULL)
    {
      *p = after + 1;
      if (read_param_value (p, &value, header, err) < 0)
        return -1;
      add_param (current, lower_dup (word, len), value);
      return 0;
    }
  if (*after == '=')
    return husk_error_make (err, 0, "WWW-Authenticate `%s`: parameter before any scheme", header);
  add_challenge (list, n, word, len);
  *p = after;
  return 0;
}

int
registry_parse_www_authenticate (const char *header, struct registry_challenge **out, size_t *n_out,
                                 struct husk_error **err)
{
  struct registry_challenge *list = NULL;
  size_t n = 0;
  const char *p = header;

  for (;;)
    {
      const char *word;
      while (*p == ' ' || *p == '\t' || *p == ',')
        p++;
      if (*p == '\0')
        break;
      word = p;
      while (is_token_char (*p))
        p++;
      if (p == word)
        {
          registry_challenges_free (list, n);
          return husk_error_make (err, 0, "WWW-Authenticate `%s`: unexpected `%c` at offset %zu", header, *p,
                                  (size_t) (p - header));
        }
      if (parse_item (&p, word, (size_t) (p - word), &list, &n, header, err) < 0)
        {
          registry_challenges_free (list, n);
          return -1;
        }
    }
  if (n == 0)
    return husk_error_make (err, 0, "WWW-Authenticate `%s`: no challenge", header);
  *out = list;
  *n_out = n;
  return 0;
}

void
registry_challenges_free (struct registry_challenge *challenges, size_t n)
{
  if (challenges == NULL)
    return;
  for (size_t i = 0; i < n; i++)
    {
      for (size_t j = 0; j < challenges[i].n_params; j++)
        {
          free (challenges[i].params[j].key);
          free (challenges[i].params[j].value);
        }
      free (challenges[i].params);
      free (challenges[i].scheme);
    }
  free (challenges);
}

const char *
registry_challenge_param (const struct registry_challenge *challenge, const char *key)
{
  for (size_t i = 0; i < challenge->n_params; i++)
    if (strcasecmp (challenge->params[i].key, key) == 0)
      return challenge->params[i].value;
  return NULL;
}

/* --- the cache --------------------------------------------------------- */

static char *
cache_key (const char *base_url, const char *scope)
{
  return xasprintf ("%s %s", base_url, scope);
}

static struct registry_token *
cache_find (struct registry_client *client, const char *key)
{
  for (size_t i = 0; i < client->n_tokens; i++)
    if (strcmp (client->tokens[i].key, key) == 0)
      return &client->tokens[i];
  return NULL;
}

char *
registry_auth_lookup (struct registry_client *client, const char *base_url, const char *scope)
{
  cleanup_free char *key = cache_key (base_url, scope);
  struct registry_token *token;
  char *authorization = NULL;

  pthread_mutex_lock (&client->lock);
  token = cache_find (client, key);
  if (token && (token->expires_ms == 0 || token->expires_ms > registry_now_ms ()))
    authorization = xstrdup (token->authorization);
  pthread_mutex_unlock (&client->lock);
  return authorization;
}

static void
cache_store (struct registry_client *client, const char *base_url, const char *scope,
             const char *authorization, long long expires_ms)
{
  char *key = cache_key (base_url, scope);
  struct registry_token *token;

  pthread_mutex_lock (&client->lock);
  token = cache_find (client, key);
  if (token == NULL)
    {
      client->tokens = xrealloc (client->tokens, (client->n_tokens + 1) * sizeof *client->tokens);
      token = &client->tokens[client->n_tokens++];
      token->key = steal_pointer (&key);
      token->authorization = NULL;
    }
  free (key);
  free (token->authorization);
  token->authorization = xstrdup (authorization);
  token->expires_ms = expires_ms;
  pthread_mutex_unlock (&client->lock);
}

void
registry_auth_forget (struct registry_client *client, const char *base_url, const char *scope)
{
  cleanup_free char *key = cache_key (base_url, scope);
  struct registry_token *token;

  pthread_mutex_lock (&client->lock);
  token = cache_find (client, key);
  if (token)
    token->expires_ms = 1; /* long past */
  pthread_mutex_unlock (&client->lock);
}

/* --- credentials ------------------------------------------------------- */

static bool
client_credentials (struct registry_client *client, const char *host, char **username, char **password)
{
  bool found = false;

  pthread_mutex_lock (&client->lock);
  for (size_t i = 0; i < client->n_creds && !found; i++)
    if (strcmp (client->creds[i].host, host) == 0)
      {
        *username = xstrdup (client->creds[i].username);
        *password = xstrdup (client->creds[i].password);
        found = true;
      }
  pthread_mutex_unlock (&client->lock);
  if (!found && client->opts.credentials)
    found = client->opts.credentials (host, username, password, client->opts.credentials_user);
  return found;
}

static char *
basic_authorization (const char *username, const char *password)
{
  cleanup_free char *plain = xasprintf ("%s:%s", username, password);
  size_t n = strlen (plain);
  unsigned char *encoded = xmalloc (4 * ((n + 2) / 3) + 1);
  char *header;

  EVP_EncodeBlock (encoded, (const unsigned char *) plain, (int) n);
  header = xasprintf ("Basic %s", encoded);
  free (encoded);
  return header;
}

/* --- Bearer tokens ----------------------------------------------------- */

struct token_body
{
  char *data;
  size_t len;
  bool too_long;
};

static size_t
on_token_body (char *data, size_t size, size_t nmemb, void *userdata)
{
  struct token_body *body = userdata;
  size_t len = size * nmemb;

  if (body->len + len > TOKEN_RESPONSE_MAX)
    {
      body->too_long = true;
      return 0;
    }
  body->data = xrealloc (body->data, body->len + len + 1);
  memcpy (body->data + body->len, data, len);
  body->len += len;
  body->data[body->len] = '\0';
  return len;
}

static char *
escaped (CURL *easy, const char *s)
{
  char *e = curl_easy_escape (easy, s, 0);
  char *copy = xstrdup (e);

  curl_free (e);
  return copy;
}

static char *
token_url (CURL *easy, const char *realm, const char *service, const char *scope)
{
  cleanup_free char *service_q = service ? escaped (easy, service) : NULL;
  cleanup_free char *scope_q = escaped (easy, scope);
  const char *sep = strchr (realm, '?') ? "&" : "?";

  if (service_q)
    return xasprintf ("%s%sservice=%s&scope=%s", realm, sep, service_q, scope_q);
  return xasprintf ("%s%sscope=%s", realm, sep, scope_q);
}

static bool
status_is_retryable (long status)
{
  return status == 429 || status >= 500;
}

/* GETs the token URL with retries; leaves the final status in *STATUS. */
static int
token_get (struct registry_client *client, CURL *easy, struct token_body *body, long *status,
           struct husk_error **err)
{
  char errbuf[CURL_ERROR_SIZE];

  curl_easy_setopt (easy, CURLOPT_WRITEFUNCTION, on_token_body);
  curl_easy_setopt (easy, CURLOPT_WRITEDATA, body);
  curl_easy_setopt (easy, CURLOPT_ERRORBUFFER, errbuf);
  for (unsigned attempt = 0;; attempt++)
    {
      CURLcode code;
      errbuf[0] = '\0';
      free (body->data);
      *body = (struct token_body){ 0 };
      code = curl_easy_perform (easy);
      *status = 0;
      curl_easy_getinfo (easy, CURLINFO_RESPONSE_CODE, status);
      bool retry
          = code == CURLE_OK ? status_is_retryable (*status) : registry_transport_error_is_retryable (code);
      if (!retry || attempt >= client->opts.retries)
        {
          if (code == CURLE_OK)
            return 0;
          if (body->too_long)
            return husk_error_make (err, 0, "token response is larger than %u bytes", TOKEN_RESPONSE_MAX);
          return registry_transport_error (easy, code, errbuf, err);
        }
      unsigned delay = registry_retry_delay_ms (client, attempt + 1, 0);
      struct timespec ts = { .tv_sec = delay / 1000, .tv_nsec = (long) (delay % 1000) * 1000000 };
      nanosleep (&ts, NULL);
    }
}

static int
token_from_body (const struct token_body *body, char **token, long long *lifetime_s, struct husk_error **err)
{
  json_t *doc = json_loadb (body->data ? body->data : "", body->len, 0, NULL);
  const char *value = json_string_value (json_object_get (doc, "token"));
  json_t *expires = json_object_get (doc, "expires_in");

  if (value == NULL || *value == '\0')
    value = json_string_value (json_object_get (doc, "access_token"));
  if (value == NULL || *value == '\0')
    {
      json_decref (doc);
      return husk_error_make (err, 0, "token response has neither `token` nor `access_token`");
    }
  *token = xstrdup (value);
  *lifetime_s = json_is_integer (expires) && json_integer_value (expires) > 0 ? json_integer_value (expires)
                                                                              : TOKEN_DEFAULT_LIFETIME_S;
  json_decref (doc);
  return 0;
}

/* TLS verification is skipped for the realm only when it is the insecure
 * endpoint itself; a separate auth server is checked as usual. */
static bool
realm_is_endpoint (const char *realm, const struct hosts_endpoint *ep)
{
  cleanup_free char *origin = xasprintf ("%s/", ep->base_url);
  const char *third_slash = strchr (strstr (origin, "://") ? strstr (origin, "://") + 3 : origin, '/');
  size_t n = third_slash ? (size_t) (third_slash - origin) : strlen (origin);

  return strncmp (realm, origin, n) == 0 && (realm[n] == '/' || realm[n] == '\0' || realm[n] == '?');
}

static int
fetch_token (struct registry_client *client, const struct hosts_endpoint *ep,
             const struct registry_challenge *c, const char *scope, char **token, long long *lifetime_s,
             struct husk_error **err)
{
  const char *realm = registry_challenge_param (c, "realm");
  const char *asked_scope = registry_challenge_param (c, "scope");
  cleanup_free char *username = NULL, *password = NULL, *url = NULL, *fallback = NULL;
  struct token_body body = { 0 };
  CURL *easy;
  long status = 0;
  int rc;

  if (realm == NULL || !(husk_str_has_prefix (realm, "https://") || husk_str_has_prefix (realm, "http://")))
    return husk_error_make (err, 0, "Bearer challenge without an http(s) realm");
  easy = registry_easy_new (client, "", ep->insecure && realm_is_endpoint (realm, ep),
                            (long) client->opts.request_timeout_ms);
  url = token_url (easy, realm, registry_challenge_param (c, "service"), asked_scope ? asked_scope : scope);
  curl_easy_setopt (easy, CURLOPT_URL, url);
  if (client_credentials (client, ep->host, &username, &password))
    {
      curl_easy_setopt (easy, CURLOPT_HTTPAUTH, (long) CURLAUTH_BASIC);
      curl_easy_setopt (easy, CURLOPT_USERNAME, username);
      curl_easy_setopt (easy, CURLOPT_PASSWORD, password);
    }
  husk_debug ("registry: token GET %s", url);
  rc = token_get (client, easy, &body, &status, err);
  curl_easy_cleanup (easy);
  if (rc == 0 && status != 200)
    {
      fallback
          = xasprintf (status == 401 ? "unauthorized: authentication required" : "HTTP status %ld", status);
      cleanup_free char *text = registry_error_from_body (body.data, body.len, fallback);
      rc = husk_error_make (err, 0, "%s", text);
    }
  if (rc == 0)
    rc = token_from_body (&body, token, lifetime_s, err);
  free (body.data);
  if (rc < 0)
    return husk_error_wrap (err, "fetch token from %s", realm);
  return 0;
}

static int
answer_bearer (struct registry_client *client, const struct hosts_endpoint *ep, const char *scope,
               const struct registry_challenge *c, char **authorization, struct husk_error **err)
{
  cleanup_free char *token = NULL;
  long long lifetime_s = 0;

  if (fetch_token (client, ep, c, scope, &token, &lifetime_s, err) < 0)
    return -1;
  *authorization = xasprintf ("Bearer %s", token);
  /* Renew a little early so a token never expires in flight. */
  cache_store (client, ep->base_url, scope, *authorization, registry_now_ms () + lifetime_s * 900);
  return 1;
}

static int
answer_basic (struct registry_client *client, const struct hosts_endpoint *ep, const char *scope,
              char **authorization)
{
  cleanup_free char *username = NULL, *password = NULL;

  if (!client_credentials (client, ep->host, &username, &password))
    return 0;
  *authorization = basic_authorization (username, password);
  cache_store (client, ep->base_url, scope, *authorization, 0);
  return 1;
}

static const struct registry_challenge *
find_scheme (const struct registry_challenge *list, size_t n, const char *scheme)
{
  for (size_t i = 0; i < n; i++)
    if (strcmp (list[i].scheme, scheme) == 0)
      return &list[i];
  return NULL;
}

int
registry_auth_answer (struct registry_client *client, const struct hosts_endpoint *ep, const char *scope,
                      const char *www_authenticate, char **authorization, struct husk_error **err)
{
  struct registry_challenge *list = NULL;
  size_t n = 0;
  const struct registry_challenge *c;
  int rc = 0;

  if (www_authenticate == NULL)
    return 0;
  if (registry_parse_www_authenticate (www_authenticate, &list, &n, err) < 0)
    return -1;
  if ((c = find_scheme (list, n, "bearer")) != NULL)
    rc = answer_bearer (client, ep, scope, c, authorization, err);
  else if (find_scheme (list, n, "basic") != NULL)
    rc = answer_basic (client, ep, scope, authorization);
  registry_challenges_free (list, n);
  return rc;
}
