/* husk container run|ls|exec|logs|stop|rm: run images directly through
 * husk's own runtime, no daemon. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cri/cdi/cdi.h"
#include "cri/cli/cli.h"
#include "cri/containers.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/cli/image_cli.h"
#include "image/images.h"
#include "runtime/container.h"

#define CONTAINER_USAGE                                                                                      \
  "usage: husk container [--root DIR] [--registries FILE] VERB\n"                                            \
  "  run [--rm] [-d] [-i] [-t] [--name N] [-e K=V] [-v SRC:DST[:ro]] [-w DIR] [-u USER]\n"                   \
  "      [--network host|none] [--memory M] [--cpus C] [--pids-limit N] [--device PATH]\n"                   \
  "      [--device VENDOR/CLASS=NAME] [--gpus all|N|device=IDX|UUID[,...]] [--cdi-spec-dir DIR]\n"           \
  "      [--nvidia-env off|container-config|image-too]\n"                                                    \
  "      [--read-only] [--entrypoint CMD] [--security-opt seccomp=unconfined] IMAGE [CMD...]\n"              \
  "  ls [-q]\n"                                                                                              \
  "  exec [-t] [-e K=V] [-w DIR] [-u UID[:GID]] CONTAINER CMD...\n"                                          \
  "  logs CONTAINER\n"                                                                                       \
  "  stop [-t SECONDS] CONTAINER...\n"                                                                       \
  "  rm [-f] CONTAINER...\n"

struct run_cli
{
  struct container_create_request req;
  bool remove, detach, interactive;
  char **env;
  char **devices;
  char **cdi_names; /* --device vendor/class=name */
  char **gpus;      /* --gpus values */
  char **cdi_dirs;  /* --cdi-spec-dir; none: the default dirs */
  char *entrypoint[2];
  struct ocispec_mount *mounts;
  size_t n_mounts;
};

static int
parse_size (const char *text, int64_t *out)
{
  char *end = NULL;
  double v = strtod (text, &end);
  double mult = 1;

  if (end == text || v <= 0)
    return -1;
  switch (*end)
    {
    case 'k':
    case 'K':
      mult = 1024.0;
      end++;
      break;
    case 'm':
    case 'M':
      mult = 1024.0 * 1024;
      end++;
      break;
    case 'g':
    case 'G':
      mult = 1024.0 * 1024 * 1024;
      end++;
      break;
    case 'b':
    case 'B':
      end++;
      break;
    default:
      break;
    }
  if (*end != '\0')
    return -1;
  *out = (int64_t) (v * mult);
  return 0;
}

static int
parse_volume (struct run_cli *cli, const char *arg, struct husk_error **err)
{
  cleanup_free char *copy = xstrdup (arg);
  char *dst = strchr (copy, ':'), *mode;
  char src_abs[4096];

  if (dst == NULL)
    return husk_error_make (err, 0, "--volume `%s`: expected SRC:DST[:ro]", arg);
  *dst++ = '\0';
  mode = strchr (dst, ':');
  if (mode)
    *mode++ = '\0';
  if (mode && strcmp (mode, "ro") != 0 && strcmp (mode, "rw") != 0)
    return husk_error_make (err, 0, "--volume `%s`: mode must be ro or rw", arg);
  if (realpath (copy, src_abs) == NULL)
    return husk_error_make (err, errno, "--volume `%s`: source `%s`", arg, copy);
  cli->mounts = xrealloc (cli->mounts, (cli->n_mounts + 1) * sizeof *cli->mounts);
  cli->mounts[cli->n_mounts++] = (struct ocispec_mount){ .source = xstrdup (src_abs),
                                                         .destination = xstrdup (dst),
                                                         .readonly = mode && strcmp (mode, "ro") == 0 };
  return 0;
}

enum
{
  OPT_RM = 1000,
  OPT_NAME,
  OPT_NETWORK,
  OPT_MEMORY,
  OPT_CPUS,
  OPT_PIDS,
  OPT_DEVICE,
  OPT_READ_ONLY,
  OPT_ENTRYPOINT,
  OPT_SECURITY_OPT,
  OPT_GPUS,
  OPT_CDI_SPEC_DIR,
  OPT_NVIDIA_ENV,
};

