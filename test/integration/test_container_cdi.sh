#!/usr/bin/env bash
# CDI devices through `husk container run` (no daemon): --device
# vendor/class=name, --gpus all|N|device=..., -e NVIDIA_VISIBLE_DEVICES and
# an image's Env (--nvidia-env), against a CDI spec in a temp dir
# (--cdi-spec-dir) whose fake GPUs are char nodes 195:N made here with
# mknod.  Inside the container: the injected nodes exist with their
# major:minor and open as far as the absent driver (ENXIO), while a node
# that was not injected (made with mknod inside) fails with EPERM from the
# device cgroup.  An unknown device is one error that leaves nothing.  The
# registry, containers, mounts and temp dirs go in the trap, even on failure.
# Run alone: ./test/integration/test_container_cdi.sh   (HUSK=... to override)
. "$(dirname "$0")/lib.sh"

HUSK=${HUSK:-$BUILD_DIR/husk}
IMAGES=${HUSK_TEST_IMAGES:-$CACHE_DIR/test-images}
HUSK_TIMEOUT=${HUSK_CONTAINER_TIMEOUT:-60}
REGDIR=$WORK/registry
STORE=$WORK/store
SPECS=$WORK/cdi
DEV=$WORK/dev
UUID1=GPU-11111111-2222-3333-4444-555555555555

# Sets OUT, ERR and RC (the unpack progress lines left out of ERR).
ctr() { # ARGS...: husk container --root $STORE ARGS...
	OUT=$(timeout -k 5 "$HUSK_TIMEOUT" "$HUSK" --root "$ROOT" container --root "$STORE" "$@" 2>"$WORK/err" </dev/null)
	RC=$?
	ERR=$(grep -v -E '^([0-9a-f]{12}  (done|already exists)|unpacking [0-9]+ layers?$)' "$WORK/err")
}

# The run of `husk container run --rm -u 0 --cdi-spec-dir $SPECS ARGS`
# whose command lists the container's /dev/nvidia* as NAME MAJOR:MINOR.
nv_run() { # ARGS... (options, then the image)
	ctr run --rm --network none -u 0 --cdi-spec-dir "$SPECS" "$@" \
		'for f in /dev/nvidia*; do [ -e $f ] && stat -c "%n %t:%T" $f; done; true'
	OUT=$(printf '%s' "$OUT" | paste -sd' ')
}

store_snapshot() { # what a failed run must not leave: containers, runtime state, mounts
	{
		ls -A "$STORE/containers" 2>/dev/null | sed 's/^/containers: /'
		ls -A "$ROOT" 2>/dev/null | sed 's/^/runtime: /'
		awk '{ print $5 }' /proc/self/mountinfo | grep -F -- "$STORE/containers" || true
	} | sort
}

global_cleanup() {
	local id
	for id in $("$HUSK" --root "$ROOT" container --root "$STORE" ls -a -q 2>/dev/null); do
		timeout 20 "$HUSK" --root "$ROOT" container --root "$STORE" rm -f "$id" >/dev/null 2>&1
	done
	"$REPO_DIR/hack/registry.sh" stop "$REGDIR" >/dev/null 2>&1
	return 0
}
trap 'global_cleanup; cleanup_all' EXIT

write_spec() { # two GPUs, GPU 1 also by UUID, all; nvidiactl for each
	mkdir -p "$SPECS" "$DEV"
	mknod "$DEV/nvidia0" c 195 0
	mknod "$DEV/nvidia1" c 195 1
	mknod "$DEV/nvidia2" c 195 2
	mknod "$DEV/nvidiactl" c 195 255
	cat >"$SPECS/nvidia.yaml" <<EOF
cdiVersion: "0.6.0"
kind: nvidia.com/gpu
containerEdits:
  deviceNodes:
    - {path: /dev/nvidiactl, hostPath: $DEV/nvidiactl}
devices:
  - name: "0"
    containerEdits:
      deviceNodes: [{path: /dev/nvidia0, hostPath: $DEV/nvidia0}]
  - name: "1"
    containerEdits:
      deviceNodes: [{path: /dev/nvidia1, hostPath: $DEV/nvidia1}]
  - name: $UUID1
    containerEdits:
      deviceNodes: [{path: /dev/nvidia1, hostPath: $DEV/nvidia1}]
  - name: all
    containerEdits:
      deviceNodes:
        - {path: /dev/nvidia0, hostPath: $DEV/nvidia0}
        - {path: /dev/nvidia1, hostPath: $DEV/nvidia1}
EOF
}

