# Sourced by the CNI tests and benchmarks: removes the iptables rules whose
# comment names one of the given CNI networks, then the per-pod chains they
# jumped to.  portmap's shared CNI-HOSTPORT-* chains stay: other users of
# the machine may have rules in them.
#
#   cni_purge_rules NETWORK...
#   cni_sweep_dead_runs          (below: what killed runs left)
cni_purge_rules() {
	local table rule target chains net
	local match=()
	for net in "$@"; do
		match+=(-e "\"$net\\\"")
	done
	for table in nat filter; do
		chains=
		while read -r rule; do
			target=$(printf '%s\n' "$rule" | sed -n 's/.* -j \([^ ]*\).*/\1/p')
			eval "iptables -w -t $table -D ${rule#-A }" 2>/dev/null
			case $target in
			CNI-HOSTPORT-*) ;;
			CNI-*) chains="$chains $target" ;;
			esac
		done < <(iptables-save -t "$table" 2>/dev/null | grep '^-A ' | grep -F "${match[@]}")
		for target in $chains; do
			iptables -w -t "$table" -F "$target" 2>/dev/null
			iptables -w -t "$table" -X "$target" 2>/dev/null
		done
	done
}

# The iptables rules and host-local directories of CNI networks that runs
# killed before their trap left behind: a network named husk-...-PID (the
# tests' husk-*-test-PID, the benchmarks' husk-bench-*-PID) whose PID is
# gone; a live PID's network is another run's and stays.  Every iptables
# call of the plugins reads the whole table, stale rules included.  Bridges stay:
# their names hold a truncated or random number, not always a pid, and an
# idle bridge costs the plugins nothing.
#
#   cni_sweep_dead_runs
cni_sweep_dead_runs() {
	local name nets=()
	for name in $( (iptables-save 2>/dev/null | sed -n 's/.*name: \\"\(husk-[a-z0-9-]*-[0-9][0-9]*\)\\".*/\1/p'
		ls /var/lib/cni/networks 2>/dev/null) | grep -E '^husk-[a-z0-9-]+-[0-9]+$' | sort -u); do
		[ -d "/proc/${name##*-}" ] && continue
		nets+=("$name")
		rm -rf "/var/lib/cni/networks/${name:?}"
	done
	[ ${#nets[@]} -eq 0 ] || cni_purge_rules "${nets[@]}"
}
