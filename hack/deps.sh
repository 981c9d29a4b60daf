#!/usr/bin/env bash
# Installs the Debian packages husk needs to build, test and benchmark.
# Idempotent: asks apt only for what dpkg says is missing.
set -euo pipefail

packages=(
	# build
	build-essential pkg-config clang-format
	libjansson-dev libseccomp-dev libcap-dev libcmocka-dev
	libarchive-dev libcurl4-openssl-dev libssl-dev libyaml-dev libsqlite3-dev
	libgrpc-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler
	# integration tests: busybox rootfs, networking, registry, image tools
	busybox-static iproute2 util-linux procps psmisc zstd curl openssl
	docker-registry skopeo umoci apache2-utils
	containernetworking-plugins iptables
	python3-grpcio python3-pytest python3-protobuf
	# peers for benchmarks
	crun runc containerd conmon hyperfine
	# cgroup v2 VM
	qemu-system-x86 cpio
)

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

echo "hack/deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
