#!/usr/bin/env bash
# huskd's CheckpointContainer end to end over gRPC, driven by
# test/e2e/cri_checkpoint.py: a busybox pod on a CNI bridge of its own,
# a counting container, every refusal (nothing left, the container still
# running) and, where this host's criu can dump, the archive's layout.
# The real dump runs in the VM too (test/vm/test_checkpoint.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup ckpt --registry
cri_run_py cri_checkpoint.py "$HUSKD" "$ADDR" "$E2E"
finish
