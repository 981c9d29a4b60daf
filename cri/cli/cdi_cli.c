/* husk cdi generate nvidia|list: write a CDI spec for the NVIDIA GPUs of
 * this host, and show the devices the CDI spec dirs define. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "cri/cdi/cdi.h"
#include "cri/cdi/nvidia.h"
#include "cri/cli/cli.h"
#include "husk/cleanup.h"
#include "husk/plugin.h"
#include "husk/util.h"

#define CDI_USAGE                                                                                            \
  "usage: husk cdi VERB\n"                                                                                   \
  "  generate nvidia [--driver-root DIR] [--dev-root DIR] [--proc-root DIR] [--sys-root DIR]\n"              \
  "                  [--hook-path PATH] [--output FILE|-] [--format json|yaml]\n"                            \
  "  list [--spec-dir DIR]... [--format table|json]\n"

#define CDI_GENERATE_USAGE                                                                                   \
  "usage: husk cdi generate nvidia [options]\n"                                                              \
  "write a CDI spec for the NVIDIA GPUs of this host\n\n"                                                    \
  "Options:\n"                                                                                               \
  "      --driver-root DIR   where the driver's libraries and binaries are (default /)\n"                    \
  "      --dev-root DIR      where /dev is (default /)\n"                                                    \
  "      --proc-root DIR     where /proc is (default /)\n"                                                   \
  "      --sys-root DIR      where /sys is (default /)\n"                                                    \
  "      --hook-path PATH    the husk that runs the spec's hooks\n"                                          \
  "      --output FILE|-     where the spec goes (default: stdout)\n"                                        \
  "      --format json|yaml  the format (default: json for a FILE ending .json, else yaml)\n"                \
  "  -h, --help              this text\n"

#define CDI_LIST_USAGE                                                                                       \
  "usage: husk cdi list [options]\n"                                                                         \
  "list the CDI devices the spec directories name\n\n"                                                       \
  "Options:\n"                                                                                               \
  "      --spec-dir DIR        a spec directory (repeatable; default /etc/cdi and /var/run/cdi)\n"           \
  "      --format table|json   the output format (default table)\n"                                          \
  "  -h, --help                this text\n"

enum
{
  OPT_DRIVER_ROOT = 256,
  OPT_DEV_ROOT,
  OPT_PROC_ROOT,
  OPT_SYS_ROOT,
  OPT_HOOK_PATH,
  OPT_OUTPUT,
  OPT_FORMAT,
  OPT_SPEC_DIR,
};

/* ------------------------------------------------------------- YAML out */

/* Strings a plain YAML scalar would turn into a number, a boolean or null
 * are quoted; libyaml quotes the rest itself when plain is not allowed. */
static int
needs_quotes (const char *s)
{
  static const char *const words[] = { "true", "false", "yes", "no", "on", "off", "null", "y", "n", NULL };

  if (*s == '\0' || strchr ("0123456789-+.~", *s))
    return 1;
  for (size_t i = 0; words[i]; i++)
    if (strcasecmp (s, words[i]) == 0)
      return 1;
  return 0;
}

static int
emit_scalar (yaml_emitter_t *em, const char *text, int is_string)
{
  yaml_event_t ev;
  int quoted = is_string && needs_quotes (text);
  yaml_scalar_event_initialize (&ev, NULL, NULL, (yaml_char_t *) text, (int) strlen (text), !quoted, quoted,
                                quoted ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE);
  return yaml_emitter_emit (em, &ev);
}

