#!/usr/bin/env bash
# Installs the Debian packages husk needs, by what for:
#
#   hack/deps.sh run     to build husk and run huskd (`make run`)
#   hack/deps.sh test    that, and what the tests use (`make test`)
#   hack/deps.sh bench   that, and the benchmarks' tools (`make bench`)
#   hack/deps.sh         everything (`make deps`)
#
# Idempotent: asks apt only for what dpkg says is missing.  When another
# apt or dpkg holds the package lock (unattended-upgrades on a fresh
# machine), it waits for it, up to DEPS_LOCK_WAIT_S seconds (default 600).
set -euo pipefail

build=(
	build-essential pkg-config
	libjansson-dev libseccomp-dev libcap-dev libyaml-dev
	libarchive-dev libcurl4-openssl-dev libssl-dev
	libgrpc-dev libprotobuf-c-dev protobuf-c-compiler
)
# Pods' networks: the CNI plugins, iptables for the bridge plugin's
# masquerade and portmap's rules, iproute2 for `make run`'s default
# network (hack/default-network.sh reads the routes); apparmor_parser,
# which loads husk-default on AppArmor hosts (and the test VM's kernel).
run=(containernetworking-plugins iptables iproute2 apparmor)
test=(
	clang-format libcmocka-dev
	# libFuzzer targets (make fuzz, test_fuzz)
	clang libclang-rt-14-dev
	# busybox rootfs, networking, registry, image tools
	busybox-static iproute2 util-linux procps psmisc zstd curl openssl
	docker-registry skopeo umoci apache2-utils
	# the CRI end-to-end tests (Python gRPC client, messages from api.proto)
	python3-grpcio python3-protobuf protobuf-compiler
	# a second client of huskd's streaming server (test_cri_k8s_stream)
	python3-kubernetes python3-websocket
	# peers the tests compare with or drive husk through
	crun runc containerd conmon podman
	# gVisor, the handler that owns its pods (test_cri_gvisor, bench-cri --gvisor)
	runsc
	# husk checkpoint/restore (test_checkpoint, and in the VM)
	criu
	# huskd.service under a real systemd (test_huskd_systemd)
	systemd
	# the cgroup v2 VM
	qemu-system-x86 cpio
)
bench=(hyperfine)

case ${1:-all} in
run) packages=("${build[@]}" "${run[@]}") ;;
test) packages=("${build[@]}" "${run[@]}" "${test[@]}") ;;
bench | all) packages=("${build[@]}" "${run[@]}" "${test[@]}" "${bench[@]}") ;;
*)
	echo "usage: hack/deps.sh [run|test|bench|all]" >&2
	exit 2
	;;
esac

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "hack/deps.sh: missing packages (${missing[*]}); run as root to install them" >&2
	exit 1
fi

# apt-get waits DPkg::Lock::Timeout for dpkg's lock; the lists lock of
# `apt-get update` it does not wait for, so a busy lock is retried here.
lock_wait=${DEPS_LOCK_WAIT_S:-600}
apt_get() { # ARGS...
	local deadline=$((SECONDS + lock_wait)) out
	while :; do
		if out=$(apt-get -o DPkg::Lock::Timeout="$lock_wait" "$@" 2>&1 >/dev/null); then
			return 0
		fi
		if ! grep -qE 'Could not get lock|Unable to acquire the dpkg frontend lock|Unable to lock' <<<"$out" ||
			[ "$SECONDS" -ge "$deadline" ]; then
			echo "hack/deps.sh: apt-get $1 failed: $out" >&2
			return 1
		fi
		echo "hack/deps.sh: waiting for another apt or dpkg to finish ($(grep -m1 -E 'lock' <<<"$out"))" >&2
		sleep 5
	done
}

echo "hack/deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt_get update -qq
apt_get install -y -qq --no-install-recommends "${missing[@]}"
