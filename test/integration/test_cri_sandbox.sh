#!/usr/bin/env bash
# huskd's pod sandbox RPCs end to end over gRPC, driven by
# test/e2e/cri_sandbox.py: pinned namespaces, hostname, resolv.conf,
# sysctls, CNI (bridge + host-local + portmap + loopback from /usr/lib/cni
# on a bridge and subnet of its own), list filters, stop/remove, a pause
# process that outlives `kill -9 huskd`, and restart safety.
#
# The cleanup kills huskd and pause processes, unmounts the pins and
# removes the bridge, host-local leases and iptables rules CNI left, even
# when the test fails.
. "$(dirname "$0")/lib.sh"

HUSKD=${HUSKD:-$BUILD_DIR/huskd}
NET=husk-sandbox-test-$$
BRIDGE=hkpod$(($$ % 100000))
SUBNET_PREFIX=10.88.78
IPAM_DIR=/var/lib/cni/networks
FORWARD_BEFORE=$(cat /proc/sys/net/ipv4/ip_forward)
VAR_LIB_CNI_BEFORE=$([ -d /var/lib/cni ] && echo yes)

if [ ! -x "$HUSKD" ]; then
	echo "not ok - huskd is built ($HUSKD)"
	finish
fi
for tool in bridge host-local portmap loopback; do
	if [ ! -x "/usr/lib/cni/$tool" ]; then
		echo "not ok - CNI plugin /usr/lib/cni/$tool is installed (containernetworking-plugins)"
		finish
	fi
done

E2E=$(mktemp -d /tmp/husk-it-sandbox.XXXXXX)


stop_all() {
	local pid
	for pid in $(cat "$E2E"/*.pid 2>/dev/null); do
		kill -KILL "$pid" 2>/dev/null
	done
	umount_under "$E2E"
	ip link del "$BRIDGE" 2>/dev/null
	cni_purge_rules "$NET"
	rm -rf "${IPAM_DIR:?}/$NET"
	[ -z "$VAR_LIB_CNI_BEFORE" ] && rmdir "$IPAM_DIR" /var/lib/cni 2>/dev/null
	[ "$FORWARD_BEFORE" = 0 ] && echo 0 >/proc/sys/net/ipv4/ip_forward
	rm -rf --one-file-system "$E2E"
}
trap 'stop_all; cleanup_all' EXIT

mkdir -p "$E2E/gen" "$E2E/net.d" "$E2E/empty.d"
cat >"$E2E/net.d/10-husk-sandbox.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$NET",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$SUBNET_PREFIX.0/24" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } },
    { "type": "loopback" }
  ]
}
EOF
echo "{\"cni_conf_dir\": \"$E2E/net.d\"}" >"$E2E/config.json"
echo "{\"cni_conf_dir\": \"$E2E/empty.d\"}" >"$E2E/config-empty.json"

if ! protoc --python_out="$E2E/gen" -I "$REPO_DIR/cri/proto" "$REPO_DIR/cri/proto/api.proto" 2>"$E2E/protoc.err"; then
	not_ok "generate the Python CRI messages" "$(cat "$E2E/protoc.err")"
	finish
fi

NET=$NET BRIDGE=$BRIDGE SUBNET_PREFIX=$SUBNET_PREFIX IPAM_DIR=$IPAM_DIR \
	timeout -k 5 300 "$PY" "$REPO_DIR/test/e2e/cri_sandbox.py" "$HUSKD" "$E2E" | tee "$E2E/tap"
while read -r line; do
	case $line in
	"ok "*) echo ok >>"$WORK/results" ;;
	"not ok"*) echo "not ok" >>"$WORK/results" ;;
	esac
done <"$E2E/tap"
[ -s "$E2E/tap" ] || not_ok "cri_sandbox.py printed results" "$(tail -5 "$E2E/huskd.log" 2>/dev/null)"
if grep -q '^not ok' "$E2E/tap"; then diag "huskd log: $(tail -8 "$E2E/huskd.log")"; fi
finish
