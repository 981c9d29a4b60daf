#!/usr/bin/env bash
# Attacks from inside a container (or through its config), each carried out
# for real, with a control showing the legitimate use still works:
#   - the RuntimeDefault seccomp profile of `husk container run`: no new
#     user namespace by clone or clone3, no io_uring, personality only to
#     the allowed values (security_probe.c is the attacker, built static);
#   - `husk exec` into a cwd outside the container (a leaked host directory
#     fd as --cwd /proc/self/fd/N, or a symlink to it: CVE-2024-21626);
#   - /proc/PID/mem of an exec child still running husk (CVE-2016-9962);
#   - linux.sysctl keys that would change the host's value;
#   - shell injection through `husk ps ID ARGS`;
#   - a capability the runtime cannot grant (outside its bounding set):
#     create fails naming it and leaves nothing behind, instead of a
#     container whose process dies after start.
# Run alone: ./test/integration/test_security.sh
. "$(dirname "$0")/lib.sh"
require_runtime

HUSK=${HUSK:-$BUILD_DIR/husk}
IMAGES=${HUSK_TEST_IMAGES:-$CACHE_DIR/test-images}
PROBE=$WORK/bin/probe
STORE=$WORK/store

global_cleanup() {
	local id
	for id in $("$HUSK" --root "$ROOT" container --root "$STORE" ls -a -q 2>/dev/null); do
		timeout 20 "$HUSK" --root "$ROOT" container --root "$STORE" rm -f "$id" >/dev/null 2>&1
	done
	return 0
}
trap 'global_cleanup; cleanup_all' EXIT

setup() {
	mkdir -p "$WORK/bin" "$STORE"
	if ! gcc -static -O1 -o "$PROBE" "$LIB_DIR/security_probe.c" 2>"$WORK/gcc.err"; then
		echo "not ok - build the probe (gcc -static)"
		diag "$(cat "$WORK/gcc.err")"
		exit 1
	fi
}

# A bundle whose rootfs holds the probe at /probe.
probe_bundle() {
	local b
	b=$(new_bundle)
	cp "$PROBE" "$b/rootfs/probe"
	echo "$b"
}

# ---------------------------------------------------------------- seccomp

ctr() { # ARGS...: `husk container` on our store; sets OUT, ERR, RC
	OUT=$(timeout -k 5 60 "$HUSK" --root "$ROOT" container --root "$STORE" "$@" 2>"$WORK/err" </dev/null)
	RC=$?
	ERR=$(cat "$WORK/err")
}

PROBES="clone-userns clone3-userns unshare-userns io-uring personality-noaslr personality-query"
probe_all='for p in '$PROBES'; do printf "%s=" $p; /p/probe $p; done; grep Seccomp: /proc/self/status | tr -d "\t"'

t_container_run_seccomp() {
	if [ ! -d "$IMAGES/busybox" ] && ! "$REPO_DIR/hack/test-images.sh" "$IMAGES" >"$WORK/images.log" 2>&1; then
		not_ok "build the test images" "$(tail -n 5 "$WORK/images.log")"
		return 1
	fi
	if ! timeout 60 "$HUSK" --root "$ROOT" image --root "$STORE" import "$IMAGES/busybox" sec/busybox:latest \
		>/dev/null 2>"$WORK/import.err"; then
		not_ok "import the busybox test image" "$(cat "$WORK/import.err")"
		return 1
	fi
	ctr run --rm --network none -v "$WORK/bin:/p:ro" sec/busybox:latest "$probe_all"
	assert_rc "container run: a command runs under the default profile" 0 "$RC"
	assert_eq "container run: RuntimeDefault refuses new namespaces, io_uring and personality changes" \
		"$(printf '%s\n' clone-userns=EPERM clone3-userns=ENOSYS unshare-userns=EPERM io-uring=EPERM \
			personality-noaslr=EPERM personality-query=ok Seccomp:2)" "$OUT"
	# Control: the probe succeeds when nothing filters it.
	ctr run --rm --network none --security-opt seccomp=unconfined -v "$WORK/bin:/p:ro" sec/busybox:latest "$probe_all"
	assert_eq "container run --security-opt seccomp=unconfined: the same probes succeed" \
		"$(printf '%s\n' clone-userns=ok clone3-userns=ok unshare-userns=ok io-uring=ok \
			personality-noaslr=ok personality-query=ok Seccomp:0)" "$OUT"
	ctr run --rm --security-opt seccomp=bogus sec/busybox:latest true
	assert_fails "container run --security-opt seccomp=bogus is refused" "$RC"
	assert_contains "... with an error naming it" "$ERR" "--security-opt \`seccomp=bogus\`"
	assert_eq "... and nothing is left" "" "$(ls -A "$STORE/containers" 2>/dev/null)"
}

