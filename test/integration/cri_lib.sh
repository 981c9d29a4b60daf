# shellcheck shell=bash
# What every CRI end-to-end script shares (sourced after lib.sh): a work
# dir, a CNI bridge network of its own, the Python CRI messages, the test
# registry with busybox pushed, a trap that kills huskd, monitors and
# containers and removes mounts, bridge, leases and iptables rules even
# when the test fails, and a runner that counts the Python script's TAP.
#
#   cri_setup NAME [--portmap] [--registry]
#   cri_run_py SCRIPT ARGS...     (SCRIPT under test/e2e)
#   cri_cli -r unix://SOCK VERB ARGS...  (test/e2e/cri_cli.py: husk's own
#                                 command-line CRI client, crictl's verbs)
#
# After cri_setup: E2E (work dir), NET, BRIDGE, SUBNET_PREFIX (a free
# 10.x.y, held for this run: hack/free-subnet.sh), IPAM_DIR, HUSKD, and
# ADDR (the registry) with --registry.  ip_forward is put back to what it
# was before the run, whatever that was.  E2E/config.json points
# huskd at the network; E2E/empty.d is a CNI dir without a config.

HUSKD=${HUSKD:-$BUILD_DIR/huskd}
IPAM_DIR=/var/lib/cni/networks
CRI_FORWARD_BEFORE=$(cat /proc/sys/net/ipv4/ip_forward)
CRI_VAR_LIB_CNI_BEFORE=$([ -d /var/lib/cni ] && echo yes)
E2E=
ADDR=

# shellcheck source=hack/kill-procs.sh
. "$REPO_DIR/hack/kill-procs.sh"
# shellcheck source=hack/free-subnet.sh
. "$REPO_DIR/hack/free-subnet.sh"

cri_stop_all() {
	[ -n "$E2E" ] && [ -d "$E2E" ] || return 0
	# shellcheck disable=SC2046
	kill_procs_of "$E2E" $(cat "$E2E"/*.pid 2>/dev/null)
	sleep 0.2
	umount_under "$E2E"
	[ -n "$ADDR" ] && "$REPO_DIR/hack/registry.sh" stop "$E2E/registry" >/dev/null 2>&1
	ip link del "$BRIDGE" 2>/dev/null
	cni_purge_rules "$NET"
	rm -rf "${IPAM_DIR:?}/$NET"
	[ -z "$CRI_VAR_LIB_CNI_BEFORE" ] && rmdir "$IPAM_DIR" /var/lib/cni 2>/dev/null
	[ "$(cat /proc/sys/net/ipv4/ip_forward)" != "$CRI_FORWARD_BEFORE" ] &&
		echo "$CRI_FORWARD_BEFORE" >/proc/sys/net/ipv4/ip_forward
	release_subnets
	rm -rf --one-file-system "$E2E"
}

cri_conflist() { # PORTMAP(yes|no)
	if [ "$1" = yes ]; then
		"$REPO_DIR/hack/cni-conflist.sh" "$NET" "$BRIDGE" "$SUBNET_PREFIX" --portmap
	else
		"$REPO_DIR/hack/cni-conflist.sh" "$NET" "$BRIDGE" "$SUBNET_PREFIX"
	fi
}

cri_setup() { # NAME [--portmap] [--registry]
	local name=$1 portmap=no registry=no tool
	shift
	for tool in "$@"; do
		case $tool in
		--portmap) portmap=yes ;;
		--registry) registry=yes ;;
		esac
	done
	NET=husk-$name-test-$$
	BRIDGE=hk${name:0:4}$(($$ % 100000))
	if [ ! -x "$HUSKD" ] || [ ! -x "$BUILD_DIR/husk-monitor" ]; then
		echo "not ok - huskd and husk-monitor are built ($HUSKD)"
		finish
	fi
	for tool in bridge host-local loopback portmap; do
		if [ ! -x "/usr/lib/cni/$tool" ]; then
			echo "not ok - CNI plugin /usr/lib/cni/$tool is installed (containernetworking-plugins)"
			finish
		fi
	done
	E2E=$(mktemp -d "/tmp/husk-it-$name.XXXXXX")
	trap 'cri_stop_all; cleanup_all' EXIT
	if ! SUBNET_PREFIX=$(free_subnet); then
		echo "not ok - a free 10.x.y.0/24 subnet for the test bridge (none found)"
		finish
	fi
	mkdir -p "$E2E/gen" "$E2E/net.d" "$E2E/empty.d"
	cri_conflist "$portmap" >"$E2E/net.d/10-husk-$name.conflist"
	echo "{\"cni_conf_dir\": \"$E2E/net.d\"}" >"$E2E/config.json"
	echo "{\"cni_conf_dir\": \"$E2E/empty.d\"}" >"$E2E/config-empty.json"
	if ! protoc --python_out="$E2E/gen" -I "$REPO_DIR/cri/proto" "$REPO_DIR/cri/proto/api.proto" 2>"$E2E/protoc.err"; then
		not_ok "generate the Python CRI messages" "$(cat "$E2E/protoc.err")"
		finish
	fi
	[ "$registry" = yes ] || return 0
	if ! ADDR=$("$REPO_DIR/hack/registry.sh" start "$E2E/registry" 2>"$E2E/registry.err"); then
		not_ok "start the test registry" "$(cat "$E2E/registry.err")"
		finish
	fi
	if ! "$REPO_DIR/hack/test-images.sh" "$CACHE_DIR/test-images" --push "$ADDR" busybox >"$E2E/images.log" 2>&1; then
		not_ok "build and push the test images" "$(tail -5 "$E2E/images.log")"
		finish
	fi
}

cri_cli() { # ARGS...: test/e2e/cri_cli.py with the messages of cri_setup
	HUSK_CRI_GEN=$E2E/gen "$PY" "$REPO_DIR/test/e2e/cri_cli.py" "$@"
}

cri_run_py() { # SCRIPT ARGS...
	local script=$1 line rc
	shift
	NET=$NET BRIDGE=$BRIDGE SUBNET_PREFIX=$SUBNET_PREFIX IPAM_DIR=$IPAM_DIR \
		timeout -k 5 300 "$PY" "$REPO_DIR/test/e2e/$script" "$@" | tee "$E2E/tap"
	rc=${PIPESTATUS[0]}
	while read -r line; do
		case $line in
		"ok "*) echo ok >>"$WORK/results" ;;
		"not ok"*) echo "not ok" >>"$WORK/results" ;;
		esac
	done <"$E2E/tap"
	[ -s "$E2E/tap" ] || not_ok "$script printed results" "$(tail -5 "$E2E/huskd.log" 2>/dev/null)"
	# A script killed or timed out part way has printed only oks so far.
	if [ "$rc" -ne 0 ] && ! grep -q '^not ok' "$E2E/tap"; then
		not_ok "$script exited with status $rc (124: timed out after 300 s) before all its checks ran"
	fi
	if grep -q '^not ok' "$E2E/tap"; then diag "huskd log: $(tail -8 "$E2E/huskd.log")"; fi
}
