#!/usr/bin/env bash
# What a CRI client shows of huskd, end to end, driven by test/e2e/cri_info.py: a
# busybox image pushed to a local docker-registry, a pod on a CNI bridge of
# its own, then verbose Status (effective config, CNI state, runtime
# handlers with the default ""), verbose ContainerStatus (pid, sandbox,
# runtime spec, resources), verbose ImageStatus (the image config), the
# Prometheus endpoint (RPC counts and latencies, pods, containers, pull
# bytes) and ListMetricDescriptors/ListPodSandboxMetrics, through gRPC and
# through husk's crictl-like client (test/e2e/cri_cli.py).  cri_lib.sh's trap removes what the test made.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup info --registry
cri_run_py cri_info.py "$HUSKD" "$ADDR" "$E2E"
finish
