#!/bin/busybox sh
# /init of the cgroup v2 test VM (hack/vm-test.sh builds the initramfs).
# Stage 1 copies the initramfs into a tmpfs and switches into it, because
# the initramfs itself can never be pivot_root'ed away from, as every
# container start does.  Stage 2 mounts a pure cgroup v2 hierarchy, runs
# /vm/tests/test_*.sh (or /vm/bench.sh with husk.mode=bench on the kernel
# command line) and writes their TAP lines to the second serial port,
# ending with "HUSK-VM-DONE"; the console (first port) gets the rest.
# husk.mode=probe only reports that the guest booted.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
export HOME=/root

stage1() {
	/bin/busybox mkdir -p /proc /dev /newroot
	/bin/busybox --install -s /bin
	mount -t proc proc /proc
	mount -t devtmpfs devtmpfs /dev
	# hack/vm-test.sh only asks whether the guest runs at all (KVM check).
	if grep -q 'husk.mode=probe' /proc/cmdline; then
		echo HUSK-VM-DONE >/dev/ttyS1
		poweroff -f
	fi
	mount -t tmpfs -o mode=0755 tmpfs /newroot
	for entry in /*; do
		case $entry in /proc | /dev | /newroot) continue ;; esac
		cp -a "$entry" /newroot/
	done
	mkdir -p /newroot/proc /newroot/dev /newroot/sys /newroot/run /newroot/tmp
	touch /newroot/.husk-stage2
	mount --move /dev /newroot/dev
	umount /proc
	exec switch_root /newroot /init
}

mount_all() {
	mount -t proc proc /proc
	mount -t sysfs sysfs /sys
	# AppArmor's interface (profiles list, policy loading) lives here.
	mount -t securityfs securityfs /sys/kernel/security
	mkdir -p /dev/pts /dev/shm /dev/mqueue
	mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
	mount -t tmpfs tmpfs /dev/shm
	mount -t mqueue mqueue /dev/mqueue
	mount -t tmpfs tmpfs /run
	mount -t tmpfs -o mode=1777 tmpfs /tmp
	# Pure cgroup v2: nothing of v1 is mounted (and cgroup_no_v1=all).
	mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
}

# A ram disk (block 1:0) for io.max and the block device rules, and huge
# pages for hugetlb.
prepare_devices() {
	# Twice: a module whose dependency sorts after it loads the second time.
	for module in /vm/modules/*.ko /vm/modules/*.ko; do
		[ -e "$module" ] || continue
		grep -q "^$(basename "$module" .ko) " /proc/modules && continue
		case $module in
		*/brd.ko) insmod "$module" rd_nr=1 rd_size=8192 ;;
		*) insmod "$module" 2>/dev/null ;;
		esac
	done
	echo 8 >/proc/sys/vm/nr_hugepages 2>/dev/null
	hostname husk-vm
}

run_scripts() { # RESULTS-DEVICE
	local mode=test script status
	grep -q 'husk.mode=bench' /proc/cmdline && mode=bench
	echo "# vm: kernel $(uname -r), cgroup controllers: $(cat /sys/fs/cgroup/cgroup.controllers)" >"$1"
	if [ $mode = bench ]; then
		timeout 500 sh /vm/bench.sh >"$1" 2>&1
		echo "# vm: bench exited with status $?" >"$1"
		return
	fi
	for script in /vm/tests/test_*.sh; do
		echo "# vm: $(basename "$script")" >"$1"
		timeout 240 sh "$script" >"$1"
		status=$?
		[ $status -eq 0 ] || echo "# vm: $(basename "$script") exited with status $status" >"$1"
	done
}

stage2() {
	mount_all
	prepare_devices
	# Everything not a result goes to the console.
	exec </dev/null >/dev/ttyS0 2>&1
	stty -F /dev/ttyS1 raw -echo 2>/dev/null
	echo "# vm: booted" >/dev/ttyS1
	run_scripts /dev/ttyS1
	echo "HUSK-VM-DONE" >/dev/ttyS1
	sync
	poweroff -f
}

if [ -e /.husk-stage2 ]; then
	stage2
else
	stage1
fi
# Never return: the kernel panics (and qemu exits, panic=-1) if init dies.
poweroff -f