# ---------------------------------------------------------------- exec

# A running container whose init sleeps; sets CID and B.
start_sleeper() {
	B=$(probe_bundle)
	BUNDLE=$B spec_args sleep 1000
	BUNDLE=$B create_ctr
	start_ctr "$CID"
	wait_status "$CID" running 10
}

t_exec_cwd_outside() {
	local hostdir secret out rc
	hostdir=$(new_tmpdir sec-host)
	secret=host-secret-$RANDOM$RANDOM
	echo "$secret" >"$hostdir/marker"
	start_sleeper
	# fd 7 of the caller is a host directory that husk exec inherits.
	out=$(
		exec 7<"$hostdir"
		rt exec --cwd /proc/self/fd/7 "$CID" cat marker 2>&1 </dev/null
	)
	rc=$?
	assert_fails "exec --cwd /proc/self/fd/7 (a host dir fd of the caller) is refused" "$rc"
	assert_not_contains "... and the process never read the host file" "$out" "$secret"
	assert_contains "... with an error saying why" "$out" "outside the container"
	rt exec "$CID" ln -s /proc/self/fd/7 /evil </dev/null >/dev/null 2>&1
	out=$(
		exec 7<"$hostdir"
		rt exec --cwd /evil "$CID" cat marker 2>&1 </dev/null
	)
	rc=$?
	assert_fails "exec --cwd /evil (a container symlink to /proc/self/fd/7) is refused" "$rc"
	assert_not_contains "... and the process never read the host file" "$out" "$secret"
	out=$(rt exec --cwd /tmp "$CID" pwd 2>&1 </dev/null)
	assert_eq "control: exec --cwd /tmp runs in /tmp" /tmp "$out"
}

t_exec_not_dumpable() {
	local scan i out
	start_sleeper
	rt exec "$CID" /probe memscan 6 >"$WORK/scan.out" 2>&1 </dev/null &
	scan=$!
	sleep 0.3
	for i in $(seq 1 60); do
		rt exec "$CID" true </dev/null >/dev/null 2>&1
	done
	wait "$scan"
	out=$(cat "$WORK/scan.out")
	diag "attacker: $out"
	assert_match "no exec child's /proc/PID/mem opened read-write by the container" "$out" '^seen [0-9]+ hits 0$'
	out=$(rt exec "$CID" /probe open-mem 1 2>&1 </dev/null)
	assert_eq "control: the same open of a plain container process's mem works" ok "$out"
}

# ---------------------------------------------------------------- sysctl

# Creates a bundle with linux.sysctl KEY=VALUE and runs CMD; sets OUT, RC, ERR.
run_sysctl() { # KEY VALUE CMD...
	local key=$1 value=$2
	shift 2
	BUNDLE=$B spec_set 'c["linux"]["sysctl"] = {A[0]: A[1]}' "$key" "$value"
	BUNDLE=$B spec_args "$@"
	BUNDLE=$B run_ctr
}

assert_sysctl_refused() { # NAME KEY VALUE HOST-FILE
	local before
	before=$(cat "$4")
	run_sysctl "$2" "$3" true
	assert_fails "$1: refused" "$RC"
	assert_contains "$1: the error names linux.sysctl \`$2\`" "$ERR" "linux.sysctl \`$2\`"
	assert_eq "$1: the host's value is unchanged" "$before" "$(cat "$4")"
	assert_true "$1: no state is left" test ! -e "$ROOT/$CID"
}

t_sysctl_namespaces() {
	local interval
	B=$(new_bundle)
	interval=$(cat /proc/sys/vm/stat_interval)
	assert_sysctl_refused "vm.stat_interval (no namespace holds it)" vm.stat_interval $((interval + 1)) \
		/proc/sys/vm/stat_interval
	assert_sysctl_refused "kernel.core_pattern" kernel.core_pattern "|/tmp/husk-pwned" /proc/sys/kernel/core_pattern
	# Controls: the namespaced ones still work in the container's own namespace.
	run_sysctl net.ipv4.ip_forward 1 cat /proc/sys/net/ipv4/ip_forward
	assert_eq "control: net.ipv4.ip_forward in a new network namespace is set" 1 "$OUT"
	run_sysctl kernel.shmmni 1234 cat /proc/sys/kernel/shmmni
	assert_eq "control: kernel.shmmni in a new ipc namespace is set" 1234 "$OUT"
	BUNDLE=$B spec_ns network "/proc/$$/ns/net"
	assert_sysctl_refused "net.ipv4.ip_forward joining the host's network namespace" net.ipv4.ip_forward 1 \
		/proc/sys/net/ipv4/ip_forward
	BUNDLE=$B spec_del_ns network
	assert_sysctl_refused "net.ipv4.ip_forward without a network namespace" net.ipv4.ip_forward 1 \
		/proc/sys/net/ipv4/ip_forward
	BUNDLE=$B spec_del_ns ipc
	assert_sysctl_refused "kernel.shmmni without an ipc namespace" kernel.shmmni 1234 /proc/sys/kernel/shmmni
}

