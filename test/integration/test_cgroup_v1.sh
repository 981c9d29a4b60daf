#!/usr/bin/env bash
# cgroup v1 (and hybrid hosts): every limit a container gets from a v1
# controller is enforced for real here — memory (OOM kill, exit 137), pids
# (fork fails), cpu values, the devices controller (deny by default),
# freezer (pause/resume), stats, update, kill --all and delete in every
# hierarchy; bad input is a clear error that leaves nothing behind.
# Skipped where the controllers are not on v1 (the VM covers pure v2).
. "$(dirname "$0")/lib.sh"
require_runtime

# The v1 mount of a controller, empty if none.
v1_mount() { # CONTROLLER
	awk -v c="$1" '$3 == "cgroup" { n = split($4, o, ","); for (i = 1; i <= n; i++) if (o[i] == c) { print $2; exit } }' /proc/mounts
}

MEMORY=$(v1_mount memory)
PIDS=$(v1_mount pids)
CPU=$(v1_mount cpu)
DEVICES=$(v1_mount devices)
FREEZER=$(v1_mount freezer)

need_v1() { # NAME CONTROLLER-MOUNT...
	local name=$1 m
	shift
	for m in "$@"; do
		if [ -z "$m" ]; then
			skip "$name" "the controller is not on cgroup v1 here"
			return 1
		fi
	done
}

# Every cgroup directory named after the container, in any hierarchy.
cgroup_dirs_of() { # ID
	find /sys/fs/cgroup -mindepth 1 -maxdepth 4 -type d -name "$1" 2>/dev/null
}

# A running container, created and started under a fresh id.
start_sleeper() {
	spec_args sh -c 'touch /started; while :; do sleep 1; done'
	create_ctr
	start_ctr "$CID"
	wait_file "$BUNDLE/rootfs/started" 10
}

t_memory_oom() {
	need_v1 "memory limit: OOM kill" "$MEMORY" || return
	BUNDLE=$(new_bundle)
	spec_set 'c["linux"]["resources"]={"memory":{"limit":33554432,"swap":33554432}}'
	spec_args dd if=/dev/zero of=/dev/null bs=96M count=1
	run_ctr
	assert_eq "memory limit: a 96 MiB buffer under a 32 MiB limit is OOM-killed (exit 137)" 137 "$RC"
}

t_memory_under_limit() {
	need_v1 "memory limit: a buffer below it is fine" "$MEMORY" || return
	BUNDLE=$(new_bundle)
	spec_set 'c["linux"]["resources"]={"memory":{"limit":67108864}}'
	spec_args sh -c 'dd if=/dev/zero of=/dev/null bs=8M count=1 2>/dev/null && echo fine'
	run_ctr
	assert_rc "memory limit: an 8 MiB buffer under 64 MiB runs" 0 "$RC"
	assert_eq "memory limit: ... to the end" fine "$OUT"
}

t_pids_limit() {
	need_v1 "pids limit: fork fails" "$PIDS" || return
	BUNDLE=$(new_bundle)
	spec_set 'c["linux"]["resources"]={"pids":{"limit":4}}'
	spec_args sh -c 'for i in 1 2 3 4 5 6 7 8; do sleep 2 & done 2>&1; wait; echo done'
	run_ctr
	assert_contains "pids limit 4: the fifth fork fails" "$OUT" "can't fork"
}

t_cpu_and_files() {
	local dir
	need_v1 "cpu: shares and quota in the v1 files" "$CPU" "$MEMORY" "$PIDS" || return
	BUNDLE=$(new_bundle)
	spec_set 'c["linux"]["resources"]={"cpu":{"shares":512,"quota":25000,"period":50000},"memory":{"limit":67108864,"reservation":33554432},"pids":{"limit":33}}'
	start_sleeper
	dir=$(cgroup_dirs_of "$CID" | grep "^$CPU/")
	assert_eq "cpu: shares 512 in cpu.shares" 512 "$(cat "$dir/cpu.shares" 2>&1)"
	assert_eq "cpu: quota in cpu.cfs_quota_us" 25000 "$(cat "$dir/cpu.cfs_quota_us" 2>&1)"
	assert_eq "cpu: period in cpu.cfs_period_us" 50000 "$(cat "$dir/cpu.cfs_period_us" 2>&1)"
	dir=$(cgroup_dirs_of "$CID" | grep "^$MEMORY/")
	assert_eq "memory: limit in memory.limit_in_bytes" 67108864 "$(cat "$dir/memory.limit_in_bytes" 2>&1)"
	assert_eq "memory: reservation in memory.soft_limit_in_bytes" 33554432 "$(cat "$dir/memory.soft_limit_in_bytes" 2>&1)"
	dir=$(cgroup_dirs_of "$CID" | grep "^$PIDS/")
	assert_eq "pids: pids.max" 33 "$(cat "$dir/pids.max" 2>&1)"
	assert_contains "the init is in the v1 memory cgroup" "$(cat "/proc/$(container_pid "$CID")/cgroup")" ":memory:/husk/$CID"
	rt update --memory 134217728 --cpu-share 256 "$CID" >/dev/null 2>"$WORK/err"
	assert_rc "update: memory and shares" 0 "$?"
	dir=$(cgroup_dirs_of "$CID" | grep "^$MEMORY/")
	assert_eq "update: ... memory.limit_in_bytes changed" 134217728 "$(cat "$dir/memory.limit_in_bytes" 2>&1)"
	dir=$(cgroup_dirs_of "$CID" | grep "^$CPU/")
	assert_eq "update: ... cpu.shares changed" 256 "$(cat "$dir/cpu.shares" 2>&1)"
}

