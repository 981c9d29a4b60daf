# The cgroup side of a container's life: update of a running container,
# pause/resume through cgroup.freeze, kill --all through cgroup.kill,
# delete leaving no cgroup, the forms of linux.cgroupsPath, and bad input
# refused with nothing changed.  Runs in the VM (see test/vm/lib.sh).
. /vm/tests/lib.sh
trap cleanup EXIT

t_update() {
	local b id=upd cg=$CG/husk/upd out
	b=$(RESOURCES='{"memory":{"limit":67108864},"pids":{"limit":50},"cpu":{"shares":1024}}' new_bundle sleep 300)
	start_bundle "$b" $id
	wait_status $id running 50
	h update --memory 32m --pids-limit 20 --cpu-quota 30000 --cpu-period 60000 --cpu-weight 300 $id
	assert_eq "update of a running container succeeds" 0 $?
	assert_eq "update changes memory.max" 33554432 "$(cat $cg/memory.max)"
	assert_eq "update changes pids.max" 20 "$(cat $cg/pids.max)"
	assert_eq "update changes cpu.max" "30000 60000" "$(cat $cg/cpu.max)"
	assert_eq "update changes cpu.weight" 300 "$(cat $cg/cpu.weight)"
	echo '{"memory":{"reservation":8388608},"unified":{"memory.high":"31457280"}}' >/run/upd.json
	h update --resources - $id </run/upd.json
	assert_eq "update --resources - reads stdin" 0 $?
	assert_eq "update --resources sets memory.low" 8388608 "$(cat $cg/memory.low)"
	assert_eq "update --resources sets unified keys" 31457280 "$(cat $cg/memory.high)"
	assert_eq "update leaves what it was not given (memory.max)" 33554432 "$(cat $cg/memory.max)"

	out=$(h update --pids-limit -5 $id 2>&1)
	assert_fails "update with a negative limit is refused" $?
	assert_contains "... with a clear message" "$out" "linux.resources.pids.limit: must be >= -1"
	echo '{"memory":{"limit":16777216},"unified":{"memory.bogus":"1"}}' >/run/upd-bad.json
	out=$(h update --resources /run/upd-bad.json $id 2>&1)
	assert_fails "update with an unknown unified key is refused" $?
	assert_contains "... naming the key" "$out" "unknown key \`memory.bogus\`"
	assert_eq "... and nothing changed (memory.max)" 33554432 "$(cat $cg/memory.max)"
	out=$(h update --cpu-quota 500 $id 2>&1)
	assert_fails "update with an absurd cpu quota is refused" $?
	assert_eq "... and nothing changed (cpu.max)" "30000 60000" "$(cat $cg/cpu.max)"
	out=$(h update --memory 1m --resources /run/upd.json nosuch 2>&1)
	assert_fails "update of a missing container is refused" $?
	assert_contains "... with a clear message" "$out" "container \`nosuch\` does not exist"
	h delete --force $id
	assert_gone "delete --force removes the cgroup" $cg
}

t_pause_resume() {
	local b id=frz cg=$CG/husk/frz u1 u2 u3
	b=$(new_bundle sh -c 'while :; do :; done')
	start_bundle "$b" $id
	wait_status $id running 50
	sleep 0.3
	h pause $id
	assert_eq "pause succeeds" 0 $?
	assert_eq "a paused container's status is paused" paused "$(status_of $id)"
	assert_eq "pause writes cgroup.freeze" 1 "$(cat $cg/cgroup.freeze)"
	assert_eq "cgroup.events says frozen" 1 "$(keyed_value $cg/cgroup.events frozen)"
	u1=$(keyed_value $cg/cpu.stat usage_usec)
	sleep 1
	u2=$(keyed_value $cg/cpu.stat usage_usec)
	assert_eq "pause freezes: the spinning process makes no progress" "$u1" "$u2"
	h resume $id
	assert_eq "resume succeeds" 0 $?
	assert_eq "a resumed container's status is running" running "$(status_of $id)"
	sleep 1
	u3=$(keyed_value $cg/cpu.stat usage_usec)
	if [ "$u3" -gt "$u2" ]; then
		ok "resume thaws: the process makes progress again ($u2 -> $u3 usec)"
	else
		not_ok "resume thaws: the process makes progress again" "usage_usec $u2 -> $u3"
	fi
	h resume $id >/dev/null 2>&1
	assert_fails "resume of a running container is refused" $?
	h pause $id
	h delete --force $id
	assert_eq "delete --force of a paused container succeeds" 0 $?
	assert_gone "... and removes its cgroup" $cg
}

