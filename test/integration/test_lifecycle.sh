#!/usr/bin/env bash
# The runtime's command line, end to end: create/start/state/kill/delete,
# run (foreground and detached), list, ps, exec, spec, features, --version,
# --help and --log.  Run alone: RUNTIME=/usr/sbin/runc ./test/integration/test_lifecycle.sh
. "$(dirname "$0")/lib.sh"
require_runtime

t_create_start_stop() {
	local b pid st
	b=$(new_bundle)
	BUNDLE=$b spec_wait_release
	BUNDLE=$b create_ctr
	assert_rc "create succeeds" 0 "$RC" || return
	st=$(rt state "$CID")
	assert_eq "state after create is created" created "$(printf '%s' "$st" | json_get status)"
	pid=$(printf '%s' "$st" | json_get pid)
	if [ -n "$pid" ] && [ "$pid" -gt 0 ] && [ -d "/proc/$pid" ]; then
		ok "created container has a live pid ($pid)"
	else
		not_ok "created container has a live pid" "state: $st"
	fi
	# Give a wrongly started process time to show its side effect.
	sleep 0.3
	if [ -e "$b/rootfs/started" ]; then
		not_ok "process is blocked until start" "/started exists before start"
	else
		ok "process is blocked until start"
	fi
	start_ctr "$CID"
	assert_rc "start succeeds" 0 "$?"
	wait_file "$b/rootfs/started" 5
	assert_true "process runs after start" test -e "$b/rootfs/started"
	assert_eq "state after start is running" running "$(state_of "$CID")"
	touch "$b/rootfs/release"
	if wait_status "$CID" stopped 10; then
		ok "state is stopped after the process exits on its own"
	else
		not_ok "state is stopped after the process exits on its own" "state: $(state_of "$CID")"
	fi
	rt delete "$CID" >/dev/null 2>&1
	assert_rc "delete of a stopped container succeeds" 0 "$?"
	rt state "$CID" >/dev/null 2>&1
	assert_fails "state fails after delete" $?
}

t_state_json() {
	local b st
	b=$(new_bundle)
	BUNDLE=$b spec_wait_release
	BUNDLE=$b create_ctr
	st=$(rt state "$CID")
	local field
	for field in ociVersion id status pid bundle; do
		if printf '%s' "$st" | json_get "$field" >/dev/null 2>&1; then
			ok "state JSON has $field"
		else
			not_ok "state JSON has $field" "state: $st"
		fi
	done
	assert_eq "state id is the container id" "$CID" "$(printf '%s' "$st" | json_get id)"
	assert_eq "state bundle is the absolute bundle path" "$b" "$(printf '%s' "$st" | json_get bundle)"
}

t_run_exit_code() {
	BUNDLE=$(new_bundle)
	spec_args sh -c 'echo out-line; exit 3'
	run_ctr
	assert_rc "run returns the container's exit code (3)" 3 "$RC"
	assert_eq "run passes stdout through" out-line "$OUT"
	rt state "$CID" >/dev/null 2>&1
	assert_fails "foreground run removes the container when it exits" $?
	spec_args true
	run_ctr
	assert_rc "run of true exits 0" 0 "$RC"
	assert_eq "a successful run prints nothing on stderr" "" "$ERR"
}

# A foreground run whose init leaves a process behind (no pid namespace of
# its own, so the kernel does not kill it with the init): the delete that
# ends the run must find the cgroup busy, kill what is in it and remove it
# in every hierarchy, as runc does.
t_run_leftover_process() {
	local pid cgroups
	BUNDLE=$(new_bundle)
	spec_del_ns pid
	spec_args sh -c 'sleep 1000 >/dev/null 2>&1 </dev/null & echo $!'
	run_ctr
	assert_rc "run of an init that leaves a child behind exits 0" 0 "$RC"
	pid=$OUT
	assert_match "the init printed its child's host pid" "$pid" '^[0-9]+$' || return
	assert_true "the child left in the cgroup is killed when the run ends" wait_gone "$pid" 5
	cgroups=$(find /sys/fs/cgroup -maxdepth 6 -type d -name "$CID" 2>/dev/null)
	assert_eq "no cgroup of the container is left in any hierarchy" "" "$cgroups"
}

