#!/usr/bin/env bash
# ExecSync from huskd itself (the husk handler's in-process exec) applies
# what `husk exec` applies, driven by test/e2e/cri_exec_probe.py: a
# confined busybox container (seccomp, no_new_privs, capabilities, user,
# groups, env, cwd, oom_score_adj) whose exec'd processes match its init,
# failures, the pid file, the sealed huskd.  cri_lib.sh's trap removes what
# the test made, even when it fails.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup exec-probe --registry
cri_run_py cri_exec_probe.py "$HUSKD" "$ADDR" "$E2E"
finish
