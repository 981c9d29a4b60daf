/* The container's seccomp filter: compiled with libseccomp in the parent
 * (before clone, so the child does no allocation or parsing) into classic
 * BPF, and loaded with seccomp(2) as the last step before execve. */
#include <errno.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <seccomp.h>

#include "husk/cleanup.h"
#include "husk/util.h"
#include "runtime/security.h"

#define SECCOMP_MAX_ARGS 6

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
/* Flags that only change how a notify listener waits; without a listener
 * (which husk does not support) they mean nothing, and seccomp(2) refuses
 * them, so they are accepted and dropped. */
#define LISTENER_ONLY_FLAGS ((unsigned) SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)

static void
seccomp_releasep (scmp_filter_ctx *ctx)
{
  if (*ctx)
    seccomp_release (*ctx);
  *ctx = NULL;
}
#define cleanup_seccomp __attribute__ ((cleanup (seccomp_releasep)))

/* The seccomp(2) flags a spec may ask for, and the libseccomp attribute that
 * checks the kernel supports each one. */
static const struct
{
  unsigned flag;
  enum scmp_filter_attr attr;
  const char *name;
} filter_flags[] = {
  { SECCOMP_FILTER_FLAG_TSYNC, SCMP_FLTATR_CTL_TSYNC, "SECCOMP_FILTER_FLAG_TSYNC" },
  { SECCOMP_FILTER_FLAG_LOG, SCMP_FLTATR_CTL_LOG, "SECCOMP_FILTER_FLAG_LOG" },
  { SECCOMP_FILTER_FLAG_SPEC_ALLOW, SCMP_FLTATR_CTL_SSB, "SECCOMP_FILTER_FLAG_SPEC_ALLOW" },
};

static int
set_filter_attrs (scmp_filter_ctx ctx, unsigned flags, struct husk_error **err)
{
  unsigned known = 0;
  int rc;

  /* We load the filter ourselves, while still privileged; no_new_privs is
   * set by security_apply_no_new_privs only when the spec asks for it. */
  rc = seccomp_attr_set (ctx, SCMP_FLTATR_CTL_NNP, 0);
  if (rc < 0)
    return husk_error_make (err, -rc, "seccomp: clear no_new_privs attribute");
  for (size_t i = 0; i < sizeof filter_flags / sizeof filter_flags[0]; i++)
    {
      known |= filter_flags[i].flag;
      if (!(flags & filter_flags[i].flag))
        continue;
      rc = seccomp_attr_set (ctx, filter_flags[i].attr, 1);
      if (rc < 0)
        return husk_error_make (err, -rc, "seccomp: flag %s", filter_flags[i].name);
    }
  if (flags & ~known)
    return husk_error_make (err, 0, "seccomp: unsupported filter flags 0x%x", flags & ~known);
  return 0;
}

/* libseccomp starts with the native arch; the listed ones are added to it,
 * as runc and crun do, so a profile naming only foreign archs still filters
 * native syscalls instead of killing every one of them. */
static int
add_archs (scmp_filter_ctx ctx, const struct spec_seccomp *seccomp, struct husk_error **err)
{
  for (size_t i = 0; i < seccomp->n_archs; i++)
    {
      int rc = seccomp_arch_add (ctx, seccomp->archs[i]);
      if (rc < 0 && rc != -EEXIST)
        return husk_error_make (err, -rc, "seccomp: add arch 0x%x", seccomp->archs[i]);
    }
  return 0;
}

/* How many syscall numbers past the last one libseccomp knows get ENOSYS. */
#define NEWER_SYSCALLS 64

static int
highest_known_syscall (void)
{
  int highest = -1;

  for (int nr = 0; nr < 1024; nr++)
    {
      char *name = seccomp_syscall_resolve_num_arch (SCMP_ARCH_NATIVE, nr);
      if (name)
        highest = nr;
      free (name);
    }
  return highest;
}

