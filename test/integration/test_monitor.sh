#!/usr/bin/env bash
# husk-monitor, the per-container monitor huskd starts (like conmon): it
# creates the container through the runtime, detaches from its starter,
# writes the CRI log file and the exit file.  Runs busybox bundles with
# $RUNTIME (build/husk by default; any runc-compatible runtime works).
# Run alone: ./test/integration/test_monitor.sh
. "$(dirname "$0")/lib.sh"
require_runtime

MONITOR=${MONITOR:-$BUILD_DIR/husk-monitor}
EXIT_DIR=$WORK/exits
if [ ! -x "$MONITOR" ]; then
	echo "not ok - $MONITOR is not an executable (build it: make build/husk-monitor)"
	exit 1
fi

# kill -9 of a monitor still running at cleanup (its pid file goes when it
# exits by itself).
kill_monitor() { # ID
	local pid
	pid=$(cat "$WORK/$1.mpid" 2>/dev/null) || return 0
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
	return 0
}

# The monitor's arguments for container CID with bundle $BUNDLE.
monitor_args() { # CID
	printf '%s\n' --id "$1" --bundle "$BUNDLE" --runtime "$RUNTIME" --runtime-root "$ROOT" \
		--log-path "$WORK/$1.log" --exit-dir "$EXIT_DIR" \
		--monitor-pid-file "$WORK/$1.mpid" --monitor-log "$WORK/$1.mlog"
}

# Starts a monitor for $BUNDLE under a fresh id, reading its report from
# stdout, as huskd reads it from a pipe.  Sets CID, LOG, EXIT_FILE, SYNC (the
# report), RC (the starter-side exit status), MPID and CPID.  Call it
# directly, never inside $( ).
start_monitor() { # [EXTRA MONITOR ARGS...]
	local args
	CID=$(new_id)
	LOG=$WORK/$CID.log
	EXIT_FILE=$EXIT_DIR/$CID
	defer "kill_monitor $CID"
	mapfile -t args < <(monitor_args "$CID")
	SYNC=$(timeout -k 5 "$RT_TIMEOUT" "$MONITOR" "${args[@]}" "$@" 2>"$WORK/$CID.starterr")
	RC=$?
	MPID=$(printf '%s' "$SYNC" | json_get monitor_pid 2>/dev/null)
	CPID=$(printf '%s' "$SYNC" | json_get pid 2>/dev/null)
}

# Checks that the monitor reported a created container.
assert_created() { # NAME
	if [ "$RC" -eq 0 ] && [ -n "$CPID" ] && [ -n "$MPID" ]; then
		ok "$1"
	else
		not_ok "$1" "rc $RC, report: $SYNC" "$(cat "$WORK/$CID.starterr" "$WORK/$CID.mlog" 2>/dev/null)"
	fi
}

wait_exit_file() { # [SECONDS]
	wait_file "$EXIT_FILE" "${1:-15}"
}

fd_targets() { # PID: what each of its fds points at
	local fd
	for fd in "/proc/$1/fd/"*; do
		readlink "$fd"
	done
}

fd_numbers() { # PID
	local fd
	for fd in "/proc/$1/fd/"*; do
		echo "${fd##*/}"
	done | sort -n | tr '\n' ' '
}

exit_field() { # FIELD
	json_get "$1" <"$EXIT_FILE" 2>/dev/null
}

# The log's records as "STREAM TAG CONTENT" (\r shown as \r), after
# checking each one's timestamp; with --sizes, "STREAM TAG LENGTH".
log_records() { # FILE [--sizes]
	"$PY" - "$@" <<'EOF'
import re, sys
record = re.compile(rb"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z (stdout|stderr) ([FP]) (.*)$", re.S)
data = open(sys.argv[1], "rb").read()
if data and not data.endswith(b"\n"):
    print("BAD: the file does not end with a newline")
for raw in data.split(b"\n")[:-1]:
    m = record.match(raw)
    if not m:
        print("BAD: %r" % raw[:80])
    elif len(sys.argv) > 2:
        print("%s %s %d" % (m.group(1).decode(), m.group(2).decode(), len(m.group(3))))
    else:
        print("%s %s %s" % (m.group(1).decode(), m.group(2).decode(),
                            m.group(3).decode("utf-8", "replace").replace("\r", "\\r")))
EOF
}

