#!/usr/bin/env bash
# A fake NVIDIA driver root for tests on machines without a GPU: the
# device nodes, /proc and /sys files and user-space driver files that
# `husk cdi generate nvidia` reads, in the real driver's formats.
#
#   hack/fake-nvidia.sh create DIR [NGPUS]   (default 2 GPUs; run as root: mknod, ldconfig -r)
#   hack/fake-nvidia.sh remove DIR
#
# Layout under DIR (pass them as --dev-root DIR --proc-root DIR/proc
# --sys-root DIR/sys --driver-root DIR/driver):
#   dev/nvidia0..N-1 (c 195:N), dev/nvidiactl (195:255), dev/nvidia-modeset
#   (195:254), dev/nvidia-uvm, dev/nvidia-uvm-tools (510:0, 510:1),
#   dev/nvidia-caps/nvidia-capM (508:M: config, monitor and two MIG
#   devices on GPU 0: gi1/ci0 and gi2/ci0)
#   proc/driver/nvidia/{version,gpus/BUSID/information,capabilities/...},
#   proc/driver/nvidia-caps/mig-minors
#   sys/bus/pci/devices/BUSID/numa_node (GPU 0: 0, GPU 1: 1, others -1)
#   driver/usr/lib/x86_64-linux-gnu/lib*.so.VERSION (real ELF shared
#   objects with the real sonames), driver/usr/bin/nvidia-smi (a script
#   answering -L), driver/lib/firmware/nvidia/VERSION, driver/etc/ld.so.cache
#   (built by ldconfig -r, which also makes the soname links)
#
# `create` on a DIR it made before starts over; it refuses a DIR that is
# not empty and not its own.  `remove` deletes DIR when it is its own.
set -euo pipefail

VERSION=550.54.14
MARK=.husk-fake-nvidia
LIBDIR=usr/lib/x86_64-linux-gnu
# name:soname of each fake library (the compute and utility ones).
LIBS="libcuda:libcuda.so.1 libcudadebugger:libcudadebugger.so.1 libnvidia-ml:libnvidia-ml.so.1
libnvidia-ptxjitcompiler:libnvidia-ptxjitcompiler.so.1 libnvidia-nvvm:libnvidia-nvvm.so.4
libnvidia-cfg:libnvidia-cfg.so.1 libnvidia-opencl:libnvidia-opencl.so.1
libnvidia-gpucomp:libnvidia-gpucomp.so.$VERSION libnvidia-allocator:libnvidia-allocator.so.1"
BINS="nvidia-smi nvidia-debugdump nvidia-persistenced nvidia-cuda-mps-control nvidia-cuda-mps-server"

die() {
	echo "fake-nvidia.sh: $*" >&2
	exit 1
}

uuid_of() { # INDEX
	printf 'GPU-%08x-1111-2222-3333-%012x' $((0xfa4e0000 + $1)) $((0xc0de00 + $1))
}

bus_of() { # INDEX
	printf '0000:%02x:00.0' $((0x18 + $1))
}

