#!/usr/bin/env bash
# huskd's container RPCs end to end over gRPC, driven by
# test/e2e/cri_container.py: a busybox image pushed to a local
# docker-registry, a pod on a CNI bridge of its own (10.88.79.0/24), then
# create/start/exit codes/CRI logs, ExecSync (output, timeout), stop,
# remove, security contexts and bad input.
#
# The cleanup kills huskd, monitors and containers, unmounts everything
# under the work dir and removes the bridge, leases and iptables rules,
# even when the test fails.
. "$(dirname "$0")/lib.sh"

HUSKD=${HUSKD:-$BUILD_DIR/huskd}
NET=husk-container-test-$$
BRIDGE=hkctr$(($$ % 100000))
SUBNET_PREFIX=10.88.79
IPAM_DIR=/var/lib/cni/networks
FORWARD_BEFORE=$(cat /proc/sys/net/ipv4/ip_forward)
VAR_LIB_CNI_BEFORE=$([ -d /var/lib/cni ] && echo yes)

if [ ! -x "$HUSKD" ] || [ ! -x "$BUILD_DIR/husk-monitor" ]; then
	echo "not ok - huskd and husk-monitor are built ($HUSKD)"
	finish
fi
for tool in bridge host-local loopback; do
	if [ ! -x "/usr/lib/cni/$tool" ]; then
		echo "not ok - CNI plugin /usr/lib/cni/$tool is installed (containernetworking-plugins)"
		finish
	fi
done

E2E=$(mktemp -d /tmp/husk-it-container.XXXXXX)


# Every process whose command line names our work dir (huskd, monitors)
# or whose root is in it (the containers' processes).
kill_ours() {
	local pid root
	for pid in $(cat "$E2E"/*.pid 2>/dev/null) $(grep -l -s -F "$E2E" /proc/[0-9]*/cmdline | cut -d/ -f3); do
		[ "$pid" != $$ ] && kill -KILL "$pid" 2>/dev/null
	done
	for root in /proc/[0-9]*/root; do
		case $(readlink "$root" 2>/dev/null) in
		"$E2E"/*) pid=${root#/proc/}; kill -KILL "${pid%/root}" 2>/dev/null ;;
		esac
	done
}

stop_all() {
	kill_ours
	sleep 0.2
	umount_under "$E2E"
	"$REPO_DIR/hack/registry.sh" stop "$E2E/registry" >/dev/null 2>&1
	ip link del "$BRIDGE" 2>/dev/null
	cni_purge_rules "$NET"
	rm -rf "${IPAM_DIR:?}/$NET"
	[ -z "$VAR_LIB_CNI_BEFORE" ] && rmdir "$IPAM_DIR" /var/lib/cni 2>/dev/null
	[ "$FORWARD_BEFORE" = 0 ] && echo 0 >/proc/sys/net/ipv4/ip_forward
	rm -rf --one-file-system "$E2E"
}
trap 'stop_all; cleanup_all' EXIT

mkdir -p "$E2E/gen" "$E2E/net.d"
cat >"$E2E/net.d/10-husk-container.conflist" <<EOF
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
    { "type": "loopback" }
  ]
}
EOF
echo "{\"cni_conf_dir\": \"$E2E/net.d\"}" >"$E2E/config.json"

if ! protoc --python_out="$E2E/gen" -I "$REPO_DIR/cri/proto" "$REPO_DIR/cri/proto/api.proto" 2>"$E2E/protoc.err"; then
	not_ok "generate the Python CRI messages" "$(cat "$E2E/protoc.err")"
	finish
fi
if ! ADDR=$("$REPO_DIR/hack/registry.sh" start "$E2E/registry" 2>"$E2E/registry.err"); then
	not_ok "start the test registry" "$(cat "$E2E/registry.err")"
	finish
fi
if ! "$REPO_DIR/hack/test-images.sh" "$CACHE_DIR/test-images" --push "$ADDR" busybox >"$E2E/images.log" 2>&1; then
	not_ok "build and push the test images" "$(tail -5 "$E2E/images.log")"
	finish
fi

timeout -k 5 300 "$PY" "$REPO_DIR/test/e2e/cri_container.py" "$HUSKD" "$ADDR" "$E2E" | tee "$E2E/tap"
while read -r line; do
	case $line in
	"ok "*) echo ok >>"$WORK/results" ;;
	"not ok"*) echo "not ok" >>"$WORK/results" ;;
	esac
done <"$E2E/tap"
[ -s "$E2E/tap" ] || not_ok "cri_container.py printed results" "$(tail -5 "$E2E/huskd.log" 2>/dev/null)"
if grep -q '^not ok' "$E2E/tap"; then diag "huskd log: $(tail -8 "$E2E/huskd.log")"; fi
finish
