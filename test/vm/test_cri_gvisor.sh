# gVisor pods (runsc as a handler that owns the pod) on pure cgroup v2,
# through husk's CRI client (test/vm/cri_cli.c): where runsc puts the
# sandbox (the infra container's cgroupsPath), UpdateContainerResources
# written by huskd into memory.max and cpu.max there and into the
# container's own cgroup, an OOM kill reported OOMKilled, and nothing left
# after the pod goes.  The full suite is test/integration/test_cri_gvisor.sh
# (Python, on this host's v1 hierarchies); the VM has no Python.  Without
# runsc in the VM, or where runsc cannot run a sandbox here, it prints SKIP
# lines with the reason.
. /vm/tests/lib.sh
CRI=/run/cri-gvisor
RUNSC=/husk/bin/runsc
PARENT=/gvisor-vm
HUSKD_PID=
POD=
CID=

stop_huskd() {
	[ -n "$HUSKD_PID" ] && kill "$HUSKD_PID" 2>/dev/null && wait "$HUSKD_PID" 2>/dev/null
	HUSKD_PID=
}
cleanup_gvisor() {
	[ -n "$POD" ] && c stopp "$POD" >/dev/null 2>&1 && c rmp "$POD" >/dev/null 2>&1
	stop_huskd
	cleanup
}
trap cleanup_gvisor EXIT

c() { timeout 120 /husk/bin/cri-cli -t 110s -r "unix://$CRI/huskd.sock" "$@"; }

skip_all() { # REASON
	local name
	for name in "RunPodSandbox(runsc) on cgroup v2" "UpdateContainerResources of a gVisor container on v2" \
		"OOMKilled in a gVisor pod on v2" "nothing left of the gVisor pod on v2"; do
		echo "ok - $name # SKIP $1"
	done
	exit 0
}

[ -x "$RUNSC" ] || skip_all "runsc is not in the VM (hack/vm-test.sh copies the host's when it has one)"
mkdir -p "$CRI/net.d" "$CRI/logs"
# runsc itself first: a sandbox that cannot start here is a SKIP, not a
# failure of husk's.
trial=$(timeout 120 "$RUNSC" --root "$CRI/trial" --platform=ptrace --network=none do /bin/true 2>&1)
[ $? = 0 ] || skip_all "runsc cannot run a sandbox in this VM: $(printf '%s\n' "$trial" | tail -n 1)"

printf '{"cniVersion": "1.0.0", "name": "lo-only", "plugins": [{"type": "loopback"}]}\n' >"$CRI/net.d/10-lo.conflist"
printf '{"cni_conf_dir": "%s/net.d", "runtimes": {"runsc": {"path": "%s", "root": "%s/runsc", "sandbox": "runtime",
 "args": ["--platform=ptrace", "--network=host"]}}}\n' "$CRI" "$RUNSC" "$CRI" >"$CRI/huskd.json"
/husk/bin/huskd --listen "unix://$CRI/huskd.sock" --root "$CRI/root" --state "$CRI/state" \
	--config "$CRI/huskd.json" >>"$CRI/huskd.log" 2>&1 &
HUSKD_PID=$!
i=0
while [ ! -S "$CRI/huskd.sock" ] && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
[ -S "$CRI/huskd.sock" ] || not_ok "huskd listens" "$(tail -5 "$CRI/huskd.log")"
[ -e /etc/resolv.conf ] || : >/etc/resolv.conf
[ -e /etc/hosts ] || echo "127.0.0.1 localhost" >/etc/hosts
out=$(timeout 60 "$HUSK" image --root "$CRI/root" import /vm/images/busybox busybox:latest 2>&1)
assert_eq "husk image import busybox into huskd's root" 0 $? "$out"

printf '{"metadata": {"name": "gv", "namespace": "vm", "uid": "uid-gv"}, "log_directory": "%s/logs/gv",
 "linux": {"cgroup_parent": "%s"}}\n' "$CRI" "$PARENT" >"$CRI/pod.json"
printf '{"metadata": {"name": "hog"}, "image": {"image": "busybox:latest"}, "command": ["sleep", "300"],
 "log_path": "hog.log"}\n' >"$CRI/ctr.json"

