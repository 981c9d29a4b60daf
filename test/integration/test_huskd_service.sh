#!/usr/bin/env bash
# huskd as a service, driven by husk's crictl-like command-line client
# (test/e2e/cri_cli.py, with crictl's crictl.yaml): every RPC in
# the log at debug with its method, status, duration and ids; a failing
# RPC at warning/error with its cause; what CNI ADD and DEL did; timestamps;
# --log-format json parsing line by line; READY=1, STATUS= and STOPPING=1
# to a NOTIFY_SOCKET (a Python datagram listener standing in for systemd);
# --print-config (defaults, file and flags; read back as a config file);
# a bad config file is one line naming it; the default config path
# /etc/husk/huskd.json (in a mount namespace with an overlay on /etc, so the
# host's /etc is untouched); `make install` into a DESTDIR, its unit file
# checked by systemd-analyze verify.  cri_lib.sh's trap removes what the
# test made, even when it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

STAMP='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z (error|warning|info|debug): '

cri_setup svc
SOCK=$E2E/huskd.sock
C=(cri_cli -r "unix://$SOCK" -i "unix://$SOCK" --timeout 30s)

cat >"$E2E/notify.py" <<'PY'
# A stand-in for systemd's notify socket: each line of each datagram, and
# whether huskd's socket was there when it came.
import os, socket, sys
path, out, served = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
with open(out, "a", buffering=1) as f:
    f.write("listening\n")
    while True:
        data = s.recv(65536).decode()
        there = "yes" if os.path.exists(served) else "no"
        for line in data.split("\n"):
            f.write(f"{line}\tsocket={there}\n")
PY

# HUSKD_STARTER=ignore-sigchld: started by a parent that ignores SIGCHLD.
start_huskd() { # LOG ARGS...: huskd on SOCK, its pid in E2E/huskd.pid
	local log=$1 starter=()
	shift
	[ "${HUSKD_STARTER:-}" = ignore-sigchld ] && starter=("${SIGNAL_STARTER[@]}" CHLD "")
	"${starter[@]}" "$HUSKD" --listen "unix://$SOCK" --root "$E2E/root" --state "$E2E/state" --config "$E2E/config.json" \
		"$@" >"$log" 2>&1 &
	echo $! >"$E2E/huskd.pid"
	for _ in $(seq 100); do
		[ -S "$SOCK" ] && return 0
		kill -0 "$(cat "$E2E/huskd.pid")" 2>/dev/null || break
		sleep 0.1
	done
	not_ok "huskd serves on $SOCK" "$(tail -5 "$log")"
	finish
}

stop_huskd() { # -> huskd's exit status
	local pid rc
	pid=$(cat "$E2E/huskd.pid")
	kill -TERM "$pid"
	wait "$pid"
	rc=$?
	rm -f "$E2E/huskd.pid"
	return $rc
}

# ------------------------------------------------ text log, CNI, notify
"$PY" "$E2E/notify.py" "$E2E/notify.sock" "$E2E/notify.out" "$SOCK" &
echo $! >"$E2E/notify.pid"
disown # the trap kills it: no job notice
for _ in $(seq 50); do grep -q listening "$E2E/notify.out" 2>/dev/null && break; sleep 0.1; done
NOTIFY_SOCKET=$E2E/notify.sock start_huskd "$E2E/huskd.log" --log-level debug
cat >"$E2E/pod.json" <<JSON
{"metadata": {"name": "svc-pod", "namespace": "svc-ns", "uid": "svc-$$"}, "log_directory": "$E2E/logs"}
JSON
# The README's /etc/crictl.yaml, pointed at this huskd: its lines as the
# README gives them, read by the client as crictl reads that file.
sed -n '/^runtime-endpoint:/,/^timeout:/p' "$REPO_DIR/README.md" | sed "s|unix:///run/husk/husk.sock|unix://$SOCK|" \
	>"$E2E/crictl.yaml"
