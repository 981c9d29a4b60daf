#!/usr/bin/env bash
# The libFuzzer targets (test/fuzz/fuzz_*.c, built by `make fuzz`), each run
# for HUSK_FUZZ_SECONDS (default 30) from its seeds in test/fuzz/corpus/NAME,
# copied to a scratch dir so the run adds nothing to the tree.  A crash, a
# leak or a sanitizer report fails it, with the input libFuzzer saved.
. "$(dirname "$0")/lib.sh"

SECONDS_EACH=${HUSK_FUZZ_SECONDS:-30}

fuzz_one() { # SOURCE
	local name bin dir log rc runs
	name=$(basename "$1" .c)
	bin=$BUILD_DIR/test/fuzz/$name
	if [ ! -x "$bin" ]; then
		not_ok "$name is built ($bin: run make fuzz; needs clang and libclang-rt-14-dev)"
		return
	fi
	dir=$(new_tmpdir "fuzz-$name") || return
	mkdir -p "$dir/corpus" "$dir/crashes"
	cp -r "$REPO_DIR/test/fuzz/corpus/${name#fuzz_}/." "$dir/corpus/" 2>/dev/null
	log=$dir/log
	timeout -k 5 $((SECONDS_EACH + 60)) "$bin" -max_total_time="$SECONDS_EACH" -print_final_stats=1 \
		-artifact_prefix="$dir/crashes/" "$dir/corpus" >"$log" 2>&1
	rc=$?
	runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$')
	if [ "$rc" -eq 0 ] && [ -n "$runs" ]; then
		ok "$name: $runs inputs in ${SECONDS_EACH} s, no crash, leak or sanitizer report"
	else
		not_ok "$name: exit status $rc after ${runs:-?} inputs" "$(grep -E 'ERROR|SUMMARY|Test unit written' "$log" | head -5)" \
			"input: $(ls "$dir/crashes" 2>/dev/null | head -1 | xargs -r -I{} base64 -w0 "$dir/crashes/{}" | head -c 600)"
	fi
}

found=no
for src in "$REPO_DIR"/test/fuzz/fuzz_*.c; do
	[ -f "$src" ] || continue
	found=yes
	fuzz_one "$src"
done
[ "$found" = yes ] || not_ok "fuzz targets in test/fuzz"
finish
