/* husk image pull|ls|inspect|rm|import|export|login|logout: each verb's
 * options are a table (husk/cli_opts.h) that parses, prints --help, and
 * feeds the completion and man pages. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/cli_opts.h"
#include "husk/util.h"
#include "image/auth_file.h"
#include "image/cli/image_cli.h"
#include "image/cli/image_verbs.h"
#include "image/images.h"
#include "image/layout.h"
#include "image/pull.h"
#include "image/pull_progress.h"
#include "image/reference.h"

int
image_cli_open (const struct image_cli_env *env, struct store **store, struct hosts_config **hosts,
                struct registry_client **client, const char *creds_host, struct husk_error **err)
{
  if (store_open (env->root, store, err) < 0)
    return -1;
  if (client == NULL)
    return 0;
  return image_cli_open_registry (env, hosts, client, creds_host, err);
}

static double
monotonic_seconds (void)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (double) now.tv_sec + (double) now.tv_nsec / 1e9;
}

/* A refused pull says how to give credentials. */
static void
hint_login (const struct reference *ref, struct husk_error **err)
{
  if (err && *err && strstr ((*err)->msg, "unauthorized") && ref)
    {
      char *msg = xasprintf ("%s (log in with `husk image login %s`, or give --creds USER:PASS)", (*err)->msg,
                             ref->domain);
      free ((*err)->msg);
      (*err)->msg = msg;
    }
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
  struct pull_view view;
  struct pull_options opts = { .platform = platform, .max_image_bytes = env->max_image_bytes };
  int ret = -1;

  pull_view_init (&view, stderr, isatty (2), monotonic_seconds);
  if (!env->quiet)
    {
      opts.progress = pull_view_update;
      opts.progress_user = &view;
    }
  if (reference_parse (ref, &parsed, err) == 0
      && image_cli_open (env, &store, &hosts, &client, parsed->domain, err) == 0)
    {
      if (image_pull (store, client, ref, &opts, &image, err) == 0)
        ret = 0;
      else
        hint_login (parsed, err);
    }
  if (ret == 0 && print_id)
    printf ("%s\n", image->id);
  pull_view_clear (&view);
  image_free (image);
  reference_free (parsed);
  registry_client_free (client);
  hosts_config_free (hosts);
  store_free (store);
  return ret;
}

static const char *
first_or_none (char **v)
{
  return v && v[0] ? v[0] : "<none>";
}

/* --- pull ------------------------------------------------------------------ */

enum
{
  PULL_PLATFORM,
  PULL_CREDS,
  PULL_AUTHFILE,
  PULL_QUIET,
  PULL_MAX_SIZE,
};
static const struct cli_opt pull_opts[] = {
  [PULL_PLATFORM] = { "platform", 0, "OS/ARCH[/VARIANT]", "pick this platform from a multi-platform image" },
  [PULL_CREDS] = { "creds", 0, "USER:PASS", "credentials for the registry (instead of the auth file)" },
  [PULL_AUTHFILE] = { "authfile", 0, "FILE",
                      "read credentials from FILE (default: REGISTRY_AUTH_FILE, "
                      "else the containers-auth.json that login writes)" },
  [PULL_QUIET] = { "quiet", 'q', NULL, "print no progress, only the image id" },
  [PULL_MAX_SIZE] = { "max-size", 0, "BYTES", "refuse an image whose layers unpack to more than BYTES" },
  { NULL, 0, NULL, NULL },
};

static int
verb_pull (struct image_cli_env *env, const struct image_verb *verb, const char **values, int argc,
           char **argv, struct husk_error **err)
{
  long long max_size;

  (void) argc;
  (void) verb;
  if (values[PULL_CREDS])
    env->creds = values[PULL_CREDS];
  if (values[PULL_AUTHFILE])
    env->authfile = values[PULL_AUTHFILE];
  env->quiet = values[PULL_QUIET] != NULL;
  if (values[PULL_MAX_SIZE])
    {
      if (husk_parse_int64 (values[PULL_MAX_SIZE], 1, INT64_MAX, &max_size) < 0)
        return husk_error_make (err, 0, "image pull: --max-size `%s`: expected a number of bytes",
                                values[PULL_MAX_SIZE]);
      env->max_image_bytes = (unsigned long long) max_size;
    }
  return image_cli_pull (env, argv[0], values[PULL_PLATFORM], true, err) < 0 ? -1 : 0;
}

/* --- inspect, rm, import, export --------------------------------------------- */

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
verb_inspect (struct image_cli_env *env, const struct image_verb *verb, const char **values, int argc,
              char **argv, struct husk_error **err)
{
  struct image *img = NULL;
  json_t *doc;
  char *text;

  (void) verb;
  (void) values;
  (void) argc;
  if (images_lookup (env->root, argv[0], &img, err) < 0)
    return -1;
  doc = image_json (img);
  text = json_dumps (doc, JSON_INDENT (2));
  printf ("%s\n", text);
  free (text);
  json_decref (doc);
  image_free (img);
  return 0;
}

