#!/usr/bin/env bash
# The container's process: args, env, cwd, user and groups, umask, rlimits,
# capabilities, no_new_privs, oom_score_adj, hostname/domainname, sysctls,
# seccomp and the terminal handed over a --console-socket.
# Run alone: RUNTIME=/usr/sbin/runc ./test/integration/test_process.sh
. "$(dirname "$0")/lib.sh"
require_runtime

line_of() { # N: line N of $OUT
	printf '%s\n' "$OUT" | sed -n "${1}p"
}

t_args_env_cwd() {
	BUNDLE=$(new_bundle)
	spec_set 'c["process"]["env"] = ["PATH=/bin", "FOO=bar", "WITH_SPACE=a b"]; c["process"]["cwd"] = "/tmp"'
	spec_args sh -c 'echo "$FOO|$WITH_SPACE|$(pwd)|$0|$1"' arg0 "arg 1"
	run_ctr
	assert_eq "args, env and cwd reach the process" "bar|a b|/tmp|arg0|arg 1" "$OUT"
	spec_set 'c["process"]["env"] = ["PATH=/bin"]'
	spec_args env
	run_ctr
	assert_eq "env is exactly the config's (no host leaks)" "PATH=/bin" "$(printf '%s\n' "$OUT" | grep -v '^HOME=')"
	spec_set 'c["process"]["cwd"] = "/new/dir"'
	spec_args pwd
	run_ctr
	assert_eq "a missing cwd is created" /new/dir "$OUT"
	spec_set 'c["process"]["cwd"] = "/"'
	spec_args /no/such/binary
	run_ctr
	assert_fails "a missing executable fails the run" "$RC"
	spec_args nosuchcommand
	run_ctr
	assert_fails "a command missing from PATH fails the run" "$RC"
	spec_args id -u
	run_ctr
	assert_eq "args[0] without a slash is looked up in the config's PATH" 0 "$OUT"
}

t_user_groups() {
	BUNDLE=$(new_bundle)
	spec_set 'c["process"]["user"] = {"uid": 1000, "gid": 1000, "additionalGids": [1001, 65534]}'
	spec_args sh -c 'id -u; id -g; grep "^Groups:" /proc/self/status; grep -E "^(Uid|Gid):" /proc/self/status'
	run_ctr
	assert_rc "user: container runs" 0 "$RC" || return
	assert_eq "user: uid 1000" 1000 "$(line_of 1)"
	assert_eq "user: gid 1000" 1000 "$(line_of 2)"
	assert_eq "user: supplementary groups are exactly additionalGids" "1001 65534" "$(line_of 3 | cut -f2 | awk '{$1=$1; print}')"
	assert_eq "user: real, effective, saved and fs uid are all 1000" "1000 1000 1000 1000" "$(line_of 4 | cut -f2- | tr '\t' ' ' | awk '{$1=$1; print}')"
	assert_eq "user: all four gids are 1000" "1000 1000 1000 1000" "$(line_of 5 | cut -f2- | tr '\t' ' ' | awk '{$1=$1; print}')"
	spec_set 'c["process"]["user"] = {"uid": 0, "gid": 0}'
	spec_args sh -c 'grep "^Groups:" /proc/self/status'
	run_ctr
	assert_eq "user: no additionalGids means no supplementary groups" "" "$(printf '%s' "$OUT" | cut -f2 | awk '{$1=$1; print}')"
}

t_umask() {
	BUNDLE=$(new_bundle)
	spec_set 'c["process"]["user"]["umask"] = 0o077'
	spec_args sh -c 'umask; touch /tmp/f; stat -c %a /tmp/f'
	run_ctr
	assert_eq "umask 077 is applied" "0077 600" "$(printf '%s' "$OUT" | tr '\n' ' ' | sed 's/ $//')"
}

