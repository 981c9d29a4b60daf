/* husk container ls and port: podman's columns (CREATED "5 seconds ago",
 * STATUS "Up 2 seconds"), --format with a {{.Field}} template or json. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cri/cli/cli.h"
#include "cri/cli/cli_fmt.h"
#include "cri/container/containers.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define LS_USAGE                                                                                             \
  "usage: husk container ls [-a] [-q] [--format TEMPLATE|json]\n"                                            \
  "  -a, --all              every container (default: the running ones)\n"                                   \
  "  -q, --quiet            only the ids\n"                                                                  \
  "      --format TEMPLATE  each container as TEMPLATE, with {{.ID}} {{.Names}} {{.Image}}\n"                \
  "                         {{.ImageID}} {{.Command}} {{.Created}} {{.CreatedAt}} {{.Status}}\n"             \
  "                         {{.State}} {{.ExitCode}} {{.Ports}}; \"json\": a JSON array;\n"                  \
  "                         \"table TEMPLATE\": with a header row\n"                                         \
  "  -h, --help             this text\n"

/* podman's PORTS: 0.0.0.0:8080->80/tcp, ... */
static char *
ports_text (const struct container_record *rec)
{
  char *out = xstrdup ("");

  for (size_t i = 0; i < rec->n_ports; i++)
    {
      const struct cni_port_mapping *p = &rec->ports[i];
      char *next = xasprintf ("%s%s%s:%d->%d/%s", out, i ? ", " : "",
                              p->host_ip && p->host_ip[0] ? p->host_ip : "0.0.0.0", p->host_port,
                              p->container_port, p->protocol);
      free (out);
      out = next;
    }
  return out;
}

/* Seconds from the RFC 3339 time STAMP to now (0 when unknown). */
static long long
seconds_since (const char *stamp)
{
  struct timespec now;
  long long ns;

  if (stamp == NULL || containers_log_parse_time (stamp, &ns, NULL) < 0)
    return 0;
  clock_gettime (CLOCK_REALTIME, &now);
  ns = (long long) now.tv_sec * 1000000000LL + now.tv_nsec - ns;
  return ns > 0 ? ns / 1000000000LL : 0;
}

/* One container as the fields --format names (podman's names). */
static json_t *
record_fields (const struct container_cli_env *env, const struct container_record *rec)
{
  cleanup_free char *state = containers_status (&env->containers, rec);
  cleanup_free char *finished = NULL;
  cleanup_free char *ports = ports_text (rec);
  cleanup_free char *created_ago = cli_human_duration (seconds_since (rec->created));
  cleanup_free char *created = xasprintf ("%s ago", created_ago);
  cleanup_free char *status = NULL;
  int code = 0;
  bool has_code = containers_exit_code (&env->containers, rec, &code, &finished);
  const char *short_state = husk_str_has_prefix (state, "exited") ? "exited" : state;

  if (strcmp (short_state, "stopped") == 0 && has_code)
    short_state = "exited";
  status = cli_status_text (
      short_state, code,
      seconds_since (strcmp (short_state, "exited") == 0 ? (finished ?: rec->finished) : rec->started));
  return json_pack ("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:s}", "ID", rec->id, "Names",
                    rec->name, "Image", rec->image ?: "", "ImageID", rec->image_id ?: "", "Command",
                    rec->command ?: "", "Created", created, "CreatedAt", rec->created ?: "", "Status", status,
                    "State", short_state, "ExitCode", code, "Ports", ports);
}

static const char *const table_columns[]
    = { "CONTAINER ID", "IMAGE", "COMMAND", "CREATED", "STATUS", "PORTS", "NAMES" };

static void
table_row (struct cli_table *table, json_t *f)
{
  cleanup_free char *id = xasprintf ("%.12s", json_string_value (json_object_get (f, "ID")));
  const char *command = json_string_value (json_object_get (f, "Command"));
  cleanup_free char *cmd = strlen (command) > 20 ? xasprintf ("%.17s...", command) : xstrdup (command);
  const char *cells[] = { id,
                          json_string_value (json_object_get (f, "Image")),
                          cmd,
                          json_string_value (json_object_get (f, "Created")),
                          json_string_value (json_object_get (f, "Status")),
                          json_string_value (json_object_get (f, "Ports")),
                          json_string_value (json_object_get (f, "Names")) };

  cli_table_add (table, cells);
}

