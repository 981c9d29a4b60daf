/* The distribution API client.  Every request (a manifest, each blob) is a
 * `transfer` run by one small engine over curl multi; the engine alone
 * decides what a response means: done, retry later (connection errors, 5xx,
 * 429), answer an auth challenge, or try the next endpoint (mirrors). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/registry.h"
#include "image/registry_internal.h"

#define ERROR_BODY_MAX (64u << 10)
/* An error body still coming after this long is cut too: an error page
 * that drips says nothing more either. */
#define ERROR_BODY_TIME_MS 5000
#define RETRY_AFTER_MAX_S 10

static const char manifest_accept[] = "Accept: " REGISTRY_MEDIA_OCI_INDEX ", " REGISTRY_MEDIA_OCI_MANIFEST
                                      ", " REGISTRY_MEDIA_DOCKER_LIST ", " REGISTRY_MEDIA_DOCKER_MANIFEST;

struct membuf
{
  char *data;
  size_t len;
  size_t cap;
};

static void
membuf_append (struct membuf *buf, const void *data, size_t len)
{
  if (buf->len + len + 1 > buf->cap)
    {
      buf->cap = (buf->len + len + 1) * 2;
      buf->data = xrealloc (buf->data, buf->cap);
    }
  memcpy (buf->data + buf->len, data, len);
  buf->len += len;
  buf->data[buf->len] = '\0';
}

static void
membuf_clear (struct membuf *buf)
{
  free (buf->data);
  *buf = (struct membuf){ 0 };
}

enum transfer_state
{
  TRANSFER_READY,   /* start as soon as a slot is free */
  TRANSFER_RUNNING, /* in the multi handle */
  TRANSFER_WAITING, /* backing off until wake_ms */
  TRANSFER_DONE,
  TRANSFER_FAILED,
};

/* What one HTTP response said; reset for each attempt (and each redirect). */
struct response
{
  char *www_authenticate;
  char *docker_digest;
  char *content_type;
  char *content_range;
  long retry_after_s;
  struct membuf body; /* the manifest, or the registry's error document */
};

/* A blob streaming into the caller's file. */
struct file_sink
{
  int fd;
  const char *digest;
  uint64_t size;
  uint64_t written;
  uint64_t flushed;       /* writeback started up to here */
  struct digest_ctx *ctx; /* hash of the first `written` bytes */
  bool from_existing;     /* some bytes were in the file before we began */
  bool restart;           /* what we have is unusable: next attempt from 0 */
  bool started;           /* this response's first body byte was seen */
};

struct transfer
{
  struct registry_client *client;
  char *what; /* prefix of every error: "127.0.0.1:5000/x:y" */
  const char *repository;
  const char *kind; /* "manifests" or "blobs" */
  const char *object;
  const struct hosts_endpoint *endpoints;
  size_t n_endpoints;
  size_t endpoint;
  char *scope;
  unsigned attempt;
  bool fresh_auth; /* the Authorization was just obtained from a challenge */
  char *authorization;
  enum transfer_state state;
  long long wake_ms;
  struct response resp;
  bool is_blob;
  struct file_sink file;
  size_t index;
  registry_progress_cb progress;
  void *progress_user;
  struct husk_error *error; /* set by a callback, or the final failure */
  bool fatal;               /* error is about the content: no other endpoint will fix it */
  bool body_cut;            /* an error body was cut (ERROR_BODY_MAX or _TIME_MS): its status stands */
  long long error_body_ms;  /* when the error body began */
  CURL *easy;
  struct curl_slist *headers;
  char errbuf[CURL_ERROR_SIZE];
};

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

void
registry_options_init (struct registry_options *opts)
{
  *opts = (struct registry_options){
    .parallelism = 4,
    .retries = 3,
    .retry_delay_ms = 200,
    .connect_timeout_ms = 30000,
    .request_timeout_ms = 60000,
    .stall_timeout_s = 30,
    .low_speed_bytes = 1,
  };
}

static void
global_init (void)
{
  curl_global_init (CURL_GLOBAL_DEFAULT);
}

struct registry_client *
registry_client_new (const struct registry_options *opts)
{
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  struct registry_client *client = xcalloc (1, sizeof *client);

  pthread_once (&once, global_init);
  if (opts)
    client->opts = *opts;
  else
    registry_options_init (&client->opts);
  if (client->opts.parallelism == 0)
    client->opts.parallelism = 1;
  client->user_agent
      = client->opts.user_agent ? xstrdup (client->opts.user_agent) : xstrdup ("husk/" HUSK_VERSION);
  client->opts.user_agent = client->user_agent;
  pthread_mutex_init (&client->lock, NULL);
  return client;
}

