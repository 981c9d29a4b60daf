/* AppArmor under CRI: husk's default profile (husk-default, loaded with
 * apparmor_parser when huskd starts on an AppArmor host) and the choice
 * of a container's or a pod's profile from its SecurityProfile, as
 * containerd makes it: RuntimeDefault (or nothing) is husk-default,
 * Unconfined is none, Localhost is a profile loaded by the node's admin. */
#ifndef HUSK_CRI_APPARMOR_H
#define HUSK_CRI_APPARMOR_H

#include <stdbool.h>

#include "husk/error.h"

#define CRI_APPARMOR_DEFAULT "husk-default"
/* securityfs's list of the loaded profiles, one "NAME (MODE)" a line. */
#define CRI_APPARMOR_PROFILES_FILE "/sys/kernel/security/apparmor/profiles"

/* What huskd found at start.  Zeroed: AppArmor is off (every RuntimeDefault
 * a no-op, every Localhost refused). */
struct cri_apparmor
{
  bool enabled;        /* the kernel has AppArmor on */
  bool default_loaded; /* husk-default is loaded */
  char *default_error; /* why it is not (enabled, !default_loaded) */
  char *profiles_file; /* CRI_APPARMOR_PROFILES_FILE, or a test's */
};

/* The text of husk-default, for apparmor_parser. */
const char *cri_apparmor_default_text (void);

/* At huskd's start: is AppArmor on, and if so load husk-default with
 * `apparmor_parser -Kr` (replacing an older one).  A failure is logged and
 * kept in default_error; it is not huskd's failure. */
void cri_apparmor_init (struct cri_apparmor *aa);
void cri_apparmor_clear (struct cri_apparmor *aa);

/* Runs PARSER (an apparmor_parser; NULL: the one in /usr/sbin, /sbin or
 * PATH) with ARGS (e.g. "-Kr") on TEXT given on its stdin; the error
 * carries the parser's last line of stderr. */
int cri_apparmor_parse (const char *parser, const char *args, const char *text, struct husk_error **err);

/* Whether NAME is in PROFILES_FILE; -1 when that cannot be read. */
int cri_apparmor_profile_loaded (const char *profiles_file, const char *name);

/* One CRI choice.  HAS_PROFILE: the SecurityProfile message is set, with
 * TYPE (its ProfileType: 0 RuntimeDefault, 1 Unconfined, 2 Localhost)
 * and LOCALHOST_REF; else OLD is the deprecated string form
 * ("runtime/default", "unconfined", "localhost/NAME"; NULL or "" is
 * RuntimeDefault), which the message overrides, as kubelet sends both. */
struct cri_apparmor_choice
{
  bool has_profile;
  int type;
  const char *localhost_ref;
  const char *old;
  bool privileged;
  const char *field; /* for messages: "linux.security_context" */
};

/* The OCI process.apparmorProfile for CHOICE: *OUT is NULL for none
 * (Unconfined; RuntimeDefault on a host without AppArmor or for a
 * privileged container), "husk-default", or the Localhost profile.
 * Bad input is EINVAL naming the field; a profile that cannot be had on
 * this host (no AppArmor, not loaded, husk-default failed to load) is
 * EAGAIN (FAILED_PRECONDITION) naming it. */
int cri_apparmor_resolve (const struct cri_apparmor *aa, const struct cri_apparmor_choice *choice, char **out,
                          struct husk_error **err);

#endif