setup() {
	[ -x "$HUSK" ] || {
		echo "not ok - husk $HUSK is not an executable (make build, or set HUSK)"
		exit 1
	}
	start_test_registry "$REGDIR" busybox
	IMG=$REG/test/busybox:latest
	NV_IMG=$REG/test/busybox-nvidia:latest
	if ! python3 "$REPO_DIR/test/e2e/image_with_env.py" "$WORK" "$IMG" "$NV_IMG" NVIDIA_VISIBLE_DEVICES=1 \
		>>"$WORK/push.log" 2>&1; then
		echo "not ok - push $NV_IMG to $REG"
		diag "$(tail -n 15 "$WORK/push.log")"
		exit 1
	fi
	mkdir -p "$STORE"
	write_spec
	echo "# $TEST_NAME: husk $HUSK, runtime root $ROOT, store $STORE, registry $REG"
}

t_device_cdi() {
	nv_run --device nvidia.com/gpu=0 "$IMG"
	assert_rc "run --device nvidia.com/gpu=0: rc 0" 0 "$RC" || diag "$ERR"
	assert_eq "run --device nvidia.com/gpu=0: /dev/nvidia0 195:0 and the spec's nvidiactl 195:255" \
		"/dev/nvidia0 c3:0 /dev/nvidiactl c3:ff" "$OUT"
	ctr run --rm --network none -u 0 --cdi-spec-dir "$SPECS" --device nvidia.com/gpu=0 "$IMG" \
		'cat /dev/nvidia0 2>&1; mknod /tmp/nv1 c 195 1 && cat /tmp/nv1 2>&1; true'
	assert_contains "the injected node opens as far as the absent driver (ENXIO)" "$OUT" \
		"'/dev/nvidia0': No such device or address"
	assert_contains "195:1, not injected, made by mknod inside: open fails EPERM (device cgroup)" "$OUT" \
		"'/tmp/nv1': Operation not permitted"
	ctr run --rm --network none -u 0 --cdi-spec-dir "$SPECS" --device nvidia.com/gpu=1 --device "$DEV/nvidia2" "$IMG" \
		"stat -c '%n %t:%T' /dev/nvidia1 $DEV/nvidia2; test -e /dev/nvidia0 || echo no-nvidia0"
	assert_eq "--device nvidia.com/gpu=1 and --device PATH (a plain host node, kept at its path) together" \
		"/dev/nvidia1 c3:1 $DEV/nvidia2 c3:2 no-nvidia0" "$(printf '%s' "$OUT" | paste -sd' ')"
}

t_gpus() {
	nv_run --gpus all "$IMG"
	assert_eq "run --gpus all: both GPUs" "/dev/nvidia0 c3:0 /dev/nvidia1 c3:1 /dev/nvidiactl c3:ff" "$OUT"
	nv_run --gpus 1 "$IMG"
	assert_eq "run --gpus 1: the first GPU by index" "/dev/nvidia0 c3:0 /dev/nvidiactl c3:ff" "$OUT"
	nv_run --gpus 2 "$IMG"
	assert_eq "run --gpus 2: both" "/dev/nvidia0 c3:0 /dev/nvidia1 c3:1 /dev/nvidiactl c3:ff" "$OUT"
	nv_run --gpus device=1 "$IMG"
	assert_eq "run --gpus device=1" "/dev/nvidia1 c3:1 /dev/nvidiactl c3:ff" "$OUT"
	nv_run --gpus count=1,capabilities=utility "$IMG"
	assert_eq "run --gpus count=1,capabilities=utility (docker's CSV form)" "/dev/nvidia0 c3:0 /dev/nvidiactl c3:ff" "$OUT"
	nv_run --gpus "\"device=$UUID1\"" "$IMG"
	assert_eq "run --gpus '\"device=UUID\"' (docker's quoting)" "/dev/nvidia1 c3:1 /dev/nvidiactl c3:ff" "$OUT"
	nv_run --gpus device=0 --device nvidia.com/gpu=0 -e NVIDIA_VISIBLE_DEVICES=0 "$IMG"
	assert_eq "the same GPU by --gpus, --device and the env: injected once" \
		"/dev/nvidia0 c3:0 /dev/nvidiactl c3:ff" "$OUT"
}

