#!/usr/bin/env bash
# husk's test runner (`make test`, `make unit-test`, `make integration-test`).
# Runs every cmocka binary in BUILD/test/unit and every integration script in
# test/integration, prints one result line per file, and ends with exactly one
# summary line: "N passed, N failed[, N skipped]".  Exits non-zero if anything
# failed or nothing ran.  Full logs: BUILD/test-logs/latest/ (one dir per
# run, so two runs at once never write the same log; the last 10 are kept).
#
#   ./test/run-all.sh [--unit-only | --integration-only] BUILD
#
# RUNTIME overrides the runtime the integration tests drive (default
# BUILD/husk), e.g. RUNTIME=/usr/sbin/runc ./test/run-all.sh --integration-only build
# HUSK_INTEGRATION_TESTS picks scripts by a glob (default test_*, e.g.
# 'test_cri*').  HUSK_SANITIZER_LOGS names the dir where ASan writes its
# reports (ASAN_OPTIONS=log_path=DIR/asan, hack/sanitize.sh): a report
# written while a file ran fails that file.
set -u

usage() {
	echo "usage: $0 [--unit-only | --integration-only] BUILD" >&2
	exit 2
}

run_unit=yes
run_integration=yes
case ${1:-} in
--unit-only)
	run_integration=no
	shift
	;;
--integration-only)
	run_unit=no
	shift
	;;
-h | --help) usage ;;
esac
[ $# -eq 1 ] || usage

test_dir=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" 2>/dev/null && pwd) || {
	echo "$0: build dir $1 does not exist (run make build)" >&2
	echo "0 passed, 1 failed"
	exit 1
}
log_dir=$build/test-logs/run-$(date +%Y%m%d-%H%M%S)-$$
mkdir -p "$log_dir" && ln -sfn "$(basename "$log_dir")" "$build/test-logs/latest"
# Older runs beyond the last 10 go (and logs of the flat, older layout).
rm -f "$build"/test-logs/*.log
ls -1d "$build"/test-logs/run-* 2>/dev/null | sort | head -n -10 | xargs -r rm -rf
export RUNTIME=${RUNTIME:-$build/husk}
export BUILD_DIR=$build

UNIT_TIMEOUT=${HUSK_UNIT_TIMEOUT:-120}
INTEGRATION_TIMEOUT=${HUSK_INTEGRATION_TIMEOUT:-300}

total_passed=0
total_failed=0
total_skipped=0
sanitizer_logs=${HUSK_SANITIZER_LOGS:-}
[ -n "$sanitizer_logs" ] && mkdir -p "$sanitizer_logs/seen"

# Sanitizer reports that appeared since the last call (moved to seen/ once
# shown): prints the note for report() and the head of each, returns 1.
new_sanitizer_reports() {
	local f found=
	[ -n "$sanitizer_logs" ] || return 0
	for f in "$sanitizer_logs"/*.[0-9]*; do
		[ -f "$f" ] || continue
		found="$found $(basename "$f")"
		mv "$f" "$sanitizer_logs/seen/" 2>/dev/null
		sed 's/^/    | /' "$sanitizer_logs/seen/$(basename "$f")" | grep -v '^    | $' | head -n 12 >&2
	done
	[ -z "$found" ] && return 0
	echo "sanitizer reports:$found (in $sanitizer_logs/seen)"
	return 1
}

# Prints the result line for one file and adds it to the totals.
report() { # LABEL PASSED FAILED SKIPPED SECONDS [NOTE]
	local line="$1: $2 passed, $3 failed"
	[ "$4" -gt 0 ] && line="$line, $4 skipped"
	line="$line (${5}s)"
	[ -n "${6:-}" ] && line="$line -- $6"
	echo "$line"
	total_passed=$((total_passed + $2))
	total_failed=$((total_failed + $3))
	total_skipped=$((total_skipped + $4))
}

run_unit_tests() {
	local bin name log start rc passed failed note san
	for bin in "$build"/test/unit/test_*; do
		[ -f "$bin" ] && [ -x "$bin" ] || continue
		case $bin in *.o | *.d) continue ;; esac
		name=unit/$(basename "$bin")
		log=$log_dir/$(basename "$bin").log
		start=$(date +%s)
		mkdir -p "$log_dir"
		# The default (stdout) message format is what we parse.  (Braces:
		# bash's own "Segmentation fault" notice goes to the log too.)
		{ CMOCKA_MESSAGE_OUTPUT=stdout timeout -k 5 "$UNIT_TIMEOUT" "$bin"; } >"$log" 2>&1
		rc=$?
		passed=$(grep -E '^\[  PASSED  \] [0-9]+ test' "$log" | grep -oE '[0-9]+' | awk '{ s += $1 } END { print s + 0 }')
		failed=$(grep -E '^\[  FAILED  \] [0-9]+ test\(s\)' "$log" | grep -oE '^\[  FAILED  \] [0-9]+' | grep -oE '[0-9]+' | awk '{ s += $1 } END { print s + 0 }')
		note=
		if ! grep -qE '^\[  (PASSED|FAILED)  \] [0-9]+ test' "$log"; then
			failed=$((failed + 1))
			note="no cmocka summary (exit status $rc); see $log"
		elif [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
			failed=1
			note="exit status $rc after the summary; see $log"
		fi
		if ! san=$(new_sanitizer_reports 2>"$log.san"); then
			failed=$((failed + 1))
			note="${note:+$note; }$san"
		fi
		report "$name" "$passed" "$failed" 0 $(($(date +%s) - start)) "$note"
		cat "$log.san" && rm -f "$log.san"
		grep -E '^\[  FAILED  \] [A-Za-z_]' "$log" | awk '!seen[$0]++ { print "    " $0 }'
	done
}

# The parent cgroups the tests' containers get: husk's default cgroupsPath
# (husk/ID) and containerd's for its namespace (husk-it/ID).  A runtime
# leaves a parent it made, as runc does; the run removes those that were
# not there before it, once empty (rmdir fails on one in use).
TEST_CGROUP_PARENTS=(husk husk-it)

missing_cgroup_parents() {
	local dir parent
	for dir in /sys/fs/cgroup /sys/fs/cgroup/*/; do
		dir=${dir%/}
		[ -f "$dir/cgroup.procs" ] || continue
		for parent in "${TEST_CGROUP_PARENTS[@]}"; do
			[ -e "$dir/$parent" ] || echo "$dir/$parent"
		done
	done
}

