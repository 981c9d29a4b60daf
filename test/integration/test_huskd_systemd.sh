#!/usr/bin/env bash
# huskd.service under a real systemd (Debian's, 252): this machine's PID 1 is
# not systemd, so the test boots one as PID 1 of namespaces of its own
# (pid, mount, net, uts, ipc, cgroup) over an overlay of / whose upper layer
# is a tmpfs: what `make install` put in a DESTDIR is copied into it, and
# nothing is written to the host's files.  Its cgroups are subtrees of the
# test's own (in every hierarchy), removed at the end.  Checked with
# systemctl and husk's crictl-like client (test/e2e/cri_cli.py) inside: the
# Type=notify unit is active only once huskd says READY=1, with its STATUS=; a host-network pod survives
# `systemctl restart huskd` (KillMode=process, /run/husk kept); stop is
# clean (STOPPING=1, Result=success, the socket gone, /run/husk kept); a
# broken /etc/husk/huskd.json fails the start with its one line in
# `systemctl status` and the journal.
. "$(dirname "$0")/lib.sh"

SYSTEMD=/lib/systemd/systemd
SD_CG=husk-sd-test-$$
SD_PID=

if [ ! -x "$SYSTEMD" ] || ! command -v systemctl >/dev/null; then
	echo "not ok - systemd is installed ($SYSTEMD, systemctl)"
	finish
fi

sd_cleanup() {
	local dir
	if [ -n "$SD_PID" ]; then
		# PID 1 of its namespace: every process in it goes with it.
		kill -KILL "$SD_PID" 2>/dev/null
		for _ in $(seq 50); do
			kill -0 "$SD_PID" 2>/dev/null || break
			sleep 0.1
		done
	fi
	for dir in "${SD_HIERARCHIES[@]}"; do
		[ -d "$dir/$SD_CG" ] && find "$dir/$SD_CG" -depth -type d -exec rmdir {} \; 2>/dev/null
	done
}

# Every cgroup hierarchy of the host: the test moves into a cgroup of its
# own in each before the cgroup namespace, so that whatever systemd mounts
# and creates inside lands below those.
mapfile -t SD_HIERARCHIES < <(awk '$9 == "cgroup" || $9 == "cgroup2" { print $5 }' /proc/self/mountinfo |
	grep '^/sys/fs/cgroup/')
join_test_cgroups() { # PID
	local dir
	for dir in "${SD_HIERARCHIES[@]}"; do
		mkdir -p "$dir/$SD_CG" || return 1
		# cpuset (v1) takes no task before it has cpus and mems.
		[ -e "$dir/$SD_CG/cpuset.cpus" ] && cat "$dir/cpuset.cpus" >"$dir/$SD_CG/cpuset.cpus" &&
			cat "$dir/cpuset.mems" >"$dir/$SD_CG/cpuset.mems"
		echo "$1" >"$dir/$SD_CG/cgroup.procs" || return 1
	done
}
trap 'sd_cleanup; cleanup_all' EXIT

STAGE=$WORK/stage
# Under WORK instead of lib.sh's own temp ROOT, which goes now.
rmdir "$ROOT"
ROOT=$WORK/root
if ! make -C "$REPO_DIR" --no-print-directory BUILD="$BUILD_DIR" install DESTDIR="$STAGE" >"$WORK/install.log" 2>&1; then
	not_ok "make install into $STAGE" "$(tail -5 "$WORK/install.log")"
	finish
fi
mkdir -p "$STAGE/etc/systemd/system" "$STAGE/etc/husk-test" "$ROOT"
# The client and its Python CRI messages, where the booted system sees them.
CLI_DIR=/usr/local/lib/husk-test
mkdir -p "$STAGE$CLI_DIR/gen"
cp "$REPO_DIR"/test/e2e/{cri_cli,cri_client,spdy_client}.py "$STAGE$CLI_DIR/"
if ! protoc --python_out="$STAGE$CLI_DIR/gen" -I "$REPO_DIR/cri/proto" "$REPO_DIR/cri/proto/api.proto" \
	2>"$WORK/protoc.err"; then
	not_ok "generate the Python CRI messages" "$(cat "$WORK/protoc.err")"
	finish
