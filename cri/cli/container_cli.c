/* husk container run|ls|exec|logs|stop|rm: run images directly through
 * husk's own runtime, no daemon. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cri/cdi/cdi.h"
#include "cri/cli/cli.h"
#include "cri/cli/cli_fmt.h"
#include "cri/container/containers.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/cli/image_cli.h"
#include "image/images.h"
#include "runtime/container.h"

#define CONTAINER_USAGE                                                                                      \
  "usage: husk container [--root DIR] [--registries FILE] VERB [--help]\n"                                   \
  "  run      run a command in a new container (see run --help)\n"                                           \
  "  ls, ps   list containers (running only; -a all; --format)\n"                                            \
  "  exec     run a command in a running container\n"                                                        \
  "  logs     a detached container's output\n"                                                               \
  "  inspect  a container's configuration and state, as JSON\n"                                              \
  "  stats    cpu, memory and pids of running containers\n"                                                  \
  "  top      the processes of a container\n"                                                                \
  "  start    start stopped containers again (-a: attached)\n"                                               \
  "  restart  stop, then start containers\n"                                                                 \
  "  attach   the output of a running container until it exits\n"                                            \
  "  kill     send a signal to containers (default KILL)\n"                                                  \
  "  wait     wait for containers to exit; print their exit codes\n"                                         \
  "  stop     stop containers\n"                                                                             \
  "  rm       remove containers (-a all)\n"                                                                  \
  "  prune    remove every container that is not running\n"                                                  \
  "  port     the ports published to a container\n"                                                          \
  "  cp       copy files between a container and the host\n"

#define RUN_USAGE                                                                                            \
  "usage: husk container run [OPTIONS] IMAGE [CMD...]\n"                                                     \
  "      --rm                   remove the container when it exits (with -d too)\n"                          \
  "  -d, --detach               run in the background under husk-monitor; print the id\n"                    \
  "  -i, --interactive          keep stdin open\n"                                                           \
  "  -t, --tty                  a terminal (TERM=xterm unless -e sets TERM)\n"                               \
  "      --name NAME            the container's name\n"                                                      \
  "  -e, --env KEY=VALUE        an environment variable\n"                                                   \
  "  -v, --volume SRC:DST[:ro]  a bind mount\n"                                                              \
  "  -w, --workdir DIR          the working directory\n"                                                     \
  "  -u, --user USER            the user (name, uid, uid:gid)\n"                                             \
  "  -p, --publish [IP:]HOST:CTR[/tcp|udp|sctp]\n"                                                           \
  "                             a host port forwarded to the container (CNI portmap)\n"                      \
  "      --network bridge|none|host\n"                                                                       \
  "                             bridge (default): CNI from $HUSK_NETWORK_CONFIG, else\n"                     \
  "                             /etc/husk/container-network.conflist, else husk0 10.89.0.0/16;\n"            \
  "                             none: its own namespace with only lo (up)\n"                                 \
  "      --memory SIZE          a memory limit (512m, 1g)\n"                                                 \
  "      --cpus N               a cpu limit\n"                                                               \
  "      --pids-limit N         a pids limit\n"                                                              \
  "      --device PATH|VENDOR/CLASS=NAME\n"                                                                  \
  "                             a host device, or a CDI device\n"                                            \
  "      --gpus all|N|device=IDX|UUID[,...]\n"                                                               \
  "      --cdi-spec-dir DIR     where CDI specs are (repeatable)\n"                                          \
  "      --nvidia-env off|container-config|image-too\n"                                                      \
  "      --read-only            a read-only root filesystem\n"                                               \
  "      --entrypoint CMD       replaces the image's entrypoint (\"\" clears it)\n"                          \
  "      --security-opt seccomp=unconfined\n"                                                                \
  "  -h, --help                 this text\n"

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
  struct cni_port_mapping *ports;
  size_t n_ports;
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

static int
parse_publish (struct run_cli *cli, const char *arg, struct husk_error **err)
{
  struct cni_port_mapping port;

  if (containers_parse_publish (arg, &port, err) < 0)
    return -1;
  cli->ports = xrealloc (cli->ports, (cli->n_ports + 1) * sizeof *cli->ports);
  cli->ports[cli->n_ports++] = port;
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
    case 'p':
      return parse_publish (cli, arg, err);
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
      /* "" clears the image's entrypoint, as podman's does. */
      cli->entrypoint[0] = arg[0] ? (char *) arg : NULL;
      spec->entrypoint = cli->entrypoint;
      return 0;
    case OPT_SECURITY_OPT:
      /* docker's spelling; the only opt-out of the default filter. */
      if (strcmp (arg, "seccomp=unconfined") != 0)
        return husk_error_make (err, 0, "--security-opt `%s`: only seccomp=unconfined is known", arg);
      cli->req.seccomp_unconfined = true;
      return 0;
    case OPT_NETWORK:
      if (strcmp (arg, "host") != 0 && strcmp (arg, "none") != 0 && strcmp (arg, "bridge") != 0)
        return husk_error_make (err, 0, "--network `%s`: must be bridge, none or host", arg);
      spec->network = strcmp (arg, "host") == 0 ? OCISPEC_NETWORK_HOST : OCISPEC_NETWORK_NONE;
      cli->req.bridge = strcmp (arg, "bridge") == 0;
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
      return husk_error_make (err, 0, "container run: unknown option (see husk container run --help)");
    }
}

