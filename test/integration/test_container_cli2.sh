#!/usr/bin/env bash
# `husk container` against podman's conventions, with real containers of
# the busybox test image: the default bridge network and -p through CNI
# portmap (reached on 127.0.0.1 and the host's address), lo up with
# --network none, TERM with -t, --entrypoint "", detached containers under
# husk-monitor (exit code in ls/inspect, ls -a, --rm -d removed on exit,
# logs --tail/--since/-f/-t), inspect, stats, top, --help of every verb,
# missing option values and unknown options.  Failures must leave nothing:
# no container, no netns pin, no veth, no iptables rule, no lease.
# The trap removes every container, the bridge, the rules and the registry.
# Run alone: ./test/integration/test_container_cli2.sh   (HUSK=... to override)
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
	ERR=$(grep -v -E '^(layer [0-9]+/[0-9]+ |unpacking [0-9]+ layers)' "$WORK/err")
}

ctr() { # ARGS...: capture `husk container --root $STORE ARGS...`
	capture husk_cmd container --root "$STORE" "$@"
}

field() { # CONTAINER TEMPLATE -> inspect -f TEMPLATE
	"$HUSK" --root "$ROOT" container --root "$STORE" inspect -f "$2" "$1" 2>/dev/null
}

remove_store_containers() { # STORE
	local id
	for id in $("$HUSK" --root "$ROOT" container --root "$1" ls -a -q 2>/dev/null); do
		timeout 20 "$HUSK" --root "$ROOT" container --root "$1" rm -f "$id" >/dev/null 2>&1
	done
}

mounts_under() { # DIR
	awk '{ print $5 }' /proc/self/mountinfo | grep -F -- "$1" || true
}

free_port() {
	python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import ports; print(ports.free_host_port())' \
		"$REPO_DIR/test/e2e"
}

tcp_read() { # HOST PORT -> what the server sends (a few tries: the
	# test server's nc listens again only after each connection)
	local out i
	for i in 1 2 3 4 5 6 7 8 9 10; do
		out=$(timeout 5 bash -c "exec 3<>/dev/tcp/$1/$2 && cat <&3" 2>/dev/null)
		[ -n "$out" ] && break
		sleep 0.2
	done
	echo "$out"
}

wait_for() { # SECONDS COMMAND...: polls COMMAND every 0.1 s
	local i
	for ((i = 0; i < $1 * 10; i++)); do
		"${@:2}" && return 0
		sleep 0.1
	done
	return 1
}

not_listed() { # ID: not in ls -a
	! "$HUSK" --root "$ROOT" container --root "$STORE" ls -a -q 2>/dev/null | grep -q "$1"
}

# Nothing of container ID: no record, no mount, no runtime state, no
# network (veth, rules, lease, CNI cache entry).
assert_all_gone() { # NAME ID
	assert_true "$1: not listed by ls -a" not_listed "$2"
	assert_true "$1: no STORE/containers/<id>" test ! -e "$STORE/containers/$2"
	assert_eq "$1: no mount (rootfs, netns pin) left" "" "$(mounts_under "$STORE/containers/$2")"
	assert_true "$1: no runtime state" test ! -e "$ROOT/$2"
	assert_eq "$1: no iptables rule or lease left" "" "$(container_net_leftovers "$2")"
	assert_eq "$1: no CNI cache entry" "" "$(ls "$STORE/container-cni-cache" 2>/dev/null | grep -F -- "$2")"
}

