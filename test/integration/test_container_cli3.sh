#!/usr/bin/env bash
# `husk container` and `husk image rm` against podman's habits: exit codes
# (125 husk's own error, 126 not executable, 127 not found, else the
# container's), -p with a host port in use refused before anything is made,
# image rm of an image a container uses (refused; --force removes the
# containers and the snapshots), stop's SIGKILL warning, the verbs start
# (-a), restart, attach, kill, wait, rm -a, prune, port, cp (with symlink
# attacks from inside the rootfs), ls columns, CREATED/STATUS and --format,
# and `husk run IMAGE`'s hint.  The trap removes every container, the
# bridge, its rules and the listeners.
# Run alone: ./test/integration/test_container_cli3.sh   (HUSK=... to override)
. "$(dirname "$0")/lib.sh"
# shellcheck source=test/integration/container_net.sh
. "$(dirname "$0")/container_net.sh"

HUSK=${HUSK:-$BUILD_DIR/husk}
IMAGES=${HUSK_TEST_IMAGES:-$CACHE_DIR/test-images}
HUSK_TIMEOUT=${HUSK_CONTAINER_TIMEOUT:-60}
STORE=$WORK/store
IMG=test/busybox:latest
LISTENER_PID=

husk_cmd() { # ARGS...: husk with our runtime --root and a timeout
	timeout -k 5 "$HUSK_TIMEOUT" "$HUSK" --root "$ROOT" "$@"
}

# Sets OUT, ERR and RC.  Call it directly, never inside $( ).
capture() { # COMMAND...
	OUT=$("$@" 2>"$WORK/err" </dev/null)
	RC=$?
	ERR=$(cat "$WORK/err")
}

ctr() { # ARGS...: capture `husk container --root $STORE ARGS...`
	capture husk_cmd container --root "$STORE" "$@"
}

img() { # ARGS...: capture `husk image --root $STORE ARGS...`
	capture husk_cmd image --root "$STORE" "$@"
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

wait_for() { # SECONDS COMMAND...: polls COMMAND every 0.1 s
	local i
	for ((i = 0; i < $1 * 10; i++)); do
		"${@:2}" && return 0
		sleep 0.1
	done
	return 1
}

state_of() { # NAME -> podman's State (running, exited, created)
	"$HUSK" --root "$ROOT" container --root "$STORE" ls -a --format '{{.Names}} {{.State}}' 2>/dev/null |
		awk -v n="$1" '$1 == n { print $2 }'
}

store_snapshot() {
	{
		ls -A "$STORE/containers" 2>/dev/null | sed 's/^/containers: /'
		ls -A "$ROOT" 2>/dev/null | sed 's/^/runtime: /'
		mounts_under "$STORE/containers"
		ip -o link show master "$CBRIDGE" 2>/dev/null | awk '{ print "veth: " $2 }'
		iptables-save 2>/dev/null | grep -F -e "$CNET" -e " $CPREFIX." | sed 's/^/rule: /'
	} | sort
}

global_cleanup() {
	[ -n "$LISTENER_PID" ] && kill "$LISTENER_PID" 2>/dev/null
	[ -d "$STORE" ] && remove_store_containers "$STORE"
	[ -d "$WORK/store2" ] && remove_store_containers "$WORK/store2"
	container_net_cleanup
	return 0
}
trap 'global_cleanup; cleanup_all' EXIT

setup() {
	if [ ! -x "$HUSK" ]; then
		echo "not ok - husk $HUSK is not an executable (make build, or set HUSK)"
		exit 1
	fi
	if ! "$REPO_DIR/hack/test-images.sh" "$IMAGES" >"$WORK/images.log" 2>&1; then
		echo "not ok - build the test images"
		exit 1
	fi
	mkdir -p "$STORE"
	if ! husk_cmd image --root "$STORE" import "$IMAGES/busybox" "$IMG" >/dev/null 2>"$WORK/import.err"; then
		echo "not ok - import $IMG"
		diag "$(cat "$WORK/import.err")"
		exit 1
	fi
	container_net_setup "$WORK" || {
		echo "not ok - a free subnet for the test bridge"
		exit 1
	}
	echo "# $TEST_NAME: husk $HUSK, store $STORE, network $CNET"
}

# A TCP listener on a free host port of its own: sets LISTEN_PORT.
start_listener() {
	python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("0.0.0.0", 0)); s.listen()
print(s.getsockname()[1], flush=True); time.sleep(120)' >"$WORK/listen.port" &
	LISTENER_PID=$!
	wait_for 10 test -s "$WORK/listen.port"
	LISTEN_PORT=$(cat "$WORK/listen.port")
}

