#!/usr/bin/env bash
# Pull benchmark: pull + unpack of the `big` test image (busybox + 4 x 8 MiB
# incompressible layers) from a local docker-registry, husk against the
# peer tools in the same run:
#   husk          `husk image pull` into an empty store (fetch, verify, unpack)
#   skopeo+umoci  `skopeo copy docker://... oci:DIR:latest` then
#                 `umoci unpack --image DIR:latest BUNDLE`
# and unpack alone: husk re-pulling with every blob already in the store and
# the snapshots removed (manifest fetch + unpack), against `umoci unpack`
# of the layout skopeo wrote.  Rounds are interleaved, every round starts
# from fresh empty dirs; the table shows medians and the ratios.
#
#   ./hack/bench-pull.sh BUILD        (BENCH_ROUNDS=5 by default)
set -u

if [ $# -ne 1 ]; then
	echo "usage: $0 BUILD" >&2
	exit 2
fi
build=$(cd "$1" 2>/dev/null && pwd) || build=$1
repo=$(cd "$(dirname "$0")/.." && pwd)
rounds=${BENCH_ROUNDS:-5}
husk=$build/husk
images=${HUSK_TEST_IMAGES:-${HUSK_TEST_CACHE:-/tmp/husk-test-cache}/test-images}

for tool in "$husk" skopeo umoci python3; do
	if ! command -v "$tool" >/dev/null; then
		echo "$0: $tool not found (make build; hack/deps.sh installs the peers)" >&2
		exit 1
	fi
done

work=$(mktemp -d /tmp/husk-bench-pull.XXXXXX)
cleanup() {
	"$repo/hack/registry.sh" stop "$work/registry" >/dev/null 2>&1
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$repo/hack/test-images.sh" "$images" >"$work/images.log" 2>&1 || {
	echo "$0: building the test images failed:" >&2
	tail -n 5 "$work/images.log" >&2
	exit 1
}
addr=$("$repo/hack/registry.sh" start "$work/registry") || exit 1
"$repo/hack/test-images.sh" "$images" --push "$addr" big >"$work/push.log" 2>&1 || {
	echo "$0: pushing big to $addr failed:" >&2
	tail -n 5 "$work/push.log" >&2
	exit 1
}
ref=$addr/test/big:latest

# Compressed and uncompressed layer bytes of the layout (the same image).
read -r compressed uncompressed < <(python3 - "$images/big" <<'EOF'
import gzip, json, os, sys
layout = sys.argv[1]
blob = lambda d: os.path.join(layout, "blobs", "sha256", d.split(":")[1])
index = json.load(open(os.path.join(layout, "index.json")))
manifest = json.load(open(blob(index["manifests"][0]["digest"])))
comp = sum(l["size"] for l in manifest["layers"])
raw = sum(len(gzip.open(blob(l["digest"])).read()) for l in manifest["layers"])
print(comp, raw)
EOF
)

now_ms() {
	echo $(($(date +%s%N) / 1000000))
}

# Runs a command quietly; prints its wall time in ms, or fails loudly.
timed() { # LOG COMMAND...
	local log=$1 start end
	shift
	start=$(now_ms)
	if ! "$@" >"$log" 2>&1 </dev/null; then
		echo "$0: failed: $*" >&2
		tail -n 5 "$log" >&2
		return 1
	fi
	end=$(now_ms)
	echo $((end - start))
}

declare -a t_husk t_skopeo t_umoci t_peer t_husk_unpack
for round in $(seq 1 "$rounds"); do
	r=$work/round-$round
	mkdir -p "$r"
	store=$r/store
	# Alternate who goes first so that cache warmth spreads evenly.
	order="husk peer"
	[ $((round % 2)) -eq 0 ] && order="peer husk"
	for who in $order; do
		case $who in
		husk)
			mkdir -p "$store"
			t=$(timed "$r/husk.log" "$husk" --root "$r/rt" image --root "$store" pull "$ref") || exit 1
			t_husk+=("$t")
			# Unpack alone: blobs stay, snapshots go; the pull re-unpacks.
			rm -rf "$store/snapshots"
			t=$(timed "$r/husk2.log" "$husk" --root "$r/rt" image --root "$store" pull "$ref") || exit 1
			t_husk_unpack+=("$t")
			;;
		peer)
			t1=$(timed "$r/skopeo.log" skopeo --insecure-policy copy --quiet --src-tls-verify=false \
				"docker://$ref" "oci:$r/oci:latest") || exit 1
			t2=$(timed "$r/umoci.log" umoci unpack --image "$r/oci:latest" "$r/bundle") || exit 1
			t_skopeo+=("$t1")
			t_umoci+=("$t2")
			t_peer+=($((t1 + t2)))
			;;
		esac
	done
	rm -rf --one-file-system "$r"
