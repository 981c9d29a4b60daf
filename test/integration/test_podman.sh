#!/usr/bin/env bash
# husk as podman's OCI runtime: Debian's podman 4.3 with `--runtime husk`
# (and its conmon), on a storage of its own under a temp dir (vfs, cgroupfs,
# a file event log), so nothing of the host's podman is touched.  This is
# the command line as podman and conmon speak it: create --bundle
# --pid-file --console-socket, start, state, kill, delete, exec --process
# --detach, pause, resume, and --log-format json.
#
# One thing is not podman's default here: podman asks for RLIMIT_NOFILE
# 1048576 and RLIMIT_NPROC at the host's own hard limit, which a host
# without CAP_SYS_RESOURCE refuses to every runtime alike (crun and runc
# fail the same setrlimit with EPERM).  Where raising RLIMIT_NOFILE to
# 1048576 is refused, the runs ask for limits under the hard ones.
. "$(dirname "$0")/lib.sh"
require_runtime
ensure_rootfs

if ! command -v podman >/dev/null; then
	echo "not ok - podman is installed (hack/deps.sh installs it)"
	finish
fi

PM=$(mktemp -d /tmp/husk-it-podman.XXXXXX)
NAME=husk-it-pm-$$
IMAGE=localhost/husk-it-busybox:$$

pm() { # ARGS...: podman on our own storage, with $RUNTIME
	timeout 60 podman --root "$PM/root" --runroot "$PM/runroot" --storage-driver vfs \
		--cgroup-manager cgroupfs --events-backend file --tmpdir "$PM/tmp" \
		--runtime "$RUNTIME" "$@"
}

stop_podman() {
	pm rm -a -f -t 0 >/dev/null 2>&1
	pm rmi -a -f >/dev/null 2>&1
	umount_under "$PM"
	rm -rf --one-file-system "$PM"
	# podman's cgroupfs parent (its conmon cgroup, the containers' own
	# are removed by delete), where nothing else is in it.
	find /sys/fs/cgroup/*/libpod_parent -depth -type d -exec rmdir {} \; 2>/dev/null
}
trap 'stop_podman; cleanup_all' EXIT

LIMITS=()
if ! prlimit --pid $$ --nofile=1048576:1048576 2>/dev/null; then
	LIMITS=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=1000:1000)
	diag "this host refuses RLIMIT_NOFILE 1048576 (no CAP_SYS_RESOURCE): runs pass ${LIMITS[*]}"
fi

capture() { # ARGS...: sets OUT and RC; a failure's stderr goes to the log
	OUT=$("$@" 2>"$PM/err")
	RC=$?
	[ "$RC" -eq 0 ] || diag "podman $*: rc $RC: $(tail -n 3 "$PM/err")"
}

tar -C "$ROOTFS_CACHE" -cf "$PM/rootfs.tar" . &&
	pm import "$PM/rootfs.tar" "$IMAGE" >/dev/null 2>"$PM/import.err"
assert_rc "podman imports the busybox rootfs as an image" 0 $? || finish

t_run() {
	capture pm run --rm --network none "${LIMITS[@]}" "$IMAGE" sh -c 'echo hello; exit 3'
	assert_rc "podman run --rm: the container's exit status" 3 "$RC"
	assert_eq "podman run --rm: its output" hello "$OUT"
	capture pm run --rm -i --network none "${LIMITS[@]}" "$IMAGE" sh -c 'read line; echo "got $line"' <<<"stdin-line"
	assert_eq "podman run -i: stdin reaches the container" "got stdin-line" "$OUT"
	capture pm run --rm -t --network none "${LIMITS[@]}" "$IMAGE" tty
	assert_match "podman run -t: the process has a terminal" "$OUT" '^/dev/pts/[0-9]+'
	assert_eq "podman run --rm: no container is left" "" "$(pm ps -a -q)"
}

t_detached() {
	local id
	capture pm run -d --name "$NAME" --network none "${LIMITS[@]}" "$IMAGE" sleep 1000
	assert_rc "podman run -d" 0 "$RC" || return
	id=$OUT
	if runtime_is_husk; then
		assert_true "husk keeps the container's state in its default root" test -d "/run/husk/runtime/$id"
	fi
	assert_eq "podman inspect: running" running "$(pm inspect -f '{{.State.Status}}' "$NAME")"
	capture pm exec "$NAME" sh -c 'echo "in $(hostname) as $(id -u)"'
	assert_eq "podman exec: runs in the container" "in ${id:0:12} as 0" "$OUT"
	capture pm exec "$NAME" sh -c 'exit 7'
	assert_rc "podman exec: its exit status" 7 "$RC"
	pm pause "$NAME" >/dev/null
	assert_eq "podman pause: paused" paused "$(pm inspect -f '{{.State.Status}}' "$NAME")"
	pm unpause "$NAME" >/dev/null
	assert_eq "podman unpause: running again" running "$(pm inspect -f '{{.State.Status}}' "$NAME")"
	capture pm stop -t 1 "$NAME"
	assert_rc "podman stop" 0 "$RC"
	assert_eq "podman stop: exited" exited "$(pm inspect -f '{{.State.Status}}' "$NAME")"
	capture pm rm "$NAME"
	assert_rc "podman rm" 0 "$RC"
	# podman gives the runtime no --root: husk's default, as runc's /run/runc.
	if runtime_is_husk; then
		assert_true "podman rm: husk has no state left for it" test ! -e "/run/husk/runtime/$id"
	fi
}

run_test t_run
run_test t_detached
finish
