/* sha256 digests over OpenSSL EVP. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/digest.h"

struct digest_ctx
{
  EVP_MD_CTX *md;
};

static bool
is_lower_hex (const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return s[n] == '\0';
}

bool
digest_is_valid (const char *s)
{
  return s != NULL && strncmp (s, "sha256:", 7) == 0 && strlen (s + 7) == DIGEST_SHA256_HEX_LEN
         && is_lower_hex (s + 7, DIGEST_SHA256_HEX_LEN);
}

int
digest_validate (const char *s, const char *where, struct husk_error **err)
{
  const char *colon;

  if (s == NULL)
    return husk_error_make (err, 0, "%s: missing digest", where);
  if (digest_is_valid (s))
    return 0;
  colon = strchr (s, ':');
  if (colon == NULL)
    return husk_error_make (err, 0, "%s: `%s` is not a digest (want sha256:<64 hex digits>)", where, s);
  if (strncmp (s, "sha256:", 7) != 0)
    return husk_error_make (err, 0, "%s: digest algorithm `%.*s` is not supported (only sha256)", where,
                            (int) (colon - s), s);
  return husk_error_make (err, 0, "%s: `%s` is not a valid sha256 digest (want 64 lowercase hex digits)",
                          where, s);
}

const char *
digest_hex (const char *digest)
{
  return digest + 7;
}

struct digest_ctx *
digest_ctx_new (void)
{
  struct digest_ctx *ctx = xmalloc (sizeof *ctx);

  ctx->md = EVP_MD_CTX_new ();
  if (ctx->md == NULL || EVP_DigestInit_ex (ctx->md, EVP_sha256 (), NULL) != 1)
    abort ();
  return ctx;
}

void
digest_ctx_update (struct digest_ctx *ctx, const void *data, size_t len)
{
  if (EVP_DigestUpdate (ctx->md, data, len) != 1)
    abort ();
}

void
digest_ctx_finish (struct digest_ctx *ctx, char out[DIGEST_STR_SIZE])
{
  static const char hexdigits[] = "0123456789abcdef";
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;

  if (EVP_DigestFinal_ex (ctx->md, md, &md_len) != 1)
    abort ();
  memcpy (out, "sha256:", 7);
  for (unsigned i = 0; i < md_len && i < 32; i++)
    {
      out[7 + 2 * i] = hexdigits[md[i] >> 4];
      out[8 + 2 * i] = hexdigits[md[i] & 0xf];
    }
  out[DIGEST_STR_SIZE - 1] = '\0';
  digest_ctx_free (ctx);
}

void
digest_ctx_free (struct digest_ctx *ctx)
{
  if (ctx == NULL)
    return;
  EVP_MD_CTX_free (ctx->md);
  free (ctx);
}

void
digest_of_buffer (const void *data, size_t len, char out[DIGEST_STR_SIZE])
{
  struct digest_ctx *ctx = digest_ctx_new ();

  digest_ctx_update (ctx, data, len);
  digest_ctx_finish (ctx, out);
}

int
digest_of_file (const char *path, char out[DIGEST_STR_SIZE], size_t *size, struct husk_error **err)
{
  cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC);
  struct digest_ctx *ctx;
  char buf[65536];
  size_t total = 0;

  if (fd < 0)
    return husk_error_make (err, errno, "open `%s`", path);
  ctx = digest_ctx_new ();
  for (;;)
    {
      ssize_t n = read (fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          digest_ctx_free (ctx);
          return husk_error_make (err, errno, "read `%s`", path);
        }
      if (n == 0)
        break;
      digest_ctx_update (ctx, buf, (size_t) n);
      total += (size_t) n;
    }
  digest_ctx_finish (ctx, out);
  if (size)
    *size = total;
  return 0;
}