done

median() { # VALUES...
	printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

m_husk=$(median "${t_husk[@]}")
m_skopeo=$(median "${t_skopeo[@]}")
m_umoci=$(median "${t_umoci[@]}")
m_peer=$(median "${t_peer[@]}")
m_husk_unpack=$(median "${t_husk_unpack[@]}")
# husk's download phase: the full pull less the re-pull that only unpacks
# (both fetch the manifest), per round, against skopeo's whole copy.
t_husk_fetch=()
for i in "${!t_husk[@]}"; do
	t_husk_fetch+=($((t_husk[i] - t_husk_unpack[i])))
done
m_husk_fetch=$(median "${t_husk_fetch[@]}")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }'; }
mbps() { awk -v bytes="$1" -v ms="$2" 'BEGIN { printf "%.0f", (ms > 0) ? bytes / 1e6 / (ms / 1000) : 0 }'; }

echo "## Pull benchmark: test/big ($((compressed / 1000000)) MB compressed, $((uncompressed / 1000000)) MB unpacked, 5 layers), $rounds rounds, medians"
echo
echo "| what | husk | skopeo + umoci | ratio peer/husk |"
echo "|---|---:|---:|---:|"
echo "| pull + unpack, empty store (ms) | $m_husk | $m_peer (skopeo $m_skopeo + umoci $m_umoci) | $(ratio "$m_peer" "$m_husk") |"
echo "| download phase (ms; husk: pull less unpack alone, skopeo: its copy) | $m_husk_fetch | $m_skopeo | $(ratio "$m_skopeo" "$m_husk_fetch") |"
echo "| unpack alone (ms) | $m_husk_unpack | $m_umoci | $(ratio "$m_umoci" "$m_husk_unpack") |"
echo "| unpack alone (MB/s, unpacked bytes) | $(mbps "$uncompressed" "$m_husk_unpack") | $(mbps "$uncompressed" "$m_umoci") | |"
echo
echo "rounds (ms): husk pull ${t_husk[*]}; skopeo ${t_skopeo[*]}; umoci ${t_umoci[*]}; husk unpack ${t_husk_unpack[*]}; husk download ${t_husk_fetch[*]}"
echo "husk's unpack-alone figure includes one manifest request to the local registry; husk fsyncs each blob before naming it (one directory sync per image) and syncs each snapshot (syncfs) before publishing it; skopeo syncs its blobs too (fsync/fdatasync), umoci makes no fsync calls (checked with strace)."
# Machine lines for hack/bench-table.sh (ratio peer/husk: higher is better).
echo "BENCH|pull + unpack, $((compressed / 1000000)) MB 5-layer image, empty store, peer/husk (median of $rounds)|$m_husk ms|skopeo+umoci $m_peer ms|$(ratio "$m_peer" "$m_husk")|>= 2"
echo "BENCH|pull download phase, peer/husk (median of $rounds)|$m_husk_fetch ms|skopeo copy $m_skopeo ms|$(ratio "$m_skopeo" "$m_husk_fetch")|-"
echo "BENCH|unpack alone, peer/husk (median of $rounds)|$m_husk_unpack ms|umoci unpack $m_umoci ms|$(ratio "$m_umoci" "$m_husk_unpack")|-"
