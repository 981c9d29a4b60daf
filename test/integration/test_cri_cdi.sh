#!/usr/bin/env bash
# CDI device injection through huskd's CreateContainer, driven by
# test/e2e/cri_cdi.py: CDI spec dirs of the run's own (a JSON and a YAML
# spec of fake devices backed by /dev/null and /dev/zero), containers
# asking for devices through CDI_devices and cdi.k8s.io annotations, an
# unknown and a malformed name refused without leftovers, and a spec
# changed on disk picked up without a restart; NVIDIA_VISIBLE_DEVICES
# against a spec of fake GPUs (char nodes 195:N under $E2E/fakedev) with
# each nvidia_visible_devices mode (huskd restarted with the setting), an
# image with NVIDIA_VISIBLE_DEVICES in its Env (test/e2e/image_with_env.py),
# verbose Status and `cri_cli.py info`, and cdi_numa_align.  cri_lib.sh's trap
# removes what the test made, even when it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup cdi --registry
mkdir -p "$E2E/cdi-etc" "$E2E/cdi-run"
echo "{\"cni_conf_dir\": \"$E2E/net.d\", \"cdi_spec_dirs\": [\"$E2E/cdi-etc\", \"$E2E/cdi-run\"]}" >"$E2E/config.json"
cri_run_py cri_cdi.py "$HUSKD" "$ADDR" "$E2E"
finish