# ---------------------------------------------------------------- capabilities

CAP_SYS_RESOURCE_BIT=24

# Creates $B with the capability sets edited by EXPR (Python, caps in `k`);
# the process would leave a marker on the host if it ever ran.
create_with_caps() { # EXPR
	BUNDLE=$B spec_set "k = c[\"process\"][\"capabilities\"]
$1"
	BUNDLE=$B create_ctr
	if [ "$RC" -eq 0 ]; then
		start_ctr "$CID"
		wait_status "$CID" stopped 5 >/dev/null 2>&1
	fi
}

assert_caps_refused() { # NAME SET
	local name=$1 set=$2
	assert_fails "$name: create fails" "$RC"
	assert_contains "$name: the error names the set and the capability" "$ERR" \
		"process.capabilities.$set: CAP_SYS_RESOURCE"
	assert_eq "$name: the error is one line" 1 "$(printf '%s\n' "$ERR" | grep -c .)"
	assert_true "$name: no state left" test ! -e "$ROOT/$CID"
	assert_eq "$name: no cgroup left" "" "$(find /sys/fs/cgroup -maxdepth 4 -name "*$CID*" 2>/dev/null)"
	assert_eq "$name: no mount left" "" "$(grep -F "$B/rootfs" /proc/self/mountinfo)"
	assert_true "$name: the process never ran" test ! -e "$B/mark/ran"
	rm -f "$B/mark/ran"
}

t_caps_outside_bounding() {
	local bnd
	bnd=$(awk '/^CapBnd:/ { print $2 }' /proc/self/status)
	if (((0x$bnd >> CAP_SYS_RESOURCE_BIT) & 1)); then
		skip "caps outside the bounding set" "this runtime holds CAP_SYS_RESOURCE"
		return
	fi
	B=$(new_bundle)
	mkdir "$B/mark"
	BUNDLE=$B spec_mount /mark bind "$B/mark" rbind rw
	BUNDLE=$B spec_args sh -c 'touch /mark/ran; grep CapEff /proc/self/status > /mark/caps'
	create_with_caps 'for s in ("bounding","permitted","effective"): k[s].append("CAP_SYS_RESOURCE")'
	assert_caps_refused "CAP_SYS_RESOURCE in bounding, permitted, effective" bounding
	# The peer on the same bundle (runc 1.1.5: "unable to apply caps:
	# operation not permitted"); crun 1.8.1 cannot run on hybrid hosts.
	if command -v runc >/dev/null; then
		local peer_id peer_out
		peer_id=$(new_id)
		peer_out=$(timeout 20 runc --root "$ROOT/runc" create --bundle "$B" "$peer_id" </dev/null 2>&1)
		assert_fails "peer: runc create of the same bundle fails too" $?
		diag "runc said: $peer_out"
		timeout 20 runc --root "$ROOT/runc" delete -f "$peer_id" >/dev/null 2>&1
	fi
	create_with_caps 'k["bounding"].remove("CAP_SYS_RESOURCE")'
	assert_caps_refused "CAP_SYS_RESOURCE in permitted and effective" permitted
	create_with_caps 'k["permitted"].remove("CAP_SYS_RESOURCE"); k["effective"].remove("CAP_SYS_RESOURCE"); k["ambient"]=["CAP_SYS_RESOURCE"]'
	assert_caps_refused "CAP_SYS_RESOURCE in ambient only" ambient
	create_with_caps 'k["ambient"]=[]; k["inheritable"]=["CAP_SYS_RESOURCE"]'
	assert_caps_refused "CAP_SYS_RESOURCE in inheritable only" inheritable
	create_with_caps 'k["inheritable"]=[]; k["bounding"].append("CAP_SYS_RESOURCE")'
	assert_caps_refused "CAP_SYS_RESOURCE in bounding only" bounding

	# Sets that contradict each other: refused at create, named.
	create_with_caps 'k["bounding"].remove("CAP_SYS_RESOURCE"); k["effective"].append("CAP_NET_ADMIN"); k["permitted"]=[x for x in k["permitted"] if x != "CAP_NET_ADMIN"]'
	assert_fails "effective CAP_NET_ADMIN not permitted: create fails" "$RC"
	assert_contains "... naming it" "$ERR" "process.capabilities.effective: CAP_NET_ADMIN is not in process.capabilities.permitted"
	create_with_caps 'k["effective"].remove("CAP_NET_ADMIN"); k["bounding"]=[x for x in k["bounding"] if x != "CAP_NET_ADMIN"]; k["inheritable"]=["CAP_NET_ADMIN"]'
	assert_fails "inheritable CAP_NET_ADMIN outside the bounding list: create fails" "$RC"
	assert_contains "... naming it" "$ERR" "process.capabilities.inheritable: CAP_NET_ADMIN is not in process.capabilities.bounding"

	# Controls: a capability the runtime holds is granted; CAP_SYS_RESOURCE
	# in a new user namespace (which gets every capability back) too.
	create_with_caps 'k["inheritable"]=[]; k["bounding"].append("CAP_NET_ADMIN"); k["permitted"].append("CAP_NET_ADMIN"); k["effective"].append("CAP_NET_ADMIN")'
	assert_rc "control: CAP_NET_ADMIN (held) is granted at create" 0 "$RC" || diag "$ERR"
	assert_true "control: ... and the process ran" test -e "$B/mark/ran"
	rm -f "$B/mark/ran" "$B/mark/caps"
	chown -R -h 100000:100000 "$B/rootfs" "$B/mark"
	BUNDLE=$B spec_ns user
	BUNDLE=$B spec_set '
c["linux"]["uidMappings"] = [{"containerID": 0, "hostID": 100000, "size": 65536}]
c["linux"]["gidMappings"] = [{"containerID": 0, "hostID": 100000, "size": 65536}]
c["mounts"] = [m for m in c["mounts"] if m["destination"] != "/sys/fs/cgroup"]'
	create_with_caps 'for s in ("bounding","permitted","effective"): k[s].append("CAP_SYS_RESOURCE")'
	assert_rc "control: CAP_SYS_RESOURCE in a new user namespace is granted" 0 "$RC" || diag "$ERR"
	assert_true "control: ... the process ran" test -e "$B/mark/ran"
	local eff
	eff=$(awk '{ print $2 }' "$B/mark/caps" 2>/dev/null)
	assert_true "control: ... holding CAP_SYS_RESOURCE (CapEff $eff)" \
		test -n "$eff" -a "$(((0x${eff:-0} >> CAP_SYS_RESOURCE_BIT) & 1))" = 1
}