/* Whether removing NAME deletes IMG rather than untagging it: docker's
 * rule (images_remove) untags when NAME is one of several tags. */
static bool
rm_deletes (const struct image *img, const char *name)
{
  size_t n_tags = 0;
  const char *hex = husk_str_has_prefix (name, "sha256:") ? name + 7 : name;

  while (img->repo_tags[n_tags])
    n_tags++;
  if (n_tags <= 1)
    return true;
  return strlen (hex) >= 3 && strspn (hex, "0123456789abcdef") == strlen (hex)
         && husk_str_has_prefix (strchr (img->id, ':') ? strchr (img->id, ':') + 1 : img->id, hex);
}

/* Refuses to delete an image containers use (podman's rule); with FORCE
 * removes them first, so that the image's snapshots go with it. */
static int
check_users (const struct image_cli_env *env, const char *name, bool force, struct husk_error **err)
{
  struct image *img = NULL;
  cleanup_strv char **users = NULL;
  int ret = 0;

  if (env->users == NULL)
    return 0;
  if (images_lookup (env->root, name, &img, err) < 0)
    return -1;
  if (rm_deletes (img, name) && (users = env->users->list (env->root, img->id, err)) == NULL)
    ret = -1;
  if (ret == 0 && users && users[0] && !force)
    ret = husk_error_kind (err, EBUSY,
                           "image rm %s: image used by %s: image is in use by a container (%zu in all; "
                           "--force removes them)",
                           name, users[0], husk_strv_len (users));
  for (char **id = users; ret == 0 && id && *id; id++)
    if (env->users->remove (env->root, *id, err) < 0)
      ret = husk_error_wrap (err, "image rm %s --force", name);
    else
      printf ("removed container: %s\n", *id);
  image_free (img);
  return ret;
}

static int
verb_rm (struct image_cli_env *env, const struct image_verb *verb, const char **values, int argc, char **argv,
         struct husk_error **err)
{
  struct store *store = NULL;
  int ret = 0;

  (void) verb;
  if (store_open (env->root, &store, err) < 0)
    return -1;
  for (int i = 0; i < argc && ret == 0; i++)
    {
      cleanup_free char *deleted = NULL;
      ret = check_users (env, argv[i], values[0] != NULL, err);
      if (ret == 0)
        ret = images_remove (store, argv[i], 0, &deleted, err);
      if (ret == 0)
        printf ("%s: %s\n", deleted ? "deleted" : "untagged", deleted ? deleted : argv[i]);
    }
  store_free (store);
  return ret;
}

static int
verb_import (struct image_cli_env *env, const struct image_verb *verb, const char **values, int argc,
             char **argv, struct husk_error **err)
{
  struct layout_import_options opts = { .name = argc > 1 ? argv[1] : NULL };
  struct store *store = NULL;
  struct image **images = NULL;
  size_t n = 0;
  int ret;

  (void) verb;
  (void) values;
  if (store_open (env->root, &store, err) < 0)
    return -1;
  ret = layout_import (store, argv[0], &opts, &images, &n, err);
  for (size_t i = 0; ret == 0 && i < n; i++)
    printf ("%s %s\n", images[i]->id, opts.name ? opts.name : first_or_none (images[i]->repo_tags));
  images_free (images, n);
  store_free (store);
  return ret;
}

static int
verb_export (struct image_cli_env *env, const struct image_verb *verb, const char **values, int argc,
             char **argv, struct husk_error **err)
{
  struct store *store = NULL;
  int ret;

  (void) verb;
  (void) values;
  (void) argc;
  if (store_open (env->root, &store, err) < 0)
    return -1;
  ret = layout_export (store, argv[0], argv[1], husk_str_has_suffix (argv[1], ".tar"), err);
  store_free (store);
  return ret;
}

/* --- the table --------------------------------------------------------------- */

static const struct cli_opt no_opts[] = { { NULL, 0, NULL, NULL } };
static const struct cli_opt rm_opts[] = {
  { "force", 'f', NULL, "remove the containers made from the image first (they are stopped)" },
  { NULL, 0, NULL, NULL },
};