assert_eq "README.md shows the three lines of /etc/crictl.yaml" 3 "$(wc -l <"$E2E/crictl.yaml")"
out=$(CRI_CONFIG_FILE=$E2E/crictl.yaml cri_cli version 2>&1)
assert_contains "a client with the README's crictl.yaml reaches huskd" "$out" "RuntimeName:  husk"
pod=$("${C[@]}" runp "$E2E/pod.json" 2>"$E2E/cli.err") || not_ok "cri_cli runp" "$(cat "$E2E/cli.err")"
"${C[@]}" inspectp "$pod" >/dev/null
# An event stream, its client gone once huskd has logged its start.
(exec env HUSK_CRI_GEN="$E2E/gen" "$PY" "$REPO_DIR/test/e2e/cri_cli.py" -r "unix://$SOCK" events >/dev/null 2>&1) &
events_pid=$!
for _ in $(seq 150); do
	grep -q 'rpc stream started method=/runtime.v1.RuntimeService/GetContainerEvents' "$E2E/huskd.log" && break
	sleep 0.1
done
kill -TERM "$events_pid"
wait "$events_pid" 2>/dev/null
"${C[@]}" inspect no-such-container >/dev/null 2>&1
"${C[@]}" pull 127.0.0.1:1/svc/none:1 >/dev/null 2>&1
"${C[@]}" stopp "$pod" >/dev/null
"${C[@]}" rmp "$pod" >/dev/null
stop_huskd
assert_eq "huskd exits 0 on SIGTERM" 0 $?
LOG=$(cat "$E2E/huskd.log")

bad=$(grep -Ev "$STAMP" "$E2E/huskd.log")
assert_eq "every log line starts with its time and level" "" "$bad"
assert_match "Version at debug with method, status and duration" "$LOG" \
	"debug: rpc method=/runtime.v1.RuntimeService/Version status=OK duration_ms=[0-9]+\.[0-9]{3}"
assert_match "RunPodSandbox: the id it made and the pod's name" "$LOG" \
	"debug: rpc method=/runtime.v1.RuntimeService/RunPodSandbox status=OK duration_ms=[0-9.]+ name=svc-pod namespace=svc-ns pod_sandbox_id=$pod"
for m in PodSandboxStatus StopPodSandbox RemovePodSandbox; do
	assert_match "$m: its pod_sandbox_id" "$LOG" \
		"debug: rpc method=/runtime.v1.RuntimeService/$m status=OK duration_ms=[0-9.]+ pod_sandbox_id=$pod"
done
assert_match "a failing RPC at warning with its cause" "$LOG" \
	'warning: rpc failed method=/runtime.v1.RuntimeService/ContainerStatus status=NOT_FOUND duration_ms=[0-9.]+ container_id=no-such-container error="container `no-such-container` not found"'
assert_match "a failing pull at warning or error, the image and the registry it could not reach" "$LOG" \
	'(warning|error): rpc failed method=/runtime.v1.ImageService/PullImage status=[A-Z_]+ duration_ms=[0-9.]+ image=127.0.0.1:1/svc/none:1 error="[^"]*127.0.0.1:1'
assert_contains "a stream's start at debug" "$LOG" \
	"debug: rpc stream started method=/runtime.v1.RuntimeService/GetContainerEvents"
assert_match "... and its end when the client goes, at info" "$LOG" \
	"info: rpc failed method=/runtime.v1.RuntimeService/GetContainerEvents status=CANCELLED duration_ms=[0-9.]+ "
assert_match "CNI ADD: network, sandbox, plugins, the pod's address" "$LOG" \
	"info: CNI ADD done network=$NET sandbox_id=$pod netns=[^ ]+ ifname=eth0 plugins=bridge,loopback duration_ms=[0-9.]+ ips=$SUBNET_PREFIX\.[0-9]+/24"