void
registry_client_free (struct registry_client *client)
{
  if (client == NULL)
    return;
  for (size_t i = 0; i < client->n_creds; i++)
    {
      free (client->creds[i].host);
      free (client->creds[i].username);
      free (client->creds[i].password);
    }
  for (size_t i = 0; i < client->n_tokens; i++)
    {
      free (client->tokens[i].key);
      free (client->tokens[i].authorization);
    }
  free (client->creds);
  free (client->tokens);
  free (client->user_agent);
  pthread_mutex_destroy (&client->lock);
  free (client);
}

void
registry_client_add_credentials (struct registry_client *client, const char *host, const char *username,
                                 const char *password)
{
  pthread_mutex_lock (&client->lock);
  client->creds = xrealloc (client->creds, (client->n_creds + 1) * sizeof *client->creds);
  client->creds[client->n_creds++] = (struct registry_credential){
    .host = xstrdup (host),
    .username = xstrdup (username),
    .password = xstrdup (password),
  };
  pthread_mutex_unlock (&client->lock);
}

void
registry_manifest_free (struct registry_manifest *manifest)
{
  if (manifest == NULL)
    return;
  free (manifest->media_type);
  free (manifest->data);
  free (manifest);
}

bool
registry_media_type_is_index (const char *media_type)
{
  return media_type != NULL
         && (strcmp (media_type, REGISTRY_MEDIA_OCI_INDEX) == 0
             || strcmp (media_type, REGISTRY_MEDIA_DOCKER_LIST) == 0);
}

