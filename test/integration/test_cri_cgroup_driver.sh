#!/usr/bin/env bash
# huskd's cgroup driver end to end, driven by test/e2e/cri_cgroup_driver.py:
# RuntimeConfig per cgroup_driver, systemd slices and cgroupfs paths mapped
# to cgroup directories with the container's limits in every hierarchy,
# mismatched parents refused, and the parents husk made removed with the
# last pod (ones it did not make left alone); then a bad cgroup_driver in
# the config file.  cri_lib.sh's trap removes what the test made, even
# when it fails; the Python script removes the cgroups it named.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup cgdrv --registry
cri_run_py cri_cgroup_driver.py "$HUSKD" "$ADDR" "$E2E"

echo '{"cgroup_driver": "upstart"}' >"$E2E/bad.json"
out=$(timeout 20 "$HUSKD" --listen "unix://$E2E/bad.sock" --root "$E2E/bad-root" --state "$E2E/bad-state" \
	--config "$E2E/bad.json" 2>&1)
rc=$?
if [ $rc -ne 0 ] && [[ $out == *"cgroup_driver: must be cgroupfs or systemd, not \`upstart\`"* ]]; then
	ok "a bad cgroup_driver: huskd refuses to start, naming the key and the value"
else
	not_ok "a bad cgroup_driver: huskd refuses to start, naming the key and the value" "rc $rc: $out"
fi
finish
