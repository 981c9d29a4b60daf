#!/usr/bin/env bash
# huskd's container RPCs end to end over gRPC, driven by
# test/e2e/cri_container.py: a busybox image pushed to a local
# docker-registry, a pod on a CNI bridge of its own, then
# create/start/exit codes/CRI logs, ExecSync (output, timeout), stop,
# remove, security contexts and bad input.  cri_lib.sh's trap removes what
# the test made, even when it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup container --portmap --registry
cri_run_py cri_container.py "$HUSKD" "$ADDR" "$E2E"
finish
