#!/usr/bin/env bash
# Mounts and the root filesystem: tmpfs options, binds (dir, file, symlink
# source, ro, rro), special filesystems, propagation, readonly root, masked
# and read-only paths, /dev, linux.devices, and symlinks that try to send a
# mount to the host.
# Run alone: RUNTIME=/usr/sbin/runc ./test/integration/test_mounts.sh
. "$(dirname "$0")/lib.sh"
require_runtime

# Prints "MOUNTPOINT FSTYPE MOUNT-OPTIONS SUPER-OPTIONS OPTIONAL-FIELDS" per
# mount (run inside the container by busybox awk).
MOUNTS_AWK='{ opt=""; for (i = 7; $i != "-"; i++) opt = opt $i ","; print $5, $(i+1), $6, $(i+3), opt }'

mount_line() { # MOUNTPOINT (reads the MOUNTS_AWK listing in $OUT)
	printf '%s\n' "$OUT" | awk -v mp="$1" '$1 == mp' | tail -n 1
}

t_tmpfs_options() {
	BUNDLE=$(new_bundle)
	spec_mount /mnt/t tmpfs tmpfs size=4m mode=700 noexec nosuid
	spec_args sh -c 'awk '"'$MOUNTS_AWK'"' /proc/self/mountinfo
echo "mode $(stat -c %a /mnt/t)"
printf "#!/bin/sh\necho ran\n" >/mnt/t/s; chmod +x /mnt/t/s; cp /mnt/t/s /tmp/s
echo "noexec: $(/mnt/t/s 2>&1)"; echo "control: $(/tmp/s 2>&1)"'
	run_ctr
	assert_rc "tmpfs: container runs" 0 "$RC" || return
	local line
	line=$(mount_line /mnt/t)
	assert_match "tmpfs: mounted with type tmpfs" "$line" "^/mnt/t tmpfs "
	assert_match "tmpfs: size=4m becomes size=4096k" "$line" "size=4096k"
	assert_match "tmpfs: mode=700 is passed" "$line" "mode=700"
	assert_match "tmpfs: noexec and nosuid are mount flags" "$line" "^[^ ]+ [^ ]+ [^ ]*(nosuid[^ ]*noexec|noexec[^ ]*nosuid)"
	assert_eq "tmpfs: the mount point has mode 700" "mode 700" "$(printf '%s\n' "$OUT" | grep '^mode ')"
	assert_contains "tmpfs: noexec refuses to execute a copied script" "$(printf '%s\n' "$OUT" | grep '^noexec:')" "Permission denied"
	assert_eq "tmpfs: the same script runs from the rootfs" "control: ran" "$(printf '%s\n' "$OUT" | grep '^control:')"
}

t_bind_dir_file_symlink() {
	local host b
	host=$(new_tmpdir host)
	echo dir-marker >"$host/marker"
	echo file-marker >"$host/file.txt"
	ln -s "$host" "$host-link"
	defer "rm -f '$host-link'"
	b=$(new_bundle)
	BUNDLE=$b spec_mount /mnt/d bind "$host" bind
	BUNDLE=$b spec_mount /etc/bound.txt bind "$host/file.txt" bind
	BUNDLE=$b spec_mount /mnt/l bind "$host-link" rbind
	BUNDLE=$b spec_args sh -c 'cat /mnt/d/marker; cat /etc/bound.txt; cat /mnt/l/marker; echo from-inside >/mnt/d/written; [ -L /mnt/l ] && echo is-a-link || echo is-a-dir'
	BUNDLE=$b run_ctr
	assert_rc "bind: container runs" 0 "$RC" || return
	assert_eq "bind of a directory" dir-marker "$(printf '%s\n' "$OUT" | sed -n 1p)"
	assert_eq "bind of a file onto a path missing in the image" file-marker "$(printf '%s\n' "$OUT" | sed -n 2p)"
	assert_eq "bind of a symlink source binds its target" dir-marker "$(printf '%s\n' "$OUT" | sed -n 3p)"
	assert_eq "bind: the destination is a real mount, not a symlink" is-a-dir "$(printf '%s\n' "$OUT" | sed -n 4p)"
	assert_eq "bind is writable by default: the host sees the write" from-inside "$(cat "$host/written" 2>/dev/null)"
}

