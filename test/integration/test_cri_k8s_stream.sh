#!/usr/bin/env bash
# huskd's streaming URLs (Exec, Attach, PortForward) driven by a second,
# independent client: Debian's python3-kubernetes WebSocket stream client
# (kubernetes.stream, WSClient, v4.channel.k8s.io) with its own defaults,
# from test/e2e/cri_k8s_stream.py: busybox pushed to a local registry, a
# pod on a CNI bridge of its own.  cri_lib.sh's trap removes what the
# test made.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

if ! "$PY" -c 'import kubernetes.stream.ws_client' 2>/dev/null; then
	echo "not ok - $PY imports kubernetes.stream.ws_client (hack/deps.sh test: python3-kubernetes)"
	finish
fi
cri_setup k8sws --registry
cri_run_py cri_k8s_stream.py "$HUSKD" "$ADDR" "$E2E"
finish