# ---------------------------------------------------------------- tests

t_exit_codes() {
	ctr run --rm --network none --entrypoint "" "$IMG" /no/such/binary
	assert_rc "run of a command that does not exist: 127" 127 "$RC"
	assert_contains "it names the command" "$ERR" /no/such/binary
	ctr run --rm --network none --entrypoint "" "$IMG" nosuchcommand
	assert_rc "run of a command not on PATH: 127" 127 "$RC"
	ctr run --rm --network none --entrypoint "" "$IMG" /etc/passwd
	assert_rc "run of a file that is not executable: 126" 126 "$RC"
	ctr run --rm --network none --entrypoint "" "$IMG" /etc
	assert_rc "run of a directory: 126" 126 "$RC"
	ctr run --rm --network none --entrypoint "" "$IMG" sh -c 'exit 3'
	assert_rc "run: the container's exit code" 3 "$RC"
	ctr run --rm --network none --bogus "$IMG" true
	assert_rc "run with an unknown option: 125" 125 "$RC"
	ctr run --rm --network none test/no-such-image:1 true
	assert_rc "run of an image that is nowhere: 125" 125 "$RC"
	ctr bogusverb
	assert_rc "an unknown verb: 125" 125 "$RC"
	ctr
	assert_rc "no verb: 125" 125 "$RC"
	ctr exec no-such-container true
	assert_rc "exec in an unknown container: 125" 125 "$RC"
	ctr run -d --name cli3-exec --network none --entrypoint "" "$IMG" sleep 100
	assert_rc "run -d: 0" 0 "$RC" || return 1
	ctr exec cli3-exec sh -c 'exit 4'
	assert_rc "exec: the process's exit code" 4 "$RC"
	ctr exec cli3-exec /no/such/binary
	assert_rc "exec of a command that does not exist: 127" 127 "$RC"
	ctr exec cli3-exec /etc/passwd
	assert_rc "exec of a file that is not executable: 126" 126 "$RC"
	ctr rm -f cli3-exec
	capture husk_cmd image --root "$STORE" rm test/no-such-image:1
	assert_rc "image rm of an unknown image: 1 (podman rmi's)" 1 "$RC"
}

t_port_in_use() {
	local before port2 id
	start_listener
	before=$(store_snapshot)
	ctr run --rm -p "$LISTEN_PORT:80" "$IMG" true
	assert_rc "-p HOST:CTR with the host port held by a socket: 125" 125 "$RC"
	assert_contains "the error names the port" "$ERR" ":$LISTEN_PORT"
	assert_contains "the error says it is in use" "$ERR" "in use"
	assert_eq "one line" 1 "$(printf '%s\n' "$ERR" | wc -l)"
	assert_eq "nothing left behind" "$before" "$(store_snapshot)"
	ctr run --rm -p "127.0.0.1:$LISTEN_PORT:80/udp" "$IMG" true
	assert_rc "the same port number over UDP is free" 0 "$RC"
	kill "$LISTENER_PID" 2>/dev/null
	port2=$(free_port)
	ctr run -d --name cli3-web -p "$port2:80" --entrypoint "" "$IMG" sleep 100
	assert_rc "run -d -p $port2:80" 0 "$RC" || return 1
	id=$OUT
	before=$(store_snapshot)
	ctr run --rm -p "$port2:81" "$IMG" true
	assert_rc "-p with a host port another container publishes: 125" 125 "$RC"
	assert_contains "the error names the container" "$ERR" cli3-web
	assert_eq "nothing left behind" "$before" "$(store_snapshot)"
	ctr port cli3-web
	assert_eq "port: podman's line" "80/tcp -> 0.0.0.0:$port2" "$OUT"
	ctr port cli3-web 80
	assert_eq "port CONTAINER 80" "0.0.0.0:$port2" "$OUT"
	ctr ls --format '{{.Names}} {{.Ports}}'
	assert_contains "ls --format {{.Ports}}" "$OUT" "cli3-web 0.0.0.0:$port2->80/tcp"
	ctr rm -f "$id"
}

