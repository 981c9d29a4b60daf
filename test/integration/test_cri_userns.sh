#!/usr/bin/env bash
# User-namespaced pods (hostUsers: false) end to end over gRPC, driven by
# test/e2e/cri_userns.py: kubelet's userns_options, mapped host ids, an
# idmapped image rootfs, volumes with and without idmappings, confined
# capabilities, the RuntimeHandler feature, bad mappings, and a host-user
# pod beside it.  cri_lib.sh's trap removes what the test made.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup userns --registry
cri_run_py cri_userns.py "$HUSKD" "$ADDR" "$E2E"
finish