# The runtime started by a caller that ignores every signal it may, SIGCHLD,
# glibc's own 32 and 33 and the real-time ones too (the raw syscall: Python
# refuses 32 and 33), and blocks SIGTERM and SIGINT (a supervisor, a
# background job).  SIGCHLD ignored has the kernel reap husk's children
# before husk can wait for them: `run` and `exec` hung there until husk put
# it back to the default (crun still hangs; runc does not).
rt_ignoring_signals() { # ARGS...
	timeout -k 5 "$RT_TIMEOUT" "${SIGNAL_STARTER[@]}" all "TERM INT" "$RUNTIME" --root "$ROOT" "$@"
}

t_caller_signals() {
	local b out rc want
	want="SigBlk: 0000000000000000 SigIgn: 0000000000000000"
	b=$(new_bundle)
	BUNDLE=$b spec_args sh -c 'grep -E "^Sig(Blk|Ign):" /proc/self/status; exit 5'
	CID=$(new_id)
	out=$(rt_ignoring_signals run --bundle "$b" "$CID" </dev/null 2>"$WORK/err")
	rc=$?
	assert_rc "run by a caller that ignores SIGCHLD returns the container's exit code (5)" 5 "$rc" ||
		diag "stderr: $(cat "$WORK/err")"
	assert_eq "run's process inherits none of its caller's ignored or blocked signals" "$want" "$(echo $out)"
	rt delete --force "$CID" >/dev/null 2>&1
	b=$(new_bundle)
	BUNDLE=$b spec_args sleep 1000
	BUNDLE=$b create_ctr
	assert_rc "create for the exec" 0 "$RC" || return
	start_ctr "$CID"
	out=$(rt_ignoring_signals exec "$CID" sh -c 'grep -E "^Sig(Blk|Ign):" /proc/self/status; exit 6' </dev/null 2>&1)
	assert_rc "exec by a caller that ignores SIGCHLD returns the process's exit code (6)" 6 "$?"
	assert_eq "exec's process inherits none of its caller's ignored or blocked signals" "$want" "$(echo $out)"
}

t_run_detach() {
	local b
	b=$(new_bundle)
	BUNDLE=$b spec_wait_release
	CID=$(new_id)
	rt run --detach --bundle "$b" "$CID" </dev/null >"$WORK/$CID.out" 2>&1
	assert_rc "run --detach returns at once" 0 "$?" || return
	assert_eq "detached container is running" running "$(state_of "$CID")"
	wait_file "$b/rootfs/started" 5
	assert_true "detached process runs" test -e "$b/rootfs/started"
	touch "$b/rootfs/release"
	wait_status "$CID" stopped 10
	assert_eq "detached container stops when its process exits" stopped "$(state_of "$CID")"
}

t_pid_file() {
	local b pf
	b=$(new_bundle)
	BUNDLE=$b spec_wait_release
	pf=$WORK/pidfile-$$
	BUNDLE=$b create_ctr --pid-file "$pf"
	assert_rc "create --pid-file succeeds" 0 "$RC" || return
	assert_eq "pid file holds the init pid" "$(container_pid "$CID")" "$(cat "$pf" 2>/dev/null)"
}

t_preserve_fds() {
	local b out
	b=$(new_bundle)
	BUNDLE=$b spec_args sh -c 'cat <&3; ls /proc/self/fd'
	echo "through fd 3" >"$WORK/preserved"
	out=$(rt run --bundle "$b" --preserve-fds 1 "$(new_id)" 3<"$WORK/preserved" 2>&1 </dev/null)
	assert_contains "run --preserve-fds 1: fd 3 reaches the container" "$out" "through fd 3"
	out=$(rt run --bundle "$b" "$(new_id)" 3<"$WORK/preserved" 2>&1 </dev/null)
	assert_not_contains "without --preserve-fds fd 3 does not" "$out" "through fd 3"
}