t_rlimits() {
	BUNDLE=$(new_bundle)
	spec_set 'c["process"]["rlimits"] = [
  {"type": "RLIMIT_NOFILE", "soft": 512, "hard": 1000},
  {"type": "RLIMIT_NPROC", "soft": 300, "hard": 400},
  {"type": "RLIMIT_CORE", "soft": 0, "hard": 0}]'
	spec_args sh -c 'ulimit -n; ulimit -Hn; awk "/^Max processes/ {print \"nproc\", \$3, \$4} /^Max core file size/ {print \"core\", \$5, \$6}" /proc/self/limits'
	run_ctr
	assert_rc "rlimits: container runs" 0 "$RC" || return
	assert_eq "rlimits: ulimit -n is the soft NOFILE" 512 "$(line_of 1)"
	assert_eq "rlimits: ulimit -Hn is the hard NOFILE" 1000 "$(line_of 2)"
	assert_eq "rlimits: NPROC and CORE applied" "core 0 0|nproc 300 400" \
		"$(printf '%s\n' "$OUT" | sed -n 3,4p | sort | tr '\n' '|' | sed 's/|$//')"
	spec_set 'c["process"]["rlimits"] = [{"type": "RLIMIT_BOGUS", "soft": 1, "hard": 1}]'
	run_ctr
	assert_fails "rlimits: an unknown rlimit type is an error" "$RC"
}

# Capability bits: CHOWN 0, KILL 5, NET_BIND_SERVICE 10.
t_capabilities() {
	BUNDLE=$(new_bundle)
	spec_set '
three = ["CAP_CHOWN", "CAP_KILL", "CAP_NET_BIND_SERVICE"]
c["process"]["capabilities"] = {"bounding": three, "effective": three, "permitted": three,
                                "inheritable": ["CAP_KILL"], "ambient": ["CAP_KILL"]}'
	spec_args grep ^Cap /proc/self/status
	run_ctr
	assert_rc "caps: container runs" 0 "$RC" || return
	# Root execs with every file capability, so permitted and effective
	# become inheritable | bounding; ambient survives (no setuid/file caps).
	assert_eq "caps as root: CapInh CapPrm CapEff CapBnd CapAmb" \
		"CapInh:0000000000000020 CapPrm:0000000000000421 CapEff:0000000000000421 CapBnd:0000000000000421 CapAmb:0000000000000020" \
		"$(printf '%s' "$OUT" | tr -d '\t' | tr '\n' ' ' | sed 's/ $//')"
	spec_set 'c["process"]["user"] = {"uid": 1000, "gid": 1000}'
	run_ctr
	# A non-root exec keeps only the ambient set in permitted/effective.
	assert_eq "caps as uid 1000: ambient KILL is all it keeps" \
		"CapInh:0000000000000020 CapPrm:0000000000000020 CapEff:0000000000000020 CapBnd:0000000000000421 CapAmb:0000000000000020" \
		"$(printf '%s' "$OUT" | tr -d '\t' | tr '\n' ' ' | sed 's/ $//')"
	spec_set 'c["process"]["user"] = {"uid": 0, "gid": 0}; c["process"]["capabilities"] = {}'
	run_ctr
	assert_eq "caps: an empty capabilities object drops everything" \
		"CapInh:0000000000000000 CapPrm:0000000000000000 CapEff:0000000000000000 CapBnd:0000000000000000 CapAmb:0000000000000000" \
		"$(printf '%s' "$OUT" | tr -d '\t' | tr '\n' ' ' | sed 's/ $//')"
	spec_set 'c["process"]["capabilities"] = {"bounding": ["CAP_CHOWN"], "permitted": ["CAP_CHOWN"], "effective": ["CAP_CHOWN"]}'
	spec_args sh -c 'touch /tmp/x; chown 1000 /tmp/x && echo chown-file-ok; stat -c %u /tmp/x'
	run_ctr
	assert_eq "caps: a granted CAP_CHOWN works" "chown-file-ok 1000" "$(printf '%s' "$OUT" | tr '\n' ' ' | sed 's/ $//')"
}

t_no_new_privs() {
	BUNDLE=$(new_bundle)
	spec_set 'c["process"]["noNewPrivileges"] = True'
	spec_args grep ^NoNewPrivs /proc/self/status
	run_ctr
	assert_eq "noNewPrivileges true sets NoNewPrivs" "NoNewPrivs:	1" "$OUT"
	spec_set 'c["process"]["noNewPrivileges"] = False'
	run_ctr
	assert_eq "noNewPrivileges false leaves it clear" "NoNewPrivs:	0" "$OUT"
}

