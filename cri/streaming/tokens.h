/* One-time tokens of the streaming server: a random name for a pending
 * session, taken at most once, gone after a time to live. */
#ifndef HUSK_CRI_STREAMING_TOKENS_H
#define HUSK_CRI_STREAMING_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "husk/error.h"

#define STREAMING_TOKEN_LEN 32 /* hex digits of 16 random bytes */

struct streaming_tokens;

/* At most MAX pending at once; each lives TTL_MS.  FREE_VALUE frees a
 * value that expires or is left at the end. */
struct streaming_tokens *streaming_tokens_new (size_t max, int64_t ttl_ms, void (*free_value) (void *));
void streaming_tokens_free (struct streaming_tokens *t);

/* A new token for VALUE in TOKEN (NUL-terminated); on failure (too many
 * pending, no randomness) VALUE is freed. */
int streaming_tokens_add (struct streaming_tokens *t, void *value, char token[STREAMING_TOKEN_LEN + 1],
                          struct husk_error **err);
/* The value of TOKEN, which is then gone; NULL for an unknown, used or
 * expired one. */
void *streaming_tokens_take (struct streaming_tokens *t, const char *token);
size_t streaming_tokens_pending (struct streaming_tokens *t);

#endif
