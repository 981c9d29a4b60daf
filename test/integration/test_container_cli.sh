#!/usr/bin/env bash
# `husk container run/ls/exec/logs/stop/rm`, the debug CLI that runs images
# with no daemon, against the busybox test image in a docker-registry
# started here.  After every rm nothing may be left: no mount under the
# store, no ROOT/containers/<id>, no runtime state dir, no process.
# The registry is stopped and every container, mount and temp dir removed by
# the trap, even on failure.
# Run alone: ./test/integration/test_container_cli.sh   (HUSK=... to override)
. "$(dirname "$0")/lib.sh"
# shellcheck source=test/integration/container_net.sh
. "$(dirname "$0")/container_net.sh"

HUSK=${HUSK:-$BUILD_DIR/husk}
IMAGES=${HUSK_TEST_IMAGES:-$CACHE_DIR/test-images}
HUSK_TIMEOUT=${HUSK_CONTAINER_TIMEOUT:-60}

# ---------------------------------------------------------------- helpers

husk_cmd() { # ARGS...: husk with our runtime --root and a timeout
	timeout -k 5 "$HUSK_TIMEOUT" "$HUSK" --root "$ROOT" "$@"
}

# Sets OUT, ERR and RC.  Call it directly, never inside $( ).
capture() { # COMMAND...
	OUT=$("$@" 2>"$WORK/err" </dev/null)
	RC=$?
	ERR=$(grep -v -E '^([0-9a-f]{12}  (done|already exists)|unpacking [0-9]+ layers?$)' "$WORK/err")
}

ctr() { # ARGS...: capture `husk container --root $STORE ARGS...`
	capture husk_cmd container --root "$STORE" "$@"
}

remove_store_containers() { # STORE
	local id
	for id in $("$HUSK" --root "$ROOT" container --root "$1" ls -a -q 2>/dev/null); do
		timeout 20 "$HUSK" --root "$ROOT" container --root "$1" rm -f "$id" >/dev/null 2>&1
	done
}

status_of() { # NAME -> running, exited, created (inspect's State.Status)
	"$HUSK" --root "$ROOT" container --root "$STORE" inspect -f '{{.State.Status}}' "$1" 2>/dev/null
}

runtime_pid() { # ID -> the init pid the runtime recorded, or nothing
	"$HUSK" --root "$ROOT" state "$1" 2>/dev/null | json_get pid 2>/dev/null
}

mounts_under() { # DIR
	awk '{ print $5 }' /proc/self/mountinfo | grep -F -- "$1" || true
}

# Nothing of container ID may remain.
assert_container_gone() { # NAME ID [PID]
	local name=$1 id=$2 pid=${3:-}
	[ -n "$id" ] || {
		not_ok "$name: container id known" "no id"
		return 1
	}
	assert_eq "$name: no mount left under the store" "" "$(mounts_under "$STORE/containers/$id")"
	assert_true "$name: no ROOT/containers/<id> left" test ! -e "$STORE/containers/$id"
	assert_true "$name: no runtime state dir left" test ! -e "$ROOT/$id"
	assert_eq "$name: no cgroup left" "" "$(find /sys/fs/cgroup -maxdepth 6 -type d -name "*$id*" 2>/dev/null)"
	assert_not_contains "$name: ls no longer lists it" \
		"$("$HUSK" --root "$ROOT" container --root "$STORE" ls -a -q 2>&1)" "$id"
	if [ -n "$pid" ]; then
		assert_true "$name: its process is gone" wait_gone "$pid" 5
	fi
}

# For runs that must leave nothing at all (--rm, failures).
store_snapshot() {
	{
		ls -A "$STORE/containers" 2>/dev/null | sed 's/^/containers: /'
		ls -A "$ROOT" 2>/dev/null | sed 's/^/runtime: /'
		mounts_under "$STORE/containers"
	} | sort
}

assert_nothing_new() { # NAME BEFORE
	assert_eq "$1" "$2" "$(store_snapshot)"
}

# ---------------------------------------------------------------- setup

REGDIR=$WORK/registry
STORE=$WORK/store

