/* The iptables rules a DEL left behind.  The reference plugins tag each
 * rule they add for a pod with the comment `name: "NET" id: "ID"` and keep
 * a pod's own rules in chains named from a hash of the two (bridge and
 * ptp ipMasq: CNI-<hash>, portmap: CNI-DN-<hash>).  Debian's bridge
 * (containernetworking-plugins 1.1.1, upstream alike) reads the addresses
 * of its masquerade rules off the pod's interface only, ignoring
 * prevResult: a DEL without the netns, or one after a DEL cut short had
 * deleted the interface, frees the lease and leaves 3 rules and a chain.
 * After such a DEL huskd removes what is left, by that tag. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cri/cni/internal.h"
#include "husk/cleanup.h"
#include "husk/util.h"

/* iptables' longest chain name (28) is what the plugins' hashed names fill. */
#define CHAIN_NAME_LEN 28
#define SHARED_CHAIN_PREFIX "CNI-HOSTPORT-"
#define TOOLS_PATH "/usr/local/sbin:/usr/sbin:/sbin:/usr/local/bin:/usr/bin:/bin"

/* PREFIX + the hex SHA-512 of NETWORK + CONTAINER_ID, cut to 28 characters:
 * the plugins' per-pod chain names. */
static char *
hashed_chain (const char *prefix, const char *network, const char *container_id)
{
  cleanup_free char *input = xasprintf ("%s%s", network, container_id);
  unsigned char digest[EVP_MAX_MD_SIZE];
  char hex[2 * EVP_MAX_MD_SIZE + 1];
  unsigned int len = 0;
  char *name;

  if (EVP_Digest (input, strlen (input), digest, &len, EVP_sha512 (), NULL) != 1)
    return NULL;
  for (unsigned int i = 0; i < len; i++)
    snprintf (hex + 2 * i, 3, "%02x", digest[i]);
  name = xasprintf ("%s%s", prefix, hex);
  name[CHAIN_NAME_LEN] = '\0';
  return name;
}

/* One `-A CHAIN ... [-j|-g TARGET ...]` line of an iptables-save dump. */
struct rule
{
  const char *line;
  char *chain, *target; /* target may be NULL */
  bool ours;
};

/* One table of the dump, between `*name` and COMMIT. */
struct table
{
  const char *name;
  char **chains; /* declared (`:NAME POLICY [..]`) */
  struct rule *rules;
  size_t n_rules;
};

static void
table_clear (struct table *table)
{
  husk_strvfreep (&table->chains);
  for (size_t i = 0; i < table->n_rules; i++)
    {
      free (table->rules[i].chain);
      free (table->rules[i].target);
    }
  free (table->rules);
  memset (table, 0, sizeof *table);
}

static char *
word_at (const char *text)
{
  return strndup (text, strcspn (text, " "));
}

/* iptables-save puts the target last: the last " -j " or " -g " of a rule
 * names it (a comment of someone else's could hold one earlier). */
static char *
rule_target (const char *line)
{
  const char *found = NULL;

  for (const char *p = line; (p = strstr (p, " -")) != NULL; p++)
    if ((p[2] == 'j' || p[2] == 'g') && p[3] == ' ')
      found = p + 4;
  return found ? word_at (found) : NULL;
}

static void
table_add_rule (struct table *table, const char *line, const char *tag)
{
  struct rule *rule;

  table->rules = xrealloc (table->rules, (table->n_rules + 1) * sizeof *table->rules);
  rule = &table->rules[table->n_rules++];
  rule->line = line;
  rule->chain = word_at (line + 3);
  rule->target = rule_target (line);
  rule->ours = strstr (line, tag) != NULL;
}

/* A chain of the pod's own: declared, named CNI-* (the plugins' shared
 * CNI-HOSTPORT-* never), reached by no rule but ours, and either named
 * from the pod's hash or holding nothing but ours (portmap's per-pod chain
 * holds untagged rules; its name says whose it is). */
