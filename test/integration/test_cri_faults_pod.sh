#!/usr/bin/env bash
# Faults around a pod's teardown, injected on purpose and driven by
# test/e2e/cri_faults_pod.py: huskd SIGKILLed inside StopPodSandbox's CNI
# DEL, the netns gone before DEL, half-written pod records, a rollback
# whose DEL fails, an orphan CNI cache entry and stale temp files.  Each
# must end stopped, removable, with nothing left (veth, iptables rules and
# chains, lease, pins, mounts, dirs).  cri_lib.sh's trap removes what the
# test made, even when it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup faults --portmap
cri_run_py cri_faults_pod.py "$HUSKD" "$E2E"
finish