# CAP_MKNOD, so that only the device rules stand in the way.
spec_mknod() {
	spec_set 'for k in c["process"]["capabilities"]: c["process"]["capabilities"][k].append("CAP_MKNOD")'
}

t_cgroup_mount() {
	local m
	need_v1 "the cgroup mount shows v1 hierarchies" "$MEMORY" "$PIDS" || return
	BUNDLE=$(new_bundle)
	spec_set 'c["linux"]["resources"]={"memory":{"limit":67108864},"pids":{"limit":42}}'
	spec_set 'c["mounts"]=[m for m in c["mounts"] if m["destination"] != "/sys/fs/cgroup"]+[{"destination":"/sys/fs/cgroup","type":"cgroup","source":"cgroup","options":["nosuid","noexec","nodev","relatime","ro"]}]'
	spec_args sh -c 'cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max; ls /sys/fs/cgroup | tr "\n" " "; echo; (touch /sys/fs/cgroup/x) 2>&1; (echo 1 >/sys/fs/cgroup/pids/pids.max) 2>&1; echo end'
	run_ctr
	assert_rc "cgroup mount: the container runs" 0 "$RC"
	assert_contains "cgroup mount: memory/memory.limit_in_bytes is the container's limit (JVMs read it there)" "$OUT" "67108864"
	assert_contains "cgroup mount: pids/pids.max is the container's limit" "$OUT" "42"
	# Controller hierarchies only: named ones (name=systemd) are not given.
	for m in $(awk '$3 == "cgroup" && $4 !~ /name=/ { n = split($2, p, "/"); print p[n] }' /proc/mounts); do
		assert_contains "cgroup mount: the $m hierarchy is there by its host name" "$OUT" "$m"
	done
	assert_contains "cgroup mount: read-only (no new file in the tmpfs)" "$OUT" "Read-only file system"
	assert_not_contains "cgroup mount: ... and no limit can be changed" "$OUT" "$(printf '\nend\n')1"
}

t_devices() {
	need_v1 "devices: deny by default" "$DEVICES" || return
	BUNDLE=$(new_bundle)
	spec_mknod
	# husk spec's default: deny every device, then the standard nodes
	# (which allow mknod of any node, not its use).
	spec_args sh -c 'mknod /sda b 8 0 && echo made; head -c 1 /sda >/dev/null 2>&1 && echo read-ok || echo read-denied; echo x >/dev/null && echo null-ok'
	run_ctr
	assert_contains "devices: mknod of a block device works (CAP_MKNOD)" "$OUT" made
	assert_contains "devices: ... but it cannot be read" "$OUT" read-denied
	assert_contains "devices: ... while /dev/null works" "$OUT" null-ok
	BUNDLE=$(new_bundle)
	spec_mknod
	spec_set 'c["linux"]["resources"]["devices"]=[{"allow":True,"access":"rwm"}]'
	spec_args sh -c 'mknod /kmsg c 1 11 && echo husk-cgroup-v1-test >/kmsg && echo open-ok'
	run_ctr
	assert_eq "devices: allow-all lets a made node (kmsg) be written" open-ok "$OUT"
}

t_freeze() {
	local dir
	need_v1 "freezer: pause and resume" "$FREEZER" || return
	BUNDLE=$(new_bundle)
	start_sleeper
	dir=$(cgroup_dirs_of "$CID" | grep "^$FREEZER/")
	rt pause "$CID" >/dev/null 2>"$WORK/err"
	assert_rc "pause on the v1 freezer" 0 "$?"
	assert_eq "pause: freezer.state is FROZEN" FROZEN "$(cat "$dir/freezer.state" 2>&1)"
	assert_eq "pause: status is paused" paused "$(state_of "$CID")"
	rt resume "$CID" >/dev/null 2>&1
	assert_rc "resume" 0 "$?"
	assert_eq "resume: freezer.state is THAWED" THAWED "$(cat "$dir/freezer.state" 2>&1)"
	assert_eq "resume: status is running" running "$(state_of "$CID")"
}

t_stats() {
	local st
	need_v1 "events --stats from v1 files" "$MEMORY" "$PIDS" || return
	BUNDLE=$(new_bundle)
	spec_set 'c["linux"]["resources"]={"memory":{"limit":67108864},"pids":{"limit":50}}'
	start_sleeper
	st=$(rt events --stats "$CID" 2>&1)
	assert_contains "stats: memory limit" "$st" '"limit":67108864'
	assert_match "stats: memory usage is counted" "$st" '"usage":\{"usage":[1-9][0-9]*'
	assert_match "stats: working set" "$st" '"workingSet":[1-9]'
	assert_match "stats: pids counted against the limit" "$st" '"pids":\{"current":[1-9][0-9]*,"limit":50\}'
	assert_match "stats: cpu usage" "$st" '"cpu":\{"usage":\{"total":[1-9]'
}