static const struct image_verb image_verbs[] = {
  { { "image pull", "REF", "pull an image from a registry into the store", pull_opts },
    verb_pull,
    NULL,
    1,
    1 },
  { { "image ls", "", "list the images in the store", image_ls_opts }, image_cli_ls, "list", 0, 0 },
  { { "image inspect", "REF", "print an image's record and config (JSON)", no_opts },
    verb_inspect,
    NULL,
    1,
    1 },
  { { "image rm", "REF...", "remove images (a tag the image shares only untags)", rm_opts },
    verb_rm,
    "rmi",
    1,
    -1 },
  { { "image import", "PATH [REF]", "import an OCI layout directory or tar", no_opts },
    verb_import,
    NULL,
    1,
    2 },
  { { "image export", "REF PATH", "write an OCI layout (a tar when PATH ends in .tar)", no_opts },
    verb_export,
    NULL,
    2,
    2 },
  { { "image login", "REGISTRY", "check credentials with a registry and store them in the auth file",
      image_login_opts },
    image_cli_login,
    NULL,
    1,
    1 },
  { { "image logout", "[REGISTRY]", "remove a registry's credentials from the auth file", image_logout_opts },
    image_cli_logout,
    NULL,
    0,
    1 },
};
#define N_IMAGE_VERBS (sizeof image_verbs / sizeof image_verbs[0])

static const char *
verb_name (const struct image_verb *verb)
{
  return strchr (verb->spec.path, ' ') + 1;
}

static const struct image_verb *
find_verb (const char *name)
{
  for (size_t i = 0; i < N_IMAGE_VERBS; i++)
    if (strcmp (verb_name (&image_verbs[i]), name) == 0
        || (image_verbs[i].alias && strcmp (image_verbs[i].alias, name) == 0))
      return &image_verbs[i];
  return NULL;
}

static void
print_group_help (FILE *out)
{
  fprintf (out, "Usage: husk image [--root DIR] [--registries FILE] COMMAND [options] [ARGS]\n\n"
                "Manage the images of husk's store (debug CLI, no daemon).\n\n"
                "Options:\n"
                "      --root DIR                 the image store (default " STORE_DEFAULT_ROOT ")\n"
                "      --registries FILE          mirrors and insecure registries (default "
                "/etc/husk/registries.json)\n"
                "  -h, --help                     print this help\n\n"
                "Commands:\n");
  for (size_t i = 0; i < N_IMAGE_VERBS; i++)
    fprintf (out, "  %-10s %s\n", verb_name (&image_verbs[i]), image_verbs[i].spec.summary);
  fprintf (out, "\nSee husk image COMMAND --help for a command's options.\n");
}

static int
run_verb (struct image_cli_env *env, const struct image_verb *verb, int argc, char **argv,
          struct husk_error **err)
{
  const char *values[MAX_OPTS] = { 0 };
  int first = cli_parse_all (&verb->spec, argc, argv, values, err);
  int n_args;

  if (first == CLI_OPTS_HELP)
    return 0;
  if (first < 0)
    return -1;
  n_args = argc - first;
  if (n_args < verb->min_args || (verb->max_args >= 0 && n_args > verb->max_args))
    {
      if (n_args > verb->max_args && verb->max_args >= 0)
        return husk_error_make (err, 0, "%s: unexpected argument `%s` (usage: husk %s %s)", verb->spec.path,
                                argv[first + verb->max_args], verb->spec.path, verb->spec.args);
      return husk_error_make (err, 0, "%s: missing %s (usage: husk %s %s)", verb->spec.path, verb->spec.args,
                              verb->spec.path, verb->spec.args);
    }
  return verb->run (env, verb, values, n_args, argv + first, err);
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
  while ((c = getopt_long (argc, argv, "+:h", options, NULL)) != -1)
    switch (c)
      {
      case 'r':
        env->root = optarg;
        break;
      case 'g':
        env->registries_file = optarg;
        break;
      case 'h':
        if (usage)
          fputs (usage, stdout);
        else
          print_group_help (stdout);
        exit (0);
      case ':':
        return husk_error_make (err, 0, "%s: option `%s` needs a value (see husk %s --help)", group,
                                argv[optind - 1], group);
      default:
        return husk_error_make (err, 0, "%s: unknown option `%s` (see husk %s --help)", group,
                                optopt ? (char[]){ '-', (char) optopt, '\0' } : argv[optind - 1], group);
      }
  return optind;
}

int
image_cli_main (int argc, char **argv, const struct image_cli_users *users, struct husk_error **err)
{
  struct image_cli_env env = { .root = STORE_DEFAULT_ROOT, .users = users };
  int first = image_cli_parse_env ("image", NULL, argc, argv, &env, err);
  const struct image_verb *verb;

  if (first < 0)
    return -1;
  if (first >= argc)
    {
      print_group_help (stderr);
      return 1;
    }
  verb = find_verb (argv[first]);
  if (verb == NULL)
    return husk_error_make (err, 0, "image: unknown command `%s` (see husk image --help)", argv[first]);
  return run_verb (&env, verb, argc - first, argv + first, err);
}