remove_cgroup_parents() { # DIR...
	local dir
	for dir in "$@"; do
		[ -d "$dir" ] && rmdir "$dir" 2>/dev/null
	done
	return 0
}

run_integration_tests() {
	local script name log start rc passed failed skipped note san
	local new_parents=()
	# What earlier runs killed before their cleanup left in iptables and
	# /var/lib/cni (their owner's pid gone) would slow every CNI call here.
	# shellcheck source=hack/cni-rules.sh
	. "$test_dir/../hack/cni-rules.sh" && cni_sweep_dead_runs
	mapfile -t new_parents < <(missing_cgroup_parents)
	# At exit, also an interrupted one (the list is fixed now: SC2064).
	# shellcheck disable=SC2064
	trap "remove_cgroup_parents ${new_parents[*]}" EXIT
	for script in "$test_dir"/integration/${HUSK_INTEGRATION_TESTS:-test_*}.sh; do
		[ -f "$script" ] || continue
		name=integration/$(basename "$script")
		log=$log_dir/$(basename "$script" .sh).log
		mkdir -p "$log_dir"
		start=$(date +%s)
		timeout -k 10 "$INTEGRATION_TIMEOUT" bash "$script" >"$log" 2>&1 </dev/null
		rc=$?
		note=
		if [ ! -f "$log" ]; then
			: >"$log" 2>/dev/null
			note="its log vanished (was $log_dir removed?)"
		fi
		passed=$(grep -E '^ok ' "$log" 2>/dev/null | grep -vc '# SKIP')
		skipped=$(grep -cE '^ok .*# SKIP' "$log" 2>/dev/null)
		failed=$(grep -cE '^not ok ' "$log" 2>/dev/null)
		passed=${passed:-0} skipped=${skipped:-0} failed=${failed:-0}
		if [ -n "$note" ]; then
			failed=$((failed + 1))
		elif [ $((passed + failed + skipped)) -eq 0 ]; then
			failed=1
			note="no test results (exit status $rc); see $log"
		elif [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
			failed=1
			note="exit status $rc without a failing test; see $log"
		elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
			note="timed out after ${INTEGRATION_TIMEOUT}s; see $log"
		fi
		if ! san=$(new_sanitizer_reports 2>"$log.san"); then
			failed=$((failed + 1))
			note="${note:+$note; }$san"
		fi
		report "$name" "$passed" "$failed" "$skipped" $(($(date +%s) - start)) "$note"
		cat "$log.san" && rm -f "$log.san"
		# Failing tests with their diagnostics, and the reasons for skips.
		awk '/^not ok / { show = 1; print "    " $0; next }
		     /^#   / && show { print "    " $0; next }
		     { show = 0 }
		     /^ok .*# SKIP/ { print "    " $0 }' "$log" | head -n 200
	done
}

if [ "$run_unit" = yes ]; then
	run_unit_tests
fi
if [ "$run_integration" = yes ]; then
	echo "integration tests drive RUNTIME=$RUNTIME (logs in $log_dir)"
	run_integration_tests
fi

summary="$total_passed passed, $total_failed failed"
[ "$total_skipped" -gt 0 ] && summary="$summary, $total_skipped skipped"
echo "$summary"
[ "$total_failed" -eq 0 ] && [ "$total_passed" -gt 0 ]
