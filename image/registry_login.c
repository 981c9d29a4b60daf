/* `husk image login`: ask the registry's /v2/ whether the credentials
 * work, as podman login does, before they are written down. */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/registry_internal.h"

struct login_response
{
  char *www_authenticate;
  char body[512];
  size_t body_len;
  bool body_cut; /* the body went on past BODY: the transfer was stopped there */
};

static size_t
on_login_header (char *line, size_t size, size_t nitems, void *userdata)
{
  struct login_response *resp = userdata;
  size_t len = size * nitems;
  static const char name[] = "www-authenticate:";

  if (len > sizeof name - 1 && strncasecmp (line, name, sizeof name - 1) == 0)
    {
      const char *start = line + sizeof name - 1;
      size_t n = len - (sizeof name - 1);
      while (n > 0 && (*start == ' ' || *start == '\t'))
        start++, n--;
      while (n > 0 && (start[n - 1] == '\r' || start[n - 1] == '\n' || start[n - 1] == ' '))
        n--;
      free (resp->www_authenticate);
      resp->www_authenticate = strndup (start, n);
    }
  return len;
}

static size_t
on_login_body (char *data, size_t size, size_t nmemb, void *userdata)
{
  struct login_response *resp = userdata;
  size_t len = size * nmemb;
  size_t room = sizeof resp->body - 1 - resp->body_len;
  size_t take = len < room ? len : room;

  memcpy (resp->body + resp->body_len, data, take);
  resp->body_len += take;
  resp->body[resp->body_len] = '\0';
  if (take < len)
    {
      /* The rest says nothing more: stop reading it (an endless body
       * would hold the login until its deadline); the status stands. */
      resp->body_cut = true;
      return 0;
    }
  return len;
}

/* GET BASE_URL/v2/ with AUTHORIZATION (may be NULL); *STATUS. */
static int
get_v2 (struct registry_client *client, const struct hosts_endpoint *ep, const char *authorization,
        struct login_response *resp, long *status, struct husk_error **err)
{
  cleanup_free char *url = xasprintf ("%s/v2/", ep->base_url);
  cleanup_free char *header = authorization ? xasprintf ("Authorization: %s", authorization) : NULL;
  CURL *easy = registry_easy_new (client, url, ep->insecure, (long) client->opts.request_timeout_ms);
  struct curl_slist *headers = header ? curl_slist_append (NULL, header) : NULL;
  char errbuf[CURL_ERROR_SIZE] = "";
  CURLcode code;
  int ret = 0;

  free (resp->www_authenticate);
  *resp = (struct login_response){ 0 };
  curl_easy_setopt (easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt (easy, CURLOPT_HEADERFUNCTION, on_login_header);
  curl_easy_setopt (easy, CURLOPT_HEADERDATA, resp);
  curl_easy_setopt (easy, CURLOPT_WRITEFUNCTION, on_login_body);
  curl_easy_setopt (easy, CURLOPT_WRITEDATA, resp);
  curl_easy_setopt (easy, CURLOPT_ERRORBUFFER, errbuf);
  husk_debug ("registry: login GET %s", url);
  code = curl_easy_perform (easy);
  *status = 0;
  if (code == CURLE_WRITE_ERROR && resp->body_cut)
    code = CURLE_OK;
  if (code != CURLE_OK)
    ret = registry_transport_error (easy, code, errbuf, err);
  else
    curl_easy_getinfo (easy, CURLINFO_RESPONSE_CODE, status);
  curl_slist_free_all (headers);
  curl_easy_cleanup (easy);
  return ret;
}

static int
status_error (const struct login_response *resp, long status, struct husk_error **err)
{
  cleanup_free char *fallback
      = xasprintf (status == 401 ? "unauthorized: authentication required" : "HTTP status %ld", status);
  cleanup_free char *text = registry_error_from_body (resp->body, resp->body_len, fallback);

  return husk_error_make (err, 0, "%s", text);
}

static int
check_endpoint (struct registry_client *client, const struct hosts_endpoint *ep, struct husk_error **err)
{
  struct login_response resp = { 0 };
  cleanup_free char *authorization = NULL;
  long status = 0;
  int ret;

  ret = get_v2 (client, ep, NULL, &resp, &status, err);
  if (ret == 0 && status == 401)
    {
      int answered = registry_auth_answer (client, ep, "", resp.www_authenticate, &authorization, err);
      if (answered < 0)
        ret = -1;
      else if (answered == 0)
        ret = husk_error_make (err, 0, "unauthorized: the registry asks for credentials and none were given");
      else if ((ret = get_v2 (client, ep, authorization, &resp, &status, err)) == 0 && status == 401)
        ret = husk_error_make (err, 0, "unauthorized: the registry refused the user name or password");
    }
  if (ret == 0 && status != 200)
    ret = status_error (&resp, status, err);
  free (resp.www_authenticate);
  return ret;
}

int
registry_check_login (struct registry_client *client, const char *domain, struct husk_error **err)
{
  struct hosts_endpoint *eps = NULL;
  size_t n = hosts_config_endpoints (client->opts.hosts, domain, &eps);
  const struct hosts_endpoint *ep = NULL;
  int ret;

  for (size_t i = 0; i < n && ep == NULL; i++)
    if (!eps[i].is_mirror)
      ep = &eps[i];
  if (ep == NULL && n > 0)
    ep = &eps[0];
  if (ep == NULL)
    ret = husk_error_make (err, 0, "no endpoint for %s in the registries config", domain);
  else
    ret = check_endpoint (client, ep, err);
  hosts_endpoints_free (eps, n);
  if (ret < 0)
    return husk_error_wrap (err, "log in to %s", domain);
  return 0;
}
