#!/usr/bin/env bash
# gVisor's runsc as a runtime handler that owns the pod ("sandbox":
# "runtime" in huskd.json), end to end over gRPC and SPDY
# (test/e2e/cri_gvisor.py): the pod's infra container and its app
# containers inside one runsc sandbox, networking, volumes, exec, logs,
# exit codes, stats, a huskd restart, what the host sees, bad input, and
# nothing left behind.  cri_lib.sh's trap removes what the test made; runsc
# state, sandboxes and gofers live under $E2E and die with it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

RUNSC=$(command -v runsc || true)
if [ -z "$RUNSC" ]; then
	skip "gVisor pods" "runsc is not installed (Debian runsc; hack/deps.sh test installs it)"
	finish
fi
cri_setup gvisor --portmap --registry

# huskd.json's runtime entry: bad values are one line naming the key.
bad_config() { # JSON EXPECTED
	local out
	echo "$1" >"$E2E/bad.json"
	if out=$("$HUSKD" --config "$E2E/bad.json" --print-config 2>&1); then
		not_ok "huskd refuses $1" "$out"
	elif [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && [[ "$out" == *"$2"* ]]; then
		ok "huskd.json $1: one line naming $2"
	else
		not_ok "huskd.json $1: one line naming $2" "$out"
	fi
}
bad_config '{"runtimes": {"runsc": {"path": "/usr/bin/runsc", "sandbox": "pod"}}}' 'runtimes.runsc.sandbox: must be "husk" or "runtime"'
bad_config '{"runtimes": {"runsc": {"path": "/usr/bin/runsc", "args": "--platform=ptrace"}}}' 'runtimes.runsc.args: must be an array'
bad_config '{"runtimes": {"runsc": {"path": "/usr/bin/runsc", "args": ["platform=ptrace"]}}}' 'runtimes.runsc.args[0]: must be a flag'
bad_config '{"runtimes": {"runsc": {"path": "/usr/bin/runsc", "sandox": "runtime"}}}' 'runtimes.runsc.sandox: unknown key'

# runsc-crash: runsc whose `start` of the pod's infra container dies (after
# `create` made the sandbox and its gofer), as a crashing runsc would.
cat >"$E2E/runsc-crash" <<SH
#!/bin/sh
for a; do
	case \$a in start) echo "runsc-crash: the sandbox died at start" >&2; kill -9 \$\$ ;; esac
done
exec "$RUNSC" "\$@"
SH
chmod 0755 "$E2E/runsc-crash"
"$PY" - "$E2E" "$RUNSC" <<'PY'
import json, sys
e2e, runsc = sys.argv[1], sys.argv[2]
path = e2e + "/config.json"
c = json.load(open(path))
c["runtimes"] = {
    "runsc": {"path": runsc, "root": e2e + "/state/runsc", "sandbox": "runtime",
              "args": ["--platform=ptrace", "--network=host"]},
    "runsc-missing": {"path": e2e + "/no-such-runsc", "root": e2e + "/state/missing", "sandbox": "runtime"},
    "runsc-crash": {"path": e2e + "/runsc-crash", "root": e2e + "/state/runsc-crash", "sandbox": "runtime",
                    "args": ["--platform=ptrace", "--network=host"]},
}
json.dump(c, open(path, "w"))
PY
cri_run_py cri_gvisor.py "$HUSKD" "$ADDR" "$E2E" "$RUNSC"
finish
