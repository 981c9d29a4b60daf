# AppArmor for real, on the VM's Debian kernel (the build host has none):
# a profile loaded with apparmor_parser confines a container (a denied
# write fails, the same write unconfined succeeds, /proc/self/attr/current
# names the profile), `husk exec` into it is confined too, a profile that
# is not loaded is refused at create with nothing left; huskd loads
# husk-default at start, and husk-default denies mounts and writes to
# /proc/sys outside kernel/shm* where the unconfined control succeeds.
# Through CRI (husk's C client, test/vm/cri_cli.c): a container that asks
# for nothing runs under husk-default, one that asks for Unconfined does
# not, a pod's pause process (shared pid namespace) runs under
# husk-default, and a Localhost profile that is not loaded fails
# CreateContainer.
# Runs in the VM (see test/vm/lib.sh; hack/vm-test.sh adds apparmor_parser,
# huskd, the CRI client and the busybox image).
. /vm/tests/lib.sh

AA=/run/aa-vm
HUSKD_PID=
mkdir -p "$AA"

stop_huskd() {
	[ -n "$HUSKD_PID" ] && kill "$HUSKD_PID" 2>/dev/null && wait "$HUSKD_PID" 2>/dev/null
	HUSKD_PID=
}
trap 'stop_huskd; cleanup; apparmor_parser -R "$AA/test.profile" >/dev/null 2>&1' EXIT

# A bundle of the template running ARGS under PROFILE ("" for none).
aa_bundle() { # PROFILE ARGS...
	local profile=$1 b
	shift
	b=$(new_bundle "$@")
	[ -n "$profile" ] && sed -i -e "s|\"process\":{|\"process\":{\"apparmorProfile\":\"$profile\",|" "$b/config.json"
	echo "$b"
}

t_kernel() {
	local enabled
	enabled=$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)
	diag "kernel command line: $(cat /proc/cmdline)"
	diag "LSMs: $(cat /sys/kernel/security/lsm 2>/dev/null)"
	assert_eq "vm apparmor: the kernel has AppArmor enabled" Y "$enabled" || return 1
	assert_contains "vm apparmor: husk features says so" "$(h features | tr -d ' \n')" '"apparmor":{"enabled":true}'
}

t_load() {
	cat >"$AA/test.profile" <<'EOF'
abi <abi/3.0>,
profile husk-vm-test flags=(attach_disconnected,mediate_deleted) {
  file,
  network,
  capability,
  umount,
  signal,
  ptrace,
  deny /tmp/forbidden w,
}
EOF
	OUT=$(apparmor_parser -K -r "$AA/test.profile" 2>&1)
	assert_eq "vm apparmor: apparmor_parser loads a test profile" 0 "$?" "$OUT"
	assert_contains "vm apparmor: securityfs lists it" "$(cat /sys/kernel/security/apparmor/profiles)" \
		"husk-vm-test (enforce)"
}

WRITE='cat /proc/self/attr/current; (echo x >/tmp/forbidden) 2>/dev/null && echo WROTE || echo DENIED; echo y >/tmp/other && echo OTHER'

t_confined() {
	local b
	b=$(aa_bundle husk-vm-test sh -c "$WRITE")
	run_bundle "$b" aa-conf
	assert_eq "vm apparmor: a confined container runs" 0 "$RC" "$OUT"
	assert_eq "vm apparmor: attr/current names the profile; the denied write fails, another works" \
		"husk-vm-test (enforce) DENIED OTHER" "$(printf '%s' "$OUT" | tr '\n' ' ' | sed 's/ $//')"
	b=$(aa_bundle "" sh -c "$WRITE")
	run_bundle "$b" aa-unconf
	assert_eq "vm apparmor: control: unconfined, the same write succeeds" "unconfined WROTE OTHER" \
		"$(printf '%s' "$OUT" | tr '\n' ' ' | sed 's/ $//')"
}

t_exec() {
	local b out
	b=$(aa_bundle husk-vm-test sleep 300)
	start_bundle "$b" aa-exec || {
		not_ok "vm apparmor: a confined sleeper starts" "$(cat /run/aa-exec.log)"
		return 1
	}
	out=$(h exec aa-exec sh -c "$WRITE" 2>&1 | tr '\n' ' ' | sed 's/ $//')
	assert_eq "vm apparmor: husk exec into it is confined too" "husk-vm-test (enforce) DENIED OTHER" "$out"
	out=$(h exec --apparmor unconfined aa-exec cat /proc/self/attr/current 2>&1)
	assert_eq "vm apparmor: husk exec --apparmor picks the exec's own profile" unconfined "$out"
	h delete --force aa-exec >/dev/null 2>&1
}

