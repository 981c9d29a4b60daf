#!/usr/bin/env bash
# Attacks on huskd's streaming and metrics ports (issue 26: SIGPIPE from a
# peer that vanishes, slowloris, a metrics endpoint held by idle
# connections), performed over loopback by test/e2e/cri_net_attacks.py
# against a huskd of its own.  cri_lib.sh's trap removes what the test made.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

if ! command -v setpriv >/dev/null; then
	echo "not ok - setpriv(1) is installed (util-linux), to attack as user nobody"
	finish
fi
cri_setup netattack --registry
cri_run_py cri_net_attacks.py "$HUSKD" "$ADDR" "$E2E"
finish
