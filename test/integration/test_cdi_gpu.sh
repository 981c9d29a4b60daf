#!/usr/bin/env bash
# Fake GPUs end to end (issue 15's "done when"): a fake driver tree
# (hack/fake-nvidia.sh, 2 GPUs, 2 MIG devices on GPU 0), a spec made from it
# by `husk cdi generate nvidia` whose createContainer hooks run this build's
# husk, `husk cdi list` over it; then containers given GPUs through every
# source: huskd's CDI_devices, a cdi.k8s.io annotation,
# NVIDIA_VISIBLE_DEVICES=<UUID> and =all, a MIG device (test/e2e/cri_cdi_gpu.py),
# and `husk container run --gpus all` / `--device nvidia.com/gpu=0`.  Each
# sees exactly its nodes with the fake tree's numbers, opens them as far as
# the absent driver (ENXIO) while a node that was not injected, made with
# mknod in its /dev, fails EPERM; the hooks made libcuda.so.1, ld.so.cache
# and the ld.so.conf.d file; the fake nvidia-smi runs.  Unknown names are
# refused without leftovers.  The trap removes the containers, huskd, the
# fake tree, mounts, network and temp dirs, even on failure.
# Run alone: BUILD_DIR=build ./test/integration/test_cdi_gpu.sh
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

HUSK=${HUSK:-$BUILD_DIR/husk}
HUSK_TIMEOUT=${HUSK_CONTAINER_TIMEOUT:-60}
LIBDIR=/usr/lib/x86_64-linux-gnu
VERSION=550.54.14

cri_setup cdigpu --registry
NV=$E2E/nv
SPECS=$E2E/cdi
STORE=$E2E/store
CROOT=$E2E/husk-root

gpu_cleanup() {
	local id
	if [ -d "$STORE" ]; then
		for id in $(timeout 20 "$HUSK" --root "$CROOT" container --root "$STORE" ls -q 2>/dev/null); do
			timeout 20 "$HUSK" --root "$CROOT" container --root "$STORE" rm -f "$id" >/dev/null 2>&1
		done
	fi
	[ -d "$NV" ] && "$REPO_DIR/hack/fake-nvidia.sh" remove "$NV"
	return 0
}
trap 'gpu_cleanup; cri_stop_all; cleanup_all' EXIT

# Sets OUT, ERR and RC (the unpack progress lines left out of ERR).
ctr() { # ARGS...: husk container --root $STORE ARGS...
	OUT=$(timeout -k 5 "$HUSK_TIMEOUT" "$HUSK" --root "$CROOT" container --root "$STORE" "$@" 2>"$E2E/ctr.err" </dev/null)
	RC=$?
	ERR=$(grep -v -E '^(layer [0-9]+/[0-9]+ |unpacking [0-9]+ layers)' "$E2E/ctr.err")
}

host_node() { # CONTAINER-PATH: `PATH MAJOR:MINOR` of the fake tree's node, as stat %t:%T prints it
	printf '%s %s\n' "$1" "$(stat -c '%t:%T' "$NV$1")"
}

expected_nodes() { # CONTAINER-PATH...: those and the control nodes, sorted, one line
	local p
	for p in "$@" /dev/nvidiactl /dev/nvidia-modeset /dev/nvidia-uvm /dev/nvidia-uvm-tools; do
		host_node "$p"
	done | sort | paste -sd' '
}

# shellcheck disable=SC2016 # the container's shell expands $f
NODES='for f in /dev/nvidia* /dev/nvidia-caps/*; do [ -c $f ] && stat -c "%n %t:%T" $f; done | sort | paste -sd" "'
PROBE='mknod /dev/nv-probe c 195 1 && echo made && cat /dev/nv-probe 2>&1; rm -f /dev/nv-probe'
HOOKS="readlink $LIBDIR/libcuda.so.1; grep -c libcuda.so.1 /etc/ld.so.cache; cat /etc/ld.so.conf.d/00-husk-cdi.conf"

t_generate() {
	"$REPO_DIR/hack/fake-nvidia.sh" create "$NV" 2 >"$E2E/fake.log" 2>&1
	assert_rc "hack/fake-nvidia.sh create: a fake driver tree of 2 GPUs" 0 $? || {
		diag "$(cat "$E2E/fake.log")"
		return 1
	}
	mkdir -p "$SPECS"
	OUT=$("$HUSK" cdi generate nvidia --driver-root "$NV/driver" --dev-root "$NV" --proc-root "$NV/proc" \
		--sys-root "$NV/sys" --output "$SPECS/nvidia.yaml" 2>"$E2E/gen.err")
	RC=$?
	ERR=$(cat "$E2E/gen.err")
	assert_rc "husk cdi generate nvidia --output $SPECS/nvidia.yaml: rc 0" 0 "$RC"
	assert_eq "generate: the hooks run this build's husk" "2" \
		"$(grep -c "path: $(realpath "$HUSK")\$" "$SPECS/nvidia.yaml")"
	local list uuid0 uuid1
	list=$("$HUSK" cdi list --spec-dir "$SPECS" 2>"$E2E/list.err")
	assert_rc "husk cdi list --spec-dir: rc 0" 0 $?
	assert_eq "husk cdi list: no spec error" "" "$(cat "$E2E/list.err")"
	uuid0=$(sed -n 's/^GPU UUID:[[:space:]]*//p' "$NV"/proc/driver/nvidia/gpus/*/information | sed -n 1p)
	uuid1=$(sed -n 's/^GPU UUID:[[:space:]]*//p' "$NV"/proc/driver/nvidia/gpus/*/information | sed -n 2p)
	assert_eq "husk cdi list: 0, 1, both UUIDs, MIG 0:0 and 0:1, all; each from nvidia.yaml" \
		"$(printf 'nvidia.com/gpu=%s\n' 0 0:0 0:1 1 "$uuid0" "$uuid1" all | sort |
			sed "s|\$| $SPECS/nvidia.yaml|" | paste -sd' ')" \
		"$(printf '%s\n' "$list" | tail -n +2 | awk '{ print $1, $2 }' | sort | paste -sd' ')"
}