static const struct option run_options[] = {
  { "rm", no_argument, NULL, OPT_RM },
  { "detach", no_argument, NULL, 'd' },
  { "interactive", no_argument, NULL, 'i' },
  { "tty", no_argument, NULL, 't' },
  { "name", required_argument, NULL, OPT_NAME },
  { "env", required_argument, NULL, 'e' },
  { "volume", required_argument, NULL, 'v' },
  { "workdir", required_argument, NULL, 'w' },
  { "user", required_argument, NULL, 'u' },
  { "publish", required_argument, NULL, 'p' },
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
  { "help", no_argument, NULL, 'h' },
  { NULL, 0, NULL, 0 },
};

static const struct cli_verb run_verb = { "run", RUN_USAGE, "dite:v:w:u:p:", run_options };

/* -t: TERM=xterm, as podman sets it, unless -e gives one. */
static void
add_term (struct run_cli *cli)
{
  char *const term[] = { "TERM=xterm", NULL };
  char **merged;

  if (!cli->req.spec.terminal)
    return;
  merged = ocispec_merge_env (term, cli->env);
  husk_strvfreep (&cli->env);
  cli->env = merged;
}

static int
parse_run (int argc, char **argv, struct run_cli *cli, struct husk_error **err)
{
  int c;

  optind = 1;
  cli->req.bridge = true; /* rootful podman's default */
  while ((c = cli_getopt (&run_verb, argc, argv, err)) >= 0)
    if (parse_run_option (cli, c, optarg, err) < 0)
      return -1;
  if (c != -1)
    return c;
  if (optind >= argc)
    return husk_error_make (err, 0, "container run: missing IMAGE (see husk container run --help)");
  if (cli->n_ports && !cli->req.bridge)
    return husk_error_make (err, 0, "container run: --publish needs the bridge network, not --network %s",
                            cli->req.spec.network == OCISPEC_NETWORK_HOST ? "host" : "none");
  add_term (cli);
  cli->req.image = argv[optind];
  cli->req.spec.args = optind + 1 < argc ? argv + optind + 1 : NULL;
  cli->req.spec.env = cli->env;
  cli->req.spec.devices = cli->devices;
  cli->req.spec.mounts = cli->mounts;
  cli->req.spec.n_mounts = cli->n_mounts;
  cli->req.ports = cli->ports;
  cli->req.n_ports = cli->n_ports;
  cli->req.auto_remove = cli->remove;
  cli->req.detached = cli->detach;
  cli->req.network_config = containers_network_config ();
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
  for (size_t i = 0; i < cli->n_ports; i++)
    {
      free ((char *) cli->ports[i].protocol);
      free ((char *) cli->ports[i].host_ip);
    }
  free (cli->ports);
}

/* A -p host port another container of ours publishes, or that a socket
 * on the host holds, is refused before anything is made (podman's rule:
 * portmap's DNAT would otherwise take the port from under its owner, or
 * never be reached). */
