# Limits of linux.resources inside real containers on a pure cgroup v2
# kernel: each limit is written with the right value and the ones the
# kernel enforces are enforced.  Runs in the VM (see test/vm/lib.sh).
. /vm/tests/lib.sh
trap cleanup EXIT

t_pure_v2() {
	local controllers
	controllers=$(cat $CG/cgroup.controllers)
	for c in cpuset cpu io memory pids; do
		assert_contains "pure cgroup v2 has the $c controller" "$controllers" "$c"
	done
	if grep -q ' cgroup ' /proc/mounts; then
		not_ok "no cgroup v1 hierarchy is mounted" "$(grep ' cgroup ' /proc/mounts)"
	else
		ok "no cgroup v1 hierarchy is mounted"
	fi
}

t_memory_oom() {
	local b id=mem-oom events
	# dd's 64 MiB buffer is filled from /dev/zero: far past 32 MiB.
	b=$(RESOURCES='{"memory":{"limit":33554432,"swap":33554432}}' new_bundle dd if=/dev/zero of=/dev/null bs=64M count=1)
	run_bundle "$b" mem-run
	assert_eq "memory.max: a process allocating past it is OOM-killed (exit 137)" 137 "$RC" "$OUT"

	start_bundle "$b" $id || not_ok "memory.max: create+start" "$(cat /run/$id.log)"
	wait_status $id stopped 200
	assert_eq "memory.max is 33554432 in the container's cgroup" 33554432 "$(cat $CG/husk/$id/memory.max)"
	assert_eq "memory.swap.max is 0 (swap = memory + swap in the spec)" 0 "$(cat $CG/husk/$id/memory.swap.max)"
	assert_eq "memory.events counts the OOM kill" 1 "$(keyed_value $CG/husk/$id/memory.events oom_kill)"
	events=$(h events --stats $id 2>&1)
	assert_contains "events --stats of the stopped container is refused (as runc)" "$events" "container \`$id\` is not running"
	h delete $id
	assert_eq "delete of an OOM-killed container succeeds" 0 $?
	assert_gone "delete of an OOM-killed container removes its cgroup" $CG/husk/$id

	# A container that lives on after a child's OOM kill: its stats say so.
	id=mem-oom-live
	b=$(RESOURCES='{"memory":{"limit":33554432,"swap":33554432}}' new_bundle \
		sh -c 'dd if=/dev/zero of=/dev/null bs=64M count=1; sleep 100')
	start_bundle "$b" $id || not_ok "memory.max: create+start (live)" "$(cat /run/$id.log)"
	for _ in $(seq 300); do
		[ "$(keyed_value $CG/husk/$id/memory.events oom_kill)" = 1 ] && break
		sleep 0.1
	done
	events=$(h events --stats $id 2>&1)
	assert_contains "events --stats reports the OOM kill" "$events" '"oomKill":1'
	assert_contains "events --stats reports the memory limit" "$events" '"limit":33554432'
	h delete --force $id
	assert_gone "delete --force removes its cgroup" $CG/husk/$id
}

t_memory_within_limit() {
	local b
	b=$(RESOURCES='{"memory":{"limit":67108864,"reservation":16777216}}' new_bundle \
		sh -c 'dd if=/dev/zero of=/dev/null bs=16M count=1 2>/dev/null && cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory.low')
	run_bundle "$b" mem-ok
	assert_eq "memory: a process within its limit runs (exit 0)" 0 "$RC" "$OUT"
	assert_eq "memory.max and memory.low (reservation) seen inside the container" "67108864
16777216" "$OUT"
}

