# shellcheck shell=bash
# Sourced by the tests and `make conformance`: picks a 10.x.y.0/24 that no
# route or address on this host uses and that no other run holds, and holds
# it (a file under /run/husk-test-subnets naming the holder's pid) until
# release_subnets or the holder's death.  Picking is serialised with flock,
# so two runs started together never get the same subnet; a reservation
# whose pid is gone is taken over.
#
#   prefix=$(free_subnet) || fail     (holds it for $$, the calling shell)
#   release_subnets                   (on exit: drops what $$ holds)
SUBNET_RESERVATIONS=${SUBNET_RESERVATIONS:-/run/husk-test-subnets}

subnet_in_use() { # PREFIX
	local p=${1//./\\.}
	ip -4 route show | grep -q "^$p\." && return 0
	ip -4 addr show | grep -q "inet $p\." && return 0
	local holder
	holder=$(cat "$SUBNET_RESERVATIONS/$1" 2>/dev/null) || return 1
	[ -n "$holder" ] && [ "$holder" != $$ ] && kill -0 "$holder" 2>/dev/null
}

free_subnet() { # -> a 10.x.y prefix, reserved for $$
	local x y prefix
	mkdir -p "$SUBNET_RESERVATIONS" || return 1
	(
		flock -w 30 9 || exit 1
		for _ in $(seq 300); do
			x=$((RANDOM % 150 + 100)) y=$((RANDOM % 250 + 1))
			prefix=10.$x.$y
			subnet_in_use "$prefix" && continue
			echo $$ >"$SUBNET_RESERVATIONS/$prefix"
			echo "$prefix"
			exit 0
		done
		exit 1
	) 9>"$SUBNET_RESERVATIONS/.lock"
}

release_subnets() {
	local f
	for f in "$SUBNET_RESERVATIONS"/10.*; do
		[ "$(cat "$f" 2>/dev/null)" = $$ ] && rm -f "$f"
	done
	return 0
}