static bool
chain_is_ours (const struct table *table, const char *chain, bool hashed_name)
{
  if (chain == NULL || !husk_str_has_prefix (chain, "CNI-")
      || husk_str_has_prefix (chain, SHARED_CHAIN_PREFIX) || !husk_strv_contains (table->chains, chain))
    return false;
  for (size_t i = 0; i < table->n_rules; i++)
    {
      const struct rule *rule = &table->rules[i];

      if (rule->ours)
        continue;
      if (rule->target && strcmp (rule->target, chain) == 0)
        return false;
      if (!hashed_name && strcmp (rule->chain, chain) == 0)
        return false;
    }
  return true;
}

/* The pod's chains in TABLE: those its tagged rules jump to, and those
 * named from its hash (also when a cut-short DEL left them unreferenced). */
static char **
owned_chains (const struct table *table, char *const *hashed)
{
  char **owned = xcalloc (1, sizeof *owned);

  for (size_t i = 0; hashed[i]; i++)
    if (chain_is_ours (table, hashed[i], true))
      owned = husk_strv_append (owned, hashed[i]);
  for (size_t i = 0; i < table->n_rules; i++)
    {
      const char *target = table->rules[i].target;

      if (table->rules[i].ours && target && !husk_strv_contains (owned, target)
          && chain_is_ours (table, target, husk_strv_contains (hashed, target)))
        owned = husk_strv_append (owned, target);
    }
  return owned;
}

/* Appends TABLE's part of the restore script to *SCRIPT. */
static void
plan_table (const struct table *table, char *const *hashed, char **script, size_t *n_rules, size_t *n_chains)
{
  cleanup_strv char **owned = owned_chains (table, hashed);
  size_t rules = 0;
  char *longer;

  for (size_t i = 0; i < table->n_rules; i++)
    rules += table->rules[i].ours;
  if (rules == 0 && owned[0] == NULL)
    return;
  longer = xasprintf ("%s*%s\n", *script, table->name);
  free (*script);
  *script = longer;
  for (size_t i = 0; i < table->n_rules; i++)
    if (table->rules[i].ours)
      {
        longer = xasprintf ("%s-D %s\n", *script, table->rules[i].line + 3);
        free (*script);
        *script = longer;
      }
  for (size_t i = 0; owned[i]; i++)
    {
      longer = xasprintf ("%s-F %s\n-X %s\n", *script, owned[i], owned[i]);
      free (*script);
      *script = longer;
    }
  longer = xasprintf ("%sCOMMIT\n", *script);
  free (*script);
  *script = longer;
  *n_rules += rules;
  *n_chains += husk_strv_len (owned);
}

char *
cni_rules_plan (const char *dump, const char *network, const char *container_id, size_t *n_rules,
                size_t *n_chains)
{
  cleanup_free char *lines = xstrdup (dump);
  /* As iptables-save quotes it, closing quote included (so id "c1" is not
   * "c10"); bridge's comment is exactly this, portmap's starts "dnat ". */
  cleanup_free char *tag = xasprintf ("name: \\\"%s\\\" id: \\\"%s\\\"\"", network, container_id);
  char *hashed[] = { hashed_chain ("CNI-", network, container_id),
                     hashed_chain ("CNI-DN-", network, container_id), NULL };
  struct table table = { 0 };
  char *script = xstrdup (""), *saveptr = NULL;

  *n_rules = *n_chains = 0;
  for (char *line = strtok_r (lines, "\n", &saveptr); line; line = strtok_r (NULL, "\n", &saveptr))
    {
      if (line[0] == '*')
        {
          table_clear (&table);
          table.name = line + 1;
          table.chains = xcalloc (1, sizeof *table.chains);
        }
      else if (line[0] == ':' && table.name)
        {
          cleanup_free char *chain = word_at (line + 1);
          table.chains = husk_strv_append (table.chains, chain);
        }
      else if (husk_str_has_prefix (line, "-A ") && table.name)
        table_add_rule (&table, line, tag);
      else if (strcmp (line, "COMMIT") == 0 && table.name)
        {
          if (hashed[0] && hashed[1])
            plan_table (&table, hashed, &script, n_rules, n_chains);
          table_clear (&table);
        }
    }
  table_clear (&table);
  free (hashed[0]);
  free (hashed[1]);
  if (script[0] == '\0')
    {
      free (script);
      return NULL;
    }
  return script;
}

