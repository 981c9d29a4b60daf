#!/usr/bin/env bash
# User namespaces joined by path and idmapped mounts (mounts[].uidMappings):
# what a CRI server asks of the runtime for a pod with hostUsers: false.
# Run alone: RUNTIME=/usr/sbin/crun ./test/integration/test_userns.sh
. "$(dirname "$0")/lib.sh"
require_runtime

HOLDER_PID=
# A user namespace 0 -> 65536 x 65536, held by a sleeping process, as
# huskd's pod pin holds one.
start_holder() {
	unshare --user sleep 600 &
	HOLDER_PID=$!
	defer "kill -9 $HOLDER_PID 2>/dev/null"
	local i
	for i in $(seq 1 100); do
		if [ "$(readlink /proc/$HOLDER_PID/ns/user 2>/dev/null)" != "$(readlink /proc/self/ns/user)" ]; then
			echo "0 65536 65536" >/proc/$HOLDER_PID/uid_map && echo "0 65536 65536" >/proc/$HOLDER_PID/gid_map
			return
		fi
		sleep 0.05
	done
	return 1
}

# Its rootfs owned by the mapped root, as an idmapped one appears.
joined_bundle() {
	BUNDLE=$(new_bundle)
	chown -R -h 65536:65536 "$BUNDLE/rootfs"
	spec_ns user "/proc/$HOLDER_PID/ns/user"
	spec_ns cgroup
}

# The container joins the holder's user namespace: its ids are mapped,
# its processes run as host uid 65536, and the namespaces it creates are
# owned by that user namespace (root inside may mount a tmpfs).
t_join_userns() {
	start_holder || { not_ok "join userns: holder started"; return; }
	joined_bundle
	spec_set 'c["process"]["capabilities"]["bounding"].append("CAP_SYS_ADMIN"); c["process"]["capabilities"]["effective"].append("CAP_SYS_ADMIN"); c["process"]["capabilities"]["permitted"].append("CAP_SYS_ADMIN")'
	spec_args sh -c 'readlink /proc/self/ns/user; awk "{print \$1, \$2, \$3}" /proc/self/uid_map; id -u; mkdir -p /mnt/t && mount -t tmpfs t /mnt/t && echo tmpfs-ok; sleep 2 & wait'
	create_ctr
	assert_rc "join userns: create" 0 "$RC" || { diag "$ERR"; return; }
	local pid
	pid=$(container_pid "$CID")
	start_ctr "$CID"
	sleep 0.5
	assert_eq "join userns: the init runs as host uid 65536" 65536 "$(awk '/^Uid:/ { print $2 }' /proc/$pid/status)"
	wait_status "$CID" stopped 10
	local out
	out=$(cat "$WORK/$CID.out")
	assert_eq "join userns: the holder's user namespace" "$(readlink /proc/$HOLDER_PID/ns/user)" "$(printf '%s\n' "$out" | sed -n 1p)"
	assert_eq "join userns: uid_map inside" "0 65536 65536" "$(printf '%s\n' "$out" | sed -n 2p)"
	assert_eq "join userns: root inside" 0 "$(printf '%s\n' "$out" | sed -n 3p)"
	assert_eq "join userns: mounting a tmpfs works inside (the mount ns is the userns's)" tmpfs-ok \
		"$(printf '%s\n' "$out" | sed -n 4p)"
	rt delete "$CID" >/dev/null 2>&1
}

# Capabilities stay inside the namespace: no host sysctl, no module.
t_caps_confined() {
	local cad
	cad=$(cat /proc/sys/kernel/ctrl-alt-del)
	start_holder || { not_ok "caps confined: holder started"; return; }
	joined_bundle
	spec_set 'c["process"]["capabilities"] = {k: ["CAP_SYS_ADMIN", "CAP_SYS_MODULE", "CAP_NET_ADMIN", "CAP_DAC_OVERRIDE"] for k in ("bounding", "effective", "permitted")}'
	spec_del_ns network
	spec_set 'c["linux"]["readonlyPaths"] = [p for p in c["linux"].get("readonlyPaths", []) if p != "/proc/sys"]'
	spec_args sh -c 'echo $((1 - A)) > /proc/sys/kernel/ctrl-alt-del && echo sysctl-written; mount -t tmpfs t /tmp && echo tmpfs-ok; true'
	spec_set 'c["process"]["args"][2] = c["process"]["args"][2].replace("A", A[0])' "$cad"
	run_ctr
	assert_rc "caps confined: runs" 0 "$RC" || { diag "$ERR"; return; }
	assert_not_contains "caps confined: a host sysctl is not writable, even with CAP_SYS_ADMIN" "$OUT" sysctl-written
	assert_eq "caps confined: the host's ctrl-alt-del is unchanged" "$cad" "$(cat /proc/sys/kernel/ctrl-alt-del)"
	assert_contains "caps confined: CAP_SYS_ADMIN of the namespace mounts a tmpfs" "$OUT" tmpfs-ok
}

