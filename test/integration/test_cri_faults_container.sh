#!/usr/bin/env bash
# Faults injected into running containers, driven by
# test/e2e/cri_faults_container.py: a husk-monitor killed (alone, with its
# container's init, across a huskd restart) and a container record
# (cri.json) emptied or garbled; each must end stopped and removable with
# no process, mount, cgroup or directory left.  cri_lib.sh's trap removes
# what the test made, even when it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup faults --registry
cri_run_py cri_faults_container.py "$HUSKD" "$ADDR" "$E2E"
finish
