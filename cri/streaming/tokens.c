/* One-time tokens (see tokens.h): a short list under a mutex; expired
 * entries go whenever the list is touched. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "cri/streaming/tokens.h"
#include "husk/util.h"

struct token_entry
{
  char token[STREAMING_TOKEN_LEN + 1];
  int64_t expires_ms;
  void *value;
};

struct streaming_tokens
{
  pthread_mutex_t lock;
  struct token_entry *entries;
  size_t n, max;
  int64_t ttl_ms;
  void (*free_value) (void *);
};

static int64_t
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct streaming_tokens *
streaming_tokens_new (size_t max, int64_t ttl_ms, void (*free_value) (void *))
{
  struct streaming_tokens *t = xcalloc (1, sizeof *t);

  pthread_mutex_init (&t->lock, NULL);
  t->max = max;
  t->ttl_ms = ttl_ms;
  t->free_value = free_value;
  t->entries = xcalloc (max ? max : 1, sizeof *t->entries);
  return t;
}

void
streaming_tokens_free (struct streaming_tokens *t)
{
  if (t == NULL)
    return;
  for (size_t i = 0; i < t->n; i++)
    if (t->free_value)
      t->free_value (t->entries[i].value);
  free (t->entries);
  pthread_mutex_destroy (&t->lock);
  free (t);
}

/* Under the lock. */
static void
drop_expired (struct streaming_tokens *t, int64_t now)
{
  size_t kept = 0;

  for (size_t i = 0; i < t->n; i++)
    {
      if (t->entries[i].expires_ms <= now)
        {
          if (t->free_value)
            t->free_value (t->entries[i].value);
          continue;
        }
      t->entries[kept++] = t->entries[i];
    }
  t->n = kept;
}

int
streaming_tokens_add (struct streaming_tokens *t, void *value, char token[STREAMING_TOKEN_LEN + 1],
                      struct husk_error **err)
{
  unsigned char bytes[STREAMING_TOKEN_LEN / 2];
  int ret = 0;

  if (getrandom (bytes, sizeof bytes, 0) != (ssize_t) sizeof bytes)
    {
      if (t->free_value)
        t->free_value (value);
      return husk_error_make (err, errno, "streaming token: getrandom");
    }
  for (size_t i = 0; i < sizeof bytes; i++)
    snprintf (token + 2 * i, 3, "%02x", bytes[i]);
  pthread_mutex_lock (&t->lock);
  drop_expired (t, now_ms ());
  if (t->n >= t->max)
    ret = husk_error_kind (err, EAGAIN, "streaming server: %zu sessions already waiting for their client",
                           t->n);
  else
    {
      struct token_entry *e = &t->entries[t->n++];
      memcpy (e->token, token, STREAMING_TOKEN_LEN + 1);
      e->expires_ms = now_ms () + t->ttl_ms;
      e->value = value;
    }
  pthread_mutex_unlock (&t->lock);
  if (ret < 0 && t->free_value)
    t->free_value (value);
  return ret;
}

void *
streaming_tokens_take (struct streaming_tokens *t, const char *token)
{
  void *value = NULL;

  pthread_mutex_lock (&t->lock);
  drop_expired (t, now_ms ());
  for (size_t i = 0; i < t->n; i++)
    if (strcmp (t->entries[i].token, token) == 0)
      {
        value = t->entries[i].value;
        t->entries[i] = t->entries[--t->n];
        break;
      }
  pthread_mutex_unlock (&t->lock);
  return value;
}

size_t
streaming_tokens_pending (struct streaming_tokens *t)
{
  size_t n;

  pthread_mutex_lock (&t->lock);
  drop_expired (t, now_ms ());
  n = t->n;
  pthread_mutex_unlock (&t->lock);
  return n;
}
