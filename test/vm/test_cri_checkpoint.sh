# CheckpointContainer (crictl's `checkpoint` verb, through husk's CRI
# client) against huskd with a real CRIU: a running container
# counting in memory is checkpointed into one archive in CRI-O's layout
# (checkpoint/, config.dump, spec.dump, rootfs-diff.tar) and keeps
# running; refusals leave nothing; CreateContainer with the archive as the
# image and start restore it into a new container that counts on from
# the dumped memory, watched by its monitor.  The pod and container use
# their own pid namespace (kubelet's default): CRIU cannot dump a part of
# a shared one.  Runs in the VM (see test/vm/lib.sh;
# hack/vm-test.sh adds huskd, husk's CRI client, criu and the busybox image).
. /vm/tests/lib.sh
CRI=/run/cri-ckpt
HUSKD_PID=

stop_huskd() {
	[ -n "$HUSKD_PID" ] && kill "$HUSKD_PID" 2>/dev/null && wait "$HUSKD_PID" 2>/dev/null
	HUSKD_PID=
}
trap 'stop_huskd; cleanup' EXIT

c() { timeout 120 /husk/bin/cri-cli -t 110s -r "unix://$CRI/huskd.sock" -i "unix://$CRI/huskd.sock" "$@"; }

start_huskd() {
	local i=0
	mkdir -p "$CRI/empty.d" "$CRI/logs" "$CRI/out"
	printf '{"cni_conf_dir": "%s/empty.d"}\n' "$CRI" >"$CRI/config.json"
	/husk/bin/huskd --listen "unix://$CRI/huskd.sock" --root "$CRI/root" --state "$CRI/state" \
		--config "$CRI/config.json" >>"$CRI/huskd.log" 2>&1 &
	HUSKD_PID=$!
	while [ ! -S "$CRI/huskd.sock" ] && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ -S "$CRI/huskd.sock" ] || not_ok "huskd listens" "$(tail -5 "$CRI/huskd.log")"
}

t_cri_checkpoint() {
	local pod cid out n1 n2 t0 t1
	ip link set lo up
	[ -e /etc/resolv.conf ] || : >/etc/resolv.conf
	[ -e /etc/hosts ] || echo "127.0.0.1 localhost" >/etc/hosts
	out=$(timeout 60 "$HUSK" image --root "$CRI/root" import /vm/images/busybox busybox:latest 2>&1)
	assert_eq "husk image import busybox into huskd's root" 0 $? "$out"
	start_huskd
	printf '{"metadata": {"name": "ckpt", "namespace": "vm", "uid": "uid-ckpt"}, "log_directory": "%s/logs",
 "linux": {"security_context": {"namespace_options": {"network": 2, "pid": 1}}}}\n' "$CRI" >"$CRI/pod.json"
	printf '{"metadata": {"name": "counter"}, "image": {"image": "busybox:latest"},
 "command": ["sh", "-c", "i=0; while :; do i=$((i+1)); echo $i >/tmp/count.new; mv /tmp/count.new /tmp/count; echo $i; sleep 0.1; done"],
 "log_path": "counter.log", "linux": {"security_context": {"namespace_options": {"network": 2, "pid": 1}}}}\n' \
		>"$CRI/ctr.json"
	sed -e 's|"name": "counter"|"name": "restored"|' -e "s|\"image\": \"busybox:latest\"|\"image\": \"$CRI/out/counter.tar\"|" \
		-e 's|counter.log|restored.log|' "$CRI/ctr.json" >"$CRI/restored.json"
	pod=$(c runp "$CRI/pod.json" 2>&1) || not_ok "runp" "$pod" "$(tail -5 "$CRI/huskd.log")"
	cid=$(c create "$pod" "$CRI/ctr.json" "$CRI/pod.json" 2>&1) || not_ok "create" "$cid"
	c start "$cid" >/dev/null 2>&1 || not_ok "start" "$(tail -5 "$CRI/huskd.log")"
	sleep 1
	t0=$(awk '{ print int($1 * 100) }' /proc/uptime)
	out=$(c checkpoint --export="$CRI/out/counter.tar" "$cid" 2>&1)
	assert_eq "checkpoint of a running container succeeds" 0 $? "$out
