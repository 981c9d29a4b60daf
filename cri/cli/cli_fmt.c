/* The pure logic of `husk container`'s output and exit status, as podman
 * shows them: durations ("5 seconds ago"), STATUS ("Up 2 seconds",
 * "Exited (0) 3 seconds ago"), --format templates and exit codes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cri/cli/cli_fmt.h"
#include "husk/util.h"

char *
cli_human_duration (long long seconds)
{
  long long minutes = seconds / 60, hours = (seconds + 1800) / 3600;

  if (seconds < 1)
    return xstrdup ("Less than a second");
  if (seconds == 1)
    return xstrdup ("1 second");
  if (seconds < 60)
    return xasprintf ("%lld seconds", seconds);
  if (minutes == 1)
    return xstrdup ("About a minute");
  if (minutes < 60)
    return xasprintf ("%lld minutes", minutes);
  if (hours == 1)
    return xstrdup ("About an hour");
  if (hours < 48)
    return xasprintf ("%lld hours", hours);
  if (hours < 24 * 7 * 2)
    return xasprintf ("%lld days", hours / 24);
  if (hours < 24 * 30 * 2)
    return xasprintf ("%lld weeks", hours / 24 / 7);
  if (hours < 24 * 365 * 2)
    return xasprintf ("%lld months", hours / 24 / 30);
  return xasprintf ("%lld years", hours / 24 / 365);
}

char *
cli_status_text (const char *state, int exit_code, long long seconds)
{
  char *human = cli_human_duration (seconds), *out;

  if (strcmp (state, "running") == 0)
    out = xasprintf ("Up %s", human);
  else if (strcmp (state, "paused") == 0)
    out = xasprintf ("Up %s (Paused)", human);
  else if (strcmp (state, "created") == 0)
    out = xstrdup ("Created");
  else if (strcmp (state, "exited") == 0)
    out = xasprintf ("Exited (%d) %s ago", exit_code, human);
  else
    out = xstrdup ("Stopped");
  free (human);
  return out;
}

/* TEXT with \t and \n written as escapes made real, as podman's
 * --format takes them from a shell. */
static char *
unescape (const char *text)
{
  char *out = xmalloc (strlen (text) + 1), *w = out;

  for (const char *r = text; *r; r++)
    if (r[0] == '\\' && (r[1] == 't' || r[1] == 'n'))
      *w++ = *++r == 't' ? '\t' : '\n';
    else
      *w++ = *r;
  *w = '\0';
  return out;
}

static int
render_field (const char *field, size_t len, json_t *fields, FILE *out, struct husk_error **err)
{
  json_t *value;
  char name[64];

  if (len == 0 || len >= sizeof name || field[0] != '.')
    return husk_error_make (err, 0, "--format: `{{%.*s}}` is not a {{.Field}}", (int) len, field);
  memcpy (name, field + 1, len - 1);
  name[len - 1] = '\0';
  value = json_object_get (fields, name);
  if (value == NULL)
    return husk_error_make (err, 0, "--format: no field `.%s` (see --help)", name);
  if (json_is_string (value))
    fputs (json_string_value (value), out);
  else
    {
      char *text = json_dumps (value, JSON_COMPACT | JSON_ENCODE_ANY);
      fputs (text, out);
      free (text);
    }
  return 0;
}

int
cli_template_render (const char *template, json_t *fields, char **out, struct husk_error **err)
{
  char *text = unescape (template), *buf = NULL;
  const char *p = text;
  size_t size = 0;
  FILE *mem = open_memstream (&buf, &size);
  int ret = 0;

  while (ret == 0 && *p)
    {
      const char *open = strstr (p, "{{"), *close;

      if (open == NULL)
        {
          fputs (p, mem);
          break;
        }
      fwrite (p, 1, (size_t) (open - p), mem);
      close = strstr (open + 2, "}}");
      if (close == NULL)
        {
          ret = husk_error_make (err, 0, "--format `%s`: `{{` without `}}`", template);
          break;
        }
      while (open[2] == ' ')
        open++;
      {
        size_t len = (size_t) (close - open - 2);
        while (len && open[2 + len - 1] == ' ')
          len--;
        ret = render_field (open + 2, len, fields, mem, err);
      }
      p = close + 2;
    }
  fclose (mem);
  free (text);
  if (ret < 0)
    {
      free (buf);
      return -1;
    }
  *out = buf;
  return 0;
}

void
cli_table_add (struct cli_table *table, const char *const *cells)
{
  char **row = xcalloc (table->n_columns, sizeof (char *));

  for (size_t i = 0; i < table->n_columns; i++)
    {
      size_t len = strlen (cells[i] ? cells[i] : "");
      row[i] = xstrdup (cells[i] ? cells[i] : "");
      if (len > table->widths[i])
        table->widths[i] = len;
    }
  table->rows = xrealloc (table->rows, (table->n_rows + 1) * sizeof *table->rows);
  table->rows[table->n_rows++] = row;
}

/* Each column as wide as its widest cell and 2 spaces apart, the last one
 * unpadded: what Go's tabwriter prints for podman. */
void
cli_table_print (struct cli_table *table, FILE *out)
{
  for (size_t r = 0; r < table->n_rows; r++)
    {
      for (size_t i = 0; i < table->n_columns; i++)
        if (i + 1 < table->n_columns)
          fprintf (out, "%-*s  ", (int) table->widths[i], table->rows[r][i]);
        else
          fprintf (out, "%s\n", table->rows[r][i]);
      for (size_t i = 0; i < table->n_columns; i++)
        free (table->rows[r][i]);
      free (table->rows[r]);
    }
  free (table->rows);
  table->rows = NULL;
  table->n_rows = 0;
}

int
cli_exit_code (const struct husk_error *err)
{
  const char *msg = err && err->msg ? err->msg : "";

  /* The runtime's init reports a failed execve as `exec `X`: REASON`. */
  if (strstr (msg, "exec `") == NULL)
    return CLI_EXIT_ERROR;
  if (strstr (msg, "executable file not found") || strstr (msg, "No such file or directory"))
    return CLI_EXIT_NOT_FOUND;
  if (strstr (msg, "Permission denied") || strstr (msg, "Is a directory")
      || strstr (msg, "Exec format error"))
    return CLI_EXIT_NOT_EXECUTABLE;
  return CLI_EXIT_ERROR;
}
