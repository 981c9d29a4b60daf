# husk checkpoint / restore with a real CRIU (the build host's kernel may
# be one its criu cannot dump on; this one is Debian's 6.1): a process
# counting in memory is dumped, killed, restored and counts on from where
# it was; a TCP listener and an established connection survive; runc on
# the same bundle behaves the same.  Runs in the VM (see test/vm/lib.sh).
. /vm/tests/lib.sh
trap 'cleanup; runc_cleanup' EXIT

OUT=/run/ckout
RUNC_ROOT=/run/runc-vm
mkdir -p $OUT /vm/rootfs/out
# criu's kernel checks (TCP repair) connect over the loopback.
ip link set lo up

runc_cleanup() {
	local id
	command -v runc >/dev/null || return 0
	for id in $(runc --root $RUNC_ROOT list -q 2>/dev/null); do
		runc --root $RUNC_ROOT delete -f "$id" >/dev/null 2>&1
	done
}

# Hundredths of a second since boot.
now_cs() {
	awk '{ split($1, a, "."); print a[1] * 100 + substr(a[2], 1, 2) }' /proc/uptime
}

# A bundle whose process counts in memory and writes each number to
# /out/NAME (a bind mount of $OUT: external to the image).
counter_bundle() { # NAME
	local b
	b=$(new_bundle sh -c "i=0; while :; do i=\$((i+1)); echo \$i >/out/$1; sleep 0.1; done")
	sed -i "s|\"mounts\":\[|\"mounts\":[{\"destination\":\"/out\",\"type\":\"bind\",\"source\":\"$OUT\",\"options\":[\"rbind\",\"rw\"]},|" "$b/config.json"
	echo "$b"
}

# Runs CMD... in the background with its stdio on pipes (criu restores
# pipes through --inherit-fd; a host file is outside the container);
# waits for it to return (a detached run or restore) and sets RC.
with_pipes() { # LOG CMD...
	local log=$1 i=0
	shift
	rm -f "$log.rc"
	(sleep 100000 | {
		"$@"
		echo $? >"$log.rc"
	} 2>&1 | cat >"$log") &
	while [ ! -s "$log.rc" ] && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	RC=$(cat "$log.rc" 2>/dev/null)
}

count_of() { # NAME
	cat "$OUT/$1" 2>/dev/null
}

