#!/usr/bin/env bash
# Runs husk's cgroup v2 tests (test/vm/test_*.sh) — or, with --bench, the
# cgroup benchmark against crun (test/vm/bench.sh) — inside a small VM,
# because this machine's memory, cpu and pids controllers are on cgroup v1.
#
#   hack/vm-test.sh [--bench] [BUILD_DIR]
#   HUSK_VM_TESTS=test_checkpoint hack/vm-test.sh BUILD_DIR   (some tests only)
#
# The VM is Debian's cloud kernel (linux-image-cloud-amd64, unpacked with
# apt-get download + dpkg-deb -x, never installed; cached under
# $HUSK_VM_CACHE, default /var/cache/husk-vm) booted by qemu-system-x86_64
# with an initramfs holding busybox, the husk build and its shared
# libraries, crun (for --bench), the tests and hack/vm-init.sh as /init.
# KVM is used only if it really boots a guest here (checked once, cached);
# otherwise plain emulation.  No network.  The VM writes TAP lines to its
# second serial port; this script prints them as "ok - vm: ..." /
# "not ok - vm: ..." and exits non-zero if any failed or the VM did not
# finish.
set -u

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODE="test"
if [ "${1:-}" = --bench ]; then
	MODE=bench
	shift
fi
BUILD=${1:-$REPO/build}
BUILD=$(cd "$BUILD" 2>/dev/null && pwd || echo "$BUILD")
HUSK=$BUILD/husk
CACHE=${HUSK_VM_CACHE:-/var/cache/husk-vm}
if ! mkdir -p "$CACHE" 2>/dev/null || [ ! -w "$CACHE" ]; then
	CACHE=/tmp/husk-vm-cache
	mkdir -p "$CACHE"
fi
VM_TIMEOUT=${HUSK_VM_TIMEOUT:-420}
[ $MODE = bench ] && VM_TIMEOUT=${HUSK_VM_TIMEOUT:-560}
KVM_PROBE_TIMEOUT=20

