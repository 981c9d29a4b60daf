/* What `husk image pull` shows while it pulls: one line per layer with
 * its own state and rate ("already exists" for a layer the store had),
 * redrawn in place on a terminal at most every PULL_VIEW_INTERVAL_S, and
 * on anything else one line per layer as it finishes.  The clock is a
 * parameter so that tests can drive it. */
#ifndef HUSK_IMAGE_PULL_PROGRESS_H
#define HUSK_IMAGE_PULL_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "image/pull.h"

#define PULL_VIEW_INTERVAL_S 0.1

enum pull_layer_state
{
  PULL_LAYER_WAITING,
  PULL_LAYER_FETCHING,
  PULL_LAYER_FETCHED,
  PULL_LAYER_EXISTS,
};

struct pull_layer_view
{
  char short_id[13]; /* the first 12 hex digits of the digest */
  enum pull_layer_state state;
  uint64_t done, total;
  double started_s, finished_s; /* first byte, last byte */
};

/* A redraw at most every INTERVAL_S seconds. */
struct rate_limit
{
  double interval_s;
  double last_s;
  bool ever;
};
bool rate_limit_allow (struct rate_limit *limit, double now_s);

struct pull_view
{
  FILE *out;
  bool tty;
  double (*now) (void); /* seconds, monotonic */
  size_t n_layers;
  struct pull_layer_view *layers;
  struct rate_limit redraw;
  unsigned lines_on_screen; /* tty: how far up a redraw moves */
  unsigned redraws;
  bool dirty;
};

void pull_view_init (struct pull_view *view, FILE *out, bool tty, double (*now) (void));
/* A pull_progress_cb: USER is the struct pull_view. */
void pull_view_update (const struct pull_progress *progress, void *user);
/* The last redraw (tty), so the final state is on screen. */
void pull_view_finish (struct pull_view *view);
void pull_view_clear (struct pull_view *view);

/* One layer's line, without a newline: "0123456789ab  already exists",
 * "…  fetching  12.3 MB / 35.1 MB  4.5 MB/s", "…  done  35.1 MB in 1.2 s
 * (29.3 MB/s)". */
void pull_layer_line (const struct pull_layer_view *layer, double now_s, char *buf, size_t size);
#endif