/* A syscall newer than libseccomp (so than any profile we can compile)
 * answers ENOSYS, not the default EPERM, as runc does: libc then falls back
 * to the older call instead of failing (fchmodat2, clone3 and the next
 * ones).  Native arch only, added before the other archs exist, since
 * libseccomp cannot translate a number it has no name for. */
static int
add_newer_syscalls_enosys (scmp_filter_ctx ctx, const struct spec_seccomp *seccomp, struct husk_error **err)
{
  int highest;

  if (seccomp->default_action == SCMP_ACT_ALLOW || seccomp->default_action == SCMP_ACT_LOG
      || seccomp->default_action == SCMP_ACT_ERRNO (ENOSYS))
    return 0;
  highest = highest_known_syscall ();
  for (int nr = highest + 1; highest >= 0 && nr <= highest + NEWER_SYSCALLS; nr++)
    {
      int rc = seccomp_rule_add_exact (ctx, SCMP_ACT_ERRNO (ENOSYS), nr, 0);
      if (rc < 0)
        return husk_error_make (err, -rc, "seccomp: ENOSYS rule for syscall number %d", nr);
    }
  return 0;
}

static bool
args_share_an_index (const struct spec_seccomp_rule *rule)
{
  unsigned seen = 0;

  for (size_t i = 0; i < rule->n_args; i++)
    {
      unsigned bit = 1u << rule->args[i].index;
      if (seen & bit)
        return true;
      seen |= bit;
    }
  return false;
}

static int
add_rule_array (scmp_filter_ctx ctx, const struct spec_seccomp_rule *rule, int syscall_nr, const char *name,
                const struct scmp_arg_cmp *conds, unsigned n_conds, struct husk_error **err)
{
  int rc = seccomp_rule_add_array (ctx, rule->action, syscall_nr, n_conds, conds);

  if (rc == -EEXIST)
    return husk_error_make (err, EEXIST, "seccomp: syscall `%s` rule: conflicts with an earlier rule for it",
                            name);
  if (rc < 0)
    return husk_error_make (err, -rc, "seccomp: syscall `%s` rule", name);
  return 0;
}

/* Conditions on different arguments are ANDed in one rule.  libseccomp
 * cannot AND two conditions on the same argument, so then every condition
 * becomes a rule of its own (ORed), which is what runc does. */
static int
add_syscall_rule (scmp_filter_ctx ctx, const struct spec_seccomp_rule *rule, int syscall_nr, const char *name,
                  struct husk_error **err)
{
  cleanup_free struct scmp_arg_cmp *conds = xcalloc (rule->n_args + 1, sizeof *conds);

  for (size_t i = 0; i < rule->n_args; i++)
    {
      const struct spec_seccomp_arg *arg = &rule->args[i];

      if (arg->index >= SECCOMP_MAX_ARGS)
        return husk_error_make (err, EINVAL, "seccomp: syscall `%s` rule: argument index %u", name,
                                arg->index);
      conds[i] = (struct scmp_arg_cmp){
        .arg = arg->index, .op = (enum scmp_compare) arg->op, .datum_a = arg->value, .datum_b = arg->value_two
      };
    }
  if (!args_share_an_index (rule))
    return add_rule_array (ctx, rule, syscall_nr, name, conds, (unsigned) rule->n_args, err);
  for (size_t i = 0; i < rule->n_args; i++)
    if (add_rule_array (ctx, rule, syscall_nr, name, &conds[i], 1, err) < 0)
      return -1;
  return 0;
}

static int
add_rules (scmp_filter_ctx ctx, const struct spec_seccomp *seccomp, struct husk_error **err)
{
  for (size_t r = 0; r < seccomp->n_rules; r++)
    {
      const struct spec_seccomp_rule *rule = &seccomp->rules[r];

      if (rule->action == SCMP_ACT_NOTIFY)
        return husk_error_make (
            err, 0, "seccomp: syscalls[%zu]: action SCMP_ACT_NOTIFY needs a listener, not supported", r);
      /* libseccomp refuses a rule that repeats the default action. */
      if (rule->action == seccomp->default_action)
        continue;
      for (char **name = rule->names; name && *name; name++)
        {
          int syscall_nr = seccomp_syscall_resolve_name (*name);
          if (syscall_nr == __NR_SCMP_ERROR)
            {
              husk_warn ("seccomp: unknown syscall `%s`, skipped", *name);
              continue;
            }
          if (add_syscall_rule (ctx, rule, syscall_nr, *name, err) < 0)
            return -1;
        }
    }
  return 0;
}