WORK=$(mktemp -d /tmp/husk-vm.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

fail() { # WHAT [DIAGNOSTIC...]
	echo "not ok - vm: $1"
	shift
	local line
	for line in "$@"; do
		printf '%s\n' "$line" | tail -n 20 | sed 's/^/#   /'
	done
	exit 1
}

for tool in qemu-system-x86_64 cpio dpkg-deb apt-get gzip python3; do
	command -v $tool >/dev/null || fail "$tool is missing (run hack/deps.sh)"
done
[ -x "$HUSK" ] || fail "no husk binary at $HUSK (make build)"
[ -x /bin/busybox ] || fail "/bin/busybox is missing (busybox-static)"
if [ $MODE = bench ]; then
	command -v crun >/dev/null || fail "crun is missing (hack/deps.sh installs it)"
fi

# ------------------------------------------------------------- the kernel

# Unpacks the kernel once; CACHE/current names the version in use.
unpack_kernel() {
	local dl=$WORK/download meta dep ver dest deb
	mkdir -p "$dl"
	chmod 0777 "$dl" # apt's _apt user downloads into it
	if ! (cd "$dl" && apt-get download linux-image-cloud-amd64) >"$WORK/apt.log" 2>&1; then
		# Offline: a package already in apt's cache will do.
		meta=$(ls /var/cache/apt/archives/linux-image-cloud-amd64_*.deb 2>/dev/null | tail -n 1)
		[ -n "$meta" ] || fail "download linux-image-cloud-amd64" "$(cat "$WORK/apt.log")"
		cp "$meta" "$dl/"
	fi
	meta=$(ls "$dl"/linux-image-cloud-amd64_*.deb | tail -n 1)
	dep=$(dpkg-deb -f "$meta" Depends | grep -o 'linux-image-[0-9][^ ,(]*-cloud-amd64' | head -n 1)
	[ -n "$dep" ] || fail "find the kernel package linux-image-cloud-amd64 depends on"
	if ! (cd "$dl" && apt-get download "$dep") >>"$WORK/apt.log" 2>&1; then
		deb=$(ls /var/cache/apt/archives/"${dep}"_*.deb 2>/dev/null | tail -n 1)
		[ -n "$deb" ] || fail "download $dep" "$(cat "$WORK/apt.log")"
		cp "$deb" "$dl/"
	fi
	deb=$(ls "$dl/${dep}"_*.deb | tail -n 1)
	dpkg-deb -x "$deb" "$dl/x" || fail "unpack $deb"
	ver=${dep#linux-image-}
	dest=$CACHE/$ver
	rm -rf "$dest.tmp"
	mkdir -p "$dest.tmp/modules"
	cp "$dl/x/boot/vmlinuz-$ver" "$dest.tmp/vmlinuz" || fail "no vmlinuz in $deb"
	cp "$dl/x/boot/config-$ver" "$dest.tmp/config"
	# brd: a ram disk, the block device of the io and device tests;
	# overlay: the container root filesystems of huskd (test_cri_cgroup.sh).
	find "$dl/x/lib/modules" \( -name brd.ko -o -name overlay.ko \) -exec cp {} "$dest.tmp/modules/" \;
	# The socket diag modules, nf_tables and ctnetlink: criu dump (test_checkpoint.sh).
	find "$dl/x/lib/modules" \( -name unix_diag.ko -o -name inet_diag.ko -o -name tcp_diag.ko -o -name udp_diag.ko \
		-o -name netlink_diag.ko -o -name af_packet_diag.ko -o -name nfnetlink.ko -o -name nf_tables.ko \
		-o -name libcrc32c.ko -o -name nf_conntrack.ko -o -name nf_conntrack_netlink.ko -o -name nf_defrag_ipv4.ko \
		-o -name nf_defrag_ipv6.ko -o -name nft_compat.ko -o -name x_tables.ko -o -name xt_mark.ko \) \
		-exec cp {} "$dest.tmp/modules/" \;
	rm -rf "$dest"
	mv "$dest.tmp" "$dest"
	echo "$ver" >"$CACHE/current"
	echo "# vm: unpacked kernel $ver into $dest"
}

ensure_kernel() {
	exec 8>"$CACHE/.lock"
	flock 8
	if [ ! -s "$CACHE/current" ] || [ ! -f "$CACHE/$(cat "$CACHE/current")/vmlinuz" ] ||
		[ ! -f "$CACHE/$(cat "$CACHE/current")/modules/overlay.ko" ] ||
		[ ! -f "$CACHE/$(cat "$CACHE/current")/modules/xt_mark.ko" ]; then
		unpack_kernel
	fi
	flock -u 8
	KVER=$(cat "$CACHE/current")
	KERNEL=$CACHE/$KVER/vmlinuz
}

# ---------------------------------------------------------- the initramfs

# Copies BINARY to DEST in the initramfs, with every shared library ldd
# names (and the loader) at the same path as here.
copy_with_libs() { # BINARY DEST
	local lib
	mkdir -p "$ROOTFS$(dirname "$2")"
	cp -L "$1" "$ROOTFS$2" || fail "copy $1 into the initramfs"
	for lib in $(ldd "$1" 2>/dev/null | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }'); do
		[ -e "$ROOTFS$lib" ] && continue
		mkdir -p "$ROOTFS$(dirname "$lib")"
		cp -L "$lib" "$ROOTFS$lib" || fail "copy $lib into the initramfs"
	done
}

# The config template of test/vm/lib.sh: husk's own `husk spec`, with
# placeholders for what each test sets.
make_config_template() {
	mkdir -p "$WORK/spec"
	(cd "$WORK/spec" && "$HUSK" spec) || fail "husk spec"
	python3 - "$WORK/spec/config.json" "$ROOTFS/vm/config.json" <<'EOF' || fail "write the config template"
import json, sys
c = json.load(open(sys.argv[1]))
p = c["process"]
p["terminal"] = False
p["args"] = "@ARGS@"
for kind in ("bounding", "effective", "permitted"):
    p.setdefault("capabilities", {}).setdefault(kind, []).append("CAP_MKNOD")
c["root"] = {"path": "/vm/rootfs", "readonly": True}
c["mounts"].append({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
                    "options": ["nosuid", "nodev", "mode=1777", "size=16m"]})
linux = c.setdefault("linux", {})
linux["resources"] = "@RESOURCES@"
linux["devices"] = "@DEVICES@"
linux["cgroupsPath"] = "@CGROUPS_PATH@"
json.dump(c, open(sys.argv[2], "w"), separators=(",", ":"))
EOF
}

# huskd, its helpers, husk's CRI client and the busybox test image, for the
# CRI tests on cgroup v2 (test/vm/test_cri_*.sh).
add_cri() {
	local bin
	for bin in huskd husk-monitor husk-pause; do
		[ -x "$BUILD/$bin" ] || fail "no $bin at $BUILD/$bin (make build)"
		copy_with_libs "$BUILD/$bin" "/husk/bin/$bin"
	done
	# `husk image import` executes the image verbs' program from ../lib/husk.
	copy_with_libs "$BUILD/husk-image" /husk/lib/husk/husk-image
	add_cri_client
	"$REPO/hack/test-images.sh" "$CACHE/test-images" >"$WORK/images.log" 2>&1 ||
		fail "build the test images" "$(cat "$WORK/images.log")"
	mkdir -p "$ROOTFS/vm/images"
	cp -a "$CACHE/test-images/busybox" "$ROOTFS/vm/images/busybox"
}

# test/vm/cri_cli.c as /husk/bin/cri-cli: the unary verbs of
# test/e2e/cri_cli.py in C, built here against the build's libraries (under
# the VM's emulation Python with grpcio takes ~10 s to start, this ~50 ms).
add_cri_client() {
	local cc=${CC:-gcc}
	# shellcheck disable=SC2046
	"$cc" -std=gnu11 -O2 -Wall -Wextra -Werror -Wno-unused-parameter -D_GNU_SOURCE -Ulinux -I"$REPO" \
		-I"$REPO/include" -I"$BUILD/gen" $(pkg-config --cflags jansson) -o "$WORK/cri-cli" "$REPO/test/vm/cri_cli.c" \
		"$BUILD/libhusk-cri.a" "$BUILD/libhusk-common.a" $(pkg-config --libs grpc_unsecure libprotobuf-c jansson libcrypto) \
		>"$WORK/cri-cli.log" 2>&1 || fail "build test/vm/cri_cli.c" "$(cat "$WORK/cri-cli.log")"
	copy_with_libs "$WORK/cri-cli" /husk/bin/cri-cli
}

# runsc (Debian's gVisor, a static binary) and the CNI loopback plugin
# for test/vm/test_cri_gvisor.sh: a gVisor pod needs a network namespace
# of its own.  Only when that test runs: runsc is 24 MB.
add_gvisor() {
	local runsc
	runsc=$(command -v runsc) || return 0
	copy_with_libs "$runsc" /husk/bin/runsc
	copy_with_libs /usr/lib/cni/loopback /usr/lib/cni/loopback
}

# criu (and runc, to compare with) for test/vm/test_checkpoint.sh: the
# host's own kernel may be one its criu cannot dump on, the VM's is not.
add_criu() {
	local criu runc tool
	criu=$(command -v criu || echo /usr/sbin/criu)
	runc=$(command -v runc || echo /usr/sbin/runc)
	[ -x "$criu" ] || fail "criu is missing (hack/deps.sh installs it)"
	copy_with_libs "$criu" /bin/criu
	[ -x "$runc" ] && copy_with_libs "$runc" /bin/runc
	# criu dumps a tmpfs with GNU tar's options, which busybox tar lacks.
	rm -f "$ROOTFS/bin/tar"
	copy_with_libs "$(command -v tar)" /bin/tar
	# A network namespace: criu saves and restores it with iproute2's
	# `ip addr/route save|restore` and iptables-save/-restore (nft and legacy).
	rm -f "$ROOTFS/bin/ip"
	copy_with_libs /bin/ip /bin/ip
	copy_with_libs /usr/sbin/xtables-nft-multi /bin/xtables-nft-multi
	copy_with_libs /usr/sbin/xtables-legacy-multi /bin/xtables-legacy-multi
	# criu's network lock: -m mark and the standard targets.
	mkdir -p "$ROOTFS/usr/lib/x86_64-linux-gnu/xtables"
	cp /usr/lib/x86_64-linux-gnu/xtables/libxt_mark.so /usr/lib/x86_64-linux-gnu/xtables/libxt_standard.so \
		"$ROOTFS/usr/lib/x86_64-linux-gnu/xtables/" || fail "copy the iptables extensions criu needs"
	for tool in iptables-save ip6tables-save iptables-restore ip6tables-restore; do
		ln -sf xtables-nft-multi "$ROOTFS/bin/$tool"
		ln -sf xtables-legacy-multi "$ROOTFS/bin/${tool%%-*}-legacy-${tool#*-}"
	done
}

# Debian's apparmor_parser and the ABI files its profiles name, for
# test/vm/test_apparmor.sh and huskd's husk-default (the VM's Debian kernel
# has AppArmor; the host's may not).  No parser.conf: the parser then
# compiles for the VM kernel's own features.
add_apparmor() {
	local parser
	parser=$(command -v apparmor_parser || echo /sbin/apparmor_parser)
	[ -x "$parser" ] || fail "apparmor_parser is missing (hack/deps.sh installs apparmor)"
	copy_with_libs "$parser" /bin/apparmor_parser
	mkdir -p "$ROOTFS/etc/apparmor.d"
	cp -a /etc/apparmor.d/abi "$ROOTFS/etc/apparmor.d/abi" || fail "copy /etc/apparmor.d/abi"
}

build_initramfs() {
	local applet
	ROOTFS=$WORK/initramfs
	mkdir -p "$ROOTFS"/{bin,dev,proc,sys,run,tmp,etc,root,husk/bin,vm/tests,vm/modules,usr}
	cp /bin/busybox "$ROOTFS/bin/busybox"
	for applet in $(/bin/busybox --list); do
		[ "$applet" = busybox ] || ln -s busybox "$ROOTFS/bin/$applet"
	done
	ln -s bin "$ROOTFS/sbin"
	ln -s ../bin "$ROOTFS/usr/bin"
	ln -s ../bin "$ROOTFS/usr/sbin"
	echo "root:x:0:0:root:/root:/bin/sh" >"$ROOTFS/etc/passwd"
	echo "root:x:0:" >"$ROOTFS/etc/group"
	copy_with_libs "$HUSK" /husk/bin/husk
	[ $MODE = bench ] && copy_with_libs "$(command -v crun)" /husk/bin/crun
	[ $MODE = test ] && add_cri
	[ $MODE = test ] && add_criu
	[ $MODE = test ] && add_apparmor
	cp "$REPO/hack/vm-init.sh" "$ROOTFS/init"
	chmod 0755 "$ROOTFS/init"
	# HUSK_VM_TESTS: a glob picking tests (default test_*), e.g. test_checkpoint.
	cp "$REPO"/test/vm/lib.sh "$REPO"/test/vm/bench.sh "$REPO"/test/vm/${HUSK_VM_TESTS:-test_*}.sh "$ROOTFS/vm/tests/" ||
		fail "copy the VM tests (HUSK_VM_TESTS=${HUSK_VM_TESTS:-})"
	if [ $MODE = test ] && [ -e "$ROOTFS/vm/tests/test_cri_gvisor.sh" ]; then
		add_gvisor
	fi
	mv "$ROOTFS/vm/tests/bench.sh" "$ROOTFS/vm/bench.sh" 2>/dev/null
	cp "$CACHE/$KVER"/modules/*.ko "$ROOTFS/vm/modules/" 2>/dev/null
	"$REPO/hack/busybox-rootfs.sh" "$CACHE/rootfs-busybox" >"$WORK/rootfs.log" 2>&1 ||
		fail "build the busybox rootfs" "$(cat "$WORK/rootfs.log")"
	cp -a "$CACHE/rootfs-busybox" "$ROOTFS/vm/rootfs"
	rm -f "$ROOTFS/vm/rootfs/.husk-rootfs-ok" "$ROOTFS/vm/rootfs/.husk-rootfs-lock"
	make_config_template
	INITRAMFS=$WORK/initramfs.cpio.gz
	(cd "$ROOTFS" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 >"$INITRAMFS" ||
		fail "pack the initramfs"
}

# ------------------------------------------------------------------ qemu

run_qemu() { # ACCEL MODE TIMEOUT
	rm -f "$WORK/console.log" "$WORK/results.log"
	timeout -k 5 "$3" qemu-system-x86_64 -accel "$1" -nographic -no-reboot -nic none -m 1024 -smp 2 \
		-kernel "$KERNEL" -initrd "$INITRAMFS" \
		-append "console=ttyS0 panic=-1 quiet cgroup_no_v1=all husk.mode=$2" \
		-serial "file:$WORK/console.log" -serial "file:$WORK/results.log" -monitor none \
		</dev/null >"$WORK/qemu.log" 2>&1
}

# /dev/kvm may exist and still not run a guest (nested virtualisation):
# boot once with KVM and see whether init reports back in time.
choose_accel() {
	local verdict
	verdict=$CACHE/kvm-verdict-$(uname -r)-$(qemu-system-x86_64 --version | head -n 1 | tr -c 'a-zA-Z0-9.\n' _)-$KVER
	ACCEL=tcg
	[ -r /dev/kvm ] && [ -w /dev/kvm ] || return 0
	if [ ! -f "$verdict" ]; then
		if run_qemu kvm probe $KVM_PROBE_TIMEOUT && grep -q HUSK-VM-DONE "$WORK/results.log" 2>/dev/null; then
			echo kvm >"$verdict"
		else
			echo tcg >"$verdict"
		fi
	fi
	ACCEL=$(cat "$verdict")
}

# --------------------------------------------------------------- results

BENCH_LINE=
report() {
	local line pass=0 failed=0 finished=0
	[ -f "$WORK/results.log" ] || : >"$WORK/results.log"
	while IFS= read -r line; do
		line=${line%$'\r'}
		case $line in
		"ok - "*)
			echo "ok - vm: ${line#ok - }"
			pass=$((pass + 1))
			;;
		"not ok - "*)
			echo "not ok - vm: ${line#not ok - }"
			failed=$((failed + 1))
			;;
		"#"*) echo "$line" ;;
		BENCH-RESULT*) BENCH_LINE=${line#BENCH-RESULT } ;;
		HUSK-VM-DONE) finished=1 ;;
		esac
	done <"$WORK/results.log"
	if [ $finished -ne 1 ]; then
		echo "not ok - vm: the VM ran its tests to the end (accel $ACCEL, limit ${VM_TIMEOUT}s)"
		tail -n 25 "$WORK/console.log" 2>/dev/null | sed 's/^/#   console: /'
		sed 's/^/#   qemu: /' "$WORK/qemu.log" | tail -n 5
		return 1
	fi
	if [ $MODE = test ] && [ $pass -eq 0 ]; then
		echo "not ok - vm: the VM reported test results"
		return 1
	fi
	echo "# vm: $pass passed, $failed failed (kernel $KVER, accel $ACCEL, $((SECONDS - START))s)"
	[ $failed -eq 0 ]
}

# BENCH_LINE: "runs=N husk_ms=X crun_ms=Y" (mean milliseconds per cycle).
report_bench() {
	local runs husk_ms crun_ms
	runs=$(printf '%s' "$BENCH_LINE" | sed -n 's/.*runs=\([0-9]*\).*/\1/p')
	husk_ms=$(printf '%s' "$BENCH_LINE" | sed -n 's/.*husk_ms=\([0-9.]*\).*/\1/p')
	crun_ms=$(printf '%s' "$BENCH_LINE" | sed -n 's/.*crun_ms=\([0-9.]*\).*/\1/p')
	if [ -z "$husk_ms" ] || [ -z "$crun_ms" ]; then
		echo "not ok - vm: bench produced a result"
		return 1
	fi
	python3 -c 'import sys; h, c = float(sys.argv[1]), float(sys.argv[2]); print("bench vm-cgroup: create+start+delete with memory, cpu and pids limits (%s runs, %s): husk %.1f ms, crun %.1f ms, ratio husk/crun %.2f" % (sys.argv[3], sys.argv[4], h, c, h / c if c else float("nan")))' \
		"$husk_ms" "$crun_ms" "$runs" "$ACCEL"
}

START=$SECONDS
ensure_kernel
build_initramfs
choose_accel
echo "# vm: kernel $KVER, accel $ACCEL, mode $MODE"
run_qemu "$ACCEL" "$MODE" "$VM_TIMEOUT"
report || exit 1
if [ $MODE = bench ]; then
	report_bench || exit 1
fi
exit 0
