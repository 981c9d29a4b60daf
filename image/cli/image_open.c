/* The registry client the image verbs share (pull in image_cli.c, login
 * and logout in image_login.c): the hosts config, the auth file, --creds.
 * Under both, so the verb table and login no longer call each other. */
#include <stdlib.h>
#include <string.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/auth_file.h"
#include "image/cli/image_cli.h"

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
image_cli_open_registry (const struct image_cli_env *env, struct hosts_config **hosts,
                         struct registry_client **client, const char *creds_host, struct husk_error **err)
{
  struct registry_options opts;

  if ((env->registries_file ? hosts_config_load (env->registries_file, hosts, err)
                            : hosts_config_load_default (hosts, err))
      < 0)
    return -1;
  registry_options_init (&opts);
  opts.hosts = *hosts;
  opts.credentials = auth_file_credentials;
  opts.credentials_user = (void *) env->authfile;
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
