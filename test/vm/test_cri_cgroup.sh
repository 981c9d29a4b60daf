# huskd's cgroup driver on pure cgroup v2, through husk's CRI client
# (test/vm/cri_cli.c): with
# cgroup_driver systemd a kubelet-style slice parent becomes
# a.slice/a-b.slice/a-b-pod.slice/husk-<id>.scope with the container's
# limits in memory.max and cpu.max; the slices husk made go with the last
# pod under them and one it did not make stays; cgroupfs paths the same;
# a parent of the other form is refused naming it and the driver.  Runs in
# the VM (see test/vm/lib.sh; hack/vm-test.sh adds huskd, husk's CRI client and the
# busybox image).
. /vm/tests/lib.sh
CRI=/run/cri-cgroup
HUSKD_PID=

stop_huskd() {
	[ -n "$HUSKD_PID" ] && kill "$HUSKD_PID" 2>/dev/null && wait "$HUSKD_PID" 2>/dev/null
	HUSKD_PID=
}
trap 'stop_huskd; cleanup' EXIT

c() { timeout 60 /husk/bin/cri-cli -r "unix://$CRI/huskd.sock" -i "unix://$CRI/huskd.sock" "$@"; }

start_huskd() { # DRIVER
	local i=0
	stop_huskd
	rm -f "$CRI/huskd.sock"
	printf '{"cgroup_driver": "%s", "cni_conf_dir": "%s/empty.d"}\n' "$1" "$CRI" >"$CRI/$1.json"
	/husk/bin/huskd --listen "unix://$CRI/huskd.sock" --root "$CRI/root" --state "$CRI/state" \
		--config "$CRI/$1.json" >>"$CRI/huskd.log" 2>&1 &
	HUSKD_PID=$!
	while [ ! -S "$CRI/huskd.sock" ] && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ -S "$CRI/huskd.sock" ] || not_ok "huskd ($1) listens" "$(tail -5 "$CRI/huskd.log")"
}

pod_json() { # NAME PARENT
	printf '{"metadata": {"name": "%s", "namespace": "vm", "uid": "uid-%s"}, "log_directory": "%s/logs/%s",
 "linux": {"cgroup_parent": "%s", "security_context": {"namespace_options": {"network": 2}}}}\n' \
		"$1" "$1" "$CRI" "$1" "$2" >"$CRI/pod-$1.json"
	echo "$CRI/pod-$1.json"
}

CTR_JSON=$CRI/ctr.json

# Runs a pod under PARENT with a sleeping container of 64 MiB and half a
# CPU; sets POD and CID.
run_pod() { # NAME PARENT
	local pod
	pod=$(pod_json "$1" "$2")
	POD=$(c runp "$pod" 2>&1) || not_ok "runp $1 ($2)" "$POD" "$(tail -5 "$CRI/huskd.log")"
	CID=$(c create "$POD" "$CTR_JSON" "$pod" 2>&1) || not_ok "create in $1" "$CID"
	c start "$CID" >/dev/null 2>&1 || not_ok "start in $1" "$(tail -5 "$CRI/huskd.log")"
}

remove_pod() { # POD
	c stopp "$1" >/dev/null 2>&1
	c rmp "$1" >/dev/null 2>&1 || not_ok "rmp $1" "$(tail -5 "$CRI/huskd.log")"
}

t_setup() {
	mkdir -p "$CRI/empty.d" "$CRI/logs"
	# The pod files huskd copies from the host.
	[ -e /etc/resolv.conf ] || : >/etc/resolv.conf
	[ -e /etc/hosts ] || echo "127.0.0.1 localhost" >/etc/hosts
	printf '{"metadata": {"name": "sleeper"}, "image": {"image": "busybox:latest"}, "command": ["sleep", "300"],
 "log_path": "sleeper.log", "linux": {"resources": {"memory_limit_in_bytes": 67108864, "cpu_period": 100000,
 "cpu_quota": 50000}}}\n' >"$CTR_JSON"
	out=$(timeout 60 "$HUSK" image --root "$CRI/root" import /vm/images/busybox busybox:latest 2>&1)
	assert_eq "husk image import busybox into huskd's root" 0 $? "$out"
}

