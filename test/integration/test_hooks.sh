#!/usr/bin/env bash
# OCI hooks: the six kinds run in order, at the right moment and in the right
# namespaces, each with the state JSON on stdin; a failing or hung hook
# fails the operation and leaves nothing behind.
# Run alone: RUNTIME=/usr/sbin/runc ./test/integration/test_hooks.sh
. "$(dirname "$0")/lib.sh"
require_runtime

# The hook: logs "KIND status=.. pid=.. live=.. mnt=.. write=.. env=.." to LOG and
# keeps its stdin as LOG.KIND.json.  With "write-rootfs" it also creates
# BUNDLE/rootfs/hook-was-here.  Plain POSIX sh, no jq: it runs on the host
# (dash) and, for startContainer, inside the container (busybox).
write_hook() { # PATH
	cat >"$1" <<'EOF'
#!/bin/sh
kind=$1 log=$2 mode=${3:-}
json=$(cat)
printf '%s\n' "$json" >"$log.$kind.json"
field() {
	printf '%s' "$json" | tr -d '\n' | sed -n "s/.*\"$1\" *: *\"\{0,1\}\([^\",}]*\).*/\1/p"
}
pid=$(field pid)
live=no
[ -n "$pid" ] && [ -d "/proc/$pid" ] && live=yes
write=none
if [ "$mode" = write-rootfs ]; then
	write=failed
	echo hook 2>/dev/null >"$(field bundle)/rootfs/hook-was-here" && write=ok
fi
echo "$kind status=$(field status) pid=$pid live=$live mnt=$(readlink /proc/self/ns/mnt) write=$write env=${HOOK_VAR:-}" >>"$log"
EOF
	chmod 0755 "$1"
}

log_field() { # LOG KIND FIELD -> value of FIELD= on KIND's line
	awk -v k="$2" -v f="$3=" '$1 == k { for (i = 2; i <= NF; i++) if (index($i, f) == 1) print substr($i, length(f) + 1) }' "$1"
}

kinds_in() { # LOG
	awk '{print $1}' "$1" 2>/dev/null | tr '\n' ' ' | sed 's/ $//'
}

# Sets logdir, log, hook and b: a log dir the container sees as /hooklog,
# the hook script on the host and in a new bundle's rootfs.
hook_bundle() {
	logdir=$(new_tmpdir hooklog)
	chmod 0777 "$logdir"
	log=$logdir/log
	hook=$logdir/hook.sh
	write_hook "$hook"
	b=$(new_bundle)
	cp "$hook" "$b/rootfs/hook.sh"
	BUNDLE=$b spec_mount /hooklog bind "$logdir" bind
}