t_no_pivot_and_keyring() {
	local b out
	b=$(new_bundle)
	BUNDLE=$b spec_args ls /
	run_ctr_args() { OUT=$(rt run --bundle "$b" "$@" "$(new_id)" 2>&1 </dev/null); RC=$?; }
	run_ctr_args --no-pivot
	assert_rc "run --no-pivot succeeds" 0 "$RC" || return
	assert_contains "run --no-pivot: the container sees its rootfs as /" "$OUT" "bin"
	assert_not_contains "run --no-pivot: not the host's root" "$OUT" "work"
	out=$(rt run --bundle "$b" --no-new-keyring "$(new_id)" 2>&1 </dev/null)
	assert_rc "run --no-new-keyring succeeds" 0 $?
}

t_kill_term() {
	local b
	b=$(new_bundle)
	# pid 1 ignores signals it has no handler for: install one.
	BUNDLE=$b spec_args sh -c 'trap "touch /got-term; exit 0" TERM; touch /started; while :; do sleep 0.05; done'
	BUNDLE=$b create_ctr
	start_ctr "$CID"
	wait_file "$b/rootfs/started" 5
	rt kill "$CID" TERM
	assert_rc "kill TERM succeeds" 0 "$?"
	wait_file "$b/rootfs/got-term" 5
	assert_true "SIGTERM reaches the container's process" test -e "$b/rootfs/got-term"
	wait_status "$CID" stopped 5
	assert_eq "container stopped after SIGTERM" stopped "$(state_of "$CID")"
}

t_kill_kill() {
	local b pid
	b=$(new_bundle)
	BUNDLE=$b spec_args sleep 1000
	BUNDLE=$b create_ctr
	start_ctr "$CID"
	pid=$(container_pid "$CID")
	rt kill "$CID" 9
	assert_rc "kill 9 (numeric) succeeds" 0 "$?"
	wait_status "$CID" stopped 5
	assert_eq "container stopped after SIGKILL" stopped "$(state_of "$CID")"
	wait_gone "$pid" 5
	assert_true "init process is gone after SIGKILL" wait_gone "$pid" 1
}

t_kill_all() {
	local b pid exec_pid
	b=$(new_bundle)
	BUNDLE=$b spec_args sleep 1000
	BUNDLE=$b create_ctr
	start_ctr "$CID"
	pid=$(container_pid "$CID")
	rt exec --detach --pid-file "$WORK/exec.pid" "$CID" sleep 1001 >/dev/null 2>&1
	exec_pid=$(cat "$WORK/exec.pid" 2>/dev/null)
	rt kill --all "$CID" KILL
	assert_rc "kill --all KILL succeeds" 0 "$?"
	wait_gone "$pid" 5
	assert_true "kill --all kills the init" wait_gone "$pid" 1
	if [ -n "$exec_pid" ] && wait_gone "$exec_pid" 5; then
		ok "kill --all kills the exec'd process too"
	else
		not_ok "kill --all kills the exec'd process too" "exec pid: ${exec_pid:-none}"
	fi
}

