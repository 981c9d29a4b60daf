#!/usr/bin/env bash
# hack/gpu-check.sh — the check run on machines with a real NVIDIA GPU —
# as a dry run against hack/fake-nvidia.sh's fake driver tree
# (FAKE_NVIDIA=1), so that the script itself works when a GPU machine is
# at hand: generate, list, an image made offline, `husk container run
# --gpus all`, and huskd (through husk's CRI client) with a CDI annotation and with
# NVIDIA_VISIBLE_DEVICES. Its TAP lines are passed on as "gpu-check: ...".
. "$(dirname "$0")/lib.sh"
require_runtime

t_gpu_check() {
	local line seen=0
	while IFS= read -r line; do
		case $line in
		"ok - "*)
			ok "gpu-check: ${line#ok - }"
			seen=$((seen + 1))
			;;
		"not ok - "*)
			not_ok "gpu-check: ${line#not ok - }"
			seen=$((seen + 1))
			;;
		*) echo "$line" ;;
		esac
	done < <(FAKE_NVIDIA=1 "$REPO_DIR/hack/gpu-check.sh" "$BUILD_DIR" 2>&1)
	assert_true "gpu-check ran its checks (saw $seen)" test "$seen" -ge 6
}

run_test t_gpu_check
finish
