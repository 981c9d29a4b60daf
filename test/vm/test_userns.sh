# User namespaces on the VM's kernel (Debian's 6.1 cloud kernel): joining
# one by path works everywhere; idmapped mounts depend on the kernel and
# the filesystem (tmpfs only from 6.3), so `husk features` must say what
# this kernel does, and an idmapped mount it cannot make is a clear error
# naming the path and the filesystem, with nothing left behind.  Runs in
# the VM (see test/vm/lib.sh).
. /vm/tests/lib.sh

HOLDER=
cleanup() {
	[ -n "$HOLDER" ] && kill -9 "$HOLDER" 2>/dev/null
	for id in uj ui; do h delete --force $id >/dev/null 2>&1; done
}
trap cleanup EXIT

# A user namespace 0 -> 65536 x 65536 held by a sleeper.
start_holder() {
	local i
	unshare -U sleep 300 &
	HOLDER=$!
	for i in $(seq 1 100); do
		if [ "$(readlink /proc/$HOLDER/ns/user)" != "$(readlink /proc/self/ns/user)" ]; then
			echo "0 65536 65536" >/proc/$HOLDER/uid_map && echo "0 65536 65536" >/proc/$HOLDER/gid_map
			return
		fi
		sleep 0.05
	done
	return 1
}

# The bundle (whose template has a cgroup namespace) joins the holder's
# user namespace; MOUNT, when set, is one more mounts[] entry.
userns_bundle() { # ARGS...
	local b
	b=$(new_bundle "$@")
	sed -i -e "s|\"namespaces\":\[|\"namespaces\":[{\"type\":\"user\",\"path\":\"/proc/$HOLDER/ns/user\"},|" \
		"$b/config.json"
	[ -n "${MOUNT:-}" ] && sed -i -e "s|\"mounts\":\[|\"mounts\":[$MOUNT,|" "$b/config.json"
	echo "$b"
}

t_join_userns() {
	local b
	b=$(userns_bundle sh -c 'cat /proc/self/uid_map; id -u')
	run_bundle "$b" uj
	assert_eq "vm userns: a container joins a user namespace by path" 0 "$RC" "$OUT"
	assert_eq "vm userns: its uid_map is the namespace's, root inside" "0 65536 65536 0" \
		"$(printf '%s\n' "$OUT" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//')"
}

t_idmap_as_features_say() {
	local b enabled fs_root fs_run
	enabled=$(h features | tr -d ' \n' | sed -n 's/.*"idmap":{"enabled":\([a-z]*\)}.*/\1/p')
	fs_root=$(stat -f -c %T /)
	fs_run=$(stat -f -c %T /run)
	diag "kernel $(uname -r): / is $fs_root, /run is $fs_run; husk features: idmap enabled=$enabled"
	mkdir -p /run/idsrc
	echo data >/run/idsrc/f
	b=$(MOUNT='{"destination":"/root","type":"bind","source":"/run/idsrc","options":["rbind"],"uidMappings":[{"containerID":0,"hostID":65536,"size":65536}],"gidMappings":[{"containerID":0,"hostID":65536,"size":65536}]}' \
		userns_bundle stat -c %u /root/f)
	run_bundle "$b" ui
	if [ "$RC" -eq 0 ]; then
		assert_eq "vm idmap: the idmapped bind of /run ($fs_run) shows its root file as root's" 0 "$OUT"
		[ "$fs_root" != "$fs_run" ] || assert_eq "vm idmap: features agrees (same filesystem as /)" true "$enabled"
	else
		assert_contains "vm idmap: refused, naming the path and the filesystem" "$OUT" \
			"idmapped mount of \`/run/idsrc\`: the kernel does not support idmapped mounts on this"
		assert_gone "vm idmap: nothing left of the refused container" "$STATE/ui"
		[ "$fs_root" != "$fs_run" ] || assert_eq "vm idmap: features agrees (same filesystem as /)" false "$enabled"
	fi
}

start_holder || not_ok "vm userns: a user namespace to join"
t_join_userns
t_idmap_as_features_say