t_missing() {
	local b
	b=$(aa_bundle husk-vm-missing sh -c 'touch /tmp/ran')
	h create --bundle "$b" aa-missing </dev/null >"$AA/missing.log" 2>&1
	assert_fails "vm apparmor: create with a profile that is not loaded fails" $?
	assert_contains "vm apparmor: ... naming it" "$(cat "$AA/missing.log")" \
		"apply AppArmor profile \`husk-vm-missing\`: no such profile is loaded"
	assert_gone "vm apparmor: ... and nothing is left" "$STATE/aa-missing"
	assert_gone "vm apparmor: ... nor its cgroup" "$CG/husk/aa-missing"
}

# The attack: a config without a /proc mount whose image holds a regular
# file at /proc/self/attr/apparmor/exec.  Writing the profile there would
# "succeed" and the container would run unconfined; husk checks that the
# file is procfs's and refuses.
t_fake_proc() {
	local b root=$AA/fake-root
	rm -rf "$root"
	cp -a /vm/rootfs "$root"
	mkdir -p "$root/proc/self/attr/apparmor"
	: >"$root/proc/self/attr/apparmor/exec"
	b=$(aa_bundle husk-vm-test sh -c 'cat /proc/self/attr/current; echo RAN')
	sed -i -e 's|{"destination":"/proc","type":"proc","source":"proc"},||' \
		-e "s|\"root\":{\"path\":\"/vm/rootfs\",\"readonly\":true}|\"root\":{\"path\":\"$root\",\"readonly\":false}|" \
		"$b/config.json"
	h create --bundle "$b" aa-fake </dev/null >"$AA/fake.log" 2>&1
	assert_fails "vm apparmor attack: an image's own /proc/self/attr file is refused" $?
	assert_contains "vm apparmor attack: ... saying it is not procfs" "$(cat "$AA/fake.log")" "is not on procfs"
	assert_eq "vm apparmor attack: ... and the fake file was never written" "" "$(cat "$root/proc/self/attr/apparmor/exec")"
	assert_gone "vm apparmor attack: ... nothing is left" "$STATE/aa-fake"
	rm -rf "$root"
}

t_huskd_loads_default() {
	local i=0
	printf '{"cni_conf_dir": "%s/empty.d"}\n' "$AA" >"$AA/huskd.json"
	mkdir -p "$AA/empty.d"
	/husk/bin/huskd --listen "unix://$AA/huskd.sock" --root "$AA/root" --state "$AA/state" \
		--config "$AA/huskd.json" >"$AA/huskd.log" 2>&1 &
	HUSKD_PID=$!
	while [ ! -S "$AA/huskd.sock" ] && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	assert_contains "vm apparmor: huskd loads husk-default at start" "$(cat "$AA/huskd.log")" \
		"AppArmor profile \`husk-default\` loaded"
	assert_contains "vm apparmor: ... the kernel lists it" "$(cat /sys/kernel/security/apparmor/profiles)" \
		"husk-default (enforce)"
}

# With CAP_SYS_ADMIN and no read-only /proc paths, so that only AppArmor
# stands between the container and these.
DEFAULT_PROBE='cat /proc/self/attr/current
mount -t tmpfs t /tmp 2>/dev/null && echo mount=ok || echo mount=denied
(echo husk >/proc/sys/kernel/domainname) 2>/dev/null && echo domainname=ok || echo domainname=denied
(echo 4096 >/proc/sys/kernel/shmmni) 2>/dev/null && echo shmmni=ok || echo shmmni=denied
(echo h >/proc/sysrq-trigger) 2>/dev/null && echo sysrq=ok || echo sysrq=denied'

default_bundle() { # PROFILE
	local b
	b=$(aa_bundle "$1" sh -c "$DEFAULT_PROBE")
	sed -i -e 's|"CAP_MKNOD"|"CAP_MKNOD","CAP_SYS_ADMIN"|g' -e 's|"readonlyPaths":\[[^]]*\]|"readonlyPaths":[]|' \
		"$b/config.json"
	echo "$b"
}

