#!/usr/bin/env bash
# Where husk must do what runc does (found by running runtime-tools'
# validation programs and runc side by side): a config without a mount
# namespace, the recursive mount options, poststart/poststop hooks that fail,
# `delete --force` of an unknown id, `list --format json`, and a terminal
# whose stdin is a pipe.
. "$(dirname "$0")/lib.sh"
require_runtime
ensure_rootfs

test_no_mount_namespace() {
	local host_ns
	BUNDLE=$(new_bundle)
	spec_del_ns mount
	spec_set 'c["linux"]["maskedPaths"]=[]; c["linux"]["readonlyPaths"]=[]'
	spec_args sh -c 'readlink /proc/self/ns/mnt; cat /etc/os-marker'
	echo inside-the-rootfs >"$BUNDLE/rootfs/etc/os-marker"
	run_ctr
	host_ns=$(readlink /proc/self/ns/mnt)
	assert_rc "a config without a mount namespace runs" 0 "$RC" &&
		assert_eq "it shares the runtime's mount namespace" "$host_ns" "$(echo "$OUT" | head -1)" &&
		assert_eq "and is chroot'ed into its rootfs" "inside-the-rootfs" "$(echo "$OUT" | tail -1)"
	# What it mounted lives in our namespace: the runtime leaves it to its
	# caller (runc does too); the cleanup unmounts it.
	umount_under "$BUNDLE/rootfs"
}

test_no_mount_namespace_refuses_masks() {
	BUNDLE=$(new_bundle)
	spec_del_ns mount
	spec_set 'c["linux"]["maskedPaths"]=["/proc/kcore"]'
	run_ctr
	assert_fails "maskedPaths without a mount namespace is refused" "$RC" &&
		assert_contains "the error says why" "$ERR" "need a mount namespace" &&
		assert_eq "nothing is left in the state dir" "" "$(ls "$ROOT")"
}

test_recursive_mount_options() {
	local src
	src=$(new_tmpdir rec-src)
	mkdir -p "$src/sub"
	mount -t tmpfs tmpfs "$src/sub"
	defer "umount -l '$src/sub'"
	cp "$ROOTFS_CACHE/bin/busybox" "$src/sub/true"
	BUNDLE=$(new_bundle)
	spec_mount /data none "$src" rbind rnoexec rro
	spec_args sh -c '/data/sub/true; echo exec=$?; touch /data/sub/x 2>/dev/null; echo write=$?'
	run_ctr
	assert_rc "rbind with rnoexec,rro runs" 0 "$RC" &&
		assert_contains "rnoexec reaches the submount" "$OUT" "exec=126" &&
		assert_contains "rro reaches the submount" "$OUT" "write=1"
	assert_true "the host's submount is untouched (still executable)" "$src/sub/true"
}

test_features_list_recursive_options() {
	local out
	out=$("$RUNTIME" features)
	assert_contains "features lists rnoexec" "$out" '"rnoexec"' &&
		assert_contains "features lists rnoatime" "$out" '"rnoatime"'
}

test_failing_poststart_runs_the_rest() {
	local log
	BUNDLE=$(new_bundle)
	log=$BUNDLE/hooks.log
	spec_set 'c["hooks"]={"poststart":[{"path":"/bin/sh","args":["sh","-c","echo first >>" + A[0] + "; exit 1"]},
                                       {"path":"/bin/sh","args":["sh","-c","echo second >>" + A[0]]}],
                          "poststop":[{"path":"/bin/sh","args":["sh","-c","echo stop1 >>" + A[0] + "; exit 2"]},
                                      {"path":"/bin/sh","args":["sh","-c","echo stop2 >>" + A[0]]}]}' "$log"
	run_ctr
	assert_rc "a failing poststart/poststop hook is a warning" 0 "$RC" &&
		assert_eq "every hook ran" "first second stop1 stop2" "$(tr '\n' ' ' <"$log" | sed 's/ $//')" &&
		assert_contains "the failure is reported" "$ERR" "poststart hook #0"
}

test_delete_force_unknown() {
	local rc=0
	ERR=$(rt delete --force "h-$SHORT_NAME-never-created" 2>&1) || rc=$?
	assert_rc "delete --force of an unknown id exits 0" 0 "$rc"
	rc=0
	ERR=$(rt delete "h-$SHORT_NAME-never-created" 2>&1) || rc=$?
	assert_fails "delete without --force still fails" "$rc" &&
		assert_contains "naming the id" "$ERR" "does not exist"
}

test_list_json() {
	local out
	BUNDLE=$(new_bundle)
	spec_args sleep 30
	create_ctr
	assert_rc "create" 0 "$RC" || return
	out=$(rt list --format json)
	assert_eq "list json: ociVersion" "1.2.0" "$(echo "$out" | json_get 0.ociVersion)" &&
		assert_eq "list json: rootfs" "$BUNDLE/rootfs" "$(echo "$out" | json_get 0.rootfs)" &&
		assert_eq "list json: status" "created" "$(echo "$out" | json_get 0.status)"
}

test_terminal_with_piped_stdin() {
	local rc=0 out
	BUNDLE=$(new_bundle)
	spec_set 'c["process"]["terminal"]=True'
	spec_args cat
	CID=$(new_id)
	out=$(printf 'line one\nunfinished' | rt run --bundle "$BUNDLE" "$CID" 2>"$WORK/err") || rc=$?
	assert_rc "terminal:true with a piped stdin ends when the pipe does" 0 "$rc" &&
		assert_contains "the piped text reached the process" "$out" "line one"
}

run_test test_no_mount_namespace
run_test test_no_mount_namespace_refuses_masks
run_test test_recursive_mount_options
run_test test_features_list_recursive_options
run_test test_failing_poststart_runs_the_rest
run_test test_delete_force_unknown
run_test test_list_json
run_test test_terminal_with_piped_stdin
finish