char *
registry_url (const char *base_url, const char *repository, const char *kind, const char *object)
{
  return xasprintf ("%s/v2/%s/%s/%s", base_url, repository, kind, object);
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

/* --- responses --------------------------------------------------------- */

static void
response_clear (struct response *resp)
{
  free (resp->www_authenticate);
  free (resp->docker_digest);
  free (resp->content_type);
  free (resp->content_range);
  membuf_clear (&resp->body);
  *resp = (struct response){ 0 };
}

static char *
trimmed (const char *s, size_t n)
{
  while (n > 0 && (*s == ' ' || *s == '\t'))
    s++, n--;
  while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t'))
    n--;
  return strndup (s, n);
}

static void
keep_header (char **slot, char *value)
{
  char *joined;

  if (*slot == NULL)
    {
      *slot = value;
      return;
    }
  /* Several WWW-Authenticate lines are one comma-separated list. */
  joined = xasprintf ("%s, %s", *slot, value);
  free (*slot);
  free (value);
  *slot = joined;
}

static long
response_status (const struct transfer *t)
{
  long status = 0;

  curl_easy_getinfo (t->easy, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

static size_t
on_header (char *line, size_t size, size_t nitems, void *userdata)
{
  struct transfer *t = userdata;
  size_t len = size * nitems;
  const char *colon = memchr (line, ':', len);
  static const struct
  {
    const char *name;
    size_t offset;
  } wanted[] = {
    { "www-authenticate", offsetof (struct response, www_authenticate) },
    { "docker-content-digest", offsetof (struct response, docker_digest) },
    { "content-type", offsetof (struct response, content_type) },
    { "content-range", offsetof (struct response, content_range) },
  };

  if (len >= 5 && strncmp (line, "HTTP/", 5) == 0)
    {
      /* A new response (after a redirect or 100): forget the last one's headers. */
      struct membuf body = t->resp.body;
      t->resp.body = (struct membuf){ 0 };
      response_clear (&t->resp);
      t->resp.body = body;
      return len;
    }
  if (colon == NULL)
    {
      /* The end of an error's headers: its body's clock starts, whether
       * or not a byte of it ever comes. */
      long status = len <= 2 ? response_status (t) : 0;
      if (status >= 400 && t->error_body_ms == 0)
        t->error_body_ms = registry_now_ms ();
      return len;
    }
  for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++)
    if ((size_t) (colon - line) == strlen (wanted[i].name)
        && strncasecmp (line, wanted[i].name, colon - line) == 0)
      {
        char *value = trimmed (colon + 1, len - (size_t) (colon - line) - 1);
        if (value == NULL)
          abort ();
        keep_header ((char **) ((char *) &t->resp + wanted[i].offset), value);
        return len;
      }
  if ((size_t) (colon - line) == 11 && strncasecmp (line, "retry-after", 11) == 0)
    t->resp.retry_after_s = strtol (colon + 1, NULL, 10);
  return len;
}

/* --- blob files -------------------------------------------------------- */

static int
file_reset (struct file_sink *file, struct husk_error **err)
{
  digest_ctx_free (file->ctx);
  file->ctx = digest_ctx_new ();
  file->written = 0;
  file->flushed = 0;
  file->from_existing = false;
  file->restart = false;
  if (ftruncate (file->fd, 0) < 0)
    return husk_error_make (err, errno, "truncate blob file");
  return 0;
}

/* Takes bytes already in the file as a partial download: they are hashed
 * now and the rest is fetched with Range. */
static int
file_adopt_existing (struct file_sink *file, struct husk_error **err)
{
  struct stat st;
  char buf[65536];

  file->ctx = digest_ctx_new ();
  if (fstat (file->fd, &st) < 0)
    return husk_error_make (err, errno, "stat blob file");
  if (!S_ISREG (st.st_mode))
    return husk_error_make (err, 0, "blob file descriptor is not a regular file");
  if (st.st_size == 0)
    return 0;
  if ((uint64_t) st.st_size > file->size)
    return file_reset (file, err);
  while (file->written < (uint64_t) st.st_size)
    {
      ssize_t n = pread (file->fd, buf, sizeof buf, (off_t) file->written);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        return husk_error_make (err, errno, "read partial blob file");
      if (n == 0)
        break;
      digest_ctx_update (file->ctx, buf, (size_t) n);
      file->written += (uint64_t) n;
    }
  file->from_existing = file->written > 0;
  return 0;
}

/* "bytes START-END/TOTAL": the server must continue where we stopped. */
static bool
content_range_starts_at (const char *content_range, uint64_t offset)
{
  unsigned long long start;

  if (content_range == NULL || sscanf (content_range, "bytes %llu-", &start) != 1)
    return false;
  return start == offset;
}

/* Start writeback of what we wrote every few MiB (and of the tail when
 * the blob is complete) without waiting for it: the store's fsync before
 * it publishes the blob then finds the pages on their way to disk instead
 * of starting the whole blob's I/O then, while later blobs still stream.
 * Durability is unchanged: only that fsync decides. */
#define WRITEBACK_CHUNK (4u << 20)

static void
file_start_writeback (struct file_sink *file)
{
  if (file->written > file->flushed)
    (void) sync_file_range (file->fd, (off64_t) file->flushed, (off64_t) (file->written - file->flushed),
                            SYNC_FILE_RANGE_WRITE);
  file->flushed = file->written;
}

static size_t
file_write (struct transfer *t, long status, const char *data, size_t len)
{
  struct file_sink *file = &t->file;
  struct husk_error **err = &t->error;

  if (!file->started)
    {
      file->started = true;
      if (status == 200 && file->written > 0 && file_reset (file, err) < 0)
        return t->fatal = true, 0;
      if (status == 206 && !content_range_starts_at (t->resp.content_range, file->written))
        {
          file->restart = true;
          husk_error_make (err, 0, "registry answered the Range request with `%s`", t->resp.content_range);
          return 0;
        }
    }
  if (file->written + len > file->size)
    {
      husk_error_make (err, 0, "size mismatch (got more than %llu bytes)", (unsigned long long) file->size);
      return t->fatal = true, 0;
    }
  for (size_t done = 0; done < len;)
    {
      ssize_t n = pwrite (file->fd, data + done, len - done, (off_t) (file->written + done));
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          husk_error_make (err, errno, "write blob file");
          return t->fatal = true, 0;
        }
      done += (size_t) n;
    }
  digest_ctx_update (file->ctx, data, len);
  file->written += len;
  if (file->written - file->flushed >= WRITEBACK_CHUNK)
    file_start_writeback (file);
  if (t->progress)
    t->progress (t->index, file->written, file->size, t->progress_user);
  return len;
}

/* An error response's body: the first ERROR_BODY_MAX bytes, for at most
 * ERROR_BODY_TIME_MS; past either the transfer is aborted (a server that
 * answers 500 with an endless body would otherwise hold the pull until its
 * deadline) and the status is what it says. */
static size_t
keep_error_body (struct transfer *t, const char *data, size_t len)
{
  long long now = registry_now_ms ();
  size_t room = ERROR_BODY_MAX - t->resp.body.len;

  if (t->error_body_ms == 0)
    t->error_body_ms = now;
  membuf_append (&t->resp.body, data, len < room ? len : room);
  if (len <= room && now - t->error_body_ms <= ERROR_BODY_TIME_MS)
    return len;
  t->body_cut = true;
  return 0;
}

static size_t
on_body (char *data, size_t size, size_t nmemb, void *userdata)
{
  struct transfer *t = userdata;
  size_t len = size * nmemb;
  long status = response_status (t);
  bool success = status >= 200 && status < 300;

  if (success && t->is_blob)
    return file_write (t, status, data, len);
  if (success && t->resp.body.len + len > REGISTRY_MANIFEST_MAX)
    {
      husk_error_make (&t->error, 0, "manifest is larger than %u bytes", REGISTRY_MANIFEST_MAX);
      return t->fatal = true, 0;
    }
  if (!success)
    return keep_error_body (t, data, len);
  membuf_append (&t->resp.body, data, len);
  return len;
}

/* --- transfers --------------------------------------------------------- */

static const struct hosts_endpoint *
transfer_endpoint (const struct transfer *t)
{
  return &t->endpoints[t->endpoint];
}

static void
transfer_release_easy (struct transfer *t, CURLM *multi)
{
  if (t->easy)
    {
      if (multi)
        curl_multi_remove_handle (multi, t->easy);
      curl_easy_cleanup (t->easy);
    }
  curl_slist_free_all (t->headers);
  t->easy = NULL;
  t->headers = NULL;
}

static void
transfer_clear (struct transfer *t)
{
  transfer_release_easy (t, NULL);
  response_clear (&t->resp);
  digest_ctx_free (t->file.ctx);
  husk_error_free (&t->error);
  free (t->authorization);
  free (t->scope);
  free (t->what);
}

static void
transfer_init (struct transfer *t, struct registry_client *client, const struct reference *ref,
               const struct hosts_endpoint *eps, size_t n_eps, char *what)
{
  *t = (struct transfer){
    .client = client,
    .what = what,
    .repository = ref->path,
    .endpoints = eps,
    .n_endpoints = n_eps,
    .scope = xasprintf ("repository:%s:pull", ref->path),
    .state = TRANSFER_READY,
  };
}

static struct curl_slist *
add_header (struct curl_slist *list, const char *header)
{
  struct curl_slist *grown = curl_slist_append (list, header);

  if (grown == NULL)
    abort ();
  return grown;
}

#define BLOB_BUFFER_SIZE (256L * 1024)

static void
transfer_start (struct transfer *t, CURLM *multi)
{
  const struct hosts_endpoint *ep = transfer_endpoint (t);
  cleanup_free char *url = registry_url (ep->base_url, t->repository, t->kind, t->object);
  long timeout_ms = t->is_blob ? 0 : (long) t->client->opts.request_timeout_ms;

  response_clear (&t->resp);
  t->errbuf[0] = '\0';
  t->file.started = false;
  t->body_cut = false;
  t->error_body_ms = 0;
  if (t->authorization == NULL)
    t->authorization = registry_auth_lookup (t->client, ep->base_url, t->scope);
  t->easy = registry_easy_new (t->client, url, ep->insecure, timeout_ms);
  if (!t->is_blob)
    t->headers = add_header (t->headers, manifest_accept);
  if (t->authorization)
    {
      cleanup_free char *header = xasprintf ("Authorization: %s", t->authorization);
      t->headers = add_header (t->headers, header);
    }
  if (t->is_blob && t->file.written > 0)
    {
      cleanup_free char *range = xasprintf ("Range: bytes=%llu-", (unsigned long long) t->file.written);
      t->headers = add_header (t->headers, range);
    }
  curl_easy_setopt (t->easy, CURLOPT_HTTPHEADER, t->headers);
  curl_easy_setopt (t->easy, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt (t->easy, CURLOPT_HEADERDATA, t);
  curl_easy_setopt (t->easy, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt (t->easy, CURLOPT_WRITEDATA, t);
  curl_easy_setopt (t->easy, CURLOPT_ERRORBUFFER, t->errbuf);
  curl_easy_setopt (t->easy, CURLOPT_PRIVATE, t);
  if (t->is_blob) /* fewer, larger reads and writes than the 16 KiB default */
    curl_easy_setopt (t->easy, CURLOPT_BUFFERSIZE, BLOB_BUFFER_SIZE);
  husk_debug ("registry: GET %s", url);
  curl_multi_add_handle (multi, t->easy);
  t->state = TRANSFER_RUNNING;
}

/* ERR (owned) ends the transfer, naming what and, for a mirror, where. */
static void
transfer_fail (struct transfer *t, struct husk_error *err)
{
  const struct hosts_endpoint *ep = transfer_endpoint (t);

  husk_error_free (&t->error);
  t->error = err;
  if (ep->is_mirror && !t->fatal)
    husk_error_wrap (&t->error, "mirror %s", ep->base_url);
  husk_error_wrap (&t->error, "%s", t->what);
  t->state = TRANSFER_FAILED;
}

/* This endpoint cannot serve the request: go on to the next, if any. */
static void
transfer_next_endpoint (struct transfer *t, struct husk_error *err)
{
  if (t->fatal || t->endpoint + 1 >= t->n_endpoints)
    {
      transfer_fail (t, err);
      return;
    }
  husk_debug ("registry: %s: %s: %s; trying the next endpoint", t->what, transfer_endpoint (t)->base_url,
              err->msg);
  husk_error_free (&err);
  t->endpoint++;
  t->attempt = 0;
  t->fresh_auth = false;
  free (t->authorization);
  t->authorization = NULL;
  if (t->is_blob && t->file.written > 0)
    t->file.restart = true; /* another server: do not splice its bytes onto these */
  t->state = TRANSFER_READY;
}

static void
transfer_retry (struct transfer *t, struct husk_error *err, long retry_after_s)
{
  unsigned delay;

  if (t->attempt >= t->client->opts.retries)
    {
      transfer_next_endpoint (t, err);
      return;
    }
  t->attempt++;
  delay = registry_retry_delay_ms (t->client, t->attempt, retry_after_s);
  husk_debug ("registry: %s: %s; retry %u in %u ms", t->what, err->msg, t->attempt, delay);
  husk_error_free (&err);
  t->wake_ms = registry_now_ms () + delay;
  t->state = TRANSFER_WAITING;
}

static struct husk_error *
http_error (struct transfer *t, long status)
{
  struct husk_error *err = NULL;
  bool manifest = !t->is_blob;
  const char *fallback = status == 401   ? "unauthorized: authentication required"
                         : status == 403 ? "denied: requested access to the resource is denied"
                         : status == 404 ? (manifest ? "manifest unknown" : "blob unknown")
                                         : NULL;
  cleanup_free char *generic = xasprintf ("HTTP status %ld", status);
  cleanup_free char *text
      = registry_error_from_body (t->resp.body.data, t->resp.body.len, fallback ? fallback : generic);

  if (t->body_cut)
    husk_error_make (&err, 0, "HTTP status %ld: %s (error body cut: over %u KiB or %u s)", status, text,
                     ERROR_BODY_MAX >> 10, ERROR_BODY_TIME_MS / 1000);
  else if (manifest && status == 404 && strcmp (text, "manifest unknown") != 0)
    husk_error_make (&err, 0, "manifest unknown (%s)", text);
  else
    husk_error_make (&err, 0, "%s", text);
  return err;
}

static void
transfer_answer_challenge (struct transfer *t)
{
  const struct hosts_endpoint *ep = transfer_endpoint (t);
  struct husk_error *err = NULL;
  char *authorization = NULL;
  int rc;

  if (t->fresh_auth)
    {
      /* Credentials we just obtained were refused: they are wrong. */
      registry_auth_forget (t->client, ep->base_url, t->scope);
      transfer_next_endpoint (t, http_error (t, 401));
      return;
    }
  if (t->authorization)
    registry_auth_forget (t->client, ep->base_url, t->scope); /* expired */
  rc = registry_auth_answer (t->client, ep, t->scope, t->resp.www_authenticate, &authorization, &err);
  if (rc <= 0)
    {
      transfer_next_endpoint (t, rc < 0 ? err : http_error (t, 401));
      return;
    }
  free (t->authorization);
  t->authorization = authorization;
  t->fresh_auth = true;
  t->state = TRANSFER_READY;
}

static void
transfer_finish_blob (struct transfer *t)
{
  struct file_sink *file = &t->file;
  char got[DIGEST_STR_SIZE];
  struct husk_error *err = NULL;

  if (file->written != file->size)
    {
      husk_error_make (&err, 0, "size mismatch (got %llu bytes, want %llu)",
                       (unsigned long long) file->written, (unsigned long long) file->size);
      t->fatal = true;
      transfer_fail (t, err);
      return;
    }
  digest_ctx_finish (file->ctx, got);
  file->ctx = NULL;
  if (strcmp (got, file->digest) == 0)
    {
      file_start_writeback (file);
      t->state = TRANSFER_DONE;
      return;
    }
  if (file->from_existing)
    {
      /* The bytes we resumed from were not this blob's: start over once. */
      husk_debug ("registry: %s: partial file was wrong; fetching it whole", t->what);
      file->restart = true;
      t->state = TRANSFER_READY;
      return;
    }
  husk_error_make (&err, 0, "digest mismatch (got %s)", got);
  t->fatal = true;
  transfer_fail (t, err);
}

static void
transfer_finish_http (struct transfer *t, long status)
{
  if (status == 401)
    transfer_answer_challenge (t);
  else if (status == 429 || status >= 500)
    transfer_retry (t, http_error (t, status), t->resp.retry_after_s);
  else if (status < 200 || status >= 300 || (t->is_blob && status != 200 && status != 206))
    transfer_next_endpoint (t, http_error (t, status));
  else if (t->is_blob)
    transfer_finish_blob (t);
  else
    t->state = TRANSFER_DONE;
}

static void
transfer_finish (struct transfer *t, CURLcode code, CURLM *multi)
{
  struct husk_error *err = steal_pointer (&t->error);

  if (code == CURLE_WRITE_ERROR && t->body_cut)
    code = CURLE_OK; /* the error body was cut on purpose: the status is the answer */
  if (code != CURLE_OK && err == NULL)
    registry_transport_error (t->easy, code, t->errbuf, &err);
  if (code == CURLE_OK)
    {
      long status = response_status (t);
      transfer_release_easy (t, multi);
      transfer_finish_http (t, status);
    }
  else
    {
      bool retryable = registry_transport_error_is_retryable (code) || t->file.restart;
      transfer_release_easy (t, multi);
      if (t->fatal)
        transfer_fail (t, err);
      else if (retryable)
        transfer_retry (t, err, 0);
      else
        transfer_next_endpoint (t, err);
      return;
    }
  husk_error_free (&err);
}

/* Called before each start: a restart drops the partial file. */
static int
transfer_prepare (struct transfer *t)
{
  struct husk_error *err = NULL;

  if (!t->is_blob || !t->file.restart)
    return 0;
  if (file_reset (&t->file, &err) < 0)
    {
      t->fatal = true;
      transfer_fail (t, err);
      return -1;
    }
  return 0;
}

static bool
transfer_startable (const struct transfer *t, long long now)
{
  return t->state == TRANSFER_READY || (t->state == TRANSFER_WAITING && t->wake_ms <= now);
}

static size_t
start_ready (struct transfer **ts, size_t n, size_t running, unsigned parallel, CURLM *multi)
{
  long long now = registry_now_ms ();

  for (size_t i = 0; i < n && running < parallel; i++)
    if (transfer_startable (ts[i], now) && transfer_prepare (ts[i]) == 0)
      {
        transfer_start (ts[i], multi);
        running++;
      }
  return running;
}

/* Often enough that a cancelled caller is noticed soon. */
#define CANCEL_POLL_MS 500

/* How long the loop may sleep: until the next backoff ends, at most 1 s. */
static int
poll_timeout_ms (struct transfer **ts, size_t n)
{
  long long now = registry_now_ms ();
  long long timeout = CANCEL_POLL_MS;

  for (size_t i = 0; i < n; i++)
    {
      if (ts[i]->state == TRANSFER_READY)
        return 0;
      if (ts[i]->state == TRANSFER_WAITING && ts[i]->wake_ms - now < timeout)
        timeout = ts[i]->wake_ms - now;
    }
  return timeout < 0 ? 0 : (int) timeout;
}

/* Error bodies still coming ERROR_BODY_TIME_MS after their headers (a
 * server that sends a status and then drips, or nothing): cut, and the
 * status is the answer.  Returns how many were cut. */
static size_t
cut_slow_error_bodies (struct transfer **ts, size_t n, CURLM *multi, size_t *running)
{
  long long now = registry_now_ms ();
  size_t cut = 0;

  for (size_t i = 0; i < n; i++)
    {
      struct transfer *t = ts[i];
      long status;
      if (t->state != TRANSFER_RUNNING || t->error_body_ms == 0
          || now - t->error_body_ms <= ERROR_BODY_TIME_MS)
        continue;
      t->body_cut = true;
      status = response_status (t);
      transfer_release_easy (t, multi);
      (*running)--;
      transfer_finish_http (t, status);
      cut++;
    }
  return cut;
}

static size_t
collect_finished (CURLM *multi, size_t *running)
{
  size_t finished = 0;
  CURLMsg *msg;
  int left;

  while ((msg = curl_multi_info_read (multi, &left)) != NULL)
    {
      struct transfer *t = NULL;
      if (msg->msg != CURLMSG_DONE)
        continue;
      curl_easy_getinfo (msg->easy_handle, CURLINFO_PRIVATE, (char **) &t);
      (*running)--;
      transfer_finish (t, msg->data.result, multi);
      finished++;
    }
  return finished;
}

static struct transfer *
first_in_state (struct transfer **ts, size_t n, enum transfer_state state)
{
  for (size_t i = 0; i < n; i++)
    if (ts[i]->state == state)
      return ts[i];
  return NULL;
}

static bool
transfers_cancelled (struct transfer **ts, size_t n)
{
  const struct registry_options *opts = n ? &ts[0]->client->opts : NULL;

  return opts && opts->cancelled && opts->cancelled (opts->cancelled_user);
}

/* Runs every transfer to DONE, or stops at the first FAILED one, or when
 * the caller cancels. */
static int
run_transfers (struct transfer **ts, size_t n, unsigned parallel, struct husk_error **err)
{
  CURLM *multi = curl_multi_init ();
  size_t running = 0;
  struct transfer *failed = NULL;
  bool cancelled = false;

  if (multi == NULL)
    abort ();
  while ((failed = first_in_state (ts, n, TRANSFER_FAILED)) == NULL)
    {
      int still_running = 0;
      bool all_done = true;
      for (size_t i = 0; i < n; i++)
        all_done = all_done && ts[i]->state == TRANSFER_DONE;
      if (all_done || (cancelled = transfers_cancelled (ts, n)))
        break;
      running = start_ready (ts, n, running, parallel, multi);
      curl_multi_perform (multi, &still_running);
      if (collect_finished (multi, &running) > 0 || cut_slow_error_bodies (ts, n, multi, &running) > 0)
        continue;
      curl_multi_poll (multi, NULL, 0, poll_timeout_ms (ts, n), NULL);
    }
  for (size_t i = 0; i < n; i++)
    transfer_release_easy (ts[i], multi);
  curl_multi_cleanup (multi);
  if (cancelled)
    return husk_error_make (err, ECANCELED, "transfer cancelled by the caller");
  if (failed == NULL)
    return 0;
  husk_error_free (err);
  *err = steal_pointer (&failed->error);
  return -1;
}

/* --- manifests --------------------------------------------------------- */

static const char *const known_manifest_types[] = {
  REGISTRY_MEDIA_OCI_INDEX,
  REGISTRY_MEDIA_OCI_MANIFEST,
  REGISTRY_MEDIA_DOCKER_LIST,
  REGISTRY_MEDIA_DOCKER_MANIFEST,
};

static const char *
known_manifest_type (const char *media_type)
{
  for (size_t i = 0; media_type && i < sizeof known_manifest_types / sizeof known_manifest_types[0]; i++)
    if (strcmp (media_type, known_manifest_types[i]) == 0)
      return known_manifest_types[i];
  return NULL;
}

/* Content-Type without parameters; NULL when it is absent or says nothing
 * (registries behind some proxies answer application/json). */
static char *
specific_content_type (const char *content_type)
{
  char *type;
  size_t n;

  if (content_type == NULL)
    return NULL;
  n = strcspn (content_type, "; ");
  type = strndup (content_type, n);
  if (type == NULL)
    abort ();
  if (*type == '\0' || strcmp (type, "application/json") == 0 || strcmp (type, "text/plain") == 0
      || strcmp (type, "application/octet-stream") == 0)
    {
      free (type);
      return NULL;
    }
  return type;
}

/* The media type from the document itself, for registries that send none. */
static const char *
media_type_from_json (const char *data, size_t len, const char **unknown, json_t **doc_out)
{
  json_t *doc = json_loadb (data, len, 0, NULL);
  const char *declared = json_string_value (json_object_get (doc, "mediaType"));
  const char *found = NULL;

  *doc_out = doc;
  *unknown = NULL;
  if (json_integer_value (json_object_get (doc, "schemaVersion")) == 1)
    *unknown = "application/vnd.docker.distribution.manifest.v1+json";
  else if (declared)
    {
      found = known_manifest_type (declared);
      if (found == NULL)
        *unknown = declared;
    }
  else if (json_is_array (json_object_get (doc, "manifests")))
    found = REGISTRY_MEDIA_OCI_INDEX;
  else if (json_is_object (json_object_get (doc, "config")))
    found = REGISTRY_MEDIA_OCI_MANIFEST;
  return found;
}

static int
manifest_media_type (const char *content_type, const char *data, size_t len, char **out,
                     struct husk_error **err)
{
  cleanup_free char *type = specific_content_type (content_type);
  const char *found = known_manifest_type (type);
  const char *unknown = NULL;
  json_t *doc = NULL;

  if (found == NULL && type == NULL)
    found = media_type_from_json (data, len, &unknown, &doc);
  if (found == NULL && unknown == NULL)
    unknown = type ? type : "(none)";
  if (found == NULL)
    husk_error_make (err, 0, "unsupported media type %s", unknown);
  json_decref (doc);
  if (found == NULL)
    return -1;
  *out = xstrdup (found);
  return 0;
}

static int
manifest_from_transfer (struct transfer *t, const char *want_digest, struct registry_manifest **out,
                        struct husk_error **err)
{
  cleanup_free struct registry_manifest *m = xcalloc (1, sizeof *m);
  const char *header_digest = t->resp.docker_digest;

  digest_of_buffer (t->resp.body.data ? t->resp.body.data : "", t->resp.body.len, m->digest);
  if (want_digest && strcmp (want_digest, m->digest) != 0)
    return husk_error_make (err, 0, "%s: digest mismatch (got %s)", t->what, m->digest);
  if (header_digest && digest_is_valid (header_digest) && strcmp (header_digest, m->digest) != 0)
    return husk_error_make (err, 0, "%s: registry says the digest is %s but the content is %s", t->what,
                            header_digest, m->digest);
  if (manifest_media_type (t->resp.content_type, t->resp.body.data, t->resp.body.len, &m->media_type, err)
      < 0)
    return husk_error_wrap (err, "%s", t->what);
  m->size = t->resp.body.len;
  m->data = t->resp.body.data ? steal_pointer (&t->resp.body.data) : xstrdup ("");
  *out = steal_pointer (&m);
  return 0;
}

int
registry_fetch_manifest (struct registry_client *client, const struct reference *ref, const char *digest,
                         struct registry_manifest **out, struct husk_error **err)
{
  struct hosts_endpoint *eps = NULL;
  size_t n_eps = hosts_config_endpoints (client->opts.hosts, ref->domain, &eps);
  const char *want_digest = digest ? digest : ref->digest;
  cleanup_free char *repo = reference_repository (ref);
  struct transfer t;
  struct transfer *ts[] = { &t };
  int rc;

  if (want_digest && digest_validate (want_digest, repo, err) < 0)
    {
      hosts_endpoints_free (eps, n_eps);
      return -1;
    }
  transfer_init (&t, client, ref, eps, n_eps,
                 digest ? xasprintf ("%s@%s", repo, digest) : reference_string (ref));
  t.kind = "manifests";
  t.object = want_digest ? want_digest : ref->tag;
  rc = run_transfers (ts, 1, 1, err);
  if (rc == 0)
    rc = manifest_from_transfer (&t, want_digest, out, err);
  transfer_clear (&t);
  hosts_endpoints_free (eps, n_eps);
  return rc;
}

int
registry_resolve (struct registry_client *client, const struct reference *ref, const char *platform,
                  struct registry_manifest **manifest_out, struct registry_manifest **index_out,
                  struct husk_error **err)
{
  struct registry_manifest *top = NULL, *chosen = NULL;
  char digest[DIGEST_STR_SIZE];

  if (index_out)
    *index_out = NULL;
  if (registry_fetch_manifest (client, ref, NULL, &top, err) < 0)
    return -1;
  if (!registry_media_type_is_index (top->media_type))
    {
      *manifest_out = top;
      return 0;
    }
  if (registry_select_platform (top->data, platform, digest, err) < 0)
    {
      cleanup_free char *name = reference_string (ref);
      registry_manifest_free (top);
      return husk_error_wrap (err, "%s", name);
    }
  if (registry_fetch_manifest (client, ref, digest, &chosen, err) < 0)
    {
      registry_manifest_free (top);
      return -1;
    }
  if (registry_media_type_is_index (chosen->media_type))
    {
      registry_manifest_free (top);
      registry_manifest_free (chosen);
      return husk_error_make (err, 0, "%s/%s@%s: an index inside an index is not supported", ref->domain,
                              ref->path, digest);
    }
  *manifest_out = chosen;
  if (index_out)
    *index_out = top;
  else
    registry_manifest_free (top);
  return 0;
}

/* --- blobs ------------------------------------------------------------- */

static int
blob_transfer_init (struct transfer *t, struct registry_client *client, const struct reference *ref,
                    const struct hosts_endpoint *eps, size_t n_eps, const struct registry_blob_request *blob,
                    struct husk_error **err)
{
  cleanup_free char *repo = reference_repository (ref);

  transfer_init (t, client, ref, eps, n_eps,
                 xasprintf ("%s: blob %s", repo, blob->digest ? blob->digest : "?"));
  t->kind = "blobs";
  t->object = blob->digest;
  t->is_blob = true;
  t->file.fd = blob->out_fd;
  t->file.digest = blob->digest;
  t->file.size = blob->size;
  if (digest_validate (blob->digest, t->what, err) < 0)
    return -1;
  if (file_adopt_existing (&t->file, err) < 0)
    return husk_error_wrap (err, "%s", t->what);
  return 0;
}

/* A file that was already complete needs no request, only the check. */
static void
blob_check_complete (struct transfer *t)
{
  if (t->file.written == t->file.size && t->file.from_existing)
    transfer_finish_blob (t);
}

int
registry_fetch_blobs (struct registry_client *client, const struct reference *ref,
                      const struct registry_blob_request *blobs, size_t n, registry_progress_cb progress,
                      void *user, struct husk_error **err)
{
  struct hosts_endpoint *eps = NULL;
  size_t n_eps = hosts_config_endpoints (client->opts.hosts, ref->domain, &eps);
  struct transfer *storage = xcalloc (n, sizeof *storage);
  struct transfer **ts = xcalloc (n, sizeof *ts);
  size_t n_init = 0;
  int rc = 0;

  for (; n_init < n && rc == 0; n_init++)
    {
      ts[n_init] = &storage[n_init];
      rc = blob_transfer_init (ts[n_init], client, ref, eps, n_eps, &blobs[n_init], err);
      ts[n_init]->index = n_init;
      ts[n_init]->progress = progress;
      ts[n_init]->progress_user = user;
      if (rc == 0 && progress && ts[n_init]->file.written > 0)
        progress (n_init, ts[n_init]->file.written, ts[n_init]->file.size, user);
      if (rc == 0)
        blob_check_complete (ts[n_init]);
    }
  if (rc == 0)
    rc = run_transfers (ts, n, client->opts.parallelism, err);
  for (size_t i = 0; i < n_init; i++)
    transfer_clear (ts[i]);
  free (ts);
  free (storage);
  hosts_endpoints_free (eps, n_eps);
  return rc;
}

int
registry_fetch_blob (struct registry_client *client, const struct reference *ref, const char *digest,
                     uint64_t expected_size, int out_fd, registry_progress_cb progress, void *user,
                     struct husk_error **err)
{
  struct registry_blob_request blob = { .digest = digest, .size = expected_size, .out_fd = out_fd };

  return registry_fetch_blobs (client, ref, &blob, 1, progress, user, err);
}