# An idmapped bind: host files owned by 0 and 1000 appear as 0 and 1000
# inside a container whose root is host 65536, and a file root creates
# lands as uid 0 on the host's disk: no chown of the host's files.
t_idmapped_mount() {
	local vol
	start_holder || { not_ok "idmap: holder started"; return; }
	vol=$(new_tmpdir vol)
	echo data >"$vol/root-file"
	echo data >"$vol/user-file"
	chown 1000:1000 "$vol/user-file"
	joined_bundle
	spec_set 'c["mounts"].append({"destination": "/vol", "type": "bind", "source": A[0], "options": ["rbind", "rw"],
  "uidMappings": [{"containerID": 0, "hostID": 65536, "size": 65536}],
  "gidMappings": [{"containerID": 0, "hostID": 65536, "size": 65536}]})' "$vol"
	spec_args sh -c 'stat -c "%u %g" /vol/root-file /vol/user-file; echo new > /vol/created; stat -c %u /vol/created'
	run_ctr
	assert_rc "idmap: container runs" 0 "$RC" || { diag "$ERR"; return; }
	assert_eq "idmap: a host root file is root's inside, a uid 1000 file uid 1000's" "0 0|1000 1000|0" \
		"$(printf '%s\n' "$OUT" | tr '\n' '|' | sed 's/|$//')"
	assert_eq "idmap: a file root creates is uid 0 on the host" "0 0" "$(stat -c '%u %g' "$vol/created")"
	assert_eq "idmap: the host's files keep their owners" "0 1000" \
		"$(stat -c %u "$vol/root-file" "$vol/user-file" | tr '\n' ' ' | sed 's/ $//')"
	assert_eq "idmap: nothing of the mount stays on the host" "" "$(grep " $vol " /proc/self/mountinfo)"
}

# A source whose filesystem cannot be idmapped: a clear error naming the
# path and the filesystem, and nothing left behind.
t_idmap_unsupported() {
	start_holder || { not_ok "idmap unsupported: holder started"; return; }
	joined_bundle
	spec_set 'c["mounts"].append({"destination": "/p", "type": "bind", "source": "/proc/sys", "options": ["rbind"],
  "uidMappings": [{"containerID": 0, "hostID": 65536, "size": 65536}],
  "gidMappings": [{"containerID": 0, "hostID": 65536, "size": 65536}]})'
	run_ctr
	assert_fails "idmap unsupported: refused" "$RC"
	assert_contains "idmap unsupported: the error names the source and the filesystem" "$ERR" \
		'idmapped mount of `/proc/sys`: the kernel does not support idmapped mounts on this proc filesystem'
	assert_eq "idmap unsupported: no state left" "" "$(ls "$ROOT" 2>/dev/null | grep -x "$CID")"
}

# In a user namespace the init cannot search a directory only host root
# may (the pod's pins and files under huskd's state): create opens the
# namespaces and clones the bind sources for it.
t_sources_out_of_reach() {
	local hidden uts_pid i
	start_holder || { not_ok "hidden sources: holder started"; return; }
	hidden=$(new_tmpdir hidden)
	chmod 0700 "$hidden"
	mkdir "$hidden/files"
	echo pod-file >"$hidden/files/hosts"
	chmod 0644 "$hidden/files/hosts"
	# A uts namespace owned by the holder's user namespace, pinned in there.
	nsenter -t "$HOLDER_PID" -U unshare --uts sleep 600 &
	uts_pid=$!
	defer "kill -9 $uts_pid 2>/dev/null"
	for i in $(seq 1 100); do
		[ "$(readlink /proc/$uts_pid/ns/uts 2>/dev/null)" != "$(readlink /proc/self/ns/uts)" ] && break
		sleep 0.05
	done
	touch "$hidden/uts"
	mount --bind "/proc/$uts_pid/ns/uts" "$hidden/uts"
	defer "umount $hidden/uts 2>/dev/null"
	joined_bundle
	spec_ns uts "$hidden/uts"
	spec_del_ns network
	spec_mount /etc/hosts bind "$hidden/files/hosts" rbind ro
	spec_args sh -c 'cat /etc/hosts; readlink /proc/self/ns/uts'
	run_ctr
	assert_rc "hidden sources: container runs" 0 "$RC" || { diag "$ERR"; return; }
	assert_eq "hidden sources: a bind source under a 0700 host dir is mounted" pod-file \
		"$(printf '%s\n' "$OUT" | sed -n 1p)"
	assert_eq "hidden sources: the uts namespace pinned under it is joined" "$(readlink /proc/$uts_pid/ns/uts)" \
		"$(printf '%s\n' "$OUT" | sed -n 2p)"
}

t_idmap_bad_config() {
	BUNDLE=$(new_bundle)
	spec_set 'c["mounts"].append({"destination": "/v", "type": "bind", "source": "/tmp", "options": ["rbind"],
  "uidMappings": [{"containerID": 0, "hostID": 65536, "size": 65536}]})'
	run_ctr
	assert_fails "idmap without gidMappings: refused" "$RC"
	assert_contains "idmap without gidMappings: says so" "$ERR" "gidMappings: required with uidMappings"
	BUNDLE=$(new_bundle)
	spec_set 'c["mounts"].append({"destination": "/v", "type": "tmpfs", "source": "tmpfs",
  "uidMappings": [{"containerID": 0, "hostID": 65536, "size": 65536}],
  "gidMappings": [{"containerID": 0, "hostID": 65536, "size": 65536}]})'
	run_ctr
	assert_fails "idmap on a tmpfs mount: refused" "$RC"
	assert_contains "idmap on a tmpfs mount: says so" "$ERR" "only a bind mount can be idmapped"
}

t_features() {
	local out
	out=$("$RUNTIME" features)
	assert_eq "features: mountExtensions.idmap.enabled" True \
		"$(printf '%s' "$out" | json_get linux.mountExtensions.idmap.enabled)"
	assert_contains "features: the user namespace" "$(printf '%s' "$out" | json_get linux.namespaces)" '"user"'
}

for t in t_join_userns t_caps_confined t_idmapped_mount t_idmap_unsupported t_sources_out_of_reach \
	t_idmap_bad_config t_features; do
	run_test "$t"
done
finish
