/* The pull progress view: per-layer state, a redraw rate limit, and the
 * lines drawn from them. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "husk/util.h"
#include "image/human.h"
#include "image/pull_progress.h"

bool
rate_limit_allow (struct rate_limit *limit, double now_s)
{
  if (limit->ever && now_s - limit->last_s < limit->interval_s)
    return false;
  limit->ever = true;
  limit->last_s = now_s;
  return true;
}

static void
human_rate (uint64_t bytes, double seconds, char *buf, size_t size)
{
  char amount[32];

  if (seconds < 0.001)
    seconds = 0.001;
  human_size ((uint64_t) ((double) bytes / seconds), amount, sizeof amount);
  snprintf (buf, size, "%s/s", amount);
}

void
pull_layer_line (const struct pull_layer_view *layer, double now_s, char *buf, size_t size)
{
  char done[32], total[32], rate[40];

  human_size (layer->done, done, sizeof done);
  human_size (layer->total, total, sizeof total);
  switch (layer->state)
    {
    case PULL_LAYER_EXISTS:
      snprintf (buf, size, "%s  already exists", layer->short_id);
      break;
    case PULL_LAYER_WAITING:
      snprintf (buf, size, "%s  waiting  %s", layer->short_id, total);
      break;
    case PULL_LAYER_FETCHING:
      human_rate (layer->done, now_s - layer->started_s, rate, sizeof rate);
      snprintf (buf, size, "%s  fetching  %s / %s  %s", layer->short_id, done, total, rate);
      break;
    case PULL_LAYER_FETCHED:
      human_rate (layer->total, layer->finished_s - layer->started_s, rate, sizeof rate);
      snprintf (buf, size, "%s  done  %s in %.1f s (%s)", layer->short_id, total,
                layer->finished_s - layer->started_s, rate);
      break;
    }
}

void
pull_view_init (struct pull_view *view, FILE *out, bool tty, double (*now) (void))
{
  *view = (struct pull_view){ .out = out, .tty = tty, .now = now };
  view->redraw.interval_s = PULL_VIEW_INTERVAL_S;
}

void
pull_view_clear (struct pull_view *view)
{
  free (view->layers);
  view->layers = NULL;
  view->n_layers = 0;
}

static void
redraw (struct pull_view *view, double now_s)
{
  char line[256];

  if (view->lines_on_screen)
    fprintf (view->out, "\033[%uA", view->lines_on_screen);
  for (size_t i = 0; i < view->n_layers; i++)
    {
      pull_layer_line (&view->layers[i], now_s, line, sizeof line);
      fprintf (view->out, "\r\033[K%s\n", line);
    }
  fflush (view->out);
  view->lines_on_screen = (unsigned) view->n_layers;
  view->redraws++;
  view->dirty = false;
}

static void
print_finished (struct pull_view *view, const struct pull_layer_view *layer, double now_s)
{
  char line[256];

  pull_layer_line (layer, now_s, line, sizeof line);
  fprintf (view->out, "%s\n", line);
  fflush (view->out);
}

static void
on_resolved (struct pull_view *view, const struct pull_progress *p)
{
  free (view->layers);
  view->n_layers = p->n_layers;
  view->layers = xcalloc (p->n_layers ? p->n_layers : 1, sizeof *view->layers);
  view->lines_on_screen = 0;
}

static void
on_layer (struct pull_view *view, const struct pull_progress *p, double now_s)
{
  struct pull_layer_view *layer = &view->layers[p->index];

  if (layer->short_id[0] == '\0' && p->digest)
    {
      const char *hex = strchr (p->digest, ':');
      snprintf (layer->short_id, sizeof layer->short_id, "%.12s", hex ? hex + 1 : p->digest);
    }
  if (layer->state == PULL_LAYER_EXISTS || layer->state == PULL_LAYER_FETCHED)
    return;
  layer->total = p->total;
  if (p->phase == PULL_LAYER_DONE)
    {
      if (p->existed)
        layer->state = PULL_LAYER_EXISTS;
      else
        {
          if (layer->state == PULL_LAYER_WAITING)
            layer->started_s = now_s;
          layer->state = PULL_LAYER_FETCHED;
          layer->finished_s = now_s;
          layer->done = p->total;
        }
      if (!view->tty)
        print_finished (view, layer, now_s);
    }
  else if (p->phase == PULL_DOWNLOADING && p->done > 0)
    {
      /* the rate counts from the first byte, not from the queue */
      if (layer->state == PULL_LAYER_WAITING)
        {
          layer->state = PULL_LAYER_FETCHING;
          layer->started_s = now_s;
        }
      layer->done = p->done;
    }
  view->dirty = true;
}

void
pull_view_update (const struct pull_progress *p, void *user)
{
  struct pull_view *view = user;
  double now_s = view->now ();

  if (p->phase == PULL_RESOLVED)
    {
      on_resolved (view, p);
      /* every layer waits until the fetch says otherwise */
      return;
    }
  if (p->phase == PULL_UNPACKING)
    {
      pull_view_finish (view);
      fprintf (view->out, "unpacking %zu layer%s\n", view->n_layers, view->n_layers == 1 ? "" : "s");
      fflush (view->out);
      return;
    }
  if (view->layers == NULL || p->index >= view->n_layers)
    return;
  on_layer (view, p, now_s);
  /* The queued and present layers are all announced before the first
   * byte: the first draw waits for bytes, so that it has every line. */
  if (p->phase == PULL_LAYER_QUEUED || (p->phase == PULL_LAYER_DONE && p->existed))
    return;
  if (view->tty && rate_limit_allow (&view->redraw, now_s))
    redraw (view, now_s);
}

void
pull_view_finish (struct pull_view *view)
{
  if (view->tty && view->layers && (view->dirty || view->lines_on_screen == 0))
    redraw (view, view->now ());
}
