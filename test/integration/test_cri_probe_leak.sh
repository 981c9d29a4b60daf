#!/usr/bin/env bash
# A huskd SIGKILLed during its start-up runtime probe (cri/config/
# runtime_probe.c) leaves its trial container (a `runc init` waiting for a
# start), the runtime command still running and the trial's cgroups
# /husk-probe-PID-HANDLER in every hierarchy; the next huskd sweeps them
# all before its own probe (cri/config/probe_sweep.c).  The handler is a
# wrapper around runc (husk where runc is not installed) that creates the
# trial, then sleeps once, so the kill lands inside the probe.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

REAL=$(command -v runc || echo "$BUILD_DIR/husk")
cri_setup probeleak
STATE=$E2E/state
SOCK=$E2E/huskd.sock
PID1=
INIT=

# What the test may leave on failure, even of the code under test: the
# trial's processes and cgroups of both huskds.
probe_cleanup() {
	local dir pid
	for dir in $(probe_cgroups "husk-probe-${PID1:-none}-" ; probe_cgroups "husk-probe-$(cat "$E2E/huskd2.pid" 2>/dev/null)-"); do
		for pid in $(cat "$dir"/cgroup.procs 2>/dev/null); do
			[ "$pid" -gt 0 ] && kill -KILL "$pid" 2>/dev/null
		done
		sleep 0.2
		rmdir "$dir" 2>/dev/null
	done
	[ -n "$INIT" ] && kill -KILL "$INIT" 2>/dev/null
}
trap 'probe_cleanup; cri_stop_all; cleanup_all' EXIT

# Directories named PREFIX* at the top of every cgroup hierarchy (v1, v2).
probe_cgroups() { # PREFIX
	local mnt dir
	for mnt in $(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i + 1) ~ /^cgroup2?$/) print $5; break } }' /proc/self/mountinfo); do
		for dir in "$mnt/$1"*; do
			[ -d "$dir" ] && echo "$dir"
		done
	done
}

# Processes whose command line names the probe dir (runtime commands);
# the pattern comes from a file, so grep's own command line does not.
probe_commands() {
	echo "$STATE/probe/" >"$E2E/probe.pattern"
	grep -l -s -F -f "$E2E/probe.pattern" /proc/[0-9]*/cmdline | cut -d/ -f3
}

start_huskd() { # N
	"$HUSKD" --listen "unix://$SOCK" --root "$E2E/root" --state "$STATE" --config "$E2E/config.json" \
		>"$E2E/huskd$1.log" 2>&1 &
	echo $! >"$E2E/huskd$1.pid"
	disown
}

# The handler: creates the trial with the real runtime, then (the first
# time only) sleeps with the probe waiting on it.  Its pids go into *.pid
# files so cri_lib.sh's trap kills them whatever happens.
cat >"$E2E/slow-runtime" <<SH
#!/bin/sh
for a; do
	case \$a in
	create)
		"$REAL" "\$@" || exit \$?
		[ -e "$E2E/slept" ] && exit 0
		echo \$\$ >"$E2E/wrapper.pid"
		sleep 300 &
		echo \$! >"$E2E/sleep.pid"
		: >"$E2E/slept"
		wait
		exit 0
		;;
	esac
done
exec "$REAL" "\$@"
SH
chmod 0755 "$E2E/slow-runtime"
"$PY" - "$E2E" <<'PY'
import json, sys
e2e = sys.argv[1]
path = e2e + "/config.json"
c = json.load(open(path))
c["runtimes"] = {"slow": {"path": e2e + "/slow-runtime", "root": e2e + "/state/slow"}}
json.dump(c, open(path, "w"))
PY

start_huskd 1
PID1=$(cat "$E2E/huskd1.pid")
if ! wait_file "$E2E/slept" 60; then
	not_ok "the first huskd's probe reaches the slow handler's create" "$(tail -5 "$E2E/huskd1.log")"
	finish
fi
INIT=$("$REAL" --root "$STATE/probe/slow/root" state "husk-probe-$PID1" 2>/dev/null | json_get pid)
LEAKED_CGROUPS=$(probe_cgroups "husk-probe-$PID1-slow")
kill -KILL "$PID1"
wait_gone "$PID1" 10
sleep 0.5
assert_true "before the fix's sweep: the killed huskd's trial init $INIT is alive" \
	test -n "$INIT" -a -d "/proc/$INIT"
assert_true "before the fix's sweep: its trial cgroups exist ($(echo "$LEAKED_CGROUPS" | wc -w))" \
	test -n "$LEAKED_CGROUPS"
assert_true "before the fix's sweep: its runtime command is still running" test -n "$(probe_commands)"

start_huskd 2
for _ in $(seq 600); do
	grep -q 'runtime handler `slow`' "$E2E/huskd2.log" && break
	sleep 0.1
done
assert_contains "the second huskd's probe of the handler passes" "$(cat "$E2E/huskd2.log")" \
	'runtime handler `slow` ('
assert_contains "the second huskd logs what it swept" "$(cat "$E2E/huskd2.log")" \
	"swept what a huskd killed during its runtime probe left"
# The probe dir goes once the last handler is probed.
for _ in $(seq 100); do
	[ -e "$STATE/probe" ] || break
	sleep 0.1
done
if [ -n "$INIT" ] && [ -d "/proc/$INIT" ] && ! awk '/^State:/ { exit $2 != "Z" }' "/proc/$INIT/status"; then
	not_ok "the killed huskd's trial init $INIT is gone" "$(tr '\0' ' ' <"/proc/$INIT/cmdline")"
else
	ok "the killed huskd's trial init is gone"
fi
assert_eq "no husk-probe-$PID1-* cgroup is left in any hierarchy" "" "$(probe_cgroups "husk-probe-$PID1-")"
assert_eq "no husk-probe-$(cat "$E2E/huskd2.pid")-* cgroup of the second huskd either" "" \
	"$(probe_cgroups "husk-probe-$(cat "$E2E/huskd2.pid")-")"
assert_eq "no runtime command naming the probe dir is left" "" "$(probe_commands)"
assert_true "the wrapper's sleep (the runtime command's process group) is gone" \
	wait_gone "$(cat "$E2E/sleep.pid")" 5
assert_true "no probe state dir is left ($STATE/probe)" test ! -e "$STATE/probe"
assert_true "the second huskd still serves" kill -0 "$(cat "$E2E/huskd2.pid")"
kill -TERM "$(cat "$E2E/huskd2.pid")"
wait_gone "$(cat "$E2E/huskd2.pid")" 20
finish