t_bind_ro() {
	local host
	host=$(new_tmpdir host)
	echo ro-marker >"$host/marker"
	BUNDLE=$(new_bundle)
	spec_mount /mnt/ro bind "$host" bind ro
	spec_args sh -c 'cat /mnt/ro/marker; touch /mnt/ro/x 2>&1; echo "rc=$?"'
	run_ctr
	assert_eq "ro bind: readable" ro-marker "$(printf '%s\n' "$OUT" | sed -n 1p)"
	assert_contains "ro bind: write fails with EROFS" "$OUT" "Read-only file system"
	assert_true "ro bind: nothing was written on the host" test ! -e "$host/x"
}

t_bind_rro() {
	local host
	host=$(new_tmpdir rro)
	mkdir "$host/sub"
	if ! mount -t tmpfs -o size=1m husk-it-rro "$host/sub"; then
		not_ok "rro: mount a host submount"
		return
	fi
	BUNDLE=$(new_bundle)
	spec_mount /mnt/rro bind "$host" rbind rro
	spec_args sh -c 'touch /mnt/rro/top 2>&1; touch /mnt/rro/sub/deep 2>&1; echo done'
	run_ctr
	assert_rc "rro: container runs" 0 "$RC" || return
	assert_true "rro: the top mount is read-only" test ! -e "$host/top"
	assert_true "rro: the submount is read-only too" test ! -e "$host/sub/deep"
	assert_eq "rro: both writes fail with EROFS" 2 "$(printf '%s\n' "$OUT" | grep -c 'Read-only file system')"
}