t_image_rm_in_use() {
	local s2=$WORK/store2 id snaps
	mkdir -p "$s2"
	capture husk_cmd image --root "$s2" import "$IMAGES/busybox" test/rmme:1
	assert_rc "import test/rmme:1" 0 "$RC" || return 1
	capture husk_cmd container --root "$s2" run --network none --name cli3-user test/rmme:1 true
	assert_rc "a container of it" 0 "$RC" || return 1
	id=$(husk_cmd container --root "$s2" ls -a -q)
	capture husk_cmd image --root "$s2" rm test/rmme:1
	assert_rc "image rm of an image a container uses: 2 (podman rmi's)" 2 "$RC"
	assert_contains "podman's words" "$ERR" "image used by $id: image is in use by a container"
	assert_contains "it is still listed" "$(husk_cmd image --root "$s2" ls 2>&1)" rmme
	assert_contains "the container is still there" "$(husk_cmd container --root "$s2" ls -a -q)" "$id"
	snaps=$(ls -A "$s2/snapshots" 2>/dev/null | wc -l)
	assert_true "it has snapshots" test "$snaps" -gt 0
	capture husk_cmd image --root "$s2" rm --force test/rmme:1
	assert_rc "image rm --force: 0" 0 "$RC"
	assert_contains "it says which container went" "$OUT" "removed container: $id"
	assert_eq "no container left" "" "$(husk_cmd container --root "$s2" ls -a -q)"
	assert_eq "no snapshot left" "" "$(ls -A "$s2/snapshots" 2>/dev/null)"
	assert_eq "no mount left" "" "$(mounts_under "$s2")"
	assert_true "no runtime state left" test ! -e "$ROOT/$id"
}

t_stop_warning() {
	ctr run -d --name cli3-stubborn --network none --entrypoint "" "$IMG" sh -c 'trap "" TERM; while :; do sleep 1; done'
	assert_rc "run -d a container that ignores SIGTERM" 0 "$RC" || return 1
	ctr stop -t 1 cli3-stubborn
	assert_rc "stop: 0" 0 "$RC"
	assert_contains "stop says it resorted to SIGKILL" "$ERR" \
		"StopSignal SIGTERM failed to stop container cli3-stubborn in 1 seconds, resorting to SIGKILL"
	assert_eq "it exited" exited "$(state_of cli3-stubborn)"
	ctr run -d --name cli3-polite --network none --entrypoint "" "$IMG" sh -c 'trap "exit 0" TERM; while :; do sleep 1; done'
	sleep 0.5
	ctr stop --time 10 cli3-polite
	assert_eq "a container that stops on SIGTERM: no warning" "" "$ERR"
	ctr rm cli3-stubborn cli3-polite
}

t_start_attach_wait() {
	ctr run -d --name cli3-five --network none --entrypoint "" "$IMG" sh -c 'echo one; sleep 3; echo two; exit 5'
	assert_rc "run -d" 0 "$RC" || return 1
	ctr wait cli3-five
	assert_eq "wait prints the exit code" 5 "$OUT"
	assert_rc "wait: 0, as podman's" 0 "$RC"
	ctr ls -a --format '{{.Status}}'
	assert_match "STATUS as podman's" "$OUT" "^Exited \\(5\\) .* ago$"
	ctr start -a cli3-five
	assert_rc "start -a: the container's exit code" 5 "$RC"
	assert_contains "start -a: its output from the start" "$OUT" "one"
	assert_contains "start -a: to the end" "$OUT" "two"
	ctr start cli3-five
	assert_eq "start prints the name" cli3-five "$OUT"
	assert_eq "it runs again" running "$(state_of cli3-five)"
	ctr start cli3-five
	assert_rc "start of a running container: 125" 125 "$RC"
	assert_contains "it says so" "$ERR" "running already"
	ctr attach cli3-five
	assert_rc "attach: the container's exit code" 5 "$RC"
	assert_contains "attach: its output" "$OUT" "two"
	ctr attach cli3-five
	assert_rc "attach to an exited container: 125" 125 "$RC"
	assert_contains "it says why" "$ERR" "only attach to running containers"
	ctr rm cli3-five
	# a foreground one started again
	ctr run --name cli3-fg --network none --entrypoint "" "$IMG" sh -c 'exit 2'
	assert_rc "run in the foreground" 2 "$RC"
	ctr start -a cli3-fg
	assert_rc "start -a of a foreground one" 2 "$RC"
	ctr rm cli3-fg
}