global_cleanup() {
	[ -d "$STORE" ] && remove_store_containers "$STORE"
	"$REPO_DIR/hack/registry.sh" stop "$REGDIR" >/dev/null 2>&1
	container_net_cleanup
	return 0
}
trap 'global_cleanup; cleanup_all' EXIT

setup() {
	if [ ! -x "$HUSK" ]; then
		echo "not ok - husk $HUSK is not an executable (make build, or set HUSK)"
		exit 1
	fi
	start_test_registry "$REGDIR" busybox multiarch
	# The default network is a CNI bridge: this run's own subnet.
	container_net_setup "$WORK" || {
		echo "not ok - a free subnet for the test bridge"
		exit 1
	}
	IMG=$REG/test/busybox:latest
	mkdir -p "$STORE"
	if ! husk_cmd image --root "$STORE" pull "$IMG" >/dev/null 2>"$WORK/pull.err"; then
		echo "not ok - pull $IMG"
		diag "$(cat "$WORK/pull.err")"
		exit 1
	fi
	echo "# $TEST_NAME: husk $HUSK, runtime root $ROOT, store $STORE, registry $REG"
}

# ---------------------------------------------------------------- tests

t_run_output() {
	local before
	before=$(store_snapshot)
	ctr run --rm "$IMG" 'echo hi; echo to-stderr >&2'
	assert_rc "run --rm: exit status 0" 0 "$RC"
	assert_eq "run --rm: the container's stdout" hi "$OUT"
	assert_eq "run --rm: the container's stderr" to-stderr "$ERR"
	ctr run --rm "$IMG"
	assert_eq "run --rm: the image's Entrypoint + Cmd by default" "hello from husk" "$OUT"
	assert_nothing_new "run --rm: nothing left (containers, runtime state, mounts)" "$before"
}

t_exit_code() {
	ctr run --rm "$IMG" 'exit 3'
	assert_rc "run: sh -c 'exit 3' (the image's entrypoint) exits 3" 3 "$RC"
	ctr run --rm --entrypoint /bin/sh "$IMG" -c 'exit 3'
	assert_rc "run --entrypoint /bin/sh -c 'exit 3' exits 3" 3 "$RC"
	ctr run --rm --entrypoint /no/such/binary "$IMG"
	assert_fails "run: a missing entrypoint binary fails" "$RC"
	assert_contains "run: the error names the missing binary" "$ERR" "/no/such/binary"
}

t_env() {
	ctr run --rm -e FOO=bar -e GREETING=overridden "$IMG" 'echo "$FOO|$GREETING|$HUSK_TEST|$PATH"'
	assert_eq "run -e: set, override, image Env kept" \
		"bar|overridden|busybox|/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "$OUT"
}

t_workdir() {
	ctr run --rm "$IMG" pwd
	assert_eq "run: the image's WorkingDir by default" /home/tester "$OUT"
	ctr run --rm -w /tmp "$IMG" pwd
	assert_eq "run -w /tmp" /tmp "$OUT"
	ctr run --rm -u 0 -w /made/for/you "$IMG" pwd
	assert_eq "run -w of a missing dir creates it (as docker does)" /made/for/you "$OUT"
}

t_user() {
	ctr run --rm "$IMG" id
	assert_eq "run: the image's User (tester) by default" "uid=1000(tester) gid=1000(tester) groups=1001(extra)" "$OUT"
	ctr run --rm -u 0 "$IMG" id
	assert_eq "run -u 0" "uid=0(root) gid=0(root)" "$(echo "$OUT" | cut -d' ' -f1-2)"
	ctr run --rm -u tester "$IMG" id
	assert_eq "run -u tester" "uid=1000(tester) gid=1000(tester) groups=1001(extra)" "$OUT"
	ctr run --rm -u 1000:1001 "$IMG" 'id -u; id -g'
	assert_eq "run -u 1000:1001" "1000 1001" "$(printf '%s\n' "$OUT" | paste -sd" ")"
	ctr run --rm -u nosuchuser "$IMG" id
	assert_fails "run -u nosuchuser fails" "$RC"
	assert_contains "run -u nosuchuser: the error names the user" "$ERR" nosuchuser
}

