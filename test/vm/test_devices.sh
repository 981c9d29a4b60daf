# The device filter (linux.resources.devices as a BPF_PROG_TYPE_CGROUP_DEVICE
# program on the container's cgroup): allowed devices open, others get
# EPERM, a read-only rule refuses writing, and update replaces the filter.
# /dev/ram0 (block 1:0) and /dev/kmsg (char 1:11) are in no default rule.
. /vm/tests/lib.sh
trap cleanup EXIT

DEVICES='[{"path":"/dev/ram0","type":"b","major":1,"minor":0},{"path":"/dev/kmsg","type":"c","major":1,"minor":11}]'
export DEVICES

# Each probe prints NAME=ok or NAME=EPERM (or the error it got).
PROBES='
probe() { if ( eval "$2" ) 2>/tmp/err; then echo "$1=ok"; elif grep -q "not permitted" /tmp/err; then echo "$1=EPERM"; else echo "$1=$(cat /tmp/err)"; fi; }
probe ram_read "dd if=/dev/ram0 of=/dev/null bs=512 count=1"
probe ram_write "dd if=/dev/zero of=/dev/ram0 bs=512 count=1"
probe kmsg_write "echo husk-vm-device-test >/dev/kmsg"
probe null_rw "echo x >/dev/null && cat /dev/null"
probe zero_read "head -c 1 /dev/zero >/dev/null"
probe mknod "mknod /tmp/ram-again b 1 0"
'

t_default_deny() {
	local b
	b=$(RESOURCES='{"devices":[{"allow":false,"access":"rwm"}]}' new_bundle sh -c "$PROBES")
	run_bundle "$b" dev-deny
	assert_contains "deny-all: a block device not allowed gets EPERM on open (read)" "$OUT" "ram_read=EPERM"
	assert_contains "deny-all: ... and on open for writing" "$OUT" "ram_write=EPERM"
	assert_contains "deny-all: a char device not allowed gets EPERM" "$OUT" "kmsg_write=EPERM"
	assert_contains "deny-all: the default /dev/null still works" "$OUT" "null_rw=ok"
	assert_contains "deny-all: the default /dev/zero still works" "$OUT" "zero_read=ok"
	assert_contains "deny-all: mknod stays allowed (as runc and crun)" "$OUT" "mknod=ok"
}

t_allow_rules() {
	local b
	b=$(RESOURCES='{"devices":[{"allow":false,"access":"rwm"},{"allow":true,"type":"c","major":1,"minor":11,"access":"rw"},
{"allow":true,"type":"b","major":1,"minor":0,"access":"r"}]}' new_bundle sh -c "$PROBES")
	run_bundle "$b" dev-allow
	assert_contains "an allowed char device opens" "$OUT" "kmsg_write=ok"
	assert_contains "a read-only rule lets reading open" "$OUT" "ram_read=ok"
	assert_contains "a read-only rule refuses write (EPERM)" "$OUT" "ram_write=EPERM"
}

t_last_rule_wins() {
	local b
	b=$(RESOURCES='{"devices":[{"allow":false,"access":"rwm"},{"allow":true,"type":"b","major":1,"access":"rw"},
{"allow":false,"type":"b","major":1,"minor":0,"access":"w"}]}' new_bundle sh -c "$PROBES")
	run_bundle "$b" dev-last
	assert_contains "the last matching rule wins: deny w after allow rw" "$OUT" "ram_write=EPERM"
	assert_contains "... and reading stays allowed" "$OUT" "ram_read=ok"
}

t_no_rules() {
	local b
	b=$(RESOURCES='{}' new_bundle sh -c "$PROBES")
	run_bundle "$b" dev-none
	assert_contains "without device rules every device is allowed" "$OUT" "ram_write=ok"
}

t_update_replaces() {
	local b id=dev-update out
	b=$(RESOURCES='{"devices":[{"allow":false,"access":"rwm"},{"allow":true,"type":"b","major":1,"minor":0,"access":"rw"}]}' \
		new_bundle sleep 300)
	start_bundle "$b" $id
	wait_status $id running 50
	echo '{"devices":[{"allow":false,"access":"rwm"},{"allow":true,"type":"b","major":1,"minor":0,"access":"r"}]}' >/run/dev-update.json
	h update --resources /run/dev-update.json $id
	assert_eq "update --resources with devices succeeds" 0 $?
	out=$(h exec $id sh -c "$PROBES" 2>&1)
	assert_contains "after update the new filter refuses write" "$out" "ram_write=EPERM"
	assert_contains "after update reading still works" "$out" "ram_read=ok"
	h delete --force $id
}

t_default_deny
t_allow_rules
t_last_rule_wins
t_no_rules
t_update_replaces
