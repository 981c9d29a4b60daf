#!/usr/bin/env bash
# husk checkpoint / restore on this host: the command line, every refusal
# (missing id, stopped container, no criu, criu itself refusing, an
# unwritable or non-empty image path, a restore without an image) with a
# clear one-line error and nothing left behind; podman's arguments (a work
# path that already holds the bundle) accepted, the caller's files kept.
# Where `criu check` passes
# here, a real dump and restore of a counting process too; where it fails
# (CRIU 3.17 does not know kernel 6.18's vDSO), that refusal is the case
# tested, and the dump/restore itself runs in the VM (test/vm/test_checkpoint.sh).
. "$(dirname "$0")/lib.sh"
require_runtime

CRIU=$(command -v criu || echo /usr/sbin/criu)

# A running container counting in memory; sets CID and B.
start_counter() {
	B=$(new_bundle)
	BUNDLE=$B spec_args sh -c 'i=0; while :; do i=$((i+1)); echo $i >/tmp/count.new; mv /tmp/count.new /tmp/count; sleep 0.1; done'
	BUNDLE=$B spec_mount /tmp tmpfs tmpfs nosuid nodev
	BUNDLE=$B create_ctr
	start_ctr "$CID"
	wait_status "$CID" running 5
}

assert_running() { # NAME ID
	assert_eq "$1" running "$(state_of "$2")"
}

t_cli() {
	local out
	out=$(rt checkpoint 2>&1)
	assert_fails "checkpoint without an id is refused" $?
	assert_contains "... with the usage" "$out" "usage: husk checkpoint"
	out=$(rt checkpoint --manage-cgroups-mode bogus x 2>&1)
	assert_fails "a bad --manage-cgroups-mode is refused" $?
	assert_contains "... naming the modes" "$out" "--manage-cgroups-mode \`bogus\`: one of soft, full, strict, ignore"
	out=$(rt checkpoint --no-such-flag x 2>&1)
	assert_fails "an unknown checkpoint option is refused" $?
	assert_contains "... naming it" "$out" "no-such-flag"
	out=$(rt restore --image-path 2>&1)
	assert_fails "restore --image-path without a value is refused" $?
	out=$("$RUNTIME" checkpoint --help 2>&1)
	for opt in --image-path --work-path --leave-running --tcp-established --file-locks --ext-unix-sk \
		--shell-job --manage-cgroups-mode; do
		assert_contains "checkpoint --help lists $opt" "$out" "$opt"
	done
	out=$("$RUNTIME" restore --help 2>&1)
	for opt in --image-path --bundle --detach --pid-file --tcp-established; do
		assert_contains "restore --help lists $opt" "$out" "$opt"
	done
}

t_missing_id() {
	local d out
	d=$(new_tmpdir ckpt)
	out=$(rt checkpoint --image-path "$d/img" h-no-such-ckpt 2>&1)
	assert_fails "checkpoint of a missing id fails" $?
	assert_eq "... with one clear line" \
		"husk: checkpoint container \`h-no-such-ckpt\`: container \`h-no-such-ckpt\` does not exist" "$out"
	assert_true "... and no image dir is made" test ! -e "$d/img"
}

t_stopped() {
	local b d out
	d=$(new_tmpdir ckpt)
	b=$(new_bundle)
	BUNDLE=$b create_ctr
	out=$(rt checkpoint --image-path "$d/img" "$CID" 2>&1)
	assert_fails "checkpoint of a created (not started) container fails" $?
	assert_contains "... saying it is not running" "$out" "container \`$CID\` is created, not running"
	start_ctr "$CID"
	wait_status "$CID" stopped 5
	out=$(rt checkpoint --image-path "$d/img" "$CID" 2>&1)
	assert_fails "checkpoint of a stopped container fails" $?
	assert_contains "... saying it is stopped" "$out" "container \`$CID\` is stopped, not running"
	assert_true "... and no image dir is made" test ! -e "$d/img"
}