static int
parse_run_option (struct run_cli *cli, int c, const char *arg, struct husk_error **err)
{
  struct ocispec_request *spec = &cli->req.spec;
  long long n;

  switch (c)
    {
    case OPT_RM:
      cli->remove = true;
      return 0;
    case 'd':
      cli->detach = true;
      return 0;
    case 'i':
      cli->interactive = true;
      return 0;
    case 't':
      spec->terminal = true;
      return 0;
    case OPT_NAME:
      cli->req.name = arg;
      return 0;
    case 'e':
      cli->env = husk_strv_append (cli->env, arg);
      return 0;
    case 'v':
      return parse_volume (cli, arg, err);
    case 'w':
      spec->workdir = arg;
      return 0;
    case 'u':
      spec->user = arg;
      return 0;
    case OPT_READ_ONLY:
      spec->readonly_rootfs = true;
      return 0;
    case OPT_DEVICE:
      /* A CDI name (vendor/class=name) or a host device path. */
      if (arg[0] != '/' && strchr (arg, '='))
        cli->cdi_names = husk_strv_append (cli->cdi_names, arg);
      else
        cli->devices = husk_strv_append (cli->devices, arg);
      return 0;
    case OPT_GPUS:
      cli->gpus = husk_strv_append (cli->gpus, arg);
      return 0;
    case OPT_CDI_SPEC_DIR:
      if (arg[0] != '/')
        return husk_error_make (err, 0, "--cdi-spec-dir `%s`: must be an absolute directory", arg);
      cli->cdi_dirs = husk_strv_append (cli->cdi_dirs, arg);
      return 0;
    case OPT_NVIDIA_ENV:
      {
        enum cdi_nvidia_env mode;
        if (cdi_nvidia_env_parse (arg, &mode) < 0)
          return husk_error_make (err, 0, "--nvidia-env `%s`: must be off, container-config or image-too",
                                  arg);
        cli->req.nvidia_env = mode;
        return 0;
      }
    case OPT_ENTRYPOINT:
      cli->entrypoint[0] = (char *) arg;
      spec->entrypoint = cli->entrypoint;
      return 0;
    case OPT_SECURITY_OPT:
      /* docker's spelling; the only opt-out of the default filter. */
      if (strcmp (arg, "seccomp=unconfined") != 0)
        return husk_error_make (err, 0, "--security-opt `%s`: only seccomp=unconfined is known", arg);
      cli->req.seccomp_unconfined = true;
      return 0;
    case OPT_NETWORK:
      if (strcmp (arg, "host") != 0 && strcmp (arg, "none") != 0)
        return husk_error_make (err, 0, "--network `%s`: must be host or none", arg);
      spec->network = strcmp (arg, "host") == 0 ? OCISPEC_NETWORK_HOST : OCISPEC_NETWORK_NONE;
      return 0;
    case OPT_MEMORY:
      if (parse_size (arg, &spec->memory_limit) < 0)
        return husk_error_make (err, 0, "--memory `%s`: expected a size like 512m or 1g", arg);
      return 0;
    case OPT_CPUS:
      spec->cpus = strtod (arg, NULL);
      if (spec->cpus <= 0)
        return husk_error_make (err, 0, "--cpus `%s`: expected a positive number", arg);
      return 0;
    case OPT_PIDS:
      if (husk_parse_int64 (arg, 1, INT64_MAX, &n) < 0)
        return husk_error_make (err, 0, "--pids-limit `%s`: expected a positive number", arg);
      spec->pids_limit = n;
      return 0;
    default:
      return husk_error_make (err, 0, "container run: unknown option (see husk container --help)");
    }
}

static int
parse_run (int argc, char **argv, struct run_cli *cli, struct husk_error **err)
{
  static const struct option options[] = {
    { "rm", no_argument, NULL, OPT_RM },
    { "detach", no_argument, NULL, 'd' },
    { "interactive", no_argument, NULL, 'i' },
    { "tty", no_argument, NULL, 't' },
    { "name", required_argument, NULL, OPT_NAME },
    { "env", required_argument, NULL, 'e' },
    { "volume", required_argument, NULL, 'v' },
    { "workdir", required_argument, NULL, 'w' },
    { "user", required_argument, NULL, 'u' },
    { "network", required_argument, NULL, OPT_NETWORK },
    { "memory", required_argument, NULL, OPT_MEMORY },
    { "cpus", required_argument, NULL, OPT_CPUS },
    { "pids-limit", required_argument, NULL, OPT_PIDS },
    { "device", required_argument, NULL, OPT_DEVICE },
    { "read-only", no_argument, NULL, OPT_READ_ONLY },
    { "entrypoint", required_argument, NULL, OPT_ENTRYPOINT },
    { "security-opt", required_argument, NULL, OPT_SECURITY_OPT },
    { "gpus", required_argument, NULL, OPT_GPUS },
    { "cdi-spec-dir", required_argument, NULL, OPT_CDI_SPEC_DIR },
    { "nvidia-env", required_argument, NULL, OPT_NVIDIA_ENV },
    { NULL, 0, NULL, 0 },
  };
  int c;

  optind = 1;
  opterr = 0;
  while ((c = getopt_long (argc, argv, "+dite:v:w:u:", options, NULL)) != -1)
    {
      if (c == '?' || c == ':')
        {
          char buf[3];
          return husk_error_make (err, 0, "container run: unknown option `%s` (see husk container --help)",
                                  husk_getopt_bad_option (argv, buf));
        }
      if (parse_run_option (cli, c, optarg, err) < 0)
        return -1;
    }
  if (optind >= argc)
    return husk_error_make (err, 0, "container run: missing IMAGE (see husk container --help)");
  if (cli->remove && cli->detach)
    return husk_error_make (err, 0, "container run: --rm and --detach cannot be combined yet (no monitor)");
  if (cli->req.spec.terminal && cli->detach)
    return husk_error_make (err, 0,
                            "container run: --tty needs the foreground (no monitor for detached ttys)");
  cli->req.image = argv[optind];
  cli->req.spec.args = optind + 1 < argc ? argv + optind + 1 : NULL;
  cli->req.spec.env = cli->env;
  cli->req.spec.devices = cli->devices;
  cli->req.spec.mounts = cli->mounts;
  cli->req.spec.n_mounts = cli->n_mounts;
  return 0;
}

