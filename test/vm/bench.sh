# The cgroup benchmark, run in the VM by `hack/vm-test.sh --bench`: the
# mean time of create + start + delete of a container with memory, cpu and
# pids limits, husk against crun, both on this pure cgroup v2 kernel.
# Prints "BENCH-RESULT runs=N husk_ms=X crun_ms=Y" for hack/vm-test.sh, and
# "# BENCH|..." for hack/bench-table.sh (vm-test.sh passes "#" lines on).
. /vm/tests/lib.sh

RUNS=${BENCH_RUNS:-20}
LIMITS='{"memory":{"limit":67108864},"cpu":{"shares":512,"quota":50000,"period":100000},"pids":{"limit":100}}'

# /proc/uptime in hundredths of a second (busybox date has no %N).
now_cs() {
	local up idle
	read up idle </proc/uptime
	echo $((${up%.*} * 100 + 1${up#*.} - 100))
}

# One cycle: create, start, delete (forced: the process may still be there).
cycle() { # RUNTIME STATE-ROOT BUNDLE ID DELETE-FLAG
	"$1" --root "$2" create --bundle "$3" "$4" </dev/null >/dev/null 2>>/run/bench.err &&
		"$1" --root "$2" start "$4" >/dev/null 2>>/run/bench.err &&
		"$1" --root "$2" delete "$5" "$4" >/dev/null 2>>/run/bench.err
}

# Mean milliseconds per cycle (into /run/bench-NAME.ms), after a warm-up.
measure() { # NAME RUNTIME DELETE-FLAG
	local root=/run/bench-$1 bundle start end i=0
	bundle=$(CGROUPS_PATH=/bench-$1/c RESOURCES=$LIMITS new_bundle true)
	# crun 1.8 refuses ociVersion 1.2.0; nothing here needs more than 1.0.
	sed -i 's/"ociVersion":"[^"]*"/"ociVersion":"1.0.2"/' "$bundle/config.json"
	mkdir -p "$root"
	if ! cycle "$2" "$root" "$bundle" warm "$3"; then
		not_ok "bench: $1 create+start+delete works" "$(cat /run/bench.err)"
		return 1
	fi
	start=$(now_cs)
	while [ $i -lt "$RUNS" ]; do
		cycle "$2" "$root" "$bundle" c$i "$3" || {
			not_ok "bench: $1 cycle $i" "$(cat /run/bench.err)"
			return 1
		}
		i=$((i + 1))
	done
	end=$(now_cs)
	ok "bench: $1 ran $RUNS create+start+delete cycles in $(((end - start) * 10)) ms"
	echo $(((end - start) * 10 / RUNS)) >/run/bench-$1.ms
}

measure husk "$HUSK" --force
measure crun /husk/bin/crun -f
HUSK_MS=$(cat /run/bench-husk.ms)
CRUN_MS=$(cat /run/bench-crun.ms)
echo "BENCH-RESULT runs=$RUNS husk_ms=$HUSK_MS crun_ms=$CRUN_MS"
if [ "$CRUN_MS" -gt 0 ] 2>/dev/null; then
	RATIO=$((HUSK_MS * 100 / CRUN_MS))
	RATIO=$((RATIO / 100)).$(printf '%02d' $((RATIO % 100)))
else
	RATIO=nan
fi
echo "# BENCH|vm cgroup v2: create+start+delete with limits ($RUNS runs)|$HUSK_MS ms|crun $CRUN_MS ms|$RATIO|-"
