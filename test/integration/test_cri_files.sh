#!/usr/bin/env bash
# huskd against files in the wrong place, driven by test/e2e/cri_files.py:
# a --root made 0755 by hand, a NUL inside log_path, symlinks planted in
# the pod's log dir (the log file itself, a directory on its way).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cri_lib.sh"

cri_setup files --registry
cri_run_py cri_files.py "$HUSKD" "$ADDR" "$E2E"
finish
