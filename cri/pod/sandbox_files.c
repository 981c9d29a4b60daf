/* The files a pod's containers bind-mount: /etc/hostname, /etc/hosts and
 * /etc/resolv.conf, kept in ROOT/sandboxes/<id>/ and written atomically. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cri/pod/sandbox_internal.h"
#include "husk/cleanup.h"
#include "husk/util.h"

static int
write_text (const char *path, const char *text, struct husk_error **err)
{
  return husk_write_file_atomic (path, text, strlen (text), 0644, err);
}

static int
copy_host_file (const char *from, const char *to, const char *fallback, struct husk_error **err)
{
  cleanup_free char *text = NULL;
  struct husk_error *ignored = NULL;

  if (husk_read_file (from, &text, NULL, &ignored) < 0)
    {
      husk_error_free (&ignored);
      return write_text (to, fallback, err);
    }
  return write_text (to, text, err);
}

static void
append (char **text, const char *fmt, const char *value)
{
  char *line = xasprintf (fmt, value);
  char *joined = xasprintf ("%s%s", *text, line);

  free (line);
  free (*text);
  *text = joined;
}

static void
append_list (char **text, const char *word, char *const *items, size_t n)
{
  if (n == 0)
    return;
  append (text, "%s", word);
  for (size_t i = 0; i < n; i++)
    append (text, " %s", items[i]);
  append (text, "%s", "\n");
}

static int
write_resolv_conf (const struct sandbox *sb, struct husk_error **err)
{
  const Runtime__V1__DNSConfig *dns = sb->config->dns_config;
  cleanup_free char *text = xstrdup ("");

  if (dns == NULL || dns->n_servers + dns->n_searches + dns->n_options == 0)
    return copy_host_file ("/etc/resolv.conf", sb->resolv_conf_path, "", err);
  append_list (&text, "search", dns->searches, dns->n_searches);
  for (size_t i = 0; i < dns->n_servers; i++)
    append (&text, "nameserver %s\n", dns->servers[i]);
  append_list (&text, "options", dns->options, dns->n_options);
  return write_text (sb->resolv_conf_path, text, err);
}

static int
write_hosts (const struct sandbox *sb, const char *hostname, struct husk_error **err)
{
  cleanup_free char *text = xstrdup ("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");

  if (sb->netns_path == NULL)
    return copy_host_file ("/etc/hosts", sb->hosts_path, text, err);
  for (size_t i = 0; sb->ips[i]; i++)
    {
      append (&text, "%s\t", sb->ips[i]);
      append (&text, "%s\n", hostname);
    }
  return write_text (sb->hosts_path, text, err);
}

/* Root in the pod's user namespace owns them (host root would show as
 * nobody there); they are the pod's own copies, no host file changes. */
static int
give_to_pod_root (const struct sandbox *sb, const struct cri_userns *userns, struct husk_error **err)
{
  const char *paths[] = { sb->hostname_path, sb->hosts_path, sb->resolv_conf_path };

  if (!userns->pod)
    return 0;
  for (size_t i = 0; i < 3; i++)
    if (chown (paths[i], cri_userns_root_uid (userns), cri_userns_root_gid (userns)) < 0)
      return husk_error_make (err, errno, "chown `%s` to the pod's root (%u:%u)", paths[i],
                              (unsigned) cri_userns_root_uid (userns),
                              (unsigned) cri_userns_root_gid (userns));
  return 0;
}

int
sandbox_write_files (struct sandbox *sb, const char *hostname, const struct cri_userns *userns,
                     struct husk_error **err)
{
  cleanup_free char *line = xasprintf ("%s\n", hostname);

  if (write_text (sb->hostname_path, line, err) < 0 || write_hosts (sb, hostname, err) < 0
      || write_resolv_conf (sb, err) < 0 || give_to_pod_root (sb, userns, err) < 0)
    return husk_error_wrap (err, "write the pod's files in `%s`", sb->dir);
  return 0;
}
