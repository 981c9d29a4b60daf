#!/usr/bin/env bash
# Prints the CNI network config the tests and benchmarks give huskd (and
# containerd): a bridge with host-local addresses from PREFIX.0/24, masquerade
# and a default route, then portmap (with --portmap) and loopback.
#
#   hack/cni-conflist.sh NAME BRIDGE PREFIX [--portmap] >DIR/10-NAME.conflist
#
# PREFIX is the first three octets ("10.88.7"); pick it with
# hack/free-subnet.sh so that runs beside each other do not collide.
set -eu

if [ $# -lt 3 ] || { [ $# -eq 4 ] && [ "$4" != --portmap ]; } || [ $# -gt 4 ]; then
	echo "usage: $0 NAME BRIDGE PREFIX [--portmap]" >&2
	exit 2
fi
portmap=
[ "${4:-}" = --portmap ] && portmap='{ "type": "portmap", "capabilities": { "portMappings": true } },'
cat <<CONF
{
  "cniVersion": "1.0.0",
  "name": "$1",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$2",
      "isGateway": true,
      "ipMasq": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$3.0/24" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    $portmap
    { "type": "loopback" }
  ]
}
CONF
