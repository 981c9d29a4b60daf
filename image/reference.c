/* Image reference parsing with docker's normalisation: default domain
 * docker.io, "library/" for official images, default tag "latest".  The
 * grammar is distribution's (name components, tag, digest), checked by hand
 * on short strings rather than with regular expressions. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/digest.h"
#include "image/reference.h"

static bool
is_alnum (char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool
is_lower_alnum (char c)
{
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool
is_word (char c)
{
  return is_alnum (c) || c == '_';
}

static bool
all_digits (const char *s, size_t n)
{
  if (n == 0)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!(s[i] >= '0' && s[i] <= '9'))
      return false;
  return true;
}

/* [A-Za-z0-9] | [A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9] */
static bool
domain_component_is_valid (const char *s, size_t n)
{
  if (n == 0 || !is_alnum (s[0]) || !is_alnum (s[n - 1]))
    return false;
  for (size_t i = 0; i < n; i++)
    if (!is_alnum (s[i]) && s[i] != '-')
      return false;
  return true;
}

static bool
host_is_valid (const char *s, size_t n)
{
  size_t start = 0;

  if (n > 0 && s[0] == '[')
    {
      /* An IPv6 literal: hex digits, colons and dots for an embedded v4. */
      if (n < 3 || s[n - 1] != ']')
        return false;
      for (size_t i = 1; i + 1 < n; i++)
        if (!isxdigit ((unsigned char) s[i]) && s[i] != ':' && s[i] != '.')
          return false;
      return true;
    }
  for (size_t i = 0; i <= n; i++)
    if (i == n || s[i] == '.')
      {
        if (!domain_component_is_valid (s + start, i - start))
          return false;
        start = i + 1;
      }
  return true;
}

bool
reference_domain_is_valid (const char *s)
{
  size_t n = strlen (s);
  const char *port = NULL;

  if (n > 0 && s[0] == '[')
    {
      const char *close = strchr (s, ']');
      if (close == NULL)
        return false;
      if (close[1] == ':')
        port = close + 1;
      else if (close[1] != '\0')
        return false;
    }
  else
    port = strchr (s, ':');
  if (port == NULL)
    return host_is_valid (s, n);
  return host_is_valid (s, (size_t) (port - s)) && all_digits (port + 1, strlen (port + 1));
}

/* [a-z0-9]+ ((\.|_|__|-+)[a-z0-9]+)* */
static bool
path_component_is_valid (const char *s, size_t n)
{
  size_t i = 0;

  for (;;)
    {
      size_t run = 0, sep_start;

      while (i < n && is_lower_alnum (s[i]))
        i++, run++;
      if (run == 0)
        return false;
      if (i == n)
        return true;
      sep_start = i;
      if (s[i] == '.')
        i++;
      else if (s[i] == '_')
        i += (i + 1 < n && s[i + 1] == '_') ? 2 : 1;
      else if (s[i] == '-')
        while (i < n && s[i] == '-')
          i++;
      if (i == sep_start)
        return false;
    }
}

static bool
has_upper (const char *s)
{
  for (; *s; s++)
    if (*s >= 'A' && *s <= 'Z')
      return true;
  return false;
}

/* [\w][\w.-]{0,127} */
static bool
tag_is_valid (const char *s)
{
  size_t n = strlen (s);

  if (n == 0 || n > REFERENCE_TAG_MAX || !is_word (s[0]))
    return false;
  for (size_t i = 1; i < n; i++)
    if (!is_word (s[i]) && s[i] != '.' && s[i] != '-')
      return false;
  return true;
}

static bool
is_image_id (const char *s)
{
  if (strlen (s) != DIGEST_SHA256_HEX_LEN)
    return false;
  for (; *s; s++)
    if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
      return false;
  return true;
}

static int
invalid (struct husk_error **err, const char *text, const char *why)
{
  return husk_error_make (err, 0, "invalid reference \"%s\": %s", text, why);
}

/* docker's rule: the first component is a registry host only if it looks
 * like one (a dot, a port, or "localhost"); otherwise the name is on
 * docker.io.  An upper-case first component is also taken as a host, since
 * it cannot be a repository. */
static void
split_domain (const char *name, char **domain, char **remainder)
{
  const char *slash = strchr (name, '/');
  cleanup_free char *first = NULL;

  if (slash != NULL)
    {
      first = strndup (name, (size_t) (slash - name));
      if (first == NULL)
        abort ();
    }
  if (first == NULL
      || (strpbrk (first, ".:") == NULL && strcmp (first, "localhost") != 0 && !has_upper (first)))
    {
      *domain = xstrdup (REFERENCE_DEFAULT_DOMAIN);
      *remainder = xstrdup (name);
      return;
    }
  *domain = steal_pointer (&first);
  *remainder = xstrdup (slash + 1);
}

static void
normalise_docker_hub (struct reference *ref)
{
  if (strcmp (ref->domain, "index.docker.io") == 0)
    {
      free (ref->domain);
      ref->domain = xstrdup (REFERENCE_DEFAULT_DOMAIN);
    }
  if (strcmp (ref->domain, REFERENCE_DEFAULT_DOMAIN) == 0 && strchr (ref->path, '/') == NULL)
    {
      char *with_library = xasprintf ("library/%s", ref->path);
      free (ref->path);
      ref->path = with_library;
    }
}

