/* The bounded worker pool behind rpc_server's RPC_SLOW methods: a ring of
 * jobs under one mutex.  Capacity counts running and waiting jobs, so a full
 * pool is known at submit time. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "cri/rpc/pool.h"
#include "husk/util.h"

struct rpc_job
{
  rpc_pool_fn fn;
  void *arg;
};

struct rpc_pool
{
  pthread_mutex_t lock;
  pthread_cond_t work_ready;
  struct rpc_job *ring; /* capacity = workers + queue_max */
  unsigned capacity;
  unsigned head;   /* next job to run */
  unsigned queued; /* waiting in the ring */
  unsigned busy;   /* running */
  bool stopping;
  pthread_t *threads;
  unsigned n_threads;
};

static bool
take_job (struct rpc_pool *pool, struct rpc_job *job)
{
  pthread_mutex_lock (&pool->lock);
  while (pool->queued == 0 && !pool->stopping)
    pthread_cond_wait (&pool->work_ready, &pool->lock);
  if (pool->queued == 0)
    {
      pthread_mutex_unlock (&pool->lock);
      return false;
    }
  *job = pool->ring[pool->head];
  pool->head = (pool->head + 1) % pool->capacity;
  pool->queued--;
  pool->busy++;
  pthread_mutex_unlock (&pool->lock);
  return true;
}

static void *
worker_main (void *arg)
{
  struct rpc_pool *pool = arg;
  struct rpc_job job;

  while (take_job (pool, &job))
    {
      job.fn (job.arg);
      pthread_mutex_lock (&pool->lock);
      pool->busy--;
      pthread_mutex_unlock (&pool->lock);
    }
  return NULL;
}

int
rpc_pool_new (unsigned workers, unsigned queue_max, struct rpc_pool **out, struct husk_error **err)
{
  struct rpc_pool *pool = xcalloc (1, sizeof *pool);

  pthread_mutex_init (&pool->lock, NULL);
  pthread_cond_init (&pool->work_ready, NULL);
  pool->capacity = workers + queue_max;
  pool->ring = xcalloc (pool->capacity, sizeof *pool->ring);
  pool->threads = xcalloc (workers, sizeof *pool->threads);
  for (; pool->n_threads < workers; pool->n_threads++)
    {
      int ret = pthread_create (&pool->threads[pool->n_threads], NULL, worker_main, pool);
      if (ret != 0)
        {
          rpc_pool_free (pool);
          return husk_error_make (err, ret, "start RPC worker thread %u of %u", pool->n_threads + 1, workers);
        }
    }
  *out = pool;
  return 0;
}

int
rpc_pool_submit (struct rpc_pool *pool, rpc_pool_fn fn, void *arg)
{
  int ret = 0;

  pthread_mutex_lock (&pool->lock);
  if (pool->stopping)
    ret = ESHUTDOWN;
  else if (pool->queued + pool->busy >= pool->capacity)
    ret = EAGAIN;
  else
    {
      pool->ring[(pool->head + pool->queued) % pool->capacity] = (struct rpc_job){ fn, arg };
      pool->queued++;
      pthread_cond_signal (&pool->work_ready);
    }
  pthread_mutex_unlock (&pool->lock);
  if (ret == 0)
    return 0;
  errno = ret;
  return -1;
}

void
rpc_pool_free (struct rpc_pool *pool)
{
  if (pool == NULL)
    return;
  pthread_mutex_lock (&pool->lock);
  pool->stopping = true;
  pthread_cond_broadcast (&pool->work_ready);
  pthread_mutex_unlock (&pool->lock);
  for (unsigned i = 0; i < pool->n_threads; i++)
    pthread_join (pool->threads[i], NULL);
  pthread_cond_destroy (&pool->work_ready);
  pthread_mutex_destroy (&pool->lock);
  free (pool->threads);
  free (pool->ring);
  free (pool);
}