t_husk_default() {
	local b
	b=$(default_bundle husk-default)
	run_bundle "$b" aa-default
	assert_eq "vm husk-default: no mount, no /proc/sys/kernel write but shm*" \
		"husk-default (enforce) mount=denied domainname=denied shmmni=ok sysrq=denied" \
		"$(printf '%s' "$OUT" | tr '\n' ' ' | sed 's/ $//')"
	b=$(default_bundle "")
	run_bundle "$b" aa-default-ctl
	assert_eq "vm husk-default: control: unconfined, the same succeed" \
		"unconfined mount=ok domainname=ok shmmni=ok sysrq=ok" "$(printf '%s' "$OUT" | tr '\n' ' ' | sed 's/ $//')"
}

c() { timeout 60 /husk/bin/cri-cli -r "unix://$AA/huskd.sock" "$@"; }

# CTR-NAME APPARMOR-JSON: a sleeping container (pid 1 of its own pid
# namespace, so /proc/1 is its init and not the pod's) of the pod POD asking for
# APPARMOR (a SecurityProfile, or "" for none); its id in CID.
cri_container() {
	local json=$AA/$1.json sc=""
	[ -n "$2" ] && sc=", \"linux\": {\"security_context\": {\"apparmor\": $2}}"
	printf '{"metadata": {"name": "%s"}, "image": {"image": "busybox:latest"}, "command": ["sleep", "300"],
 "log_path": "%s.log"%s}\n' "$1" "$1" "$sc" >"$json"
	CID=$(c create "$POD" "$json" "$AA/pod.json" 2>&1)
}

# huskd (started by t_huskd_loads_default) through CRI: RuntimeDefault (or
# no profile) is husk-default, Unconfined is not, a Localhost profile the
# kernel does not have fails CreateContainer.
t_cri_default() {
	local out
	out=$(timeout 60 "$HUSK" image --root "$AA/root" import /vm/images/busybox busybox:latest 2>&1)
	assert_eq "vm apparmor cri: import busybox into huskd's root" 0 $? "$out"
	printf '{"metadata": {"name": "aa", "namespace": "vm", "uid": "aa-1"}, "log_directory": "%s/logs",
 "linux": {"security_context": {"namespace_options": {"network": 2, "pid": 1}}}}\n' "$AA" >"$AA/pod.json"
	POD=$(c runp "$AA/pod.json" 2>&1) || not_ok "vm apparmor cri: RunPodSandbox" "$POD" "$(tail -5 "$AA/huskd.log")"
	cri_container plain ""
	c start "$CID" >/dev/null 2>&1
	assert_eq "vm apparmor cri: a container asking for nothing runs under husk-default" "husk-default (enforce)" \
		"$(c exec -s "$CID" cat /proc/1/attr/current 2>&1)"
	cri_container free '{"profile_type": 1}'
	c start "$CID" >/dev/null 2>&1
	assert_eq "vm apparmor cri: Unconfined runs unconfined" "unconfined" \
		"$(c exec -s "$CID" cat /proc/1/attr/current 2>&1)"
	cri_container missing '{"profile_type": 2, "localhost_ref": "no-such-profile"}'
	assert_contains "vm apparmor cri: a Localhost profile that is not loaded fails CreateContainer, naming it" \
		"$CID" "no-such-profile"
	c stopp "$POD" >/dev/null 2>&1
	c rmp "$POD" >/dev/null 2>&1 || not_ok "vm apparmor cri: RemovePodSandbox" "$(tail -5 "$AA/huskd.log")"
	# A pod sharing one pid namespace: pid 1 is its pause process, under
	# the pod's profile (RuntimeDefault: husk-default).
	printf '{"metadata": {"name": "aa-shared", "namespace": "vm", "uid": "aa-2"}, "log_directory": "%s/logs",
 "linux": {"security_context": {"namespace_options": {"network": 2, "pid": 0}}}}\n' "$AA" >"$AA/pod.json"
	POD=$(c runp "$AA/pod.json" 2>&1) || not_ok "vm apparmor cri: RunPodSandbox (shared pid)" "$POD"
	cri_container shared '{"profile_type": 1}'
	c start "$CID" >/dev/null 2>&1
	assert_eq "vm apparmor cri: the pod's pause process (shared pid namespace) runs under husk-default" \
		"husk-default (enforce)" "$(c exec -s "$CID" cat /proc/1/attr/current 2>&1)"
	c stopp "$POD" >/dev/null 2>&1
	c rmp "$POD" >/dev/null 2>&1 || not_ok "vm apparmor cri: RemovePodSandbox (shared pid)" "$(tail -5 "$AA/huskd.log")"
	stop_huskd
}

t_kernel || exit 0
t_load
t_confined
t_exec
t_missing
t_fake_proc
t_huskd_loads_default
t_cri_default
t_husk_default