fi
printf '[Unit]\nDescription=husk systemd test\nWants=huskd.service\n' >"$STAGE/etc/systemd/system/husk-test.target"
cat >"$STAGE/etc/husk-test/pod.json" <<'JSON'
{"metadata": {"name": "sd-pod", "namespace": "sd", "uid": "sd-pod-1"}, "log_directory": "/var/log/sd-pod",
 "linux": {"security_context": {"namespace_options": {"network": 2}}}}
JSON
if ! "$REPO_DIR/hack/test-images.sh" "$CACHE_DIR/test-images" >"$WORK/images.log" 2>&1; then
	not_ok "build the test images" "$(tail -5 "$WORK/images.log")"
	finish
fi
cp -a "$CACHE_DIR/test-images/busybox" "$STAGE/etc/husk-test/busybox"
cat >"$STAGE/etc/husk-test/sleeper.json" <<'JSON'
{"metadata": {"name": "sleeper"}, "image": {"image": "test/busybox:latest"},
 "command": ["sleep", "600"], "log_path": "sleeper.log"}
JSON
touch "$WORK/console"

# Runs inside the new namespaces: the overlay root, /proc, a read-only /sys
# and /proc/sys, the cgroup hierarchies seen from the test's own cgroups,
# /dev with the console pointed at a file; then systemd as PID 1.
cat >"$WORK/boot.sh" <<'BOOT'
set -eu
work=$1 root=$1/root
mount -t tmpfs tmpfs "$root"
mkdir -p "$root/upper" "$root/work" "$root/merged"
cp -a "$work/stage/." "$root/upper/"
m=$root/merged
mount -t overlay overlay -o "lowerdir=/,upperdir=$root/upper,workdir=$root/work" "$m"
mount -t proc proc "$m/proc"
mount --bind /proc/sys "$m/proc/sys"
mount -o remount,bind,ro "$m/proc/sys"
mount -t sysfs -o ro sysfs "$m/sys"
mount -t tmpfs -o mode=755 tmpfs "$m/sys/fs/cgroup"
mkdir "$m/sys/fs/cgroup/systemd" "$m/sys/fs/cgroup/unified"
mount -t cgroup -o none,name=systemd cgroup "$m/sys/fs/cgroup/systemd"
mount -t cgroup2 cgroup2 "$m/sys/fs/cgroup/unified"
mount --rbind /dev "$m/dev"
mount --bind "$work/console" "$m/dev/console"
mount -t tmpfs tmpfs "$m/run"
mount -t tmpfs tmpfs "$m/tmp"
# Image layers need whiteouts (0:0 device nodes), which an overlay refuses.
mkdir -p "$m/var/lib/husk"
mount -t tmpfs tmpfs "$m/var/lib/husk"
cd "$m"
mkdir -p .old-root
pivot_root . .old-root
umount -l /.old-root
exec env container=husk-test "$2" --unit=husk-test.target --log-target=console
BOOT

(
	join_test_cgroups "$BASHPID" || exit 1
	exec unshare --pid --fork --mount --net --uts --ipc --cgroup --propagation private \
		bash "$WORK/boot.sh" "$WORK" "$SYSTEMD"
) >"$WORK/boot.log" 2>&1 &
for _ in $(seq 100); do
	SD_PID=$(head -1 /sys/fs/cgroup/systemd/$SD_CG/init.scope/cgroup.procs 2>/dev/null)
	[ -n "$SD_PID" ] && break
	sleep 0.1
done
if [ -z "$SD_PID" ]; then
	not_ok "systemd boots as PID 1 of the test's namespaces" "$(cat "$WORK/boot.log")" "$(tail -5 "$WORK/console")"
	finish
fi
ok "systemd boots as PID 1 of the test's namespaces"