t_kill_all_and_delete() {
	local pid
	need_v1 "kill --all and delete in every hierarchy" "$FREEZER" || return
	BUNDLE=$(new_bundle)
	spec_args sh -c 'trap "" TERM; sleep 100 & sleep 100 & touch /started; wait'
	create_ctr
	start_ctr "$CID"
	wait_file "$BUNDLE/rootfs/started" 10
	pid=$(container_pid "$CID")
	rt kill --all "$CID" KILL >/dev/null 2>"$WORK/err"
	assert_rc "kill --all KILL" 0 "$?"
	wait_gone "$pid" 10
	assert_eq "kill --all: the container stops" stopped "$(state_of "$CID")"
	assert_fails "events --stats on a stopped container fails" "$(rt events --stats "$CID" >/dev/null 2>"$WORK/err"; echo $?)"
	assert_contains "... saying it is not running" "$(cat "$WORK/err")" "container \`$CID\` is not running"
	assert_fails "update on a stopped container fails" "$(rt update --pids-limit 9 "$CID" >/dev/null 2>"$WORK/err"; echo $?)"
	assert_contains "... saying it is not running" "$(cat "$WORK/err")" "container \`$CID\` is not running"
	assert_true "before delete: the cgroup is in several hierarchies" test "$(cgroup_dirs_of "$CID" | wc -l)" -gt 1
	rt delete "$CID" >/dev/null 2>&1
	assert_rc "delete" 0 "$?"
	assert_eq "delete removes the cgroup in every hierarchy" "" "$(cgroup_dirs_of "$CID")"
}

t_refused_leaves_nothing() {
	need_v1 "a value the kernel refuses" "$MEMORY" || return
	BUNDLE=$(new_bundle)
	spec_set 'c["linux"]["resources"]={"memory":{"limit":67108864},"cpu":{"cpus":"4000"}}'
	create_ctr
	assert_fails "a cpuset the kernel refuses fails create" "$RC"
	assert_contains "... naming the field" "$ERR" "linux.resources.cpu.cpus"
	assert_eq "... leaving no cgroup in any hierarchy" "" "$(cgroup_dirs_of "$CID")"
	assert_eq "... and no container" "" "$(rt list --quiet | grep -Fx "$CID")"
	spec_set 'c["linux"]["resources"]={"network":{"classID":1048577}}'
	create_ctr
	if [ -z "$(v1_mount net_cls)" ]; then
		assert_contains "net_cls without its controller: refused naming it" "$ERR" "net_cls controller"
		assert_eq "... leaving no cgroup" "" "$(cgroup_dirs_of "$CID")"
	else
		assert_rc "net_cls classID applies" 0 "$RC"
	fi
}

# A cpuset level husk makes above the container gets clone_children, so the
# kernel gives each new container cgroup its cpus and mems (no write, which
# would rebuild the scheduler domains); the container still gets exactly
# its parent's, and a level husk did not make is left as it was.
t_cpuset_parent() {
	local cpuset parent root_before
	cpuset=$(v1_mount cpuset)
	need_v1 "cpuset: a new parent level" "$cpuset" || return
	root_before=$(cat "$cpuset/cgroup.clone_children")
	parent=husk-it-cpuset-$$-$RANDOM
	BUNDLE=$(new_bundle)
	spec_set 'c["linux"]["cgroupsPath"] = "/" + A[0] + "/" + A[1]' "$parent" "ctr-$RANDOM"
	start_sleeper
	# The level is made in every hierarchy, not only cpuset's.
	defer "rmdir /sys/fs/cgroup/*/'$parent' 2>/dev/null"
	assert_eq "cpuset: the level husk made has clone_children" 1 "$(cat "$cpuset/$parent/cgroup.clone_children" 2>/dev/null)"
	assert_eq "cpuset: the container has its parent's cpus" "$(cat "$cpuset/$parent/cpuset.cpus")" \
		"$(cat "$cpuset"/"$parent"/ctr-*/cpuset.cpus 2>/dev/null)"
	assert_eq "cpuset: the container has its parent's mems" "$(cat "$cpuset/$parent/cpuset.mems")" \
		"$(cat "$cpuset"/"$parent"/ctr-*/cpuset.mems 2>/dev/null)"
	assert_eq "cpuset: the root level, which husk did not make, is left as it was" "$root_before" \
		"$(cat "$cpuset/cgroup.clone_children")"
	rt delete --force "$CID" >/dev/null 2>&1
	assert_eq "cpuset: delete removes the container's cgroup" "" "$(ls -d "$cpuset/$parent"/ctr-* 2>/dev/null)"
}

run_test t_memory_oom
run_test t_cpuset_parent
run_test t_memory_under_limit
run_test t_pids_limit
run_test t_cpu_and_files
run_test t_cgroup_mount
run_test t_devices
run_test t_freeze
run_test t_stats
run_test t_kill_all_and_delete
run_test t_refused_leaves_nothing
finish