t_oom_score_adj() {
	local host_adj
	host_adj=$(cat /proc/self/oom_score_adj)
	BUNDLE=$(new_bundle)
	spec_set 'c["process"]["oomScoreAdj"] = int(A[0]) + 100' "$host_adj"
	spec_args cat /proc/self/oom_score_adj
	run_ctr
	assert_eq "oomScoreAdj: raising it works" "$((host_adj + 100))" "$OUT"
	if [ "$host_adj" -le -1000 ]; then
		return
	fi
	# Lowering needs CAP_SYS_RESOURCE, which these machines lack: then the
	# runtime must warn and run the container anyway, at the inherited value.
	local have_sys_resource=no eff
	eff=$(awk '/^CapEff:/{print $2}' /proc/self/status)
	[ $(((0x$eff >> 24) & 1)) -eq 1 ] && have_sys_resource=yes
	spec_set 'c["process"]["oomScoreAdj"] = int(A[0]) - 1' "$host_adj"
	run_ctr
	assert_rc "oomScoreAdj: lowering it still runs the container" 0 "$RC" || return
	if [ "$have_sys_resource" = yes ]; then
		assert_eq "oomScoreAdj: lowered (we hold CAP_SYS_RESOURCE)" "$((host_adj - 1))" "$OUT"
	else
		assert_match "oomScoreAdj: the refused lowering is warned about" "$ERR" "[Oo][Oo][Mm]"
		assert_eq "oomScoreAdj: without CAP_SYS_RESOURCE the value stays inherited" "$host_adj" "$OUT"
	fi
}

t_hostname_domainname() {
	BUNDLE=$(new_bundle)
	spec_set 'c["hostname"] = "box"; c["domainname"] = "example.test"'
	spec_args sh -c 'hostname; cat /proc/sys/kernel/domainname'
	run_ctr
	assert_eq "hostname and domainname" "box example.test" "$(printf '%s' "$OUT" | tr '\n' ' ' | sed 's/ $//')"
}

t_sysctl() {
	local host_before
	host_before=$(cat /proc/sys/net/ipv4/ip_forward)
	BUNDLE=$(new_bundle)
	spec_set 'c["linux"]["sysctl"] = {"net.ipv4.ip_forward": "1", "kernel.msgmax": "4242"}'
	spec_args sh -c 'cat /proc/sys/net/ipv4/ip_forward /proc/sys/kernel/msgmax'
	run_ctr
	assert_rc "sysctl: container runs" 0 "$RC" || return
	assert_eq "sysctl: net.ipv4.ip_forward=1 inside the new netns" 1 "$(line_of 1)"
	assert_eq "sysctl: kernel.msgmax (ipc ns) applied" 4242 "$(line_of 2)"
	assert_eq "sysctl: the host's ip_forward is unchanged" "$host_before" "$(cat /proc/sys/net/ipv4/ip_forward)"
	spec_set 'c["linux"]["sysctl"] = {"net.no.such.key": "1"}'
	run_ctr
	assert_fails "sysctl: an unknown key fails the container" "$RC"
}

