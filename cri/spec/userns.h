/* A pod's user namespace (KEP-127, `hostUsers: false`): kubelet's
 * NamespaceOption.userns_options checked and turned into id maps.  Mode
 * POD is a user namespace of the pod's own with kubelet's mappings; NODE
 * (or no userns_options) is the host's. */
#ifndef HUSK_CRI_USERNS_H
#define HUSK_CRI_USERNS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "cri/proto/api.pb-c.h"
#include "husk/error.h"
#include "husk/idmap.h"

/* The kernel takes at most 340 lines in uid_map. */
#define CRI_USERNS_MAX_MAPPINGS 340
/* Host ids kubelet never hands to a pod: they are the node's own. */
#define CRI_USERNS_HOST_RESERVED 65536U

struct cri_userns
{
  bool pod; /* mode POD: a user namespace of the pod's own */
  struct husk_id_map uids[CRI_USERNS_MAX_MAPPINGS], gids[CRI_USERNS_MAX_MAPPINGS];
  size_t n_uids, n_gids;
};

/* Checks OPTIONS (NULL: none, the host's) and fills OUT.  A bad one is
 * EINVAL naming the field under FIELD ("...namespace_options.userns_options"):
 * missing mappings for POD, mappings for NODE, modes kubelet never sends,
 * a zero length, a range past 2^32, overlapping ranges, host ids below
 * 65536, or a container root (id 0) left unmapped. */
int cri_userns_parse (const Runtime__V1__UserNamespace *options, const char *field, struct cri_userns *out,
                      struct husk_error **err);

bool cri_userns_equal (const struct cri_userns *a, const struct cri_userns *b);

/* The host uid and gid of root (id 0) in the pod's namespace; the host's
 * 0 when there is none. */
uid_t cri_userns_root_uid (const struct cri_userns *userns);
gid_t cri_userns_root_gid (const struct cri_userns *userns);

#endif