$(grep -h -B4 -m1 'Error (' "$CRI"/state/runtime/*/criu-dump.log 2>/dev/null | head -n 8)"
	t1=$(awk '{ print int($1 * 100) }' /proc/uptime)
	diag "checkpoint: $(((t1 - t0) * 10)) ms"
	out=$(tar -tf "$CRI/out/counter.tar" 2>&1)
	assert_contains "the archive holds checkpoint/inventory.img" "$out" "checkpoint/inventory.img"
	assert_contains "... config.dump" "$out" "config.dump"
	assert_contains "... spec.dump" "$out" "spec.dump"
	assert_contains "... rootfs-diff.tar" "$out" "rootfs-diff.tar"
	assert_contains "... and the container's log" "$out" "container.log"
	out=$(tar -xOf "$CRI/out/counter.tar" config.dump 2>&1)
	assert_contains "config.dump names the container" "$out" "\"id\": \"$cid\""
	assert_contains "... its name" "$out" "\"name\": \"counter\""
	out=$(tar -xOf "$CRI/out/counter.tar" rootfs-diff.tar | tar -t 2>&1)
	assert_contains "rootfs-diff.tar holds the file the container wrote" "$out" "count"
	assert_eq "only the archive is left where it was written" "counter.tar" "$(ls "$CRI/out")"
	out=$(c ps --state Running -q --no-trunc 2>&1)
	assert_contains "the container keeps running" "$out" "$cid"
	n1=$(c exec -s "$cid" cat /tmp/count 2>&1)
	sleep 0.5
	n2=$(c exec -s "$cid" cat /tmp/count 2>&1)
	if [ "$n2" -gt "$n1" ] 2>/dev/null; then ok "... and counting ($n1 -> $n2)"; else not_ok "... and counting" "$n1 -> $n2"; fi
	out=$(c checkpoint --export="$CRI/out/counter.tar" "$cid" 2>&1)
	assert_fails "a second checkpoint to the same path is refused" $?
	assert_contains "... saying it exists" "$out" "exists already"
	c stop "$cid" >/dev/null 2>&1
	out=$(c checkpoint --export="$CRI/out/stopped.tar" "$cid" 2>&1)
	assert_fails "checkpoint of an exited container is refused" $?
	assert_contains "... saying it is not running" "$out" "is not running"
	assert_eq "... and nothing is left" "counter.tar" "$(ls "$CRI/out")"
	restore_from_archive "$pod"
	c stopp "$pod" >/dev/null 2>&1
	c rmp "$pod" >/dev/null 2>&1
}

# CreateContainer with the archive as its image, as kubelet restores:
# the new container runs on from the dumped memory.
restore_from_archive() { # POD
	local rid out n0 n1 t0 t1
	n0=$(tar -xOf "$CRI/out/counter.tar" rootfs-diff.tar | tar -xO tmp/count 2>/dev/null)
	t0=$(awk '{ print int($1 * 100) }' /proc/uptime)
	rid=$(c create "$1" "$CRI/restored.json" "$CRI/pod.json" 2>&1)
	assert_eq "create from the checkpoint archive succeeds" 0 $? "$rid"
	out=$(c start "$rid" 2>&1)
	assert_eq "start restores it" 0 $? "$out
$(grep -h -B4 -m1 'Error (' "$CRI"/root/containers/*/restore/checkpoint/restore.log 2>/dev/null | head -n 8)"
	t1=$(awk '{ print int($1 * 100) }' /proc/uptime)
	diag "create + start from the archive: $(((t1 - t0) * 10)) ms"
	out=$(c ps --state Running -q --no-trunc 2>&1)
	assert_contains "the restored container is RUNNING" "$out" "$rid"
	sleep 1
	n1=$(c exec -s "$rid" cat /tmp/count 2>&1)
	if [ -n "$n0" ] && [ "$n1" -gt "$n0" ] 2>/dev/null; then
		ok "it counts on from the dumped memory ($n0 at the checkpoint, now $n1)"
	else
		not_ok "it counts on from the dumped memory" "at the checkpoint: $n0, now: $n1"
	fi
	c stop -t 1 "$rid" >/dev/null 2>&1
	out=$(c ps -a --state Exited -q --no-trunc 2>&1)
	assert_contains "its stop is seen through its monitor: EXITED" "$out" "$rid"
	# sh as pid 1 ignores SIGTERM: the SIGKILL after the timeout ends it.
	out=$(c inspect "$rid" 2>&1 | grep -m1 '"exitCode"')
	assert_contains "... with the exit code of the SIGKILL (137)" "$out" "137"
	c rm "$rid" >/dev/null 2>&1
}

t_cri_checkpoint