t_kill_restart() {
	local started
	ctr run -d --name cli3-k --network none --entrypoint "" "$IMG" sleep 100
	ctr kill -s BOGUS cli3-k
	assert_rc "kill -s BOGUS: 125" 125 "$RC"
	assert_contains "it names the signal" "$ERR" BOGUS
	assert_eq "still running" running "$(state_of cli3-k)"
	started=$("$HUSK" --root "$ROOT" container --root "$STORE" inspect -f '{{.State.StartedAt}}' cli3-k 2>/dev/null)
	sleep 1
	ctr restart -t 0 cli3-k
	assert_rc "restart: 0" 0 "$RC"
	assert_eq "running after restart" running "$(state_of cli3-k)"
	assert_true "started anew" test "$started" != \
		"$("$HUSK" --root "$ROOT" container --root "$STORE" inspect -f '{{.State.StartedAt}}' cli3-k 2>/dev/null)"
	ctr kill cli3-k
	assert_rc "kill: 0" 0 "$RC"
	assert_eq "kill prints the name" cli3-k "$OUT"
	ctr wait cli3-k
	assert_eq "SIGKILL (the default): 137" 137 "$OUT"
	ctr kill cli3-k
	assert_rc "kill of an exited container: 125" 125 "$RC"
	assert_contains "it says why" "$ERR" "not running"
	ctr run -d --name cli3-hup --network none --entrypoint "" "$IMG" sh -c 'trap "exit 9" HUP; while :; do sleep 0.1; done'
	sleep 0.5
	ctr kill --signal SIGHUP cli3-hup
	ctr wait cli3-hup
	assert_eq "kill --signal SIGHUP reaches the process" 9 "$OUT"
	ctr rm cli3-k cli3-hup
}

t_rm_all_prune() {
	local left
	ctr run --name cli3-p1 --network none "$IMG" true
	ctr run --name cli3-p2 --network none "$IMG" true
	ctr run -d --name cli3-p3 --network none --entrypoint "" "$IMG" sleep 100
	ctr prune
	assert_rc "prune: 0" 0 "$RC"
	assert_eq "prune removed the two stopped ones" 2 "$(printf '%s\n' "$OUT" | grep -c .)"
	left=$("$HUSK" --root "$ROOT" container --root "$STORE" ls -a --format '{{.Names}}')
	assert_eq "only the running one is left" cli3-p3 "$left"
	ctr rm -a
	assert_rc "rm -a with a running container, without -f: 125" 125 "$RC"
	ctr rm -a extra
	assert_rc "rm -a with a name: 125" 125 "$RC"
	ctr rm -a -f
	assert_rc "rm -a -f: 0" 0 "$RC"
	assert_eq "nothing left" "" "$("$HUSK" --root "$ROOT" container --root "$STORE" ls -a -q)"
	assert_eq "no mount left" "" "$(mounts_under "$STORE/containers")"
}

t_ls_columns() {
	local header row col
	ctr run --name cli3-ls-with-a-long-name --network none "$IMG" true
	ctr run -d --name x --network none --entrypoint "" "$IMG" sleep 100
	ctr ls -a
	header=$(printf '%s\n' "$OUT" | head -n 1)
	assert_match "podman's header" "$header" "^CONTAINER ID +IMAGE +COMMAND +CREATED +STATUS +PORTS +NAMES$"
	for col in IMAGE CREATED STATUS NAMES; do
		row=$(printf '%s\n' "$OUT" | awk -v h="$header" -v c="$col" 'NR > 1 { print substr($0, index(h, c) - 2, 2) }' | sort -u)
		assert_eq "every row has two spaces before the $col column" "  " "$row"
	done
	assert_match "CREATED as podman's" "$(printf '%s\n' "$OUT" | grep cli3-ls)" " (Less than a second|[0-9]+ seconds?) ago "
	assert_match "STATUS of a running one" "$(printf '%s\n' "$OUT" | grep ' x$')" " Up (Less than a second|[0-9]+ seconds?) "
	ctr ls --format '{{.Names}}\t{{.State}}'
	assert_eq "--format with \\t" "$(printf 'x\trunning')" "$OUT"
	ctr ls --format table
	assert_match "--format table: the default columns" "$OUT" "^CONTAINER ID +IMAGE"
	ctr ls --format 'table {{.Names}} {{.State}}'
	assert_eq "--format table: a header row" "$(printf 'NAMES STATE\nx running')" "$OUT"
	ctr ls -a --format json
	assert_eq "--format json parses, with both" "cli3-ls-with-a-long-name x" \
		"$(printf '%s' "$OUT" | python3 -c 'import json, sys; print(" ".join(sorted(c["Names"] for c in json.load(sys.stdin))))')"
	ctr ls --format '{{.Bogus}}'
	assert_rc "--format with an unknown field: 125" 125 "$RC"
	assert_contains "it names the field" "$ERR" ".Bogus"
	ctr rm -f cli3-ls-with-a-long-name x
}