store_snapshot() {
	{
		ls -A "$STORE/containers" 2>/dev/null | sed 's/^/containers: /'
		ls -A "$ROOT" 2>/dev/null | sed 's/^/runtime: /'
		mounts_under "$STORE/containers"
		ip -o link show master "$CBRIDGE" 2>/dev/null | awk '{ print "veth: " $2 }'
		# by the network's name, or by an address of its subnet (the
		# firewall plugin's CNI-FORWARD rules name no network)
		iptables-save 2>/dev/null | grep -F -e "$CNET" -e " $CPREFIX." | sed 's/^/rule: /'
		ls -A "/var/lib/cni/networks/$CNET" 2>/dev/null | grep -v -E '^(last_reserved_ip|lock)' | sed 's/^/lease: /'
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
	for tool in bridge host-local portmap firewall tuning; do
		if [ ! -x "/usr/lib/cni/$tool" ]; then
			echo "not ok - CNI plugin /usr/lib/cni/$tool is installed (containernetworking-plugins)"
			exit 1
		fi
	done
	start_test_registry "$REGDIR" busybox
	IMG=$REG/test/busybox:latest
	mkdir -p "$STORE"
	if ! husk_cmd image --root "$STORE" pull "$IMG" >/dev/null 2>"$WORK/pull.err"; then
		echo "not ok - pull $IMG"
		diag "$(cat "$WORK/pull.err")"
		exit 1
	fi
	container_net_setup "$WORK" || {
		echo "not ok - a free subnet for the test bridge"
		exit 1
	}
	HOST_IP=$(ip -4 -o route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')
	echo "# $TEST_NAME: husk $HUSK, store $STORE, network $CNET ($CPREFIX.0/24 on $CBRIDGE), host $HOST_IP"
}

# ---------------------------------------------------------------- tests

t_help() {
	local verb want
	for verb in "run --publish" "ls --all" "ps --quiet" "exec --workdir" "logs --follow" "inspect --format" \
		"stats --no-stream" "top USER" "stop --time" "rm --force"; do
		want=${verb#* }
		verb=${verb%% *}
		ctr "$verb" --help
		assert_rc "$verb --help: exit 0" 0 "$RC"
		assert_contains "$verb --help: its usage names $want" "$OUT" "$want"
		ctr "$verb" -h
		assert_rc "$verb -h: exit 0" 0 "$RC"
	done
	ctr --help
	assert_contains "container --help lists the verbs" "$OUT$ERR" inspect
}

t_option_errors() {
	local verb
	ctr run --rm "$IMG" true --memory
	assert_rc "an option after IMAGE belongs to the command" 0 "$RC"
	ctr run --memory
	assert_fails "run --memory without a value fails" "$RC"
	assert_contains "run --memory: says the value is missing" "$ERR" "option \`--memory\` needs a value"
	ctr run -e
	assert_contains "run -e: says the value is missing" "$ERR" "option \`-e\` needs a value"
	ctr logs --tail
	assert_contains "logs --tail: says the value is missing" "$ERR" "option \`--tail\` needs a value"
	ctr inspect --format
	assert_contains "inspect --format: says the value is missing" "$ERR" "needs a value"
	for verb in run ls ps exec logs inspect stats top stop rm; do
		ctr "$verb" --bogus x
		assert_fails "$verb --bogus is refused" "$RC"
		assert_contains "$verb --bogus: the error names the option" "$ERR" "unknown option \`--bogus\`"
	done
	ctr ls -Z
	assert_contains "ls -Z: the error names it" "$ERR" "unknown option \`-Z\`"
	ctr ls extra
	assert_fails "ls with an argument fails" "$RC"
	ctr run --rm -p 99999:80 "$IMG" true
	assert_contains "-p 99999:80: the error names the value" "$ERR" "99999:80"
	ctr run --rm -p 8080:80/icmp "$IMG" true
	assert_contains "-p .../icmp: the error names the protocol" "$ERR" "tcp, udp or sctp"
	ctr run --rm -p 8080 "$IMG" true
	assert_contains "-p 8080: the error says what is expected" "$ERR" "HOST:CTR"
	ctr run --rm --network none -p 8080:80 "$IMG" true
	assert_fails "-p with --network none is refused" "$RC"
	ctr logs --since yesterday x
	assert_contains "logs --since yesterday: the error names the value" "$ERR" yesterday
}

t_default_bridge() {
	local before
	before=$(store_snapshot)
	ctr run --rm "$IMG" 'ip -4 -o addr show eth0; ip route show default'
	assert_rc "default network: rc 0" 0 "$RC"
	assert_contains "default network: eth0 has an address of the bridge's subnet" "$OUT" "inet $CPREFIX."
	assert_contains "default network: a default route through the bridge" "$OUT" "default via $CPREFIX.1"
	ctr run --rm --network bridge "$IMG" 'cat /etc/resolv.conf >/dev/null && echo resolv'
	assert_eq "--network bridge: the host's resolv.conf" resolv "$OUT"
	assert_nothing_new "--rm on the bridge: nothing left (veth, rules, lease, netns, rootfs)" "$before"
}

t_publish() {
	local port uport id pid ip before
	before=$(store_snapshot)
	port=$(free_port)
	uport=$(free_port)
	ctr run -d --name husk-it-web -p "$port:8080" -p "127.0.0.1:$uport:9090/udp" "$IMG" \
		'while :; do echo hi-from-husk | nc -l -p 8080; done'
	assert_rc "run -d -p $port:8080: rc 0" 0 "$RC" || return 1
	id=$OUT
	assert_eq "-p: 127.0.0.1:$port reaches the container (portmap)" hi-from-husk "$(tcp_read 127.0.0.1 "$port")"
	[ -n "$HOST_IP" ] &&
		assert_eq "-p: $HOST_IP:$port reaches the container" hi-from-husk "$(tcp_read "$HOST_IP" "$port")"
	ip=$(field husk-it-web '{{.NetworkSettings.IPAddress}}')
	assert_match "inspect: IPAddress in the bridge's subnet" "$ip" "^${CPREFIX//./\\.}\\.[0-9]+$"
	assert_eq "the container's own address, port 8080" hi-from-husk "$(tcp_read "$ip" 8080)"
	assert_eq "inspect: NetworkSettings.Ports as podman's" \
		"{\"8080/tcp\":[{\"HostIp\":\"\",\"HostPort\":\"$port\"}],\"9090/udp\":[{\"HostIp\":\"127.0.0.1\",\"HostPort\":\"$uport\"}]}" \
		"$(field husk-it-web '{{.NetworkSettings.Ports}}')"
	ctr ls
	assert_contains "ls: PORTS as podman's" "$OUT" "0.0.0.0:$port->8080/tcp, 127.0.0.1:$uport->9090/udp"
	assert_true "iptables: a udp DNAT to the container for 127.0.0.1:$uport" \
		sh -c "iptables-save -t nat | grep -- '-d 127.0.0.1/32 -p udp' | grep -- '--dport $uport ' | grep -q DNAT"
	assert_true "iptables: portmap's DNAT rule for the port, naming the container" \
		sh -c "iptables-save -t nat | grep -F -- '$id' | grep -q -- '--dports $port'"
	pid=$(field husk-it-web '{{.State.Pid}}')
	ctr rm -f husk-it-web
	assert_rc "rm -f: rc 0" 0 "$RC"
	assert_all_gone "rm -f of a -p container" "$id"
	assert_true "its init is gone" wait_gone "$pid" 5
	assert_eq "the port is closed again" "" "$(timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && cat <&3" 2>/dev/null)"
	assert_nothing_new "after rm: nothing left" "$before"
}

t_network_failures() {
	local before port
	before=$(store_snapshot)
	container_conflist "$CPREFIX" "$CNET" "$CBRIDGE" '{"type": "husk-no-such-plugin"}' >"$WORK/bad.conflist"
	port=$(free_port)
	HUSK_NETWORK_CONFIG=$WORK/bad.conflist ctr run --rm -p "$port:80" "$IMG" true
	assert_fails "a missing CNI plugin fails the run" "$RC"
	assert_contains "the error names the plugin" "$ERR" husk-no-such-plugin
	assert_nothing_new "a missing CNI plugin: nothing left" "$before"
	assert_eq "no DNAT rule for the port is left" "" "$(iptables-save -t nat | grep -F -- "--dport $port ")"
	HUSK_NETWORK_CONFIG=$WORK/bad.conflist ctr run -d "$IMG" true
	assert_fails "the same with -d fails" "$RC"
	assert_nothing_new "-d: nothing left" "$before"
	echo '{"cniVersion": "1.0.0", "name": ' >"$WORK/broken.conflist"
	HUSK_NETWORK_CONFIG=$WORK/broken.conflist ctr run --rm "$IMG" true
	assert_fails "a broken network config fails the run" "$RC"
	assert_contains "the error names the file" "$ERR" broken.conflist
	ctr run --rm --entrypoint /no/such/binary "$IMG"
	assert_fails "a missing binary fails" "$RC"
	ctr run -d --entrypoint /no/such/binary "$IMG"
	assert_fails "a missing binary fails with -d" "$RC"
	assert_contains "-d: the error names the binary" "$ERR" /no/such/binary
	assert_nothing_new "a failed start on the bridge: nothing left" "$before"
}

t_network_none() {
	ctr run --rm --network none "$IMG" 'cat /sys/class/net/lo/operstate /sys/class/net/lo/flags; ls /sys/class/net'
	assert_eq "--network none: lo is up (flags 0x9), the only interface" "unknown 0x9 lo" "$(echo $OUT)"
	ctr run --rm --network none "$IMG" '(echo over-lo | nc -l -p 7000 &) ; sleep 0.3; nc 127.0.0.1 7000 </dev/null'
	assert_eq "--network none: a connection over 127.0.0.1 works" over-lo "$OUT"
}

t_tty_term() {
	ctr run --rm -t "$IMG" 'echo "TERM=$TERM"'
	assert_eq "-t: TERM=xterm, as podman" "TERM=xterm" "$(echo "$OUT" | tr -d '\r')"
	ctr run --rm -t -e TERM=vt100 "$IMG" 'echo "TERM=$TERM"'
	assert_eq "-t -e TERM=vt100 keeps it" "TERM=vt100" "$(echo "$OUT" | tr -d '\r')"
	ctr run --rm "$IMG" 'echo "TERM=${TERM-unset}"'
	assert_eq "without -t no TERM" "TERM=unset" "$OUT"
}

t_entrypoint() {
	ctr run --rm "$IMG" /bin/echo a b
	assert_eq "the image's entrypoint (sh -c) takes the args: sh -c /bin/echo a b" "" "$OUT"
	ctr run --rm --entrypoint "" "$IMG" /bin/echo a b
	assert_eq "--entrypoint \"\" clears it: /bin/echo a b" "a b" "$OUT"
	ctr run --rm --entrypoint "" "$IMG"
	assert_fails "--entrypoint \"\" without args runs the image's Cmd alone" "$RC"
	assert_contains "...which is not an executable: the error names it" "$ERR" "echo hello from husk"
}

t_ls_exit_codes() {
	local done_id run_id
	ctr run -d --name husk-it-done "$IMG" 'exit 7'
	assert_rc "run -d 'exit 7': rc 0" 0 "$RC" || return 1
	done_id=$OUT
	ctr run -d --name husk-it-up "$IMG" 'sleep 60'
	run_id=$OUT
	assert_true "the exit code is kept" wait_for 10 sh -c "[ \"\$($HUSK --root $ROOT container --root $STORE inspect -f '{{.State.ExitCode}}' husk-it-done 2>/dev/null)\" = 7 ]"
	ctr ls
	assert_contains "ls: the running one" "$OUT" husk-it-up
	assert_not_contains "ls: not the exited one (podman: running only)" "$OUT" husk-it-done
	ctr ls -a
	assert_contains "ls -a: the exited one with its exit code" "$(echo "$OUT" | grep husk-it-done)" "Exited (7) "
	assert_contains "ls -a: the running one" "$(echo "$OUT" | grep husk-it-up)" "Up "
	ctr ls -q
	assert_eq "ls -q: only the running id" "$run_id" "$OUT"
	ctr ls -a -q
	assert_contains "ls -a -q: the exited id too" "$OUT" "$done_id"
	assert_eq "inspect: State.Status exited" exited "$(field husk-it-done '{{.State.Status}}')"
	assert_eq "inspect: State.Running false" false "$(field husk-it-done '{{.State.Running}}')"
	assert_match "inspect: FinishedAt" "$(field husk-it-done '{{.State.FinishedAt}}')" '^20[0-9-]+T[0-9:.]+Z$'
	assert_eq "an exited container's network is released at once" "" "$(container_net_leftovers "$done_id")"
	ctr stop -t 1 husk-it-up
	assert_eq "stop -t 1: sleep as pid 1 ignores SIGTERM: SIGKILL, exit code 137" 137 "$(field husk-it-up '{{.State.ExitCode}}')"
	assert_eq "stop: its network is released" "" "$(container_net_leftovers "$run_id")"
	ctr rm husk-it-done husk-it-up
	assert_rc "rm of both" 0 "$RC"
	assert_all_gone "rm of an exited one" "$done_id"
	assert_all_gone "rm of a stopped one" "$run_id"
}

t_rm_detached() {
	local id before
	before=$(store_snapshot)
	ctr run -d --rm "$IMG" 'sleep 0.5; exit 3'
	assert_rc "run -d --rm: rc 0" 0 "$RC" || return 1
	id=$OUT
	assert_eq "run -d --rm: running at first" running "$(field "$id" '{{.State.Status}}')"
	assert_eq "inspect: HostConfig.AutoRemove" true "$(field "$id" '{{.HostConfig.AutoRemove}}')"
	assert_true "run -d --rm: removed once it exits (the waiter)" wait_for 10 not_listed "$id"
	assert_all_gone "run -d --rm" "$id"
	ctr run -d --rm "$IMG" 'sleep 60'
	id=$OUT
	ctr stop -t 1 "$id"
	assert_rc "stop of a --rm one" 0 "$RC"
	assert_true "stop of a --rm one removes it" wait_for 5 not_listed "$id"
	assert_all_gone "stop of a -d --rm one" "$id"
	assert_nothing_new "--rm -d: nothing left" "$before"
	ctr run -d -t --rm "$IMG" 'tty; sleep 0.3'
	assert_rc "-d -t: runs (the monitor holds the terminal)" 0 "$RC"
	id=$OUT
	assert_true "-d -t --rm: removed once it exits" wait_for 10 not_listed "$id"
}

t_logs() {
	local id mark since_out
	# The sleeps order the lines: stdout and stderr are two pipes.
	ctr run -d --name husk-it-log "$IMG" 'echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three; sleep 1.5; echo four
		while :; do if [ -e /tmp/go ]; then rm /tmp/go; echo five; fi; sleep 0.1; done'
	assert_rc "run -d: rc 0" 0 "$RC" || return 1
	id=$OUT
	wait_for 5 sh -c "$HUSK --root $ROOT container --root $STORE logs husk-it-log 2>&1 | grep -q three"
	mark=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
	wait_for 5 sh -c "$HUSK --root $ROOT container --root $STORE logs husk-it-log 2>&1 | grep -q four"
	ctr logs husk-it-log
	assert_eq "logs: stdout" "one three four" "$(echo $OUT)"
	assert_eq "logs: stderr to stderr" two "$ERR"
	ctr logs --tail 2 husk-it-log
	assert_eq "logs --tail 2: the last two lines (stdout part)" "three four" "$(echo $OUT)"
	assert_eq "logs --tail 2: not the third-last (stderr)" "" "$ERR"
	ctr logs --tail 0 husk-it-log
	assert_eq "logs --tail 0: nothing" "" "$OUT$ERR"
	ctr logs --since "$mark" husk-it-log
	assert_eq "logs --since RFC 3339: only what came later" four "$OUT"
	ctr logs --since 1h husk-it-log
	assert_eq "logs --since 1h: all" "one three four" "$(echo $OUT)"
	since_out=$(timeout 10 "$HUSK" --root "$ROOT" container --root "$STORE" logs --since "$(($(date +%s) + 1))" husk-it-log 2>&1)
	assert_eq "logs --since (unix seconds) a second ahead: nothing" "" "$since_out"
	ctr logs -t --tail 1 husk-it-log
	assert_match "logs -t: the line's timestamp first" "$OUT" '^20[0-9-]+T[0-9:.]+Z four$'
	timeout 20 "$HUSK" --root "$ROOT" container --root "$STORE" logs -f husk-it-log >"$WORK/follow.out" 2>&1 &
	local follower=$!
	sleep 0.5
	assert_true "logs -f: still following while it runs" kill -0 "$follower"
	timeout 20 "$HUSK" --root "$ROOT" container --root "$STORE" exec husk-it-log touch /tmp/go
	sleep 0.5
	"$HUSK" --root "$ROOT" container --root "$STORE" stop -t 1 husk-it-log >/dev/null 2>&1
	wait "$follower"
	assert_rc "logs -f: ends when the container stops" 0 "$?"
	assert_contains "logs -f: what was written while following" "$(cat "$WORK/follow.out")" five
	ctr rm husk-it-log
	assert_all_gone "rm after logs" "$id"
}

t_inspect() {
	local id pid doc
	ctr run -d --name husk-it-insp -t --memory 64m --pids-limit 50 -e FOO=bar "$IMG" 'sleep 60'
	assert_rc "run -d: rc 0" 0 "$RC" || return 1
	id=$OUT
	ctr inspect husk-it-insp
	assert_rc "inspect: rc 0" 0 "$RC"
	doc=$OUT
	check() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert len(d) == 1; c=d[0]; print($1)" "$doc" 2>&1; }
	assert_eq "inspect: an array of one, Id" "$id" "$(check 'c["Id"]')"
	assert_eq "inspect: Name" husk-it-insp "$(check 'c["Name"]')"
	assert_eq "inspect: ImageName" "$IMG" "$(check 'c["ImageName"]')"
	assert_match "inspect: Image is the config digest" "$(check 'c["Image"]')" '^sha256:[0-9a-f]{64}$'
	assert_eq "inspect: State.Running" True "$(check 'c["State"]["Running"]')"
	pid=$("$HUSK" --root "$ROOT" state "$id" | json_get pid)
	assert_eq "inspect: State.Pid is the runtime's" "$pid" "$(check 'c["State"]["Pid"]')"
	assert_eq "inspect: Path and Args" "/bin/sh|-c|sleep 60" "$(check '"|".join([c["Path"]] + c["Args"])')"
	assert_eq "inspect: Config.Tty" True "$(check 'c["Config"]["Tty"]')"
	assert_eq "inspect: Config.Env has -e and TERM" "True True" "$(check '"FOO=bar" in c["Config"]["Env"], "TERM=xterm" in c["Config"]["Env"]')"
	assert_eq "inspect: HostConfig.Memory" 67108864 "$(check 'c["HostConfig"]["Memory"]')"
	assert_eq "inspect: HostConfig.PidsLimit" 50 "$(check 'c["HostConfig"]["PidsLimit"]')"
	assert_eq "inspect: HostConfig.NetworkMode" bridge "$(check 'c["HostConfig"]["NetworkMode"]')"
	assert_match "inspect: Created" "$(check 'c["Created"]')" '^20[0-9-]+T'
	assert_match "inspect: StartedAt" "$(check 'c["State"]["StartedAt"]')" '^20[0-9-]+T'
	assert_eq "inspect -f with text around" "pid=$pid name=husk-it-insp" "$(field husk-it-insp 'pid={{.State.Pid}} name={{.Name}}')"
	ctr inspect -f '{{.No.Such}}' husk-it-insp
	assert_fails "inspect -f of a missing field fails" "$RC"
	ctr inspect nosuchcontainer
	assert_fails "inspect of a missing container fails" "$RC"
	assert_contains "...naming it" "$ERR" nosuchcontainer

	# top and stats on the same container
	ctr top husk-it-insp
	assert_rc "top: rc 0" 0 "$RC"
	assert_eq "top: podman's columns" "USER PID PPID %CPU ELAPSED TTY TIME COMMAND" "$(echo "$OUT" | head -n 1 | tr -s ' ')"
	assert_contains "top: the init as the container sees it (PID 1, PPID 0) with its command" \
		"$(echo "$OUT" | awk '$2 == 1 && $3 == 0')" "sleep 60"
	assert_eq "top: the user by the image's passwd" tester "$(echo "$OUT" | awk '$2 == 1 { print $1 }')"
	assert_match "top: the tty of -t" "$(echo "$OUT" | awk '$2 == 1 { print $6 }')" '^pts/[0-9]+$'
	ctr stats --no-stream husk-it-insp
	assert_rc "stats --no-stream: rc 0" 0 "$RC"
	assert_eq "stats: podman's columns" "ID NAME CPU % MEM USAGE / LIMIT MEM % PIDS" "$(echo "$OUT" | head -n 1 | tr -s ' ')"
	assert_match "stats: the row: id, name, cpu, usage / 64 MiB limit, mem %, pids" \
		"$(echo "$OUT" | sed -n 2p | tr -s ' ')" "^${id:0:12} husk-it-insp [0-9.]+% [0-9.]+[kMG]?B / 67.11MB [0-9.]+% 1$"
	ctr stats --no-stream
	assert_contains "stats without names: every running container" "$OUT" husk-it-insp
	timeout 3 "$HUSK" --root "$ROOT" container --root "$STORE" stats husk-it-insp >"$WORK/stats.out" 2>&1
	assert_true "stats streams (a sample a second) until stopped" test "$(grep -c husk-it-insp "$WORK/stats.out")" -ge 2
	ctr exec husk-it-insp sh -c 'sleep 30 >/dev/null 2>&1 & sleep 0.2; echo started'
	ctr top husk-it-insp
	assert_eq "top: an exec'd process too (the pid namespace's pids)" 1 "$(echo "$OUT" | awk '$NF == 30 && $2 > 1' | wc -l)"
	ctr stop -t 0 husk-it-insp
	ctr top husk-it-insp
	assert_fails "top of a stopped container fails" "$RC"
	assert_contains "...saying so" "$ERR" "not running"
	ctr stats --no-stream husk-it-insp
	assert_fails "stats of a stopped container fails" "$RC"
	ctr rm husk-it-insp
	assert_all_gone "rm after inspect" "$id"
}

# ---------------------------------------------------------------- main

setup
for t in t_help t_option_errors t_default_bridge t_publish t_network_failures t_network_none t_tty_term \
	t_entrypoint t_ls_exit_codes t_rm_detached t_logs t_inspect; do
	run_test "$t"
	remove_store_containers "$STORE"
done
finish
