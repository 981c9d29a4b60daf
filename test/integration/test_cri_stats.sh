#!/usr/bin/env bash
# huskd's stats RPCs end to end over gRPC, driven by test/e2e/cri_stats.py:
# a busybox image pushed to a local docker-registry, pods on a CNI bridge
# of their own, then ContainerStats/ListContainerStats
# (cpu, memory as the host allows, writable layer) and PodSandboxStats/
# ListPodSandboxStats (network, processes, pod cgroup), filters and bad
# input.  cri_lib.sh's trap removes what the test made, even when it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup stats --registry
cri_run_py cri_stats.py "$HUSKD" "$ADDR" "$E2E"
finish