static int
check_path (const char *text, const char *path, struct husk_error **err)
{
  const char *start = path;

  if (has_upper (path))
    return invalid (err, text, "repository name must be lowercase");
  for (const char *p = path;; p++)
    if (*p == '/' || *p == '\0')
      {
        size_t n = (size_t) (p - start);
        if (n == 0)
          return invalid (err, text, "repository name has an empty path component");
        if (!path_component_is_valid (start, n))
          {
            cleanup_free char *why
                = xasprintf ("path component \"%.*s\" must be lowercase letters and digits, "
                             "separated by '.', '_', '__' or dashes",
                             (int) n, start);
            return invalid (err, text, why);
          }
        if (*p == '\0')
          return 0;
        start = p + 1;
      }
}

static int
split_digest (const char *text, char *name, struct reference *ref, struct husk_error **err)
{
  char *at = strchr (name, '@');

  if (at == NULL)
    return 0;
  *at = '\0';
  if (digest_validate (at + 1, "digest", err) < 0)
    return husk_error_wrap (err, "invalid reference \"%s\"", text);
  ref->digest = xstrdup (at + 1);
  return 0;
}

static int
split_tag (const char *text, char *name, struct reference *ref, struct husk_error **err)
{
  char *colon = strrchr (name, ':');
  char *slash = strrchr (name, '/');

  if (colon == NULL || (slash != NULL && colon < slash))
    return 0;
  *colon = '\0';
  if (!tag_is_valid (colon + 1))
    {
      if (colon[1] == '\0')
        return invalid (err, text, "empty tag");
      return invalid (err, text,
                      "tag must be at most 128 letters, digits, '_', '.' or '-', "
                      "not starting with '.' or '-'");
    }
  ref->tag = xstrdup (colon + 1);
  return 0;
}

static int
parse_into (const char *text, struct reference *ref, struct husk_error **err)
{
  cleanup_free char *name = xstrdup (text);

  if (*text == '\0')
    return invalid (err, text, "empty reference");
  if (is_image_id (text))
    return invalid (err, text, "a 64-character hex string is an image ID, not a reference");
  if (split_digest (text, name, ref, err) < 0 || split_tag (text, name, ref, err) < 0)
    return -1;
  if (*name == '\0')
    return invalid (err, text, "empty repository name");
  split_domain (name, &ref->domain, &ref->path);
  if (!reference_domain_is_valid (ref->domain))
    {
      cleanup_free char *why = xasprintf ("\"%s\" is not a valid registry host", ref->domain);
      return invalid (err, text, why);
    }
  if (check_path (text, ref->path, err) < 0)
    return -1;
  normalise_docker_hub (ref);
  if (strlen (ref->domain) + 1 + strlen (ref->path) > REFERENCE_NAME_MAX)
    return invalid (err, text, "repository name must not be longer than 255 characters");
  if (ref->tag == NULL && ref->digest == NULL)
    ref->tag = xstrdup (REFERENCE_DEFAULT_TAG);
  return 0;
}

int
reference_parse (const char *text, struct reference **out, struct husk_error **err)
{
  struct reference *ref = xcalloc (1, sizeof *ref);

  if (parse_into (text, ref, err) < 0)
    {
      reference_free (ref);
      return -1;
    }
  *out = ref;
  return 0;
}

void
reference_free (struct reference *ref)
{
  if (ref == NULL)
    return;
  free (ref->domain);
  free (ref->path);
  free (ref->tag);
  free (ref->digest);
  free (ref);
}

struct reference *
reference_dup (const struct reference *ref)
{
  struct reference *copy = xcalloc (1, sizeof *copy);

  copy->domain = xstrdup (ref->domain);
  copy->path = xstrdup (ref->path);
  copy->tag = xstrdup (ref->tag);
  copy->digest = xstrdup (ref->digest);
  return copy;
}

char *
reference_repository (const struct reference *ref)
{
  return xasprintf ("%s/%s", ref->domain, ref->path);
}

static char *
with_tag_and_digest (const char *name, const struct reference *ref)
{
  return xasprintf ("%s%s%s%s%s", name, ref->tag ? ":" : "", ref->tag ? ref->tag : "", ref->digest ? "@" : "",
                    ref->digest ? ref->digest : "");
}

char *
reference_string (const struct reference *ref)
{
  cleanup_free char *name = reference_repository (ref);

  return with_tag_and_digest (name, ref);
}

char *
reference_familiar (const struct reference *ref)
{
  cleanup_free char *name = NULL;

  if (strcmp (ref->domain, REFERENCE_DEFAULT_DOMAIN) != 0)
    name = reference_repository (ref);
  else if (husk_str_has_prefix (ref->path, "library/") && strchr (ref->path + 8, '/') == NULL)
    name = xstrdup (ref->path + 8);
  else
    name = xstrdup (ref->path);
  return with_tag_and_digest (name, ref);
}