t_no_criu() {
	local d out
	d=$(new_tmpdir ckpt)
	start_counter
	out=$(HUSK_CRIU=/nonexistent/criu rt checkpoint --image-path "$d/img" "$CID" 2>&1)
	assert_fails "checkpoint without criu fails" $?
	assert_contains "... naming HUSK_CRIU's path" "$out" "HUSK_CRIU=\`/nonexistent/criu\`: not an executable criu"
	assert_true "... no image dir is left" test ! -e "$d/img"
	assert_running "... and the container still runs" "$CID"
	out=$(PATH=/nonexistent rt checkpoint --image-path "$d/img" "$CID" 2>&1)
	# /usr/sbin holds the Debian criu: only a missing one can be told apart.
	if [ ! -x /usr/sbin/criu ] && [ ! -x /sbin/criu ]; then
		assert_contains "without criu anywhere the error says what to install" "$out" "install the criu package"
	else
		assert_true "criu is found outside PATH (/usr/sbin)" test -x /usr/sbin/criu -o -x /sbin/criu
	fi
}

t_unwritable_path() {
	local out
	start_counter
	out=$(rt checkpoint --image-path /proc/husk-ckpt-img "$CID" 2>&1)
	assert_fails "checkpoint to an unwritable path fails" $?
	assert_contains "... naming the path" "$out" "create image directory \`/proc/husk-ckpt-img\`"
	assert_eq "... on one line" 1 "$(printf '%s\n' "$out" | wc -l)"
	assert_running "... and the container still runs" "$CID"
}

t_not_empty() {
	local d out
	d=$(new_tmpdir ckpt)
	mkdir "$d/img"
	echo keep >"$d/img/mine"
	start_counter
	out=$(rt checkpoint --image-path "$d/img" "$CID" 2>&1)
	assert_fails "checkpoint into a non-empty directory fails" $?
	assert_contains "... saying so" "$out" "image directory \`$d/img\` is not empty"
	assert_eq "... and what was there is untouched" keep "$(cat "$d/img/mine")"
	assert_running "... and the container still runs" "$CID"
}

# podman 4.3 (libpod CheckpointContainer) runs the runtime as
#   RUNTIME checkpoint --image-path USERDATA/checkpoint --work-path USERDATA
#           [--leave-running] [--tcp-established] [--file-locks] ID
# where USERDATA is the bundle dir, already holding config.json and more.
# The work path is taken as it is: criu's failure (or success) is what the
# caller gets, and nothing of the caller's is removed or changed.
t_podman_work_path() {
	local out before after sums leave rc
	start_counter
	echo podman >"$B/attach"
	mkdir "$B/artifacts"
	echo keep >"$B/artifacts/x"
	before=$(cd "$B" && ls -A | sort | tr '\n' ' ')
	sums=$(cd "$B" && sha256sum config.json attach artifacts/x)
	for leave in --leave-running ""; do
		# shellcheck disable=SC2086
		out=$(rt checkpoint --image-path "$B/checkpoint" --work-path "$B" $leave --file-locks "$CID" 2>&1)
		rc=$?
		assert_not_contains "podman's args ${leave:-without --leave-running}: the non-empty work path is accepted" \
			"$out" "not empty"
		if [ "$rc" -ne 0 ]; then
			assert_contains "... the failure is criu's" "$out" "criu dump failed"
			assert_contains "... naming its log in the work path" "$out" "full log: $B/dump.log"
			assert_contains "... which holds criu's dump log" "$(cat "$B/dump.log" 2>/dev/null)" "Error ("
			after=$(cd "$B" && ls -A | grep -vx dump.log | sort | tr '\n' ' ')
			assert_eq "... nothing else is added to or removed from the work path" "$before" "$after"
			assert_running "... and the container still runs" "$CID"
		else
			assert_true "... the dump is in the image path" test -s "$B/checkpoint/inventory.img"
			rm -rf "${B:?}/checkpoint"
			[ -n "$leave" ] || break
		fi
		assert_eq "... config.json and the caller's files are untouched" "$sums" \
			"$(cd "$B" && sha256sum config.json attach artifacts/x)"
		rm -f "$B/dump.log"
	done
	: >"$WORK/a-file"
	out=$(rt checkpoint --image-path "$B/checkpoint" --work-path "$WORK/a-file" "$CID" 2>&1)
	assert_fails "a work path that is a file is refused" $?
	assert_contains "... naming it" "$out" "work directory \`$WORK/a-file\` exists and is not a directory"
}