t_env() {
	nv_run -e NVIDIA_VISIBLE_DEVICES=1 "$IMG"
	assert_eq "run -e NVIDIA_VISIBLE_DEVICES=1" "/dev/nvidia1 c3:1 /dev/nvidiactl c3:ff" "$OUT"
	nv_run -e NVIDIA_VISIBLE_DEVICES=void "$IMG"
	assert_eq "run -e NVIDIA_VISIBLE_DEVICES=void: no GPU" "" "$OUT"
	nv_run -e NVIDIA_VISIBLE_DEVICES=0 --nvidia-env off "$IMG"
	assert_eq "run --nvidia-env off: the env is ignored" "" "$OUT"
	nv_run "$NV_IMG"
	assert_eq "an image with NVIDIA_VISIBLE_DEVICES=1 in its Env: ignored by default" "" "$OUT"
	nv_run --nvidia-env image-too "$NV_IMG"
	assert_eq "--nvidia-env image-too: the image's NVIDIA_VISIBLE_DEVICES=1 counts" \
		"/dev/nvidia1 c3:1 /dev/nvidiactl c3:ff" "$OUT"
	nv_run --nvidia-env image-too -e NVIDIA_VISIBLE_DEVICES=none "$NV_IMG"
	assert_eq "--nvidia-env image-too: -e NVIDIA_VISIBLE_DEVICES=none wins over the image's" "" "$OUT"
	nv_run "$IMG"
	assert_eq "no device asked for: no /dev/nvidia*" "" "$OUT"
}

refused() { # NAME NEEDLE ARGS...: the run fails with one line naming NEEDLE, leaving nothing
	local name=$1 needle=$2 before
	shift 2
	before=$(store_snapshot)
	ctr run --rm --network none -u 0 "$@" true
	assert_fails "$name: refused" "$RC"
	diag "$ERR"
	assert_contains "$name: the error names $needle" "$ERR" "$needle"
	assert_eq "$name: one line" 1 "$(printf '%s\n' "$ERR" | grep -c .)"
	assert_eq "$name: no container, state dir or mount left" "$before" "$(store_snapshot)"
}

t_refused() {
	refused "--device nvidia.com/gpu=7" "nvidia.com/gpu=7" --cdi-spec-dir "$SPECS" --device nvidia.com/gpu=7 "$IMG"
	refused "--device nvidia.com/gpu=0 in a dir without specs: the dir is named" \
		"nvidia.com/gpu=0: no such device in the CDI specs in $WORK/no-such-dir" \
		--cdi-spec-dir "$WORK/no-such-dir" --device nvidia.com/gpu=0 "$IMG"
	refused "--gpus 3 of 2 GPUs" "--gpus 3" --cdi-spec-dir "$SPECS" --gpus 3 "$IMG"
	refused "--gpus device=5" "nvidia.com/gpu=5" --cdi-spec-dir "$SPECS" --gpus device=5 "$IMG"
	refused "--gpus all,capabilities=graphics (not in husk's spec)" "capability \`graphics\`" \
		--cdi-spec-dir "$SPECS" --gpus all,capabilities=graphics "$IMG"
	refused "-e NVIDIA_VISIBLE_DEVICES=0,7 (found after the rootfs is made)" "GPU \`7\`" \
		--cdi-spec-dir "$SPECS" -e NVIDIA_VISIBLE_DEVICES=0,7 "$IMG"
	refused "--nvidia-env bogus" "--nvidia-env \`bogus\`" --nvidia-env bogus "$IMG"
	refused "--cdi-spec-dir relative" "--cdi-spec-dir \`cdi\`" --cdi-spec-dir cdi "$IMG"
}

setup
for t in t_device_cdi t_gpus t_env t_refused; do
	run_test "$t"
done
finish