static int
check_port_free (const struct container_cli_env *env, const struct cni_port_mapping *port,
                 struct husk_error **err)
{
  struct container_record **recs = NULL;
  bool udp = strcmp (port->protocol, "udp") == 0;
  struct sockaddr_in6 addr6 = { .sin6_family = AF_INET6, .sin6_port = htons ((uint16_t) port->host_port) };
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port->host_port) };
  const char *ip = port->host_ip && port->host_ip[0] ? port->host_ip : NULL;
  bool v6 = ip && strchr (ip, ':');
  size_t n = 0;
  int fd, one = 1, ret = 0;

  if (containers_list (&env->containers, &recs, &n, err) < 0)
    return -1;
  for (size_t i = 0; i < n && ret == 0; i++)
    for (size_t j = 0; j < recs[i]->n_ports && ret == 0; j++)
      if (recs[i]->ports[j].host_port == port->host_port
          && strcmp (recs[i]->ports[j].protocol, port->protocol) == 0
          && containers_running (&env->containers, recs[i]->id))
        ret = husk_error_make (err, 0, "--publish %d/%s: the host port is in use by container %s",
                               port->host_port, port->protocol, recs[i]->name);
  container_records_free (recs, n);
  if (ret < 0 || strcmp (port->protocol, "sctp") == 0)
    return ret;
  if (ip && (v6 ? inet_pton (AF_INET6, ip, &addr6.sin6_addr) : inet_pton (AF_INET, ip, &addr.sin_addr)) != 1)
    return husk_error_make (err, 0, "--publish %s:%d: `%s` is not an IP address", ip, port->host_port, ip);
  fd = socket (v6 ? AF_INET6 : AF_INET, (udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return husk_error_make (err, errno, "--publish: socket");
  /* A connection of an earlier owner in TIME_WAIT does not count. */
  setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (v6 ? bind (fd, (struct sockaddr *) &addr6, sizeof addr6)
         : bind (fd, (struct sockaddr *) &addr, sizeof addr))
    ret = husk_error_make (err, errno, "--publish: cannot listen on the %s port %s:%d", udp ? "UDP" : "TCP",
                           ip ? ip : "0.0.0.0", port->host_port);
  close (fd);
  return ret;
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
check_ports_free (const struct container_cli_env *env, const struct run_cli *cli, struct husk_error **err)
{
  for (size_t i = 0; i < cli->n_ports; i++)
    if (check_port_free (env, &cli->ports[i], err) < 0)
      return -1;
  return 0;
}

static int
verb_run (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  struct run_cli cli = { 0 };
  cleanup_free char *id = NULL;
  int exit_code = 0, ret = -1, parsed;

  cli.req.nvidia_env = CDI_NVIDIA_ENV_CONTAINER;
  parsed = parse_run (argc, argv, &cli, err);
  if (parsed == CLI_HELP)
    ret = exit_code = 0;
  else if (parsed == 0 && check_ports_free (env, &cli, err) == 0 && resolve_cdi (&cli, err) == 0
           && ensure_image (env, cli.req.image, err) == 0
           && containers_create (&env->containers, &cli.req, &id, err) == 0)
    {
      struct husk_error *ignored = NULL;

      if (!cli.interactive && !cli.req.spec.terminal && !cli.detach)
        freopen ("/dev/null", "r", stdin);
      ret = containers_start (&env->containers, id, &exit_code, err);
      if (ret == 0 && cli.detach)
        printf ("%s\n", id);
      /* A detached one is finished by its waiter; a failed start leaves
       * nothing. */
      if (ret < 0)
        containers_remove (&env->containers, id, true, &ignored);
      else if (!cli.detach)
        containers_finish (&env->containers, id, &ignored);
      husk_error_free (&ignored);
    }
  run_cli_clear (&cli);
  return ret < 0 ? -1 : exit_code;
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
  int ret;

  if (first < 0)
    return -1;
  env.containers.image_root = env.image.root;
  if (first >= argc)
    {
      fputs (CONTAINER_USAGE, stderr);
      return CLI_EXIT_ERROR;
    }
  verb = argv[first];
  argc -= first;
  argv += first;
  if (strcmp (verb, "run") == 0)
    return verb_run (&env, argc, argv, err);
  if (strcmp (verb, "ls") == 0 || strcmp (verb, "ps") == 0)
    return container_cli_ls (&env, argc, argv, err);
  if (strcmp (verb, "port") == 0)
    return container_cli_port (&env, argc, argv, err);
  if (strcmp (verb, "cp") == 0)
    return container_cli_cp (&env, argc, argv, err);
  if (strcmp (verb, "exec") == 0)
    return container_cli_exec (&env, argc, argv, err);
  if (strcmp (verb, "logs") == 0)
    return container_cli_logs (&env, argc, argv, err);
  if (strcmp (verb, "inspect") == 0)
    return container_cli_inspect (&env, argc, argv, err);
  if (strcmp (verb, "stats") == 0)
    return container_cli_stats (&env, argc, argv, err);
  if (strcmp (verb, "top") == 0)
    return container_cli_top (&env, argc, argv, err);
  ret = container_cli_life (&env, verb, argc, argv, err);
  if (ret != CLI_UNKNOWN_VERB)
    return ret;
  return husk_error_make (err, 0, "container: unknown verb `%s` (see husk container --help)", verb);
}
