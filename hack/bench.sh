#!/usr/bin/env bash
# `make bench`: wall time of `RUNTIME run` of /bin/true in a busybox bundle,
# for husk, crun and runc in the same session, in interleaved rounds so
# noise spreads evenly.  Prints a markdown table (median, mean, min per
# runtime) and the ratios husk/crun and husk/runc.
#
#   ./hack/bench.sh BUILD        (BENCH_ROUNDS=20 by default)
#
# Everything runs inside `unshare -m` with /sys/fs/cgroup/unified unmounted:
# crun refuses this machine's hybrid cgroup layout otherwise.  The unmount
# stays private to that mount namespace.
set -u

if [ $# -ne 1 ]; then
	echo "usage: $0 BUILD" >&2
	exit 2
fi
build=$(cd "$1" 2>/dev/null && pwd) || build=$1
repo=$(cd "$(dirname "$0")/.." && pwd)
rounds=${BENCH_ROUNDS:-20}
warmup=2

if [ -z "${HUSK_BENCH_INNER:-}" ]; then
	exec unshare -m --propagation private env HUSK_BENCH_INNER=1 "$0" "$@"
fi
umount -l /sys/fs/cgroup/unified 2>/dev/null

work=$(mktemp -d /tmp/husk-bench.XXXXXX)
cleanup() {
	local name
	for name in husk crun runc; do
		[ -d "$work/state-$name" ] || continue
		for dir in "$work/state-$name"/*/; do
			[ -d "$dir" ] || continue
			"${bin[$name]}" --root "$work/state-$name" delete --force "$(basename "$dir")" >/dev/null 2>&1
		done
	done
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT

declare -A bin
names=()
missing=()
[ -x "$build/husk" ] && bin[husk]=$build/husk && names+=(husk) || missing+=("husk: not built ($build/husk missing; run make build)")
for peer in crun runc; do
	if path=$(command -v "$peer"); then
		bin[$peer]=$path
		names+=("$peer")
	else
		missing+=("$peer: not installed")
	fi
done
if [ ${#names[@]} -eq 0 ]; then
	echo "$0: no runtime to benchmark" >&2
	exit 1
fi

rootfs_cache=${HUSK_TEST_CACHE:-/tmp/husk-test-cache}/rootfs-busybox
"$repo/hack/busybox-rootfs.sh" "$rootfs_cache" || exit 1
bundle=$work/bundle
mkdir -p "$bundle"
cp -a "$rootfs_cache" "$bundle/rootfs"
rm -f "$bundle/rootfs/.husk-rootfs-ok" "$bundle/rootfs/.husk-rootfs-lock"
# One config for all three: the reference runtime's default spec.
spec_from=${names[-1]}
(cd "$bundle" && "${bin[$spec_from]}" spec) || exit 1
/usr/bin/python3 - "$bundle/config.json" <<'EOF'
import json, sys
path = sys.argv[1]
c = json.load(open(path))
c["process"]["args"] = ["/bin/true"]
c["process"]["terminal"] = False
json.dump(c, open(path, "w"), indent=2)
EOF

# One timed `run`; appends milliseconds to $work/NAME.times or counts a failure.
run_once() { # NAME SEQ
	local name=$1 id=bench-$1-$2 start end
	mkdir -p "$work/state-$name"
	start=$EPOCHREALTIME
	if "${bin[$name]}" --root "$work/state-$name" run --bundle "$bundle" "$id" \
		</dev/null >/dev/null 2>"$work/$name.err"; then
		end=$EPOCHREALTIME
		awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f\n", (e - s) * 1000 }' >>"$work/$name.times"
	else
		echo x >>"$work/$name.failed"
		[ -s "$work/$name.first-error" ] || cp "$work/$name.err" "$work/$name.first-error"
		"${bin[$name]}" --root "$work/state-$name" delete --force "$id" >/dev/null 2>&1
	fi
}

for name in "${names[@]}"; do
	for i in $(seq 1 "$warmup"); do
		run_once "$name" "warm$i"
	done
	: >"$work/$name.times"
	rm -f "$work/$name.failed"
done

# A run leaves work behind (the kernel tears its namespaces down after it
# exits), which slows whatever runs next: on a 2-CPU machine the run right
# after runc's took 4-6 ms longer.  So every runtime must follow every other
# equally often.  Rotating a fixed order does not do that for three (husk
# came right after runc in two rounds of three, crun in one); with three,
# the rounds cycle through these six orders, in which each runtime follows
# each other one exactly three times per cycle (round boundaries included).
n=${#names[@]}
orders3=("0 1 2" "0 2 1" "2 1 0" "1 0 2" "1 2 0" "2 0 1")
for r in $(seq 1 "$rounds"); do
	if [ "$n" -eq 3 ]; then
		order=${orders3[$(((r - 1) % 6))]}
	else
		order=$(for k in $(seq 0 $((n - 1))); do echo $(((r + k) % n)); done)
	fi
	for k in $order; do
		run_once "${names[$k]}" "$r"
	done
done

stats() { # FILE -> "median mean min runs"
	/usr/bin/python3 -c '
import statistics, sys
xs = [float(l) for l in open(sys.argv[1]) if l.strip()]
if xs:
    print("%.2f %.2f %.2f %d" % (statistics.median(xs), statistics.mean(xs), min(xs), len(xs)))
else:
    print("- - - 0")' "$1"
}

version_of() { # NAME
	"${bin[$1]}" --version 2>/dev/null | head -n 1
}

echo "### \`run\` of /bin/true, $rounds interleaved rounds ($(nproc) CPUs, $(uname -r))"
echo
echo "| runtime | version | runs ok | failed | median ms | mean ms | min ms |"
echo "|---|---|---:|---:|---:|---:|---:|"
declare -A median mean
for name in "${names[@]}"; do
	read -r med avg low ok <<<"$(stats "$work/$name.times")"
	failed=$(cat "$work/$name.failed" 2>/dev/null | wc -l)
	median[$name]=$med
	mean[$name]=$avg
	echo "| $name | $(version_of "$name") | $ok | $failed | $med | $avg | $low |"
done
echo

ratio() { # A B -> A/B or -
	awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'
}
if [ -n "${bin[husk]:-}" ]; then
	echo "| ratio | median | mean |"
	echo "|---|---:|---:|"
	for peer in crun runc; do
		[ -n "${bin[$peer]:-}" ] || continue
		echo "| husk/$peer | $(ratio "${median[husk]}" "${median[$peer]}") | $(ratio "${mean[husk]}" "${mean[$peer]}") |"
	done
	echo
fi
echo "config: \`${spec_from} spec\` with process.args=[\"/bin/true\"], terminal false; timing with bash \$EPOCHREALTIME around each run"
# Machine lines for hack/bench-table.sh (ratio husk/peer: lower is better).
if [ -n "${bin[husk]:-}" ]; then
	for peer in crun runc; do
		[ -n "${bin[$peer]:-}" ] || continue
		goal=-
		[ "$peer" = crun ] && goal="<= 0.6"
		echo "BENCH|\`run\` of /bin/true, husk/$peer (median of $rounds interleaved rounds)|${median[husk]} ms|$peer ${median[$peer]} ms|$(ratio "${median[husk]}" "${median[$peer]}")|$goal"
	done
fi
for m in "${missing[@]}"; do
	echo "note: $m"
done
for name in "${names[@]}"; do
	if [ -s "$work/$name.first-error" ]; then
		echo "note: $name failed; first error: $(tail -n 3 "$work/$name.first-error" | tr '\n' ' ')"
	fi
done
