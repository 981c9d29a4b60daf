#!/usr/bin/env bash
# huskd end to end over gRPC: the runtime-info RPCs and the ImageService,
# driven by test/e2e/cri_images.py against a local docker-registry.
# cri_lib.sh's trap removes what the test made, even when it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup cri --registry
cri_run_py cri_images.py "$HUSKD" "$ADDR" "$E2E"
finish
