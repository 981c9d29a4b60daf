#!/usr/bin/env bash
# Namespaces: new ones of every kind differ from the host's, a path joins an
# existing one, user namespaces map ids, time namespaces shift clocks.
# Run alone: RUNTIME=/usr/sbin/runc ./test/integration/test_namespaces.sh
. "$(dirname "$0")/lib.sh"
require_runtime

t_pid_ns() {
	BUNDLE=$(new_bundle)
	spec_args sh -c 'echo $$; ps -o pid,comm; true'
	run_ctr
	assert_rc "pid ns: container runs" 0 "$RC" || return
	assert_eq "pid ns: the process is pid 1" 1 "$(printf '%s\n' "$OUT" | head -n 1)"
	# Past ps's header: sh as pid 1 and ps itself, nothing from the host.
	assert_eq "pid ns: only the container's processes are visible" "1 sh|ps" \
		"$(printf '%s\n' "$OUT" | sed -n '3,$p' | awk '{ print ($1 == 1 ? $1 " " $2 : $2) }' | tr '\n' '|' | sed 's/|$//')"
}

t_uts_ns() {
	BUNDLE=$(new_bundle)
	spec_set 'c["hostname"]="husk-uts-test"'
	spec_args hostname
	run_ctr
	assert_eq "uts ns: hostname comes from config.json" husk-uts-test "$OUT"
	assert_eq "uts ns: the host's hostname is unchanged" "$(cat /proc/sys/kernel/hostname)" "$(hostname)"
}