t_special_filesystems() {
	local want mp ty line
	BUNDLE=$(new_bundle)
	spec_set '
c["mounts"] = [m for m in c["mounts"] if m["destination"] != "/sys/fs/cgroup"]
c["mounts"].append({"destination": "/sys/fs/cgroup", "type": "cgroup2", "source": "cgroup2", "options": ["nosuid", "noexec", "nodev", "ro"]})'
	spec_ns cgroup
	spec_args awk "$MOUNTS_AWK" /proc/self/mountinfo
	run_ctr
	assert_rc "special filesystems: container runs" 0 "$RC" || return
	for want in /proc:proc /sys:sysfs /dev:tmpfs /dev/pts:devpts /dev/shm:tmpfs /dev/mqueue:mqueue /sys/fs/cgroup:cgroup2; do
		mp=${want%%:*}
		ty=${want#*:}
		line=$(mount_line "$mp")
		assert_match "$ty is mounted on $mp" "$line" "^$mp $ty "
	done
	assert_match "sysfs is read-only" "$(mount_line /sys)" "^/sys sysfs ro"
}

t_propagation() {
	local shared b pid out
	shared=$(new_tmpdir shared)
	if ! mount -t tmpfs -o size=1m husk-it-shared "$shared" || ! mount --make-shared "$shared"; then
		not_ok "propagation: make a shared host mount"
		return
	fi
	b=$(new_bundle)
	# rslave root propagation keeps host mounts as slaves, so a bind of
	# the shared host mount has a master to follow.
	BUNDLE=$b spec_set 'c["linux"]["rootfsPropagation"] = "rslave"'
	BUNDLE=$b spec_mount /mnt/slave bind "$shared" rbind rslave
	BUNDLE=$b spec_mount /mnt/shr tmpfs tmpfs size=1m rshared
	BUNDLE=$b spec_mount /mnt/priv bind "$shared" rbind rprivate
	BUNDLE=$b spec_args sh -c 'touch /started; sleep 1000'
	BUNDLE=$b create_ctr
	assert_rc "propagation: create succeeds" 0 "$RC" || return
	start_ctr "$CID"
	wait_file "$b/rootfs/started" 5
	OUT=$(rt exec "$CID" awk "$MOUNTS_AWK" /proc/self/mountinfo 2>&1)
	assert_match "rslave mount shows master:N in mountinfo" "$(mount_line /mnt/slave)" "master:[0-9]+"
	assert_match "rshared mount shows shared:N in mountinfo" "$(mount_line /mnt/shr)" "shared:[0-9]+"
	assert_not_contains "rprivate mount has no propagation tags" "$(mount_line /mnt/priv)" ":"
	# A slave receives mounts made on the host afterwards; a private one not.
	mkdir "$shared/sub"
	mount -t tmpfs -o size=1m husk-it-sub "$shared/sub" && echo late-mount >"$shared/sub/marker"
	out=$(rt exec "$CID" cat /mnt/slave/sub/marker 2>&1)
	assert_eq "rslave: a later host mount propagates into the container" late-mount "$out"
	out=$(rt exec "$CID" cat /mnt/priv/sub/marker 2>&1)
	assert_not_contains "rprivate: a later host mount does not propagate" "$out" late-mount
}

t_root_readonly() {
	local b
	b=$(new_bundle)
	BUNDLE=$b spec_set 'c["root"]["readonly"] = True'
	BUNDLE=$b spec_args sh -c 'touch /x 2>&1; echo "rc=$?"; touch /dev/shm/ok && echo dev-shm-writable'
	BUNDLE=$b run_ctr
	assert_rc "readonly root: container runs" 0 "$RC" || return
	assert_contains "readonly root: writing / fails with EROFS" "$OUT" "Read-only file system"
	assert_true "readonly root: nothing was written" test ! -e "$b/rootfs/x"
	assert_contains "readonly root: /dev/shm stays writable" "$OUT" dev-shm-writable
}

t_masked_paths() {
	local b procfile=
	# The brief's /proc/kcore needs CONFIG_PROC_KCORE; mask whichever
	# non-empty /proc file from the usual list this kernel has.
	for procfile in /proc/kcore /proc/timer_list /proc/keys /proc/sched_debug; do
		[ -e "$procfile" ] && break
	done
	b=$(new_bundle)
	mkdir "$b/rootfs/masked-dir"
	echo secret >"$b/rootfs/masked-dir/secret"
	echo secret >"$b/rootfs/masked-file"
	BUNDLE=$b spec_set 'c["linux"]["maskedPaths"] = [A[0], "/masked-dir", "/masked-file", "/no/such/path"]' "$procfile"
	BUNDLE=$b spec_args sh -c 'echo "proc $(wc -c <'"$procfile"')"; echo "dir $(ls -A /masked-dir | wc -l)"; echo "file $(cat /masked-file)."; cat /masked-dir/secret 2>/dev/null || echo unreadable'
	BUNDLE=$b run_ctr
	assert_rc "maskedPaths: container runs (a missing path is ignored)" 0 "$RC" || return
	assert_eq "maskedPaths: $procfile reads as empty" "proc 0" "$(printf '%s\n' "$OUT" | grep '^proc')"
	assert_eq "maskedPaths: a masked dir is empty" "dir 0" "$(printf '%s\n' "$OUT" | grep '^dir')"
	assert_eq "maskedPaths: a masked file is empty" "file ." "$(printf '%s\n' "$OUT" | grep '^file')"
	assert_eq "maskedPaths: files below a masked dir are gone" unreadable "$(printf '%s\n' "$OUT" | tail -n 1)"
}

t_readonly_paths() {
	local b
	b=$(new_bundle)
	mkdir "$b/rootfs/ro-dir"
	echo readable >"$b/rootfs/ro-dir/file"
	BUNDLE=$b spec_set 'c["linux"]["readonlyPaths"] = ["/proc/sys", "/ro-dir", "/no/such/path"]'
	BUNDLE=$b spec_args sh -c 'echo "sys: $( (echo 1 >/proc/sys/kernel/domainname) 2>&1)"; echo "dir: $(touch /ro-dir/x 2>&1)"; cat /ro-dir/file'
	BUNDLE=$b run_ctr
	assert_rc "readonlyPaths: container runs (a missing path is ignored)" 0 "$RC" || return
	assert_contains "readonlyPaths: writing /proc/sys fails with EROFS" "$(printf '%s\n' "$OUT" | grep '^sys:')" "Read-only file system"
	assert_contains "readonlyPaths: writing a read-only dir fails with EROFS" "$(printf '%s\n' "$OUT" | grep '^dir:')" "Read-only file system"
	assert_eq "readonlyPaths: still readable" readable "$(printf '%s\n' "$OUT" | tail -n 1)"
}

t_root_path_forms() {
	local b
	b=$(new_bundle)
	mkdir "$b/sub"
	mv "$b/rootfs" "$b/sub/my-root"
	BUNDLE=$b spec_set 'c["root"]["path"] = "sub/my-root"'
	BUNDLE=$b spec_args cat /etc/hostname
	CID=$(new_id)
	OUT=$(cd / && rt run --bundle "$b" "$CID" </dev/null 2>&1)
	assert_eq "a relative root.path is relative to the bundle, not the cwd" husk-busybox "$OUT"
	BUNDLE=$b spec_set 'c["root"]["path"] = A[0]' "$b/sub/my-root"
	BUNDLE=$b run_ctr
	assert_eq "an absolute root.path works" husk-busybox "$OUT"
}

t_dev() {
	BUNDLE=$(new_bundle)
	spec_args sh -c 'for f in null zero full random urandom tty ptmx pts shm fd stdin stdout stderr; do
  if [ -e /dev/$f ] || [ -L /dev/$f ]; then printf "%s " $f; else printf "MISSING:%s " $f; fi; done; echo
stat -c "%n %t:%T %a" /dev/null /dev/zero /dev/full /dev/random /dev/urandom /dev/tty
echo "links $(readlink /dev/fd) $(readlink /dev/stdin) $(readlink /dev/stdout) $(readlink /dev/stderr)"
echo "full: $( (echo x >/dev/full) 2>&1)"
echo "zero: $(head -c 3 /dev/zero | od -An -tx1)"
echo "null: $(echo x >/dev/null && echo writable)"
echo "extra: $(ls /dev | grep -vxE "null|zero|full|random|urandom|tty|ptmx|pts|shm|fd|stdin|stdout|stderr|mqueue|console|core" | tr "\n" " ")"
echo "block: $(find /dev -type b | wc -l)"'
	run_ctr
	assert_rc "/dev: container runs" 0 "$RC" || return
	assert_eq "/dev has the standard entries" "null zero full random urandom tty ptmx pts shm fd stdin stdout stderr " "$(printf '%s\n' "$OUT" | sed -n 1p)"
	assert_eq "/dev devices have the right numbers and mode 666" \
		"/dev/null 1:3 666|/dev/zero 1:5 666|/dev/full 1:7 666|/dev/random 1:8 666|/dev/urandom 1:9 666|/dev/tty 5:0 666" \
		"$(printf '%s\n' "$OUT" | sed -n 2,7p | tr '\n' '|' | sed 's/|$//')"
	assert_eq "/dev/fd and std links point into /proc/self/fd" \
		"links /proc/self/fd /proc/self/fd/0 /proc/self/fd/1 /proc/self/fd/2" "$(printf '%s\n' "$OUT" | grep '^links')"
	assert_contains "/dev/full is full" "$(printf '%s\n' "$OUT" | grep '^full:')" "No space left on device"
	assert_eq "/dev/zero reads zeros" "zero:  00 00 00" "$(printf '%s\n' "$OUT" | grep '^zero:')"
	assert_eq "/dev/null is writable" "null: writable" "$(printf '%s\n' "$OUT" | grep '^null:')"
	assert_eq "/dev has no host devices" "extra: " "$(printf '%s\n' "$OUT" | grep '^extra:')"
	assert_eq "/dev has no block devices" "block: 0" "$(printf '%s\n' "$OUT" | grep '^block:')"
}

t_linux_devices() {
	BUNDLE=$(new_bundle)
	spec_set '
c["linux"]["devices"] = [
  {"path": "/dev/mynull", "type": "c", "major": 1, "minor": 3, "fileMode": 0o600, "uid": 0, "gid": 0},
  {"path": "/dev/sub/myzero", "type": "c", "major": 1, "minor": 5, "fileMode": 0o644, "uid": 1000, "gid": 1001}]
d = c["linux"].setdefault("resources", {}).setdefault("devices", [])
d += [{"allow": True, "type": "c", "major": 1, "minor": 3, "access": "rwm"},
      {"allow": True, "type": "c", "major": 1, "minor": 5, "access": "rwm"}]'
	spec_args sh -c 'stat -c "%n %F %t:%T %a %u:%g" /dev/mynull /dev/sub/myzero; echo x >/dev/mynull && echo mynull-works; head -c 2 /dev/sub/myzero | od -An -tx1'
	run_ctr
	assert_rc "linux.devices: container runs" 0 "$RC" || return
	assert_eq "linux.devices: /dev/mynull is char 1:3, mode 600, root" \
		"/dev/mynull character special file 1:3 600 0:0" "$(printf '%s\n' "$OUT" | sed -n 1p)"
	assert_eq "linux.devices: a nested path with uid/gid" \
		"/dev/sub/myzero character special file 1:5 644 1000:1001" "$(printf '%s\n' "$OUT" | sed -n 2p)"
	assert_eq "linux.devices: the device works" mynull-works "$(printf '%s\n' "$OUT" | sed -n 3p)"
	assert_eq "linux.devices: the nested device works" "00 00" "$(printf '%s\n' "$OUT" | sed -n 4p | awk '{$1=$1; print}')"
}

# An image may hold symlinks that point out of the rootfs.  Every mount
# destination must be resolved inside the rootfs; the host directory the
# link names must gain neither a mount nor a new entry.  Refusing the
# container is also correct.
t_symlink_escape() {
	local marker b rc pid
	marker=$(new_tmpdir marker)
	b=$(new_bundle)
	ln -s "$marker" "$b/rootfs/evil"
	ln -s "../../../../../../../../..$marker" "$b/rootfs/evil-relative"
	BUNDLE=$b spec_mount /evil/x tmpfs tmpfs size=1m
	BUNDLE=$b spec_mount /evil-relative/y tmpfs tmpfs size=1m
	BUNDLE=$b spec_mount "/../../../../../..$marker/z" tmpfs tmpfs size=1m
	BUNDLE=$b spec_args sh -c 'touch /started; sleep 1000'
	BUNDLE=$b create_ctr
	rc=$RC
	if [ "$rc" -eq 0 ]; then
		start_ctr "$CID"
		wait_file "$b/rootfs/started" 5
		pid=$(container_pid "$CID")
		diag "container started (pid $pid); checking the host"
	else
		diag "create refused the bundle (rc $rc): $ERR"
	fi
	assert_eq "symlink escape: the host marker dir gained no entries" "" "$(ls -A "$marker")"
	assert_eq "symlink escape: no host mount under the marker dir" "" \
		"$(awk '{print $5}' /proc/self/mountinfo | grep -F "$marker")"
	if [ "$rc" -eq 0 ] && [ -n "$pid" ]; then
		# Mounts outside the container's root are hidden from its
		# mountinfo, so count the mounts the container does see.
		local seen
		seen=$(awk '{print $5}' "/proc/$pid/mountinfo" | grep -cE "/(x|y|z)$")
		assert_eq "symlink escape: the three mounts landed inside the rootfs" 3 "$seen"
	fi
}

for t in t_tmpfs_options t_bind_dir_file_symlink t_bind_ro t_bind_rro t_special_filesystems \
	t_propagation t_root_readonly t_masked_paths t_readonly_paths t_root_path_forms t_dev \
	t_linux_devices t_symlink_escape; do
	run_test "$t"
done
finish