assert_match "CNI DEL: the plugins in reverse" "$LOG" \
	"info: CNI DEL done network=$NET sandbox_id=$pod .*plugins=loopback,bridge duration_ms=[0-9.]+"
NOTES=$(cat "$E2E/notify.out")
assert_match "STATUS while recovering, before READY" "$NOTES" "STATUS=recovering pods and containers under $E2E/root"
assert_contains "READY=1 once the socket is there" "$NOTES" "READY=1	socket=yes"
assert_contains "STATUS says where it serves" "$NOTES" "STATUS=serving CRI v1 on unix://$SOCK"
assert_contains "STOPPING=1 on SIGTERM" "$NOTES" "STOPPING=1"
order=$(grep -oE '^(READY|STOPPING)=1' "$E2E/notify.out" | tr '\n' ' ')
assert_eq "READY before STOPPING, each once" "READY=1 STOPPING=1 " "$order"
assert_true "the socket is removed on stop" test ! -e "$SOCK"

# At info (the default) the OK calls are not logged; failures are.
start_huskd "$E2E/info.log"
"${C[@]}" version >/dev/null
"${C[@]}" inspect no-such-container >/dev/null 2>&1
stop_huskd
INFO=$(cat "$E2E/info.log")
assert_not_contains "at info, no line for an OK call" "$INFO" "RuntimeService/Version"
assert_contains "at info, the failure still" "$INFO" "status=NOT_FOUND"

# Started with SIGCHLD ignored (a supervisor's habit), huskd puts it back to
# the default: the kernel would reap its CNI plugins and runtime processes
# before huskd could read their exit status.
HUSKD_STARTER=ignore-sigchld start_huskd "$E2E/sigchld.log"
ign=$(awk '$1 == "SigIgn:" { print $2 }' "/proc/$(cat "$E2E/huskd.pid")/status")
if [ -n "$ign" ] && [ $((0x$ign & 0x10000)) -eq 0 ]; then
	ok "huskd started with SIGCHLD ignored has it back at the default"
else
	not_ok "huskd started with SIGCHLD ignored has it back at the default" "SigIgn: $ign"
fi
"${C[@]}" version >/dev/null
stop_huskd
assert_eq "and serves and stops cleanly" 0 $?

# A NOTIFY_SOCKET huskd cannot use is a warning, not a failed start.
NOTIFY_SOCKET=relative/notify start_huskd "$E2E/badnotify.log"
"${C[@]}" version >/dev/null
stop_huskd
assert_eq "huskd with a bad NOTIFY_SOCKET serves and stops cleanly" 0 $?
assert_contains "and says why it does not notify" "$(cat "$E2E/badnotify.log")" \
	"warning: NOTIFY_SOCKET \`relative/notify\`: must be an absolute path or an @abstract name: not notifying systemd"