t_seccomp() {
	BUNDLE=$(new_bundle)
	spec_set '
c["linux"]["seccomp"] = {
  "defaultAction": "SCMP_ACT_ALLOW",
  "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
  "syscalls": [
    {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO"},
    {"names": ["chmod", "fchmodat", "fchmodat2"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}]}'
	spec_args sh -c 'mkdir /tmp/x 2>&1; touch /tmp/f; chmod 600 /tmp/f 2>&1; echo alive'
	run_ctr
	assert_rc "seccomp: container runs" 0 "$RC" || return
	assert_contains "seccomp: mkdir is denied with EPERM" "$(line_of 1)" "Operation not permitted"
	assert_contains "seccomp: errnoRet 38 gives ENOSYS" "$(line_of 2)" "Function not implemented"
	assert_eq "seccomp: other syscalls still work" alive "$(line_of 3)"
	spec_set 'c["linux"]["seccomp"]["syscalls"][0]["names"].append("husk_no_such_syscall")'
	run_ctr
	assert_rc "seccomp: an unknown syscall name does not stop the container" 0 "$RC"
	assert_contains "seccomp: the profile still applies" "$OUT" "Operation not permitted"
	assert_contains "seccomp: the unknown syscall is warned about" "$ERR" husk_no_such_syscall
	spec_set 'c["linux"]["seccomp"] = {"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
  "syscalls": [{"names": ["getpid"], "action": "SCMP_ACT_ALLOW"}]}'
	spec_args true
	run_ctr
	assert_fails "seccomp: a default-deny profile without execve stops the process" "$RC"
}

t_console_socket() {
	local sock out recv_pid b
	b=$(new_bundle)
	sock=$WORK/console-$RANDOM.sock
	out=$WORK/console.out
	"$PY" "$LIB_DIR/console_receiver.py" "$sock" "$out" 15 2>"$WORK/receiver.err" &
	recv_pid=$!
	defer "kill $recv_pid"
	wait_file "$sock" 5
	BUNDLE=$b spec_set 'c["process"]["terminal"] = True; c["process"]["consoleSize"] = {"height": 33, "width": 101}'
	BUNDLE=$b spec_args sh -c 'tty; stty size; echo hello-console; sleep 0.3'
	BUNDLE=$b create_ctr --console-socket "$sock"
	assert_rc "console: create --console-socket succeeds" 0 "$RC" || return
	start_ctr "$CID"
	wait "$recv_pid"
	assert_rc "console: the receiver got the pty master" 0 "$?"
	local text
	text=$(tr -d '\r' <"$out" 2>/dev/null)
	assert_contains "console: output arrives through the pty" "$text" hello-console
	assert_eq "console: tty inside is /dev/pts/0" /dev/pts/0 "$(printf '%s\n' "$text" | sed -n 1p)"
	assert_eq "console: consoleSize sets the window size" "33 101" "$(printf '%s\n' "$text" | sed -n 2p)"
	rt create --bundle "$b" "$(new_id)" </dev/null >/dev/null 2>&1
	assert_fails "console: terminal=true without --console-socket fails create" $?
}

# exec --tty --console-size: the pty has the size before the process runs
# (huskd passes the client's first size so that `stty size` is right at
# once); a bad size is a usage error naming the option.
t_exec_console_size() {
	local sock out recv_pid b text
	b=$(new_bundle)
	BUNDLE=$b spec_args sleep 30
	BUNDLE=$b create_ctr
	assert_rc "exec console: create succeeds" 0 "$RC" || return
	start_ctr "$CID"
	sock=$WORK/exec-console-$RANDOM.sock
	out=$WORK/exec-console.out
	"$PY" "$LIB_DIR/console_receiver.py" "$sock" "$out" 15 2>"$WORK/receiver.err" &
	recv_pid=$!
	defer "kill $recv_pid"
	wait_file "$sock" 5
	rt exec --tty --console-socket "$sock" --console-size 31x91 "$CID" sh -c 'stty size; echo exec-console-ok' \
		</dev/null >/dev/null 2>"$WORK/exec-console.err"
	assert_rc "exec console: exec --tty --console-size succeeds" 0 "$?"
	wait "$recv_pid"
	text=$(tr -d '\r' <"$out" 2>/dev/null)
	assert_eq "exec console: stty size at once is the given size" "31 91" "$(printf '%s\n' "$text" | sed -n 1p)"
	rt exec --tty --console-size 31 "$CID" true </dev/null >/dev/null 2>"$WORK/exec-console.err"
	assert_fails "exec console: --console-size 31 is refused" $?
	assert_contains "... naming the option and the form" "$(cat "$WORK/exec-console.err")" \
		"--console-size \`31\`: expected ROWSxCOLS"
}

for t in t_args_env_cwd t_user_groups t_umask t_rlimits t_capabilities t_no_new_privs \
	t_oom_score_adj t_hostname_domainname t_sysctl t_seccomp t_console_socket t_exec_console_size; do
	run_test "$t"
done
finish