t_volume() {
	local dir before
	dir=$(new_tmpdir vol)
	echo from-host >"$dir/hostfile"
	ctr run --rm -u 0 -v "$dir:/mnt" "$IMG" 'cat /mnt/hostfile; echo from-ctr > /mnt/ctrfile'
	assert_rc "run -v SRC:DST: rc 0" 0 "$RC"
	assert_eq "run -v: the container reads the host file" from-host "$OUT"
	assert_eq "run -v: the host sees the container's write" from-ctr "$(cat "$dir/ctrfile" 2>/dev/null)"
	ctr run --rm -u 0 -v "$dir:/mnt:ro" "$IMG" 'cat /mnt/hostfile; echo x > /mnt/rofile'
	assert_fails "run -v SRC:DST:ro: the write fails" "$RC"
	assert_contains "run -v :ro: the error is EROFS" "$ERR" "Read-only file system"
	assert_contains "run -v :ro: reading still works" "$OUT" from-host
	assert_true "run -v :ro: no file on the host" test ! -e "$dir/rofile"
	assert_eq "run -v: the host mount table is clean afterwards" "" "$(mounts_under "$dir")"
	before=$(store_snapshot)
	ctr run --rm -v "$dir/missing:/mnt" "$IMG" true
	assert_fails "run -v of a missing source fails" "$RC"
	assert_eq "run -v of a missing source: one-line error" 1 "$(printf '%s\n' "$ERR" | grep -c .)"
	assert_nothing_new "run -v of a missing source: nothing left" "$before"
}

t_network() {
	local host_ifs
	# Without veths and test bridges (hk*): other runs add and remove theirs.
	host_ifs=$(ls /sys/class/net | grep -v -E '^(veth|hk)' | sort | tr '\n' ' ')
	ctr run --rm "$IMG" 'ls /sys/class/net | sort | tr "\n" " "; echo; readlink /proc/self/ns/net'
	assert_eq "default network (bridge, as rootful podman's): eth0 and lo" "eth0 lo " "$(echo "$OUT" | head -n 1)"
	assert_true "default network: its own net namespace" test "$(echo "$OUT" | tail -n 1)" != "$(host_ns net)"
	ctr run --rm --network none "$IMG" 'ls /sys/class/net | tr "\n" " "'
	assert_eq "--network none: only lo" "lo " "$OUT"
	ctr run --rm --network host "$IMG" 'ls /sys/class/net | grep -v -E "^(veth|hk)" | sort | tr "\n" " "; echo; readlink /proc/self/ns/net'
	assert_eq "--network host: the host's interfaces" "$host_ifs" "$(echo "$OUT" | head -n 1)"
	assert_eq "--network host: the host's net namespace" "$(host_ns net)" "$(echo "$OUT" | tail -n 1)"
	ctr run --rm --network bogus "$IMG" true
	assert_fails "--network bogus is refused" "$RC"
	assert_contains "--network bogus: the error names the value" "$ERR" bogus
}

# CVE-2019-5736 for the debug CLI: `husk container exec` enters the
# container from husk-image (husk executes it, same pid), which must first
# re-execute itself from a sealed copy, as husk does for `exec`.
exec_runs_sealed() { # NAME
	local pid exe= i
	"$HUSK" --root "$ROOT" container --root "$STORE" exec "$1" sleep 2 </dev/null >/dev/null 2>&1 &
	pid=$!
	# Its exe once it has a child (the exec'd process): after any re-exec.
	for i in $(seq 1 40); do
		if [ -n "$(ps -o pid= --ppid "$pid")" ]; then
			exe=$(readlink "/proc/$pid/exe" 2>/dev/null)
			break
		fi
		sleep 0.05
	done
	# A sealed memfd copy, or the binary through a private read-only
	# overlay (attached nowhere: the link shows its name at the mount's
	# root), never the file on disk (runtime/cloned_binary.c).
	case $exe in
	"/memfd:husk (deleted)" | /husk-image) ok "container exec: the process that enters the container runs from a sealed copy ($exe)" ;;
	*) not_ok "container exec: the process that enters the container runs from a sealed copy" "its exe: $exe" ;;
	esac
	wait "$pid"
	assert_rc "container exec from the sealed copy: rc 0" 0 "$?"
}

