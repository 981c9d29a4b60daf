#!/usr/bin/env bash
# Gives huskd a pod network where there is none, as CRI-O ships one: when
# DIR (default /etc/cni/net.d) holds no CNI config at all, writes
# DIR/10-husk-bridge.conflist: a bridge of its own, husk0, with host-local
# addresses from the first 10.86.N.0/24 .. 10.99.N.0/24 that no route or
# address of this host overlaps, masquerade, portmap and loopback.  A DIR
# that has any config (podman's 87-podman-bridge.conflist, a cluster's
# CNI) is left exactly as it is.  `make run` calls it.
#
#   hack/default-network.sh [DIR]
set -eu

DIR=${1:-/etc/cni/net.d}
HERE=$(cd "$(dirname "$0")" && pwd)
NAME=husk
BRIDGE=husk0
FILE=10-husk-bridge.conflist

# Symlinks count too: a config linked in from elsewhere is a config.
existing=$(find "$DIR" -maxdepth 1 \( -type f -o -type l \) \( -name '*.conf' -o -name '*.conflist' -o -name '*.json' \) \
	-printf '%f ' 2>/dev/null || true)
if [ -n "$existing" ]; then
	echo "CNI: $DIR has a network config already (${existing% }): left as it is; huskd uses the first by name"
	exit 0
fi

ip_int() { # A.B.C.D -> integer
	local IFS=.
	# shellcheck disable=SC2086
	set -- $1
	echo $((($1 << 24) + ($2 << 16) + ($3 << 8) + $4))
}

# Whether PREFIX.0/24 overlaps any IPv4 route or address of this host.
in_use() { # PREFIX
	local net mine cidr addr len min mask
	mine=$(ip_int "$1.0")
	for cidr in $(ip -4 route show table all 2>/dev/null | awk '$1 ~ /^[0-9]/ { print $1 }'; ip -4 -o addr show | awk '{ print $4 }'); do
		addr=${cidr%/*}
		len=32
		[ "$addr" != "$cidr" ] && len=${cidr#*/}
		net=$(ip_int "$addr")
		min=$((len < 24 ? len : 24))
		mask=$(((0xffffffff << (32 - min)) & 0xffffffff))
		[ $((net & mask)) -eq $((mine & mask)) ] && return 0
	done
	return 1
}

prefix=
for second in $(seq 86 99); do
	for third in $(seq 0 255); do
		if ! in_use "10.$second.$third"; then
			prefix=10.$second.$third
			break 2
		fi
	done
done
if [ -z "$prefix" ]; then
	echo "CNI: no free 10.86-99.x.0/24 on this host: write a network config into $DIR yourself" >&2
	exit 1
fi
mkdir -p "$DIR"
tmp=$(mktemp "$DIR/.$FILE.XXXXXX")
trap 'rm -f "$tmp"' EXIT
"$HERE/cni-conflist.sh" "$NAME" "$BRIDGE" "$prefix" --portmap >"$tmp"
chmod 0644 "$tmp"
# -n: a config that appeared meanwhile is never replaced.
mv -n "$tmp" "$DIR/$FILE"
if [ -e "$tmp" ]; then
	echo "CNI: $DIR/$FILE appeared meanwhile: left as it is"
	exit 0
fi
echo "CNI: no network config in $DIR: wrote $DIR/$FILE (bridge $BRIDGE, pods on $prefix.0/24, masquerade, portmap)"
