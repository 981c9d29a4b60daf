/* Checks kubelet's user namespace options; see userns.h.  kubelet gives a
 * pod one range of 65536 ids (its userns manager: host ids from 65536 on,
 * in steps of the pod's length), so a mapping it cannot have sent is a
 * caller's error, never something to run with. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "cri/spec/userns.h"

static const char *
mode_name (Runtime__V1__NamespaceMode mode)
{
  switch (mode)
    {
    case RUNTIME__V1__NAMESPACE_MODE__POD:
      return "POD";
    case RUNTIME__V1__NAMESPACE_MODE__NODE:
      return "NODE";
    case RUNTIME__V1__NAMESPACE_MODE__CONTAINER:
      return "CONTAINER";
    case RUNTIME__V1__NAMESPACE_MODE__TARGET:
      return "TARGET";
    default:
      return "unknown";
    }
}

static bool
ranges_overlap (uint64_t a, uint64_t a_len, uint64_t b, uint64_t b_len)
{
  return a < b + b_len && b < a + a_len;
}

/* One list (uids or gids): each range sane, none overlapping another on
 * either side, root mapped. */
static int
parse_list (Runtime__V1__IDMapping *const *list, size_t n, const char *field, const char *name,
            struct husk_id_map *out, size_t *n_out, struct husk_error **err)
{
  bool root_mapped = false;

  if (n == 0)
    return husk_error_kind (err, EINVAL, "%s.%s: required for mode POD (kubelet's mappings for the pod)",
                            field, name);
  if (n > CRI_USERNS_MAX_MAPPINGS)
    return husk_error_kind (err, EINVAL, "%s.%s: %zu mappings, the kernel takes at most %d", field, name, n,
                            CRI_USERNS_MAX_MAPPINGS);
  for (size_t i = 0; i < n; i++)
    {
      const Runtime__V1__IDMapping *m = list[i];
      uint64_t host = m->host_id, inside = m->container_id, len = m->length;

      if (len == 0)
        return husk_error_kind (err, EINVAL, "%s.%s[%zu].length: must not be 0", field, name, i);
      if (host + len > UINT32_MAX || inside + len > UINT32_MAX)
        return husk_error_kind (err, EINVAL,
                                "%s.%s[%zu]: host_id %u / container_id %u + length %u pass 2^32-1", field,
                                name, i, m->host_id, m->container_id, m->length);
      if (host < CRI_USERNS_HOST_RESERVED)
        return husk_error_kind (err, EINVAL,
                                "%s.%s[%zu]: host_id %u is below %u: those ids are the node's, kubelet never "
                                "gives them to a pod",
                                field, name, i, m->host_id, CRI_USERNS_HOST_RESERVED);
      for (size_t j = 0; j < i; j++)
        {
          if (ranges_overlap (host, len, list[j]->host_id, list[j]->length))
            return husk_error_kind (err, EINVAL, "%s.%s[%zu]: host_id %u (length %u) overlaps %s[%zu]", field,
                                    name, i, m->host_id, m->length, name, j);
          if (ranges_overlap (inside, len, list[j]->container_id, list[j]->length))
            return husk_error_kind (err, EINVAL, "%s.%s[%zu]: container_id %u (length %u) overlaps %s[%zu]",
                                    field, name, i, m->container_id, m->length, name, j);
        }
      root_mapped = root_mapped || inside == 0;
      out[i] = (struct husk_id_map){ m->container_id, m->host_id, m->length };
    }
  if (!root_mapped)
    return husk_error_kind (err, EINVAL, "%s.%s: container_id 0 (the pod's root) is not mapped", field, name);
  *n_out = n;
  return 0;
}

int
cri_userns_parse (const Runtime__V1__UserNamespace *options, const char *field, struct cri_userns *out,
                  struct husk_error **err)
{
  memset (out, 0, sizeof *out);
  if (options == NULL)
    return 0;
  switch (options->mode)
    {
    case RUNTIME__V1__NAMESPACE_MODE__NODE:
      if (options->n_uids || options->n_gids)
        return husk_error_kind (err, EINVAL, "%s.%s: must be empty for mode NODE (the host's user namespace)",
                                field, options->n_uids ? "uids" : "gids");
      return 0;
    case RUNTIME__V1__NAMESPACE_MODE__POD:
      out->pod = true;
      if (parse_list (options->uids, options->n_uids, field, "uids", out->uids, &out->n_uids, err) < 0
          || parse_list (options->gids, options->n_gids, field, "gids", out->gids, &out->n_gids, err) < 0)
        return -1;
      return 0;
    default:
      return husk_error_kind (err, EINVAL, "%s.mode: %s (%d) is not supported: only POD and NODE", field,
                              mode_name (options->mode), (int) options->mode);
    }
}

bool
cri_userns_equal (const struct cri_userns *a, const struct cri_userns *b)
{
  return a->pod == b->pod && a->n_uids == b->n_uids && a->n_gids == b->n_gids
         && memcmp (a->uids, b->uids, a->n_uids * sizeof a->uids[0]) == 0
         && memcmp (a->gids, b->gids, a->n_gids * sizeof a->gids[0]) == 0;
}

static uint32_t
host_of_root (const struct husk_id_map *maps, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (maps[i].container_id == 0)
      return maps[i].host_id;
  return 0;
}

uid_t
cri_userns_root_uid (const struct cri_userns *userns)
{
  return userns->pod ? host_of_root (userns->uids, userns->n_uids) : 0;
}

gid_t
cri_userns_root_gid (const struct cri_userns *userns)
{
  return userns->pod ? host_of_root (userns->gids, userns->n_gids) : 0;
}