# Every namespace type the config asks for is new: its inode differs from
# ours (the runtime was started from our namespaces).
t_new_namespaces() {
	local types="ipc net mnt cgroup pid uts" ty inside line
	BUNDLE=$(new_bundle)
	spec_ns cgroup
	spec_args sh -c 'for t in '"$types"'; do echo "$t $(readlink /proc/self/ns/$t)"; done'
	run_ctr
	assert_rc "new namespaces: container runs" 0 "$RC" || return
	for ty in $types; do
		line=$(printf '%s\n' "$OUT" | grep "^$ty ")
		inside=${line#* }
		if [ -n "$inside" ] && [ "$inside" != "$(host_ns "$ty")" ]; then
			ok "$ty namespace differs from the host's ($inside)"
		else
			not_ok "$ty namespace differs from the host's" "inside: ${inside:-none}" "host: $(host_ns "$ty")"
		fi
	done
}

# A network namespace of the container's own has lo up (as runc and crun
# do), so 127.0.0.1 answers; also in a new user namespace, which owns it.
t_loopback_up() {
	local b
	BUNDLE=$(new_bundle)
	spec_args ip -o link show lo
	run_ctr
	assert_rc "new netns: container runs" 0 "$RC" || return
	assert_contains "new netns: lo is UP" "$OUT" "<LOOPBACK,UP"
	b=$(new_bundle)
	chown -R -h 100000:100000 "$b/rootfs"
	BUNDLE=$b spec_ns user
	BUNDLE=$b spec_set '
c["linux"]["uidMappings"] = [{"containerID": 0, "hostID": 100000, "size": 65536}]
c["linux"]["gidMappings"] = [{"containerID": 0, "hostID": 100000, "size": 65536}]
c["mounts"] = [m for m in c["mounts"] if m["destination"] != "/sys/fs/cgroup"]'
	BUNDLE=$b spec_args sh -c 'ip -o link show lo'
	BUNDLE=$b run_ctr
	assert_contains "new netns in a new user namespace: lo is UP" "$OUT" "<LOOPBACK,UP"
}

# Namespaces not listed are shared with the host.
t_shared_namespaces() {
	local ty
	BUNDLE=$(new_bundle)
	spec_del_ns network
	spec_del_ns ipc
	spec_args sh -c 'readlink /proc/self/ns/net; readlink /proc/self/ns/ipc'
	run_ctr
	assert_eq "unlisted net and ipc namespaces are the host's" \
		"$(host_ns net) $(host_ns ipc)" "$(printf '%s' "$OUT" | tr '\n' ' ' | sed 's/ $//')"
}

t_join_netns() {
	local name inode
	name=husk-it-$$-$RANDOM
	if ! ip netns add "$name" 2>"$WORK/netns.err"; then
		not_ok "join netns: ip netns add" "$(cat "$WORK/netns.err")"
		return
	fi
	defer "ip netns delete $name"
	# /var/run/netns/NAME is an nsfs bind mount: its inode is the namespace's.
	inode=$(stat -L -c %i "/var/run/netns/$name")
	BUNDLE=$(new_bundle)
	spec_ns network "/var/run/netns/$name"
	spec_args readlink /proc/self/ns/net
	run_ctr
	assert_rc "join netns: container runs" 0 "$RC" || return
	assert_eq "join netns by path: same namespace as /var/run/netns/$name" "net:[$inode]" "$OUT"
	assert_eq "join netns: matches ip netns exec's view" \
		"$(ip netns exec "$name" readlink /proc/self/ns/net)" "$OUT"
}

t_join_ns_bad_path() {
	BUNDLE=$(new_bundle)
	spec_ns network /var/run/netns/husk-it-does-not-exist-$$
	run_ctr
	assert_fails "joining a namespace path that does not exist fails" "$RC"
	spec_ns network /etc/hostname
	run_ctr
	assert_fails "joining a path that is not a namespace fails" "$RC"
}

# Sharing the namespaces of a running container, as a pod's containers do.
t_join_other_container() {
	local b1 pid out
	b1=$(new_bundle)
	BUNDLE=$b1 spec_args sleep 1000
	BUNDLE=$b1 spec_set 'c["hostname"]="pod-host"'
	BUNDLE=$b1 create_ctr
	start_ctr "$CID"
	pid=$(container_pid "$CID")
	BUNDLE=$(new_bundle)
	spec_ns network "/proc/$pid/ns/net"
	spec_ns ipc "/proc/$pid/ns/ipc"
	spec_ns uts "/proc/$pid/ns/uts"
	spec_set 'c.pop("hostname", None)'
	spec_args sh -c 'readlink /proc/self/ns/net; readlink /proc/self/ns/ipc; hostname'
	run_ctr
	out=$(printf '%s' "$OUT" | tr '\n' ' ' | sed 's/ $//')
	assert_eq "join another container's net, ipc and uts namespaces" \
		"$(readlink "/proc/$pid/ns/net") $(readlink "/proc/$pid/ns/ipc") pod-host" "$out"
}

t_user_ns() {
	local b
	b=$(new_bundle)
	# Files owned by the mapped root, as an image unpacked for this mapping is.
	chown -R -h 100000:100000 "$b/rootfs"
	BUNDLE=$b spec_ns user
	BUNDLE=$b spec_set '
c["linux"]["uidMappings"] = [{"containerID": 0, "hostID": 100000, "size": 65536}]
c["linux"]["gidMappings"] = [{"containerID": 0, "hostID": 100000, "size": 65536}]
# A cgroup mount needs a cgroup namespace owned by the new user namespace.
c["mounts"] = [m for m in c["mounts"] if m["destination"] != "/sys/fs/cgroup"]'
	BUNDLE=$b spec_args sh -c 'cat /proc/self/uid_map; cat /proc/self/gid_map; id -u; id -g; readlink /proc/self/ns/user; stat -c %u /bin/busybox; touch /tmp/owned; echo ok'
	BUNDLE=$b run_ctr
	assert_rc "user ns: container runs" 0 "$RC" || return
	local lines
	lines=$(printf '%s\n' "$OUT" | awk '{$1=$1; print}')
	assert_eq "user ns: uid_map matches the config" "0 100000 65536" "$(printf '%s\n' "$lines" | sed -n 1p)"
	assert_eq "user ns: gid_map matches the config" "0 100000 65536" "$(printf '%s\n' "$lines" | sed -n 2p)"
	assert_eq "user ns: id -u is 0 inside" 0 "$(printf '%s\n' "$lines" | sed -n 3p)"
	assert_eq "user ns: id -g is 0 inside" 0 "$(printf '%s\n' "$lines" | sed -n 4p)"
	local uns
	uns=$(printf '%s\n' "$lines" | sed -n 5p)
	if [ -n "$uns" ] && [ "$uns" != "$(host_ns user)" ]; then
		ok "user ns: a new user namespace"
	else
		not_ok "user ns: a new user namespace" "inside: $uns host: $(host_ns user)"
	fi
	assert_eq "user ns: files owned by host uid 100000 are owned by root inside" 0 "$(printf '%s\n' "$lines" | sed -n 6p)"
	assert_eq "user ns: a file created inside is owned by host uid 100000" 100000 "$(stat -c %u "$b/rootfs/tmp/owned" 2>/dev/null)"
}

t_time_ns() {
	if [ ! -e /proc/self/ns/time ]; then
		skip "time ns" "kernel has no time namespaces (/proc/self/ns/time missing)"
		return
	fi
	local shift=864000 host_up inside_up diff
	BUNDLE=$(new_bundle)
	spec_ns time
	spec_set 'c["linux"]["timeOffsets"] = {"boottime": {"secs": int(A[0]), "nanosecs": 0}, "monotonic": {"secs": int(A[0]), "nanosecs": 0}}' "$shift"
	spec_args sh -c 'cat /proc/uptime; cat /proc/self/timens_offsets; readlink /proc/self/ns/time'
	host_up=$(cut -d' ' -f1 /proc/uptime)
	run_ctr
	assert_rc "time ns: container runs" 0 "$RC" || return
	inside_up=$(printf '%s\n' "$OUT" | sed -n 1p | cut -d' ' -f1)
	diff=$(awk -v a="$inside_up" -v b="$host_up" 'BEGIN { printf "%d", a - b }')
	if [ "$diff" -ge $((shift - 10)) ] && [ "$diff" -le $((shift + 10)) ]; then
		ok "time ns: boottime offset shows in /proc/uptime (+${diff}s)"
	else
		not_ok "time ns: boottime offset shows in /proc/uptime" "inside: $inside_up host: $host_up"
	fi
	local offsets
	offsets=$(printf '%s\n' "$OUT" | grep -E '^(monotonic|boottime)' | awk '{print $1, $2}' | sort | tr '\n' ' ')
	assert_eq "time ns: timens_offsets hold both offsets" "boottime $shift monotonic $shift " "$offsets"
	local tns
	tns=$(printf '%s\n' "$OUT" | tail -n 1)
	if [ -n "$tns" ] && [ "$tns" != "$(host_ns time)" ]; then
		ok "time ns: a new time namespace"
	else
		not_ok "time ns: a new time namespace" "inside: $tns"
	fi
}

for t in t_pid_ns t_uts_ns t_new_namespaces t_shared_namespaces t_join_netns \
	t_join_ns_bad_path t_join_other_container t_user_ns t_time_ns t_loopback_up; do
	run_test "$t"
done
finish