t_cp() {
	local d=$WORK/cp secret
	mkdir -p "$d/tree/sub"
	echo payload >"$d/file"
	echo deep >"$d/tree/sub/f"
	ctr run -d --name cli3-cp --network none --entrypoint "" "$IMG" sleep 100
	assert_rc "run -d" 0 "$RC" || return 1
	ctr cp "$d/file" cli3-cp:/tmp/
	assert_rc "cp FILE CTR:/tmp/" 0 "$RC"
	ctr exec cli3-cp cat /tmp/file
	assert_eq "it is there" payload "$OUT"
	ctr cp "$d/file" cli3-cp:/tmp/renamed
	ctr exec cli3-cp cat /tmp/renamed
	assert_eq "cp FILE CTR:NEWNAME" payload "$OUT"
	ctr cp "$d/tree" cli3-cp:/tmp/tree
	ctr exec cli3-cp cat /tmp/tree/sub/f
	assert_eq "cp DIR in: recursive" deep "$OUT"
	ctr cp cli3-cp:/etc/hostname "$d/hostname"
	assert_rc "cp CTR:FILE HOSTPATH" 0 "$RC"
	assert_true "it came out" test -s "$d/hostname"
	ctr cp cli3-cp:/tmp/tree "$d/out"
	assert_eq "cp DIR out: recursive" deep "$(cat "$d/out/sub/f" 2>/dev/null)"
	ctr cp cli3-cp:/no/such "$d/x"
	assert_rc "cp of a missing path: 125" 125 "$RC"
	assert_contains "it names it" "$ERR" "/no/such"
	ctr cp "$d/file" "$d/file2"
	assert_rc "cp with no CONTAINER:PATH: 125" 125 "$RC"

	# Attacks from inside: symlinks to the host's paths.
	secret=$d/host-only-secret
	echo host-secret >"$secret"
	ctr exec cli3-cp sh -c "ln -s / /tmp/hostroot && ln -s $secret /tmp/secretlink && mkdir -p /tmp/w $d && ln -s $d /tmp/w/dir"
	ctr cp "cli3-cp:/tmp/hostroot$secret" "$d/stolen"
	assert_fails "cp out through a symlink to /: the host file is not reached" "$RC"
	assert_true "nothing was read from the host" test ! -e "$d/stolen"
	ctr cp cli3-cp:/tmp/secretlink "$d/stolen2"
	assert_true "a symlink comes out as a symlink, not the host file's content" test -L "$d/stolen2"
	ctr cp "$d/file" "cli3-cp:/tmp/w/dir/planted"
	assert_true "cp in through a symlink: nothing written on the host" test ! -e "$d/planted"
	ctr exec cli3-cp cat "$d/planted"
	assert_eq "it went into the container's own $d" payload "$OUT"
	ctr cp "$d/file" "cli3-cp:/tmp/hostroot$d/planted2"
	assert_true "cp in through a symlink to /: nothing written on the host" test ! -e "$d/planted2"
	ctr rm -f cli3-cp
}

t_run_hint() {
	local d
	d=$(new_tmpdir hint)
	OUT=$(cd "$d" && timeout 20 "$HUSK" --root "$ROOT" run busybox:latest 2>&1)
	RC=$?
	assert_fails "husk run IMAGE fails" "$RC"
	assert_contains "it hints at husk container run" "$OUT" "husk container run busybox:latest"
}

t_help() {
	local verb
	for verb in start restart attach kill wait rm prune port cp; do
		ctr "$verb" --help
		assert_rc "$verb --help: exit 0" 0 "$RC"
		assert_contains "$verb --help: its usage" "$OUT" "husk container $verb"
	done
	ctr --help
	for verb in start restart attach kill wait prune port cp; do
		assert_contains "container --help lists $verb" "$OUT" "  $verb "
	done
}