IN=(nsenter -t "$SD_PID" -m -p -n -u -i)
sd() { "${IN[@]}" systemctl "$@"; }
show() { # PROPERTY... -> their values, space-separated, in that order
	local p values=()
	for p in "$@"; do values+=("$(sd show huskd -p "$p" --value 2>/dev/null)"); done
	echo "${values[*]}"
}
cli() {
	"${IN[@]}" env HUSK_CRI_GEN=$CLI_DIR/gen "$PY" "$CLI_DIR/cri_cli.py" -r unix:///run/husk/husk.sock \
		--timeout 20s "$@"
}
wait_state() { # STATE [SECONDS]
	for _ in $(seq $((${2:-30} * 10))); do
		[ "$(show ActiveState)" = "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

wait_state active 60
assert_eq "huskd.service is active (running) once huskd said READY=1" "active running" \
	"$(show ActiveState SubState)"
assert_eq "its status line is huskd's STATUS=" "serving CRI v1 on unix:///run/husk/husk.sock" "$(show StatusText)"
assert_eq "the unit is Type=notify, KillMode=process" "notify process" \
	"$(show Type KillMode)"
main_pid=$(show MainPID)
assert_eq "its main process is huskd" "huskd" "$("${IN[@]}" cat /proc/"$main_pid"/comm 2>/dev/null)"
out=$(cli version 2>&1)
assert_contains "the CRI client reaches the service's huskd" "$out" "RuntimeName:  husk"

pod=$(cli runp /etc/husk-test/pod.json 2>&1)
if [[ $pod =~ ^[0-9a-f]{64}$ ]]; then
	ok "a host-network pod runs under the service"
	"${IN[@]}" /usr/local/bin/husk image --root /var/lib/husk import /etc/husk-test/busybox \
		test/busybox:latest >"$WORK/import.log" 2>&1 || not_ok "husk image import" "$(cat "$WORK/import.log")"
	ctr=$(cli create "$pod" /etc/husk-test/sleeper.json /etc/husk-test/pod.json 2>&1) &&
		cli start "$ctr" >/dev/null 2>&1
	monitor=$("${IN[@]}" pgrep -x husk-monitor)
	assert_eq "a container runs in it, under its monitor" "CONTAINER_RUNNING:yes" \
		"$(cli inspect -o go-template --template '{{.status.state}}' "$ctr" 2>&1):$([ -n "$monitor" ] && echo yes)"
	sd restart huskd
	wait_state active 30
	assert_eq "systemctl restart huskd: active again, a new main process" "active:yes" \
		"$(show ActiveState):$([ "$(show MainPID)" != "$main_pid" ] && echo yes)"
	assert_eq "the pod is still there and ready after the restart" "SANDBOX_READY" \
		"$(cli inspectp -o go-template --template '{{.status.state}}' "$pod" 2>&1)"
	assert_eq "... and its container still runs, under the same monitor (KillMode=process)" \
		"CONTAINER_RUNNING:$monitor" \
		"$(cli inspect -o go-template --template '{{.status.state}}' "$ctr" 2>&1):$("${IN[@]}" pgrep -x husk-monitor)"
	cli stopp "$pod" >/dev/null 2>&1
	cli rmp "$pod" >/dev/null 2>&1
else
	not_ok "a host-network pod runs under the service" "$pod" "$("${IN[@]}" journalctl -u huskd --no-pager | tail -5)"
fi

sd stop huskd
assert_eq "systemctl stop: inactive, Result=success" "inactive success" \
	"$(show ActiveState Result)"
journal=$("${IN[@]}" journalctl -u huskd --no-pager -o cat)
assert_contains "huskd said why it stopped" "$journal" "info: signal 15: shutting down"
assert_true "the socket is gone" "${IN[@]}" test ! -e /run/husk/husk.sock
assert_true "/run/husk stays (no RuntimeDirectory=)" "${IN[@]}" test -e /run/husk/huskd.lock

"${IN[@]}" mkdir -p /etc/husk
echo '{"log_level": "debug",' >"/proc/$SD_PID/root/etc/husk/huskd.json"
sd start huskd >/dev/null 2>&1
assert_fails "a broken /etc/husk/huskd.json fails the start" $?
want="/etc/husk/huskd.json: line 2 column 0: string or '}' expected near end of file"
for _ in $(seq 30); do
	status=$(show StatusText)
	[ -n "$status" ] && break
	sleep 0.1
done
assert_eq "systemctl status says why" "failed: $want" "$status"
journal=$("${IN[@]}" journalctl -u huskd --no-pager -o cat)
assert_contains "and the journal, in one line" "$journal" "huskd: $want"
sd stop huskd >/dev/null 2>&1

finish
