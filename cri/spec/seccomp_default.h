/* The RuntimeDefault seccomp profile: an allow-list with the rules of
 * moby's and containerd's default profile (husk's own table in
 * seccomp_default.c), rendered as OCI linux.seccomp for a capability set. */
#ifndef HUSK_CRI_SECCOMP_DEFAULT_H
#define HUSK_CRI_SECCOMP_DEFAULT_H

#include <jansson.h>
#include <stdint.h>

/* The profile for a container whose bounding set is CAPS (bit N = cap N):
 * a rule family gated on a capability is in only when CAPS holds it.
 * Syscall names the linked libseccomp does not know are left out. */
json_t *seccomp_default_profile (uint64_t caps);

#endif
