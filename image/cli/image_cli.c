/* husk image pull|ls|inspect|rm|import|export. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/cli/image_cli.h"
#include "image/images.h"
#include "image/layout.h"
#include "image/pull.h"
#include "image/reference.h"

#define IMAGE_USAGE                                                                                          \
  "usage: husk image [--root DIR] [--registries FILE] VERB\n"                                                \
  "  pull [--platform OS/ARCH[/VARIANT]] [--creds USER:PASS] [--max-size BYTES] REF\n"                       \
  "  ls [-q]\n"                                                                                              \
  "  inspect REF\n"                                                                                          \
  "  rm REF...\n"                                                                                            \
  "  import PATH [REF]      (an OCI layout directory or tar)\n"                                              \
  "  export REF PATH        (PATH ending in .tar writes a tar)\n"

static bool
split_creds (const char *creds, char **user, char **pass)
{
  const char *colon = creds ? strchr (creds, ':') : NULL;

  if (colon == NULL)
    return false;
  *user = strndup (creds, (size_t) (colon - creds));
  *pass = xstrdup (colon + 1);
  return true;
}

int
image_cli_open (const struct image_cli_env *env, struct store **store, struct hosts_config **hosts,
                struct registry_client **client, const char *creds_host, struct husk_error **err)
{
  struct registry_options opts;

  if (store_open (env->root, store, err) < 0)
    return -1;
  if (client == NULL)
    return 0;
  if ((env->registries_file ? hosts_config_load (env->registries_file, hosts, err)
                            : hosts_config_load_default (hosts, err))
      < 0)
    return -1;
  registry_options_init (&opts);
  opts.hosts = *hosts;
  *client = registry_client_new (&opts);
  if (env->creds && creds_host)
    {
      cleanup_free char *user = NULL;
      cleanup_free char *pass = NULL;
      if (!split_creds (env->creds, &user, &pass))
        return husk_error_make (err, 0, "--creds: expected USER:PASS");
      registry_client_add_credentials (*client, creds_host, user, pass);
    }
  return 0;
}

struct progress_view
{
  bool tty;
  size_t n_layers;
  uint64_t *done, *total;
  bool *finished;
  struct timespec start;
};

static double
seconds_since (const struct timespec *start)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (double) (now.tv_sec - start->tv_sec) + (double) (now.tv_nsec - start->tv_nsec) / 1e9;
}

static void
print_tty_line (const struct progress_view *view)
{
  uint64_t done = 0, total = 0;
  size_t finished = 0;
  double secs = seconds_since (&view->start);

  for (size_t i = 0; i < view->n_layers; i++)
    {
      done += view->done[i];
      total += view->total[i];
      finished += view->finished[i];
    }
  fprintf (stderr, "\r\033[Klayers %zu/%zu  %.1f/%.1f MB  %.1f MB/s", finished, view->n_layers, done / 1e6,
           total / 1e6, secs > 0 ? done / 1e6 / secs : 0.0);
}

static void
on_progress (const struct pull_progress *p, void *user)
{
  struct progress_view *view = user;

  if (p->phase == PULL_RESOLVED)
    {
      view->n_layers = p->n_layers;
      view->done = xcalloc (p->n_layers, sizeof *view->done);
      view->total = xcalloc (p->n_layers, sizeof *view->total);
      view->finished = xcalloc (p->n_layers, sizeof *view->finished);
      clock_gettime (CLOCK_MONOTONIC, &view->start);
      return;
    }
  if (p->phase == PULL_UNPACKING)
    {
      fprintf (stderr, view->tty ? "\r\033[Kunpacking %zu layers\n" : "unpacking %zu layers\n",
               view->n_layers);
      return;
    }
  if (p->index >= view->n_layers)
    return;
  view->done[p->index] = p->done;
  view->total[p->index] = p->total;
  if (p->phase == PULL_LAYER_DONE && !view->finished[p->index])
    {
      double secs = seconds_since (&view->start);
      view->finished[p->index] = true;
      if (!view->tty)
        fprintf (stderr, "layer %zu/%zu %s: %.1f MB, %.1f MB/s\n", p->index + 1, view->n_layers, p->digest,
                 p->total / 1e6, secs > 0 ? p->total / 1e6 / secs : 0.0);
    }
  if (view->tty)
    print_tty_line (view);
}

int
image_cli_pull (const struct image_cli_env *env, const char *ref, const char *platform, bool print_id,
                struct husk_error **err)
{
  struct store *store = NULL;
  struct hosts_config *hosts = NULL;
  struct registry_client *client = NULL;
  struct reference *parsed = NULL;
  struct image *image = NULL;
  struct progress_view view = { .tty = isatty (2) };
  struct pull_options opts = { .platform = platform,
                               .progress = on_progress,
                               .progress_user = &view,
                               .max_image_bytes = env->max_image_bytes };
  int ret = -1;

  if (reference_parse (ref, &parsed, err) == 0
      && image_cli_open (env, &store, &hosts, &client, parsed->domain, err) == 0
      && image_pull (store, client, ref, &opts, &image, err) == 0)
    {
      if (print_id)
        if (print_id)
          printf ("%s\n", image->id);
      ret = 0;
    }
  image_free (image);
  reference_free (parsed);
  registry_client_free (client);
  hosts_config_free (hosts);
  store_free (store);
  free (view.done);
  free (view.total);
  free (view.finished);
  return ret;
}

static const char *
first_or_none (char **v)
{
  return v && v[0] ? v[0] : "<none>";
}

/* An image pulled by digest has no tag: name it by its repo digest. */
static const char *
display_name (const struct image *img)
{
  return img->repo_tags && img->repo_tags[0] ? img->repo_tags[0] : first_or_none (img->repo_digests);
}

