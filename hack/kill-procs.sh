# Sourced by the CRI test helpers and `make conformance`: SIGKILLs what a
# huskd work dir left running — every process whose command line names the
# dir (huskd, monitors, pause, plugins), whose root is inside it, or whose
# mount namespace has its "/" on a mount naming the dir (a container's
# processes after pivot_root: their root reads as "/") — and the extra
# pids given.
#
#   kill_procs_of DIR [PID...]
kill_procs_of() {
	local dir=$1 pid root
	shift
	for pid in "$@" $(grep -l -s -F "$dir" /proc/[0-9]*/cmdline | cut -d/ -f3); do
		[ "$pid" != $$ ] && kill -KILL "$pid" 2>/dev/null
	done
	local self_mnt
	self_mnt=$(readlink /proc/self/ns/mnt)
	for root in /proc/[0-9]*/root; do
		pid=${root#/proc/}
		pid=${pid%/root}
		case $(readlink "$root" 2>/dev/null) in
		"$dir"/*) kill -KILL "$pid" 2>/dev/null ;;
		/)
			[ "$(readlink "/proc/$pid/ns/mnt" 2>/dev/null)" = "$self_mnt" ] && continue
			awk '$5 == "/"' "/proc/$pid/mountinfo" 2>/dev/null | grep -qF "$dir/" &&
				kill -KILL "$pid" 2>/dev/null
			;;
		esac
	done
}
