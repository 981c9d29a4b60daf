/* The metrics endpoint: plain HTTP/1.1 on its own thread, one request per
 * connection, GET or HEAD /metrics answered with the Prometheus text
 * format 0.0.4 that RENDER writes; anything else gets 404, 405 or 400.
 * Request heads are read by the streaming server's front door
 * (cri/streaming/http.h: a deadline for the whole head, a bounded number
 * of clients sending one, no SIGPIPE), a few scrapes are served at once
 * on threads of their own, and more get 503. */
#ifndef HUSK_CRI_METRICS_HTTP_H
#define HUSK_CRI_METRICS_HTTP_H

#include "cri/metrics.h"
#include "husk/error.h"

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct metrics_http;

typedef void (*metrics_render_fn) (struct prom_buf *b, void *user);

/* Listens on ADDRESS ("HOST:PORT", "[V6]:PORT", ":PORT" for every
 * address; port 0 picks a free one) and serves until stopped. */
int metrics_http_start (const char *address, metrics_render_fn render, void *user, struct metrics_http **out,
                        struct husk_error **err);
/* "HOST:PORT" as bound (the port a 0 got). */
const char *metrics_http_address (const struct metrics_http *srv);
/* Stops the thread, closes the socket, frees SRV.  NULL is a no-op. */
void metrics_http_stop (struct metrics_http *srv);

/* Parses the request head HEAD (up to the blank line): the status of the
 * answer (200, 400, 404 or 405) and whether a body goes with it (not for
 * HEAD).  Separate for its unit test. */
int metrics_http_route (const char *head, bool *with_body);

#endif