t_huskd() {
	echo "{\"cni_conf_dir\": \"$E2E/net.d\", \"cdi_spec_dirs\": [\"$SPECS\"]}" >"$E2E/config.json"
	cri_run_py cri_cdi_gpu.py "$HUSKD" "$ADDR" "$E2E" "$NV"
}

t_container_run() {
	local img=$ADDR/test/busybox:latest
	mkdir -p "$STORE" "$CROOT"
	ctr run --rm --network none -u 0 --cdi-spec-dir "$SPECS" --gpus all "$img" \
		"$NODES; $PROBE; mknod /dev/nv2 c 195 2 && cat /dev/nv2 2>&1; $HOOKS; true"
	assert_rc "husk container run --gpus all: rc 0" 0 "$RC" || diag "$ERR"
	assert_eq "run --gpus all: both GPUs, the MIG caps and the control nodes with the fake tree's numbers" \
		"$(expected_nodes /dev/nvidia0 /dev/nvidia1 /dev/nvidia-caps/nvidia-cap12 /dev/nvidia-caps/nvidia-cap13 \
			/dev/nvidia-caps/nvidia-cap21 /dev/nvidia-caps/nvidia-cap22)" \
		"$(printf '%s\n' "$OUT" | head -n 1)"
	assert_contains "run --gpus all: the injected 195:1, made again by mknod in /dev, opens as far as the driver (ENXIO)" \
		"$OUT" "'/dev/nv-probe': No such device or address"
	assert_contains "run --gpus all: 195:2 (no such GPU), made by mknod in /dev: open fails EPERM" \
		"$OUT" "'/dev/nv2': Operation not permitted"
	assert_contains "run --gpus all: the hooks made libcuda.so.1, ld.so.cache names it, 00-husk-cdi.conf lists $LIBDIR" \
		"$(printf '%s\n' "$OUT" | tail -n 3 | paste -sd' ')" "libcuda.so.$VERSION 1 $LIBDIR"

	ctr run --rm --network none -u 0 --cdi-spec-dir "$SPECS" --device nvidia.com/gpu=0 "$img" \
		"$NODES; $PROBE; cat /dev/nvidia0 2>&1; $HOOKS; /usr/bin/nvidia-smi -L | head -n 1; true"
	assert_rc "husk container run --device nvidia.com/gpu=0: rc 0" 0 "$RC" || diag "$ERR"
	local -a out
	mapfile -t out <<<"$OUT"
	assert_eq "run --device nvidia.com/gpu=0: /dev/nvidia0 and the control nodes, no nvidia1" \
		"$(expected_nodes /dev/nvidia0)" "${out[0]}"
	assert_eq "run --device nvidia.com/gpu=0: 195:1, not injected, made by mknod in /dev: open fails EPERM" \
		"made cat: can't open '/dev/nv-probe': Operation not permitted" "${out[1]} ${out[2]}"
	assert_eq "run --device nvidia.com/gpu=0: /dev/nvidia0 opens as far as the absent driver (ENXIO)" \
		"cat: can't open '/dev/nvidia0': No such device or address" "${out[3]}"
	assert_eq "run --device nvidia.com/gpu=0: hooks: libcuda.so.1, ld.so.cache, 00-husk-cdi.conf" \
		"libcuda.so.$VERSION 1 $LIBDIR" "${out[4]} ${out[5]} ${out[6]}"
	assert_match "run --device nvidia.com/gpu=0: the fake nvidia-smi runs" "${out[7]:-}" \
		'^GPU 0: Fake H100 80GB HBM3 \(UUID: GPU-'
}

t_container_refused() {
	local before img=$ADDR/test/busybox:latest
	before=$(ls -A "$STORE/containers" "$CROOT" 2>/dev/null)
	ctr run --rm --network none -u 0 --cdi-spec-dir "$SPECS" --device nvidia.com/gpu=7 "$img" true
	assert_fails "husk container run --device nvidia.com/gpu=7: refused" "$RC"
	assert_contains "--device nvidia.com/gpu=7: the error names it" "$ERR" "nvidia.com/gpu=7"
	assert_eq "--device nvidia.com/gpu=7: one line" 1 "$(printf '%s\n' "$ERR" | grep -c .)"
	assert_eq "--device nvidia.com/gpu=7: no container or state left" "$before" \
		"$(ls -A "$STORE/containers" "$CROOT" 2>/dev/null)"
}

run_test t_generate
if [ -s "$SPECS/nvidia.yaml" ]; then
	t_huskd
	run_test t_container_run
	run_test t_container_refused
fi
finish
