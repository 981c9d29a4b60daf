#!/usr/bin/env bash
# `make bench`: wall time of `RUNTIME run` of /bin/true in a busybox bundle,
# for husk, crun and runc in the same session, in interleaved rounds so
# noise spreads evenly.  Prints a markdown table (median, mean, min per
# runtime) and the ratios husk/crun and husk/runc.
#
# Two more rows in the same rounds: husk-ro, the same husk binary
# bind-mounted read-only over a copy of itself (a node that ships husk on a
# read-only mount: no memfd copy and no second exec, see
# runtime/cloned_binary.c), and the floor, `unshare -fpmnuiC --mount-proc
# true`: the namespaces and the exec of /bin/true with no runtime at all.
# The ratios are medians of per-round ratios (paired runs), with the
# host's load average before and after.
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
	umount -l "$work/ro/husk" 2>/dev/null
	for name in husk husk-ro crun runc; do
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
if [ -x "$build/husk" ]; then
	bin[husk]=$build/husk
	names+=(husk)
	# Private to this mount namespace (see above); gone when it ends.
	mkdir -p "$work/ro"
	cp "$build/husk" "$work/ro/husk"
	if mount --bind "$work/ro/husk" "$work/ro/husk" && mount -o remount,bind,ro "$work/ro/husk"; then
		bin[husk-ro]=$work/ro/husk
		names+=(husk-ro)
	else
		missing+=("husk-ro: cannot bind-mount a read-only copy of husk")
	fi
else
	missing+=("husk: not built ($build/husk missing; run make build)")
fi
for peer in crun runc; do
	if path=$(command -v "$peer"); then
		bin[$peer]=$path
		names+=("$peer")
	else
		missing+=("$peer: not installed")
	fi
done
names+=(floor)
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
# One config for all: the reference runtime's default spec.
spec_from=husk
for name in runc crun; do
	[ -n "${bin[$name]:-}" ] && spec_from=$name
done
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
	if run_cmd "$name" "$id" </dev/null >/dev/null 2>"$work/$name.err"; then
		end=$EPOCHREALTIME
		awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f\n", (e - s) * 1000 }' >>"$work/$name.times"
	else
		echo x >>"$work/$name.failed"
		echo - >>"$work/$name.times"
		[ -s "$work/$name.first-error" ] || cp "$work/$name.err" "$work/$name.first-error"
		[ "$name" = floor ] || "${bin[$name]}" --root "$work/state-$name" delete --force "$id" >/dev/null 2>&1
	fi
}

run_cmd() { # NAME ID
	if [ "$1" = floor ]; then
		unshare -fpmnuiC --mount-proc true
	else
		"${bin[$1]}" --root "$work/state-$1" run --bundle "$bundle" "$2"
	fi
}

load_before=$(cut -d' ' -f1 /proc/loadavg)
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
		# More than three: a fresh random order each round, so each
		# follows each other equally often on average.
		order=$(seq 0 $((n - 1)) | shuf)
	fi
	for k in $order; do
		run_once "${names[$k]}" "$r"
	done
done

stats() { # FILE -> "median mean min runs"
	/usr/bin/python3 -c '
import statistics, sys
xs = [float(l) for l in open(sys.argv[1]) if l.strip() not in ("", "-")]
if xs:
    print("%.2f %.2f %.2f %d" % (statistics.median(xs), statistics.mean(xs), min(xs), len(xs)))
else:
    print("- - - 0")' "$1"
}

version_of() { # NAME
	case $1 in
	floor) echo "unshare -fpmnuiC --mount-proc true" ;;
	husk-ro) echo "$("${bin[husk-ro]}" --version 2>/dev/null | head -n 1), binary on a read-only bind mount" ;;
	*) "${bin[$1]}" --version 2>/dev/null | head -n 1 ;;
	esac
}

# Median over rounds of A's time / B's time in the same round.
paired() { # A B -> ratio or -
	[ -s "$work/$1.times" ] && [ -s "$work/$2.times" ] || {
		echo -
		return
	}
	/usr/bin/python3 -c '
import statistics, sys
a = [l.strip() for l in open(sys.argv[1])]
b = [l.strip() for l in open(sys.argv[2])]
rs = [float(x) / float(y) for x, y in zip(a, b) if x not in ("", "-") and y not in ("", "-") and float(y) > 0]
print("%.2f" % statistics.median(rs) if rs else "-")' "$work/$1.times" "$work/$2.times"
}

load_after=$(cut -d' ' -f1 /proc/loadavg)
echo "### \`run\` of /bin/true, $rounds interleaved rounds ($(nproc) CPUs, $(uname -r), load $load_before before, $load_after after)"
echo
echo "| runtime | version | runs ok | failed | median ms | mean ms | min ms |"
echo "|---|---|---:|---:|---:|---:|---:|"
declare -A median
for name in "${names[@]}"; do
	read -r med avg low ok <<<"$(stats "$work/$name.times")"
	failed=$(cat "$work/$name.failed" 2>/dev/null | wc -l)
	median[$name]=$med
	echo "| $name | $(version_of "$name") | $ok | $failed | $med | $avg | $low |"
done
echo

# The pairs reported: husk and husk-ro against each peer and the floor.
pairs=()
for a in husk husk-ro; do
	[ -n "${bin[$a]:-}" ] || continue
	for b in crun runc floor; do
		[ "$b" = floor ] || [ -n "${bin[$b]:-}" ] || continue
		pairs+=("$a $b")
	done
done
declare -A pair_ratio
if [ ${#pairs[@]} -gt 0 ]; then
	echo "| ratio | median of per-round ratios |"
	echo "|---|---:|"
	for p in "${pairs[@]}"; do
		read -r a b <<<"$p"
		pair_ratio[$a/$b]=$(paired "$a" "$b")
		echo "| $a/$b | ${pair_ratio[$a/$b]} |"
	done
	echo
fi
echo "config: \`${spec_from} spec\` with process.args=[\"/bin/true\"], terminal false; timing with bash \$EPOCHREALTIME around each run"
# Machine lines for hack/bench-table.sh (ratio husk/peer: lower is better).
for p in "${pairs[@]}"; do
	read -r a b <<<"$p"
	case $b in
	crun) goal="<= 0.6" ;;
	floor) goal="<= 1.3" ;;
	*) goal=- ;;
	esac
	echo "BENCH|\`run\` of /bin/true, $a/$b (median of $rounds paired rounds, load $load_before / $load_after)|${median[$a]} ms|$b ${median[$b]} ms|${pair_ratio[$a/$b]}|$goal"
done
for m in "${missing[@]}"; do
	echo "note: $m"
done
for name in "${names[@]}"; do
	if [ -s "$work/$name.first-error" ]; then
		echo "note: $name failed; first error: $(tail -n 3 "$work/$name.first-error" | tr '\n' ' ')"
	fi
done
