#!/usr/bin/env bash
# huskd's GetContainerEvents end to end over gRPC, driven by
# test/e2e/cri_events.py: a busybox pod on a CNI bridge of its own;
# two subscribers see each container's CREATED, STARTED,
# STOPPED and DELETED once and in order with the pod's statuses; a
# subscriber going away, StopContainer's wake-up on the exit, SIGTERM with
# open streams and a restart.  cri_lib.sh's trap removes what the test
# made, even when it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup events --registry
cri_run_py cri_events.py "$HUSKD" "$ADDR" "$E2E"
finish
