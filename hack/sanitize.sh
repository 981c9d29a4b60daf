#!/usr/bin/env bash
# `make sanitize`: runs the unit tests and the CRI end-to-end tests
# (test/integration/test_cri*.sh: huskd, husk-monitor and the husk runtime
# all built with ASan+UBSan) from a build made with SANITIZE=address,undefined.
# A UBSan finding aborts the process that made it (-fno-sanitize-recover),
# so its test fails; ASan and LeakSanitizer reports go to files under
# BUILD/sanitizer-logs, and one written while a test file ran fails that
# file (test/run-all.sh).  Ends with run-all's summary line.
#
#   ./hack/sanitize.sh BUILD
set -u
build=$(cd "${1:?usage: $0 BUILD}" 2>/dev/null && pwd) || {
	echo "sanitize: build dir $1 does not exist" >&2
	exit 2
}
if ! nm -D "$build/huskd" 2>/dev/null | grep -q __asan_init; then
	echo "sanitize: $build/huskd is not built with ASan (make SANITIZE=address,undefined BUILD=$1)" >&2
	exit 2
fi
logs=$build/sanitizer-logs/run-$(date +%Y%m%d-%H%M%S)-$$
mkdir -p "$logs"
ls -1d "$build"/sanitizer-logs/run-* | sort | head -n -5 | xargs -r rm -rf
# detect_leaks stays on (the default) for huskd, the monitor and the unit
# tests; the runtime binary turns it off itself (runtime/cli/main.c).
export ASAN_OPTIONS="log_path=$logs/asan:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export HUSK_SANITIZER_LOGS=$logs
export HUSK_INTEGRATION_TESTS='test_cri*'
exec "$(dirname "$0")/../test/run-all.sh" "$build"
