#!/usr/bin/env bash
# Bursts of ExecSync (kubelet's exec probes) wait on a pool of their own
# instead of failing, a waiting call's own timeout counts from its
# arrival, and a flood past the bound is refused RESOURCE_EXHAUSTED naming
# the limit (test/e2e/cri_exec_burst.py).  cri_lib.sh's trap removes what
# the test made, even when it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup exec-burst --registry
cri_run_py cri_exec_burst.py "$HUSKD" "$ADDR" "$E2E"
finish