wait_count() { # NAME MIN [TENTHS]
	local i=0
	while [ $i -lt "${3:-50}" ]; do
		[ "$(count_of "$1")" -ge "$2" ] 2>/dev/null && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

t_criu_check() {
	local out
	out=$(criu check 2>&1)
	assert_eq "criu check passes in the VM" 0 $? "$out"
}

t_counter() {
	local b id=cnt n1 n2 pid1 pid2 t0 t1 t2 out
	b=$(counter_bundle cnt)
	with_pipes /run/cnt.log h run -d --bundle "$b" $id
	wait_status $id running 50
	wait_count cnt 10 || not_ok "the counter counts" "$(cat /run/cnt.log)"
	pid1=$(h state $id | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p')
	t0=$(now_cs)
	out=$(h checkpoint --image-path /run/ck-cnt --work-path /run/ck-cnt-work $id 2>&1)
	assert_eq "checkpoint of a counting process succeeds" 0 $? "$out
$(grep -h -B6 -m1 Error /run/ck-cnt-work/dump.log /run/husk-vm/cnt/criu-dump.log 2>/dev/null | head -n 8)"
	t1=$(now_cs)
	assert_eq "... and the container is gone (runc's default)" "" "$(h list --quiet)"
	sleep 0.3
	n1=$(count_of cnt)
	assert_eq "... its process is gone" "" "$(ls -d /proc/$pid1 2>/dev/null)"
	assert_true_file "... the image holds an inventory" /run/ck-cnt/inventory.img
	assert_true_file "... and descriptors.json" /run/ck-cnt/descriptors.json
	rm -f "$OUT/cnt"
	t1=$(now_cs)
	with_pipes /run/cnt2.log h restore -d --image-path /run/ck-cnt --work-path /run/ck-cnt-work --bundle "$b" $id
	t2=$(now_cs)
	assert_eq "restore succeeds" 0 "$RC" "$(cat /run/cnt2.log)"
	assert_eq "restore makes a running container" running "$(status_of $id)" "$(cat /run/cnt2.log)
$(grep Error /run/ck-cnt-work/restore.log 2>/dev/null | tail -n 3)"
	wait_count cnt $((n1 + 5)) 50
	n2=$(count_of cnt)
	if [ -n "$n1" ] && [ -n "$n2" ] && [ "$n2" -gt "$n1" ]; then
		ok "the restored process counts on from its memory ($n1 at the dump, now $n2)"
	else
		not_ok "the restored process counts on from its memory" "at dump: $n1, after restore: $n2"
	fi
	pid2=$(h state $id | sed -n 's/.*"pid": *\([0-9]*\).*/\1/p')
	if [ -n "$pid2" ] && [ "$pid2" != "$pid1" ]; then ok "the restored init is a new process"; else not_ok "the restored init is a new process" "$pid1 -> $pid2"; fi
	assert_true_file "the state file names the restored init (pid $pid2)" /proc/$pid2
	assert_eq "the init is in the container's cgroup" "0::/husk/$id" "$(cat /proc/$pid2/cgroup 2>/dev/null)"
	out=$(h exec $id cat /proc/1/cmdline | tr '\0' ' ')
	assert_contains "exec into the restored container sees its pid 1" "$out" "while :"
	echo "BENCH-NOTE husk checkpoint $(((t1 - t0) * 10)) ms restore $(((t2 - t1) * 10)) ms"
	diag "husk: checkpoint $(((t1 - t0) * 10)) ms, restore $(((t2 - t1) * 10)) ms (wall, incl. polling)"

	# --leave-running: the dump leaves it counting.
	n1=$(count_of cnt)
	out=$(h checkpoint --leave-running --image-path /run/ck-cnt2 $id 2>&1)
	assert_eq "checkpoint --leave-running succeeds" 0 $? "$out"
	assert_eq "... and the container still runs" running "$(status_of $id)"
	wait_count cnt $((n1 + 5)) 50
	assert_true_file "... the image is there" /run/ck-cnt2/inventory.img
	out=$(h checkpoint --image-path /run/ck-cnt2 $id 2>&1)
	assert_fails "a second checkpoint into the same image dir is refused" $?
	assert_contains "... saying it is not empty" "$out" "is not empty"
	h delete --force $id
	with_pipes /run/cnt3.log h restore -d --image-path /run/ck-cnt2 --bundle "$b" $id
	assert_eq "a --leave-running image restores after the original is deleted" 0 "$RC" "$(cat /run/cnt3.log)"
	h delete --force $id
}

# A listener (busybox httpd) and an established connection in the
# container's own network namespace (the nc listener's stdin is a pipe
# that never ends: a background job's /dev/null would close it at once).
# podman 4.3's arguments: the work path is its userdata dir (here the
# bundle, holding config.json), the image path a dir below it.
t_podman_args() {
	local b id=pod out sum
	b=$(counter_bundle pod)
	with_pipes /run/pod.log h run -d --bundle "$b" $id
	wait_status $id running 50
	wait_count pod 5 || not_ok "the counter counts" "$(cat /run/pod.log)"
	echo podman >"$b/attach"
	sum=$(cd "$b" && sha256sum config.json attach)
	out=$(h checkpoint --image-path "$b/checkpoint" --work-path "$b" --leave-running --file-locks $id 2>&1)
	assert_eq "podman's args: checkpoint into a non-empty work path succeeds" 0 $? "$out
$(grep -h -B6 -m1 Error "$b/dump.log" 2>/dev/null | head -n 8)"
	assert_true_file "... the image is in USERDATA/checkpoint" "$b/checkpoint/inventory.img"
	assert_true_file "... criu's log in the work path" "$b/dump.log"
	assert_eq "... config.json and the caller's file untouched" "$sum" "$(cd "$b" && sha256sum config.json attach)"
	assert_eq "... and the container still runs (--leave-running)" running "$(status_of $id)"
	h delete -f $id >/dev/null 2>&1
}

t_tcp() {
	local b id=tcp out n1 n2
	b=$(new_bundle sh -c 'mkdir -p /tmp/w; echo hello >/tmp/w/index.html; httpd -f -p 8080 -h /tmp/w &
sleep 100000 | nc -l -p 9000 >/tmp/recv & sleep 0.5; i=0; while :; do i=$((i+1)); echo $i; sleep 0.1; done | nc 127.0.0.1 9000; echo "nc: $?"; sleep 1000')
	with_pipes /run/tcp.log h run -d --bundle "$b" $id
	wait_status $id running 50
	sleep 1
	out=$(h exec $id wget -q -O - http://127.0.0.1:8080/ 2>&1)
	assert_eq "the listener answers before the checkpoint" hello "$out" "$(cat /run/tcp.log)"
	n1=$(h exec $id sh -c 'tail -n 1 /tmp/recv')
	sleep 0.5
	n2=$(h exec $id sh -c 'tail -n 1 /tmp/recv')
	if [ -n "$n1" ] && [ -n "$n2" ] && [ "$n2" -gt "$n1" ]; then
		ok "the connection carries data before the checkpoint ($n1 -> $n2)"
	else
		not_ok "the connection carries data before the checkpoint" "before: $n1, after: $n2" "$(cat /run/tcp.log)"
	fi
	out=$(h checkpoint --tcp-established --image-path /run/ck-tcp $id 2>&1)
	assert_eq "checkpoint --tcp-established of listening and connected sockets succeeds" 0 $? "$out
$(grep Error /run/ck-tcp/dump.log 2>/dev/null | tail -n 3)"
	with_pipes /run/tcp2.log h restore -d --tcp-established --image-path /run/ck-tcp --bundle "$b" $id
	assert_eq "restore --tcp-established returns 0" 0 "$RC" "$(cat /run/tcp2.log)"
	assert_eq "restore --tcp-established succeeds" running "$(status_of $id)" "$(cat /run/tcp2.log)
$(grep Error /run/ck-tcp/restore.log 2>/dev/null | tail -n 3)"
	out=$(h exec $id wget -q -O - http://127.0.0.1:8080/ 2>&1)
	assert_eq "the restored listener answers" hello "$out" "$(h exec $id sh -c 'netstat -tan; ps; ls /proc | head -5' 2>&1; h ps $id 2>&1; cat /run/tcp2.log)
$(grep -h -i -B2 'error\|warn' /run/ck-tcp/restore.log | tail -n 12)"
	n1=$(h exec $id sh -c 'tail -n 1 /tmp/recv')
	sleep 1
	n2=$(h exec $id sh -c 'tail -n 1 /tmp/recv')
	if [ -n "$n1" ] && [ -n "$n2" ] && [ "$n2" -gt "$n1" ]; then
		ok "the established connection carries on after restore ($n1 -> $n2)"
	else
		not_ok "the established connection carries on after restore" "before: $n1, after: $n2"
	fi
	h delete --force $id
	out=$(h checkpoint --image-path /run/ck-tcp2 $id 2>&1)
	assert_fails "checkpoint of a deleted container fails" $?
}

# runc on the same bundle: the same outcome, and the times side by side.
t_runc() {
	local b id=rc n1 n2 t0 t1 t2 out
	command -v runc >/dev/null || {
		not_ok "runc is in the VM"
		return
	}
	b=$(counter_bundle rc)
	with_pipes /run/rc.log runc --root $RUNC_ROOT run -d --bundle "$b" $id
	wait_count rc 10 || not_ok "runc's counter counts" "$(cat /run/rc.log)"
	t0=$(now_cs)
	out=$(runc --root $RUNC_ROOT checkpoint --image-path /run/ck-rc --work-path /run/ck-rc-work $id 2>&1)
	assert_eq "runc checkpoint of the same bundle succeeds" 0 $? "$out
$(grep -h -B3 Error /run/ck-rc-work/dump.log 2>/dev/null | head -n 12)"
	t1=$(now_cs)
	assert_eq "... and runc's container is gone too" "" "$(runc --root $RUNC_ROOT list -q)"
	sleep 0.3
	n1=$(count_of rc)
	t1=$(now_cs)
	with_pipes /run/rc2.log runc --root $RUNC_ROOT restore -d --image-path /run/ck-rc --work-path /run/ck-rc-work --bundle "$b" $id
	t2=$(now_cs)
	assert_eq "runc restore succeeds" 0 "$RC" "$(cat /run/rc2.log)"
	wait_count rc $((n1 + 5)) 50
	n2=$(count_of rc)
	if [ -n "$n1" ] && [ -n "$n2" ] && [ "$n2" -gt "$n1" ]; then
		ok "runc's restored process counts on too ($n1 -> $n2)"
	else
		not_ok "runc's restored process counts on too" "at dump: $n1, after restore: $n2" "$(cat /run/rc2.log)"
	fi
	echo "BENCH-NOTE runc checkpoint $(((t1 - t0) * 10)) ms restore $(((t2 - t1) * 10)) ms"
	diag "runc: checkpoint $(((t1 - t0) * 10)) ms, restore $(((t2 - t1) * 10)) ms (wall, incl. polling)"
	runc --root $RUNC_ROOT delete -f $id >/dev/null 2>&1
}

assert_true_file() { # NAME PATH
	if [ -e "$2" ]; then ok "$1"; else not_ok "$1" "$2 is missing"; fi
}

# The same bundle checkpointed and restored by husk and runc in turns,
# three rounds (the first warms criu's binary and libraries into the page
# cache), every round's times reported: under emulation, with other VMs
# on the machine, one round says little.
t_timing() {
	local b round rt id t0 t1 t2 line
	command -v runc >/dev/null || return 0
	b=$(counter_bundle timing)
	for round in 1 2 3; do
		for rt in husk runc; do
			id=tm-$rt-$round
			rm -rf /run/ck-$id
			if [ $rt = husk ]; then
				with_pipes /run/$id.log h run -d --bundle "$b" $id
			else
				with_pipes /run/$id.log runc --root $RUNC_ROOT run -d --bundle "$b" $id
			fi
			sleep 0.5
			t0=$(now_cs)
			if [ $rt = husk ]; then
				h checkpoint --image-path /run/ck-$id $id >/dev/null 2>&1
			else
				runc --root $RUNC_ROOT checkpoint --image-path /run/ck-$id $id >/dev/null 2>&1
			fi
			t1=$(now_cs)
			if [ $rt = husk ]; then
				with_pipes /run/$id.r.log h restore -d --image-path /run/ck-$id --bundle "$b" $id
			else
				with_pipes /run/$id.r.log runc --root $RUNC_ROOT restore -d --image-path /run/ck-$id --bundle "$b" $id
			fi
			t2=$(now_cs)
			[ "$RC" = 0 ] || not_ok "timing round $round: $rt restore" "$(cat /run/$id.r.log)"
			line="$line $rt=$(((t1 - t0) * 10))/$(((t2 - t1) * 10))"
			if [ $rt = husk ]; then h delete --force $id; else runc --root $RUNC_ROOT delete -f $id; fi
		done
		diag "checkpoint/restore ms of the same bundle, round $round$([ $round = 1 ] && echo ' (warm-up)'):$line"
		line=
	done
}

t_criu_check
t_counter
t_podman_args
t_tcp
t_runc
t_timing
