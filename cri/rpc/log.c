/* The log line of each call: method, status, duration, what the service
 * named the call by and, for a failure, its cause.  OK calls log at debug,
 * so a node at info sees only what went wrong; a call the client cancelled
 * is info, a failure the client caused or may retry (NOT_FOUND,
 * INVALID_ARGUMENT, DEADLINE_EXCEEDED, ...) a warning, one husk itself
 * failed at (INTERNAL, UNKNOWN, DATA_LOSS) an error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cri/rpc/internal.h"
#include "husk/util.h"

const char *
rpc_status_name (grpc_status_code code)
{
  static const char *const names[] = {
    [GRPC_STATUS_OK] = "OK",
    [GRPC_STATUS_CANCELLED] = "CANCELLED",
    [GRPC_STATUS_UNKNOWN] = "UNKNOWN",
    [GRPC_STATUS_INVALID_ARGUMENT] = "INVALID_ARGUMENT",
    [GRPC_STATUS_DEADLINE_EXCEEDED] = "DEADLINE_EXCEEDED",
    [GRPC_STATUS_NOT_FOUND] = "NOT_FOUND",
    [GRPC_STATUS_ALREADY_EXISTS] = "ALREADY_EXISTS",
    [GRPC_STATUS_PERMISSION_DENIED] = "PERMISSION_DENIED",
    [GRPC_STATUS_RESOURCE_EXHAUSTED] = "RESOURCE_EXHAUSTED",
    [GRPC_STATUS_FAILED_PRECONDITION] = "FAILED_PRECONDITION",
    [GRPC_STATUS_ABORTED] = "ABORTED",
    [GRPC_STATUS_OUT_OF_RANGE] = "OUT_OF_RANGE",
    [GRPC_STATUS_UNIMPLEMENTED] = "UNIMPLEMENTED",
    [GRPC_STATUS_INTERNAL] = "INTERNAL",
    [GRPC_STATUS_UNAVAILABLE] = "UNAVAILABLE",
    [GRPC_STATUS_DATA_LOSS] = "DATA_LOSS",
    [GRPC_STATUS_UNAUTHENTICATED] = "UNAUTHENTICATED",
  };

  if ((unsigned) code < sizeof names / sizeof names[0] && names[code])
    return names[code];
  return "INVALID_STATUS";
}

enum husk_log_level
rpc_status_log_level (grpc_status_code code)
{
  switch (code)
    {
    case GRPC_STATUS_OK:
      return HUSK_LOG_DEBUG;
    case GRPC_STATUS_CANCELLED:
      return HUSK_LOG_INFO; /* the client went away: its choice */
    case GRPC_STATUS_UNKNOWN:
    case GRPC_STATUS_INTERNAL:
    case GRPC_STATUS_DATA_LOSS:
      return HUSK_LOG_ERROR;
    default:
      return HUSK_LOG_WARNING;
    }
}

void
rpc_call_log_field (struct rpc_call *call, const char *key, const char *value)
{
  unsigned i;

  pthread_mutex_lock (&call->lock);
  for (i = 0; i < call->n_log_fields; i++)
    if (strcmp (call->log_fields[i].key, key) == 0)
      break;
  if (i < RPC_LOG_FIELDS_MAX)
    {
      if (i == call->n_log_fields)
        call->n_log_fields++;
      else
        free ((char *) call->log_fields[i].value);
      call->log_fields[i] = (struct husk_log_field){ .key = key, .value = xstrdup (value) };
    }
  pthread_mutex_unlock (&call->lock);
}

static double
ms_since (const struct timespec *start)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (double) (now.tv_sec - start->tv_sec) * 1e3 + (double) (now.tv_nsec - start->tv_nsec) / 1e6;
}

/* Called under call->lock. */
void
rpc_call_log (struct rpc_call *call, const char *method, grpc_status_code code, const char *msg,
              bool client_gone)
{
  enum husk_log_level level = rpc_status_log_level (code);
  struct husk_log_field fields[4 + RPC_LOG_FIELDS_MAX + 1];
  char duration[32];
  size_t n = 0;

  if (!husk_log_enabled (level))
    return;
  snprintf (duration, sizeof duration, "%.3f", ms_since (&call->arrived));
  fields[n++] = (struct husk_log_field){ "method", method, 0 };
  fields[n++] = (struct husk_log_field){ "status", rpc_status_name (code), 0 };
  fields[n++] = (struct husk_log_field){ "duration_ms", duration, 1 };
  for (unsigned i = 0; i < call->n_log_fields; i++)
    fields[n++] = call->log_fields[i];
  if (code != GRPC_STATUS_OK)
    fields[n++] = (struct husk_log_field){ "error", msg ? msg : "", 0 };
  if (client_gone)
    fields[n++] = (struct husk_log_field){ "client", "gone", 0 };
  husk_log_fields (level, fields, n, code == GRPC_STATUS_OK ? "rpc" : "rpc failed");
}

void
rpc_call_log_started (const char *method)
{
  struct husk_log_field fields[] = { { "method", method, 0 } };

  husk_log_fields (HUSK_LOG_DEBUG, fields, 1, "rpc stream started");
}