static int
export_bpf (scmp_filter_ctx ctx, struct seccomp_program *out, struct husk_error **err)
{
  cleanup_close int memfd = memfd_create ("husk-seccomp", MFD_CLOEXEC);
  cleanup_free char *bpf = NULL;
  size_t len = 0;
  int rc;

  if (memfd < 0)
    return husk_error_make (err, errno, "seccomp: memfd_create");
  rc = seccomp_export_bpf (ctx, memfd);
  if (rc < 0)
    return husk_error_make (err, -rc, "seccomp: export BPF");
  if (lseek (memfd, 0, SEEK_SET) < 0)
    return husk_error_make (err, errno, "seccomp: rewind BPF memfd");
  if (husk_read_fd (memfd, &bpf, &len, "seccomp BPF memfd", err) < 0)
    return -1;
  if (len == 0 || len % sizeof (struct sock_filter) != 0)
    return husk_error_make (err, 0, "seccomp: exported BPF has a bad size (%zu bytes)", len);
  if (len / sizeof (struct sock_filter) > BPF_MAXINSNS)
    return husk_error_make (err, 0, "seccomp: filter has %zu instructions, the kernel takes at most %d",
                            len / sizeof (struct sock_filter), BPF_MAXINSNS);
  out->len = len / sizeof (struct sock_filter);
  out->filter = xmalloc (len);
  memcpy (out->filter, bpf, len);
  return 0;
}

int
seccomp_compile (const struct spec_seccomp *seccomp, struct seccomp_program *out, struct husk_error **err)
{
  cleanup_seccomp scmp_filter_ctx ctx = NULL;

  memset (out, 0, sizeof *out);
  if (seccomp == NULL)
    return 0;
  if (seccomp->listener_path)
    return husk_error_make (err, 0, "seccomp: listenerPath `%s`: not supported", seccomp->listener_path);
  if (seccomp->default_action == SCMP_ACT_NOTIFY)
    return husk_error_make (err, 0,
                            "seccomp: default action SCMP_ACT_NOTIFY needs a listener, not supported");
  ctx = seccomp_init (seccomp->default_action);
  if (ctx == NULL)
    return husk_error_make (err, EINVAL, "seccomp: init with default action 0x%x", seccomp->default_action);
  if (set_filter_attrs (ctx, seccomp->flags & ~LISTENER_ONLY_FLAGS, err) < 0
      || add_newer_syscalls_enosys (ctx, seccomp, err) < 0 || add_archs (ctx, seccomp, err) < 0
      || add_rules (ctx, seccomp, err) < 0 || export_bpf (ctx, out, err) < 0)
    return -1;
  out->flags = seccomp->flags & ~LISTENER_ONLY_FLAGS;
  return 0;
}

int
seccomp_program_load (const struct seccomp_program *program, struct husk_error **err)
{
  struct sock_fprog prog;
  long rc;

  if (program == NULL || program->len == 0)
    return 0;
  prog.len = (unsigned short) program->len;
  prog.filter = program->filter;
  rc = syscall (SYS_seccomp, SECCOMP_SET_MODE_FILTER, program->flags, &prog);
  if (rc == 0)
    return 0;
  if (rc > 0)
    return husk_error_make (err, 0, "seccomp: load filter: thread %ld could not be synchronized (TSYNC)", rc);
  if (errno == EACCES)
    return husk_error_make (err, errno, "seccomp: load filter (needs no_new_privs or CAP_SYS_ADMIN)");
  return husk_error_make (err, errno, "seccomp: load filter");
}

void
seccomp_program_clear (struct seccomp_program *program)
{
  if (program == NULL)
    return;
  free (program->filter);
  memset (program, 0, sizeof *program);
}