t_all_hooks() {
	local b logdir log hook pid kind
	hook_bundle
	BUNDLE=$b spec_set '
hook, log = A
def h(kind, path=hook, logpath=log, *extra):
    return [{"path": path, "args": ["hook.sh", kind, logpath] + list(extra), "env": ["HOOK_VAR=" + kind]}]
c["root"]["readonly"] = True
c["hooks"] = {
  "prestart": h("prestart"),
  "createRuntime": h("createRuntime"),
  "createContainer": h("createContainer", hook, log, "write-rootfs"),
  # startContainer runs inside the container: paths as seen there.
  "startContainer": h("startContainer", "/hook.sh", "/hooklog/log"),
  "poststart": h("poststart"),
  "poststop": h("poststop"),
}' "$hook" "$log"
	BUNDLE=$b spec_args sh -c 'cat /hook-was-here >/hooklog/inside; touch /hooklog/started; sleep 1000'
	BUNDLE=$b create_ctr
	assert_rc "hooks: create succeeds" 0 "$RC" || return
	pid=$(container_pid "$CID")
	assert_eq "hooks on create: prestart, createRuntime, createContainer in order" \
		"prestart createRuntime createContainer" "$(kinds_in "$log")"
	for kind in prestart createRuntime; do
		assert_eq "$kind sees the container's host pid" "$pid" "$(log_field "$log" "$kind" pid)"
		assert_eq "$kind: that pid exists on the host" yes "$(log_field "$log" "$kind" live)"
	done
	assert_eq "createRuntime runs in the runtime's mount namespace" "$(host_ns mnt)" "$(log_field "$log" createRuntime mnt)"
	assert_eq "createContainer runs in the container's mount namespace" \
		"$(readlink "/proc/$pid/ns/mnt")" "$(log_field "$log" createContainer mnt)"
	assert_eq "hooks get their env" prestart "$(log_field "$log" prestart env)"
	assert_eq "createContainer can still write the (readonly) rootfs" ok "$(log_field "$log" createContainer write)"

	start_ctr "$CID"
	assert_rc "hooks: start succeeds" 0 "$?"
	wait_file "$logdir/started" 5
	assert_eq "hooks on start: startContainer then poststart" \
		"prestart createRuntime createContainer startContainer poststart" "$(kinds_in "$log")"
	assert_eq "startContainer runs in the container's mount namespace" \
		"$(readlink "/proc/$pid/ns/mnt")" "$(log_field "$log" startContainer mnt)"
	assert_eq "the file createContainer wrote is visible in the container" hook "$(cat "$logdir/inside" 2>/dev/null)"
	assert_eq "poststart sees the running container's pid" "$pid" "$(log_field "$log" poststart pid)"

	rt delete --force "$CID" >/dev/null 2>&1
	assert_eq "hooks on delete: poststop last" \
		"prestart createRuntime createContainer startContainer poststart poststop" "$(kinds_in "$log")"
	diag "statuses seen: $(awk '{print $1 "=" substr($2, 8)}' "$log" | tr '\n' ' ')"

	local bad
	bad=$("$PY" -c '
import json, sys
log, cid = sys.argv[1], sys.argv[2]
for kind in ["prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"]:
    try:
        s = json.load(open("%s.%s.json" % (log, kind)))
    except Exception as e:
        print("%s: %s" % (kind, e)); continue
    missing = [k for k in ("ociVersion", "id", "status", "bundle") if k not in s]
    if missing or s["id"] != cid:
        print("%s: missing %s, id %s" % (kind, missing, s.get("id")))' "$log" "$CID")
	assert_eq "every hook's stdin is state JSON with ociVersion, id, status and bundle" "" "$bad"
}

# Processes whose command line holds MARKER (none expected).
leftovers() { # MARKER
	pgrep -f -- "$1" | grep -vx "$$" | tr '\n' ' '
}

t_failing_create_runtime() {
	local marker
	marker=husk-it-marker-$RANDOM$RANDOM
	BUNDLE=$(new_bundle)
	spec_set 'c["hooks"] = {"createRuntime": [{"path": "/bin/sh", "args": ["sh", "-c", "echo hook-failing >&2; exit 3"]}]}'
	spec_args sleep "1000.$RANDOM" "$marker"
	create_ctr
	assert_fails "a failing createRuntime hook fails create" "$RC"
	diag "create said: $ERR"
	assert_eq "failed create leaves no state under --root" "" "$(ls -A "$ROOT")"
	rt state "$CID" >/dev/null 2>&1
	assert_fails "failed create: state does not know the container" $?
	assert_eq "failed create leaves no process behind" "" "$(leftovers "$CID")$(leftovers "$marker")"
}

t_hook_timeout() {
	local start elapsed naptime
	naptime=29.$RANDOM
	BUNDLE=$(new_bundle)
	spec_set 'c["hooks"] = {"createRuntime": [{"path": "/bin/sleep", "args": ["sleep", A[0]], "timeout": 1}]}' "$naptime"
	spec_args sleep 1000
	start=$(date +%s)
	create_ctr
	elapsed=$(($(date +%s) - start))
	assert_fails "a hook past its timeout fails create" "$RC"
	if [ "$elapsed" -le 6 ]; then
		ok "the hook was stopped at its timeout (${elapsed}s)"
	else
		not_ok "the hook was stopped at its timeout" "create took ${elapsed}s for a 1s timeout"
	fi
	assert_eq "timed-out hook: no state under --root" "" "$(ls -A "$ROOT")"
	sleep 0.2
	assert_eq "timed-out hook: the hook process was killed" "" "$(leftovers "sleep $naptime")"
	assert_eq "timed-out hook: no container process left" "" "$(leftovers "$CID")"
}

# runtime-spec: a failing poststart hook is a warning; the lifecycle goes on.
t_failing_poststart() {
	BUNDLE=$(new_bundle)
	spec_set 'c["hooks"] = {"poststart": [{"path": "/bin/false"}], "prestart": [{"path": "/bin/true"}]}'
	spec_args sleep 1000
	create_ctr
	assert_rc "a container with a failing poststart hook is created" 0 "$RC" || return
	start_ctr "$CID"
	assert_rc "a failing poststart hook does not fail start" 0 "$?"
	assert_eq "after a failing poststart hook the container runs" running "$(state_of "$CID")"
	rt delete --force "$CID" >/dev/null 2>&1
	assert_eq "after a failing poststart, delete --force cleans up" "" "$(ls -A "$ROOT")"
}

# run: with a poststart hook, the hook runs after the process started
# (husk keeps the exec fifo and start for it); without one, run starts the
# process without the fifo.  Either way every hook runs, in order, and run
# returns the process's exit code.
t_run_hooks() {
	local logdir log hook b
	hook_bundle
	BUNDLE=$b spec_set '
hook, log = A
def h(kind, path=hook, logpath=log):
    return [{"path": path, "args": ["hook.sh", kind, logpath]}]
c["hooks"] = {"prestart": h("prestart"), "startContainer": h("startContainer", "/hook.sh", "/hooklog/log"),
              "poststart": h("poststart"), "poststop": h("poststop")}' "$hook" "$log"
	BUNDLE=$b spec_args sh -c 'touch /hooklog/ran; exit 7'
	BUNDLE=$b run_ctr
	assert_rc "run with a poststart hook returns the process's exit code" 7 "$RC"
	assert_true "run with a poststart hook: the process ran" test -e "$logdir/ran"
	assert_eq "run with a poststart hook: every hook, in order" \
		"prestart startContainer poststart poststop" "$(kinds_in "$log")"
	assert_eq "run with a poststart hook leaves nothing under --root" "" "$(ls -A "$ROOT")"

	rm -f "$log" "$logdir/ran"
	BUNDLE=$b spec_set 'del c["hooks"]["poststart"]'
	BUNDLE=$b run_ctr
	assert_rc "run without a poststart hook returns the process's exit code" 7 "$RC"
	assert_true "run without a poststart hook: the process ran" test -e "$logdir/ran"
	assert_eq "run without a poststart hook: the other hooks, in order" \
		"prestart startContainer poststop" "$(kinds_in "$log")"
	assert_eq "run without a poststart hook leaves nothing under --root" "" "$(ls -A "$ROOT")"
}

for t in t_all_hooks t_failing_create_runtime t_hook_timeout t_failing_poststart t_run_hooks; do
	run_test "$t"
done
finish
