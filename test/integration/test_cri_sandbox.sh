#!/usr/bin/env bash
# huskd's pod sandbox RPCs end to end over gRPC, driven by
# test/e2e/cri_sandbox.py: pinned namespaces, hostname, resolv.conf,
# sysctls, CNI (bridge + host-local + portmap + loopback from /usr/lib/cni
# on a bridge and subnet of its own), list filters,
# stop/remove, a pause process that outlives `kill -9 huskd`, and restart
# safety.  cri_lib.sh's trap removes what the test made, even when it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup sandbox --portmap
cri_run_py cri_sandbox.py "$HUSKD" "$E2E"
finish
