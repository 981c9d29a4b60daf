/* `husk image login` and `logout`, as podman's: the credentials are tried
 * against the registry's /v2/ first, then written to the
 * containers-auth.json file that pulls (and huskd) read. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "image/auth_file.h"
#include "image/cli/image_verbs.h"

enum
{
  LOGIN_USERNAME,
  LOGIN_PASSWORD,
  LOGIN_PASSWORD_STDIN,
  LOGIN_AUTHFILE,
  LOGIN_GET_LOGIN,
};
const struct cli_opt image_login_opts[] = {
  [LOGIN_USERNAME] = { "username", 'u', "USER", "the user name (asked on a terminal when not given)" },
  [LOGIN_PASSWORD] = { "password", 'p', "PASSWORD",
                       "the password (visible to other users; prefer "
                       "--password-stdin)" },
  [LOGIN_PASSWORD_STDIN] = { "password-stdin", 0, NULL, "read the password from standard input" },
  [LOGIN_AUTHFILE] = { "authfile", 0, "FILE",
                       "the auth file to write (default: REGISTRY_AUTH_FILE, else "
                       "$XDG_RUNTIME_DIR/containers/auth.json, for root "
                       "/run/containers/0/auth.json)" },
  [LOGIN_GET_LOGIN] = { "get-login", 0, NULL, "print the user name stored for REGISTRY" },
  { NULL, 0, NULL, NULL },
};

enum
{
  LOGOUT_ALL,
  LOGOUT_AUTHFILE,
};
const struct cli_opt image_logout_opts[] = {
  [LOGOUT_ALL] = { "all", 'a', NULL, "remove the credentials of every registry" },
  [LOGOUT_AUTHFILE] = { "authfile", 0, "FILE", "the auth file (default as for login)" },
  { NULL, 0, NULL, NULL },
};

/* "https://reg:5000/v2/" -> "reg:5000", as podman takes registries. */
static char *
registry_host (const char *text)
{
  const char *start = text;

  if (husk_str_has_prefix (text, "https://"))
    start += 8;
  else if (husk_str_has_prefix (text, "http://"))
    start += 7;
  return strndup (start, strcspn (start, "/"));
}

/* One line from stdin without its newline; ECHO off when asked on a
 * terminal. */
static int
read_line (const char *prompt, bool hide, char **out, struct husk_error **err)
{
  struct termios saved, quiet;
  bool restore = false;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;

  if (prompt)
    {
      fputs (prompt, stderr);
      fflush (stderr);
    }
  if (hide && isatty (0) && tcgetattr (0, &saved) == 0)
    {
      quiet = saved;
      quiet.c_lflag &= ~(tcflag_t) ECHO;
      restore = tcsetattr (0, TCSAFLUSH, &quiet) == 0;
    }
  n = getline (&line, &cap, stdin);
  if (restore)
    {
      tcsetattr (0, TCSAFLUSH, &saved);
      fputc ('\n', stderr);
    }
  if (n < 0)
    {
      free (line);
      return husk_error_make (err, 0, "image login: no %s on standard input",
                              hide ? "password" : "user name");
    }
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
    line[--n] = '\0';
  *out = line;
  return 0;
}

static int
get_credentials (const char **values, char **user, char **password, struct husk_error **err)
{
  bool tty = isatty (0);

  if (values[LOGIN_PASSWORD] && values[LOGIN_PASSWORD_STDIN])
    return husk_error_make (err, 0, "image login: give --password or --password-stdin, not both");
  if (values[LOGIN_USERNAME])
    *user = xstrdup (values[LOGIN_USERNAME]);
  else if (!tty || values[LOGIN_PASSWORD_STDIN])
    return husk_error_make (err, 0, "image login: no user name: give --username (stdin is %s)",
                            tty ? "for the password" : "not a terminal");
  else if (read_line ("Username: ", false, user, err) < 0)
    return -1;
  if (values[LOGIN_PASSWORD])
    *password = xstrdup (values[LOGIN_PASSWORD]);
  else if (!tty && !values[LOGIN_PASSWORD_STDIN])
    return husk_error_make (err, 0,
                            "image login: no password: give --password-stdin or --password (stdin is not a "
                            "terminal)");
  else if (read_line (tty ? "Password: " : NULL, true, password, err) < 0)
    return -1;
  if (**user == '\0')
    return husk_error_make (err, 0, "image login: the user name is empty");
  if (**password == '\0')
    return husk_error_make (err, 0, "image login: the password is empty");
  return 0;
}

static int
print_login (const char *path, const char *host, struct husk_error **err)
{
  cleanup_free char *user = NULL;
  cleanup_free char *password = NULL;
  int found = auth_file_lookup (path, host, &user, &password, err);

  if (found < 0)
    return -1;
  if (found == 0)
    return husk_error_make (err, 0, "image login: not logged in to %s (auth file %s)", host, path);
  printf ("%s\n", user);
  return 0;
}

int
image_cli_login (struct image_cli_env *env, const struct image_verb *verb, const char **values, int argc,
                 char **argv, struct husk_error **err)
{
  cleanup_free char *host = registry_host (argv[0]);
  cleanup_free char *path
      = values[LOGIN_AUTHFILE] ? xstrdup (values[LOGIN_AUTHFILE]) : auth_file_default_path ();
  cleanup_free char *user = NULL;
  cleanup_free char *password = NULL;
  struct hosts_config *hosts = NULL;
  struct registry_client *client = NULL;
  int ret;

  (void) verb;
  (void) argc;
  if (*host == '\0')
    return husk_error_make (err, 0, "image login: `%s`: expected a registry (HOST[:PORT])", argv[0]);
  if (values[LOGIN_GET_LOGIN])
    return print_login (path, host, err);
  if (get_credentials (values, &user, &password, err) < 0)
    return -1;
  ret = image_cli_open_registry (env, &hosts, &client, NULL, err);
  if (ret == 0)
    {
      registry_client_add_credentials (client, host, user, password);
      ret = registry_check_login (client, host, err);
    }
  if (ret == 0)
    ret = auth_file_store (path, host, user, password, err);
  if (ret == 0)
    printf ("Login Succeeded!\n");
  registry_client_free (client);
  hosts_config_free (hosts);
  return ret;
}

int
image_cli_logout (struct image_cli_env *env, const struct image_verb *verb, const char **values, int argc,
                  char **argv, struct husk_error **err)
{
  cleanup_free char *host = argc > 0 ? registry_host (argv[0]) : NULL;
  cleanup_free char *path
      = values[LOGOUT_AUTHFILE] ? xstrdup (values[LOGOUT_AUTHFILE]) : auth_file_default_path ();
  bool all = values[LOGOUT_ALL] != NULL, removed = false;

  (void) env;
  (void) verb;
  if (all == (host != NULL))
    return husk_error_make (err, 0,
                            "image logout: give a REGISTRY or --all (usage: husk image logout "
                            "[--all] [REGISTRY])");
  if (auth_file_remove (path, host, &removed, err) < 0)
    return -1;
  if (all)
    printf ("Removed login credentials for all registries\n");
  else if (!removed)
    return husk_error_make (err, 0, "image logout: not logged in to %s (auth file %s)", host, path);
  else
    printf ("Removed login credentials for %s\n", host);
  return 0;
}
