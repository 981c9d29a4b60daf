#!/usr/bin/env bash
# husk as the runc binary of Debian's containerd 1.6 with its CRI plugin on:
# kubelet -> containerd -> containerd-shim-runc-v2 -> husk, a real
# deployment.  containerd runs on a root, state and socket of its own
# (hack/containerd-cri.sh writes its config: runtime io.containerd.runc.v2,
# BinaryName = $RUNTIME, cgroupfs, CNI from a bridge conflist on a free
# subnet, the local registry as a mirror), and test/e2e/containerd_cri.py
# drives it over gRPC with husk's Python CRI and SPDY clients.
# RUNTIME=/usr/sbin/runc runs the same checks with containerd's default.
# cri_lib.sh's trap kills containerd, shims and containers and removes
# mounts, netns, bridge, leases and iptables rules; this one the cgroups.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"
# shellcheck source=hack/containerd-cri.sh
. "$REPO_DIR/hack/containerd-cri.sh"

CONTAINERD=${CONTAINERD:-/usr/bin/containerd}
for tool in "$CONTAINERD" /usr/bin/containerd-shim-runc-v2 /usr/bin/skopeo; do
	if [ ! -x "$tool" ]; then
		echo "not ok - $tool is installed (hack/deps.sh test: containerd, skopeo)"
		finish
	fi
done
if [ ! -x "$RUNTIME" ]; then
	echo "not ok - the runtime under test is built ($RUNTIME)"
	finish
fi
CGPARENT=/husk-ctrdcri-$$

# containerd's cgroups (cgroupfs driver: CGPARENT/ID in every hierarchy),
# after cri_lib.sh's trap has killed what was in them.
remove_cgroups() {
	find /sys/fs/cgroup -maxdepth 3 -depth -type d -path "*${CGPARENT}*" -exec rmdir {} \; 2>/dev/null
}
# SIGTERM first: containerd ends on its own; the trap's SIGKILL is for what hangs.
stop_containerd() {
	local pid
	pid=$(cat "$E2E/containerd.pid" 2>/dev/null) || return 0
	kill -TERM "$pid" 2>/dev/null && timeout 10 tail --pid="$pid" -f /dev/null
	wait "$pid" 2>/dev/null
}
# A shim killed by the trap leaves its socket file in /run/containerd/s:
# the paths of the unix sockets our shims listen on.
shim_sockets() {
	local pid inodes
	for pid in $(pgrep -f -- "^[^ ]*containerd-shim-runc-v2 .*-address $E2E/ctrd.sock\$"); do
		inodes=$(find "/proc/$pid/fd" -lname 'socket:*' -printf '%l\n' 2>/dev/null | tr -dc '0-9\n')
		[ -n "$inodes" ] && awk 'NR == FNR { want[$1] = 1; next } ($7 in want) && $8 ~ "^/run/containerd/s/" { print $8 }' \
			<(echo "$inodes") /proc/net/unix
	done
}
cri_setup ctrdcri --registry
trap 'SHIM_SOCKETS=$(shim_sockets); stop_containerd; cri_stop_all; remove_cgroups; rm -f $SHIM_SOCKETS; cleanup_all' EXIT

if ! ctrd_pause_image "$E2E/pause" >"$E2E/pause.log" 2>&1 ||
	! skopeo --insecure-policy copy --quiet --dest-tls-verify=false "oci:$E2E/pause:latest" \
		"docker://$ADDR/test/pause:latest" >>"$E2E/pause.log" 2>&1; then
	not_ok "build and push the sandbox (pause) image" "$(tail -5 "$E2E/pause.log")"
	finish
fi
ctrd_write_config "$E2E/containerd.toml" "$E2E" "$ADDR" "$E2E/net.d" "$RUNTIME"
"$CONTAINERD" --config "$E2E/containerd.toml" >"$E2E/containerd.log" 2>&1 &
echo $! >"$E2E/containerd.pid"
for _ in $(seq 200); do
	[ -S "$E2E/ctrd.sock" ] && break
	kill -0 "$(cat "$E2E/containerd.pid")" 2>/dev/null || break
	sleep 0.05
done
if [ ! -S "$E2E/ctrd.sock" ]; then
	not_ok "containerd starts with its CRI plugin and $RUNTIME as runc" "$(tail -5 "$E2E/containerd.log")"
	finish
fi
ok "containerd starts with its CRI plugin and $RUNTIME as runc"
cri_run_py containerd_cri.py "$E2E/ctrd.sock" "$ADDR" "$E2E" "$RUNTIME" "$E2E/runc-root/k8s.io" "$CGPARENT"
if grep -q '^not ok' "$E2E/tap"; then
	diag "containerd log: $(grep -iE 'level=(error|warn)' "$E2E/containerd.log" | tail -8)"
fi
finish