# Minor of a MIG capability in the driver's fixed table: config 1,
# monitor 2, then per GPU 15 GPU instances of 9 minors (the GI's access,
# then 8 compute instances).
cap_minor() { # GPU GI [CI]
	local m=$((3 + $1 * 135 + $2 * 9))
	[ $# -eq 3 ] && m=$((m + $3 + 1))
	echo "$m"
}

node() { # PATH MAJOR MINOR MODE
	mknod -m "$4" "$1" c "$2" "$3"
}

make_dev() { # DIR NGPUS
	local d=$1/dev i
	mkdir -p "$d/nvidia-caps"
	for ((i = 0; i < $2; i++)); do node "$d/nvidia$i" 195 "$i" 666; done
	node "$d/nvidiactl" 195 255 666
	node "$d/nvidia-modeset" 195 254 666
	node "$d/nvidia-uvm" 510 0 666
	node "$d/nvidia-uvm-tools" 510 1 666
	node "$d/nvidia-caps/nvidia-cap1" 508 1 400
	node "$d/nvidia-caps/nvidia-cap2" 508 2 444
	for i in "1" "1 0" "2" "2 0"; do
		# shellcheck disable=SC2086
		node "$d/nvidia-caps/nvidia-cap$(cap_minor 0 $i)" 508 "$(cap_minor 0 $i)" 444
	done
}

cap_file() { # PATH MINOR MODE
	mkdir -p "$(dirname "$1")"
	printf 'DeviceFileMinor: %d\nDeviceFileMode: %d\nDeviceFileModify: 1\n' "$2" "$3" >"$1"
}

make_proc() { # DIR NGPUS
	local p=$1/proc/driver i g gi ci
	mkdir -p "$p/nvidia/gpus" "$p/nvidia-caps"
	printf 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Thu Feb 22 01:44:30 UTC 2024\nGCC version:  gcc version 12.3.0\n' \
		"$VERSION" >"$p/nvidia/version"
	for ((i = 0; i < $2; i++)); do
		mkdir -p "$p/nvidia/gpus/$(bus_of "$i")"
		printf 'Model: \t\t Fake H100 80GB HBM3\nIRQ:   \t\t %d\nGPU UUID: \t %s\nVideo BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t %s\nDevice Minor: \t %d\nGPU Excluded:\t No\n' \
			$((200 + i)) "$(uuid_of "$i")" "$(bus_of "$i")" "$i" >"$p/nvidia/gpus/$(bus_of "$i")/information"
	done
	cap_file "$p/nvidia/capabilities/mig/config" 1 256
	cap_file "$p/nvidia/capabilities/mig/monitor" 2 292
	for gi in 1 2; do
		cap_file "$p/nvidia/capabilities/gpu0/mig/gi$gi/access" "$(cap_minor 0 "$gi")" 292
		cap_file "$p/nvidia/capabilities/gpu0/mig/gi$gi/ci0/access" "$(cap_minor 0 "$gi" 0)" 292
	done
	{
		echo "config 1"
		echo "monitor 2"
		for ((g = 0; g < 32; g++)); do
			for ((gi = 0; gi < 15; gi++)); do
				echo "gpu$g/gi$gi/access $((3 + g * 135 + gi * 9))"
				for ((ci = 0; ci < 8; ci++)); do
					echo "gpu$g/gi$gi/ci$ci/access $((3 + g * 135 + gi * 9 + ci + 1))"
				done
			done
		done
	} >"$p/nvidia-caps/mig-minors"
}

make_sys() { # DIR NGPUS
	local i n
	for ((i = 0; i < $2; i++)); do
		mkdir -p "$1/sys/bus/pci/devices/$(bus_of "$i")"
		n=-1
		[ "$i" -lt 2 ] && n=$i
		echo "$n" >"$1/sys/bus/pci/devices/$(bus_of "$i")/numa_node"
	done
}

make_nvidia_smi() { # PATH NGPUS
	local i
	{
		echo '#!/bin/sh'
		echo '# fake nvidia-smi made by hack/fake-nvidia.sh'
		# shellcheck disable=SC2016 # the script's own $1
		echo 'case "${1:-}" in'
		echo '-L)'
		for ((i = 0; i < $2; i++)); do
			echo "	echo 'GPU $i: Fake H100 80GB HBM3 (UUID: $(uuid_of "$i"))'"
		done
		echo '	;;'
		echo "*) echo 'NVIDIA-SMI $VERSION (fake)' ;;"
		echo 'esac'
	} >"$1"
	chmod 755 "$1"
}

make_driver() { # DIR NGPUS
	local d=$1/driver entry name soname b src
	mkdir -p "$d/$LIBDIR" "$d/usr/bin" "$d/etc" "$d/var/cache/ldconfig" "$d/lib/firmware/nvidia/$VERSION"
	echo "/$LIBDIR" >"$d/etc/ld.so.conf"
	src=$1/.fake-lib.c
	echo 'int husk_fake_nvidia_library (void) { return 0; }' >"$src"
	for entry in $LIBS; do
		name=${entry%%:*}
		soname=${entry#*:}
		gcc -shared -fPIC -nostdlib -Wl,-soname,"$soname" -o "$d/$LIBDIR/$name.so.$VERSION" "$src" ||
			die "gcc could not build $name.so.$VERSION"
	done
	rm -f "$src"
	# The development link the driver installer makes too.
	ln -sf libcuda.so.1 "$d/$LIBDIR/libcuda.so"
	make_nvidia_smi "$d/usr/bin/nvidia-smi" "$2"
	for b in $BINS; do
		[ "$b" = nvidia-smi ] && continue
		printf '#!/bin/sh\necho "%s (fake)"\n' "$b" >"$d/usr/bin/$b"
		chmod 755 "$d/usr/bin/$b"
	done
	echo fake >"$d/lib/firmware/nvidia/$VERSION/gsp_ga10x.bin"
	ldconfig -r "$d" || die "ldconfig -r $d failed"
}

remove() { # DIR
	local dir=$1
	[ -e "$dir" ] || return 0
	[ -f "$dir/$MARK" ] || die "$dir was not made by fake-nvidia.sh (no $MARK): not removing it"
	rm -rf --one-file-system "$dir"
}

create() { # DIR NGPUS
	local dir=$1 n=$2
	case $n in
	'' | *[!0-9]*) die "NGPUS must be a number from 1 to 16, not '$n'" ;;
	esac
	if [ "$n" -lt 1 ] || [ "$n" -gt 16 ]; then die "NGPUS must be a number from 1 to 16, not '$n'"; fi
	[ "$(id -u)" = 0 ] || die "create needs root (mknod, ldconfig -r)"
	command -v gcc >/dev/null || die "create needs gcc to build the fake libraries"
	if [ -e "$dir" ]; then
		if [ -f "$dir/$MARK" ]; then
			remove "$dir"
		elif [ -n "$(ls -A "$dir")" ]; then
			die "$dir is not empty and was not made by fake-nvidia.sh"
		fi
	fi
	mkdir -p "$dir"
	echo "$n" >"$dir/$MARK"
	# A half-made tree is removed: nothing is left behind on an error.
	HALF_MADE=$dir
	trap '[ -n "$HALF_MADE" ] && rm -rf --one-file-system "$HALF_MADE"' EXIT
	make_dev "$dir" "$n"
	make_proc "$dir" "$n"
	make_sys "$dir" "$n"
	make_driver "$dir" "$n"
	HALF_MADE=
}

case ${1:-} in
create)
	if [ $# -lt 2 ] || [ $# -gt 3 ]; then die "usage: fake-nvidia.sh create DIR [NGPUS] | remove DIR"; fi
	create "$2" "${3:-2}"
	;;
remove)
	[ $# -eq 2 ] || die "usage: fake-nvidia.sh create DIR [NGPUS] | remove DIR"
	remove "$2"
	;;
*) die "usage: fake-nvidia.sh create DIR [NGPUS] | remove DIR" ;;
esac