static void
run_cli_clear (struct run_cli *cli)
{
  husk_strvfreep (&cli->env);
  husk_strvfreep (&cli->devices);
  husk_strvfreep (&cli->cdi_names);
  husk_strvfreep (&cli->gpus);
  husk_strvfreep (&cli->cdi_dirs);
  cdi_registry_free (cli->req.cdi);
  husk_strvfreep (&cli->req.cdi_names);
  for (size_t i = 0; i < cli->n_mounts; i++)
    {
      free ((char *) cli->mounts[i].source);
      free ((char *) cli->mounts[i].destination);
    }
  free (cli->mounts);
}

/* docker's behaviour: an image that is not here yet is pulled first. */
static int
ensure_image (const struct container_cli_env *env, const char *image, struct husk_error **err)
{
  struct image *found = NULL;

  if (images_lookup (env->image.root, image, &found, err) == 0)
    {
      image_free (found);
      return 0;
    }
  if (*err == NULL || (*err)->errnum != ENOENT)
    return -1;
  husk_error_free (err);
  return image_cli_pull (&env->image, image, NULL, false, err);
}

/* The CDI registry and the names of --device and --gpus, resolved before
 * the image is pulled or anything made: an unknown device is one error
 * and leaves nothing behind. */
static int
resolve_cdi (struct run_cli *cli, struct husk_error **err)
{
  cli->req.cdi = cdi_registry_new (cli->cdi_dirs ? (const char *const *) cli->cdi_dirs : NULL);
  if (cli->req.cdi == NULL)
    return husk_error_make (err, ENOMEM, "CDI registry");
  cli->req.cdi_names = xcalloc (1, sizeof (char *));
  for (char **n = cli->cdi_names; n && *n; n++)
    {
      if (cdi_registry_get (cli->req.cdi, *n, err) == NULL)
        return husk_error_wrap (err, "--device");
      cdi_names_add (&cli->req.cdi_names, *n);
    }
  for (char **g = cli->gpus; g && *g; g++)
    if (cdi_gpus_option (cli->req.cdi, *g, &cli->req.cdi_names, err) < 0)
      return -1;
  return 0;
}

static int
verb_run (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  struct run_cli cli = { 0 };
  cleanup_free char *id = NULL;
  int exit_code = 0, ret = -1;

  cli.req.nvidia_env = CDI_NVIDIA_ENV_CONTAINER;
  if (parse_run (argc, argv, &cli, err) == 0 && resolve_cdi (&cli, err) == 0
      && ensure_image (env, cli.req.image, err) == 0
      && containers_create (&env->containers, &cli.req, &id, err) == 0)
    {
      if (!cli.interactive && !cli.req.spec.terminal && !cli.detach)
        freopen ("/dev/null", "r", stdin);
      ret = containers_start (&env->containers, id, cli.detach, &exit_code, err);
      if (ret == 0 && cli.detach)
        printf ("%s\n", id);
      if (cli.remove || ret < 0)
        {
          struct husk_error *ignored = NULL;
          containers_remove (&env->containers, id, true, &ignored);
          husk_error_free (&ignored);
        }
    }
  run_cli_clear (&cli);
  return ret < 0 ? -1 : exit_code;
}

static int
verb_ls (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  struct container_record **recs = NULL;
  bool quiet = argc > 1 && strcmp (argv[1], "-q") == 0;
  size_t n = 0;

  if (containers_list (&env->containers, &recs, &n, err) < 0)
    return -1;
  if (!quiet)
    printf ("%-14s %-30s %-30s %-16s %s\n", "CONTAINER ID", "IMAGE", "COMMAND", "STATUS", "NAME");
  for (size_t i = 0; i < n; i++)
    {
      cleanup_free char *status = containers_status (&env->containers, recs[i]);
      if (quiet)
        printf ("%s\n", recs[i]->id);
      else
        printf ("%-14.12s %-30.30s %-30.30s %-16s %s\n", recs[i]->id, recs[i]->image, recs[i]->command,
                status, recs[i]->name);
    }
  container_records_free (recs, n);
  return 0;
}