t_pod() {
	local kernel
	POD=$(c runp --runtime runsc "$CRI/pod.json" 2>&1) ||
		{
			not_ok "RunPodSandbox(runsc) on cgroup v2" "$POD" "$(tail -5 "$CRI/huskd.log")"
			POD=
			return 1
		}
	CID=$(c create "$POD" "$CRI/ctr.json" "$CRI/pod.json" 2>&1) || not_ok "create in the gVisor pod" "$CID"
	c start "$CID" >/dev/null 2>&1 || not_ok "start in the gVisor pod" "$(tail -5 "$CRI/huskd.log")"
	kernel=$(c exec -s "$CID" uname -r 2>&1)
	assert_eq "RunPodSandbox(runsc) on cgroup v2: a container runs behind gVisor's kernel" 4.4.0 "$kernel"
	if [ -n "$(cat "$CG$PARENT/$POD/cgroup.procs" 2>/dev/null)" ]; then
		ok "runsc's sandbox runs in the infra container's cgroup $PARENT/<pod> (v2)"
	else
		not_ok "runsc's sandbox runs in the infra container's cgroup $PARENT/<pod> (v2)" \
			"$(find "$CG$PARENT" -maxdepth 2 2>&1 | head -5)"
	fi
}

t_update() {
	local out
	printf '{"memory_limit_in_bytes": 100663296, "cpu_quota": 50000, "cpu_period": 100000}\n' >"$CRI/res.json"
	out=$(c update "$CID" "$CRI/res.json" 2>&1)
	assert_eq "UpdateContainerResources of a gVisor container on v2: accepted" 0 $? "$out"
	assert_eq "... the sandbox's memory.max holds the pod's total" 100663296 \
		"$(cat "$CG$PARENT/$POD/memory.max" 2>&1)"
	assert_eq "... the sandbox's cpu.max" "50000 100000" "$(cat "$CG$PARENT/$POD/cpu.max" 2>&1)"
	if [ -d "$CG$PARENT/$CID" ]; then
		assert_eq "... the container's own cgroup (runsc's, empty) memory.max" 100663296 \
			"$(cat "$CG$PARENT/$CID/memory.max" 2>&1)"
	else
		diag "runsc made no cgroup of its own for the container on v2"
	fi
	printf '{"memory_limit_in_bytes": 4096}\n' >"$CRI/res.json"
	out=$(c update "$CID" "$CRI/res.json" 2>&1)
	assert_contains "a total below the sandbox's usage on v2: refused (v2 would OOM-kill at once)" \
		"$out" "below what its sandbox uses"
	assert_eq "... memory.max unchanged" 100663296 "$(cat "$CG$PARENT/$POD/memory.max" 2>&1)"
}

t_oom() {
	local i=0 status
	printf '{"memory_limit_in_bytes": 67108864}\n' >"$CRI/res.json"
	c update "$CID" "$CRI/res.json" >/dev/null 2>&1
	c exec -s "$CID" dd if=/dev/zero of=/dev/null bs=400M count=1 >/dev/null 2>&1
	while [ $i -lt 60 ]; do
		status=$(c inspect "$CID" 2>&1)
		case $status in *OOMKilled*) break ;; esac
		sleep 1
		i=$((i + 1))
	done
	assert_contains "OOMKilled in a gVisor pod on v2 (memory.events oom_kill of the sandbox's cgroup)" \
		"$status" "OOMKilled"
	assert_contains "... exit code 137" "$status" '"exitCode": 137'
}

t_gone() {
	local left
	c stopp "$POD" >/dev/null 2>&1
	c rmp "$POD" >/dev/null 2>&1 || not_ok "rmp the gVisor pod" "$(tail -5 "$CRI/huskd.log")"
	# busybox timeout leaves its watcher (with cri-cli's command line) asleep.
	left=$(ps -o pid,args 2>/dev/null | grep "$POD" | grep -v -e grep -e cri-cli)
	if [ -z "$left" ] && [ ! -d "$CG$PARENT" ] && [ -z "$("$RUNSC" --root "$CRI/runsc" list -quiet 2>/dev/null)" ]; then
		ok "nothing left of the gVisor pod on v2 (processes, runsc state, cgroups)"
	else
		not_ok "nothing left of the gVisor pod on v2" "$left" "$(find "$CG$PARENT" -maxdepth 1 2>&1 | head -3)"
	fi
	POD=
}

t_pod && t_update && t_oom
[ -n "$POD" ] && t_gone