static int
verb_ls (const struct image_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  struct image **images = NULL;
  size_t n = 0;
  bool quiet = argc > 1 && strcmp (argv[1], "-q") == 0;

  if (images_list (env->root, &images, &n, err) < 0)
    return -1;
  if (!quiet)
    printf ("%-60s %-20s %10s\n", "REPOSITORY:TAG", "IMAGE ID", "SIZE");
  for (size_t i = 0; i < n; i++)
    {
      const char *id = digest_hex (images[i]->id);
      if (quiet)
        printf ("%s\n", images[i]->id);
      else
        printf ("%-60s %-20.12s %8.1fMB\n", display_name (images[i]), id, images[i]->size / 1e6);
      for (size_t t = 1; !quiet && images[i]->repo_tags[0] && images[i]->repo_tags[t]; t++)
        printf ("%-60s %-20.12s %8.1fMB\n", images[i]->repo_tags[t], id, images[i]->size / 1e6);
    }
  images_free (images, n);
  return 0;
}

static json_t *
strv_json (char **v)
{
  json_t *a = json_array ();

  for (size_t i = 0; v && v[i]; i++)
    json_array_append_new (a, json_string (v[i]));
  return a;
}

static json_t *
image_json (const struct image *img)
{
  json_t *layers = json_array ();
  json_t *labels = json_object ();
  const struct image_config *c = &img->config;

  for (size_t i = 0; i < img->n_layers; i++)
    json_array_append_new (layers,
                           json_pack ("{s:s, s:s, s:I, s:s}", "digest", img->layers[i].digest, "diffID",
                                      img->layers[i].diff_id, "size", (json_int_t) img->layers[i].size,
                                      "chainID", img->layers[i].chain_id));
  for (size_t i = 0; i < c->n_labels; i++)
    json_object_set_new (labels, c->labels[i].key, json_string (c->labels[i].value));
  json_t *doc = json_pack (
      "{s:s, s:o, s:o, s:s, s:s, s:I, s:o, s:{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}}", "id", img->id,
      "repoTags", strv_json (img->repo_tags), "repoDigests", strv_json (img->repo_digests), "manifestDigest",
      img->manifest_digest, "mediaType", img->media_type, "size", (json_int_t) img->size, "layers", layers,
      "config", "User", c->user ? json_string (c->user) : json_null (), "Env", strv_json (c->env),
      "Entrypoint", c->entrypoint ? strv_json (c->entrypoint) : json_null (), "Cmd",
      c->cmd ? strv_json (c->cmd) : json_null (), "WorkingDir",
      c->working_dir ? json_string (c->working_dir) : json_null (), "ExposedPorts",
      strv_json (c->exposed_ports), "Volumes", strv_json (c->volumes), "Labels", labels, "StopSignal",
      c->stop_signal ? json_string (c->stop_signal) : json_null ());
  static const char *const platform_keys[] = { "os", "architecture", "variant", "created" };
  const char *platform_values[] = { c->os, c->architecture, c->variant, c->created };

  for (size_t i = 0; doc && i < 4; i++)
    if (platform_values[i])
      json_object_set_new (doc, platform_keys[i], json_string (platform_values[i]));
  return doc;
}

static int
verb_inspect (const struct image_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  struct image *img = NULL;
  json_t *doc;
  char *text;

  if (argc != 2)
    return husk_error_make (err, 0, "image inspect: expected one image (usage: husk image inspect REF)");
  if (images_lookup (env->root, argv[1], &img, err) < 0)
    return -1;
  doc = image_json (img);
  text = json_dumps (doc, JSON_INDENT (2));
  printf ("%s\n", text);
  free (text);
  json_decref (doc);
  image_free (img);
  return 0;
}

