/* cri_message_copy (cri/spec/proto_copy.c): a copy packs to the same bytes
 * as its original, owns everything protobuf_c_message_free_unpacked frees
 * (the original is freed first; ASan's build sees any double free or
 * leak), keeps unknown fields, bytes with NULs and default strings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cri/proto/api.pb-c.h"
#include "cri/spec/proto_copy.h"
#include "husk/cleanup.h"
#include "husk/util.h"

struct packed
{
  uint8_t *bytes;
  size_t len;
};

static struct packed
pack (const ProtobufCMessage *m)
{
  struct packed p = { .len = protobuf_c_message_get_packed_size (m) };

  p.bytes = xmalloc (p.len + 1);
  assert_int_equal (protobuf_c_message_pack (m, p.bytes), p.len);
  return p;
}

/* ORIGINAL's bytes, unpacked (owned as read from the wire), copied, the
 * unpacked one freed, the copy packed: the same bytes. */
static void
assert_copy_packs_same (const ProtobufCMessageDescriptor *desc, const uint8_t *bytes, size_t len)
{
  ProtobufCMessage *wire = protobuf_c_message_unpack (desc, NULL, len, bytes);
  ProtobufCMessage *copy;
  struct packed again;

  assert_non_null (wire);
  copy = cri_message_copy (wire);
  assert_ptr_not_equal (copy, wire);
  protobuf_c_message_free_unpacked (wire, NULL);
  again = pack (copy);
  assert_int_equal (again.len, len);
  assert_memory_equal (again.bytes, bytes, len);
  free (again.bytes);
  protobuf_c_message_free_unpacked (copy, NULL);
}

/* A ContainerConfig with a field of each kind the CRI uses: strings,
 * repeated strings, nested and repeated messages, maps, enums, bools,
 * int64s, repeated int64s. */
static void
test_container_config (void **state)
{
  Runtime__V1__ContainerConfig config = RUNTIME__V1__CONTAINER_CONFIG__INIT;
  Runtime__V1__ContainerMetadata meta = RUNTIME__V1__CONTAINER_METADATA__INIT;
  Runtime__V1__ImageSpec image = RUNTIME__V1__IMAGE_SPEC__INIT;
  Runtime__V1__KeyValue env[2] = { RUNTIME__V1__KEY_VALUE__INIT, RUNTIME__V1__KEY_VALUE__INIT };
  Runtime__V1__KeyValue *envs[] = { &env[0], &env[1] };
  Runtime__V1__Mount mount = RUNTIME__V1__MOUNT__INIT;
  Runtime__V1__Mount *mounts[] = { &mount };
  Runtime__V1__IDMapping idmap = RUNTIME__V1__IDMAPPING__INIT;
  Runtime__V1__IDMapping *idmaps[] = { &idmap };
  Runtime__V1__ContainerConfig__LabelsEntry label = RUNTIME__V1__CONTAINER_CONFIG__LABELS_ENTRY__INIT;
  Runtime__V1__ContainerConfig__LabelsEntry *labels[] = { &label };
  Runtime__V1__LinuxContainerConfig linux_config = RUNTIME__V1__LINUX_CONTAINER_CONFIG__INIT;
  Runtime__V1__LinuxContainerResources res = RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT;
  Runtime__V1__LinuxContainerResources__UnifiedEntry unified
      = RUNTIME__V1__LINUX_CONTAINER_RESOURCES__UNIFIED_ENTRY__INIT;
  Runtime__V1__LinuxContainerResources__UnifiedEntry *unifieds[] = { &unified };
  Runtime__V1__LinuxContainerSecurityContext sc = RUNTIME__V1__LINUX_CONTAINER_SECURITY_CONTEXT__INIT;
  Runtime__V1__Capability caps = RUNTIME__V1__CAPABILITY__INIT;
  Runtime__V1__Int64Value run_as = RUNTIME__V1__INT64_VALUE__INIT;
  char *cmd[] = { "sh", "-c", "echo hi" }, *add[] = { "CAP_NET_ADMIN", "CAP_SYS_TIME" };
  int64_t groups[] = { 10, 0, -1, 1 << 30 };
  struct packed p;

  (void) state;
  meta.name = "web";
  meta.attempt = 3;
  image.image = "docker.io/library/busybox:latest";
  config.metadata = &meta;
  config.image = &image;
  config.n_command = 3;
  config.command = cmd;
  config.working_dir = "/srv";
  env[0].key = "A", env[0].value = "1";
  env[1].key = "EMPTY", env[1].value = "";
  config.n_envs = 2;
  config.envs = envs;
  mount.container_path = "/data";
  mount.host_path = "/var/lib/data";
  mount.readonly = 1;
  mount.propagation = RUNTIME__V1__MOUNT_PROPAGATION__PROPAGATION_HOST_TO_CONTAINER;
  idmap.host_id = 100000, idmap.container_id = 0, idmap.length = 65536;
  mount.n_uidmappings = 1;
  mount.uidmappings = idmaps;
  config.n_mounts = 1;
  config.mounts = mounts;
  label.key = "app", label.value = "web";
  config.n_labels = 1;
  config.labels = labels;
  config.stdin = 1;
  res.cpu_shares = 2;
  res.memory_limit_in_bytes = INT64_C (1) << 40;
  res.oom_score_adj = 1000;
  unified.key = "memory.high", unified.value = "max";
  res.n_unified = 1;
  res.unified = unifieds;
  caps.n_add_capabilities = 2;
  caps.add_capabilities = add;
  run_as.value = 1000;
  sc.capabilities = &caps;
  sc.run_as_user = &run_as;
  sc.n_supplemental_groups = 4;
  sc.supplemental_groups = groups;
  linux_config.resources = &res;
  linux_config.security_context = &sc;
  config.linux = &linux_config;

  p = pack (&config.base);
  assert_true (p.len > 200);
  assert_copy_packs_same (&runtime__v1__container_config__descriptor, p.bytes, p.len);
  free (p.bytes);
}