static int
emit_node (yaml_emitter_t *em, json_t *v)
{
  yaml_event_t ev;
  const char *key;
  json_t *item;
  size_t i;
  char num[32];

  switch (json_typeof (v))
    {
    case JSON_OBJECT:
      yaml_mapping_start_event_initialize (&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
      if (!yaml_emitter_emit (em, &ev))
        return 0;
      json_object_foreach (v, key, item)
      {
        if (!emit_scalar (em, key, 1) || !emit_node (em, item))
          return 0;
      }
      yaml_mapping_end_event_initialize (&ev);
      return yaml_emitter_emit (em, &ev);
    case JSON_ARRAY:
      yaml_sequence_start_event_initialize (&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE);
      if (!yaml_emitter_emit (em, &ev))
        return 0;
      json_array_foreach (v, i, item)
      {
        if (!emit_node (em, item))
          return 0;
      }
      yaml_sequence_end_event_initialize (&ev);
      return yaml_emitter_emit (em, &ev);
    case JSON_STRING:
      return emit_scalar (em, json_string_value (v), 1);
    case JSON_INTEGER:
      snprintf (num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value (v));
      return emit_scalar (em, num, 0);
    case JSON_TRUE:
    case JSON_FALSE:
      return emit_scalar (em, json_is_true (v) ? "true" : "false", 0);
    default:
      return emit_scalar (em, "null", 0);
    }
}

static int
yaml_write_cb (void *data, unsigned char *buffer, size_t size)
{
  FILE *out = data;
  return fwrite (buffer, 1, size, out) == size;
}

/* DOC as a YAML document into *TEXT (malloc'ed). */
static int
to_yaml (json_t *doc, char **text, size_t *len, struct husk_error **err)
{
  yaml_emitter_t em;
  yaml_event_t ev;
  FILE *out = open_memstream (text, len);
  int ok;

  if (out == NULL)
    return husk_error_make (err, errno, "open_memstream");
  yaml_emitter_initialize (&em);
  yaml_emitter_set_output (&em, yaml_write_cb, out);
  yaml_emitter_set_unicode (&em, 1);
  yaml_emitter_set_width (&em, -1);
  yaml_stream_start_event_initialize (&ev, YAML_UTF8_ENCODING);
  ok = yaml_emitter_emit (&em, &ev);
  yaml_document_start_event_initialize (&ev, NULL, NULL, NULL, 1);
  ok = ok && yaml_emitter_emit (&em, &ev) && emit_node (&em, doc);
  yaml_document_end_event_initialize (&ev, 1);
  ok = ok && yaml_emitter_emit (&em, &ev);
  yaml_stream_end_event_initialize (&ev);
  ok = ok && yaml_emitter_emit (&em, &ev);
  if (!ok)
    husk_error_make (err, 0, "emit YAML: %s", em.problem ? em.problem : "unknown error");
  yaml_emitter_delete (&em);
  fclose (out);
  if (!ok)
    {
      free (*text);
      *text = NULL;
      return -1;
    }
  return 0;
}

/* ------------------------------------------------------------- generate */

struct generate_cli
{
  struct nvidia_roots roots;
  const char *output;
  const char *format;
};

static int
parse_format (const char *verb, const char *value, const char *const *allowed, struct husk_error **err)
{
  for (size_t i = 0; allowed[i]; i++)
    if (strcmp (value, allowed[i]) == 0)
      return 0;
  return husk_error_make (err, 0, "cdi %s: --format `%s`: not %s or %s", verb, value, allowed[0], allowed[1]);
}

static int
parse_generate (struct generate_cli *cli, int argc, char **argv, struct husk_error **err)
{
  static const struct option options[] = {
    { "driver-root", required_argument, NULL, OPT_DRIVER_ROOT },
    { "dev-root", required_argument, NULL, OPT_DEV_ROOT },
    { "proc-root", required_argument, NULL, OPT_PROC_ROOT },
    { "sys-root", required_argument, NULL, OPT_SYS_ROOT },
    { "hook-path", required_argument, NULL, OPT_HOOK_PATH },
    { "output", required_argument, NULL, OPT_OUTPUT },
    { "format", required_argument, NULL, OPT_FORMAT },
    { NULL, 0, NULL, 0 },
  };
  static const char *const formats[] = { "json", "yaml", NULL };
  char optbuf[3];
  const char **slot[] = {
    [OPT_DRIVER_ROOT - 256] = &cli->roots.driver_root,
    [OPT_DEV_ROOT - 256] = &cli->roots.dev_root,
    [OPT_PROC_ROOT - 256] = &cli->roots.proc_root,
    [OPT_SYS_ROOT - 256] = &cli->roots.sys_root,
    [OPT_HOOK_PATH - 256] = &cli->roots.hook_path,
    [OPT_OUTPUT - 256] = &cli->output,
    [OPT_FORMAT - 256] = &cli->format,
  };
  int c;

  if (argc < 2 || strcmp (argv[1], "nvidia") != 0)
    return husk_error_make (err, 0, "cdi generate: %s (only `nvidia` is known; see husk cdi --help)",
                            argc < 2 ? "missing the vendor" : "unknown vendor");
  optind = 1;
  opterr = 0;
  while ((c = getopt_long (argc - 1, argv + 1, "+", options, NULL)) != -1)
    {
      if (c < OPT_DRIVER_ROOT || c > OPT_FORMAT)
        return husk_error_make (err, 0,
                                "cdi generate: unknown option or missing value `%s` (see husk cdi --help)",
                                husk_getopt_bad_option (argv + 1, optbuf));
      if (*optarg == '\0')
        return husk_error_make (err, 0, "cdi generate: --%s needs a value", options[c - 256].name);
      *slot[c - 256] = optarg;
    }
  /* The hooks run the husk that ran this (not husk-image). */
  if (cli->roots.hook_path == NULL)
    cli->roots.hook_path = getenv (HUSK_BINARY_ENV);
  if (optind < argc - 1)
    return husk_error_make (err, 0, "cdi generate: unexpected argument `%s`", argv[optind + 1]);
  if (cli->format && parse_format ("generate", cli->format, formats, err) < 0)
    return -1;
  if (cli->format == NULL)
    cli->format = cli->output && husk_str_has_suffix (cli->output, ".json") ? "json" : "yaml";
  if (cli->output == NULL)
    cli->output = "-";
  return 0;
}

static int
cdi_generate (int argc, char **argv, struct husk_error **err)
{
  struct generate_cli cli = { 0 };
  cleanup_free char *text = NULL;
  size_t len = 0;
  json_t *spec;
  int ret;

  if (parse_generate (&cli, argc, argv, err) < 0)
    return -1;
  spec = nvidia_cdi_generate (&cli.roots, err);
  if (spec == NULL)
    return husk_error_wrap (err, "cdi generate nvidia");
  if (strcmp (cli.format, "json") == 0)
    {
      text = json_dumps (spec, JSON_INDENT (2) | JSON_PRESERVE_ORDER);
      len = strlen (text);
      ret = 0;
    }
  else
    ret = to_yaml (spec, &text, &len, err);
  json_decref (spec);
  if (ret < 0)
    return husk_error_wrap (err, "cdi generate nvidia");
  if (strcmp (cli.output, "-") == 0)
    {
      if (fwrite (text, 1, len, stdout) != len || (cli.format[0] == 'j' && putchar ('\n') == EOF)
          || fflush (stdout) != 0)
        return husk_error_make (err, errno, "cdi generate nvidia: write the spec to stdout");
      return 0;
    }
  if (cli.format[0] == 'j')
    {
      text = xrealloc (text, len + 2);
      text[len++] = '\n';
      text[len] = '\0';
    }
  /* A fresh node has no /etc/cdi yet. */
  {
    cleanup_free char *dir = xstrdup (cli.output);
    char *slash = strrchr (dir, '/');

    if (slash && slash != dir)
      {
        *slash = '\0';
        if (access (dir, F_OK) < 0 && errno == ENOENT && husk_mkdir_p (dir, 0755, err) < 0)
          return husk_error_wrap (err, "cdi generate nvidia: --output %s", cli.output);
      }
  }
  if (husk_write_file_atomic (cli.output, text, len, 0644, err) < 0)
    return husk_error_wrap (err, "cdi generate nvidia: --output %s", cli.output);
  return 0;
}

/* ----------------------------------------------------------------- list */

static int
parse_list (int argc, char **argv, char ***dirs, const char **format, struct husk_error **err)
{
  static const struct option options[] = {
    { "spec-dir", required_argument, NULL, OPT_SPEC_DIR },
    { "format", required_argument, NULL, OPT_FORMAT },
    { NULL, 0, NULL, 0 },
  };
  static const char *const formats[] = { "table", "json", NULL };
  char optbuf[3];
  int c;

  optind = 1;
  opterr = 0;
  while ((c = getopt_long (argc, argv, "+", options, NULL)) != -1)
    {
      if (c != OPT_SPEC_DIR && c != OPT_FORMAT)
        return husk_error_make (err, 0,
                                "cdi list: unknown option or missing value `%s` (see husk cdi --help)",
                                husk_getopt_bad_option (argv, optbuf));
      if (c == OPT_SPEC_DIR)
        {
          if (*optarg == '\0')
            return husk_error_make (err, 0, "cdi list: --spec-dir needs a value");
          *dirs = husk_strv_append (*dirs, optarg);
        }
      else if (parse_format ("list", optarg, formats, err) < 0)
        return -1;
      else
        *format = optarg;
    }
  if (optind < argc)
    return husk_error_make (err, 0, "cdi list: unexpected argument `%s`", argv[optind]);
  return 0;
}

static void
print_table (const struct cdi_device_info *devs, size_t n)
{
  int width = (int) strlen ("DEVICE");
  for (size_t i = 0; i < n; i++)
    if ((int) strlen (devs[i].name) > width)
      width = (int) strlen (devs[i].name);
  printf ("%-*s  %s\n", width, "DEVICE", "FILE");
  for (size_t i = 0; i < n; i++)
    printf ("%-*s  %s\n", width, devs[i].name, devs[i].file);
}

static void
print_json (const struct cdi_device_info *devs, size_t n, const struct cdi_spec_error *errs, size_t n_errs)
{
  json_t *doc = json_pack ("{s:[], s:[]}", "devices", "errors");
  cleanup_free char *text = NULL;

  for (size_t i = 0; i < n; i++)
    json_array_append_new (json_object_get (doc, "devices"),
                           json_pack ("{s:s, s:s}", "name", devs[i].name, "file", devs[i].file));
  for (size_t i = 0; i < n_errs; i++)
    json_array_append_new (json_object_get (doc, "errors"),
                           json_pack ("{s:s, s:s}", "file", errs[i].file, "error", errs[i].msg));
  text = json_dumps (doc, JSON_INDENT (2) | JSON_PRESERVE_ORDER);
  puts (text);
  json_decref (doc);
}

/* Exit status 1 when a spec file was refused (its error on stderr, or in
 * the JSON), after listing every device that did load. */
static int
cdi_list (int argc, char **argv, struct husk_error **err)
{
  cleanup_strv char **dirs = NULL;
  const char *format = "table";
  struct cdi_registry *reg;
  const struct cdi_device_info *devs;
  const struct cdi_spec_error *errs;
  size_t n, n_errs;

  if (parse_list (argc, argv, &dirs, &format, err) < 0)
    return -1;
  reg = cdi_registry_new ((const char *const *) dirs);
  if (reg == NULL)
    return husk_error_make (err, ENOMEM, "cdi list");
  devs = cdi_registry_list (reg, &n);
  errs = cdi_registry_errors (reg, &n_errs);
  if (strcmp (format, "json") == 0)
    print_json (devs, n, errs, n_errs);
  else
    {
      print_table (devs, n);
      for (size_t i = 0; i < n_errs; i++)
        fprintf (stderr, "husk: cdi list: %s\n", errs[i].msg);
    }
  fflush (stdout);
  cdi_registry_free (reg);
  return n_errs ? 1 : 0;
}

int
cdi_cli_main (int argc, char **argv, struct husk_error **err)
{
  bool help = false;

  /* `husk cdi generate --help`, `husk cdi list -h`: that verb's usage
   * (hack/gen-man.sh makes a page of each), exit 0. */
  for (int i = 1; i < argc; i++)
    help = help || strcmp (argv[i], "--help") == 0 || strcmp (argv[i], "-h") == 0;
  if (argc < 2 || help)
    {
      const char *usage = CDI_USAGE;
      if (argc >= 2 && strcmp (argv[1], "generate") == 0)
        usage = CDI_GENERATE_USAGE;
      else if (argc >= 2 && strcmp (argv[1], "list") == 0)
        usage = CDI_LIST_USAGE;
      fputs (usage, help ? stdout : stderr);
      return help ? 0 : 1;
    }
  if (strcmp (argv[1], "generate") == 0)
    return cdi_generate (argc - 1, argv + 1, err);
  if (strcmp (argv[1], "list") == 0)
    return cdi_list (argc - 1, argv + 1, err);
  return husk_error_make (err, 0, "cdi: unknown verb `%s` (see husk cdi --help)", argv[1]);
}
