#!/usr/bin/env bash
# `make conformance`: Kubernetes' CRI validation suite (critest) against a
# huskd of its own — temp socket, root, state, a CNI bridge on a free subnet,
# registry mirrors that send registry.k8s.io and gcr.io to the loopback
# registry of the shared offline runner — then everything removed again.
#
#   hack/conformance.sh BUILD [critest args...]
#
# Prints the runner's `critest: N passed, M failed, K skipped`, each failure
# marked expected (hack/conformance-expected.txt, with the issue that owns
# it) or not, and exits 1 when a failure is not expected.
# Env: CRITEST, CRICTL (default: critest and crictl on PATH; cri-tools v1.29
# built by you outside this repository: husk keeps neither), CRITEST_RUNNER (the
# shared runner, default ../shared/conformance/critest/run.sh), W (the
# runner's work dir with its image cache, default /tmp/critest), KEEP=1
# keeps the huskd work dir for a look afterwards.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$repo/build}" 2>/dev/null && pwd) || {
	echo "conformance: build dir ${1:-build} does not exist (make build)" >&2
	exit 2
}
shift $(($# > 0 ? 1 : 0))
CRITEST=${CRITEST:-$(command -v critest)} CRICTL=${CRICTL:-$(command -v crictl)}
export CRITEST CRICTL
runner=${CRITEST_RUNNER:-$repo/../shared/conformance/critest/run.sh}
for tool in CRITEST CRICTL runner; do
	if [ ! -x "${!tool}" ]; then
		echo "conformance: ${tool,,} not found (${!tool:-not on PATH}): put critest and crictl (cri-tools v1.29) on PATH or set CRITEST=, CRICTL= (and CRITEST_RUNNER=)" >&2
		exit 2
	fi
done
[ "$(id -u)" -eq 0 ] || {
	echo "conformance: must run as root (huskd creates namespaces, mounts and a bridge)" >&2
	exit 2
}
# shellcheck source=hack/cni-rules.sh
. "$repo/hack/cni-rules.sh"
# shellcheck source=hack/kill-procs.sh
. "$repo/hack/kill-procs.sh"
# shellcheck source=hack/free-subnet.sh
. "$repo/hack/free-subnet.sh"

work=$(mktemp -d /tmp/husk-conformance.XXXXXX)
net=husk-critest-$$
bridge=hkct$(($$ % 100000))
ipam_dir=/var/lib/cni/networks
forward_before=$(cat /proc/sys/net/ipv4/ip_forward)
var_lib_cni_before=$([ -d /var/lib/cni ] && echo yes)
huskd_pid=

cleanup() {
	if [ -n "$huskd_pid" ] && kill -0 "$huskd_pid" 2>/dev/null; then
		# Pods first, through huskd itself: CNI DEL removes veths, leases and rules.
		timeout 120 "$CRICTL" -r "unix://$work/husk.sock" rmp -af >/dev/null 2>&1
		kill -TERM "$huskd_pid" 2>/dev/null
		for _ in $(seq 50); do kill -0 "$huskd_pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$huskd_pid" 2>/dev/null
	fi
	# Whatever is left of ours: monitors, pause, container processes.
	kill_procs_of "$work"
	sleep 0.2
	awk -v w="$work" 'index($5, w) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null
	done
	ip link del "$bridge" 2>/dev/null
	cni_purge_rules "$net"
	rm -rf "${ipam_dir:?}/$net"
	[ -z "$var_lib_cni_before" ] && rmdir "$ipam_dir" /var/lib/cni 2>/dev/null
	echo "$forward_before" >/proc/sys/net/ipv4/ip_forward
	release_subnets
	if [ "${KEEP:-0}" = 1 ]; then
		echo "conformance: kept $work"
	else
		rm -rf --one-file-system "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

prefix=$(free_subnet) || {
	echo "conformance: no free 10.x.y.0/24 subnet found" >&2
	exit 2
}
reg=127.0.0.1:${REG_PORT:-41529}
mkdir -p "$work/net.d" "$work/root" "$work/state"
"$repo/hack/cni-conflist.sh" "$net" "$bridge" "$prefix" --portmap >"$work/net.d/10-$net.conflist"
cat >"$work/registries.json" <<EOF
{ "registries": {
    "registry.k8s.io": { "mirrors": ["http://$reg"], "mirrorsOnly": true },
    "gcr.io": { "mirrors": ["http://$reg"], "mirrorsOnly": true } } }
EOF
cat >"$work/huskd.json" <<EOF
{ "cni_conf_dir": "$work/net.d", "registries": "$work/registries.json" }
EOF
"$build/huskd" --listen "unix://$work/husk.sock" --root "$work/root" --state "$work/state" \
	--config "$work/huskd.json" --log-level info >"$work/huskd.log" 2>&1 &
huskd_pid=$!
for _ in $(seq 100); do [ -S "$work/husk.sock" ] && break; sleep 0.1; done
if [ ! -S "$work/husk.sock" ]; then
	echo "conformance: huskd did not start; its log:" >&2
	tail -20 "$work/huskd.log" >&2
	exit 2
fi
echo "conformance: huskd on unix://$work/husk.sock, CNI bridge $bridge on $prefix.0/24"

MODE=mirror "$runner" "unix://$work/husk.sock" "$@" | tee "$work/critest.out"
runner_rc=${PIPESTATUS[0]}
[ "$runner_rc" -eq 2 ] && {
	echo "conformance: critest did not run; huskd's log ends:" >&2
	tail -20 "$work/huskd.log" >&2
	exit 1
}

# The runner's verdict knows only the offline digest pull; husk's own list
# adds the specs that open issues own.
expected=()
while IFS='|' read -r spec owner; do
	spec=$(echo "$spec" | sed 's/[[:space:]]*$//')
	[ -n "$spec" ] && expected+=("$spec|$owner")
done < <(grep -v '^[[:space:]]*#' "$repo/hack/conformance-expected.txt")
unexpected=0 n_expected=0
while read -r line; do
	name=${line#  FAIL }
	name=${name%  \[expected offline*}
	why=
	for entry in "${expected[@]}"; do
		if [[ "$name" == *"${entry%%|*}"* ]]; then
			why=${entry#*|}
			break
		fi
	done
	if [ -n "$why" ]; then
		n_expected=$((n_expected + 1))
	else
		unexpected=$((unexpected + 1))
		echo "conformance: UNEXPECTED failure: $name"
	fi
done < <(grep '^  FAIL ' "$work/critest.out")
grep -q '^critest: ' "$work/critest.out" || unexpected=$((unexpected + 1))
echo "conformance: $n_expected expected failures (hack/conformance-expected.txt), $unexpected unexpected"
if [ "$unexpected" -gt 0 ]; then
	echo "conformance: huskd's log ends:"
	tail -15 "$work/huskd.log"
	exit 1
fi
exit 0
