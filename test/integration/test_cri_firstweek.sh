#!/usr/bin/env bash
# What a node's first week does to huskd (issue 28), driven by
# test/e2e/cri_firstweek.py: fast output to slow attach clients, a failed
# start's status, execs and checkpoints cut short by kill -9 of huskd,
# client mistakes, a CNI dir without a config; then huskd refusing to
# start as non-root or with a bad stream_port, the systemd unit's
# OOMScoreAdjust, make run's default network (hack/default-network.sh,
# run against temp dirs, never the host's /etc/cni) and huskd's start-up
# line naming the network it uses.
# cri_lib.sh's trap removes what the test made, even when it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup firstweek --registry
cri_run_py cri_firstweek.py "$HUSKD" "$ADDR" "$E2E"

# ------------------------------------------------ refused at start
start_refused() { # NAME EXPECTED-LINE COMMAND...: exit 1, that one line, nothing made
	local name=$1 want=$2 out rc
	shift 2
	rm -rf "$E2E/refused"
	# timeout: a huskd that wrongly starts (as main's did) is a failure, not a hang.
	out=$(timeout -k 2 10 "$@" --listen "unix://$E2E/refused.sock" --root "$E2E/refused/root" --state "$E2E/refused/state" 2>&1)
	rc=$?
	assert_eq "$name: exit 1, one line" "1|1|$want" "$rc|$(wc -l <<<"$out")|$out"
	assert_true "$name: nothing made" test ! -e "$E2E/refused" -a ! -e "$E2E/refused.sock"
}
chmod 0755 "$E2E"
start_refused "huskd as a non-root user (before: Ready, then every pod failed)" \
	"huskd: must run as root (it mounts, makes namespaces and cgroups, runs CNI plugins); euid is 65534" \
	setpriv --reuid 65534 --regid 65534 --clear-groups "$HUSKD" --config "$E2E/config.json"
echo '{"stream_port": "99999"}' >"$E2E/port.json"
start_refused "stream_port \"99999\" (before: a port mod 65536)" \
	"huskd: $E2E/port.json: stream_port \`99999\`: must be a port number 0-65535 (0: a free one)" \
	"$HUSKD" --config "$E2E/port.json"
echo '{"stream_port": 70000}' >"$E2E/port.json"
start_refused "stream_port 70000 as a number" \
	"huskd: $E2E/port.json: stream_port \`70000\`: must be a port number 0-65535 (0: a free one)" \
	"$HUSKD" --config "$E2E/port.json"
echo '{"stream_port": 10010}' >"$E2E/port.json"
out=$("$HUSKD" --config "$E2E/port.json" --print-config 2>&1 | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["stream_port"])' 2>&1)
assert_eq "stream_port 10010 as a JSON number is taken (before: must be a string)" "10010" "$out"

# ------------------------------------------------ the systemd unit
make -C "$REPO_DIR" --no-print-directory BUILD="$BUILD_DIR" install DESTDIR="$E2E/destdir" >"$E2E/install.log" 2>&1
unit=$E2E/destdir/usr/local/lib/systemd/system/huskd.service
assert_contains "huskd.service has OOMScoreAdjust=-999, as Debian's containerd.service" "$(cat "$unit" 2>&1)" \
	$'\nOOMScoreAdjust=-999\n'
sed "s|/usr/local/bin/huskd|$E2E/destdir/usr/local/bin/huskd|" "$unit" >"$E2E/huskd.service"
out=$(systemd-analyze verify "$E2E/huskd.service" 2>&1)
assert_eq "systemd-analyze verify finds nothing to say" "0:" "$?:$out"