static int
verb_rm (const struct image_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  struct store *store = NULL;
  int ret = 0;

  if (argc < 2)
    return husk_error_make (err, 0, "image rm: expected at least one image (usage: husk image rm REF...)");
  if (store_open (env->root, &store, err) < 0)
    return -1;
  for (int i = 1; i < argc && ret == 0; i++)
    {
      cleanup_free char *deleted = NULL;
      ret = images_remove (store, argv[i], 0, &deleted, err);
      if (ret == 0)
        printf ("%s: %s\n", deleted ? "deleted" : "untagged", deleted ? deleted : argv[i]);
    }
  store_free (store);
  return ret;
}

static int
verb_import (const struct image_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  struct layout_import_options opts = { .name = argc > 2 ? argv[2] : NULL };
  struct store *store = NULL;
  struct image **images = NULL;
  size_t n = 0;
  int ret;

  if (argc < 2 || argc > 3)
    return husk_error_make (err, 0, "image import: usage: husk image import PATH [REF]");
  if (store_open (env->root, &store, err) < 0)
    return -1;
  ret = layout_import (store, argv[1], &opts, &images, &n, err);
  for (size_t i = 0; ret == 0 && i < n; i++)
    printf ("%s %s\n", images[i]->id, opts.name ? opts.name : first_or_none (images[i]->repo_tags));
  images_free (images, n);
  store_free (store);
  return ret;
}

static int
verb_export (const struct image_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  struct store *store = NULL;
  int ret;

  if (argc != 3)
    return husk_error_make (err, 0, "image export: usage: husk image export REF PATH");
  if (store_open (env->root, &store, err) < 0)
    return -1;
  ret = layout_export (store, argv[1], argv[2], husk_str_has_suffix (argv[2], ".tar"), err);
  store_free (store);
  return ret;
}

static int
verb_pull (struct image_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = {
    { "platform", required_argument, NULL, 'p' },
    { "creds", required_argument, NULL, 'c' },
    { "max-size", required_argument, NULL, 'm' },
    { NULL, 0, NULL, 0 },
  };
  const char *platform = NULL;
  long long max_size;
  int c;

  optind = 1;
  opterr = 0;
  while ((c = getopt_long (argc, argv, "+", options, NULL)) != -1)
    switch (c)
      {
      case 'p':
        platform = optarg;
        break;
      case 'c':
        env->creds = optarg;
        break;
      case 'm':
        if (husk_parse_int64 (optarg, 1, INT64_MAX, &max_size) < 0)
          return husk_error_make (err, 0, "image pull: --max-size `%s`: expected a number of bytes", optarg);
        env->max_image_bytes = (unsigned long long) max_size;
        break;
      default:
        return husk_error_make (err, 0, "image pull: unknown option `%s`", argv[optind - 1]);
      }
  if (optind + 1 != argc)
    return husk_error_make (err, 0, "image pull: expected one reference (usage: husk image pull REF)");
  return image_cli_pull (env, argv[optind], platform, true, err);
}

int
image_cli_parse_env (const char *group, const char *usage, int argc, char **argv, struct image_cli_env *env,
                     struct husk_error **err)
{
  static const struct option options[] = {
    { "root", required_argument, NULL, 'r' },
    { "registries", required_argument, NULL, 'g' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  int c;

  optind = 1;
  opterr = 0;
  while ((c = getopt_long (argc, argv, "+h", options, NULL)) != -1)
    switch (c)
      {
      case 'r':
        env->root = optarg;
        break;
      case 'g':
        env->registries_file = optarg;
        break;
      case 'h':
        fputs (usage, stdout);
        exit (0);
      default:
        return husk_error_make (err, 0, "%s: unknown option `%s` (see husk %s --help)", group,
                                argv[optind - 1], group);
      }
  return optind;
}

int
image_cli_main (int argc, char **argv, struct husk_error **err)
{
  struct image_cli_env env = { .root = STORE_DEFAULT_ROOT };
  int first = image_cli_parse_env ("image", IMAGE_USAGE, argc, argv, &env, err);
  const char *verb;

  if (first < 0)
    return -1;
  if (first >= argc)
    {
      fputs (IMAGE_USAGE, stderr);
      return 1;
    }
  verb = argv[first];
  argc -= first;
  argv += first;
  if (strcmp (verb, "pull") == 0)
    return verb_pull (&env, argc, argv, err);
  if (strcmp (verb, "ls") == 0 || strcmp (verb, "list") == 0)
    return verb_ls (&env, argc, argv, err);
  if (strcmp (verb, "inspect") == 0)
    return verb_inspect (&env, argc, argv, err);
  if (strcmp (verb, "rm") == 0)
    return verb_rm (&env, argc, argv, err);
  if (strcmp (verb, "import") == 0)
    return verb_import (&env, argc, argv, err);
  if (strcmp (verb, "export") == 0)
    return verb_export (&env, argc, argv, err);
  return husk_error_make (err, 0, "image: unknown verb `%s` (see husk image --help)", verb);
}