# husk exec with a process asking for a capability we cannot grant: one
# line naming it, as create gives.
t_exec_caps_outside_bounding() {
	local bnd out
	bnd=$(awk '/^CapBnd:/ { print $2 }' /proc/self/status)
	if (((0x$bnd >> CAP_SYS_RESOURCE_BIT) & 1)); then
		skip "exec caps outside the bounding set" "this runtime holds CAP_SYS_RESOURCE"
		return
	fi
	BUNDLE=$(new_bundle)
	spec_args sleep 100
	create_ctr
	start_ctr "$CID"
	"$PY" - "$BUNDLE/config.json" "$WORK/process.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["process"]
p["args"] = ["true"]
for s in ("bounding", "permitted", "effective"):
    p["capabilities"][s].append("CAP_SYS_RESOURCE")
json.dump(p, open(sys.argv[2], "w"))
PY
	out=$(rt exec --process "$WORK/process.json" "$CID" 2>&1)
	assert_fails "exec asking CAP_SYS_RESOURCE fails" $?
	assert_contains "... naming it" "$out" "process.capabilities.bounding: CAP_SYS_RESOURCE is not in the runtime's bounding set"
	assert_eq "control: the container still runs" running "$(state_of "$CID")"
}

# ---------------------------------------------------------------- ps

t_ps_no_shell() {
	local out rc pid
	start_sleeper
	pid=$(container_pid "$CID")
	out=$(rt ps "$CID" -o "pid'; touch $WORK/pwned; '" 2>&1)
	rc=$?
	assert_true "ps ARGS with quotes runs no shell command" test ! -e "$WORK/pwned"
	assert_fails "... ps's failure is the exit status" "$rc"
	out=$(rt ps "$CID" 2>&1)
	assert_match "control: ps lists the container's process under a PID header" "$out" "PID"
	assert_match "control: ... and its pid" "$out" "[[:space:]]$pid[[:space:]]"
	out=$(rt ps "$CID" -o pid,comm 2>&1)
	assert_match "control: ps -o pid,comm passes both words to ps" "$out" "^ *PID +COMMAND"
	assert_match "control: ... and keeps the container's line" "$out" "^ *$pid +sleep$"
	assert_eq "control: ps --format json prints the pid list" "[$pid]" "$(rt ps --format json "$CID" 2>&1)"
}

setup
for t in ${ONLY:-t_container_run_seccomp t_exec_cwd_outside t_exec_not_dumpable t_sysctl_namespaces t_ps_no_shell t_caps_outside_bounding t_exec_caps_outside_bounding}; do
	run_test "$t"
done
finish