/* Fields this build does not know (a newer kubelet's) are kept. */
static void
test_unknown_fields (void **state)
{
  Runtime__V1__PodSandboxMetadata meta = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
  struct packed p;
  /* field 999, varint 300; field 1000, length-delimited "xyz" */
  static const uint8_t unknown[] = { 0xb8, 0x3e, 0xac, 0x02, 0xc2, 0x3e, 0x03, 'x', 'y', 'z' };
  uint8_t bytes[256];
  ProtobufCMessage *wire;

  (void) state;
  meta.name = "pod";
  meta.uid = "u-1";
  p = pack (&meta.base);
  assert_true (p.len + sizeof unknown <= sizeof bytes);
  memcpy (bytes, p.bytes, p.len);
  memcpy (bytes + p.len, unknown, sizeof unknown);
  wire = protobuf_c_message_unpack (&runtime__v1__pod_sandbox_metadata__descriptor, NULL,
                                    p.len + sizeof unknown, bytes);
  assert_non_null (wire);
  assert_int_equal (wire->n_unknown_fields, 2);
  protobuf_c_message_free_unpacked (wire, NULL);
  assert_copy_packs_same (&runtime__v1__pod_sandbox_metadata__descriptor, bytes, p.len + sizeof unknown);
  free (p.bytes);
}

/* bytes fields, NULs inside, and an empty one. */
static void
test_bytes (void **state)
{
  Runtime__V1__ExecSyncResponse resp = RUNTIME__V1__EXEC_SYNC_RESPONSE__INIT;
  static const uint8_t out[] = { 'a', 0, 'b', 0, 0xff };
  struct packed p;

  (void) state;
  resp.stdout.data = (uint8_t *) out;
  resp.stdout.len = sizeof out;
  resp.exit_code = 7;
  p = pack (&resp.base);
  assert_copy_packs_same (&runtime__v1__exec_sync_response__descriptor, p.bytes, p.len);
  free (p.bytes);
}

/* A message built in place (the stores' attribute copies): defaults stay
 * shared, an empty repeated field's array is not copied, the pointers
 * are the copy's own. */
static void
test_built_in_place (void **state)
{
  Runtime__V1__PodSandboxConfig config = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
  Runtime__V1__PodSandboxMetadata meta = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
  Runtime__V1__PodSandboxConfig__AnnotationsEntry *none[1] = { NULL };
  Runtime__V1__PodSandboxConfig *copy;
  char name[] = "pod-a";

  (void) state;
  meta.name = name;
  config.metadata = &meta;
  config.annotations = none; /* n_annotations 0 */
  copy = (Runtime__V1__PodSandboxConfig *) cri_message_copy (&config.base);
  assert_ptr_not_equal (copy->metadata, &meta);
  assert_ptr_not_equal (copy->metadata->name, name);
  name[0] = 'X';
  assert_string_equal (copy->metadata->name, "pod-a");
  assert_ptr_equal (copy->hostname, protobuf_c_empty_string);
  assert_ptr_equal (copy->metadata->namespace_, protobuf_c_empty_string);
  assert_null (copy->annotations);
  assert_int_equal (copy->n_annotations, 0);
  assert_null (copy->linux);
  runtime__v1__pod_sandbox_config__free_unpacked (copy, NULL);
  assert_null (cri_message_copy (NULL));
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_container_config),
    cmocka_unit_test (test_unknown_fields),
    cmocka_unit_test (test_bytes),
    cmocka_unit_test (test_built_in_place),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