t_kill_all() {
	local b id=killall cg=$CG/husk/killall n
	b=$(new_bundle sh -c 'sleep 300 & sleep 300 & sleep 300 & wait')
	start_bundle "$b" $id
	wait_status $id running 50
	sleep 0.5
	assert_eq "the container has 4 processes" 4 "$(wc -l <$cg/cgroup.procs)"
	h kill --all $id KILL
	assert_eq "kill --all succeeds" 0 $?
	wait_status $id stopped 50
	n=$(wc -l <$cg/cgroup.procs)
	assert_eq "kill --all (cgroup.kill) leaves no process" 0 "$n"
	h delete $id
	assert_gone "delete leaves no cgroup behind" $cg
}

t_cgroups_paths() {
	local b
	b=$(CGROUPS_PATH=/husk-abs/c1 RESOURCES='{"memory":{"limit":67108864}}' new_bundle cat /sys/fs/cgroup/memory.max)
	start_bundle "$b" abs
	assert_eq "an absolute cgroupsPath is under the hierarchy's root" 67108864 "$(cat $CG/husk-abs/c1/memory.max)"
	h delete --force abs
	assert_gone "delete removes the absolute-path cgroup" $CG/husk-abs/c1

	b=$(CGROUPS_PATH=husk-rel/c2 RESOURCES='{"pids":{"limit":7}}' new_bundle true)
	start_bundle "$b" rel
	assert_eq "a relative cgroupsPath is under the runtime's own cgroup" 7 "$(cat $CG/husk-rel/c2/pids.max)"
	h delete --force rel

	b=$(CGROUPS_PATH=husk-test-pod1.slice:cri:c3 RESOURCES='{"pids":{"limit":9}}' new_bundle true)
	h --systemd-cgroup create --bundle "$b" sysd >/run/sysd.log 2>&1
	assert_eq "slice:prefix:name maps to the nested systemd slices" 9 \
		"$(cat $CG/husk.slice/husk-test.slice/husk-test-pod1.slice/cri-c3.scope/pids.max 2>&1)"
	h delete --force sysd
	assert_gone "delete removes the systemd-form cgroup" $CG/husk.slice/husk-test.slice/husk-test-pod1.slice/cri-c3.scope
}

t_bad_input() {
	local b out before
	before=$(find $CG -type d | sort | md5sum)
	b=$(RESOURCES='{"memory":{"limit":-7}}' new_bundle true)
	out=$(h create --bundle "$b" bad1 2>&1)
	assert_fails "a negative memory limit is refused" $?
	assert_contains "... naming the field" "$out" "linux.resources.memory.limit: must be >= -1"
	b=$(RESOURCES='{"cpu":{"shares":1000000}}' new_bundle true)
	out=$(h create --bundle "$b" bad2 2>&1)
	assert_fails "absurd cpu shares are refused" $?
	b=$(RESOURCES='{"unified":{"memory.nosuch":"1"}}' new_bundle true)
	out=$(h create --bundle "$b" bad3 2>&1)
	assert_fails "an unknown unified key is refused" $?
	assert_contains "... naming the key" "$out" "unknown key \`memory.nosuch\`"
	b=$(CGROUPS_PATH=/a/../../escape new_bundle true)
	out=$(h create --bundle "$b" bad4 2>&1)
	assert_fails "a cgroupsPath with .. is refused" $?
	assert_contains "... naming the problem" "$out" ".."
	assert_eq "refused creates leave no cgroup behind" "$before" "$(find $CG -type d | sort | md5sum)"
	assert_eq "refused creates leave no container" "" "$(h list --quiet)"
}

t_update
t_pause_resume
t_kill_all
t_cgroups_paths
t_bad_input