# criu on this host: either a real dump/restore or its refusal, reported.
t_criu() {
	local d out count1 count2 log
	d=$(new_tmpdir ckpt)
	start_counter
	if ! "$CRIU" check >"$d/check.log" 2>&1; then
		diag "criu check fails here: $(grep -m1 Error "$d/check.log")"
		out=$(rt checkpoint --image-path "$d/img" --leave-running "$CID" 2>&1)
		assert_fails "checkpoint fails where criu refuses" $?
		assert_contains "... saying criu dump failed" "$out" "criu dump failed (exit status"
		assert_contains "... quoting criu's error" "$out" "Error ("
		assert_eq "... on one line" 1 "$(printf '%s\n' "$out" | wc -l)"
		log=$(printf '%s' "$out" | sed -n 's/.*(full log: \(.*\))$/\1/p')
		assert_true "... naming the kept log ($log)" test -s "$log"
		assert_contains "... which holds criu's dump log" "$(cat "$log" 2>/dev/null)" "Error ("
		assert_true "... no image dir is left" test ! -e "$d/img"
		assert_running "... and the container still runs" "$CID"
		out=$(rt checkpoint --image-path "$d/img2" "$CID" 2>&1)
		assert_fails "checkpoint (no --leave-running) fails the same" $?
		assert_running "... and the container still runs" "$CID"
		return
	fi
	sleep 0.5
	rt checkpoint --image-path "$d/img" "$CID" >"$d/out" 2>&1
	assert_rc "checkpoint succeeds" 0 $? || diag "$(cat "$d/out")"
	count1=$(cat "$B/rootfs/tmp/count" 2>/dev/null)
	assert_true "the checkpointed container is gone" test -z "$(state_of "$CID")"
	rt restore -d --image-path "$d/img" --bundle "$B" "$CID" >"$d/out" 2>&1
	assert_rc "restore succeeds" 0 $? || diag "$(cat "$d/out")"
	assert_running "the restored container runs" "$CID"
	sleep 1
	count2=$(rt exec "$CID" cat /tmp/count)
	if [ -n "$count2" ] && [ "$count2" -gt 5 ]; then ok "the count went on ($count2)"; else not_ok "the count went on" "$count2"; fi
}

t_restore_errors() {
	local b d out
	d=$(new_tmpdir ckpt)
	b=$(new_bundle)
	mkdir "$d/empty"
	CID=$(new_id)
	out=$(rt restore -d --image-path "$d/empty" --bundle "$b" "$CID" 2>&1)
	assert_fails "restore from a directory without a checkpoint fails" $?
	assert_eq "... with one clear line" \
		"husk: restore container \`$CID\`: image directory \`$d/empty\` holds no checkpoint (no inventory.img)" "$out"
	assert_true "... and no container is left" test -z "$(rt list --quiet)"
	out=$(rt restore -d --image-path "$d/none" --bundle "$b" "$CID" 2>&1)
	assert_fails "restore from a missing directory fails" $?
	assert_contains "... naming it" "$out" "image directory \`$d/none\` holds no checkpoint"
	out=$(rt restore -d --image-path "$d/empty" --bundle "$d/nobundle" "$CID" 2>&1)
	assert_fails "restore with a missing bundle fails" $?
	assert_contains "... naming it" "$out" "bundle \`$d/nobundle\`"
	# A fake image: criu gets to run and refuses; nothing is left.
	: >"$d/empty/inventory.img"
	echo '["pipe:[1]","/dev/null","/dev/null"]' >"$d/empty/descriptors.json"
	out=$(rt restore -d --image-path "$d/empty" --bundle "$b" "$CID" 2>&1)
	assert_fails "restore of a bad image fails" $?
	assert_contains "... saying criu restore failed" "$out" "criu restore failed"
	assert_contains "... naming its log" "$out" "full log: $d/empty/restore.log"
	assert_true "... no container is left" test -z "$(rt list --quiet)"
	assert_true "... no state dir is left" test ! -e "$ROOT/$CID"
	assert_true "... no cgroup is left" test ! -e "/sys/fs/cgroup/husk/$CID" -a ! -e "/sys/fs/cgroup/pids/husk/$CID"
	assert_true "... and no mount is left" sh -c "! grep -q '$ROOT/$CID' /proc/self/mountinfo"
	echo 'not json' >"$d/empty/descriptors.json"
	out=$(rt restore -d --image-path "$d/empty" --bundle "$b" "$CID" 2>&1)
	assert_fails "a malformed descriptors.json is refused" $?
	assert_contains "... naming the file" "$out" "$d/empty/descriptors.json: not a JSON array"
}

for t in t_cli t_missing_id t_stopped t_no_criu t_unwritable_path t_not_empty t_podman_work_path t_criu t_restore_errors; do
	run_test "$t"
done
finish
