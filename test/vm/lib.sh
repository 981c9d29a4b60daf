# Helpers for the cgroup tests that run inside the test VM (busybox sh, no
# bash, no python).  Sourced by test/vm/test_*.sh.  A test prints TAP lines
# ("ok - NAME", "not ok - NAME", "# diagnostic") on stdout; hack/vm-test.sh
# reads them back from the VM's second serial port.
#
# Bundles share one read-only busybox rootfs (/vm/rootfs) and a config
# template made from `husk spec` on the build host (/vm/config.json), in
# which "@ARGS@", "@RESOURCES@", "@DEVICES@" and "@CGROUPS_PATH@" stand for
# process.args, linux.resources, linux.devices and linux.cgroupsPath.

HUSK=${HUSK:-/husk/bin/husk}
STATE=/run/husk-vm
CG=/sys/fs/cgroup
mkdir -p "$STATE" /run/bundles

ok() {
	echo "ok - $1"
}

not_ok() { # NAME [DIAGNOSTIC...]
	local name=$1
	shift
	echo "not ok - $name"
	for line in "$@"; do
		[ -n "$line" ] && printf '%s\n' "$line" | head -n 10 | sed 's/^/#   /'
	done
	return 1
}

diag() {
	printf '%s\n' "$*" | sed 's/^/# /'
}

assert_eq() { # NAME EXPECTED ACTUAL [DIAGNOSTIC]
	if [ "$2" = "$3" ]; then
		ok "$1"
	else
		not_ok "$1" "expected: $2" "got:      $3" "${4:-}"
	fi
}

assert_contains() { # NAME HAYSTACK NEEDLE
	case $2 in
	*"$3"*) ok "$1" ;;
	*) not_ok "$1" "expected to contain: $3" "got: $2" ;;
	esac
}

assert_fails() { # NAME RC [DIAGNOSTIC]
	if [ "$2" -ne 0 ] && [ "$2" -ne 124 ]; then
		ok "$1"
	else
		not_ok "$1" "expected a failure, got exit status $2" "${3:-}"
	fi
}

assert_gone() { # NAME PATH
	if [ -e "$2" ]; then
		not_ok "$1" "$2 still exists"
	else
		ok "$1"
	fi
}

h() { # husk with the VM's state dir and a timeout
	timeout 60 "$HUSK" --root "$STATE" "$@"
}

# A JSON string's body: backslashes, quotes, tabs and newlines escaped.
json_escape() {
	printf '%s' "$1" | awk '{ gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\t/, "\\t");
		if (NR > 1) printf "\\n"; printf "%s", $0 }'
}

# JSON for a list of words: json_args sh -c 'echo "hi"' -> ["sh","-c","echo \"hi\""]
json_args() {
	local out= sep= word
	for word in "$@"; do
		out="$out$sep\"$(json_escape "$word")\""
		sep=,
	done
	printf '[%s]' "$out"
}

# Escapes a replacement text for sed (delimiter |).
sed_escape() {
	printf '%s' "$1" | sed 's/[\\&|]/\\&/g'
}

# Creates a bundle; prints its path.  RESOURCES is a linux.resources object
# (default {}), DEVICES a linux.devices array (default []), CGROUPS_PATH the
# linux.cgroupsPath (default: none, husk's /husk/ID).
#   RESOURCES='{"pids":{"limit":5}}' new_bundle sh -c 'echo hi'
new_bundle() {
	local dir args res devs cgpath
	dir=$(mktemp -d /run/bundles/b.XXXXXX)
	args=$(sed_escape "$(json_args "$@")")
	# JSON needs no newlines: they become spaces, and sed sees one line.
	res=$(printf '%s' "${RESOURCES:-}" | tr '\n' ' ')
	[ -n "$res" ] || res='{}'
	res=$(sed_escape "$res")
	devs=$(printf '%s' "${DEVICES:-}" | tr '\n' ' ')
	[ -n "$devs" ] || devs='[]'
	devs=$(sed_escape "$devs")
	if [ -n "${CGROUPS_PATH:-}" ]; then
		cgpath=$(sed_escape "\"$CGROUPS_PATH\"")
	else
		cgpath=null
	fi
	sed -e "s|\"@ARGS@\"|$args|" -e "s|\"@RESOURCES@\"|$res|" -e "s|\"@DEVICES@\"|$devs|" \
		-e "s|\"@CGROUPS_PATH@\"|$cgpath|" /vm/config.json >"$dir/config.json"
	echo "$dir"
}

# Runs a bundle in the foreground: sets OUT (stdout+stderr of the
# container and husk) and RC.
run_bundle() { # BUNDLE ID
	OUT=$(h run --bundle "$1" "$2" 2>&1 </dev/null)
	RC=$?
}

# Creates and starts a bundle in the background (its output goes to
# /run/ID.log).  Returns create's status.
start_bundle() { # BUNDLE ID
	h create --bundle "$1" "$2" </dev/null >"/run/$2.log" 2>&1 || return 1
	h start "$2" >>"/run/$2.log" 2>&1
}

status_of() { # ID
	h state "$1" 2>/dev/null | sed -n 's/.*"status": *"\([a-z]*\)".*/\1/p'
}

wait_status() { # ID STATUS [TENTHS]
	local i=0
	while [ $i -lt "${3:-100}" ]; do
		[ "$(status_of "$1")" = "$2" ] && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# The first number after "KEY" in a "key value" file (cpu.stat, memory.events).
keyed_value() { # FILE KEY
	awk -v key="$2" '$1 == key { print $2; exit }' "$1" 2>/dev/null
}

# Deletes the containers created by a test, even if it failed half way.
cleanup() {
	local id
	for id in $(h list --quiet 2>/dev/null); do
		h resume "$id" >/dev/null 2>&1
		h delete --force "$id" >/dev/null 2>&1
	done
}