t_kill_signal_names() {
	local b
	b=$(new_bundle)
	BUNDLE=$b spec_args sh -c 'trap "echo usr1 >>/sigs" USR1; trap "echo hup >>/sigs" HUP; touch /started; while :; do sleep 0.05; done'
	BUNDLE=$b create_ctr
	start_ctr "$CID"
	wait_file "$b/rootfs/started" 5
	rt kill "$CID" SIGUSR1 >/dev/null 2>&1
	assert_rc "kill SIGUSR1 (SIG prefix) succeeds" 0 "$?"
	wait_file "$b/rootfs/sigs" 5
	rt kill "$CID" HUP >/dev/null 2>&1
	local i=0
	while [ $i -lt 100 ] && [ "$(wc -l <"$b/rootfs/sigs")" -lt 2 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	assert_eq "named signals are delivered" "usr1 hup" "$(tr '\n' ' ' <"$b/rootfs/sigs" 2>/dev/null | sed 's/ $//')"
	rt kill "$CID" NOSUCHSIG >/dev/null 2>&1
	assert_fails "kill with an unknown signal name fails" $?
}

t_delete_force_running() {
	local b pid
	b=$(new_bundle)
	BUNDLE=$b spec_args sleep 1000
	BUNDLE=$b create_ctr
	start_ctr "$CID"
	pid=$(container_pid "$CID")
	rt delete "$CID" >/dev/null 2>&1
	assert_fails "delete without --force refuses a running container" $?
	rt delete --force "$CID"
	assert_rc "delete --force of a running container succeeds" 0 "$?"
	rt state "$CID" >/dev/null 2>&1
	assert_fails "state fails after delete --force" $?
	assert_true "the process is gone after delete --force" wait_gone "$pid" 5
	assert_eq "no state left under --root" "" "$(ls -A "$ROOT" | grep -F "$CID")"
}

t_delete_created() {
	local b pid
	b=$(new_bundle)
	BUNDLE=$b create_ctr
	pid=$(container_pid "$CID")
	rt delete --force "$CID" >/dev/null 2>&1
	assert_rc "delete --force of a created container succeeds" 0 "$?"
	assert_true "its init process is gone" wait_gone "$pid" 5
}

t_list() {
	local b1 b2 id1 id2 out
	b1=$(new_bundle)
	b2=$(new_bundle)
	BUNDLE=$b1 spec_args sleep 1000
	BUNDLE=$b1 create_ctr
	id1=$CID
	start_ctr "$id1"
	BUNDLE=$b2 create_ctr
	id2=$CID
	out=$(rt list)
	assert_contains "list table has a header" "$out" "STATUS"
	assert_match "list shows the running container" "$out" "^$id1 +[0-9]+ +running"
	assert_match "list shows the created container" "$out" "^$id2 +[0-9]+ +created"
	out=$(rt list -q | sort | tr '\n' ' ')
	assert_eq "list -q prints only the ids" "$(printf '%s\n' "$id1" "$id2" | sort | tr '\n' ' ')" "$out"
	out=$(rt list --format json)
	local parsed
	parsed=$(printf '%s' "$out" | "$PY" -c '
import json, sys
for c in sorted(json.load(sys.stdin), key=lambda c: c["id"]):
    print(c["id"], c["status"], c["pid"] > 0, c["bundle"])' 2>&1)
	assert_eq "list --format json has id, status, pid and bundle" \
		"$(printf '%s\n' "$id1 running True $b1" "$id2 created True $b2" | sort)" "$(printf '%s\n' "$parsed" | sort)"
}

t_list_empty() {
	local out
	out=$(rt list --format json)
	assert_rc "list on an empty root succeeds" 0 "$?"
	assert_eq "list --format json on an empty root is an empty array" "[]" "$(printf '%s' "$out" | tr -d ' \n')"
}

t_ps() {
	local b pid out
	b=$(new_bundle)
	BUNDLE=$b spec_args sleep 1000
	BUNDLE=$b create_ctr
	start_ctr "$CID"
	pid=$(container_pid "$CID")
	out=$(rt ps "$CID")
	assert_rc "ps succeeds" 0 "$?"
	assert_contains "ps table has a PID column" "$out" "PID"
	assert_match "ps table lists the init pid" "$out" "\\b$pid\\b"
	out=$(rt ps --format json "$CID")
	assert_eq "ps --format json lists the pids" "[$pid]" "$(printf '%s' "$out" | tr -d ' \n')"
}

t_duplicate_id() {
	local b id pid
	b=$(new_bundle)
	BUNDLE=$b spec_args sleep 1000
	BUNDLE=$b create_ctr
	id=$CID
	pid=$(container_pid "$id")
	rt create --bundle "$b" "$id" </dev/null >/dev/null 2>"$WORK/dup.err"
	assert_fails "create with an existing id fails" $?
	assert_eq "the first container is untouched" "created $pid" "$(state_of "$id") $(container_pid "$id")"
}

t_exec() {
	local b out
	b=$(new_bundle)
	BUNDLE=$b spec_args sleep 1000
	BUNDLE=$b spec_set 'c["process"]["env"].append("FROM_CONFIG=yes")'
	BUNDLE=$b create_ctr
	start_ctr "$CID"
	out=$(rt exec "$CID" sh -c 'echo exec-ok $FROM_CONFIG' </dev/null 2>&1)
	assert_eq "exec (args form) runs in the container" "exec-ok yes" "$out"
	rt exec "$CID" sh -c 'exit 7' </dev/null >/dev/null 2>&1
	assert_rc "exec returns the process's exit code" 7 "$?"
	out=$(rt exec --env FOO=bar "$CID" sh -c 'echo $FOO' </dev/null 2>&1)
	assert_eq "exec --env" bar "$out"
	out=$(rt exec --cwd /tmp "$CID" pwd </dev/null 2>&1)
	assert_eq "exec --cwd" /tmp "$out"
	out=$(rt exec --user 1000:1000 "$CID" sh -c 'echo $(id -u) $(id -g)' </dev/null 2>&1)
	assert_eq "exec --user 1000:1000" "1000 1000" "$out"
	out=$(rt exec "$CID" readlink /proc/self/ns/pid </dev/null 2>&1)
	assert_eq "exec joins the container's pid namespace" \
		"$(readlink "/proc/$(container_pid "$CID")/ns/pid")" "$out"
	out=$(rt exec "$CID" sh -c 'echo $$' </dev/null 2>&1)
	if [ -n "$out" ] && [ "$out" != 1 ] && [ "$out" -lt 1000 ] 2>/dev/null; then
		ok "exec'd process has a container pid ($out)"
	else
		not_ok "exec'd process has a container pid" "got: $out"
	fi
	cat >"$WORK/process.json" <<'EOF'
{
  "terminal": false,
  "user": {"uid": 1000, "gid": 1000},
  "args": ["sh", "-c", "echo $PROC_VAR $(id -u) $(pwd)"],
  "env": ["PATH=/bin", "PROC_VAR=from-process-file"],
  "cwd": "/home/tester"
}
EOF
	out=$(rt exec --process "$WORK/process.json" "$CID" </dev/null 2>&1)
	assert_eq "exec --process FILE" "from-process-file 1000 /home/tester" "$out"
	rt exec "$CID" /no/such/binary </dev/null >/dev/null 2>&1
	assert_fails "exec of a missing binary fails" $?
}

t_exec_detach() {
	local b out pid
	b=$(new_bundle)
	BUNDLE=$b spec_args sleep 1000
	BUNDLE=$b create_ctr
	start_ctr "$CID"
	rt exec --detach --pid-file "$WORK/exec.pid" "$CID" sh -c 'touch /exec-ran; sleep 1000' </dev/null >/dev/null 2>&1
	assert_rc "exec --detach returns at once" 0 "$?"
	pid=$(cat "$WORK/exec.pid" 2>/dev/null)
	if [ -n "$pid" ] && [ -d "/proc/$pid" ]; then
		ok "exec --detach --pid-file names a live process"
	else
		not_ok "exec --detach --pid-file names a live process" "pid file: ${pid:-empty}"
		return
	fi
	assert_eq "the detached exec'd process is in the container's mount namespace" \
		"$(readlink "/proc/$(container_pid "$CID")/ns/mnt")" "$(readlink "/proc/$pid/ns/mnt")"
	wait_file "$b/rootfs/exec-ran" 5
	assert_true "detached exec'd process ran" test -e "$b/rootfs/exec-ran"
}

t_exec_missing() {
	rt exec "h-no-such-container-$$" true </dev/null >/dev/null 2>&1
	assert_fails "exec into a missing container fails" $?
}

t_start_twice() {
	local b
	b=$(new_bundle)
	BUNDLE=$b spec_args sleep 1000
	BUNDLE=$b create_ctr
	start_ctr "$CID"
	rt start "$CID" >/dev/null 2>&1
	assert_fails "start of a running container fails" $?
	rt start "h-no-such-container-$$" >/dev/null 2>&1
	assert_fails "start of a missing container fails" $?
}

t_spec() {
	local d
	d=$(mktemp -d /tmp/husk-it-spec.XXXXXX)
	echo "$d" >>"$WORK/bundles"
	(cd "$d" && "$RUNTIME" spec) >/dev/null 2>&1
	assert_rc "spec succeeds" 0 "$?"
	assert_eq "spec writes a config.json with ociVersion, process.args and root.path" "ok" \
		"$("$PY" -c '
import json, sys
c = json.load(open(sys.argv[1]))
print("ok" if c["ociVersion"] and c["process"]["args"] and c["root"]["path"] else "missing")' "$d/config.json" 2>&1)"
	(cd "$d" && "$RUNTIME" spec) >/dev/null 2>&1
	assert_fails "spec refuses to overwrite an existing config.json" $?
	mkdir "$d/other"
	"$RUNTIME" spec --bundle "$d/other" >/dev/null 2>&1
	assert_true "spec --bundle DIR writes DIR/config.json" test -s "$d/other/config.json"
}

t_features() {
	local out
	out=$("$RUNTIME" features 2>&1)
	assert_rc "features succeeds" 0 "$?"
	assert_eq "features prints JSON with ociVersionMin and ociVersionMax" ok "$(printf '%s' "$out" | "$PY" -c '
import json, sys
f = json.load(sys.stdin)
print("ok" if f.get("ociVersionMin") and f.get("ociVersionMax") else "missing")' 2>&1)"
}

t_version_help() {
	local out
	out=$("$RUNTIME" --version 2>&1)
	assert_rc "--version exits 0" 0 "$?"
	assert_match "--version prints a version" "$out" "[0-9]+\.[0-9]+"
	out=$("$RUNTIME" --help 2>&1)
	assert_rc "--help exits 0" 0 "$?"
	assert_contains "--help mentions create" "$out" "create"
	"$RUNTIME" no-such-command >/dev/null 2>&1
	assert_fails "an unknown command fails" $?
}

t_log_json() {
	local log out bad
	log=$WORK/runtime.log
	rt --log "$log" --log-format json state "h-no-such-container-$$" >/dev/null 2>&1
	assert_fails "state of a missing container fails" $?
	if [ ! -s "$log" ]; then
		not_ok "--log FILE receives the error" "log file is empty or missing"
		return
	fi
	ok "--log FILE receives the error"
	bad=$("$PY" -c '
import json, sys
for n, line in enumerate(open(sys.argv[1]), 1):
    if not line.strip(): continue
    try:
        json.loads(line)
    except ValueError:
        print("line %d: %s" % (n, line.strip()))' "$log")
	assert_eq "--log-format json writes one JSON object per line" "" "$bad"
	out=$(cat "$log")
	assert_contains "the JSON log names the missing container" "$out" "h-no-such-container-$$"
}

for t in t_create_start_stop t_state_json t_run_exit_code t_run_leftover_process t_caller_signals t_run_detach t_pid_file t_preserve_fds t_no_pivot_and_keyring \
	t_kill_term t_kill_kill t_kill_all t_kill_signal_names t_delete_force_running \
	t_delete_created t_list t_list_empty t_ps t_duplicate_id t_exec t_exec_detach \
	t_exec_missing t_start_twice t_spec t_features t_version_help t_log_json; do
	run_test "$t"
done
finish