static int
verb_logs (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  struct container_record *rec = NULL;
  cleanup_free char *path = NULL;
  cleanup_free char *text = NULL;
  size_t len = 0;

  if (argc != 2)
    return husk_error_make (err, 0, "container logs: expected one container");
  if (containers_lookup (&env->containers, argv[1], &rec, err) < 0)
    return -1;
  path = containers_log_path (&env->containers, rec->id);
  container_record_free (rec);
  if (access (path, F_OK) < 0)
    return 0; /* a foreground container wrote to the terminal */
  if (husk_read_file (path, &text, &len, err) < 0)
    return -1;
  fwrite (text, 1, len, stdout);
  return 0;
}

/* Applies VERB to each named container (stop, rm). */
static int
for_each_container (const struct container_cli_env *env, char **names, bool flag, int timeout,
                    int (*verb) (const struct containers_ctx *, const char *, bool, int,
                                 struct husk_error **),
                    struct husk_error **err)
{
  for (; *names; names++)
    {
      struct container_record *rec = NULL;
      int ret;

      if (containers_lookup (&env->containers, *names, &rec, err) < 0)
        return -1;
      ret = verb (&env->containers, rec->id, flag, timeout, err);
      if (ret == 0)
        printf ("%s\n", *names);
      container_record_free (rec);
      if (ret < 0)
        return -1;
    }
  return 0;
}

static int
do_stop (const struct containers_ctx *ctx, const char *id, bool unused, int timeout, struct husk_error **err)
{
  return containers_stop (ctx, id, timeout, err);
}

static int
do_rm (const struct containers_ctx *ctx, const char *id, bool force, int unused, struct husk_error **err)
{
  return containers_remove (ctx, id, force, err);
}

static int
verb_stop_rm (const struct container_cli_env *env, bool is_rm, int argc, char **argv, struct husk_error **err)
{
  int timeout = 10, c;
  bool force = false;
  long long n;

  static const struct option rm_options[] = { { "force", no_argument, NULL, 'f' }, { NULL, 0, NULL, 0 } };
  static const struct option stop_options[]
      = { { "time", required_argument, NULL, 't' }, { NULL, 0, NULL, 0 } };
  char buf[3];

  optind = 1;
  opterr = 0;
  while ((c = getopt_long (argc, argv, is_rm ? "+f" : "+t:", is_rm ? rm_options : stop_options, NULL)) != -1)
    {
      if (c == 'f')
        force = true;
      else if (c == 't' && husk_parse_int64 (optarg, 0, 3600, &n) == 0)
        timeout = (int) n;
      else if (c == 't')
        return husk_error_make (err, 0, "container stop: -t `%s`: expected seconds (0-3600)", optarg);
      else
        return husk_error_make (err, 0, "container %s: unknown option `%s`", argv[0],
                                husk_getopt_bad_option (argv, buf));
    }
  if (optind >= argc)
    return husk_error_make (err, 0, "container %s: expected at least one container", argv[0]);
  return for_each_container (env, argv + optind, force, timeout, is_rm ? do_rm : do_stop, err);
}

int
container_cli_main (int argc, char **argv, const char *runtime_root, struct husk_error **err)
{
  struct container_cli_env env = {
    .image = { .root = STORE_DEFAULT_ROOT },
    .containers = { .image_root = STORE_DEFAULT_ROOT, .runtime_root = runtime_root },
  };
  int first = image_cli_parse_env ("container", CONTAINER_USAGE, argc, argv, &env.image, err);
  const char *verb;

  if (first < 0)
    return -1;
  env.containers.image_root = env.image.root;
  if (first >= argc)
    {
      fputs (CONTAINER_USAGE, stderr);
      return 1;
    }
  verb = argv[first];
  argc -= first;
  argv += first;
  if (strcmp (verb, "run") == 0)
    return verb_run (&env, argc, argv, err);
  if (strcmp (verb, "ls") == 0 || strcmp (verb, "ps") == 0)
    return verb_ls (&env, argc, argv, err);
  if (strcmp (verb, "exec") == 0)
    return container_cli_exec (&env, argc, argv, err);
  if (strcmp (verb, "logs") == 0)
    return verb_logs (&env, argc, argv, err);
  if (strcmp (verb, "stop") == 0)
    return verb_stop_rm (&env, false, argc, argv, err);
  if (strcmp (verb, "rm") == 0)
    return verb_stop_rm (&env, true, argc, argv, err);
  return husk_error_make (err, 0, "container: unknown verb `%s` (see husk container --help)", verb);
}
