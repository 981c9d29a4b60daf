# Sourced by the CNI tests and benchmarks: removes the iptables rules whose
# comment names one of the given CNI networks, then the per-pod chains they
# jumped to.  portmap's shared CNI-HOSTPORT-* chains stay: other users of
# the machine may have rules in them.
#
#   cni_purge_rules NETWORK...
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
