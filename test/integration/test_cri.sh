#!/usr/bin/env bash
# huskd end to end over gRPC: the runtime-info RPCs and the ImageService,
# driven by test/e2e/cri_images.py against a local docker-registry
# (busybox, and test/evil-traversal for a pull that fails in the unpack).
# cri_lib.sh's trap removes what the test made, even when it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup cri --registry
# A hostile layer the unpack refuses: a pull that fails after its blobs.
if ! "$REPO_DIR/hack/test-images.sh" "$CACHE_DIR/test-images" --push "$ADDR" evil-traversal >>"$E2E/images.log" 2>&1; then
	not_ok "push test/evil-traversal" "$(tail -5 "$E2E/images.log")"
fi
cri_run_py cri_images.py "$HUSKD" "$ADDR" "$E2E"
finish
