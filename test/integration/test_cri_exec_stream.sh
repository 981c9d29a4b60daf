#!/usr/bin/env bash
# huskd's streaming server end to end (Exec, PortForward), driven by
# test/e2e/cri_exec_stream.py with its own SPDY client and with husk's
# command-line client (test/e2e/cri_cli.py): busybox pushed to a local
# registry, a pod on a CNI bridge of its own and one on the host network.
# cri_lib.sh's trap removes what the test made.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

if ! command -v script >/dev/null; then
	echo "not ok - script(1) is installed (bsdutils), for exec -it under a terminal"
	finish
fi
cri_setup execstream --registry
cri_run_py cri_exec_stream.py "$HUSKD" "$ADDR" "$E2E"
finish
