/* husk container exec: a process in a running container, with the
 * container's own process as the default (env, user, capabilities). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cri/cli/cli.h"
#include "cri/spec/ocispec.h"
#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/container.h"

#define EXEC_USAGE                                                                                           \
  "usage: husk container exec [-t] [-i] [-e K=V] [-w DIR] [-u UID[:GID]] CONTAINER CMD...\n"                 \
  "  -t, --tty            a terminal\n"                                                                      \
  "  -i, --interactive    keep stdin open (it always is)\n"                                                  \
  "  -e, --env KEY=VALUE  an environment variable over the container's\n"                                    \
  "  -w, --workdir DIR    the working directory\n"                                                           \
  "  -u, --user UID[:GID] the user\n"                                                                        \
  "  -h, --help           this text\n"

static int
apply_user (struct spec_process *process, const char *user, struct husk_error **err)
{
  cleanup_free char *copy = xstrdup (user);
  char *colon = strchr (copy, ':');
  long long uid, gid = 0;

  if (colon)
    *colon++ = '\0';
  if (husk_parse_int64 (copy, 0, UINT32_MAX - 1, &uid) < 0
      || (colon && husk_parse_int64 (colon, 0, UINT32_MAX - 1, &gid) < 0))
    return husk_error_make (err, 0, "container exec: --user `%s`: expected UID[:GID]", user);
  process->user.uid = (uid_t) uid;
  process->user.gid = colon ? (gid_t) gid : process->user.gid;
  return 0;
}

static int
override_process (struct spec_process *process, int argc, char **argv, char **env, const char *cwd,
                  const char *user, bool tty, struct husk_error **err)
{
  char **merged = ocispec_merge_env (process->env, env);

  husk_strvfreep (&process->env);
  process->env = merged;
  husk_strvfreep (&process->args);
  process->args = xcalloc ((size_t) argc + 1, sizeof (char *));
  for (int i = 0; i < argc; i++)
    process->args[i] = xstrdup (argv[i]);
  if (cwd)
    {
      free (process->cwd);
      process->cwd = xstrdup (cwd);
    }
  process->terminal = tty;
  return user ? apply_user (process, user, err) : 0;
}

int
container_cli_exec (const struct container_cli_env *env, int argc, char **argv, struct husk_error **err)
{
  struct runtime_ctx rt = { .root = env->containers.runtime_root };
  struct container_record *rec = NULL;
  struct spec *spec = NULL;
  cleanup_strv char **extra_env = NULL;
  const char *cwd = NULL, *user = NULL;
  bool tty = false;
  int c, exit_code = 0, ret = -1;

  static const struct option options[] = {
    { "tty", no_argument, NULL, 't' },
    { "interactive", no_argument, NULL, 'i' },
    { "env", required_argument, NULL, 'e' },
    { "workdir", required_argument, NULL, 'w' },
    { "user", required_argument, NULL, 'u' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  static const struct cli_verb verb = { "exec", EXEC_USAGE, "tie:w:u:", options };

  optind = 1;
  while ((c = cli_getopt (&verb, argc, argv, err)) >= 0)
    switch (c)
      {
      case 't':
        tty = true;
        break;
      case 'e':
        {
          char *const one[] = { optarg, NULL };
          char **next = ocispec_merge_env (extra_env, one);
          husk_strvfreep (&extra_env);
          extra_env = next;
          break;
        }
      case 'w':
        cwd = optarg;
        break;
      case 'u':
        user = optarg;
        break;
      default: /* -i: stdin is passed through anyway */
        break;
      }
  if (c != -1)
    return c == CLI_HELP ? 0 : -1;
  if (optind + 1 >= argc)
    return husk_error_make (err, 0,
                            "container exec: expected CONTAINER CMD... (see husk container exec --help)");
  if (containers_lookup (&env->containers, argv[optind], &rec, err) < 0)
    return -1;
  if (container_load_spec (&rt, rec->id, &spec, err) == 0
      && override_process (&spec->process, argc - optind - 1, argv + optind + 1, extra_env, cwd, user, tty,
                           err)
             == 0)
    {
      struct exec_options opts = { .process = &spec->process };
      ret = container_exec (&rt, rec->id, &opts, &exit_code, err);
    }
  spec_free (spec);
  container_record_free (rec);
  return ret < 0 ? -1 : exit_code;
}
