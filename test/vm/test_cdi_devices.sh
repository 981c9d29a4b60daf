# What a CDI device injection gives a container under the cgroup v2 device
# filter: the linux.devices node and the linux.resources.devices allow rule
# that cdi_apply writes for a GPU node (char 195:N, cri/cdi/apply.c; their
# exact shape is asserted by test/unit/test_cdi.c).  The VM has no NVIDIA
# driver, so an injected node opens with ENXIO (the filter let it through
# to the kernel, which has no driver for major 195), while a node of the
# next GPU that was not injected, made inside the container with mknod in
# its /dev (not /tmp: a nodev mount would refuse it with EACCES first),
# gets EPERM from the filter.  Reading /dev/nvidia-caps style nodes (major
# 508 here) is checked the same way.
. /vm/tests/lib.sh
trap cleanup EXIT

# Each probe prints NAME=ok, NAME=EPERM, NAME=ENXIO or the error it got.
CDI_PROBES='
probe() { if ( eval "$2" ) 2>/tmp/err; then echo "$1=ok"; elif grep -q "not permitted" /tmp/err; then echo "$1=EPERM"; elif grep -q "No such device or address" /tmp/err; then echo "$1=ENXIO"; else echo "$1=$(cat /tmp/err)"; fi; }
probe gpu0_node "test -c /dev/nvidia0 && ls -ln /dev/nvidia0 | grep -q \"195, *0\""
probe gpu0_open "head -c 1 /dev/nvidia0 >/dev/null"
probe caps_open "head -c 1 /dev/nvidia-caps/nvidia-cap1 >/dev/null"
probe mknod_gpu1 "mknod /dev/nvidia1 c 195 1"
probe gpu1_open "head -c 1 /dev/nvidia1 >/dev/null"
probe mknod_cap2 "mknod /dev/nvidia-caps/nvidia-cap2 c 508 2"
probe cap2_open "head -c 1 /dev/nvidia-caps/nvidia-cap2 >/dev/null"
'

t_injected_and_not() {
	local b
	# As cdi_apply writes them: a node with its type, major and minor, and a
	# "c MAJOR:MINOR rw" allow rule appended to the runtime's default deny.
	b=$(DEVICES='[{"path":"/dev/nvidia0","type":"c","major":195,"minor":0,"fileMode":438,"uid":0,"gid":0},
{"path":"/dev/nvidia-caps/nvidia-cap1","type":"c","major":508,"minor":1,"fileMode":292,"uid":0,"gid":0}]' \
		RESOURCES='{"devices":[{"allow":false,"access":"rwm"},{"allow":true,"type":"c","major":195,"minor":0,"access":"rw"},
{"allow":true,"type":"c","major":508,"minor":1,"access":"r"}]}' new_bundle sh -c "$CDI_PROBES")
	run_bundle "$b" cdi-dev
	assert_eq "a container with an injected GPU node runs" 0 "$RC"
	assert_contains "the injected node is in the container as char 195:0" "$OUT" "gpu0_node=ok"
	assert_contains "the injected node passes the device filter: ENXIO, no driver in the VM" "$OUT" "gpu0_open=ENXIO"
	assert_contains "an injected nvidia-caps node (read rule) passes the filter: ENXIO" "$OUT" "caps_open=ENXIO"
	assert_contains "a node of a GPU not injected can be made (mknod stays allowed)" "$OUT" "mknod_gpu1=ok"
	assert_contains "... but opening it gets EPERM from the device filter" "$OUT" "gpu1_open=EPERM"
	assert_contains "a caps node not injected gets EPERM too" "$OUT" "cap2_open=EPERM"
}

t_injected_and_not
