# Sourced by the CRI test helpers and `make conformance`: SIGKILLs what a
# huskd work dir left running — every process whose command line names the
# dir (huskd, monitors, pause, plugins) or whose root is inside it (the
# containers' processes) — and the extra pids given.
#
#   kill_procs_of DIR [PID...]
kill_procs_of() {
	local dir=$1 pid root
	shift
	for pid in "$@" $(grep -l -s -F "$dir" /proc/[0-9]*/cmdline | cut -d/ -f3); do
		[ "$pid" != $$ ] && kill -KILL "$pid" 2>/dev/null
	done
	for root in /proc/[0-9]*/root; do
		case $(readlink "$root" 2>/dev/null) in
		"$dir"/*)
			pid=${root#/proc/}
			kill -KILL "${pid%/root}" 2>/dev/null
			;;
		esac
	done
}