t_detached() {
	local id pid start elapsed
	ctr run -d --name husk-it-sleeper "$IMG" \
		'echo started; trap "echo got-term; exit 0" TERM; while :; do sleep 0.1; done'
	assert_rc "run -d: rc 0" 0 "$RC" || return 1
	id=$OUT
	assert_match "run -d prints the container id" "$id" '^[0-9a-f]{64}$'
	assert_eq "ls: the detached container is running" running "$(status_of husk-it-sleeper)"
	assert_contains "ls -q lists its id" "$("$HUSK" --root "$ROOT" container --root "$STORE" ls -q)" "$id"
	pid=$(runtime_pid "$id")
	ctr exec husk-it-sleeper sh -c 'echo in-exec; id -u; echo "$HUSK_TEST"'
	assert_eq "exec: runs in the container as its user with its env" "in-exec 1000 busybox" "$(printf '%s\n' "$OUT" | paste -sd" ")"
	ctr exec husk-it-sleeper sh -c 'exit 5'
	assert_rc "exec: its exit status" 5 "$RC"
	ctr exec -u 0 -e X=1 -w /tmp husk-it-sleeper sh -c 'echo "$(id -u) $X $(pwd)"'
	assert_eq "exec -u 0 -e X=1 -w /tmp" "0 1 /tmp" "$OUT"
	ctr exec "${id:0:12}" true
	assert_rc "exec by id prefix" 0 "$RC"
	exec_runs_sealed husk-it-sleeper
	ctr logs husk-it-sleeper
	assert_eq "logs: the detached container's output" started "$OUT"
	ctr rm husk-it-sleeper
	assert_fails "rm of a running container without -f fails" "$RC"
	assert_contains "rm without -f: the error says it is running" "$ERR" running
	assert_eq "rm without -f: it keeps running" running "$(status_of husk-it-sleeper)"
	start=$(date +%s%N)
	ctr stop -t 10 husk-it-sleeper
	elapsed=$((($(date +%s%N) - start) / 1000000))
	assert_rc "stop: rc 0" 0 "$RC"
	assert_true "stop: a container that exits on SIGTERM stops at once (${elapsed} ms)" test "$elapsed" -lt 3000
	assert_true "stop: no longer running" test "$(status_of husk-it-sleeper)" != running
	ctr logs husk-it-sleeper
	assert_contains "logs: the SIGTERM handler ran" "$OUT" got-term
	ctr rm husk-it-sleeper
	assert_rc "rm of a stopped container" 0 "$RC"
	assert_container_gone "rm" "$id" "$pid"
	ctr logs husk-it-sleeper
	assert_fails "logs of a removed container fails" "$RC"
}

# PID 1 without a handler ignores SIGTERM: stop must SIGKILL after -t.
t_stop_timeout() {
	local id pid start elapsed
	ctr run -d --name husk-it-stubborn "$IMG" 'while :; do sleep 0.1; done'
	assert_rc "run -d (ignores SIGTERM)" 0 "$RC" || return 1
	id=$OUT
	pid=$(runtime_pid "$id")
	start=$(date +%s%N)
	ctr stop -t 2 husk-it-stubborn
	elapsed=$((($(date +%s%N) - start) / 1000000))
	assert_rc "stop -t 2: rc 0" 0 "$RC"
	assert_true "stop -t 2: waits the timeout, then kills (${elapsed} ms, want 1800-6000)" \
		test "$elapsed" -ge 1800 -a "$elapsed" -lt 6000
	assert_true "stop -t 2: the process is gone" wait_gone "$pid" 5
	ctr rm husk-it-stubborn
	assert_container_gone "stop -t 2 then rm" "$id" "$pid"
}

t_rm_force() {
	local id pid
	ctr run -d "$IMG" 'while :; do sleep 0.1; done'
	assert_rc "run -d (for rm -f)" 0 "$RC" || return 1
	id=$OUT
	pid=$(runtime_pid "$id")
	assert_true "run -d: the runtime knows its pid" test -n "$pid"
	ctr rm -f "$id"
	assert_rc "rm -f of a running container" 0 "$RC"
	assert_container_gone "rm -f" "$id" "$pid"
}