t_pids() {
	local b current
	# The forks happen in a subshell that dies on the first refused one;
	# the report uses builtins only, as the shell cannot fork then either.
	b=$(RESOURCES='{"pids":{"limit":6}}' new_bundle sh -c '
(for i in 1 2 3 4 5 6 7 8 9 10; do sleep 30 & done) 2>/dev/null
read max </sys/fs/cgroup/pids.max
read current </sys/fs/cgroup/pids.current
echo "max=$max current=$current"
while read key value; do echo "$key=$value"; done </sys/fs/cgroup/pids.events')
	run_bundle "$b" pids
	assert_contains "pids.max is written (6)" "$OUT" "max=6 "
	current=$(echo "$OUT" | sed -n 's/.*current=\([0-9]*\).*/\1/p')
	if [ -n "$current" ] && [ "$current" -le 6 ] && [ "$current" -ge 2 ]; then
		ok "pids.max is enforced: pids.current ($current) stays within 6"
	else
		not_ok "pids.max is enforced: pids.current stays within 6" "$OUT"
	fi
	if echo "$OUT" | grep -Eq '^max=[1-9]'; then
		ok "pids.max is enforced: fork fails past it (pids.events counts it)"
	else
		not_ok "pids.max is enforced: fork fails past it (pids.events counts it)" "$OUT"
	fi
}

t_cpu() {
	local b
	b=$(RESOURCES='{"cpu":{"shares":512,"quota":50000,"period":100000,"burst":10000,"cpus":"1","mems":"0"}}' \
		new_bundle sh -c 'cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cpu.weight /sys/fs/cgroup/cpu.max.burst \
/sys/fs/cgroup/cpuset.cpus.effective /sys/fs/cgroup/cpuset.mems.effective; grep Cpus_allowed_list /proc/self/status')
	run_bundle "$b" cpu
	assert_eq "cpu: container runs" 0 "$RC" "$OUT"
	assert_eq "cpu.max from quota/period" "50000 100000" "$(echo "$OUT" | sed -n 1p)"
	# shares 512 -> 1 + (512 - 2) * 9999 / 262142 = 20
	assert_eq "cpu.weight from shares (512 -> 20)" 20 "$(echo "$OUT" | sed -n 2p)"
	assert_eq "cpu.max.burst from burst" 10000 "$(echo "$OUT" | sed -n 3p)"
	assert_eq "cpuset.cpus applied (effective 1)" 1 "$(echo "$OUT" | sed -n 4p)"
	assert_eq "cpuset.mems applied (effective 0)" 0 "$(echo "$OUT" | sed -n 5p)"
	assert_contains "cpuset: the process may run on cpu 1 only" "$(echo "$OUT" | sed -n 6p)" "	1"
}

t_cpu_quota_only() {
	local b
	b=$(RESOURCES='{"cpu":{"quota":20000,"idle":0}}' new_bundle cat /sys/fs/cgroup/cpu.max)
	run_bundle "$b" cpu2
	assert_eq "cpu.max keeps the default period when only quota is given" "20000 100000" "$OUT"
}

t_io() {
	local b weight_file
	b=$(RESOURCES='{"blockIO":{"weight":500,"throttleReadBpsDevice":[{"major":1,"minor":0,"rate":1048576}],
"throttleWriteIOPSDevice":[{"major":1,"minor":0,"rate":100}]}}' new_bundle sh -c 'cat /sys/fs/cgroup/io.max;
if [ -e /sys/fs/cgroup/io.bfq.weight ]; then cat /sys/fs/cgroup/io.bfq.weight; else cat /sys/fs/cgroup/io.weight; fi')
	run_bundle "$b" io
	assert_eq "io: container runs" 0 "$RC" "$OUT"
	assert_eq "io.max from the throttles" "1:0 rbps=1048576 wbps=max riops=max wiops=100" "$(echo "$OUT" | sed -n 1p)"
	assert_contains "io weight from blockIO.weight (500 -> io.weight 4950)" "$(echo "$OUT" | sed -n 2p)" "default 4950"
}

t_hugetlb() {
	local b
	if [ ! -e $CG/cgroup.controllers ] || ! grep -qw hugetlb $CG/cgroup.controllers; then
		ok "hugetlb: the kernel has no hugetlb controller # SKIP not built in"
		return
	fi
	b=$(RESOURCES='{"hugepageLimits":[{"pageSize":"2MB","limit":4194304}]}' new_bundle \
		cat /sys/fs/cgroup/hugetlb.2MB.max)
	run_bundle "$b" huge
	assert_eq "hugetlb.2MB.max from hugepageLimits" 4194304 "$OUT"
	b=$(RESOURCES='{"hugepageLimits":[{"pageSize":"3MB","limit":4194304}]}' new_bundle true)
	run_bundle "$b" huge2
	assert_fails "hugepageLimits with a size the kernel lacks is refused" "$RC"
	assert_contains "... naming the sizes it has" "$OUT" "the kernel has no 3MB huge pages (it has: "
}

t_unified() {
	local b
	b=$(RESOURCES='{"memory":{"limit":67108864},"unified":{"memory.high":"50331648","memory.max":"62914560"}}' \
		new_bundle cat /sys/fs/cgroup/memory.high /sys/fs/cgroup/memory.max)
	run_bundle "$b" unified
	assert_eq "unified keys are written, last (they override memory.limit)" "50331648
62914560" "$OUT"
}

t_no_limits() {
	local b
	b=$(new_bundle sh -c 'echo ran; cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max')
	run_bundle "$b" nolimits
	assert_eq "a container without limits runs, with no limits" "ran
max
max" "$OUT"
}

t_pure_v2
t_memory_oom
t_memory_within_limit
t_pids
t_cpu
t_cpu_quota_only
t_io
t_hugetlb
t_unified
t_no_limits
