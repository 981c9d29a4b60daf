#!/usr/bin/env bash
# Bad input: every broken bundle or id is refused with a non-zero exit and
# ONE stderr line naming the problem, and leaves nothing behind: no state
# dir, no host mount, no process, no cgroup.
# Run alone: RUNTIME=/usr/sbin/runc ./test/integration/test_badinput.sh
. "$(dirname "$0")/lib.sh"
require_runtime

# Other test scripts may run at the same time (another `make test`): their
# mounts (sources and mount points named husk-it-*) and their containers'
# cgroups (named after ids h-NAME-HEX) are theirs, unless they involve our
# bundle, state dir or id.
theirs() { # ID: filters stdin, dropping lines that belong to other tests
	awk -v id="$1" -v ours="$BUNDLE|$ROOT" '
		index($0, id) && id != "" { print; next }
		$0 ~ ("^(" ours ")") { print; next }
		/(^|[ \/])(husk-it-[^ ]*|h-[a-z_]+-[0-9a-f]+)( |/|$)/ { next }
		{ print }'
}

mounts_snapshot() {
	awk '{ for (i = 7; $i != "-"; i++); print $5, $(i+1), $(i+2) }' /proc/self/mountinfo | sort
}

cgroups_snapshot() {
	find /sys/fs/cgroup -maxdepth 6 -type d 2>/dev/null | sort
}

# Processes whose command line holds the bundle path or (if it is a plain
# word, safe as a pgrep pattern) the id.
procs_of() { # ID
	{
		pgrep -f -- "$BUNDLE"
		case $1 in
		*[!A-Za-z0-9_-]* | "") ;;
		*) pgrep -f -- "$1" ;;
		esac
	} | grep -vx "$$" | sort -u | tr '\n' ' '
}

# Runs `rt create --bundle $BUNDLE ID` (or the given command) and checks the
# refusal.  KEYWORD is an extended regex the one stderr line must match.
expect_refusal() { # NAME ID KEYWORD [RUNTIME-ARGS...]
	local name=$1 id=$2 keyword=$3
	shift 3
	[ $# -gt 0 ] || set -- create --bundle "$BUNDLE" "$id"
	local mounts_before root_before procs_before cgroups_before err lines rc
	mounts_before=$(mounts_snapshot)
	cgroups_before=$(cgroups_snapshot)
	root_before=$(ls -A "$ROOT")
	procs_before=$(procs_of "$id")
	rt "$@" </dev/null >"$WORK/bad.out" 2>"$WORK/bad.err"
	rc=$?
	sleep 0.1
	err=$(cat "$WORK/bad.err")
	lines=$(wc -l <"$WORK/bad.err")
	assert_fails "$name: refused" "$rc" || return
	if [ "$lines" -eq 1 ]; then
		ok "$name: stderr is one line"
	else
		not_ok "$name: stderr is one line" "got $lines lines:" "$err"
	fi
	if printf '%s' "$err" | grep -Eq -- "$keyword"; then
		ok "$name: the message names the problem"
	else
		not_ok "$name: the message names the problem" "expected to match: $keyword" "got: $err"
	fi
	assert_eq "$name: no state left under --root" "$root_before" "$(ls -A "$ROOT")"
	assert_eq "$name: no new host mounts" "" "$(comm -13 <(printf '%s\n' "$mounts_before") <(mounts_snapshot) | theirs "$id")"
	assert_eq "$name: no process left" "$procs_before" "$(procs_of "$id")"
	assert_eq "$name: no cgroup left" "" "$(comm -13 <(printf '%s\n' "$cgroups_before") <(cgroups_snapshot) | theirs "$id")"
}

t_missing_config() {
	BUNDLE=$(new_bundle)
	rm "$BUNDLE/config.json"
	expect_refusal "missing config.json" "$(new_id)" "config\.json"
}

t_malformed_config() {
	BUNDLE=$(new_bundle)
	# The stray comma is on line 3, column 15.
	printf '{\n  "ociVersion": "1.0.2",\n  "process": {,\n    "args": ["true"]\n  }\n}\n' >"$BUNDLE/config.json"
	expect_refusal "malformed config.json" "$(new_id)" \
		"(line[ :]*3[^0-9].*col)|(:3:[0-9]+)"
	expect_refusal "malformed config.json (run)" "$(new_id)" "(line[ :]*3[^0-9].*col)|(:3:[0-9]+)" \
		run --bundle "$BUNDLE" "$(new_id)"
}

t_unknown_oci_version() {
	BUNDLE=$(new_bundle)
	spec_set 'c["ociVersion"] = "9.9.9"'
	expect_refusal "unknown ociVersion" "$(new_id)" "9\.9\.9"
}

t_relative_mount_destination() {
	BUNDLE=$(new_bundle)
	spec_mount relative/dest tmpfs tmpfs
	expect_refusal "relative mount destination" "$(new_id)" "relative/dest"
}

t_unknown_capability() {
	BUNDLE=$(new_bundle)
	spec_set 'c["process"]["capabilities"]["bounding"].append("CAP_BOGUS")'
	expect_refusal "unknown capability" "$(new_id)" "CAP_BOGUS"
}

t_duplicate_id() {
	local id
	BUNDLE=$(new_bundle)
	spec_args sleep 1000
	create_ctr
	id=$CID
	assert_rc "duplicate id: the first create succeeds" 0 "$RC" || return
	expect_refusal "duplicate id" "$id" "$id"
	assert_eq "duplicate id: the first container is still created" created "$(state_of "$id")"
}

t_bad_ids() {
	local escape
	BUNDLE=$(new_bundle)
	expect_refusal "id with a slash" "a/b" "a/b"
	expect_refusal "id .." ".." "\.\."
	escape=husk-it-escape-$RANDOM$RANDOM
	expect_refusal "id ../NAME" "../$escape" "$escape"
	assert_true "id ../NAME: nothing created next to --root" test ! -e "$(dirname "$ROOT")/$escape"
	expect_refusal "empty id" "" "[Ii][Dd]"
}

t_missing_rootfs() {
	BUNDLE=$(new_bundle)
	rm -rf "$BUNDLE/rootfs"
	expect_refusal "missing rootfs" "$(new_id)" "rootfs"
}

t_missing_bundle() {
	local id
	id=$(new_id)
	BUNDLE=/tmp/husk-it-no-such-bundle-$$
	expect_refusal "missing bundle dir" "$id" "husk-it-no-such-bundle"
}

for t in t_missing_config t_malformed_config t_unknown_oci_version t_relative_mount_destination \
	t_unknown_capability t_duplicate_id t_bad_ids t_missing_rootfs t_missing_bundle; do
	run_test "$t"
done
finish
