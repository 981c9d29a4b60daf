#!/usr/bin/env bash
# process.apparmorProfile in the runtime, on a host without AppArmor (this
# machine's kernel has none; the confinement itself is tested in the VM,
# test/vm/test_apparmor.sh): `husk features` says what the kernel says; a
# profile is refused at create, run and exec naming it, with nothing left
# behind and the process never run; "unconfined" is a no-op; a profile name
# the kernel could not take is refused.  On main before this work husk
# accepted every profile and ran the container unconfined.
# Run alone: ./test/integration/test_apparmor.sh
. "$(dirname "$0")/lib.sh"
require_runtime

AA_ENABLED=N
[ -r /sys/module/apparmor/parameters/enabled ] && AA_ENABLED=$(head -c 1 /sys/module/apparmor/parameters/enabled)

t_features() {
	local want=false
	[ "$AA_ENABLED" = Y ] && want=true
	assert_eq "features: linux.apparmor.enabled is the kernel's ($AA_ENABLED)" "$want" \
		"$(rt features | json_get linux.apparmor.enabled | tr 'TF' 'tf')"
}

# Nothing of container ID: no state, no cgroup.
assert_nothing_left() { # NAME ID
	local left
	left=$(find /sys/fs/cgroup -maxdepth 4 -name "*$2*" 2>/dev/null)
	[ -e "$ROOT/$2" ] && left="$left $ROOT/$2"
	assert_eq "$1" "" "$left"
}

t_create_refused() {
	local b
	[ "$AA_ENABLED" = Y ] && { skip "create with a profile is refused" "AppArmor is enabled here"; return; }
	b=$(new_bundle)
	BUNDLE=$b spec_args sh -c 'touch /ran'
	BUNDLE=$b spec_set 'c["process"]["apparmorProfile"]="husk-test-profile"'
	BUNDLE=$b create_ctr
	assert_fails "create with process.apparmorProfile is refused without AppArmor" "$RC"
	assert_contains "... naming the profile and why" "$ERR" \
		"process.apparmorProfile \`husk-test-profile\`: AppArmor is not enabled on this host"
	assert_nothing_left "... and nothing is left (state, cgroup)" "$CID"
	BUNDLE=$b run_ctr
	assert_fails "run with the profile is refused too" "$RC"
	assert_contains "... with the same error" "$ERR" "\`husk-test-profile\`: AppArmor is not enabled"
	assert_true "... and the process never ran" test ! -e "$b/rootfs/ran"
	assert_nothing_left "... nothing left of the run either" "$CID"
}

t_unconfined_is_noop() {
	local b
	b=$(new_bundle)
	BUNDLE=$b spec_args echo ran
	BUNDLE=$b spec_set 'c["process"]["apparmorProfile"]="unconfined"'
	BUNDLE=$b run_ctr
	assert_rc "run with apparmorProfile unconfined succeeds (a no-op here)" 0 "$RC"
	assert_eq "... and the process ran" ran "$OUT"
	[ "$RC" -eq 0 ] || diag "$ERR"
}

t_bad_name() {
	local b
	b=$(new_bundle)
	BUNDLE=$b spec_args true
	BUNDLE=$b spec_set 'c["process"]["apparmorProfile"]="husk-test\nchange_profile unconfined"'
	BUNDLE=$b create_ctr
	assert_fails "a profile name with a newline is refused" "$RC"
	assert_contains "... naming the field and the character" "$ERR" \
		"process.apparmorProfile: control character 0x0a in the profile name"
	assert_nothing_left "... and nothing is left" "$CID"
}

t_exec_refused() {
	local b out rc
	[ "$AA_ENABLED" = Y ] && { skip "exec with a profile is refused" "AppArmor is enabled here"; return; }
	b=$(new_bundle)
	BUNDLE=$b spec_args sleep 1000
	BUNDLE=$b create_ctr
	start_ctr "$CID"
	wait_status "$CID" running 10 || { not_ok "a sleeper to exec into runs" "$ERR"; return; }
	out=$(rt exec --apparmor husk-exec-profile "$CID" touch /exec-ran 2>&1 </dev/null)
	rc=$?
	assert_fails "exec --apparmor PROFILE is refused without AppArmor" "$rc"
	assert_contains "... naming the profile" "$out" "\`husk-exec-profile\`: AppArmor is not enabled on this host"
	assert_true "... and the process never ran" test ! -e "$b/rootfs/exec-ran"
	printf '{"args":["touch","/exec-ran"],"cwd":"/","env":["PATH=/bin"],"user":{"uid":0,"gid":0},"apparmorProfile":"husk-file-profile"}' \
		>"$WORK/process.json"
	out=$(rt exec --process "$WORK/process.json" "$CID" 2>&1 </dev/null)
	rc=$?
	assert_fails "exec --process with apparmorProfile is refused" "$rc"
	assert_contains "... naming it" "$out" "\`husk-file-profile\`: AppArmor is not enabled on this host"
	assert_true "... and it never ran" test ! -e "$b/rootfs/exec-ran"
	out=$(rt exec "$CID" echo still-works 2>&1 </dev/null)
	assert_eq "control: exec without a profile works" still-works "$out"
}

for t in t_features t_create_refused t_unconfined_is_noop t_bad_name t_exec_refused; do
	run_test "$t"
done
finish
