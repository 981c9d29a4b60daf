/* A pod's PodSandboxStatus built from its sandbox record (pod_status.c),
 * and the copy of a config's labels or annotations CRI messages share. */
#ifndef HUSK_CRI_SERVER_POD_STATUS_H
#define HUSK_CRI_SERVER_POD_STATUS_H

#include "cri/pod/sandbox.h"
#include "cri/proto/api.pb-c.h"

/* CRI's map entries share one layout {key, value}: copies of the config's
 * labels or annotations as another message's entry type. */
#define COPY_MAP(entry_type, entry_init, src, n, dst)                                                        \
  do                                                                                                         \
    {                                                                                                        \
      entry_type *copies = xcalloc ((n) + 1, sizeof *copies);                                                \
      (dst) = xcalloc ((n) + 1, sizeof *(dst));                                                              \
      for (size_t i_ = 0; i_ < (n); i_++)                                                                    \
        {                                                                                                    \
          entry_type init_ = entry_init;                                                                     \
          copies[i_] = init_;                                                                                \
          copies[i_].key = (src)[i_]->key;                                                                   \
          copies[i_].value = (src)[i_]->value;                                                               \
          (dst)[i_] = &copies[i_];                                                                           \
        }                                                                                                    \
      /* Where free_map finds the copies, also when there are none. */                                       \
      (dst)[0] = copies;                                                                                     \
    }                                                                                                        \
  while (0)

/* Frees what COPY_MAP made. */
void cri_map_free (void *entries);

/* PodSandboxStatus: the reply and what it points into. */
struct status_view
{
  Runtime__V1__PodSandboxStatus status;
  Runtime__V1__PodSandboxNetworkStatus network;
  Runtime__V1__LinuxPodSandboxStatus linux_status;
  Runtime__V1__Namespace namespaces;
  Runtime__V1__NamespaceOption options;
  Runtime__V1__PodIP *ip_storage;
  Runtime__V1__PodIP **additional_ips;
};

void cri_pod_status_view_init (struct status_view *view, const struct sandbox *sb);
void cri_pod_status_view_clear (struct status_view *view);

#endif