complete_words() { # WORDS...: what `husk completion bash` offers for the last word
	bash -c '
		source <("$1" completion bash) || exit 1
		shift
		COMP_WORDS=("$@")
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		_husk
		echo "${COMPREPLY[*]}"' _ "$HUSK" "$HUSK" "$@"
}

t_completion() {
	ctr run --name cli3-compl-a --network none "$IMG" true
	ctr run --name cli3-compl-b --network none "$IMG" true
	assert_eq "completes container names (the group's --root)" "cli3-compl-a cli3-compl-b" \
		"$(complete_words container --root "$STORE" rm cli3-compl | tr ' ' '\n' | sort | xargs)"
	assert_eq "for start too, after a first name" "cli3-compl-b" \
		"$(complete_words container --root "$STORE" start cli3-compl-a cli3-compl-b)"
	assert_contains "completes image references for image rm" \
		"$(complete_words image --root "$STORE" rm "")" "test/busybox:latest"
	assert_contains "and for container run" "$(complete_words container --root "$STORE" run "")" \
		"test/busybox:latest"
	assert_match "completes the new verbs" "$(complete_words container "")" "attach .*cp .*kill .*port .*prune .*restart .*start .*wait"
	ctr rm cli3-compl-a cli3-compl-b
}

t_man_pages() {
	local dir dest opt key page
	dir=$(new_tmpdir man)
	capture "$REPO_DIR/hack/gen-man.sh" "$HUSK" "$dir"
	assert_rc "hack/gen-man.sh" 0 "$RC"
	assert_eq "no page made of a group's help under a verb's name" "" \
		"$(cd "$dir" && ls husk-cdi-generate-list.1 husk-cdi-list-generate.1 2>/dev/null)"
	assert_contains "husk-cdi-list(1) is list's own" "$(MANWIDTH=200 man -l "$dir/husk-cdi-list.1" 2>&1)" \
		"husk cdi list [options]"
	assert_not_contains "husk-cdi-list(1) is not generate's" "$(MANWIDTH=200 man -l "$dir/husk-cdi-list.1" 2>&1)" \
		"driver-root"
	assert_contains "husk-cdi-hook-chmod(1) is chmod's own" \
		"$(MANWIDTH=200 man -l "$dir/husk-cdi-hook-chmod.1" 2>&1)" "husk cdi-hook chmod --mode"
	for page in husk-container-start husk-container-cp husk-container-kill husk-image-rm; do
		assert_true "man page $page.1" test -s "$dir/$page.1"
	done
	dest=$(new_tmpdir destdir)
	make -C "$REPO_DIR" --no-print-directory BUILD="$BUILD_DIR" install DESTDIR="$dest" >"$WORK/install.log" 2>&1
	assert_rc "make install DESTDIR=..." 0 "$?"
	for page in man8/huskd.8 man5/huskd.json.5 man1/husk-container-start.1; do
		assert_true "make install puts $page" test -s "$dest/usr/local/share/man/$page"
	done
	assert_eq "groff finds nothing wrong in huskd(8), huskd.json(5)" "" \
		"$(groff -man -ww -z "$REPO_DIR/cri/huskd/huskd.8" "$REPO_DIR/cri/huskd/huskd.json.5" 2>&1)"
	OUT=$(MANWIDTH=200 man -l "$REPO_DIR/cri/huskd/huskd.8" 2>&1)
	for opt in $("$BUILD_DIR/huskd" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
		assert_contains "huskd(8) describes $opt" "$OUT" "$opt"
	done
	OUT=$(MANWIDTH=200 man -l "$REPO_DIR/cri/huskd/huskd.json.5" 2>&1)
	for key in $("$BUILD_DIR/huskd" --print-config | python3 -c 'import json, sys; print(" ".join(json.load(sys.stdin)))'); do
		assert_contains "huskd.json(5) describes $key" "$OUT" "$key"
	done
}

# ---------------------------------------------------------------- main

setup
for t in t_exit_codes t_port_in_use t_image_rm_in_use t_stop_warning t_start_attach_wait t_kill_restart \
	t_rm_all_prune t_ls_columns t_cp t_run_hint t_help t_completion t_man_pages; do
	run_test "$t"
done
finish
