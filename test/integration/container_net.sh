# shellcheck shell=bash
# Sourced by the `husk container` tests: a CNI bridge network of the run's
# own (a free 10.x.y.0/24, its own bridge and network name) given to husk
# through HUSK_NETWORK_CONFIG, and its removal: the bridge, the rules
# naming the network, the host-local leases, the subnet reservation.
#
#   container_net_setup DIR [EXTRA_PLUGIN_JSON]   (sets CNET, CBRIDGE, CPREFIX; exports HUSK_NETWORK_CONFIG)
#   container_net_cleanup
# shellcheck source=hack/free-subnet.sh
. "$REPO_DIR/hack/free-subnet.sh"
# shellcheck source=hack/cni-rules.sh
. "$REPO_DIR/hack/cni-rules.sh"

CNET=
CBRIDGE=
CPREFIX=

container_conflist() { # PREFIX NET BRIDGE [EXTRA_PLUGIN_JSON]
	cat <<CONF
{"cniVersion": "1.0.0", "name": "$2", "plugins": [
  {"type": "bridge", "bridge": "$3", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "routes": [{"dst": "0.0.0.0/0"}],
            "ranges": [[{"subnet": "$1.0/24", "gateway": "$1.1"}]]}},
  {"type": "portmap", "capabilities": {"portMappings": true}},
  {"type": "firewall"}, {"type": "tuning"}${4:+, $4}]}
CONF
}

container_net_setup() { # DIR
	CNET=husk-cli-$$
	CBRIDGE=hkc$((RANDOM % 100000))
	CPREFIX=$(free_subnet) || return 1
	container_conflist "$CPREFIX" "$CNET" "$CBRIDGE" >"$1/net.conflist"
	export HUSK_NETWORK_CONFIG=$1/net.conflist
}

container_net_cleanup() {
	[ -n "$CNET" ] || return 0
	ip link del "$CBRIDGE" 2>/dev/null
	cni_purge_rules "$CNET"
	# The firewall plugin's rules name addresses, not the network.
	local rule
	iptables-save -t filter 2>/dev/null | grep '^-A CNI-FORWARD ' | grep -F -- " $CPREFIX." |
		while read -r rule; do
			eval "iptables -w -t filter -D ${rule#-A }" 2>/dev/null
		done
	rm -rf "/var/lib/cni/networks/${CNET:?}"
	release_subnets
	return 0
}

# What the network of container ID left: iptables rules naming it,
# leases holding it; empty when nothing.  (Its veth has no name of its
# own: store snapshots count the bridge's.)
container_net_leftovers() { # ID
	iptables-save 2>/dev/null | grep -F -- "$1" | sed 's/^/rule: /'
	grep -rlF -- "$1" "/var/lib/cni/networks/$CNET" 2>/dev/null | sed 's/^/lease: /'
}
