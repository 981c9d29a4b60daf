/* A fixed set of worker threads with a bounded queue, for the RPC_SLOW
 * handlers of rpc_server: a full pool says so at once instead of letting
 * calls pile up behind a slow registry. */
#ifndef HUSK_CRI_RPC_POOL_H
#define HUSK_CRI_RPC_POOL_H

#include "husk/error.h"

struct rpc_pool;
typedef void (*rpc_pool_fn) (void *arg);

/* At most `workers` jobs run and `queue_max` more wait.  Workers inherit the
 * calling thread's signal mask. */
int rpc_pool_new (unsigned workers, unsigned queue_max, struct rpc_pool **out, struct husk_error **err);

/* Returns 0, or -1 with errno EAGAIN when the pool is full and ESHUTDOWN
 * once rpc_pool_free() has begun. */
int rpc_pool_submit (struct rpc_pool *pool, rpc_pool_fn fn, void *arg);

/* Refuses new jobs, runs the ones already queued, joins the workers. */
void rpc_pool_free (struct rpc_pool *pool);

#endif
