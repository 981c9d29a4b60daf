#!/usr/bin/env bash
# AppArmor through CRI over gRPC, driven by test/e2e/cri_apparmor.py: the
# SecurityProfile and old string forms to process.apparmorProfile, the
# refusals naming the profile on a host without AppArmor (this one), a
# pod's pause process.  cri_lib.sh's trap removes what the test made.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup apparmor --registry
cri_run_py cri_apparmor.py "$HUSKD" "$ADDR" "$E2E"
finish