t_systemd() {
	local mid=$CG/vmk.slice/vmk-burstable.slice pod1 cid1
	start_huskd systemd
	run_pod p1 /vmk.slice/vmk-burstable.slice/vmk-burstable-pod1.slice
	pod1=$POD cid1=$CID
	assert_eq "systemd: memory.max of the container's scope" 67108864 \
		"$(cat "$mid/vmk-burstable-pod1.slice/husk-$cid1.scope/memory.max" 2>&1)"
	assert_eq "systemd: cpu.max of the container's scope" "50000 100000" \
		"$(cat "$mid/vmk-burstable-pod1.slice/husk-$cid1.scope/cpu.max" 2>&1)"
	assert_contains "systemd: memory is enabled down to the pod slice" \
		"$(cat "$mid/vmk-burstable-pod1.slice/cgroup.subtree_control" 2>&1)" memory
	run_pod p2 vmk-burstable-pod2.slice
	assert_eq "systemd: a second pod in the same parent slice" 67108864 \
		"$(cat "$mid/vmk-burstable-pod2.slice/husk-$CID.scope/memory.max" 2>&1)"
	remove_pod "$pod1"
	assert_gone "the first pod's slice goes with it" "$mid/vmk-burstable-pod1.slice"
	if [ -d "$mid" ]; then ok "the parent slices stay while another pod is under them"; else
		not_ok "the parent slices stay while another pod is under them"; fi
	remove_pod "$POD"
	assert_gone "the slices husk made go with the last pod" "$CG/vmk.slice"

	mkdir "$CG/vmf.slice"
	run_pod p3 vmf-pod3.slice
	assert_eq "a pod under a slice husk did not make" 67108864 \
		"$(cat "$CG/vmf.slice/vmf-pod3.slice/husk-$CID.scope/memory.max" 2>&1)"
	remove_pod "$POD"
	assert_gone "its pod slice (made by husk) goes" "$CG/vmf.slice/vmf-pod3.slice"
	if [ -d "$CG/vmf.slice" ]; then ok "the slice husk did not make stays"; else
		not_ok "the slice husk did not make stays"; fi
	rmdir "$CG/vmf.slice" 2>/dev/null

	out=$(c runp "$(pod_json p5 /vmc/burstable/pod5)" 2>&1)
	assert_contains "systemd driver, path parent: refused naming the parent and the driver" "$out" \
		"\`/vmc/burstable/pod5\` is not a systemd slice (NAME.slice), but huskd's cgroup_driver is systemd"
}

t_cgroupfs() {
	start_huskd cgroupfs
	run_pod p4 /vmc/burstable/pod4
	assert_eq "cgroupfs: memory.max of the container's cgroup" 67108864 \
		"$(cat "$CG/vmc/burstable/pod4/$CID/memory.max" 2>&1)"
	assert_eq "cgroupfs: cpu.max of the container's cgroup" "50000 100000" \
		"$(cat "$CG/vmc/burstable/pod4/$CID/cpu.max" 2>&1)"
	remove_pod "$POD"
	assert_gone "cgroupfs: the parents husk made go with the pod" "$CG/vmc"
	out=$(c runp "$(pod_json p6 /vmk.slice/vmk-pod6.slice)" 2>&1)
	assert_contains "cgroupfs driver, slice parent: refused naming the parent and the driver" "$out" \
		"\`/vmk.slice/vmk-pod6.slice\` is a systemd slice, but huskd's cgroup_driver is cgroupfs"
	assert_gone "a refused pod makes no cgroup" "$CG/vmk.slice"
	stop_huskd
}

t_setup
t_systemd
t_cgroupfs