/* "table {{.ID}}\t{{.Names}}": the header is the field names, upper case. */
static char *
template_header (const char *template)
{
  char *out = xstrdup (template), *w = out;

  for (const char *r = template; *r;)
    if (strncmp (r, "{{", 2) == 0 && strstr (r, "}}"))
      {
        const char *end = strstr (r, "}}");
        for (const char *c = r + 2; c < end; c++)
          if (*c != ' ' && *c != '.')
            *w++ = (char) (*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
        r = end + 2;
      }
    else
      *w++ = *r++;
  *w = '\0';
  return out;
}

static int
print_rows (json_t *rows, bool quiet, const char *format, struct husk_error **err)
{
  struct cli_table table = { .n_columns = 7 };
  size_t i;
  json_t *f;

  if (format && strcmp (format, "json") == 0)
    {
      char *text = json_dumps (rows, JSON_INDENT (4));
      printf ("%s\n", text);
      free (text);
      return 0;
    }
  if (format && husk_str_has_prefix (format, "table "))
    {
      cleanup_free char *header = template_header (format + 6);
      cleanup_free char *line = NULL;
      json_t *none = json_object ();
      /* a bad template fails before the header is printed */
      if (cli_template_render (header, none, &line, err) < 0)
        return json_decref (none), -1;
      json_decref (none);
      printf ("%s\n", line);
      format += 6;
    }
  if (format == NULL && !quiet)
    cli_table_add (&table, table_columns);
  json_array_foreach (rows, i, f)
  {
    if (quiet)
      printf ("%s\n", json_string_value (json_object_get (f, "ID")));
    else if (format)
      {
        char *line = NULL;
        if (cli_template_render (format, f, &line, err) < 0)
          return -1;
        printf ("%s\n", line);
        free (line);
      }
    else
      table_row (&table, f);
  }
  cli_table_print (&table, stdout);
  return 0;
}

int
container_cli_ls (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = { { "all", no_argument, NULL, 'a' },
                                           { "quiet", no_argument, NULL, 'q' },
                                           { "format", required_argument, NULL, 'f' },
                                           { "help", no_argument, NULL, 'h' },
                                           { NULL, 0, NULL, 0 } };
  static const struct cli_verb verb = { "ls", LS_USAGE, "aq", options };
  struct container_record **recs = NULL;
  const char *format = NULL;
  bool quiet = false, all = false;
  json_t *rows;
  size_t n = 0;
  int c, ret;

  optind = 1;
  while ((c = cli_getopt (&verb, argc, argv, err)) >= 0)
    if (c == 'a')
      all = true;
    else if (c == 'q')
      quiet = true;
    else
      format = optarg;
  if (c != -1)
    return c == CLI_HELP ? 0 : -1;
  if (optind < argc)
    return husk_error_make (err, 0, "container ls: unexpected argument `%s`", argv[optind]);
  if (format && strcmp (format, "table") == 0)
    format = NULL; /* podman's spelling of the default */
  if (containers_list (&env->containers, &recs, &n, err) < 0)
    return -1;
  rows = json_array ();
  for (size_t i = 0; i < n; i++)
    {
      json_t *f = record_fields (env, recs[i]);
      const char *state = json_string_value (json_object_get (f, "State"));

      if (all || strcmp (state, "running") == 0 || strcmp (state, "paused") == 0)
        json_array_append_new (rows, f);
      else
        json_decref (f);
    }
  container_records_free (recs, n);
  ret = print_rows (rows, quiet, format, err);
  json_decref (rows);
  return ret;
}

#define PORT_USAGE                                                                                           \
  "usage: husk container port CONTAINER [CTR_PORT[/PROTO]]\n"                                                \
  "  -h, --help  this text\n"                                                                                \
  "The host ports published to the container (-p), as `80/tcp -> 0.0.0.0:8080`.\n"

int
container_cli_port (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = { { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 } };
  static const struct cli_verb verb = { "port", PORT_USAGE, "", options };
  struct container_record *rec = NULL;
  const char *want = NULL;
  int c;

  optind = 1;
  while ((c = cli_getopt (&verb, argc, argv, err)) >= 0)
    ;
  if (c != -1)
    return c == CLI_HELP ? 0 : -1;
  if (optind >= argc || optind + 2 < argc)
    return husk_error_make (err, 0, "container port: expected CONTAINER [CTR_PORT[/PROTO]]");
  want = optind + 1 < argc ? argv[optind + 1] : NULL;
  if (containers_lookup (&env->containers, argv[optind], &rec, err) < 0)
    return -1;
  for (size_t i = 0; i < rec->n_ports; i++)
    {
      const struct cni_port_mapping *p = &rec->ports[i];
      cleanup_free char *ctr = xasprintf ("%d/%s", p->container_port, p->protocol);
      cleanup_free char *bare = xasprintf ("%d", p->container_port);
      const char *ip = p->host_ip && p->host_ip[0] ? p->host_ip : "0.0.0.0";

      if (want == NULL)
        printf ("%s -> %s:%d\n", ctr, ip, p->host_port);
      else if (strcmp (want, ctr) == 0 || (strcmp (want, bare) == 0 && strcmp (p->protocol, "tcp") == 0))
        printf ("%s:%d\n", ip, p->host_port);
    }
  container_record_free (rec);
  return 0;
}