# ------------------------------------------------ make run's default network
cni_files() { find "$1" -maxdepth 1 -type f -printf '%f\n' | sort | tr '\n' ' '; }
d=$E2E/default.d
out=$("$REPO_DIR/hack/default-network.sh" "$d" 2>&1)
assert_eq "an empty CNI dir gets 10-husk-bridge.conflist" "0|10-husk-bridge.conflist " "$?|$(cni_files "$d")"
assert_contains "... and says so" "$out" "wrote $d/10-husk-bridge.conflist (bridge husk0, pods on 10."
checks=$("$PY" - "$d/10-husk-bridge.conflist" <<'PY'
import ipaddress, json, subprocess, sys
c = json.load(open(sys.argv[1]))
p = c["plugins"]
subnet = ipaddress.ip_network(p[0]["ipam"]["ranges"][0][0]["subnet"])
routes = subprocess.run(["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True).stdout
used = [ipaddress.ip_network(w.split()[0], strict=False) for w in routes.splitlines() if w[:1].isdigit()]
problems = []
if [x["type"] for x in p] != ["bridge", "portmap", "loopback"]: problems.append("plugins")
if p[0]["bridge"] != "husk0" or not p[0]["ipMasq"] or not p[0]["isGateway"]: problems.append("bridge")
if not subnet.is_private: problems.append("not private")
problems += [f"overlaps {u}" for u in used if u.overlaps(subnet)]
print(" ".join(problems) or "fine")
PY
)
assert_eq "... a bridge husk0 on a private range no route of this host overlaps, portmap, loopback" fine "$checks"
cp -p "$d/10-husk-bridge.conflist" "$E2E/first.conflist"
out=$("$REPO_DIR/hack/default-network.sh" "$d" 2>&1)
assert_true "run again: the file is untouched" cmp -s "$d/10-husk-bridge.conflist" "$E2E/first.conflist"
assert_contains "... and it says why" "$out" "has a network config already (10-husk-bridge.conflist): left as it is"
p=$E2E/podman.d
mkdir -p "$p"
"$REPO_DIR/hack/cni-conflist.sh" podman cni-podman0 10.88.0 >"$p/87-podman-bridge.conflist"
cp -p "$p/87-podman-bridge.conflist" "$E2E/podman.copy"
out=$("$REPO_DIR/hack/default-network.sh" "$p" 2>&1)
assert_eq "a dir with podman's conflist gets nothing" "87-podman-bridge.conflist " "$(cni_files "$p")"
assert_true "... and podman's file is untouched" cmp -s "$p/87-podman-bridge.conflist" "$E2E/podman.copy"

# huskd's start-up line names the network it uses, and what it passes over.
startup_line() { # CNI-DIR -> huskd's CNI line at start
	echo "{\"cni_conf_dir\": \"$1\"}" >"$E2E/cni-log.json"
	"$HUSKD" --listen "unix://$E2E/cni-log.sock" --root "$E2E/cni-log/root" --state "$E2E/cni-log/state" \
		--config "$E2E/cni-log.json" >"$E2E/cni-log.out" 2>&1 &
	local pid=$!
	for _ in $(seq 100); do
		grep -q "serving CRI" "$E2E/cni-log.out" 2>/dev/null && break
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
	done
	kill -TERM $pid 2>/dev/null
	wait $pid
	grep -o "info: CNI network.*" "$E2E/cni-log.out"
}
assert_eq "huskd on make run's default network: its start-up line" \
	"info: CNI network \`husk\` from $d/10-husk-bridge.conflist (plugins bridge,portmap,loopback)" "$(startup_line "$d")"
assert_eq "huskd beside podman's conflist: which one it uses" \
	"info: CNI network \`podman\` from $p/87-podman-bridge.conflist (plugins bridge,loopback)" "$(startup_line "$p")"
cp "$d/10-husk-bridge.conflist" "$p/"
assert_eq "both there: the first by name, and the one passed over" \
	"info: CNI network \`husk\` from $p/10-husk-bridge.conflist (plugins bridge,portmap,loopback); not used (the first file by name wins): 87-podman-bridge.conflist" \
	"$(startup_line "$p")"
finish