# The content of the log's records joined as kubelet joins them: P records
# continue into the next one, F ends a line.  Prints its length and the set
# of bytes in it.
log_joined_summary() { # FILE
	"$PY" - "$1" <<'EOF'
import sys
out = b""
for raw in open(sys.argv[1], "rb").read().split(b"\n")[:-1]:
    _, _, tag, content = raw.split(b" ", 3)
    out += content + (b"\n" if tag == b"F" else b"")
print(len(out), sorted(set(out)))
EOF
}

wait_log_contains() { # FILE TEXT [SECONDS]
	local i=0 limit=$((${3:-10} * 20))
	while [ $i -lt $limit ]; do
		grep -qF -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

ppid_of() { # PID
	awk '{print $4}' "/proc/$1/stat" 2>/dev/null
}

# ---------------------------------------------------------------- tests

t_stdout_stderr_exit_code() {
	local rss records
	BUNDLE=$(new_bundle)
	spec_args sh -c 'echo to-out; echo to-err >&2; echo second; echo; exit 3'
	start_monitor
	assert_created "the monitor reports the created container's pid" || return
	assert_eq "the reported pid is the runtime's" "$(container_pid "$CID")" "$CPID"
	assert_eq "the container is created, not started" created "$(state_of "$CID")"
	assert_eq "the container's init is the monitor's child (subreaper)" "$MPID" "$(ppid_of "$CPID")"
	assert_true "the monitor is in a session of its own" \
		[ "$(ps -o sid= -p "$MPID" | tr -d ' ')" != "$(ps -o sid= -p $$ | tr -d ' ')" ]
	rss=$(ps -o rss= -p "$MPID" | tr -d ' ')
	diag "husk-monitor RSS with a created container: ${rss} kB"
	start_ctr "$CID"
	wait_exit_file || {
		not_ok "the exit file appears" "$(cat "$WORK/$CID.mlog" 2>/dev/null)"
		return
	}
	records=$(log_records "$LOG")
	assert_eq "stdout lines are F records tagged stdout, in order" \
		"stdout F to-out|stdout F second|stdout F " "$(printf '%s\n' "$records" | grep '^stdout' | tr '\n' '|' | sed 's/|$//')"
	assert_eq "stderr lines are F records tagged stderr" "stderr F to-err" "$(printf '%s\n' "$records" | grep -v '^stdout')"
	assert_eq "exit file: exit_code 3" 3 "$(exit_field exit_code)"
	assert_eq "exit file: no signal" 0 "$(exit_field signal)"
	assert_eq "exit file: not OOM-killed" False "$(exit_field oom_killed)"
	assert_match "exit file: finished_at is RFC3339Nano UTC" "$(exit_field finished_at)" \
		'^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{9}Z$'
	assert_true "the monitor exits after the container" wait_gone "$MPID" 10
	assert_true "the monitor removes its pid file at exit" [ ! -e "$WORK/$CID.mpid" ]
	assert_eq "the runtime sees the container stopped" stopped "$(state_of "$CID")"
}

t_sigkill() {
	BUNDLE=$(new_bundle)
	spec_args sleep 60
	start_monitor
	assert_created "monitor with a sleeping container" || return
	start_ctr "$CID"
	rt kill "$CID" KILL
	wait_exit_file || {
		not_ok "the exit file appears after SIGKILL"
		return
	}
	assert_eq "SIGKILL: exit_code 137" 137 "$(exit_field exit_code)"
	assert_eq "SIGKILL: signal 9" 9 "$(exit_field signal)"
}

# The husk beside the monitor is exec'd from a private read-only overlay
# (else a sealed copy): it runs sealed from the start, so it skips its own
# re-exec (CVE-2019-5736; runtime/cloned_binary.c), and the container's
# init never runs from the binary on disk.  Another runtime binary is exec'd
# as it is, and a husk elsewhere re-executes itself.
t_runtime_sealed() {
	local rtlog=$WORK/sealed-runtime.log other=$WORK/other-bin/husk disk exe
	disk=$(realpath "$(dirname "$MONITOR")/husk")
	if [ ! "$RUNTIME" -ef "$disk" ]; then
		skip "the monitor execs the husk beside it sealed" "RUNTIME $RUNTIME is not the husk beside $MONITOR"
		return
	fi
	BUNDLE=$(new_bundle)
	spec_args true
	start_monitor --runtime-arg --debug --runtime-arg "--log=$rtlog"
	assert_created "a monitor whose runtime is the husk beside it creates" || return
	exe=$(readlink "/proc/$CPID/exe")
	assert_true "the created init does not run from the binary on disk ($exe)" [ "${exe:-$disk}" != "$disk" ]
	assert_eq "husk create ran sealed from its first exec, and did not re-execute itself" "1 0" \
		"$(grep -c 'no re-exec' "$rtlog") $(grep -c 're-executing' "$rtlog")"
	rt delete --force "$CID" >/dev/null 2>&1

	mkdir -p "${other%/*}" && cp "$disk" "$other"
	BUNDLE=$(new_bundle)
	spec_args true
	start_monitor --runtime "$other" --runtime-arg --debug --runtime-arg "--log=$rtlog.other"
	assert_created "a monitor whose runtime is another husk binary creates" || return
	exe=$(readlink "/proc/$CPID/exe")
	assert_true "its init does not run from that binary on disk either ($exe)" [ "${exe:-$other}" != "$other" ]
	assert_eq "that husk was exec'd as it is, re-executed itself, then ran sealed" "1 1" \
		"$(grep -c 'no re-exec' "$rtlog.other") $(grep -c 're-executing' "$rtlog.other")"
	rt delete --force "$CID" >/dev/null 2>&1
}

# huskd may be killed at any time: its monitors and containers go on.
t_starter_killed() {
	local sync starter args
	BUNDLE=$(new_bundle)
	spec_args sh -c 'echo before; while [ ! -e /release ]; do sleep 0.05; done; echo after; exit 7'
	CID=$(new_id)
	LOG=$WORK/$CID.log
	EXIT_FILE=$EXIT_DIR/$CID
	sync=$WORK/$CID.sync
	defer "kill_monitor $CID"
	mapfile -t args < <(monitor_args "$CID")
	# The starter stays alive after the report, as huskd does, in a
	# process group of its own that is killed as a whole.
	# shellcheck disable=SC2016 # expanded by the starter
	setsid bash -c '"$@" >"$0"; exec sleep 300' "$sync" "$MONITOR" "${args[@]}" </dev/null 2>/dev/null &
	starter=$!
	defer "kill -KILL -- -$starter"
	wait_log_contains "$sync" '}' 10
	MPID=$(json_get monitor_pid <"$sync" 2>/dev/null)
	CPID=$(json_get pid <"$sync" 2>/dev/null)
	if [ -z "$MPID" ] || [ -z "$CPID" ]; then
		not_ok "a starter that stays gets the report" "report: $(cat "$sync")"
		return
	fi
	assert_true "the monitor is not the starter's child" [ "$(ppid_of "$MPID")" != "$starter" ]
	start_ctr "$CID"
	wait_log_contains "$LOG" before 10
	kill -KILL -- "-$starter"
	wait "$starter" 2>/dev/null
	wait_gone "$starter" 5
	sleep 0.3
	assert_true "the monitor survives kill -9 of its starter's process group" [ -d "/proc/$MPID" ]
	assert_eq "the container keeps running" running "$(state_of "$CID")"
	touch "$BUNDLE/rootfs/release"
	wait_exit_file || {
		not_ok "the exit file appears with the starter gone" "$(cat "$WORK/$CID.mlog" 2>/dev/null)"
		return
	}
	assert_eq "the exit file says 7" 7 "$(exit_field exit_code)"
	assert_eq "output before and after the starter's death is logged" "stdout F before|stdout F after" \
		"$(log_records "$LOG" | tr '\n' '|' | sed 's/|$//')"
}

# huskd blocks SIGTERM and SIGINT for gRPC's threads, a background job
# ignores SIGINT/SIGQUIT, and a starter that ignores SIGCHLD would leave the
# monitor without exit statuses: none of it may reach the monitor or the
# container.
t_signal_state() {
	local args
	BUNDLE=$(new_bundle)
	spec_args grep -E '^Sig(Blk|Ign):' /proc/self/status
	CID=$(new_id)
	LOG=$WORK/$CID.log
	EXIT_FILE=$EXIT_DIR/$CID
	defer "kill_monitor $CID"
	mapfile -t args < <(monitor_args "$CID")
	SYNC=$("${SIGNAL_STARTER[@]}" "INT QUIT PIPE HUP CHLD" "TERM INT CHLD" "$MONITOR" "${args[@]}")
	CPID=$(printf '%s' "$SYNC" | json_get pid 2>/dev/null)
	if [ -z "$CPID" ]; then
		not_ok "a starter with signals blocked and ignored starts the monitor" "report: $SYNC"
		return
	fi
	start_ctr "$CID"
	if wait_exit_file; then
		ok "the exit status reaches the monitor though its starter ignored SIGCHLD"
	else
		not_ok "the exit status reaches the monitor though its starter ignored SIGCHLD"
	fi
	assert_eq "the container's process has no signal blocked or ignored" \
		"stdout F SigBlk:\t0000000000000000|stdout F SigIgn:\t0000000000000000" \
		"$(log_records "$LOG" | tr '\t\n' '\001|' | sed 's/|$//; s/\x01/\\t/g')"
}

# ReopenContainerLog: kubelet renames the file, then asks for a reopen;
# the monitor answers in EXIT_DIR/ID.reopen, with the error when it failed.
t_log_reopen() {
	local dir answer first
	dir=$(new_tmpdir reopen)/logs
	mkdir "$dir"
	BUNDLE=$(new_bundle)
	spec_args sh -c 'echo one; while [ ! -e /next ]; do sleep 0.05; done; echo two
		while [ ! -e /last ]; do sleep 0.05; done; echo three'
	start_monitor --log-path "$dir/ctr.log"
	LOG=$dir/ctr.log
	assert_created "monitor for the reopen test" || return
	start_ctr "$CID"
	wait_log_contains "$LOG" one 10
	mv "$LOG" "$LOG.1"
	kill -USR1 "$MPID"
	if wait_file "$LOG" 5; then
		ok "SIGUSR1 creates the log file again at its path"
	else
		not_ok "SIGUSR1 creates the log file again at its path"
	fi
	wait_file "$EXIT_FILE.reopen" 5
	answer=$(cat "$EXIT_FILE.reopen" 2>/dev/null)
	assert_match "the monitor answers in EXIT_DIR/ID.reopen, no error" "$answer" '^\{"monotonic_ns": ?[0-9]+\}$'
	touch "$BUNDLE/rootfs/next"
	wait_log_contains "$LOG" two 10

	# The log dir is gone: the reopen fails and the answer says why.
	first=$(json_get monotonic_ns <<<"$answer")
	mv "$dir" "$dir.moved"
	kill -USR1 "$MPID"
	for _ in $(seq 100); do
		answer=$(cat "$EXIT_FILE.reopen" 2>/dev/null)
		[ "$(json_get monotonic_ns <<<"$answer" 2>/dev/null)" != "$first" ] && break
		sleep 0.05
	done
	assert_eq "a failed reopen answers its errno" 2 "$(json_get errno <<<"$answer" 2>/dev/null)"
	assert_eq "and the error, naming the path" "open log file \`$LOG\`: No such file or directory" \
		"$(json_get error <<<"$answer" 2>/dev/null)"
	touch "$BUNDLE/rootfs/last"
	wait_exit_file
	assert_eq "the moved file keeps the old lines" "stdout F one" "$(log_records "$dir.moved/ctr.log.1")"
	assert_eq "new lines go to the new file, and stay there after a failed reopen" "stdout F two|stdout F three" \
		"$(log_records "$dir.moved/ctr.log" 2>&1 | tr '\n' '|' | sed 's/|$//')"
	wait_gone "$MPID" 10
	assert_true "the answer file is removed when the monitor exits" [ ! -e "$EXIT_FILE.reopen" ]
}

# A full disk tears no record: what a short write left of one is cut off
# again, whole records are dropped and counted, and once there is room a
# stderr record says how many.  The log dir is a 64 KiB tmpfs filled up
# while the container writes 300 lines.
t_log_disk_full() {
	local fs=$WORK/logfs records kept noted
	BUNDLE=$(new_bundle)
	# shellcheck disable=SC2016 # expanded by the container's shell
	spec_args sh -c 'i=0; while [ $i -lt 10 ]; do i=$((i + 1)); echo "a $i"; done
		while [ ! -e /fill ]; do sleep 0.05; done
		i=0; while [ $i -lt 300 ]; do i=$((i + 1)); echo "b $i"; done; touch /filled
		while [ ! -e /free ]; do sleep 0.05; done
		i=0; while [ $i -lt 10 ]; do i=$((i + 1)); echo "c $i"; done'
	mkdir -p "$fs"
	if ! mount -t tmpfs -o size=64k husk-test-logfs "$fs"; then
		not_ok "mount a 64 KiB tmpfs for the log"
		return
	fi
	defer "umount -l $fs"
	start_monitor --log-path "$fs/ctr.log"
	LOG=$fs/ctr.log
	assert_created "monitor logging to a small tmpfs" || return
	start_ctr "$CID"
	wait_log_contains "$LOG" "a 10" 10
	dd if=/dev/zero of="$fs/filler" bs=4k 2>/dev/null
	touch "$BUNDLE/rootfs/fill"
	wait_file "$BUNDLE/rootfs/filled" 10
	# The monitor reads the pipe's last lines while the disk is still full.
	sleep 1
	rm -f "$fs/filler"
	touch "$BUNDLE/rootfs/free"
	wait_exit_file || {
		not_ok "the container exits" "$(cat "$WORK/$CID.mlog" 2>/dev/null)"
		return
	}
	records=$(log_records "$LOG")
	assert_not_contains "every record parses, none is torn" "$records" BAD
	assert_eq "the lines before the disk filled are all there" "$(seq -f 'stdout F a %g' 1 10)" \
		"$(printf '%s\n' "$records" | grep '^stdout F a ')"
	assert_eq "the lines after it had room again are all there" "$(seq -f 'stdout F c %g' 1 10)" \
		"$(printf '%s\n' "$records" | grep '^stdout F c ')"
	kept=$(printf '%s\n' "$records" | grep -c '^stdout F b ')
	noted=$(printf '%s\n' "$records" | sed -n 's/^stderr F husk-monitor: \([0-9]*\) log records were dropped: No space left on device$/\1/p')
	assert_match "one stderr record says how many were dropped" "$noted" '^[1-9][0-9]*$'
	assert_eq "the lines kept and those said dropped add up to the 300 written" 300 "$((kept + ${noted:-0}))"
	assert_eq "the kept lines are the first ones, in order" "$(seq -f 'stdout F b %g' 1 "$kept")" \
		"$(printf '%s\n' "$records" | grep '^stdout F b ')"
	assert_contains "the monitor's own log names the file and the error" "$(cat "$WORK/$CID.mlog")" \
		"write log file \`$LOG\`: No space left on device; dropping output"
	diag "disk full: $kept of 300 lines kept, ${noted:-0} dropped and noted"
}

t_long_lines() {
	local sizes
	BUNDLE=$(new_bundle)
	# 102400 bytes = 6 x 16384 + 4096, with its newline.
	spec_args sh -c 'head -c 102400 /dev/zero | tr "\0" a; echo; echo short'
	start_monitor
	assert_created "monitor for a 100 KB line" || return
	start_ctr "$CID"
	wait_exit_file
	sizes=$(log_records "$LOG" --sizes | tr '\n' '|' | sed 's/|$//')
	assert_eq "a 100 KB line is six 16 KiB P records and an F with the rest" \
		"stdout P 16384|stdout P 16384|stdout P 16384|stdout P 16384|stdout P 16384|stdout P 16384|stdout F 4096|stdout F 5" \
		"$sizes"
	assert_eq "joined, the records give back the line" "102407 [10, 97, 104, 111, 114, 115, 116]" \
		"$(log_joined_summary "$LOG")"

	BUNDLE=$(new_bundle)
	spec_args sh -c 'head -c 102400 /dev/zero | tr "\0" b'
	start_monitor
	assert_created "monitor for a 100 KB output without newline" || return
	start_ctr "$CID"
	wait_exit_file
	sizes=$(log_records "$LOG" --sizes | tr '\n' '|' | sed 's/|$//')
	assert_eq "without a newline at exit, the last chunk stays P (no newline is invented)" \
		"stdout P 16384|stdout P 16384|stdout P 16384|stdout P 16384|stdout P 16384|stdout P 16384|stdout P 4096" \
		"$sizes"
	assert_eq "joined, exactly the bytes written" "102400 [98]" "$(log_joined_summary "$LOG")"
}

t_stdin() {
	BUNDLE=$(new_bundle)
	printf 'line1\nline2\n' >"$WORK/input"
	spec_args sh -c 'cat; echo "eof seen"'
	start_monitor --stdin --stdin-fd 0 <"$WORK/input"
	assert_created "monitor with --stdin --stdin-fd 0" || return
	start_ctr "$CID"
	wait_exit_file || {
		not_ok "stdin is closed at the source's EOF (StdinOnce)" "the container did not exit"
		return
	}
	assert_eq "--stdin-fd is copied to the container's stdin, then closed" \
		"stdout F line1|stdout F line2|stdout F eof seen" "$(log_records "$LOG" | tr '\n' '|' | sed 's/|$//')"

	BUNDLE=$(new_bundle)
	spec_args sh -c 'readlink /proc/self/fd/0'
	start_monitor --stdin
	assert_created "monitor with --stdin alone" || return
	start_ctr "$CID"
	wait_exit_file
	assert_match "--stdin alone: stdin is a pipe the monitor keeps open (for attach)" "$(log_records "$LOG")" \
		'^stdout F pipe:\[[0-9]+\]$'

	BUNDLE=$(new_bundle)
	spec_args sh -c 'readlink /proc/self/fd/0'
	start_monitor
	assert_created "monitor without --stdin" || return
	start_ctr "$CID"
	wait_exit_file
	assert_eq "without --stdin, stdin is /dev/null" "stdout F /dev/null" "$(log_records "$LOG")"
}

t_terminal() {
	BUNDLE=$(new_bundle)
	spec_set 'c["process"]["terminal"] = True'
	spec_args sh -c 'tty; echo hi; echo err >&2'
	start_monitor --terminal
	assert_created "monitor with --terminal (console socket)" || return
	start_ctr "$CID"
	wait_exit_file
	assert_eq "the pty's output is logged as stdout, \\r kept" "stdout F /dev/pts/0\\r|stdout F hi\\r|stdout F err\\r" \
		"$(log_records "$LOG" | tr '\n' '|' | sed 's/|$//')"
	assert_eq "terminal: exit code 0" 0 "$(exit_field exit_code)"
}

t_fds() {
	local leaks fds
	BUNDLE=$(new_bundle)
	spec_wait_release
	exec 7>"$WORK/starter-only-file"
	start_monitor
	exec 7>&-
	assert_created "monitor for the fd checks" || return
	leaks=$(fd_targets "$MPID" | grep -c starter-only-file)
	assert_eq "the monitor keeps no fd of its starter" 0 "$leaks"
	start_ctr "$CID"
	wait_file "$BUNDLE/rootfs/started" 10
	fds=$(fd_numbers "$CPID")
	assert_eq "the container gets exactly stdin, stdout and stderr" "0 1 2 " "$fds"
	assert_eq "its stdout and stderr are pipes" "pipe pipe" \
		"$(readlink "/proc/$CPID/fd/1" "/proc/$CPID/fd/2" | cut -d: -f1 | tr '\n' ' ' | sed 's/ $//')"
	touch "$BUNDLE/rootfs/release"
	wait_exit_file
	assert_eq "exit 0 after release" 0 "$(exit_field exit_code)"
}

t_create_error() {
	local out rc
	BUNDLE=$WORK/no-such-bundle
	start_monitor
	assert_rc "the starter side exits 0 even when create fails" 0 "$RC"
	assert_contains "a failed create is reported as {\"error\": ...}" "$SYNC" '"error"'
	assert_contains "the error names the runtime's create" "$SYNC" "create $CID"
	wait_gone "$(cat "$WORK/$CID.mpid" 2>/dev/null || echo 0)" 5
	assert_true "no exit file for a container that never ran" [ ! -e "$EXIT_FILE" ]
	assert_true "the monitor is gone (its pid file too)" [ ! -e "$WORK/$CID.mpid" ]

	out=$("$MONITOR" --bundle /x --log-path /x --exit-dir /x 2>&1)
	rc=$?
	assert_rc "a missing --id is a usage error" 2 "$rc"
	assert_eq "and says so in one line" "husk-monitor: --id is required (see --help)" "$out"
	out=$("$MONITOR" --id a --bundle /x --log-path /x --exit-dir /x --runtime /no/such/runtime 2>&1)
	assert_contains "a missing runtime is refused before detaching" "$out" "/no/such/runtime"
	out=$("$MONITOR" --help)
	assert_contains "--help prints the usage" "$out" "usage: husk-monitor"
	out=$("$MONITOR" --version)
	assert_match "--version prints the version" "$out" '^husk-monitor [0-9]+\.[0-9]+\.[0-9]+$'
}

# OOM needs a memory controller, on the v2 hierarchy or a v1 one.
t_oom() {
	local mount
	for mount in /sys/fs/cgroup /sys/fs/cgroup/unified; do
		[ "$(stat -f -c %T "$mount" 2>/dev/null)" = cgroup2fs ] && break
	done
	if ! grep -qw memory "$mount/cgroup.controllers" 2>/dev/null \
		&& ! awk '$3 == "cgroup" && $4 ~ /(^|,)memory(,|$)/ { f = 1 } END { exit !f }' /proc/mounts; then
		skip "OOM kill is recorded in the exit file" "no memory controller on this host"
		return
	fi
	BUNDLE=$(new_bundle)
	spec_set 'c["linux"].setdefault("resources", {})["memory"] = {"limit": 16777216, "swap": 16777216}'
	spec_args dd if=/dev/zero of=/dev/null bs=64M count=1
	start_monitor
	assert_created "monitor with a 16 MiB memory limit" || return
	start_ctr "$CID"
	wait_exit_file
	assert_eq "OOM kill: oom_killed true" True "$(exit_field oom_killed)"
	assert_eq "OOM kill: signal 9" 9 "$(exit_field signal)"
}

# ---------------------------------------------------------------- attach

ATTACH_CLIENT=$(dirname "$0")/attach_client.py
ATTACH_PIDS=()

# Starts an attach client of $SOCK in the background, its JSON going to
# $WORK/$CID.NAME.json; waits until it is connected.
attach_bg() { # NAME STEPS...
	local name=$1
	shift
	rm -f "$WORK/$CID.$name.ready"
	"$PY" "$ATTACH_CLIENT" "$SOCK" "ready:$WORK/$CID.$name.ready" "$@" >"$WORK/$CID.$name.json" 2>"$WORK/$CID.$name.err" &
	ATTACH_PIDS+=($!)
	wait_file "$WORK/$CID.$name.ready" 10 || not_ok "attach client $name connects" "$(cat "$WORK/$CID.$name.err")"
}

attach_field() { # NAME FIELD
	json_get "$2" <"$WORK/$CID.$1.json" 2>/dev/null
}

# Waits for the clients attach_bg started.
attach_wait() {
	[ ${#ATTACH_PIDS[@]} -gt 0 ] && wait "${ATTACH_PIDS[@]}"
	ATTACH_PIDS=()
}

# Starts a monitor with an attach socket (and EXTRA ARGS), as start_monitor.
start_attached() { # [EXTRA MONITOR ARGS...]
	SOCK=$WORK/$$.$RANDOM.attach
	start_monitor --attach-socket "$SOCK" "$@"
}

t_attach_streams() {
	local name
	BUNDLE=$(new_bundle)
	spec_args sh -c 'echo out1; echo err1 >&2; sleep 0.2; echo out2; exit 5'
	start_attached
	assert_created "monitor with --attach-socket" || return
	assert_eq "the attach socket is a socket of mode 0600" "socket 600" "$(stat -c '%F %a' "$SOCK" 2>&1 | sed 's/^socket.* /socket /')"
	attach_bg one
	attach_bg two
	start_ctr "$CID"
	wait_exit_file || {
		not_ok "the attached container exits" "$(cat "$WORK/$CID.mlog" 2>/dev/null)"
		return
	}
	attach_wait
	for name in one two; do
		assert_eq "client $name: stdout arrives as stream 1" "$(printf 'out1\nout2\n')" "$(attach_field $name stdout)"
		assert_eq "client $name: stderr arrives as stream 2" "err1" "$(attach_field $name stderr)"
		assert_eq "client $name: the exit message carries exit code 5" 5 "$(attach_field $name exit)"
		assert_eq "client $name: no message of an unknown type" 0 "$(attach_field $name bad)"
	done
	assert_eq "the log still has every record" "stdout F out1|stderr F err1|stdout F out2" \
		"$(log_records "$LOG" | tr '\n' '|' | sed 's/|$//')"
	assert_true "the monitor exits" wait_gone "$MPID" 10
	assert_true "the attach socket is gone after the monitor exits" [ ! -e "$SOCK" ]
}

t_attach_stdin() {
	BUNDLE=$(new_bundle)
	spec_args sh -c 'cat; echo "cat done"'
	start_attached --stdin
	assert_created "monitor with --stdin --attach-socket" || return
	attach_bg one 'send:hello\n' 'wait:hello\n' 'send:again\n' 'wait:again\n' close
	start_ctr "$CID"
	wait_exit_file || {
		not_ok "closing stdin through the socket ends cat" "$(cat "$WORK/$CID.mlog" 2>/dev/null)"
		return
	}
	attach_wait
	assert_eq "stdin round trip through cat, then EOF" "$(printf 'hello\nagain\ncat done\n')" "$(attach_field one stdout)"
	assert_eq "the exit message carries 0" 0 "$(attach_field one exit)"
	assert_eq "the exit file says 0" 0 "$(exit_field exit_code)"

	# More than the monitor queues (1 MiB) into a slow reader: the client
	# waits, nothing is lost.
	BUNDLE=$(new_bundle)
	spec_args sh -c 'sleep 0.5; wc -c'
	start_attached --stdin
	assert_created "monitor for a lot of stdin" || return
	attach_bg one bulk:$((8 * 1048576)) close
	start_ctr "$CID"
	wait_exit_file 30
	attach_wait
	assert_eq "8 MiB of stdin through the socket all arrive" $((8 * 1048576)) "$(attach_field one stdout | tr -d ' ')"
}

t_attach_terminal() {
	BUNDLE=$(new_bundle)
	spec_set 'c["process"]["terminal"] = True'
	spec_args sh -c 'read x; stty size; cat; echo "cat done $x"'
	start_attached --terminal --stdin
	assert_created "monitor with --terminal --stdin --attach-socket" || return
	attach_bg one resize:33:91 'send:go\n' 'wait:33 91' close
	start_ctr "$CID"
	wait_exit_file || {
		not_ok "^D through the socket ends cat on the terminal" "$(cat "$WORK/$CID.mlog" 2>/dev/null)"
		return
	}
	attach_wait
	assert_match "resize: stty size shows 33 91 (on stdout, stream 1)" "$(attach_field one stdout)" '33 91'
	assert_match "close stdin on a terminal is ^D: cat ends" "$(attach_field one stdout)" 'cat done go'
	assert_eq "terminal: nothing on stream 2" "" "$(attach_field one stderr)"
	assert_eq "terminal: the exit message carries 0" 0 "$(attach_field one exit)"
}

t_attach_no_stdin() {
	BUNDLE=$(new_bundle)
	spec_args sh -c 'sleep 0.5; readlink /proc/self/fd/0'
	start_attached
	assert_created "monitor without --stdin, with --attach-socket" || return
	attach_bg one 'send:ignored\n' close resize:10:10
	start_ctr "$CID"
	wait_exit_file
	attach_wait
	assert_eq "stdin, close and resize without stdin are ignored: output still comes" /dev/null "$(attach_field one stdout)"
	assert_eq "... and the exit message" 0 "$(attach_field one exit)"

	BUNDLE=$(new_bundle)
	spec_args sh -c 'sleep 1; echo still here'
	mkdir -p "$WORK/$(printf 'd%.0s' {1..100})"
	SOCK=$WORK/$(printf 'd%.0s' {1..100})/attach.sock
	start_monitor --attach-socket "$SOCK"
	assert_created "monitor for a client that breaks the protocol, socket path of ${#SOCK} bytes" || return
	attach_bg bad raw:09ff
	attach_bg good
	start_ctr "$CID"
	wait_exit_file
	attach_wait
	assert_eq "a message of an unknown type drops that client" "" "$(attach_field bad exit)"
	assert_eq "... and no other" 0 "$(attach_field good exit)"
}

# A client that never reads is dropped when its socket is full: the
# container, the log and the other clients go on.
t_attach_slow_client() {
	local size=$((24 * 1024 * 1024)) started took
	BUNDLE=$(new_bundle)
	spec_args sh -c "head -c $size /dev/zero | tr '\\0' x; echo; echo end"
	start_attached
	assert_created "monitor with a lot of output" || return
	attach_bg stuck "hold:$WORK/$CID.release"
	attach_bg reader
	started=$(date +%s%N)
	start_ctr "$CID"
	wait_exit_file 30 || {
		not_ok "a client that never reads does not block the container" "$(cat "$WORK/$CID.mlog" 2>/dev/null)"
		return
	}
	took=$((($(date +%s%N) - started) / 1000000))
	diag "$((size / 1048576)) MiB through the monitor with a stuck and a reading client: ${took} ms"
	touch "$WORK/$CID.release"
	attach_wait
	assert_eq "the log has every byte" "$((size + 5)) [10, 100, 101, 110, 120]" "$(log_joined_summary "$LOG")"
	assert_eq "the stuck client was dropped: no exit message" "" "$(attach_field stuck exit)"
	assert_true "the stuck client got less than all of it" [ "$(attach_field stuck stdout_bytes)" -lt "$size" ]
	diag "stuck client: $(attach_field stuck stdout_bytes) bytes; reading client: $(attach_field reader stdout_bytes) bytes, exit message: $(attach_field reader exit || echo none)"
	assert_eq "messages are at most 1 + 32 KiB" yes "$([ "$(attach_field reader max_message)" -le 32769 ] && echo yes)"
}

for t in t_stdout_stderr_exit_code t_sigkill t_runtime_sealed t_starter_killed t_signal_state t_log_reopen t_log_disk_full t_long_lines t_stdin \
	t_terminal t_fds t_create_error t_oom t_attach_streams t_attach_stdin t_attach_terminal t_attach_no_stdin \
	t_attach_slow_client; do
	run_test "$t"
done
finish
