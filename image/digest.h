/* Content digests ("sha256:<64 hex>"): validation and streaming hashing
 * with OpenSSL's EVP API.  Every blob husk uses is checked against one. */
#ifndef HUSK_IMAGE_DIGEST_H
#define HUSK_IMAGE_DIGEST_H

#include <stdbool.h>
#include <stddef.h>

#include "husk/error.h"

#define DIGEST_SHA256_HEX_LEN 64
/* "sha256:" + 64 hex + NUL */
#define DIGEST_STR_SIZE (7 + DIGEST_SHA256_HEX_LEN + 1)

/* True when S is "sha256:" followed by exactly 64 lowercase hex digits.
 * (sha512 digests are recognised by digest_validate, which names them.) */
bool digest_is_valid (const char *s);
/* Like digest_is_valid but explains what is wrong; WHERE names the field. */
int digest_validate (const char *s, const char *where, struct husk_error **err);
/* The hex part of a valid digest. */
const char *digest_hex (const char *digest);

struct digest_ctx;
struct digest_ctx *digest_ctx_new (void);
void digest_ctx_update (struct digest_ctx *ctx, const void *data, size_t len);
/* Writes "sha256:<hex>" into out (DIGEST_STR_SIZE bytes) and frees ctx. */
void digest_ctx_finish (struct digest_ctx *ctx, char out[DIGEST_STR_SIZE]);
void digest_ctx_free (struct digest_ctx *ctx);

void digest_of_buffer (const void *data, size_t len, char out[DIGEST_STR_SIZE]);
int digest_of_file (const char *path, char out[DIGEST_STR_SIZE], size_t *size, struct husk_error **err);

#endif
