#!/usr/bin/env bash
# The crash measurement of issue #12: kill -9 huskd during 30 concurrent
# CreateContainer+StartContainer, ROUNDS times (test/e2e/crash_cri.py), with
# a huskd, a CNI bridge network, a test registry and a work dir of its own.
# Prints one line per round, then acknowledged objects lost (goal 0),
# leftovers (goal 0) and the recovery time (median and max), and a markdown
# row for the README; exits non-zero when anything was lost or left.
#
#   hack/crash-cri.sh [ROUNDS]   (root; default 10; build huskd and
#                                 husk-monitor first; BUILD_DIR=...;
#                                 CRASH_SEED=N replays a run's kill times;
#                                 CRASH_KEEP_LOG=FILE keeps huskd's log;
#                                 CRASH_LOG_LEVEL=debug for huskd)
#
# A trap removes huskd, monitors, pause, containers, mounts, cgroups, the
# bridge, its iptables rules and leases, the registry and the work dir,
# and puts ip_forward back, even when it fails.
set -uo pipefail

REPO_DIR=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=hack/cni-rules.sh
. "$REPO_DIR/hack/cni-rules.sh"
# shellcheck source=hack/free-subnet.sh
. "$REPO_DIR/hack/free-subnet.sh"
# shellcheck source=hack/kill-procs.sh
. "$REPO_DIR/hack/kill-procs.sh"
BUILD_DIR=${BUILD_DIR:-$REPO_DIR/build}
HUSKD=${HUSKD:-$BUILD_DIR/huskd}
CACHE_DIR=${HUSK_TEST_CACHE:-/tmp/husk-test-cache}
PY=/usr/bin/python3
ROUNDS=${1:-10}
IPAM_DIR=/var/lib/cni/networks
FORWARD_BEFORE=$(cat /proc/sys/net/ipv4/ip_forward)
VAR_LIB_CNI_BEFORE=$([ -d /var/lib/cni ] && echo yes)
NET=husk-crash-$$
BRIDGE=hkcr$(($$ % 100000))
W=
ADDR=

die() {
	echo "crash-cri: $*" >&2
	exit 1
}

case $ROUNDS in
'' | *[!0-9]* | 0) die "ROUNDS must be a positive number, not \`$ROUNDS'" ;;
esac
[ "$(id -u)" = 0 ] || die "run as root (it starts huskd and makes a bridge)"
if [ ! -x "$HUSKD" ] || [ ! -x "$BUILD_DIR/husk-monitor" ]; then
	die "build huskd and husk-monitor first ($HUSKD)"
fi
for tool in bridge host-local loopback; do
	[ -x "/usr/lib/cni/$tool" ] || die "CNI plugin /usr/lib/cni/$tool is missing (containernetworking-plugins)"
done

umount_under() { # DIR: deepest first
	local m
	for _pass in 1 2 3; do
		awk -v d="$1/" 'index($5 "/", d) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
			while read -r m; do umount -l "$m" 2>/dev/null; done
	done
}

# The cgroups of the containers a run left (named by their ids, in every
# hierarchy; the ids: on disk, or in $W/ids that crash_cri.py writes), and
# what still runs in them: a container's processes (after pivot_root) do
# not show their root as inside $W to kill_procs_of.  A killed process may
# take a moment to leave its cgroup.
remove_cgroups() {
	local pattern=() dirs path id _try
	for path in "$W"/root/containers/* "$W"/state/runtime/*; do
		id=${path##*/}
		[[ $id =~ ^[0-9a-f]{64}$ ]] && pattern+=(-e "$id")
	done
	while read -r id; do
		[[ $id =~ ^[0-9a-f]{64}$ ]] && pattern+=(-e "$id")
	done < <(sort -u "$W/ids" 2>/dev/null)
	[ ${#pattern[@]} -gt 0 ] || return 0
	for _try in $(seq 30); do
		dirs=$(find /sys/fs/cgroup -depth -type d 2>/dev/null | grep -F "${pattern[@]}")
		[ -n "$dirs" ] || return 0
		# shellcheck disable=SC2046
		kill -KILL $(printf '%s/cgroup.procs\n' $dirs | xargs cat 2>/dev/null) 2>/dev/null
		# shellcheck disable=SC2086
		rmdir $dirs 2>/dev/null
		sleep 0.1
	done
	echo "crash-cri: cgroups left: $dirs" >&2
}

cleanup() {
	[ -n "$W" ] && [ -d "$W" ] || {
		release_subnets
		return
	}
	# shellcheck disable=SC2046
	kill_procs_of "$W" $(cat "$W"/*.pid 2>/dev/null)
	sleep 0.3
	remove_cgroups
	umount_under "$W"
	[ -n "$ADDR" ] && "$REPO_DIR/hack/registry.sh" stop "$W/registry" >/dev/null 2>&1
	ip link del "$BRIDGE" 2>/dev/null
	cni_purge_rules "$NET"
	rm -rf "${IPAM_DIR:?}/$NET"
	[ -z "$VAR_LIB_CNI_BEFORE" ] && rmdir "$IPAM_DIR" /var/lib/cni 2>/dev/null
	[ "$(cat /proc/sys/net/ipv4/ip_forward)" != "$FORWARD_BEFORE" ] &&
		echo "$FORWARD_BEFORE" >/proc/sys/net/ipv4/ip_forward
	release_subnets
	rm -rf --one-file-system "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

W=$(mktemp -d /tmp/husk-crash-cri.XXXXXX) || die "no temp dir under /tmp"
SUBNET_PREFIX=$(free_subnet) || die "no free 10.x.y.0/24 subnet for the bridge"
mkdir -p "$W/gen" "$W/net.d" "$W/logs"
"$REPO_DIR/hack/cni-conflist.sh" "$NET" "$BRIDGE" "$SUBNET_PREFIX" >"$W/net.d/10-$NET.conflist"
echo "{\"cni_conf_dir\": \"$W/net.d\"}" >"$W/config.json"
protoc --python_out="$W/gen" -I "$REPO_DIR/cri/proto" "$REPO_DIR/cri/proto/api.proto" ||
	die "protoc could not generate the Python CRI messages"
ADDR=$("$REPO_DIR/hack/registry.sh" start "$W/registry") || die "the test registry did not start"
"$REPO_DIR/hack/test-images.sh" "$CACHE_DIR/test-images" --push "$ADDR" busybox >"$W/images.log" 2>&1 ||
	die "pushing the busybox test image failed: $(tail -3 "$W/images.log")"

# In the background, so that a signal to this script runs the trap at once
# (the trap kills it: its command line names $W).
NET=$NET BRIDGE=$BRIDGE IPAM_DIR=$IPAM_DIR timeout -k 5 900 "$PY" "$REPO_DIR/test/e2e/crash_cri.py" \
	"$HUSKD" "$ADDR" "$W" "$ROUNDS" &
wait $!
rc=$?
if [ "$rc" != 0 ]; then
	echo "crash-cri: failed (exit $rc); the last lines of huskd's log:" >&2
	tail -15 "$W/huskd.log" >&2
fi
if [ -n "${CRASH_KEEP_LOG:-}" ]; then
	cp "$W/huskd.log" "$CRASH_KEEP_LOG" && echo "crash-cri: huskd's log kept in $CRASH_KEEP_LOG"
fi
exit "$rc"
