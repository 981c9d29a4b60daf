/* husk cdi-hook update-ldcache|create-symlinks|chmod: the createContainer
 * hooks a CDI spec names (`husk cdi generate` writes them).  Each reads the
 * OCI state on stdin, finds the rootfs through <bundle>/config.json and
 * works inside it (cri/cdi/hook.c).  Options are checked before stdin is
 * read, so a bad spec fails without touching the rootfs. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cri/cdi/hook.h"
#include "cri/cli/cli.h"
#include "husk/cleanup.h"
#include "husk/util.h"

#define CDI_HOOK_USAGE                                                                                       \
  "usage: husk cdi-hook VERB [options]   (an OCI createContainer hook: the state JSON on stdin)\n"           \
  "  update-ldcache [--folder DIR]...          add DIRs to the rootfs's ld.so.conf.d, run ldconfig -r\n"     \
  "  create-symlinks [--link TARGET::LINK]...  create LINK -> TARGET in the rootfs\n"                        \
  "  chmod --mode OCTAL [--path PATH]...       chmod PATHs in the rootfs (symlinks refused)\n"

/* What the options of one verb say. */
struct hook_args
{
  char **values; /* --folder, --link or --path, in order */
  size_t n_values;
  mode_t mode;
  bool has_mode;
};

struct hook_verb
{
  const char *name;
  const char *value_option; /* the repeatable option */
  int (*check) (const char *value, struct husk_error **err);
  int (*run) (const char *rootfs, int root_fd, const struct hook_args *args, struct husk_error **err);
};

static int
check_folder (const char *value, struct husk_error **err)
{
  return cdi_hook_check_path ("--folder", value, false, err);
}

static int
check_link (const char *value, struct husk_error **err)
{
  cleanup_free char *target = NULL;
  cleanup_free char *link = NULL;
  return cdi_hook_parse_link (value, &target, &link, err);
}

static int
check_chmod_path (const char *value, struct husk_error **err)
{
  return cdi_hook_check_path ("--path", value, true, err);
}

static int
run_update_ldcache (const char *rootfs, int root_fd, const struct hook_args *args, struct husk_error **err)
{
  return cdi_hook_update_ldcache (rootfs, root_fd, args->values, args->n_values, NULL, err);
}

static int
run_create_symlinks (const char *rootfs, int root_fd, const struct hook_args *args, struct husk_error **err)
{
  for (size_t i = 0; i < args->n_values; i++)
    {
      cleanup_free char *target = NULL;
      cleanup_free char *link = NULL;
      if (cdi_hook_parse_link (args->values[i], &target, &link, err) < 0
          || cdi_hook_create_symlink (root_fd, target, link, err) < 0)
        return -1;
    }
  return 0;
}

static int
run_chmod (const char *rootfs, int root_fd, const struct hook_args *args, struct husk_error **err)
{
  for (size_t i = 0; i < args->n_values; i++)
    {
      bool skipped;
      if (cdi_hook_chmod (root_fd, args->values[i], args->mode, &skipped, err) < 0)
        return -1;
    }
  return 0;
}

static const struct hook_verb verbs[] = {
  { "update-ldcache", "folder", check_folder, run_update_ldcache },
  { "create-symlinks", "link", check_link, run_create_symlinks },
  { "chmod", "path", check_chmod_path, run_chmod },
};

static const struct hook_verb *
find_verb (const char *name)
{
  for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
    if (strcmp (verbs[i].name, name) == 0)
      return &verbs[i];
  return NULL;
}

/* One line, no usage text: the error of a hook lands in a runtime's log. */
static int
usage_error (const char *verb, struct husk_error **err, const char *what, const char *arg)
{
  return husk_error_kind (err, EINVAL, "cdi-hook %s: %s `%s` (see husk cdi-hook --help)", verb, what, arg);
}

/* The verb's own line of CDI_HOOK_USAGE as its usage and summary (not
 * the group's list: hack/gen-man.sh makes a page of it). */
