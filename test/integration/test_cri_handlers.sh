#!/usr/bin/env bash
# Every runtime handler huskd lists, end to end (test/e2e/cri_handlers.py):
# exec with a tty (and a resize), exec without one and attach with a tty
# through husk and runc (and crun where it can run here); a handler that
# cannot run on this host (a fake runtime whose create fails, and crun
# 1.8.1 on a hybrid cgroup host) is named at start with its reason and
# RunPodSandbox / CreateContainer for it fail with that reason.
# cri_lib.sh's trap removes what the test made.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

RUNC=$(command -v runc || true)
if [ -z "$RUNC" ]; then
	echo "not ok - runc is installed (Debian runc), the second handler"
	finish
fi
cri_setup handlers --registry
# broken: every create fails as a runtime that cannot run here does.
# flaky: runc, until $E2E/flaky-broken exists.
cat >"$E2E/broken-runtime" <<'SH'
#!/bin/sh
for a; do
	case $a in
	features) echo "broken-runtime: unknown command features" >&2; exit 1 ;;
	create) echo "broken-runtime: cgroup hierarchy is not writable here" >&2; exit 1 ;;
	esac
done
exit 0
SH
cat >"$E2E/flaky-runtime" <<SH
#!/bin/sh
if [ -e "$E2E/flaky-broken" ]; then
	for a; do
		case \$a in create) echo "flaky-runtime: broken since the last start" >&2; exit 1 ;; esac
	done
fi
exec "$RUNC" "\$@"
SH
chmod 0755 "$E2E/broken-runtime" "$E2E/flaky-runtime"
"$PY" - "$E2E" <<'PY'
import json, sys
e2e = sys.argv[1]
path = e2e + "/config.json"
c = json.load(open(path))
c["runtimes"] = {"broken": {"path": e2e + "/broken-runtime", "root": e2e + "/state/broken"},
                 "flaky": {"path": e2e + "/flaky-runtime", "root": e2e + "/state/flaky"}}
json.dump(c, open(path, "w"))
PY
cri_run_py cri_handlers.py "$HUSKD" "$ADDR" "$E2E"
finish