# ------------------------------------------------ JSON lines
start_huskd "$E2E/json.log" --log-level debug --log-format json
"${C[@]}" version >/dev/null
"${C[@]}" inspect no-such-container >/dev/null 2>&1
"${C[@]}" images >/dev/null
stop_huskd
out=$("$PY" - "$E2E/json.log" <<'PY'
import json, re, sys
lines = open(sys.argv[1]).read().splitlines()
objs = []
for n, line in enumerate(lines, 1):
    try:
        objs.append(json.loads(line))
    except ValueError as e:
        print(f"line {n} is not JSON ({e}): {line}")
        sys.exit()
for o in objs:
    if not (isinstance(o.get("msg"), str) and o.get("level") in ("error", "warning", "info", "debug")
            and re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$", o.get("time", ""))):
        print(f"without msg, level or time: {o}")
        sys.exit()
rpcs = [o for o in objs if o["msg"].startswith("rpc")]
ok = [o for o in rpcs if o["method"] == "/runtime.v1.ImageService/ListImages" and o["status"] == "OK"
      and o["level"] == "debug" and isinstance(o["duration_ms"], float)]
failed = [o for o in rpcs if o["method"] == "/runtime.v1.RuntimeService/ContainerStatus"
          and o["status"] == "NOT_FOUND" and o["level"] == "warning"
          and o["container_id"] == "no-such-container" and "not found" in o["error"]]
print(f"{len(lines)} lines, {len(rpcs)} rpc, ok {len(ok)}, failed {len(failed)}")
PY
)
assert_match "--log-format json: every line an object with time, level, msg; RPCs with method, numeric duration, the failure's cause" \
	"$out" "^[0-9]+ lines, [0-9]+ rpc, ok 1, failed 1$"

# ------------------------------------------------ --print-config
echo "{\"cni_conf_dir\": \"$E2E/net.d\", \"stream_port\": \"12345\", \"log_level\": \"warning\"}" >"$E2E/print.json"
"$HUSKD" --config "$E2E/print.json" --root "$E2E/proot" --log-format json --print-config \
	>"$E2E/printed.json" 2>"$E2E/print.err"
assert_eq "--print-config exits 0, nothing on stderr" "0:" "$?:$(cat "$E2E/print.err")"
out=$("$PY" - "$E2E/printed.json" "$E2E" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
e = sys.argv[2]
checks = {
    "flag --root": c["root"] == e + "/proot",
    "flag --log-format": c["log_format"] == "json",
    "file cni_conf_dir": c["cni_conf_dir"] == e + "/net.d",
    "file stream_port": c["stream_port"] == "12345",
    "file log_level": c["log_level"] == "warning",
    "default listen": c["listen"] == "unix:///run/husk/husk.sock",
    "default state": c["state"] == "/run/husk",
    "default stream_token_ttl_s": c["stream_token_ttl_s"] == 60,
    "default cdi_spec_dirs": c["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"],
    "husk runtime found": c["runtimes"]["husk"]["path"].endswith("/husk"),
    "runtime roots under the state": c["runtimes"]["husk"]["root"] == "/run/husk/runtime",
}
print(" ".join(k for k, v in checks.items() if not v) or "all")
PY
)
assert_eq "--print-config: flags, file and defaults" "all" "$out"
"$HUSKD" --config "$E2E/printed.json" --print-config >"$E2E/reprinted.json" 2>&1
assert_eq "the printed config, read back as --config, prints the same" "" \
	"$(diff "$E2E/printed.json" "$E2E/reprinted.json")"

# ------------------------------------------------ bad config files
bad_config() { # NAME CONTENT EXPECTED-LINE
	printf '%s' "$2" >"$E2E/bad.json"
	"$HUSKD" --config "$E2E/bad.json" --listen "unix://$E2E/bad.sock" --root "$E2E/badroot" \
		--state "$E2E/badstate" >"$E2E/bad.out" 2>&1
	local rc=$?
	assert_eq "$1: exit 1, one line naming the file" "1|1|$3" \
		"$rc|$(wc -l <"$E2E/bad.out")|$(cat "$E2E/bad.out")"
}
bad_config "broken JSON" '{"log_level": "debug",' \
	"huskd: $E2E/bad.json: line 1 column 22: string or '}' expected near end of file"
bad_config "unknown key" '{"log_levle": "debug"}' "huskd: $E2E/bad.json: unknown key \`log_levle\`"
bad_config "bad log_format" '{"log_format": "xml"}' "huskd: $E2E/bad.json: log_format \`xml\`: must be text or json"
bad_config "bad log_level" '{"log_level": "loud"}' \
	"huskd: $E2E/bad.json: log_level \`loud\`: must be error, warning, info or debug"
"$HUSKD" --config "$E2E/none.json" >"$E2E/bad.out" 2>&1
assert_eq "a missing --config file: one line naming it" "1|huskd: --config \`$E2E/none.json\`: No such file or directory" \
	"$?|$(cat "$E2E/bad.out")"
assert_true "nothing made by the refused starts" test ! -e "$E2E/badroot" -a ! -e "$E2E/badstate" -a ! -e "$E2E/bad.sock"

# ------------------------------------------------ /etc/husk/huskd.json
# In a mount namespace of its own, an overlay on /etc holds the file: the
# host's /etc is never written.
mkdir -p "$E2E/etc-upper/husk" "$E2E/etc-work"
echo "{\"cni_conf_dir\": \"$E2E/from-default\"}" >"$E2E/etc-upper/husk/huskd.json"
in_etc_overlay() { # COMMAND...
	unshare -m sh -c 'mount --make-rprivate / && mount -t overlay overlay -o "lowerdir=/etc,upperdir=$0/etc-upper,workdir=$0/etc-work" /etc && exec "$@"' "$E2E" "$@"
}
out=$(in_etc_overlay "$HUSKD" --print-config 2>&1 | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["cni_conf_dir"])' 2>&1)
assert_eq "without --config, /etc/husk/huskd.json is read" "$E2E/from-default" "$out"
out=$(in_etc_overlay "$HUSKD" --config "$E2E/print.json" --print-config 2>&1 | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["cni_conf_dir"])' 2>&1)
assert_eq "--config wins over /etc/husk/huskd.json" "$E2E/net.d" "$out"
echo '{"cni_conf_dir": 5}' >"$E2E/etc-upper/husk/huskd.json"
out=$(in_etc_overlay "$HUSKD" --print-config 2>&1)
assert_eq "a bad /etc/husk/huskd.json: one line naming it" \
	"huskd: /etc/husk/huskd.json: cni_conf_dir: must be a string" "$out"
assert_true "the host's /etc is untouched" test ! -e /etc/husk/huskd.json -o -s /etc/husk/huskd.json

# ------------------------------------------------ make install
make -C "$REPO_DIR" --no-print-directory BUILD="$BUILD_DIR" install DESTDIR="$E2E/destdir" >"$E2E/install.log" 2>&1
assert_eq "make install DESTDIR=... succeeds" 0 $?
D=$E2E/destdir/usr/local
missing=""
for f in bin/husk bin/huskd bin/husk-monitor lib/systemd/system/huskd.service share/husk/huskd.json.example; do
	[ -s "$D/$f" ] || missing="$missing $f"
done
assert_eq "the binaries, the unit and the example config are installed" "" "$missing"
missing=""
for f in lib/husk/husk-image lib/husk/husk-hook; do
	[ -x "$D/$f" ] || missing="$missing $f"
done
assert_eq "the debug verbs' and the CDI hooks' programs are installed, executable" "" "$missing"
out=$(env -u HUSK_PLUGIN_DIR "$D/bin/husk" image --help 2>&1)
assert_eq "the installed husk executes its installed husk-image (../lib/husk)" "0" "$?"
assert_contains "husk image --help: the image verbs' usage" "$out" "pull"
unit=$(cat "$D/lib/systemd/system/huskd.service")
assert_contains "the unit is Type=notify" "$unit" "Type=notify"
assert_contains "the unit starts the installed huskd" "$unit" "ExecStart=/usr/local/bin/huskd"
assert_contains "the unit stops huskd only, not the monitors" "$unit" "KillMode=process"
assert_eq "the unit leaves /run/husk in place (no RuntimeDirectory=)" "" "$(grep '^RuntimeDirectory' <<<"$unit")"
sed "s|/usr/local/bin/huskd|$D/bin/huskd|" "$D/lib/systemd/system/huskd.service" >"$E2E/huskd.service"
out=$(systemd-analyze verify "$E2E/huskd.service" 2>&1)
assert_eq "systemd-analyze verify finds nothing to say" "0:" "$?:$out"
"$D/bin/huskd" --config "$D/share/husk/huskd.json.example" --print-config >/dev/null 2>"$E2E/example.err"
assert_eq "the example config is one huskd reads" "0:" "$?:$(cat "$E2E/example.err")"

finish