static void
print_verb_usage (const char *name)
{
  cleanup_free char *key = xasprintf ("\n  %s ", name);
  const char *line = strstr (CDI_HOOK_USAGE, key), *end, *gap;

  if (line == NULL)
    {
      fputs (CDI_HOOK_USAGE, stdout);
      return;
    }
  line += 3;
  end = strchr (line, '\n');
  gap = strstr (line, "  ");
  if (gap == NULL || gap > end)
    gap = end;
  printf ("usage: husk cdi-hook %.*s   (the state JSON on stdin)\n", (int) (gap - line), line);
  while (gap < end && *gap == ' ')
    gap++;
  printf ("%.*s\n", (int) (end - gap), gap);
}

/* ARGV[0] is the verb.  Returns 1 when --help was asked for. */
static int
parse_args (const struct hook_verb *verb, int argc, char **argv, struct hook_args *args,
            struct husk_error **err)
{
  const struct option options[] = {
    { verb->value_option, required_argument, NULL, 'v' },
    { "mode", required_argument, NULL, 'm' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  bool takes_mode = strcmp (verb->name, "chmod") == 0;
  char optbuf[3];
  int c;

  optind = 0;
  opterr = 0;
  while ((c = getopt_long (argc, argv, "+h", options, NULL)) != -1)
    switch (c)
      {
      case 'v':
        if (verb->check (optarg, err) < 0)
          return husk_error_wrap (err, "cdi-hook %s", verb->name);
        args->values = xrealloc (args->values, (args->n_values + 2) * sizeof *args->values);
        args->values[args->n_values++] = optarg;
        args->values[args->n_values] = NULL;
        break;
      case 'm':
        if (!takes_mode)
          return usage_error (verb->name, err, "unknown option", "--mode");
        if (cdi_hook_parse_mode (optarg, &args->mode, err) < 0)
          return husk_error_wrap (err, "cdi-hook %s", verb->name);
        args->has_mode = true;
        break;
      case 'h':
        print_verb_usage (verb->name);
        return 1;
      default:
        return usage_error (verb->name, err, "unknown option", husk_getopt_bad_option (argv, optbuf));
      }
  if (optind < argc)
    return usage_error (verb->name, err, "unexpected argument", argv[optind]);
  if (takes_mode && !args->has_mode)
    return usage_error (verb->name, err, "missing option", "--mode");
  return 0;
}

static int
run_verb (const struct hook_verb *verb, const struct hook_args *args, struct husk_error **err)
{
  cleanup_free char *state = NULL;
  cleanup_free char *rootfs = NULL;
  cleanup_close int root_fd = -1;
  size_t state_len = 0;

  if (husk_read_fd (0, &state, &state_len, "the OCI state on stdin", err) < 0
      || cdi_hook_rootfs_from_state (state, state_len, &rootfs, err) < 0)
    return -1;
  root_fd = cdi_hook_open_root (rootfs, err);
  if (root_fd < 0)
    return -1;
  if (verb->run (rootfs, root_fd, args, err) < 0)
    return husk_error_wrap (err, "rootfs `%s`", rootfs);
  return 0;
}

int
cdi_hook_cli_main (int argc, char **argv, struct husk_error **err)
{
  struct hook_args args = { 0 };
  const struct hook_verb *verb;
  int ret;

  if (argc < 2 || strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0)
    {
      fputs (CDI_HOOK_USAGE, argc < 2 ? stderr : stdout);
      return argc < 2 ? husk_error_kind (err, EINVAL, "cdi-hook: no verb") : 0;
    }
  verb = find_verb (argv[1]);
  if (verb == NULL)
    return husk_error_kind (err, EINVAL,
                            "cdi-hook: unknown verb `%s` (update-ldcache, create-symlinks, chmod)", argv[1]);
  ret = parse_args (verb, argc - 1, argv + 1, &args, err);
  if (ret == 0 && run_verb (verb, &args, err) < 0)
    ret = husk_error_wrap (err, "cdi-hook %s", verb->name);
  free (args.values);
  return ret < 0 ? -1 : 0;
}
