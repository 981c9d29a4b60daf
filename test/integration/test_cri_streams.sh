#!/usr/bin/env bash
# huskd's streaming list RPCs end to end over gRPC, driven by
# test/e2e/cri_streams.py: busybox pushed to a local docker-registry, pods on
# a CNI bridge of their own, then every Stream* RPC against
# its List* twin (filters, empty results, failures, batches over 1 MiB,
# concurrency, cancels).  cri_lib.sh's trap removes what the test made.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup streams --registry
cri_run_py cri_streams.py "$HUSKD" "$ADDR" "$E2E"
finish
