#!/usr/bin/env bash
# The attach socket of containers huskd runs, end to end, driven by
# test/e2e/cri_attach.py: a busybox pod on a CNI bridge of its own,
# containers created through CRI with stdin and tty, and clients of their
# monitors' STATE/exits/<id>.attach (cri/container/attach.h).  cri_lib.sh's trap
# removes what the test made, even when it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup attach --registry
cri_run_py cri_attach.py "$HUSKD" "$ADDR" "$E2E"
finish
