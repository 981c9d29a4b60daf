#!/usr/bin/env bash
# cgroup v2: on this (hybrid) host, what can be checked here — limits whose
# controller is missing are refused clearly, containers without limits run,
# freeze, the device filter, update and events errors; then every limit,
# for real, inside a VM with a pure cgroup v2 kernel (hack/vm-test.sh),
# whose TAP lines are passed on as "vm: ...".
. "$(dirname "$0")/lib.sh"
require_runtime

UNIFIED=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)

has_controller() { # NAME
	grep -qw "$1" "$UNIFIED/cgroup.controllers" 2>/dev/null
}

t_host_no_limits() {
	BUNDLE=$(new_bundle)
	spec_args sh -c 'echo ran'
	run_ctr
	assert_rc "host: a container without limits runs" 0 "$RC"
	assert_eq "host: ... and prints its output" ran "$OUT"
}

t_host_missing_controller() {
	local before
	if has_controller memory || awk '$3 == "cgroup" && $4 ~ /(^|,)memory(,|$)/ { f = 1 } END { exit !f }' /proc/mounts; then
		skip "host: memory limit refused without the memory controller" "this host has a memory controller (v2 or v1: test_cgroup_v1.sh)"
		return
	fi
	BUNDLE=$(new_bundle)
	spec_set 'c["linux"]["resources"]["memory"]={"limit":67108864}'
	before=$(find "$UNIFIED" -maxdepth 3 -type d | sort)
	create_ctr
	assert_fails "host: a memory limit is refused (no memory controller on v2)" "$RC"
	assert_contains "host: ... naming the field and the controller" "$ERR" \
		"linux.resources.memory.limit: cannot apply: no cgroup hierarchy on this host has the memory controller"
	assert_contains "host: ... and the hierarchy" "$ERR" "cgroup v2 hierarchy at $UNIFIED"
	assert_eq "host: ... leaving no cgroup behind" "" \
		"$(comm -13 <(printf '%s\n' "$before") <(find "$UNIFIED" -maxdepth 3 -type d | sort) | grep -F "$CID")"
	assert_eq "host: ... and no container" "" "$(rt list --quiet | grep -Fx "$CID")"
	spec_set 'c["linux"]["resources"]={"pids":{"limit":10}}'
	create_ctr
	assert_contains "host: a pids limit is refused the same way" "$ERR" "has the pids controller"
	spec_set 'c["linux"]["resources"]={"cpu":{"shares":512}}'
	create_ctr
	assert_contains "host: a cpu limit is refused the same way" "$ERR" "has the cpu controller"
}

t_host_pause_resume() {
	local st
	BUNDLE=$(new_bundle)
	spec_args sh -c 'while :; do :; done'
	create_ctr
	start_ctr "$CID"
	wait_status "$CID" running 10
	rt pause "$CID" >/dev/null 2>"$WORK/err"
	assert_rc "host: pause (cgroup.freeze is core cgroup v2)" 0 "$?"
	assert_eq "host: ... status is paused" paused "$(state_of "$CID")"
	rt resume "$CID" >/dev/null 2>&1
	assert_rc "host: resume" 0 "$?"
	assert_eq "host: ... status is running" running "$(state_of "$CID")"
	st=$(rt events --stats "$CID" 2>&1)
	assert_contains "host: events --stats prints a stats document" "$st" "\"type\":\"stats\",\"id\":\"$CID\""
	rt delete --force "$CID" >/dev/null 2>&1
	assert_true "host: delete removes the cgroup" test ! -e "$UNIFIED/husk/$CID"
}

t_host_device_filter() {
	BUNDLE=$(new_bundle)
	spec_set 'c["linux"]["devices"]=[{"path":"/dev/kmsg","type":"c","major":1,"minor":11}]'
	spec_args sh -c '(echo husk-device-test >/dev/kmsg) 2>&1; echo x >/dev/null && echo null-ok'
	run_ctr
	assert_contains "host: the device filter gives EPERM for a device not allowed" "$OUT" "Operation not permitted"
	assert_contains "host: ... while /dev/null works" "$OUT" "null-ok"
}

t_host_bad_update() {
	local out
	out=$(rt update --pids-limit 5 no-such-container 2>&1)
	assert_fails "host: update of a missing container is refused" "$?"
	assert_contains "host: ... with a clear message" "$out" "no-such-container"
	out=$(rt update --memory lots no-such-container 2>&1)
	assert_fails "host: update with a bad size is refused" "$?"
	assert_contains "host: ... naming the option" "$out" "--memory \`lots\`"
}

t_vm() {
	local line name
	while IFS= read -r line; do
		case $line in
		"ok - "*"# SKIP"*)
			name=${line#ok - }
			skip "${name%% # SKIP*}" "${line##*# SKIP }"
			;;
		"ok - "*) ok "${line#ok - }" ;;
		"not ok - "*) not_ok "${line#not ok - }" ;;
		*) echo "$line" ;;
		esac
	done < <("$REPO_DIR/hack/vm-test.sh" "$BUILD_DIR" 2>&1)
}

run_test t_host_no_limits
run_test t_host_missing_controller
run_test t_host_pause_resume
run_test t_host_device_filter
run_test t_host_bad_update
run_test t_vm
finish