t_memory() {
	local before
	before=$(store_snapshot)
	# The limit is enforced by whichever hierarchy holds the memory
	# controller (v1 on this hybrid host, v2 in the VM): 100 MiB in one
	# buffer is more than 64m allows (no swap here).
	ctr run --rm --memory 64m "$IMG" true
	assert_rc "--memory 64m runs" 0 "$RC"
	ctr run --rm --memory 64m "$IMG" 'dd if=/dev/zero of=/dev/null bs=100M count=1'
	assert_rc "--memory 64m: a 100 MiB allocation is OOM-killed (137)" 137 "$RC"
	assert_nothing_new "--memory: nothing left (containers, runtime state, mounts)" "$before"
	ctr run --rm --memory lots "$IMG" true
	assert_fails "--memory lots is refused" "$RC"
	assert_contains "--memory lots: the error names the option" "$ERR" "--memory"
}

t_read_only() {
	ctr run --rm -u 0 --read-only "$IMG" 'touch /newfile'
	assert_fails "--read-only: writing the rootfs fails" "$RC"
	assert_contains "--read-only: EROFS" "$ERR" "Read-only file system"
	ctr run --rm -u 0 --read-only "$IMG" 'cat /etc/motd'
	assert_eq "--read-only: reading works" "welcome to husk" "$OUT"
	ctr run --rm -u 0 "$IMG" 'touch /newfile && echo wrote'
	assert_eq "without --read-only the rootfs is writable" wrote "$OUT"
	ctr run --rm "$IMG" 'test -e /newfile && echo leaked || echo fresh'
	assert_eq "each container gets a fresh writable layer" fresh "$OUT"
}

t_auto_pull() {
	local store_save=$STORE before
	STORE=$(new_tmpdir autopull)
	ctr run --rm "$REG/test/multiarch:latest" echo pulled-and-ran
	assert_rc "run of an image not in the store: rc 0" 0 "$RC"
	assert_contains "run of an image not in the store pulls it first and runs it" "$OUT" pulled-and-ran
	assert_eq "run with an automatic pull: stdout holds only the container's output" pulled-and-ran "$OUT"
	capture husk_cmd image --root "$STORE" ls
	assert_match "the pulled image is in the store" "$OUT" "test/multiarch +latest "
	before=$(store_snapshot)
	ctr run --rm "$REG/test/nosuchimage:latest" true
	assert_fails "run of an image the registry lacks fails" "$RC"
	assert_eq "run of a missing image: one-line error" 1 "$(printf '%s\n' "$ERR" | grep -c .)"
	assert_nothing_new "run of a missing image: nothing left" "$before"
	remove_store_containers "$STORE"
	STORE=$store_save
}

t_name_conflict() {
	local id
	ctr run -d --name husk-it-dup "$IMG" 'while :; do sleep 0.1; done'
	assert_rc "run -d --name husk-it-dup" 0 "$RC" || return 1
	id=$OUT
	ctr run -d --name husk-it-dup "$IMG" true
	assert_fails "a second --name husk-it-dup is refused" "$RC"
	assert_contains "the refusal names the name" "$ERR" husk-it-dup
	ctr rm -f husk-it-dup
	assert_container_gone "rm -f by name" "$id"
}

t_bad_verbs() {
	ctr frobnicate
	assert_fails "container frobnicate: unknown verb" "$RC"
	assert_contains "unknown verb: the error names it" "$ERR" frobnicate
	ctr exec nosuchcontainer true
	assert_fails "exec in a missing container" "$RC"
	assert_contains "exec in a missing container: names it" "$ERR" nosuchcontainer
	ctr stop nosuchcontainer
	assert_fails "stop of a missing container" "$RC"
	ctr rm --bogus x
	assert_fails "rm --bogus is refused" "$RC"
	assert_contains "rm --bogus: the error names the option" "$ERR" "--bogus"
	ctr stop -x x
	assert_contains "stop -x: the error names the option" "$ERR" "-x"
}

# ---------------------------------------------------------------- main

setup
for t in t_run_output t_exit_code t_env t_workdir t_user t_volume t_network t_detached t_stop_timeout \
	t_rm_force t_memory t_read_only t_auto_pull t_name_conflict t_bad_verbs; do
	run_test "$t"
	remove_store_containers "$STORE"
done
finish