/* ---------------------------------------------------------------- running */

/* Runs ARGV with INPUT on stdin; *OUT its stdout (may be NULL). */
static int
run_tool (const struct cni_ctx *ctx, char *const *argv, const char *input, char **out,
          struct husk_error **err)
{
  extern char **environ;
  const char *path = argv[0];
  struct cni_exec_output output;
  int ret = 0;

  struct cni_exec exec = { .path = path,
                           .argv = argv,
                           .envp = environ,
                           .input = input ? input : "",
                           .input_len = input ? strlen (input) : 0,
                           .timeout_s = ctx && ctx->timeout_s > 0 ? ctx->timeout_s : CNI_DEFAULT_TIMEOUT_S };
  if (cni_exec_run (&exec, &output, err) < 0)
    ret = -1;
  else if (!WIFEXITED (output.status) || WEXITSTATUS (output.status) != 0)
    ret = husk_error_make (err, 0, "%s: exit status 0x%x: %.200s", path, output.status,
                           output.err_len ? output.errout : output.out);
  else if (out)
    *out = steal_pointer (&output.out);
  cni_exec_output_clear (&output);
  return ret;
}

static char *
find_tool (const struct cni_ctx *ctx, const char *name)
{
  struct husk_error *ignored = NULL;
  char *path = NULL;

  if (cni_find_plugin (ctx && ctx->tools_path ? ctx->tools_path : TOOLS_PATH, name, &path, &ignored) < 0)
    husk_error_free (&ignored);
  return path;
}

/* One family: save, plan, restore; a restore that fails (a rule changed
 * between the two) is tried once more on a fresh dump. */
static int
sweep_family (const struct cni_ctx *ctx, const char *family, const char *network, const char *container_id,
              struct husk_error **err)
{
  cleanup_free char *save_name = xasprintf ("%s-save", family);
  cleanup_free char *restore_name = xasprintf ("%s-restore", family);
  cleanup_free char *save = find_tool (ctx, save_name);
  cleanup_free char *restore = find_tool (ctx, restore_name);
  int ret = 0;

  if (save == NULL || restore == NULL)
    return 0; /* no such family here */
  for (int attempt = 0; attempt < 2; attempt++)
    {
      cleanup_free char *dump = NULL;
      cleanup_free char *script = NULL;
      size_t n_rules, n_chains;

      husk_error_free (err);
      if (run_tool (ctx, (char *const[]){ save, NULL }, NULL, &dump, err) < 0)
        return -1;
      script = cni_rules_plan (dump, network, container_id, &n_rules, &n_chains);
      if (script == NULL)
        return 0;
      ret = run_tool (ctx, (char *const[]){ restore, "--noflush", "-w", NULL }, script, NULL, err);
      if (ret == 0)
        {
          husk_log (HUSK_LOG_INFO,
                    "CNI network `%s`, sandbox %s: removed %zu %s rule(s) and %zu chain(s) its DEL left",
                    network, container_id, n_rules, family, n_chains);
          return 0;
        }
    }
  return ret;
}

int
cni_rules_sweep (const struct cni_ctx *ctx, const char *network, const char *container_id,
                 struct husk_error **err)
{
  static const char *const families[] = { "iptables", "ip6tables" };

  for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
    if (sweep_family (ctx, families[i], network, container_id, err) < 0)
      return husk_error_wrap (err, "remove the %s rules CNI network `%s` left for %s", families[i], network,
                              container_id);
  return 0;
}
