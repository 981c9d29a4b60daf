/* `husk image ls`: podman's columns (REPOSITORY TAG IMAGE ID CREATED
 * SIZE), newest first, one row per tag; or --format json. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/cli/image_verbs.h"
#include "image/digest.h"
#include "image/human.h"
#include "image/images.h"

enum
{
  LS_QUIET,
  LS_FORMAT,
  LS_NO_TRUNC,
  LS_NOHEADING,
};
const struct cli_opt image_ls_opts[] = {
  [LS_QUIET] = { "quiet", 'q', NULL, "print only the image ids" },
  [LS_FORMAT] = { "format", 0, "table|json", "the output format (default table)" },
  [LS_NO_TRUNC] = { "no-trunc", 0, NULL, "print whole image ids" },
  [LS_NOHEADING] = { "noheading", 'n', NULL, "print no header line" },
  { NULL, 0, NULL, NULL },
};

/* When the image was built (its config's "created"), else when it was
 * added to the store. */
static long long
created_at (const struct image *img)
{
  long long created;

  if (parse_rfc3339 (img->config.created, &created) == 0)
    return created;
  return img->added;
}

static void
print_row (const struct image *img, const char *name, bool no_trunc, time_t now)
{
  cleanup_free char *repository = NULL;
  cleanup_free char *tag = NULL;
  char ago[64], size[32];
  const char *hex = digest_hex (img->id);

  if (name)
    split_repo_tag (name, &repository, &tag);
  human_ago ((long long) now - created_at (img), ago, sizeof ago);
  human_size ((uint64_t) img->size, size, sizeof size);
  printf ("%-40s %-10s %-*.*s %-20s %s\n", repository ? repository : "<none>", tag ? tag : "<none>",
          no_trunc ? 71 : 12, no_trunc ? 71 : 12, no_trunc ? img->id : hex, ago, size);
}

static void
print_table (struct image **images, size_t n, const char **values)
{
  bool no_trunc = values[LS_NO_TRUNC] != NULL;
  time_t now = time (NULL);

  if (!values[LS_NOHEADING])
    printf ("%-40s %-10s %-*s %-20s %s\n", "REPOSITORY", "TAG", no_trunc ? 71 : 12, "IMAGE ID", "CREATED",
            "SIZE");
  for (size_t i = n; i-- > 0;)
    {
      const struct image *img = images[i];

      if (img->repo_tags[0] == NULL)
        print_row (img, img->repo_digests[0], no_trunc, now);
      for (size_t t = 0; img->repo_tags[t]; t++)
        print_row (img, img->repo_tags[t], no_trunc, now);
    }
}

static json_t *
strv_array (char **v)
{
  json_t *a = json_array ();

  for (size_t i = 0; v && v[i]; i++)
    json_array_append_new (a, json_string (v[i]));
  return a;
}

/* The fields podman's `images --format json` has that husk knows. */
static json_t *
image_ls_json (const struct image *img)
{
  json_t *labels = json_object ();
  json_t *names = strv_array (img->repo_tags);
  long long created = created_at (img);
  char created_text[32];
  time_t created_t = (time_t) created;
  struct tm tm;

  for (size_t i = 0; i < img->config.n_labels; i++)
    json_object_set_new (labels, img->config.labels[i].key, json_string (img->config.labels[i].value));
  if (json_array_size (names) == 0)
    {
      json_t *digests = strv_array (img->repo_digests);
      json_array_extend (names, digests);
      json_decref (digests);
    }
  gmtime_r (&created_t, &tm);
  strftime (created_text, sizeof created_text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return json_pack ("{s:s, s:o, s:o, s:I, s:o, s:o, s:s, s:I, s:s}", "Id", digest_hex (img->id), "RepoTags",
                    strv_array (img->repo_tags), "RepoDigests", strv_array (img->repo_digests), "Size",
                    (json_int_t) img->size, "Labels", labels, "Names", names, "Digest", img->manifest_digest,
                    "Created", (json_int_t) created, "CreatedAt", created_text);
}

static void
print_json (struct image **images, size_t n)
{
  json_t *list = json_array ();
  char *text;

  for (size_t i = n; i-- > 0;)
    json_array_append_new (list, image_ls_json (images[i]));
  text = json_dumps (list, JSON_INDENT (4));
  printf ("%s\n", text);
  free (text);
  json_decref (list);
}

int
image_cli_ls (struct image_cli_env *env, const struct image_verb *verb, const char **values, int argc,
              char **argv, struct husk_error **err)
{
  const char *format = values[LS_FORMAT] ? values[LS_FORMAT] : "table";
  struct image **images = NULL;
  size_t n = 0;

  (void) verb;
  (void) argc;
  (void) argv;
  if (strcmp (format, "table") != 0 && strcmp (format, "json") != 0)
    return husk_error_make (err, 0, "image ls: --format `%s`: expected table or json", format);
  if (images_list (env->root, &images, &n, err) < 0)
    return -1;
  if (values[LS_QUIET])
    for (size_t i = n; i-- > 0;)
      printf ("%.*s\n", values[LS_NO_TRUNC] ? 71 : 12,
              values[LS_NO_TRUNC] ? images[i]->id : digest_hex (images[i]->id));
  else if (strcmp (format, "json") == 0)
    print_json (images, n);
  else
    print_table (images, n, values);
  images_free (images, n);
  return 0;
}
